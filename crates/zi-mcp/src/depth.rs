//! The nesting bound of what a server sends (docs/mcp.md#bounds). The SDK reads each
//! message with serde_json, which refuses anything nested deeper than 128 levels — and one
//! refused message ends the whole connection, so one tool with a hostile schema would take
//! every tool of its server with it. Before the SDK reads a message, every array or object that
//! opens deeper than [`MAX_MESSAGE_DEPTH`] levels is replaced by the string `zi: nested deeper
//! than 100 levels`: the message stays valid JSON, and what was cut shows up where it was (a
//! tool whose schema was cut is refused by the schema depth bound, naming the tool).
//!
//! [`DepthGuard`] works on a byte stream (a stdio server's lines), [`guard`] on one whole
//! message (an HTTP body, an SSE event's data).

use std::borrow::Cow;

/// Containers a message may nest (the message object itself is level 1).
pub(crate) const MAX_MESSAGE_DEPTH: usize = 100;
/// The JSON string a container nested deeper than [`MAX_MESSAGE_DEPTH`] becomes.
const TOO_DEEP_JSON: &[u8] = b"\"zi: nested deeper than 100 levels\"";

/// Rewrites JSON, one container too deep at a time. In the line form (stdio framing) a line end
/// ends a message, whatever state it left; in a whole message it is white space.
#[derive(Debug, Default)]
pub(crate) struct DepthGuard {
    lines: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Inside a container being cut: the depth it opened at.
    cutting: Option<usize>,
}

/// What one byte was, as far as nesting goes.
enum Token {
    /// A container opened at this depth.
    Open(usize),
    /// The container at this depth closed.
    Close(usize),
    Other,
}

impl DepthGuard {
    /// The line form: a stream of newline-delimited messages.
    pub(crate) fn lines() -> DepthGuard {
        DepthGuard {
            lines: true,
            ..DepthGuard::default()
        }
    }

    /// Advances over one byte outside a line end; strings are skipped.
    fn step(&mut self, byte: u8) -> Token {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return Token::Other;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                self.depth += 1;
                return Token::Open(self.depth);
            }
            b'}' | b']' => {
                let closing = self.depth;
                self.depth = self.depth.saturating_sub(1);
                return Token::Close(closing);
            }
            _ => {}
        }
        Token::Other
    }

    /// Appends `input`, rewritten, to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &byte in input {
            if byte == b'\n' && self.lines {
                *self = DepthGuard::lines();
                out.push(byte);
                continue;
            }
            let keep = self.cutting.is_none();
            match self.step(byte) {
                Token::Open(depth) if keep && depth > MAX_MESSAGE_DEPTH => {
                    self.cutting = Some(depth);
                    out.extend_from_slice(TOO_DEEP_JSON);
                    continue;
                }
                Token::Close(depth) if self.cutting == Some(depth) => {
                    self.cutting = None;
                    continue;
                }
                _ => {}
            }
            if keep {
                out.push(byte);
            }
        }
    }
}

/// One whole message, rewritten by [`DepthGuard`]; borrowed when nothing nests that deep.
pub(crate) fn guard(message: &[u8]) -> Cow<'_, [u8]> {
    let mut scan = DepthGuard::default();
    let too_deep = message
        .iter()
        .any(|&byte| matches!(scan.step(byte), Token::Open(depth) if depth > MAX_MESSAGE_DEPTH));
    if !too_deep {
        return Cow::Borrowed(message);
    }
    let mut out = Vec::with_capacity(message.len());
    DepthGuard::default().feed(message, &mut out);
    Cow::Owned(out)
}

/// How deep `value` nests: a scalar is 0, `{}` and `[]` are 1.
pub(crate) fn value_depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn shallow_messages_pass_untouched() {
        let text = r#"{"a":["[{not a container}]",{"b":"\"["}]}"#;
        assert!(matches!(guard(text.as_bytes()), Cow::Borrowed(_)));
    }

    #[test]
    fn a_container_over_the_bound_becomes_a_string() {
        let message = format!(r#"{{"x":{},"y":"after"}}"#, nested(300));
        let guarded = guard(message.as_bytes());
        let value: serde_json::Value = serde_json::from_slice(&guarded)
            .unwrap_or_else(|e| panic!("valid JSON after the guard: {e}"));
        assert_eq!(value["y"], "after");
        assert_eq!(value_depth(&value), MAX_MESSAGE_DEPTH);
        let mut inner = &value["x"];
        while let Some(first) = inner.get(0) {
            inner = first;
        }
        let too_deep: serde_json::Value =
            serde_json::from_slice(TOO_DEEP_JSON).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(*inner, too_deep);
        assert_eq!(
            too_deep,
            format!("zi: nested deeper than {MAX_MESSAGE_DEPTH} levels")
        );
    }

    #[test]
    fn a_whole_message_reads_line_ends_as_white_space() {
        // Pretty-printed (an HTTP body, a multi-line SSE event): the line ends are inside it.
        let message = format!(
            "{{\n\"x\": {},\n\"y\": \"after\"\n}}",
            nested(300).replace('[', "[\n")
        );
        let value: serde_json::Value = serde_json::from_slice(&guard(message.as_bytes()))
            .unwrap_or_else(|e| panic!("valid JSON after the guard: {e}"));
        assert_eq!(value["y"], "after");
        assert_eq!(value_depth(&value), MAX_MESSAGE_DEPTH);
    }

    #[test]
    fn the_stream_form_cuts_across_chunks_and_resets_at_line_ends() {
        let line = format!("{{\"x\":{}}}\n{{\"ok\":[1]}}\n", nested(150));
        let mut guard = DepthGuard::lines();
        let mut out = Vec::new();
        for chunk in line.as_bytes().chunks(7) {
            guard.feed(chunk, &mut out);
        }
        let text = String::from_utf8(out).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let first: serde_json::Value =
            serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value_depth(&first), MAX_MESSAGE_DEPTH);
        assert_eq!(lines[1], r#"{"ok":[1]}"#);
        // A truncated message does not leak its state into the next line.
        let mut out = Vec::new();
        guard.feed(format!("{}\n[2]\n", "[".repeat(120)).as_bytes(), &mut out);
        assert!(
            String::from_utf8(out)
                .unwrap_or_default()
                .ends_with("\n[2]\n")
        );
    }
}
