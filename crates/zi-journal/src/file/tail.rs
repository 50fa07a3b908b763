//! The last entries of a journal, read from its end without opening it: what the interactive
//! view draws while a large journal opens (the open reads and checks the whole file).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use zi_protocol::event::SessionEntry;

use super::parse::parse_entry;

/// The entries whose lines lie wholly in the last `bytes` bytes of the journal at `path`, in
/// file order. Best effort and silent: the journal's open, which follows, reports what is
/// wrong with the file. A partial first line, the header and any line that does not parse
/// (a torn last line) are left out; a file that cannot be read has no tail.
pub fn tail_entries(path: &Path, bytes: u64) -> Vec<SessionEntry> {
    let Ok(Some((mut file, meta))) = zi_os::config_file::open_regular(path) else {
        return Vec::new();
    };
    let start = meta.len().saturating_sub(bytes);
    let mut text = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err()
        || file.take(bytes).read_to_end(&mut text).is_err()
    {
        return Vec::new();
    }
    let mut lines = text.split(|&b| b == b'\n');
    if start > 0 {
        // The line the window starts inside.
        lines.next();
    }
    let blobs = path.with_extension("blobs");
    lines
        .filter(|line| !line.is_empty())
        .filter_map(|line| parse_entry(line, &blobs).ok())
        .collect()
}
