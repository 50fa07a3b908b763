//! The live mapper and the replay of the same run's journal end in the same state.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use zi_agent::EventContext;
use zi_protocol::event::{
    AgentSessionEvent, AssistantMessageEvent, EntryData, SessionEntry, ToolResult,
};
use zi_protocol::message::{
    AgentMessage, AssistantMessage, ContentBlock, MessageContent, StopReason, ToolCall,
    ToolResultMessage, UserMessage,
};
use zi_protocol::state::{PlanStep, PlanStepStatus, WorkPlan};

use super::Display;
use super::live::{LiveMapper, Out};
use super::replay::Replay;

fn entry(id: &str, data: EntryData) -> SessionEntry {
    SessionEntry {
        data,
        id: id.into(),
        parent_id: None,
        timestamp: "2026-12-02T00:00:00.000Z".into(),
    }
}

fn context(message_id: Option<&str>) -> EventContext {
    EventContext {
        message_count: 0,
        message_id: message_id.map(str::to_string),
    }
}

fn conversation() -> (Vec<SessionEntry>, AssistantMessage) {
    let user = AgentMessage::User(UserMessage {
        content: MessageContent::Text("Fix the notes\nplease".into()),
        timestamp: 1,
    });
    let assistant = AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "hm".into(),
                thinking_signature: None,
                redacted: None,
            },
            ContentBlock::text("I'll edit"),
            ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "edit".into(),
                arguments: json!({"path": "notes.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
                thought_signature: None,
            }),
            ContentBlock::ToolCall(ToolCall {
                id: "c2".into(),
                name: "bash".into(),
                arguments: json!({"command": "sleep 100"}),
                thought_signature: None,
            }),
        ],
        api: "openai-completions".into(),
        provider: "mock".into(),
        model: "m1".into(),
        usage: Default::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        response_id: None,
        timestamp: 2,
    };
    let result = AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: "c1".into(),
        tool_name: "edit".into(),
        content: vec![ContentBlock::text(
            "Successfully replaced 1 block(s) in notes.txt",
        )],
        details: Some(json!({"diff": "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-a\n+b\n"})),
        is_error: false,
        timestamp: 3,
    });
    let plan = WorkPlan {
        revision: 1,
        explanation: None,
        steps: vec![PlanStep {
            text: "Edit the notes".into(),
            status: PlanStepStatus::InProgress,
        }],
    };
    let entries = vec![
        entry("u1", EntryData::Message { message: user }),
        entry(
            "a1",
            EntryData::Message {
                message: AgentMessage::Assistant(assistant.clone()),
            },
        ),
        entry("r1", EntryData::Message { message: result }),
        entry("p1", EntryData::WorkPlan(plan)),
    ];
    (entries, assistant)
}

/// The client's picture after the updates: message texts by id, calls merged, plan, title.
fn reduce(updates: &[Value]) -> Value {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut calls: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    let mut rest = serde_json::Map::new();
    for update in updates {
        let kind = update["sessionUpdate"].as_str().unwrap();
        match kind {
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk" => {
                let key = format!("{kind}/{}", update["messageId"].as_str().unwrap());
                texts
                    .entry(key)
                    .or_default()
                    .push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
            "tool_call" | "tool_call_update" => {
                let call = calls
                    .entry(update["toolCallId"].as_str().unwrap().to_string())
                    .or_default();
                for (key, value) in update.as_object().unwrap() {
                    if key != "sessionUpdate" && key != "rawOutput" {
                        call.insert(key.clone(), value.clone());
                    }
                }
            }
            "usage_update" => {}
            other => {
                rest.insert(other.to_string(), update.clone());
            }
        }
    }
    json!({"texts": texts, "calls": calls, "rest": rest})
}

/// The live run the journal of [`conversation`] records, event by event (with the message id
/// the front end gave each): a streamed assistant, two tool calls of which the interrupted one
/// never ended, and a work plan.
// Long on purpose: the event sequence of one run, one event per row; the test compares its
// mapping with the replay of the same journal.
fn live_run(
    entries: &[SessionEntry],
    assistant: &AssistantMessage,
) -> Vec<(AgentSessionEvent, Option<&'static str>)> {
    let args_edit = json!({"path": "notes.txt", "edits": [{"oldText": "a", "newText": "b"}]});
    let delta = |event| AgentSessionEvent::MessageUpdate {
        assistant_message_event: event,
    };
    vec![
        (
            AgentSessionEvent::EntryAppended {
                entry: entries[0].clone(),
            },
            None,
        ),
        (
            AgentSessionEvent::MessageStart {
                message: AgentMessage::Assistant(assistant.clone()),
            },
            Some("a1"),
        ),
        (
            delta(AssistantMessageEvent::ThinkingDelta {
                content_index: 0,
                delta: "hm".into(),
            }),
            None,
        ),
        (
            delta(AssistantMessageEvent::TextDelta {
                content_index: 1,
                delta: "I'll ".into(),
            }),
            None,
        ),
        (
            delta(AssistantMessageEvent::TextDelta {
                content_index: 1,
                delta: "edit".into(),
            }),
            None,
        ),
        (
            AgentSessionEvent::EntryAppended {
                entry: entries[1].clone(),
            },
            None,
        ),
        (
            AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(assistant.clone()),
            },
            None,
        ),
        (
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id: "c1".into(),
                tool_name: "edit".into(),
                args: args_edit,
            },
            None,
        ),
        (
            AgentSessionEvent::ToolExecutionStart {
                tool_call_id: "c2".into(),
                tool_name: "bash".into(),
                args: json!({"command": "sleep 100"}),
            },
            None,
        ),
        (
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: "edit".into(),
                result: ToolResult {
                    content: vec![ContentBlock::text(
                        "Successfully replaced 1 block(s) in notes.txt",
                    )],
                    details: Some(
                        json!({"diff": "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-a\n+b\n"}),
                    ),
                },
                is_error: false,
            },
            None,
        ),
        (
            AgentSessionEvent::EntryAppended {
                entry: entries[2].clone(),
            },
            None,
        ),
        // The run was interrupted: c2 never ended; its end reads failed.
        (
            AgentSessionEvent::ToolExecutionEnd {
                tool_call_id: "c2".into(),
                tool_name: "bash".into(),
                result: ToolResult {
                    content: vec![ContentBlock::text("Command aborted")],
                    details: None,
                },
                is_error: true,
            },
            None,
        ),
        (
            AgentSessionEvent::WorkPlanChanged {
                plan: match &entries[3].data {
                    EntryData::WorkPlan(plan) => plan.clone(),
                    _ => unreachable!(),
                },
            },
            None,
        ),
    ]
}

#[test]
fn a_replayed_journal_ends_where_the_live_run_ended() {
    let (entries, assistant) = conversation();
    let cwd = PathBuf::from("/work/proj");
    let display = Display::default();
    let mut live = LiveMapper::new(cwd.clone(), display, 128_000, 0.0, false);
    let events = live_run(&entries, &assistant);
    let mut live_updates = Vec::new();
    for (event, message_id) in &events {
        for out in live.map(event, &context(*message_id)) {
            match out {
                Out::Update(update) => live_updates.push(serde_json::to_value(update).unwrap()),
                Out::UserMessage(chunks) => live_updates
                    .extend(chunks.into_iter().map(|u| serde_json::to_value(u).unwrap())),
                Out::ConfigChanged => {}
            }
        }
    }
    let mut replay = Replay::new(cwd, display);
    let mut replayed: Vec<Value> = entries
        .iter()
        .flat_map(|e| replay.entry(e))
        .map(|u| serde_json::to_value(u).unwrap())
        .collect();
    replayed.extend(
        replay
            .finish(128_000)
            .into_iter()
            .map(|u| serde_json::to_value(u).unwrap()),
    );
    let mut live_state = reduce(&live_updates);
    let replay_state = reduce(&replayed);
    // The live run's c2 ended with its own text; the replay has no result for it: both failed.
    assert_eq!(live_state["calls"]["c2"]["status"], "failed");
    assert_eq!(replay_state["calls"]["c2"]["status"], "failed");
    live_state["calls"]["c2"] = replay_state["calls"]["c2"].clone();
    assert_eq!(live_state, replay_state);
    assert_eq!(replay_state["texts"]["agent_message_chunk/a1"], "I'll edit");
    assert_eq!(
        replay_state["texts"]["agent_thought_chunk/a1:thinking"],
        "hm"
    );
    assert_eq!(
        replay_state["texts"]["user_message_chunk/u1"],
        "Fix the notes\nplease"
    );
    assert_eq!(
        replay_state["rest"]["session_info_update"]["title"],
        "Fix the notes"
    );
    assert_eq!(replay_state["calls"]["c1"]["kind"], "edit");
}
