//! The checks, in run order.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::conn::Violation;
use crate::decode_cases::{DECODE_CASES, DecodeCase};
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

/// One check per row of the decode-case table.
fn decode(case: &'static DecodeCase) -> Check {
    Check {
        id: format!("decode.{}", case.name),
        level: Level::Must,
        section: "§3",
        description: format!(
            "{} → protocol_error {} {:?}",
            case.line, case.code, case.message
        ),
        body: Body::Decode(case),
    }
}

// Long on purpose: the table of every check in run order, one row each; splitting it would
// scatter the order the report and the spec sections follow.
pub fn all() -> Vec<Check> {
    use Level::{Must, Should};
    let mut checks = vec![
        f(
            "framing.ready-first",
            Must,
            "§2.1",
            "the first frame is ready, sequence 1, with a state snapshot",
            ready_first,
        ),
        f(
            "framing.crlf-accepted",
            Must,
            "§1",
            "a CRLF-terminated record is accepted",
            crlf_accepted,
        ),
        f(
            "framing.unterminated-final-line",
            Must,
            "§1",
            "bytes after the last LF are a record at EOF",
            unterminated_final_line,
        ),
        f(
            "framing.split-utf8",
            Should,
            "§1",
            "UTF-8 split across writes is reassembled",
            split_utf8,
        ),
        f(
            "framing.empty-line",
            Must,
            "§1",
            "an empty line is a recoverable invalid_json",
            empty_line,
        ),
        f(
            "framing.invalid-utf8",
            Must,
            "§1",
            "invalid UTF-8 is one invalid_framing frame, then exit 1",
            invalid_utf8,
        ),
        f(
            "framing.oversized-record",
            Must,
            "§1",
            "a record over 16 MiB is invalid_framing, then exit 1",
            oversized_record,
        ),
    ];
    checks.extend(DECODE_CASES.iter().map(decode));
    checks.extend([
        f(
            "methods.get-state",
            Must,
            "§4.1",
            "session.get_state returns the snapshot ready carried",
            get_state,
        ),
        f(
            "methods.decode-defaults",
            Must,
            "§3.2",
            "null start/limit/scope mean their defaults; 1.0 is an integer",
            decode_defaults,
        ),
        f(
            "ids.duplicate-in-flight",
            Must,
            "§7.2",
            "a duplicate in-flight id is rejected without touching the original",
            duplicate_in_flight,
        ),
        f(
            "ids.reuse-after-response",
            Must,
            "§7.2",
            "ids are reusable after success and after failure",
            id_reuse,
        ),
        f(
            "capacity.32-plus-interrupt",
            Must,
            "§7.3",
            "33rd operation gets capacity; the reserved interrupt still runs",
            capacity,
        ),
        f(
            "events.mode-none",
            Must,
            "§4.7",
            "set_events none suppresses only session_event frames",
            events_none,
        ),
        f(
            "events.direct-prompt-order",
            Must,
            "§9.3",
            "a direct prompt emits the reference event order",
            event_order,
        ),
        f(
            "completion.watch",
            Must,
            "§8",
            "a completion watch returns revision, message count and text",
            completion_watch,
        ),
        f(
            "completion.inactive-watch",
            Must,
            "§8",
            "awaiting an unknown watch fails with operation_failed",
            inactive_watch,
        ),
        f(
            "paging.messages",
            Must,
            "§4.2",
            "message pages follow the paging arithmetic",
            paging_messages,
        ),
        f(
            "paging.outcomes",
            Must,
            "§4.3",
            "outcome pages follow the paging arithmetic",
            paging_outcomes,
        ),
        f(
            "prompt.direct-while-running",
            Must,
            "§4.4",
            "a direct prompt while running fails with operation_failed",
            prompt_while_running,
        ),
        f(
            "prompt.follow-up-while-idle",
            Should,
            "§4.4",
            "follow_up while idle stays queued and does not start a run",
            follow_up_idle,
        ),
        f(
            "interrupt.run",
            Must,
            "§4.5",
            "interrupt aborts a run and answers after it settles",
            interrupt_run,
        ),
        f(
            "models.list",
            Must,
            "§4.10",
            "model.list returns public descriptors with configured, no baseUrl",
            model_list,
        ),
        f(
            "models.select",
            Must,
            "§4.11",
            "model.select selects a listed model, not_found otherwise",
            model_select,
        ),
        f(
            "thinking.list-select",
            Must,
            "§4.12",
            "thinking.list and thinking.select",
            thinking,
        ),
        f(
            "commands.list-invoke",
            Must,
            "§4.8",
            "command.list is an array; unknown names are not_found",
            commands,
        ),
        f(
            "shutdown.eof",
            Must,
            "§7.5",
            "EOF exits 0 promptly with nothing but frames on stdout",
            shutdown_eof,
        ),
        f(
            "shutdown.eof-during-run",
            Must,
            "§7.5",
            "EOF during a run interrupts it and exits 0",
            shutdown_eof_running,
        ),
        f(
            "shutdown.sigterm",
            Must,
            "§7.5",
            "SIGTERM exits 143",
            shutdown_sigterm,
        ),
        f(
            "shutdown.sigint",
            Should,
            "§7.5",
            "SIGINT exits 130",
            shutdown_sigint,
        ),
        f(
            "cli.positional-prompt",
            Must,
            "§1",
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
            "§1 §2",
            format!(
                "all {} frames: compact JSON + LF, version 1, contiguous sequences, known types",
                frames.len()
            ),
            framing,
            framing_transcript,
        ),
        result(
            "frames.schema",
            "§2",
            format!("all {} frames match docs/rpc-schema.json", frames.len()),
            schema,
            schema_transcript,
        ),
    ]
}
