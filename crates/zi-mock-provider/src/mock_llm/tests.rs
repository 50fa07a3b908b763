use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(10);

async fn connect(mock: &MockLlm, path: &str, body: &Value) -> TcpStream {
    let text = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", mock.shared.port))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("write: {e}"));
    stream
}

async fn post(mock: &MockLlm, body: &Value) -> String {
    let mut stream = connect(mock, "/v1/chat/completions", body).await;
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .unwrap_or_else(|_| panic!("timed out"))
        .unwrap_or_else(|e| panic!("read: {e}"));
    String::from_utf8(response).unwrap_or_else(|e| panic!("utf8: {e}"))
}

/// The JSON payloads of the `data:` lines, in order (chunked framing lines are skipped).
fn data_lines(response: &str) -> Vec<String> {
    response
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

fn request_body(include_usage: bool) -> Value {
    json!({"model": "m1", "stream": true, "stream_options": {"include_usage": include_usage},
           "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn streams_text_then_usage_then_done_and_records_the_request() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::Text(vec!["Hel".into(), "lo \"x\"".into()]));
    let response = post(&mock, &request_body(true)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    let data = data_lines(&response);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(text, "Hello \"x\"");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["model"], "m1");
    assert!(
        chunks[0]
            .pointer("/choices/0/delta/content")
            .is_some_and(Value::is_null)
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(
        finish.pointer("/choices/0/finish_reason"),
        Some(&json!("stop"))
    );
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage.pointer("/usage/completion_tokens"), Some(&json!(2)));

    let requests = mock.wait_for_requests(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k"));
    assert_eq!(requests[0].body["model"], "m1");
    assert_eq!(mock.disconnects(), 0);
}

#[tokio::test]
async fn reply_streams_reasoning_tool_fragments_and_scripted_usage() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::Reply {
        thinking: vec!["hmm".into()],
        text: vec![],
        tool_calls: vec![MockToolCall {
            id: "call_1".into(),
            name: "read".into(),
            args_chunks: vec!["{\"pa".into(), "th\":1}".into()],
        }],
        finish_reason: "tool_calls".into(),
        usage: Some(MockUsage {
            prompt_tokens: 50,
            completion_tokens: 7,
            cached_tokens: 20,
        }),
    });
    let response = post(&mock, &request_body(true)).await;
    let data = data_lines(&response);
    let chunks: Vec<Value> = data
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(
        chunks[1].pointer("/choices/0/delta/reasoning_content"),
        Some(&json!("hmm"))
    );
    let first_call = chunks[2]
        .pointer("/choices/0/delta/tool_calls/0")
        .cloned()
        .unwrap_or_default();
    assert_eq!(first_call["id"], "call_1");
    assert_eq!(first_call["function"]["name"], "read");
    assert_eq!(first_call["function"]["arguments"], "{\"pa");
    assert_eq!(
        chunks[3].pointer("/choices/0/delta/tool_calls/0/function/arguments"),
        Some(&json!("th\":1}"))
    );
    assert_eq!(
        chunks[4].pointer("/choices/0/finish_reason"),
        Some(&json!("tool_calls"))
    );
    assert_eq!(
        chunks[5].pointer("/usage/prompt_tokens_details/cached_tokens"),
        Some(&json!(20))
    );
    assert_eq!(chunks[5].pointer("/usage/total_tokens"), Some(&json!(57)));
}

#[tokio::test]
async fn errors_exhaustion_and_truncation() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::HttpError {
        status: 429,
        message: "Rate limit reached".into(),
    });
    mock.push(Step::MidStreamError {
        text: vec!["a".into()],
        message: "boom".into(),
    });
    mock.push(Step::Truncated(vec!["part".into()]));
    let limited = post(&mock, &request_body(false)).await;
    assert!(limited.starts_with("HTTP/1.1 429"), "{limited}");
    assert!(limited.contains(r#""message":"Rate limit reached""#));
    let failed = data_lines(&post(&mock, &request_body(false)).await);
    assert_eq!(
        failed.last().map(String::as_str),
        Some(r#"{"error":{"message":"boom","type":"server_error","code":null}}"#)
    );
    let truncated = post(&mock, &request_body(true)).await;
    assert!(
        !truncated.contains("[DONE]")
            && !truncated.contains("finish_reason\":\"")
            && truncated.contains("part")
    );
    let exhausted = post(&mock, &request_body(false)).await;
    assert!(
        exhausted.starts_with("HTTP/1.1 500") && exhausted.contains(SCRIPT_EXHAUSTED),
        "{exhausted}"
    );
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(mock.disconnects(), 0);
}

#[tokio::test]
async fn bytes_step_sends_exact_text_and_no_usage_unless_asked() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::Bytes {
        total_bytes: 10_000,
        delta_bytes: 3,
    });
    let data = data_lines(&post(&mock, &request_body(false)).await);
    let mut text = String::new();
    for line in &data {
        if let Ok(chunk) = serde_json::from_str::<Value>(line) {
            assert!(chunk.get("usage").is_none());
            if let Some(content) = chunk
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                text.push_str(content);
            }
        }
    }
    assert_eq!(text.len(), 10_000);
    assert!(text.bytes().all(|b| b == b'x'));
    assert_eq!(data.len(), 1 + 3334 + 1 + 1);
}

#[tokio::test]
async fn hang_counts_a_disconnect_when_the_client_leaves() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::Hang(vec!["waiting".into()]));
    let mut stream = connect(&mock, "/v1/chat/completions", &request_body(true)).await;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("waiting") {
        let read = tokio::time::timeout(WAIT, stream.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("no data"))
            .unwrap_or_else(|e| panic!("read: {e}"));
        assert!(read > 0, "closed early");
        seen.extend_from_slice(&buffer[..read]);
    }
    assert_eq!(mock.disconnects(), 0);
    drop(stream);
    assert_eq!(mock.wait_for_disconnects(1, WAIT).await, 1);
}

#[tokio::test]
async fn other_paths_are_recorded_and_answered_404() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push(Step::text("unused"));
    let response = {
        let mut stream = connect(&mock, "/v1/models", &json!({})).await;
        let mut out = String::new();
        let _ = stream.read_to_string(&mut out).await;
        out
    };
    assert!(response.starts_with("HTTP/1.1 404"), "{response}");
    assert_eq!(mock.pending_steps(), 1);
    assert_eq!(mock.requests()[0].path, "/v1/models");
}

#[tokio::test]
async fn models_json_points_at_the_server() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    let text = mock.models_json("KEY", &[json!({"id": "m1", "reasoning": true})]);
    let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parsed["providers"]["mock"]["baseUrl"],
        json!(mock.base_url())
    );
    assert_eq!(parsed["providers"]["mock"]["api"], "openai-completions");
    assert_eq!(parsed["providers"]["mock"]["apiKey"], "KEY");
    assert_eq!(parsed["providers"]["mock"]["models"][0]["id"], "m1");
}

#[test]
fn tool_call_step_splits_arguments_in_two() {
    let Step::Reply {
        tool_calls,
        finish_reason,
        ..
    } = Step::tool_call("c", "bash", json!({"command": "ls é"}))
    else {
        panic!("not a reply");
    };
    assert_eq!(finish_reason, "tool_calls");
    assert_eq!(tool_calls[0].args_chunks.len(), 2);
    assert_eq!(tool_calls[0].args_chunks.concat(), r#"{"command":"ls é"}"#);
}

#[tokio::test]
async fn an_after_step_is_served_only_once_the_named_models_requests_arrived() {
    let mock = MockLlm::start().await.unwrap_or_else(|e| panic!("{e}"));
    mock.push_for("child", Step::after("parent", 1, Step::text("held")));
    mock.push_for("parent", Step::text("first"));
    let mut held = {
        let mock = mock.clone();
        tokio::spawn(async move {
            post(
                &mock,
                &json!({"model": "child", "stream": true, "messages": []}),
            )
            .await
        })
    };
    // Not answered while the parent sent nothing (a correct mock never answers here, so the
    // short bound cannot fail it; an unheld reply would arrive within it).
    let early = tokio::time::timeout(Duration::from_millis(500), &mut held).await;
    assert!(
        early.is_err(),
        "answered before the parent's request: {early:?}"
    );
    assert_eq!(mock.requests().len(), 1);
    let parent = post(
        &mock,
        &json!({"model": "parent", "stream": true, "messages": []}),
    )
    .await;
    assert!(parent.contains("first"), "{parent}");
    let child = tokio::time::timeout(WAIT, held)
        .await
        .unwrap_or_else(|_| panic!("the held reply was released"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(child.contains("held"), "{child}");
}
