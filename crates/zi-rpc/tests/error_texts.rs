//! docs/rpc.md#error-texts-of-the-zi-extensions lists every error text zi chose for its
//! additive methods (issue 23 L7). This test renders each text from the code that sends it —
//! the constants, the error types' `Display` and the journal's message functions, given the
//! placeholders the table uses — and compares the table with them row by row, both ways: a
//! text changed in the code or in the table, a text added to either, fails it.

use std::path::PathBuf;

use zi_agent::compaction;
use zi_agent::errors::{Activity, Operation, SessionError};
use zi_journal::fork::ForkError;
use zi_journal::messages;
use zi_journal::stats::TallyError;
use zi_protocol::errors::{self as protocol, prompt_image_problem};
use zi_protocol::image::ImageError;

const RPC_MD: &str = include_str!("../../../docs/rpc.md");
const SECTION: &str = "## Error texts of the zi extensions";

/// `(method, code, message)` of every row of the table; a row with an empty method cell
/// belongs to the method above it, and a message cell's text is its first code span.
fn documented() -> Vec<(String, String, String)> {
    let start = RPC_MD
        .find(SECTION)
        .unwrap_or_else(|| panic!("docs/rpc.md has no section {SECTION:?}"));
    let section = &RPC_MD[start + SECTION.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut rows = Vec::new();
    let mut method = String::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells.len() != 3 || cells[0] == "method" || cells[0].starts_with("---") {
            continue;
        }
        if !cells[0].is_empty() {
            method = cells[0].replace('`', "");
        }
        let code = cells[1].trim_matches('`').to_string();
        let message = cells[2]
            .strip_prefix('`')
            .and_then(|rest| rest.split('`').next())
            .unwrap_or_else(|| panic!("no message in {line:?}"))
            .to_string();
        rows.push((method.clone(), code, message));
    }
    rows
}

/// Every text zi chooses for the additive methods, rendered from the code.
// Long on purpose: one row per documented error text, in the order of the table in docs/rpc.md.
fn chosen() -> Vec<(&'static str, &'static str, String)> {
    let image = |problem: &dyn std::fmt::Display| {
        protocol::prompt_image(7, problem).replace("images[7]", "images[<i>]")
    };
    let (path, dir, cause) = ("<path>", "<dir>", "<cause>");
    let read = messages::read_failed(path, cause);
    let mut texts = vec![(
        "session.prompt images",
        "invalid_request",
        protocol::PROMPT_IMAGES.to_string(),
    )];
    for problem in [
        prompt_image_problem::NOT_AN_OBJECT,
        prompt_image_problem::UNKNOWN_FIELDS,
        prompt_image_problem::MISSING_FIELDS,
        prompt_image_problem::TYPE,
    ] {
        texts.push(("session.prompt images", "invalid_request", image(&problem)));
    }
    for problem in [
        ImageError::MimeType,
        ImageError::Base64,
        ImageError::TooLarge,
    ] {
        texts.push(("session.prompt images", "invalid_request", image(&problem)));
    }
    let rejects = SessionError::ModelRejectsImages("<provider>/<id>".into());
    texts.push((
        "session.prompt images",
        "operation_failed",
        rejects.to_string(),
    ));
    texts.push((
        "session.compact",
        "invalid_request",
        protocol::COMPACT_INSTRUCTIONS.into(),
    ));
    let busy = |activity| SessionError::Busy {
        operation: Operation::Compact,
        activity,
    };
    for error in [
        busy(Activity::Running),
        busy(Activity::Aborting),
        busy(Activity::ExtensionCommand),
        busy(Activity::Compacting),
        busy(Activity::QueuedInput),
        SessionError::NoModel,
    ] {
        texts.push(("session.compact", "operation_failed", error.to_string()));
    }
    for text in [
        compaction::NOTHING_TO_COMPACT.to_string(),
        SessionError::CompactionCancelled.to_string(),
        compaction::SUMMARY_EMPTY.to_string(),
        compaction::summary_too_large(),
        compaction::NOT_REDUCED.to_string(),
        compaction::STALE.to_string(),
        compaction::SUMMARY_ENDED.to_string(),
        compaction::SUMMARY_FAILED.to_string(),
        messages::append_failed(path, cause),
        messages::journal_full(path),
        messages::create_failed(path, cause),
    ] {
        texts.push(("session.compact", "operation_failed", text));
    }
    let missing = TallyError::NotFound {
        path: PathBuf::from(path),
        id: "<id>".into(),
    };
    texts.push(("session.get_stats", "operation_failed", read.clone()));
    texts.push(("session.get_stats", "operation_failed", missing.to_string()));
    for text in [
        protocol::SESSION_LIST_START,
        protocol::SESSION_LIST_LIMIT,
        protocol::SESSION_LIST_SCOPE,
    ] {
        texts.push(("session.list", "invalid_request", text.to_string()));
    }
    texts.push((
        "session.get_entries",
        "invalid_request",
        protocol::ENTRY_START.into(),
    ));
    texts.push((
        "session.get_entries",
        "invalid_request",
        protocol::ENTRY_LIMIT.into(),
    ));
    let too_large = SessionError::EntryPageTooLarge(7).to_string();
    for text in [
        too_large.replace("entry 7", "entry <i>"),
        read.clone(),
        messages::corrupt_line(path, "<n>", cause),
    ] {
        texts.push(("session.get_entries", "operation_failed", text));
    }
    texts.push((
        "session.fork",
        "invalid_request",
        protocol::FORK_ENTRY_ID.into(),
    ));
    let unknown = ForkError::NotFound("<entryId>".into());
    texts.push(("session.fork", "not_found", unknown.to_string()));
    for text in [
        SessionError::ForkWithoutJournal.to_string(),
        messages::fork_too_large(),
        messages::encode_failed(cause),
        read,
        messages::blobs_not_copied(dir, cause),
        messages::create_failed(path, cause),
        messages::create_dir_failed(path, dir, cause),
        messages::write_failed(path, cause),
        messages::sync_dir_failed(path, dir, cause),
    ] {
        texts.push(("session.fork", "operation_failed", text));
    }
    texts
}

#[test]
fn the_error_texts_of_the_zi_extensions_are_documented_exactly() {
    let documented = documented();
    let chosen: Vec<(String, String, String)> = chosen()
        .into_iter()
        .map(|(method, code, message)| (method.to_string(), code.to_string(), message))
        .collect();
    let missing: Vec<_> = chosen
        .iter()
        .filter(|row| !documented.contains(row))
        .collect();
    let stale: Vec<_> = documented
        .iter()
        .filter(|row| !chosen.contains(row))
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/rpc.md#error-texts-of-the-zi-extensions and the code disagree\n\
         sent by zi but not in the table: {missing:#?}\n\
         in the table but not sent: {stale:#?}"
    );
    assert_eq!(documented.len(), chosen.len(), "a row appears twice");
}
