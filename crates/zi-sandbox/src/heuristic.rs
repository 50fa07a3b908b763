//! The likely-sandbox-denied heuristic (docs/approvals.md#what-a-confined-command-gets, after
//! Codex's `is_likely_sandbox_denied`).

/// Output phrases that suggest a sandbox denial (compared case-insensitively).
const DENIAL_PHRASES: [&str; 7] = [
    "operation not permitted",
    "permission denied",
    "read-only file system",
    "seccomp",
    "sandbox",
    "landlock",
    "failed to write file",
];

/// Whether a finished sandboxed command probably failed because of the sandbox: it exited
/// non-zero with one of the phrases in its output, or died of `SIGSYS`. Timeouts never count.
pub fn likely_sandbox_denied(
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    output: &str,
) -> bool {
    if timed_out {
        return false;
    }
    if signal == Some(libc::SIGSYS) {
        return true;
    }
    if !matches!(exit_code, Some(code) if code != 0) {
        return false;
    }
    let lower = output.to_lowercase();
    DENIAL_PHRASES.iter().any(|phrase| lower.contains(phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_with_a_denial_phrase_or_sigsys_count() {
        let denied = "touch: cannot touch '/root/x': Permission denied";
        assert!(likely_sandbox_denied(Some(1), None, false, denied));
        assert!(likely_sandbox_denied(
            Some(2),
            None,
            false,
            "READ-ONLY FILE SYSTEM"
        ));
        assert!(!likely_sandbox_denied(Some(0), None, false, denied));
        assert!(!likely_sandbox_denied(None, None, true, denied));
        assert!(!likely_sandbox_denied(Some(1), None, false, "no such file"));
        assert!(likely_sandbox_denied(None, Some(libc::SIGSYS), false, ""));
    }
}
