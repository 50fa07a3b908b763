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
fn read_header(path: &Path) -> Option<SessionHeader> {
    use std::io::BufRead;
    let (file, _) = zi_os::config_file::open_regular(path).ok()??;
    let mut line = Vec::new();
    std::io::BufReader::new(file)
        .take(64 * 1024)
        .read_until(b'\n', &mut line)
        .ok()?;
    serde_json::from_slice(&line).ok()
}

/// Longest file name most file systems accept (Linux `NAME_MAX`).
const NAME_MAX: usize = 255;
/// Hex digits of the cwd's SHA-256 that end a shortened directory name (64 bits).
const HASH_DIGITS: usize = 16;

/// `<agentDir>/sessions/--<cwd with / \ : replaced by ->--`. A name over 255 bytes (a cwd
/// deeper than about 250 bytes) could not be created, so it keeps the first bytes of the
/// encoded cwd and ends with 16 hex digits of the cwd's SHA-256: `--<prefix>-<hash>--`, 255
/// bytes, the same for the same cwd (docs/configuration.md#session-journals).
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
    agent_dir
        .join("sessions")
        .join(directory_name(&encoded, &text))
}

/// `--<encoded>--`, or its bounded form for a long cwd.
fn directory_name(encoded: &str, cwd: &str) -> String {
    let name = format!("--{encoded}--");
    if name.len() <= NAME_MAX {
        return name;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, cwd.as_bytes());
    let hash: String = digest.as_ref()[..HASH_DIGITS / 2]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    // "--" + prefix + "-" + hash + "--", cut on a character boundary.
    let room = NAME_MAX - 2 - 1 - HASH_DIGITS - 2;
    let prefix = zi_protocol::results::clip_utf8(encoded, room).0;
    format!("--{prefix}-{hash}--")
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

    #[test]
    fn a_long_cwd_gets_a_bounded_name_of_its_own() {
        let agent = Path::new("/a");
        // 252 bytes of cwd: the plain name is exactly 255 bytes and kept.
        let fits = format!("/{}", "d".repeat(251));
        let name = default_session_dir(agent, Path::new(&fits));
        assert_eq!(name.file_name().unwrap().len(), 255, "{}", name.display());
        assert_eq!(
            name,
            agent.join("sessions").join(format!("--{}--", &fits[1..]))
        );
        let long = format!("/{}/é{}", "x".repeat(200), "y".repeat(300));
        let other = format!("{long}z");
        let first = default_session_dir(agent, Path::new(&long));
        let again = default_session_dir(agent, Path::new(&long));
        let second = default_session_dir(agent, Path::new(&other));
        let name = first.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 255, "{name}");
        assert!(
            name.starts_with(&format!("--{}-é", "x".repeat(200))),
            "{name}"
        );
        assert!(name.ends_with("--"), "{name}");
        assert_eq!(first, again, "the same cwd finds the same directory");
        assert_ne!(
            first, second,
            "cwds sharing the prefix get different directories"
        );
        // A cut inside a multi-byte character keeps the name valid UTF-8.
        let wide = format!("/{}", "é".repeat(200));
        let name = default_session_dir(agent, Path::new(&wide));
        assert!(name.file_name().unwrap().len() <= 255);
        assert!(name.file_name().unwrap().to_str().is_some());
    }
}
