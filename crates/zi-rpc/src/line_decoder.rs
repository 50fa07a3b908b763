//! Splits raw stdin bytes into input records (docs/rpc.md#framing).
//!
//! A record is everything before an LF, with one trailing CR removed. Records must be strict
//! UTF-8 and at most [`MAX_RECORD_BYTES`] long (counted before the LF, CR included); either
//! failure is fatal for the connection. Empty records are returned like any other: the caller
//! turns them into `invalid_json`.
//!
//! Records are processed one by one: when a chunk holds complete records followed by an invalid
//! or oversized one, the complete records are still returned (decision 6 of
//! docs/rpc.md#zis-decisions; Zi discards the whole chunk instead). After a failure the decoder
//! stays failed.

use zi_protocol::errors;

/// Largest input record, in bytes before the LF (16 MiB). A record of exactly this size is allowed.
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// A fatal framing failure; reported as `invalid_framing` before the connection stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FramingError {
    /// A record is not valid UTF-8, or the input ends inside a UTF-8 sequence.
    InvalidUtf8,
    /// A record exceeds [`MAX_RECORD_BYTES`].
    Oversized,
}

impl FramingError {
    /// The exact protocol message.
    pub fn message(&self) -> &'static str {
        match self {
            FramingError::InvalidUtf8 => errors::FRAMING_INVALID_UTF8,
            FramingError::Oversized => errors::FRAMING_OVERSIZED,
        }
    }
}

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for FramingError {}

/// Incremental record splitter. Feed chunks with [`LineDecoder::push`], then call
/// [`LineDecoder::finish`] at EOF.
#[derive(Debug, Default)]
pub struct LineDecoder {
    /// Bytes of the current, not yet terminated record.
    pending: Vec<u8>,
    /// Length of the prefix of `pending` known to be valid UTF-8 (it may stop before a
    /// sequence that is split across chunks).
    validated: usize,
    failed: Option<FramingError>,
}

impl LineDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Splits `chunk`, appending every record it completes to `out` (LF and one trailing CR
    /// removed). Records completed before a failure are appended before the error is returned.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), FramingError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let result = self.split(chunk, out);
        if let Err(error) = result {
            self.fail(error);
        }
        result
    }

    /// Ends the input: returns the unterminated final record, if any bytes follow the last LF.
    /// An incomplete UTF-8 sequence at the end is a framing failure.
    pub fn finish(&mut self) -> Result<Option<String>, FramingError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        if self.pending.is_empty() {
            return Ok(None);
        }
        let record = std::mem::take(&mut self.pending);
        self.validated = 0;
        match record_to_string(record) {
            Ok(record) => Ok(Some(record)),
            Err(error) => {
                self.fail(error);
                Err(error)
            }
        }
    }

    fn split(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), FramingError> {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&byte| byte == b'\n') {
            let (line, tail) = rest.split_at(end);
            rest = &tail[1..];
            if self.pending.len() + line.len() > MAX_RECORD_BYTES {
                return Err(FramingError::Oversized);
            }
            let record = if self.pending.is_empty() {
                line.to_vec()
            } else {
                self.pending.extend_from_slice(line);
                self.validated = 0;
                std::mem::take(&mut self.pending)
            };
            out.push(record_to_string(record)?);
        }
        if rest.is_empty() {
            return Ok(());
        }
        if self.pending.len() + rest.len() > MAX_RECORD_BYTES {
            return Err(FramingError::Oversized);
        }
        self.pending.extend_from_slice(rest);
        self.validate_pending()
    }

    /// Fails early on invalid bytes in an unterminated record, so a client that never sends the
    /// LF still gets its error. Only the bytes not yet validated are scanned.
    fn validate_pending(&mut self) -> Result<(), FramingError> {
        match std::str::from_utf8(&self.pending[self.validated..]) {
            Ok(_) => self.validated = self.pending.len(),
            // A sequence cut off at the end of the chunk may still complete.
            Err(error) if error.error_len().is_none() => self.validated += error.valid_up_to(),
            Err(_) => return Err(FramingError::InvalidUtf8),
        }
        Ok(())
    }

    fn fail(&mut self, error: FramingError) {
        self.failed = Some(error);
        self.pending = Vec::new();
        self.validated = 0;
    }
}

fn record_to_string(mut record: Vec<u8>) -> Result<String, FramingError> {
    if record.last() == Some(&b'\r') {
        record.pop();
    }
    String::from_utf8(record).map_err(|_| FramingError::InvalidUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push_all(decoder: &mut LineDecoder, chunks: &[&[u8]]) -> Result<Vec<String>, FramingError> {
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn decode(chunks: &[&[u8]]) -> Result<(Vec<String>, Option<String>), FramingError> {
        let mut decoder = LineDecoder::new();
        let records = push_all(&mut decoder, chunks)?;
        Ok((records, decoder.finish()?))
    }

    #[test]
    fn messages_are_the_protocol_constants() {
        assert_eq!(
            FramingError::InvalidUtf8.message(),
            "RPC input must be valid UTF-8"
        );
        assert_eq!(
            FramingError::Oversized.message(),
            "RPC input records cannot exceed 16777216 bytes"
        );
        assert!(
            FramingError::Oversized
                .to_string()
                .contains(&MAX_RECORD_BYTES.to_string())
        );
    }

    #[test]
    fn many_records_in_one_chunk() {
        let input = b"{\"a\":1}\n{}\n\nx\n";
        assert_eq!(
            decode(&[input]),
            Ok((
                vec![
                    "{\"a\":1}".to_owned(),
                    "{}".to_owned(),
                    String::new(),
                    "x".to_owned()
                ],
                None
            ))
        );
    }

    #[test]
    fn crlf_and_lone_cr_lines() {
        assert_eq!(
            decode(&[b"{}\r\n\r\n\r\r\na\rb\r\n"]),
            Ok((
                vec![
                    "{}".to_owned(),
                    String::new(),
                    "\r".to_owned(),
                    "a\rb".to_owned()
                ],
                None
            ))
        );
        // A CR split from its LF by a chunk boundary is still stripped.
        assert_eq!(decode(&[b"{}\r", b"\n"]), Ok((vec!["{}".to_owned()], None)));
    }

    #[test]
    fn unterminated_final_record() {
        assert_eq!(decode(&[b"{}"]), Ok((vec![], Some("{}".to_owned()))));
        assert_eq!(
            decode(&[b"a\n", b"b"]),
            Ok((vec!["a".to_owned()], Some("b".to_owned())))
        );
        assert_eq!(decode(&[b"a\n"]), Ok((vec!["a".to_owned()], None)));
        assert_eq!(decode(&[]), Ok((vec![], None)));
        assert_eq!(decode(&[b""]), Ok((vec![], None)));
        // A lone CR at EOF is a non-empty final record that becomes empty.
        assert_eq!(decode(&[b"\r"]), Ok((vec![], Some(String::new()))));
    }

    #[test]
    fn utf8_split_across_chunks_is_reassembled() {
        let text = "é€😀\n".as_bytes();
        for split in 0..text.len() {
            let (head, tail) = text.split_at(split);
            assert_eq!(
                decode(&[head, tail]),
                Ok((vec!["é€😀".to_owned()], None)),
                "split at {split}"
            );
        }
        // One byte per chunk.
        let chunks: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(decode(&chunks), Ok((vec!["é€😀".to_owned()], None)));
    }

    #[test]
    fn invalid_utf8_fails() {
        assert_eq!(decode(&[b"\xff\n"]), Err(FramingError::InvalidUtf8));
        assert_eq!(
            decode(&[b"{\"a\":\"\xc3\x28\"}\n"]),
            Err(FramingError::InvalidUtf8)
        );
        // Overlong encodings and encoded surrogates are invalid.
        assert_eq!(decode(&[b"\xc0\xaf\n"]), Err(FramingError::InvalidUtf8));
        assert_eq!(decode(&[b"\xed\xa0\x80\n"]), Err(FramingError::InvalidUtf8));
        // A truncated sequence followed by LF.
        assert_eq!(
            decode(&[b"\xe2\x82", b"\n"]),
            Err(FramingError::InvalidUtf8)
        );
    }

    #[test]
    fn invalid_utf8_in_an_unterminated_record_fails_immediately() {
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(b"ok\n{\"text\":\"\xff", &mut out),
            Err(FramingError::InvalidUtf8)
        );
        assert_eq!(out, vec!["ok".to_owned()]);
    }

    #[test]
    fn records_before_a_failure_in_the_same_chunk_are_returned() {
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(b"a\nb\r\n\xff\nc\n", &mut out),
            Err(FramingError::InvalidUtf8)
        );
        assert_eq!(out, vec!["a".to_owned(), "b".to_owned()]);
        // The decoder stays failed.
        assert_eq!(
            decoder.push(b"d\n", &mut out),
            Err(FramingError::InvalidUtf8)
        );
        assert_eq!(decoder.finish(), Err(FramingError::InvalidUtf8));
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn incomplete_utf8_at_eof_fails() {
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        assert_eq!(decoder.push(b"a\n\xf0\x9f\x98", &mut out), Ok(()));
        assert_eq!(out, vec!["a".to_owned()]);
        assert_eq!(decoder.finish(), Err(FramingError::InvalidUtf8));
        assert_eq!(decoder.finish(), Err(FramingError::InvalidUtf8));
    }

    #[test]
    fn record_spanning_many_chunks() {
        let record = "x€".repeat(10_000);
        let mut input = record.clone().into_bytes();
        input.extend_from_slice(b"\r\nnext");
        // 7 does not divide the 3-byte character, so sequences are split repeatedly.
        let chunks: Vec<&[u8]> = input.chunks(7).collect();
        assert_eq!(decode(&chunks), Ok((vec![record], Some("next".to_owned()))));
    }

    #[test]
    fn exactly_the_bound_is_allowed() {
        let mut input = vec![b'a'; MAX_RECORD_BYTES];
        input.push(b'\n');
        let (records, last) = decode(&[&input]).unwrap_or_default();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].len(), MAX_RECORD_BYTES);
        assert_eq!(last, None);

        // The same record, split over chunks, followed by another record.
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        for chunk in input.chunks(1 << 20) {
            assert_eq!(decoder.push(chunk, &mut out), Ok(()));
        }
        assert_eq!(decoder.push(b"{}\n", &mut out), Ok(()));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), MAX_RECORD_BYTES);
        assert_eq!(out[1], "{}");

        // The CR counts, so a 16 MiB record ending with CR is only allowed at 16 MiB total.
        let mut with_cr = vec![b'a'; MAX_RECORD_BYTES - 1];
        with_cr.extend_from_slice(b"\r\n");
        let (records, _) = decode(&[&with_cr]).unwrap_or_default();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].len(), MAX_RECORD_BYTES - 1);

        // Unterminated at EOF.
        let unterminated = vec![b'a'; MAX_RECORD_BYTES];
        let (records, last) = decode(&[&unterminated]).unwrap_or_default();
        assert!(records.is_empty());
        assert_eq!(last.map(|record| record.len()), Some(MAX_RECORD_BYTES));
    }

    #[test]
    fn one_byte_over_the_bound_fails() {
        let mut input = vec![b'a'; MAX_RECORD_BYTES + 1];
        input.push(b'\n');
        assert_eq!(decode(&[&input]), Err(FramingError::Oversized));

        let mut with_cr = vec![b'a'; MAX_RECORD_BYTES];
        with_cr.extend_from_slice(b"\r\n");
        assert_eq!(decode(&[&with_cr]), Err(FramingError::Oversized));

        // Terminated in a later chunk.
        assert_eq!(
            decode(&[&input[..MAX_RECORD_BYTES], b"a\n"]),
            Err(FramingError::Oversized)
        );
    }

    #[test]
    fn an_unterminated_record_fails_as_soon_as_it_exceeds_the_bound() {
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..16 {
            assert_eq!(decoder.push(&chunk, &mut out), Ok(()));
        }
        // Exactly 16 MiB buffered, no LF yet: still fine.
        assert_eq!(decoder.push(b"", &mut out), Ok(()));
        assert_eq!(decoder.push(b"a", &mut out), Err(FramingError::Oversized));
        assert!(out.is_empty());
        assert_eq!(decoder.finish(), Err(FramingError::Oversized));

        // Also within a single chunk after complete records, which are returned first.
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        let mut input = b"ok\n".to_vec();
        input.resize(3 + MAX_RECORD_BYTES + 1, b'a');
        assert_eq!(decoder.push(&input, &mut out), Err(FramingError::Oversized));
        assert_eq!(out, vec!["ok".to_owned()]);
    }

    #[test]
    fn bytes_after_a_completed_record_start_a_fresh_bound() {
        let mut decoder = LineDecoder::new();
        let mut out = Vec::new();
        let mut input = vec![b'a'; MAX_RECORD_BYTES];
        input.push(b'\n');
        input.extend(std::iter::repeat_n(b'b', MAX_RECORD_BYTES));
        assert_eq!(decoder.push(&input, &mut out), Ok(()));
        assert_eq!(out.len(), 1);
        assert_eq!(
            decoder.finish().map(|last| last.map(|r| r.len())),
            Ok(Some(MAX_RECORD_BYTES))
        );
    }
}
