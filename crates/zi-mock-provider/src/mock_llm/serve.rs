//! Answering one request: recording it, taking the next step, and encoding it in the vendor's
//! format.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use zi_os::sync::lock;

use super::body::stream_response;
use super::sse::{SseEncoder, json_string};
use super::{MockUsage, RecordedRequest, SCRIPT_EXHAUSTED, Shared, Step, Vendor};
use crate::mock_vendors::{self, Script};

/// Largest request body the mock reads.
pub(super) const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    let recorded = RecordedRequest {
        path,
        headers,
        body,
    };
    let request_body = recorded.body.clone();
    let vendor = Vendor::from_path(&recorded.path)
        .filter(|_| parts.method == Method::POST && recorded.path.starts_with("/v1"));
    let policy = parts.method == Method::POST && is_policy_path(&recorded.path);
    lock(&shared.requests).push(recorded);
    shared.changes.send_replace(());

    if policy {
        let status = shared.policy_status.load(Ordering::SeqCst);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, axum::Json(json!({}))).into_response();
    }
    let Some(vendor) = vendor else {
        return error_response(
            404,
            &format!("no route for {} {}", parts.method, parts.uri.path()),
        );
    };
    // A step scripted for a tool the request offers, then one for its model (a parent and its
    // subagent children share one server), come before the shared script.
    let for_tool = {
        let mut scripts = lock(&shared.tool_scripts);
        request_body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str())
            .find_map(|name| scripts.get_mut(name)?.pop_front())
    };
    let for_model = || {
        request_body
            .get("model")
            .and_then(Value::as_str)
            .and_then(|model| lock(&shared.model_scripts).get_mut(model)?.pop_front())
    };
    let Some(step) = for_tool
        .or_else(for_model)
        .or_else(|| lock(&shared.script).pop_front())
    else {
        return vendor_error(vendor, 500, SCRIPT_EXHAUSTED);
    };
    let Some(step) = held(&shared, step).await else {
        return vendor_error(vendor, 503, "mock server shutting down");
    };
    match (vendor, step) {
        (_, Step::HttpError { status, message }) => vendor_error(vendor, status, &message),
        (_, Step::HttpJson { status, body }) => json_answer(status, body),
        (_, Step::Sse { body, hang }) => stream_response(shared, vec![Bytes::from(body)], hang),
        (Vendor::OpenAiCompletions, step) => respond(&shared, step, &request_body),
        (vendor, step) => {
            let number = shared.responses.fetch_add(1, Ordering::SeqCst) + 1;
            let model = request_body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("mock");
            let (script, hang) = script_of(step);
            let body = mock_vendors::encode(vendor, &script, number, model);
            stream_response(shared, vec![Bytes::from(body)], hang)
        }
    }
}

/// Waits out every [`Step::After`] around `step`; `None` when the server shuts down first.
async fn held(shared: &Shared, mut step: Step) -> Option<Step> {
    while let Step::After {
        model,
        requests,
        step: inner,
    } = step
    {
        // Subscribing before counting means no request recorded in between is missed.
        let mut changes = shared.changes.subscribe();
        let mut shutdown = shared.shutdown.subscribe();
        while lock(&shared.requests)
            .iter()
            .filter(|r| r.body.get("model").and_then(Value::as_str) == Some(model.as_str()))
            .count()
            < requests
        {
            tokio::select! {
                changed = changes.changed() => changed.ok()?,
                _ = shutdown.wait_for(|stop| *stop) => return None,
            }
        }
        step = *inner;
    }
    Some(step)
}

/// The neutral form of a step, and whether the body stays open afterwards.
pub(super) fn script_of(step: Step) -> (Script, bool) {
    let stop = Some("stop".to_string());
    match step {
        Step::Text(text) => (
            Script {
                text,
                finish: stop,
                ..Script::default()
            },
            false,
        ),
        Step::Reply {
            thinking,
            text,
            tool_calls,
            finish_reason,
            usage,
        } => (
            Script {
                thinking,
                text,
                tool_calls,
                finish: Some(finish_reason),
                usage,
                error: None,
            },
            false,
        ),
        Step::MidStreamError { text, message } => (
            Script {
                text,
                error: Some(message),
                ..Script::default()
            },
            false,
        ),
        Step::Truncated(text) => (
            Script {
                text,
                ..Script::default()
            },
            false,
        ),
        Step::Hang(text) => (
            Script {
                text,
                ..Script::default()
            },
            true,
        ),
        Step::Bytes {
            total_bytes,
            delta_bytes,
        } => {
            let delta = "x".repeat(delta_bytes.max(1));
            let mut text = Vec::new();
            let mut left = total_bytes;
            while left > 0 {
                let size = left.min(delta.len());
                text.push(delta[..size].to_string());
                left -= size;
            }
            (
                Script {
                    text,
                    finish: stop,
                    ..Script::default()
                },
                false,
            )
        }
        Step::After { step, .. } => script_of(*step),
        Step::HttpError { .. } | Step::HttpJson { .. } | Step::Sse { .. } => {
            (Script::default(), false)
        }
    }
}

pub(super) fn vendor_error(vendor: Vendor, status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(vendor.error_body(status.as_u16(), message)),
    )
        .into_response()
}

fn json_answer(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// `…/models/<id>/policy`: GitHub Copilot's model enablement.
fn is_policy_path(path: &str) -> bool {
    path.contains("/models/") && path.ends_with("/policy")
}

pub(super) fn error_response(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, code) = match status.as_u16() {
        429 => ("requests", json!("rate_limit_exceeded")),
        400..=499 => ("invalid_request_error", Value::Null),
        _ => ("server_error", Value::Null),
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

pub(super) fn respond(shared: &Arc<Shared>, step: Step, request: &Value) -> Response {
    let number = shared.responses.fetch_add(1, Ordering::SeqCst) + 1;
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock");
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut sse = SseEncoder::new(number, model);
    let mut hang = false;
    let mut deltas = 0u64;
    let mut reply_usage = None;
    let mut finish_reason = None;
    match step {
        Step::HttpError { status, message } => return error_response(status, &message),
        Step::HttpJson { status, body } => return json_answer(status, body),
        Step::Sse { body, hang } => {
            return stream_response(Arc::clone(shared), vec![Bytes::from(body)], hang);
        }
        Step::Text(text) => {
            sse.role();
            deltas += sse.contents(&text);
            finish_reason = Some("stop".to_string());
        }
        Step::Reply {
            thinking,
            text,
            tool_calls,
            finish_reason: reason,
            usage,
        } => {
            sse.role();
            for delta in &thinking {
                sse.delta(
                    &format!("{{\"reasoning_content\":{}}}", json_string(delta)),
                    None,
                );
            }
            deltas += thinking.len() as u64 + sse.contents(&text);
            for (index, call) in tool_calls.iter().enumerate() {
                deltas += sse.tool_call(index, call);
            }
            finish_reason = Some(reason);
            reply_usage = usage;
        }
        Step::MidStreamError { text, message } => {
            sse.role();
            sse.contents(&text);
            let error =
                json!({"error": {"message": message, "type": "server_error", "code": null}});
            sse.data(&error.to_string());
        }
        Step::Truncated(text) => {
            sse.role();
            sse.contents(&text);
        }
        Step::Hang(text) => {
            sse.role();
            sse.contents(&text);
            hang = true;
        }
        Step::After { step, .. } => return respond(shared, *step, request),
        Step::Bytes {
            total_bytes,
            delta_bytes,
        } => {
            sse.role();
            deltas += sse.filler(total_bytes, delta_bytes);
            finish_reason = Some("stop".to_string());
        }
    }
    if let Some(reason) = &finish_reason {
        sse.delta("{}", Some(reason));
        if include_usage {
            let usage = reply_usage.unwrap_or_else(|| MockUsage {
                prompt_tokens: estimate_prompt_tokens(request),
                completion_tokens: deltas,
                cached_tokens: 0,
            });
            sse.usage(usage);
        }
        sse.data("[DONE]");
    }
    stream_response(Arc::clone(shared), sse.finish(), hang)
}

/// A rough token count for a request without scripted usage: a quarter of its messages' JSON.
pub(super) fn estimate_prompt_tokens(request: &Value) -> u64 {
    let bytes = request
        .get("messages")
        .map_or(0, |messages| messages.to_string().len());
    bytes.div_ceil(4) as u64
}
