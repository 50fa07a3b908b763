//! Command output while a `bash` call runs (docs/acp.md#command-output).
//!
//! zi's `bash` reports progress at most every 250 ms as the *tail* of the output so far (the
//! last 2,000 lines / 50 KiB) plus the total byte count: re-sending that would cost bytes
//! quadratic in a long command's output (the failure a codex-acp user measured at ~890 MB for one
//! command). So the mapper sends:
//!
//! - to a client that advertises Zed's `_meta.terminal_output`, only the new bytes since the last
//!   report ([`Deltas`]), as `_meta.terminal_output.data`;
//! - to other clients, a bounded tail (the last 64 lines, at most 8 KiB) that replaces the
//!   previous one.
//!
//! Either way the bytes sent are linear in the command's output.

/// Lines of the tail shown to clients without terminal output.
const TAIL_LINES: usize = 64;
/// Bytes of that tail at most.
const TAIL_BYTES: usize = 8 * 1024;

/// The bytes of each report that the client has not seen, per call.
#[derive(Debug, Default)]
pub struct Deltas {
    /// The previous report's tail and the output byte count it covered.
    previous: String,
    previous_total: u64,
}

impl Deltas {
    /// The new output of a report whose tail is `tail` and whose output so far is `total` bytes.
    /// The tail normally extends the previous one; once the window slides (or a lossy UTF-8
    /// boundary changed), the last `total − previous total` bytes of the tail are the new
    /// ones, and a gap the tail no longer holds is named instead of shown.
    pub fn next(&mut self, tail: &str, total: u64) -> String {
        let new_bytes = total.saturating_sub(self.previous_total);
        let delta = if let Some(rest) = tail.strip_prefix(self.previous.as_str()) {
            rest.to_string()
        } else if new_bytes as usize > tail.len() {
            let missing = new_bytes as usize - tail.len();
            format!("[… {missing} bytes not shown …]\n{tail}")
        } else {
            let mut start = tail.len() - new_bytes as usize;
            while !tail.is_char_boundary(start) {
                start += 1;
            }
            tail[start..].to_string()
        };
        self.previous = tail.to_string();
        self.previous_total = total;
        delta
    }
}

/// The last [`TAIL_LINES`] lines of `tail`, at most [`TAIL_BYTES`], fenced as a code block.
pub fn bounded_tail(tail: &str) -> String {
    let trimmed = tail.trim_end_matches('\n');
    let mut start = trimmed.len();
    for _ in 0..TAIL_LINES {
        match trimmed[..start].rfind('\n') {
            Some(at) => start = at,
            None => {
                start = 0;
                break;
            }
        }
    }
    let mut lines = trimmed[start..].trim_start_matches('\n');
    if lines.len() > TAIL_BYTES {
        let mut cut = lines.len() - TAIL_BYTES;
        while !lines.is_char_boundary(cut) {
            cut += 1;
        }
        lines = &lines[cut..];
    }
    format!("```\n{lines}\n```")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_tail_yields_only_its_new_bytes() {
        let mut deltas = Deltas::default();
        assert_eq!(deltas.next("one\n", 4), "one\n");
        assert_eq!(deltas.next("one\ntwo\n", 8), "two\n");
        assert_eq!(deltas.next("one\ntwo\n", 8), "");
    }

    #[test]
    fn a_sliding_window_yields_the_last_new_bytes_and_names_gaps() {
        let mut deltas = Deltas::default();
        deltas.next("aaaa", 4);
        // The window slid: the tail is the last 4 bytes of 10.
        assert_eq!(deltas.next("bbcc", 10), "[… 2 bytes not shown …]\nbbcc");
        // The window slid by 2 new bytes.
        assert_eq!(deltas.next("ccdd", 12), "dd");
    }

    #[test]
    fn a_delta_never_splits_a_character() {
        let mut deltas = Deltas::default();
        deltas.next("xé", 3);
        // Lossy decoding changed the previous tail; 1 new byte points inside `é`.
        assert_eq!(deltas.next("éz", 4), "z");
    }

    #[test]
    fn the_tail_is_bounded_in_lines_and_bytes() {
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = bounded_tail(&many);
        assert!(tail.starts_with("```\nline 36\n"), "{tail}");
        assert!(tail.ends_with("line 99\n```"));
        let wide = "é".repeat(10_000);
        let tail = bounded_tail(&wide);
        assert!(tail.len() <= TAIL_BYTES + 8);
    }
}
