use serde_json::json;
use zi_protocol::message::{AssistantMessage, StopReason as ZiStop};

use super::*;
use crate::jsonrpc::INTERNAL_ERROR;

fn assistant(stop: ZiStop, error: Option<&str>) -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: Default::default(),
        stop_reason: stop,
        error_message: error.map(str::to_string),
        response_id: None,
        timestamp: 0,
    }
}

fn ids(answers: &[Answer]) -> Vec<Value> {
    answers.iter().map(|(id, _)| id.clone()).collect()
}

#[test]
fn one_prompt_answers_when_its_run_settles() {
    let mut turns = Turns::default();
    turns.admitting(json!(1));
    turns.admitted(&json!(1));
    assert!(turns.claim_user_message(), "its own message is not echoed");
    assert!(!turns.claim_user_message(), "another user message is");
    turns.assistant_ended(&assistant(ZiStop::Stop, None));
    let (answers, stranded) = turns.settled();
    assert_eq!(answers, vec![(json!(1), Ok(StopReason::EndTurn))]);
    assert!(!stranded);
    assert!(turns.is_empty());
}

#[test]
fn a_joined_prompt_ends_the_previous_one_when_it_is_delivered() {
    let mut turns = Turns::default();
    turns.admitting(json!("a"));
    turns.admitted(&json!("a"));
    turns.admitting(json!("b"));
    assert!(
        turns.queue_changed(&[7]).is_empty(),
        "b learns its queue id"
    );
    turns.admitted(&json!("b"));
    turns.assistant_ended(&assistant(ZiStop::Length, None));
    let answers = turns.queue_changed(&[]);
    assert_eq!(answers, vec![(json!("a"), Ok(StopReason::MaxTokens))]);
    turns.assistant_ended(&assistant(ZiStop::Stop, None));
    let (answers, _) = turns.settled();
    assert_eq!(answers, vec![(json!("b"), Ok(StopReason::EndTurn))]);
}

#[test]
fn cancel_answers_the_running_and_the_dropped_prompts_cancelled() {
    let mut turns = Turns::default();
    turns.admitting(json!(1));
    turns.admitted(&json!(1));
    turns.admitting(json!(2));
    turns.queue_changed(&[3]);
    turns.admitted(&json!(2));
    turns.cancel();
    assert!(
        turns.queue_changed(&[]).is_empty(),
        "dropped, not delivered"
    );
    turns.assistant_ended(&assistant(ZiStop::Aborted, Some("Request was aborted")));
    let (answers, stranded) = turns.settled();
    assert_eq!(
        answers,
        vec![
            (json!(1), Ok(StopReason::Cancelled)),
            (json!(2), Ok(StopReason::Cancelled))
        ]
    );
    assert!(!stranded);
    assert!(!turns.cancelling(), "the next turn starts fresh");
}

#[test]
fn errors_and_refusals() {
    let mut turns = Turns::default();
    turns.admitting(json!(1));
    turns.admitted(&json!(1));
    turns.assistant_ended(&assistant(ZiStop::Error, Some("401 invalid key")));
    let (answers, _) = turns.settled();
    let error = answers[0].1.clone().unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (INTERNAL_ERROR, "401 invalid key")
    );
    turns.admitting(json!(2));
    turns.admitted(&json!(2));
    turns.assistant_ended(&assistant(
        ZiStop::Error,
        Some("The model refused to answer (stop_reason refusal)"),
    ));
    assert_eq!(turns.settled().0, vec![(json!(2), Ok(StopReason::Refusal))]);
}

#[test]
fn a_failed_run_leaves_queued_prompts_for_the_next_run() {
    let mut turns = Turns::default();
    turns.admitting(json!(1));
    turns.admitted(&json!(1));
    turns.admitting(json!(2));
    turns.queue_changed(&[5]);
    turns.admitted(&json!(2));
    turns.assistant_ended(&assistant(ZiStop::Error, Some("boom")));
    let (answers, stranded) = turns.settled();
    assert_eq!(ids(&answers), vec![json!(1)]);
    assert!(stranded);
    // The next run delivers it.
    assert!(turns.queue_changed(&[]).is_empty());
    turns.assistant_ended(&assistant(ZiStop::Stop, None));
    assert_eq!(turns.settled().0, vec![(json!(2), Ok(StopReason::EndTurn))]);
}

#[test]
fn refused_and_forced_answers() {
    let mut turns = Turns::default();
    turns.admitting(json!(1));
    turns.refused(&json!(1));
    assert!(turns.is_empty());
    turns.admitting(json!(2));
    turns.admitted(&json!(2));
    turns.admitting(json!(3));
    assert_eq!(
        turns.cancel_all(),
        vec![(json!(2), Ok(StopReason::Cancelled))]
    );
    assert!(!turns.is_empty(), "a prompt being admitted stays");
}
