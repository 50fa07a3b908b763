//! Short renderings of bytes and frames for panic messages.

use std::fmt::Write as _;

use serde_json::Value;

/// How much of a frame a message shows.
pub(crate) const FRAME_PREVIEW_BYTES: usize = 400;
/// How much of stderr (or stdout) a message shows.
pub(crate) const TAIL_BYTES: usize = 4 * 1024;

/// The last `max` bytes of `bytes` as (lossy) text.
pub(crate) fn tail_text(bytes: &[u8], max: usize) -> String {
    let start = bytes.len().saturating_sub(max);
    let mut s = String::new();
    if start > 0 {
        let _ = write!(s, "[… {start} bytes omitted …]");
    }
    s.push_str(&String::from_utf8_lossy(&bytes[start..]));
    s
}

/// The first bytes of a line, for messages.
pub(crate) fn preview(line: &[u8]) -> String {
    if line.len() <= FRAME_PREVIEW_BYTES {
        format!("{:?}", String::from_utf8_lossy(line))
    } else {
        format!(
            "{:?}… ({} bytes)",
            String::from_utf8_lossy(&line[..FRAME_PREVIEW_BYTES]),
            line.len()
        )
    }
}

pub(crate) fn preview_value(v: &Value) -> String {
    let text = v.to_string();
    if text.len() <= FRAME_PREVIEW_BYTES {
        return text;
    }
    let mut end = FRAME_PREVIEW_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
