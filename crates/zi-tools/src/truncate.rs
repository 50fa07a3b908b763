//! Output limits shared by the tools: 2,000 lines / 50 KiB, head-first for files and diffs,
//! tail-first for command output.

/// Most lines a tool result shows.
pub const MAX_LINES: usize = 2000;
/// Most bytes a tool result shows (51,200).
pub const MAX_BYTES: usize = 50 * 1024;

/// The last lines of `text` that fit both limits. When even the final line is over the byte
/// limit, its last `max_bytes` bytes (at a character boundary). Returns the kept text and
/// whether anything was cut.
pub fn tail(text: &str, max_lines: usize, max_bytes: usize) -> (&str, bool) {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() {
        return (body, false);
    }
    let mut start = body.len();
    let mut lines = 0;
    let mut search_end = body.len();
    loop {
        let line_start = body[..search_end].rfind('\n').map_or(0, |i| i + 1);
        if lines == max_lines || body.len() - line_start > max_bytes {
            if lines == 0 {
                let mut cut = body.len() - max_bytes.min(body.len());
                while !body.is_char_boundary(cut) {
                    cut += 1;
                }
                return (&body[cut..], true);
            }
            return (&body[start..], true);
        }
        start = line_start;
        lines += 1;
        if line_start == 0 {
            return (body, false);
        }
        search_end = line_start - 1;
    }
}

/// Clips each line to `max_line` bytes, noting how much was elided.
pub fn elide_long_lines(text: &str, max_line: usize) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_BYTES * 2));
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.len() > max_line {
            let mut end = max_line;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&line[..end]);
            out.push_str(&format!("… [{} bytes elided]", line.len() - end));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// The first lines of `text` that fit both limits, and whether anything was cut.
pub fn head(text: &str, max_lines: usize, max_bytes: usize) -> (&str, bool) {
    let mut end = 0;
    for (count, line) in text.split_inclusive('\n').enumerate() {
        let content = line.strip_suffix('\n').unwrap_or(line);
        if count == max_lines || end + content.len() > max_bytes {
            let kept = text[..end].strip_suffix('\n').unwrap_or(&text[..end]);
            return (kept, true);
        }
        end += line.len();
    }
    (text, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_whole_lines_within_limits() {
        assert_eq!(tail("a\nb\nc\n", 2, 100), ("b\nc", true));
        assert_eq!(tail("a\nb\nc", 3, 100), ("a\nb\nc", false));
        assert_eq!(tail("a\nb\nc\n", 3, 100), ("a\nb\nc", false));
        assert_eq!(tail("aaaa\nbb", 5, 4), ("bb", true));
        assert_eq!(tail("aaaa\nbb", 5, 7), ("aaaa\nbb", false));
        assert_eq!(tail("xyzxyz", 5, 4), ("zxyz", true));
        assert_eq!(tail("", 5, 4), ("", false));
    }

    #[test]
    fn head_keeps_whole_lines_within_limits() {
        assert_eq!(head("a\nb\nc", 2, 100), ("a\nb", true));
        assert_eq!(head("a\nb\nc", 3, 100), ("a\nb\nc", false));
        assert_eq!(head("aa\nbb\ncc", 9, 5), ("aa\nbb", true));
        assert_eq!(head("aa\nbb", 9, 5), ("aa\nbb", false));
    }

    #[test]
    fn long_lines_are_elided() {
        assert_eq!(
            elide_long_lines("abcdef\nab", 3),
            "abc… [3 bytes elided]\nab"
        );
    }
}
