//! Finding journals: the session directory of a cwd, headers, and the latest for `--continue`.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::SessionHeader;

/// At most this many journals are considered by `--continue`.
pub(super) const CONTINUE_CANDIDATES: usize = 4096;
/// Of which at most this many headers are read, newest first.
pub(super) const CONTINUE_PREVIEWS: usize = 200;

/// The newest journal in `dir` whose header cwd equals `cwd` (`-c/--continue`).
pub fn find_latest_for_cwd(dir: &Path, cwd: &Path) -> Option<PathBuf> {
    let read = std::fs::read_dir(dir).ok()?;
    let mut candidates: Vec<(std::time::SystemTime, PathBuf)> = read
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .take(CONTINUE_CANDIDATES)
        .collect();
    candidates.sort_by_key(|candidate| std::cmp::Reverse(candidate.0));
    let wanted = cwd.display().to_string();
    candidates
        .into_iter()
        .take(CONTINUE_PREVIEWS)
        .find(|(_, path)| read_header(path).is_some_and(|h| h.cwd == wanted))
        .map(|(_, path)| path)
}

/// Reads only the first line of a journal.
pub fn read_header(path: &Path) -> Option<SessionHeader> {
    use std::io::BufRead;
    let (file, _) = zi_os::config_file::open_regular(path).ok()??;
    let mut line = Vec::new();
    std::io::BufReader::new(file)
        .take(64 * 1024)
        .read_until(b'\n', &mut line)
        .ok()?;
    serde_json::from_slice(&line).ok()
}

/// `<agentDir>/sessions/--<cwd with / \ : replaced by ->--`.
pub fn default_session_dir(agent_dir: &Path, cwd: &Path) -> PathBuf {
    let text = cwd.display().to_string();
    let trimmed = text
        .strip_prefix('/')
        .or_else(|| text.strip_prefix('\\'))
        .unwrap_or(&text);
    let encoded: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    agent_dir.join("sessions").join(format!("--{encoded}--"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_dir_encoding_matches_the_reference() {
        assert_eq!(
            default_session_dir(Path::new("/a"), Path::new("/home/u/proj")),
            PathBuf::from("/a/sessions/--home-u-proj--")
        );
    }
}
