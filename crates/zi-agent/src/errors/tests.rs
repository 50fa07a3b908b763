//! The busy grid against docs/rpc.md#admission-while-busy: every operation × activity renders
//! the table's text, or is one the table admits.

use std::collections::HashMap;

use super::{Activity, Operation, SessionError};

const RPC_MD: &str = include_str!("../../../../docs/rpc.md");
const SECTION: &str = "### Admission while busy";

/// The section's text, up to the next heading.
fn section() -> &'static str {
    let start = RPC_MD
        .find(SECTION)
        .unwrap_or_else(|| panic!("docs/rpc.md has no section {SECTION:?}"));
    let section = &RPC_MD[start + SECTION.len()..];
    &section[..section.find("\n#").unwrap_or(section.len())]
}

fn operation(row: &str) -> Operation {
    match row {
        "direct prompt" => Operation::Prompt,
        "`steer`, `follow_up`" => Operation::QueueInput,
        "`model.select`" => Operation::SelectModel,
        "`thinking.select`" => Operation::SelectThinking,
        "`command.invoke`" => Operation::InvokeCommand,
        "`session.compact`" => Operation::Compact,
        "extension custom message (append or trigger)" => Operation::CustomMessage,
        other => panic!("docs/rpc.md's busy table has an unknown row {other:?}"),
    }
}

fn activity(column: &str) -> Activity {
    match column {
        "`running`" => Activity::Running,
        "`aborting`" => Activity::Aborting,
        "`extension_command`" => Activity::ExtensionCommand,
        "`compacting`" => Activity::Compacting,
        other => panic!("docs/rpc.md's busy table has an unknown column {other:?}"),
    }
}

/// The table's cells: the text of each refusal, `None` where the operation is admitted
/// (`queued`). A cell's text is its first code span; `…` repeats the words of the row's first
/// cell up to ` while`, and `same` repeats the cell before it.
fn documented() -> HashMap<(Operation, Activity), Option<String>> {
    let mut rows = section().lines().filter(|line| line.starts_with('|'));
    let header: Vec<&str> = rows.next().expect("a header row").split(" | ").collect();
    let columns: Vec<Activity> = header[1..]
        .iter()
        .map(|cell| activity(cell.trim_matches(['|', ' '])))
        .collect();
    let mut cells = HashMap::new();
    for line in rows.filter(|line| !line.starts_with("| ---")) {
        let row: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let operation = operation(row[0]);
        let mut first_words = String::new();
        let mut previous: Option<String> = None;
        for (cell, activity) in row[1..].iter().zip(&columns) {
            let text = match *cell {
                "queued" => None,
                "same" => previous.clone(),
                cell => {
                    let span = cell.split('`').nth(1).expect("a code span");
                    let text = span.replace('…', first_words.trim_end());
                    if first_words.is_empty() {
                        first_words = text[..text.find(" while").expect("while")].to_string();
                    }
                    Some(text)
                }
            };
            previous = text.clone();
            cells.insert((operation, *activity), text);
        }
    }
    cells
}

/// Walks the whole grid: each cell of the table is the `Busy` text, the two queued-input
/// refusals are the texts under the table, and the rest are the pairs the session admits.
#[test]
fn busy_texts_are_the_documented_table() {
    let table = documented();
    // The prose wraps lines inside code spans.
    let below = section().split_whitespace().collect::<Vec<_>>().join(" ");
    for operation in Operation::ALL {
        for activity in Activity::ALL {
            let text = SessionError::Busy {
                operation,
                activity,
            }
            .to_string();
            let expected = match (operation, activity) {
                (Operation::InvokeCommand | Operation::Compact, Activity::QueuedInput) => {
                    assert!(
                        below.contains(&format!("`{text}`")),
                        "docs/rpc.md#admission-while-busy does not name {text:?}"
                    );
                    continue;
                }
                // Only `command.invoke` and `session.compact` need empty queues.
                (_, Activity::QueuedInput) => continue,
                cell => table
                    .get(&cell)
                    .unwrap_or_else(|| panic!("the busy table has no cell for {cell:?}")),
            };
            match expected {
                Some(expected) => assert_eq!(&text, expected, "{operation:?} × {activity:?}"),
                // Admitted: a queue delivery during a run.
                None => assert_eq!(
                    (operation, activity),
                    (Operation::QueueInput, Activity::Running)
                ),
            }
        }
    }
    assert_eq!(table.len(), 7 * 4, "the table has a cell for each pair");
}

/// The texts a client matches on today, spelled out so that a change to the rendering is seen
/// in review, not only when the docs change with it.
#[test]
fn busy_texts_are_unchanged() {
    let busy = |operation, activity| {
        SessionError::Busy {
            operation,
            activity,
        }
        .to_string()
    };
    use Activity::*;
    use Operation::*;
    let cases = [
        (
            Prompt,
            Running,
            "streamingBehavior is required while the agent is running",
        ),
        (
            Prompt,
            Aborting,
            "Cannot prompt while the agent is aborting",
        ),
        (
            InvokeCommand,
            Aborting,
            "Cannot run an extension command while the agent is running",
        ),
        (
            InvokeCommand,
            ExtensionCommand,
            "Cannot run an extension command while another extension command is active",
        ),
        (
            InvokeCommand,
            QueuedInput,
            "Cannot run an extension command while queued input is pending",
        ),
        (
            CustomMessage,
            Aborting,
            "Cannot queue input while the agent is aborting",
        ),
        (
            CustomMessage,
            ExtensionCommand,
            "Cannot trigger a turn while an extension command is active",
        ),
        (
            CustomMessage,
            Compacting,
            "Cannot append or trigger a custom message while context compaction is active",
        ),
        (
            SelectThinking,
            Compacting,
            "Cannot change thinking level while context compaction is active",
        ),
        (
            Compact,
            QueuedInput,
            "Cannot compact while queued input is pending",
        ),
    ];
    for (operation, activity, text) in cases {
        assert_eq!(busy(operation, activity), text);
    }
}

/// The one conversion onto RPC response errors: the message is the `Display`, the code
/// `not_found` only for an unknown model, command, approval or fork entry
/// (docs/rpc.md#error-codes).
#[test]
fn session_errors_pick_their_rpc_code() {
    use zi_journal::fork::ForkError;
    use zi_protocol::frame::{ResponseError, ResponseErrorCode};

    use crate::session::SelectModelError;
    use crate::session::approvals::{ApprovalsError, RespondError};
    use crate::session::extension::InvokeError;

    let busy = SessionError::Busy {
        operation: Operation::SelectModel,
        activity: Activity::Running,
    };
    let cases: Vec<(ResponseError, ResponseErrorCode, &str)> = vec![
        (
            busy.clone().into(),
            ResponseErrorCode::OperationFailed,
            "Cannot change model while the agent is running",
        ),
        (
            SessionError::Fork(ForkError::NotFound("e1".into())).into(),
            ResponseErrorCode::NotFound,
            "Entry not found: e1",
        ),
        (
            SessionError::Fork(ForkError::Failed("disk full".into())).into(),
            ResponseErrorCode::OperationFailed,
            "disk full",
        ),
        (
            InvokeError::NotFound("Command not found: x".into()).into(),
            ResponseErrorCode::NotFound,
            "Command not found: x",
        ),
        (
            InvokeError::Failed(SessionError::CommandArgumentsTooLarge).into(),
            ResponseErrorCode::OperationFailed,
            "Extension command arguments exceed 256 KiB",
        ),
        (
            SelectModelError::NotFound("Model not found: a/b".into()).into(),
            ResponseErrorCode::NotFound,
            "Model not found: a/b",
        ),
        (
            SelectModelError::Failed(busy).into(),
            ResponseErrorCode::OperationFailed,
            "Cannot change model while the agent is running",
        ),
        (
            RespondError::NotFound("Approval not found: a".into()).into(),
            ResponseErrorCode::NotFound,
            "Approval not found: a",
        ),
        (
            RespondError::Failed("Approval already resolved: a".into()).into(),
            ResponseErrorCode::OperationFailed,
            "Approval already resolved: a",
        ),
        (
            ApprovalsError::Pending(2).into(),
            ResponseErrorCode::OperationFailed,
            "Cannot disable approvals while 2 approval requests are pending",
        ),
    ];
    for (error, code, message) in cases {
        assert_eq!((error.code, error.message.as_str()), (code, message));
    }
}
