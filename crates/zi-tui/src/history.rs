//! Prompt history for Up/Down, persisted per agent directory as JSON lines (one JSON string per
//! submitted prompt) in `interactive-history.jsonl`, so multi-line prompts survive intact.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name under the agent directory.
pub const HISTORY_FILE: &str = "interactive-history.jsonl";
/// Entries kept in memory (and read back at start-up).
const KEEP: usize = 1000;
/// Longer prompts are used but not persisted (a 100 KiB paste does not bloat the history).
const MAX_PERSISTED_BYTES: usize = 64 * 1024;

pub struct History {
    path: Option<PathBuf>,
    entries: Vec<String>,
    /// While browsing: the index shown and the draft to return to.
    browsing: Option<(usize, String)>,
}

impl History {
    /// Loads the history of `agent_dir` (none when `agent_dir` is `None`); an unreadable file is
    /// an empty history.
    pub fn load(agent_dir: Option<&Path>) -> History {
        let path = agent_dir.map(|dir| dir.join(HISTORY_FILE));
        let mut entries: Vec<String> = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|text| {
                text.lines()
                    .filter_map(|line| serde_json::from_str::<String>(line).ok())
                    .collect()
            })
            .unwrap_or_default();
        if entries.len() > KEEP {
            entries.drain(..entries.len() - KEEP);
        }
        History {
            path,
            entries,
            browsing: None,
        }
    }

    #[cfg(test)]
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Records a submitted prompt (consecutive duplicates once).
    pub fn record(&mut self, text: &str) {
        self.browsing = None;
        if text.trim().is_empty() || self.entries.last().is_some_and(|last| last == text) {
            return;
        }
        self.entries.push(text.to_string());
        if self.entries.len() > KEEP {
            self.entries.remove(0);
        }
        if text.len() > MAX_PERSISTED_BYTES {
            return;
        }
        if let Some(path) = &self.path
            && let Ok(line) = serde_json::to_string(text)
        {
            let written = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
            if let Err(error) = written {
                tracing::warn!("could not append to {}: {error}", path.display());
            }
        }
    }

    /// The previous entry, remembering `draft` when browsing starts.
    pub fn previous(&mut self, draft: &str) -> Option<String> {
        let index = match &self.browsing {
            None => self.entries.len().checked_sub(1)?,
            Some((0, _)) => return None,
            Some((i, _)) => i - 1,
        };
        let draft = match self.browsing.take() {
            Some((_, saved)) => saved,
            None => draft.to_string(),
        };
        self.browsing = Some((index, draft));
        self.entries.get(index).cloned()
    }

    /// The next entry, or the draft after the newest one.
    pub fn next(&mut self) -> Option<String> {
        let (index, draft) = self.browsing.take()?;
        if index + 1 < self.entries.len() {
            self.browsing = Some((index + 1, draft));
            self.entries.get(index + 1).cloned()
        } else {
            Some(draft)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsing_returns_to_the_draft_and_persists() {
        let dir = std::env::temp_dir().join(format!("zi-tui-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut history = History::load(Some(&dir));
        history.record("first");
        history.record("second\nline");
        assert_eq!(history.previous("draft").as_deref(), Some("second\nline"));
        assert_eq!(history.previous("ignored").as_deref(), Some("first"));
        assert_eq!(history.previous("ignored"), None);
        assert_eq!(history.next().as_deref(), Some("second\nline"));
        assert_eq!(history.next().as_deref(), Some("draft"));
        let reloaded = History::load(Some(&dir));
        assert_eq!(reloaded.entries(), ["first", "second\nline"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
