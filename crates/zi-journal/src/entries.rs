//! Reading entries back from a journal file by position (`session.get_entries` pages the
//! entries a compaction retired from memory). Entry `i` is line `i + 2`: line 1 is the header.
//! Retired lines never change (the file only grows at its end), so this reads without the
//! session lock.

use std::io::{BufRead, BufReader};
use std::path::Path;

use zi_protocol::event::SessionEntry;

use crate::file::{JournalError, parse_entry};
use crate::messages;

/// The entries at positions `start..end` of the journal at `path`, image blobs inlined.
pub fn read_entries(
    path: &Path,
    start: usize,
    end: usize,
) -> Result<Vec<SessionEntry>, JournalError> {
    let describe = |error: std::io::Error| messages::read_failed(path.display(), error);
    let file = std::fs::File::open(path).map_err(describe)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    // Skip the header and the entries before `start`.
    skip_lines(&mut reader, start + 1).map_err(describe)?;
    let blobs = path.with_extension("blobs");
    let mut entries = Vec::with_capacity(end.saturating_sub(start));
    let mut line = Vec::new();
    for position in start..end {
        line.clear();
        reader.read_until(b'\n', &mut line).map_err(describe)?;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let entry = parse_entry(text, &blobs)
            .map_err(|error| messages::corrupt_line(path.display(), position + 2, error))?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Consumes `count` lines without copying them.
fn skip_lines<R: BufRead>(reader: &mut R, mut count: usize) -> std::io::Result<()> {
    while count > 0 {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let mut consumed = buffer.len();
        for (seen, position) in memchr::memchr_iter(b'\n', buffer).enumerate() {
            if seen + 1 == count {
                consumed = position + 1;
                break;
            }
        }
        let newlines = memchr::memchr_iter(b'\n', &buffer[..consumed]).count();
        count -= newlines;
        reader.consume(consumed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_exactly_the_asked_lines_across_buffers() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        for capacity in [1, 7, 64, 100_000] {
            let mut reader = BufReader::with_capacity(capacity, text.as_bytes());
            skip_lines(&mut reader, 500).expect("skip");
            let mut line = String::new();
            reader.read_line(&mut line).expect("read");
            assert_eq!(line, "line 500\n", "capacity {capacity}");
        }
        let mut reader = BufReader::new(text.as_bytes());
        assert!(skip_lines(&mut reader, 1001).is_err());
    }
}
