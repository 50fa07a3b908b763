//! `session/list` and finding a journal by session id (docs/acp.md#sessions): the
//! session catalog of `session.list` (cached per directory, filtered by cwd before paging),
//! newest first, in pages of [`PAGE_SIZE`] behind an opaque cursor.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{ListSessionsResponse, SessionInfo};
use base64::Engine as _;
use serde_json::json;
use zi_journal::catalog;

use crate::factory::SessionFactory;
use crate::jsonrpc::RpcError;

/// Sessions per page.
pub const PAGE_SIZE: usize = 50;

fn dirs(factory: &dyn SessionFactory) -> Vec<PathBuf> {
    let extra = factory
        .session_dir()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| factory.agent_dir().join("sessions"));
    catalog::all_session_dirs(factory.agent_dir(), &extra)
}

fn cursor(offset: usize) -> String {
    let text = json!({"v": 1, "o": offset}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

fn offset(cursor: &str) -> Result<usize, RpcError> {
    let invalid = || RpcError::invalid_params(format!("Invalid cursor: {cursor}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid())?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if value["v"] != 1 {
        return Err(invalid());
    }
    value["o"]
        .as_u64()
        .and_then(|o| usize::try_from(o).ok())
        .ok_or_else(invalid)
}

/// One page of the catalog (blocking file I/O).
pub fn list(
    factory: &dyn SessionFactory,
    cwd: Option<&Path>,
    cursor_text: Option<&str>,
) -> Result<ListSessionsResponse, RpcError> {
    let start = match cursor_text {
        Some(text) => offset(text)?,
        None => 0,
    };
    if factory.ephemeral() {
        return Ok(ListSessionsResponse::new(Vec::new()));
    }
    let cwd_text = cwd.map(|c| c.display().to_string());
    let catalog = catalog::list(&dirs(factory), cwd_text.as_deref(), start, PAGE_SIZE);
    let next = start + catalog.sessions.len();
    let sessions = catalog
        .sessions
        .into_iter()
        .map(|summary| {
            let mut info = SessionInfo::new(summary.session_id, PathBuf::from(summary.cwd))
                .updated_at(summary.modified_at);
            if let Some(title) = crate::mapper::title_from(&summary.first_user_text) {
                info = info.title(title);
            }
            info
        })
        .collect();
    let response = ListSessionsResponse::new(sessions);
    Ok(if (next as u64) < catalog.total {
        response.next_cursor(cursor(next))
    } else {
        response
    })
}

/// The journal of `session_id`, if one exists in any session directory.
pub fn find(factory: &dyn SessionFactory, session_id: &str) -> Option<PathBuf> {
    let safe = !session_id.is_empty()
        && session_id.len() <= 128
        && session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !safe || factory.ephemeral() {
        return None;
    }
    dirs(factory)
        .into_iter()
        .map(|dir| dir.join(format!("{session_id}.jsonl")))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_invalid_params() {
        assert_eq!(offset(&cursor(150)).unwrap(), 150);
        for bad in ["", "!!", "e30", "eyJ2IjoyLCJvIjoxfQ"] {
            assert_eq!(
                offset(bad).unwrap_err().code,
                crate::jsonrpc::INVALID_PARAMS,
                "{bad}"
            );
        }
    }
}
