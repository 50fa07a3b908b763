//! Splits the client's bytes into lines (docs/acp.md#connection).
//!
//! Unlike Zi RPC, where a record over 16 MiB or invalid UTF-8 ends the connection, one ACP
//! process serves many sessions: a bad record is answered and skipped, and the others go on.
//! An oversized record is not buffered: its bytes are dropped up to the next LF, so memory stays
//! bounded by [`MAX_LINE_BYTES`].

/// Largest line, in bytes before the LF (16 MiB, as in Zi RPC).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One record of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A line (LF and one trailing CR removed). Blank lines are skipped.
    Line(String),
    /// A line that is not UTF-8.
    InvalidUtf8,
    /// A line over [`MAX_LINE_BYTES`], skipped.
    Oversized,
}

/// Incremental splitter: [`LineSplitter::push`] each chunk, [`LineSplitter::finish`] at EOF.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    /// The current line is over the bound: drop bytes until its LF.
    skipping: bool,
}

impl LineSplitter {
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Record>) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let (part, ended) = match memchr::memchr(b'\n', rest) {
                Some(at) => (&rest[..at], Some(at + 1)),
                None => (rest, None),
            };
            if !self.skipping {
                if self.pending.len() + part.len() > MAX_LINE_BYTES {
                    self.pending = Vec::new();
                    self.skipping = true;
                    out.push(Record::Oversized);
                } else {
                    self.pending.extend_from_slice(part);
                }
            }
            match ended {
                Some(next) => {
                    if !self.skipping {
                        self.emit(out);
                    }
                    self.skipping = false;
                    self.pending.clear();
                    rest = &rest[next..];
                }
                None => rest = &[],
            }
        }
    }

    /// The unterminated last line, if any.
    pub fn finish(&mut self, out: &mut Vec<Record>) {
        if !self.skipping && !self.pending.is_empty() {
            self.emit(out);
        }
        self.pending.clear();
        self.skipping = false;
    }

    fn emit(&mut self, out: &mut Vec<Record>) {
        let mut line = std::mem::take(&mut self.pending);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        out.push(match String::from_utf8(line) {
            Ok(text) => Record::Line(text),
            Err(_) => Record::InvalidUtf8,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Record> {
        let mut splitter = LineSplitter::default();
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut out);
        }
        splitter.finish(&mut out);
        out
    }

    #[test]
    fn lines_split_across_chunks_and_crlf() {
        assert_eq!(
            split(&[b"ab", b"c\r\nd\n\n  \nlast"]),
            vec![
                Record::Line("abc".into()),
                Record::Line("d".into()),
                Record::Line("last".into())
            ]
        );
        assert_eq!(
            split(&[b"\xff\xfe\nok\n"]),
            vec![Record::InvalidUtf8, Record::Line("ok".into())]
        );
    }

    #[test]
    fn an_oversized_line_is_skipped_without_being_held() {
        let big = vec![b'x'; MAX_LINE_BYTES];
        let mut splitter = LineSplitter::default();
        let mut out = Vec::new();
        splitter.push(&big, &mut out);
        assert!(out.is_empty(), "exactly the bound is still a line");
        splitter.push(b"y", &mut out);
        assert_eq!(out, vec![Record::Oversized]);
        splitter.push(&big, &mut out);
        assert!(splitter.pending.is_empty(), "skipped bytes are not kept");
        splitter.push(b"tail\nnext\n", &mut out);
        assert_eq!(out, vec![Record::Oversized, Record::Line("next".into())]);
        let exact = [vec![b'a'; MAX_LINE_BYTES], b"\n".to_vec()].concat();
        let mut out = Vec::new();
        splitter.push(&exact, &mut out);
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0], Record::Line(line) if line.len() == MAX_LINE_BYTES));
    }
}
