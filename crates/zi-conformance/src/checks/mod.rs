//! The checks, in run order.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use zi_protocol::decode_cases::{DECODE_CASES, DecodeCase};

use crate::conn::Violation;
use crate::{Body, BoxFut, Check, CheckResult, Ctx, Level, Status};

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(CheckError::Fail(format!($($fmt)+)));
        }
    };
}

mod framing;
mod requests;
mod runs;
mod selection;
mod shutdown;
mod steps;

use framing::*;
use requests::*;
use runs::*;
use selection::*;
use shutdown::*;

fn f(
    id: &str,
    level: Level,
    section: &'static str,
    description: &str,
    body: for<'a> fn(&'a mut Ctx) -> BoxFut<'a>,
) -> Check {
    Check {
        id: id.to_string(),
        level,
        section,
        description: description.to_string(),
        body: Body::Fn(body),
    }
}

/// One check per rejected row of zi-protocol's decode-case table.
fn decode(case: &'static DecodeCase) -> Option<Check> {
    let expected = case.rejection()?;
    Some(Check {
        id: format!("decode.{}", case.name),
        level: Level::Must,
        section: "docs/rpc.md#decoding-a-request",
        description: format!(
            "{} → protocol_error {} {:?}",
            case.line, expected.code, expected.message
        ),
        body: Body::Decode(case.line, expected),
    })
}

// Long on purpose: the table of every check in run order, one row each; splitting it would
// scatter the order the report follows.
pub fn all() -> Vec<Check> {
    use Level::{Must, Should};
    let mut checks = vec![
        f(
            "framing.ready-first",
            Must,
            "docs/rpc.md#frames",
            "the first frame is ready, sequence 1, with a state snapshot",
            ready_first,
        ),
        f(
            "framing.crlf-accepted",
            Must,
            "docs/rpc.md#framing",
            "a CRLF-terminated record is accepted",
            crlf_accepted,
        ),
        f(
            "framing.unterminated-final-line",
            Must,
            "docs/rpc.md#framing",
            "bytes after the last LF are a record at EOF",
            unterminated_final_line,
        ),
        f(
            "framing.split-utf8",
            Should,
            "docs/rpc.md#framing",
            "UTF-8 split across writes is reassembled",
            split_utf8,
        ),
        f(
            "framing.empty-line",
            Must,
            "docs/rpc.md#framing",
            "an empty line is a recoverable invalid_json",
            empty_line,
        ),
        f(
            "framing.invalid-utf8",
            Must,
            "docs/rpc.md#framing",
            "invalid UTF-8 is one invalid_framing frame, then exit 1",
            invalid_utf8,
        ),
        f(
            "framing.oversized-record",
            Must,
            "docs/rpc.md#framing",
            "a record over 16 MiB is invalid_framing, then exit 1",
            oversized_record,
        ),
    ];
    checks.extend(DECODE_CASES.iter().filter_map(decode));
    checks.extend([
        f(
            "methods.get-state",
            Must,
            "docs/rpc.md#sessionget_state",
            "session.get_state returns the snapshot ready carried",
            get_state,
        ),
        f(
            "methods.decode-defaults",
            Must,
            "docs/rpc.md#generic-rules",
            "null start/limit/scope mean their defaults; 1.0 is an integer",
            decode_defaults,
        ),
        f(
            "ids.duplicate-in-flight",
            Must,
            "docs/rpc.md#request-ids-and-capacity",
            "a duplicate in-flight id is rejected without touching the original",
            duplicate_in_flight,
        ),
        f(
            "ids.reuse-after-response",
            Must,
            "docs/rpc.md#request-ids-and-capacity",
            "ids are reusable after success and after failure",
            id_reuse,
        ),
        f(
            "capacity.32-plus-interrupt",
            Must,
            "docs/rpc.md#request-ids-and-capacity",
            "33rd operation gets capacity; the reserved interrupt still runs",
            capacity,
        ),
        f(
            "events.mode-none",
            Must,
            "docs/rpc.md#connectionset_events",
            "set_events none suppresses only session_event frames",
            events_none,
        ),
        f(
            "events.direct-prompt-order",
            Must,
            "docs/rpc.md#event-order",
            "a direct prompt emits its events in the documented order",
            event_order,
        ),
        f(
            "completion.watch",
            Must,
            "docs/rpc.md#completion-watches",
            "a completion watch returns revision, message count and text",
            completion_watch,
        ),
        f(
            "completion.inactive-watch",
            Must,
            "docs/rpc.md#completion-watches",
            "awaiting an unknown watch fails with operation_failed",
            inactive_watch,
        ),
        f(
            "paging.messages",
            Must,
            "docs/rpc.md#sessionget_messages",
            "message pages follow the paging arithmetic",
            paging_messages,
        ),
        f(
            "paging.outcomes",
            Must,
            "docs/rpc.md#sessionget_outcomes",
            "outcome pages follow the paging arithmetic",
            paging_outcomes,
        ),
        f(
            "prompt.direct-while-running",
            Must,
            "docs/rpc.md#sessionprompt",
            "a direct prompt while running fails with operation_failed",
            prompt_while_running,
        ),
        f(
            "prompt.follow-up-while-idle",
            Should,
            "docs/rpc.md#sessionprompt",
            "follow_up while idle stays queued and does not start a run",
            follow_up_idle,
        ),
        f(
            "interrupt.run",
            Must,
            "docs/rpc.md#sessioninterrupt",
            "interrupt aborts a run and answers after it settles",
            interrupt_run,
        ),
        f(
            "models.list",
            Must,
            "docs/rpc.md#modellist",
            "model.list returns public descriptors with configured, no baseUrl",
            model_list,
        ),
        f(
            "models.select",
            Must,
            "docs/rpc.md#modelselect",
            "model.select selects a listed model, not_found otherwise",
            model_select,
        ),
        f(
            "thinking.list-select",
            Must,
            "docs/rpc.md#thinkinglist",
            "thinking.list and thinking.select",
            thinking,
        ),
        f(
            "commands.list-invoke",
            Must,
            "docs/rpc.md#commandlist",
            "command.list is an array; unknown names are not_found",
            commands,
        ),
        f(
            "shutdown.eof",
            Must,
            "docs/rpc.md#shutdown-eof-signals-and-exit-codes",
            "EOF exits 0 promptly with nothing but frames on stdout",
            shutdown_eof,
        ),
        f(
            "shutdown.eof-during-run",
            Must,
            "docs/rpc.md#shutdown-eof-signals-and-exit-codes",
            "EOF during a run interrupts it and exits 0",
            shutdown_eof_running,
        ),
        f(
            "shutdown.sigterm",
            Must,
            "docs/rpc.md#shutdown-eof-signals-and-exit-codes",
            "SIGTERM exits 143",
            shutdown_sigterm,
        ),
        f(
            "shutdown.sigint",
            Should,
            "docs/rpc.md#shutdown-eof-signals-and-exit-codes",
            "SIGINT exits 130",
            shutdown_sigint,
        ),
        f(
            "cli.positional-prompt",
            Must,
            "docs/rpc.md#framing",
            "positional prompts are rejected with exit 1",
            positional_prompt,
        ),
    ]);
    checks
}

/// The checks over every frame of the run.
pub fn whole_run(
    frames: &Arc<Mutex<Vec<Value>>>,
    violations: &[Arc<Mutex<Vec<Violation>>>],
) -> Vec<CheckResult> {
    let mut found: Vec<String> = Vec::new();
    for v in violations {
        if let Ok(v) = v.lock() {
            found.extend(v.iter().map(|v| v.0.clone()));
        }
    }
    let frames = frames.lock().map(|f| f.clone()).unwrap_or_default();
    let framing = if found.is_empty() {
        Status::Pass
    } else {
        Status::Fail(format!(
            "{} violations: {:?}",
            found.len(),
            &found[..found.len().min(5)]
        ))
    };
    let schema = match jsonschema::validator_for(&zi_protocol::schema::server_frame_schema()) {
        Err(e) => Status::Fail(format!("the schema does not compile: {e}")),
        Ok(validator) => {
            let bad: Vec<String> = frames
                .iter()
                .filter(|f| !validator.is_valid(f))
                .take(5)
                .map(|f| {
                    let why: Vec<String> = validator
                        .iter_errors(f)
                        .take(2)
                        .map(|e| format!("{e} at {}", e.instance_path))
                        .collect();
                    let text = f.to_string();
                    format!("{}: {}", &text[..text.len().min(300)], why.join("; "))
                })
                .collect();
            if bad.is_empty() {
                Status::Pass
            } else {
                Status::Fail(bad.join("\n"))
            }
        }
    };
    let result =
        |id: &str, section: &str, description: String, status: Status, transcript: Vec<String>| {
            CheckResult {
                id: id.to_string(),
                level: Level::Must,
                section: section.to_string(),
                description,
                status,
                duration_ms: 0,
                transcript,
            }
        };
    let framing_transcript = found.clone();
    let schema_transcript = Vec::new();
    vec![
        result(
            "frames.framing-and-sequences",
            "docs/rpc.md#framing docs/rpc.md#frames",
            format!(
                "all {} frames: compact JSON + LF, version 1, contiguous sequences, known types",
                frames.len()
            ),
            framing,
            framing_transcript,
        ),
        result(
            "frames.schema",
            "docs/rpc.md#frames",
            format!("all {} frames match docs/rpc-schema.json", frames.len()),
            schema,
            schema_transcript,
        ),
    ]
}
