//! One cell from evaluation to its `done` frame.

use std::cell::RefCell;
use std::rc::Rc;

use rquickjs::promise::PromiseState;
use rquickjs::{Ctx, Function, Object, Promise, Value};
use serde_json::{Value as Json, json};

use super::{Shared, Stop};
use crate::protocol::MAX_RETURN_BYTES;

// Long on purpose: the cell's whole life in one pass (glue, evaluation, the job and settle
// loop, the outcome), each step reading what the one before made.
pub(super) fn run(
    ctx: &Ctx<'_>,
    shared: &Rc<RefCell<Shared>>,
    code: &str,
    tools: Vec<String>,
) -> Json {
    let mut glue_options = rquickjs::context::EvalOptions::default();
    glue_options.filename = Some("zi-glue.js".into());
    let glue: Function = match ctx.eval_with_options(include_str!("glue.js"), glue_options) {
        Ok(glue) => glue,
        Err(e) => return failure("internal", &format!("glue: {e}")),
    };
    let api: Object = match super::natives::install(ctx, shared).and_then(|n| glue.call((n, tools)))
    {
        Ok(api) => api,
        Err(e) => return failure("internal", &format!("glue: {e}")),
    };
    let (Ok(settle), Ok(describe)) = (
        api.get::<_, Function>("settle"),
        api.get::<_, Function>("describe"),
    ) else {
        return failure("internal", "glue: incomplete");
    };

    // The body of an async arrow: top-level await and return work, line 1 stays line 1 in
    // stacks. Sloppy mode, like an AsyncFunction body in Node.
    let wrapped = format!("(async () => {{{code}\n}})()");
    let mut options = rquickjs::context::EvalOptions::default();
    options.strict = false;
    options.filename = Some("cell.js".into());
    let evaluated: rquickjs::Result<Value> = ctx.eval_with_options(wrapped, options);
    let promise: Promise = match evaluated {
        Ok(value) => match value.into_promise() {
            Some(promise) => promise,
            None => return failure("internal", "the cell did not produce a promise"),
        },
        Err(_) => {
            if let Some(stop) = shared.borrow_mut().stop.take() {
                return stopped(stop);
            }
            return exception(&describe, ctx.catch());
        }
    };

    let outcome: Result<Value, Json> = loop {
        while ctx.execute_pending_job() {}
        if let Some(stop) = shared.borrow_mut().stop.take() {
            break Err(stopped(stop));
        }
        match promise.state() {
            PromiseState::Resolved => match promise.result::<Value>() {
                Some(Ok(value)) => break Ok(value),
                _ => break Err(failure("internal", "the cell's value could not be read")),
            },
            PromiseState::Rejected => {
                let _ = promise.result::<Value>();
                break Err(exception(&describe, ctx.catch()));
            }
            PromiseState::Pending => {}
        }
        let next = {
            let mut state = shared.borrow_mut();
            if state.inbox.is_empty() && state.outstanding == 0 {
                drop(state);
                break Err(failure(
                    "deadlock",
                    "the cell is waiting for a promise that nothing can settle",
                ));
            }
            // Waiting for zi: the host keeps the time here (it does not count a nested call's
            // wait for an approval), and each result re-arms this side's deadline.
            while state.inbox.is_empty() && state.stop.is_none() {
                state.reader.fill(None);
                state.pump();
            }
            state.inbox.pop_front()
        };
        let Some(result) = next else { continue };
        let Some(id) = result["id"].as_u64() else {
            shared.borrow_mut().stop = Some(Stop::Protocol("result without id".into()));
            continue;
        };
        {
            let mut state = shared.borrow_mut();
            state.outstanding = state.outstanding.saturating_sub(1);
        }
        let ok = result["ok"].as_bool().unwrap_or(false);
        let payload = if ok {
            result.get("value").map(Json::to_string)
        } else {
            Some(result["error"].to_string())
        };
        // Resolves or rejects in JavaScript; the reactions run at the top of the loop.
        let _ = settle.call::<_, ()>((id as f64, ok, payload));
    };

    let unawaited: Json = api
        .get::<_, Function>("unawaited")
        .and_then(|f| f.call::<_, String>(()))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| json!([]));
    let calls = shared.borrow().next_id - 1;
    let value = match outcome {
        Ok(value) => value,
        Err(mut error) => {
            error["error"]["unawaited"] = unawaited;
            return error;
        }
    };
    if let Some(list) = unawaited.as_array().filter(|a| !a.is_empty()) {
        let names: Vec<String> = list
            .iter()
            .map(|c| {
                format!(
                    "zi.{} (call {})",
                    c["name"].as_str().unwrap_or("?"),
                    c["id"]
                )
            })
            .collect();
        let mut done = failure(
            "unawaited",
            &format!(
                "the cell ended with calls it never awaited: {}; await every zi.* call (or Promise.all them)",
                names.join(", ")
            ),
        );
        done["error"]["unawaited"] = unawaited;
        return done;
    }
    let encoded: rquickjs::Result<Option<String>> = api
        .get::<_, Function>("encode")
        .and_then(|f| f.call((value,)));
    match encoded {
        Ok(Some(text)) if text.len() > MAX_RETURN_BYTES => failure(
            "result_too_large",
            &format!(
                "the return value is {} bytes of JSON; at most {MAX_RETURN_BYTES}",
                text.len()
            ),
        ),
        Ok(Some(text)) => {
            let mut done = json!({"t": "done", "ok": true, "calls": calls});
            done["value"] = serde_json::from_str(&text).unwrap_or(Json::Null);
            done
        }
        Ok(None) => json!({"t": "done", "ok": true, "calls": calls}),
        Err(_) => {
            if let Some(stop) = shared.borrow_mut().stop.take() {
                return stopped(stop);
            }
            let error = ctx.catch();
            let message = error
                .as_object()
                .and_then(|o| o.get::<_, String>("message").ok())
                .unwrap_or_default();
            failure(
                "result_not_json",
                &format!("the return value is not JSON: {message}"),
            )
        }
    }
}

fn failure(kind: &str, message: &str) -> Json {
    json!({"t": "done", "ok": false, "error": {"kind": kind, "message": message}})
}

fn stopped(stop: Stop) -> Json {
    match stop {
        Stop::Timeout => failure("timeout", "the cell ran past its time limit"),
        Stop::Cancelled => failure("interrupted", "the cell was interrupted"),
        Stop::CallLimit(max) => failure(
            "call_limit",
            &format!("the cell tried to make more than {max} calls"),
        ),
        Stop::Protocol(problem) => failure("protocol", &problem),
    }
}

/// An uncaught error, described by the glue (name, message, stack, toolName).
fn exception<'js>(describe: &Function<'js>, error: Value<'js>) -> Json {
    let Ok(text) = describe.call::<_, String>((error,)) else {
        return failure("memory", "out of memory (the error could not be described)");
    };
    let info: Json = serde_json::from_str(&text).unwrap_or_else(|_| json!({}));
    let name = info["name"].as_str().unwrap_or("Error");
    let message = info["message"].as_str().unwrap_or_default();
    let kind = if name == "InternalError" && message == "out of memory" {
        "memory"
    } else if name == "RangeError" && message.contains("call stack") {
        "stack"
    } else {
        "exception"
    };
    let mut done = failure(kind, message);
    done["error"]["name"] = json!(name);
    if let Some(stack) = info["stack"].as_str().filter(|s| !s.is_empty()) {
        done["error"]["stack"] = json!(stack);
    }
    if let Some(tool) = info.get("toolName").filter(|t| t.is_string()) {
        done["error"]["toolName"] = tool.clone();
    }
    done
}
