//! Scans of what zi wrote (frames, stderr, files) for bytes it must never write, such as secrets.

use std::path::Path;

use crate::dirs::all_files;
use crate::harness::Harness;

/// Everything zi wrote: its frames, its stderr and every file below `dirs` (read lossily as
/// UTF-8), each with its source ("frame", "stderr" or the file's path).
pub fn written(p: &Harness, dirs: &[&Path]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = p
        .frames()
        .iter()
        .map(|f| ("frame".to_string(), f.to_string()))
        .collect();
    out.push(("stderr".into(), p.stderr_text()));
    for dir in dirs {
        for file in all_files(dir) {
            out.push((
                file.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned(),
            ));
        }
    }
    out
}

/// Fails, naming the source, when any of `secrets` appears in `written`.
pub fn assert_no_secrets(written: &[(String, String)], secrets: &[&str]) {
    for (source, text) in written {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "{source} contains {secret:?}: {text}"
            );
        }
    }
}
