//! JSON numbers beyond the double range, read as JavaScript reads them (decision 7 of
//! docs/rpc.md#zis-decisions).
//!
//! The reference parses records with `JSON.parse`, which turns every number into an IEEE double:
//! `1e400` (or a 400-digit integer) becomes `Infinity`, and decoding goes on with that value.
//! `serde_json` refuses such a record as a whole ("number out of range"), which would make it
//! `invalid_json`. When a record fails to parse, [`rewrite`] replaces each well-formed number
//! token whose double is infinite by a stand-in and the record is parsed again:
//!
//! - for decoding, the stand-in is the largest finite double of the same sign. It fails every
//!   check exactly where `±Infinity` does: it is a number, it is not `1`, and it is not a safe
//!   integer;
//! - for the text of `unsupported_version` (`String(value)` in JavaScript), the stand-in is the
//!   string `"Infinity"` / `"-Infinity"`, so `1e400` prints as `Infinity` and `[1e400,2]` as
//!   `Infinity,2`.
//!
//! Tokens inside strings are left alone, and a record that still fails to parse is `invalid_json`
//! as before.

/// What replaces an infinite number token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StandIn {
    /// `±1.7976931348623157e308` (`±f64::MAX`).
    LargestDouble,
    /// The string `"Infinity"` or `"-Infinity"`.
    InfinityText,
}

impl StandIn {
    fn text(self, negative: bool) -> &'static str {
        match (self, negative) {
            (StandIn::LargestDouble, false) => "1.7976931348623157e308",
            (StandIn::LargestDouble, true) => "-1.7976931348623157e308",
            (StandIn::InfinityText, false) => "\"Infinity\"",
            (StandIn::InfinityText, true) => "\"-Infinity\"",
        }
    }
}

/// The record with every infinite number token replaced, or `None` when it has none.
pub(crate) fn rewrite(record: &str, stand_in: StandIn) -> Option<String> {
    let bytes = record.as_bytes();
    let mut out = String::new();
    // Bytes of `record` before `copied` are already in `out`.
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => at = string_end(bytes, at),
            b'-' | b'0'..=b'9' => {
                let end = number_end(bytes, at);
                let token = &record[at..end];
                if is_json_number(token) && token.parse::<f64>().is_ok_and(f64::is_infinite) {
                    out.push_str(&record[copied..at]);
                    out.push_str(stand_in.text(token.starts_with('-')));
                    copied = end;
                }
                at = end.max(at + 1);
            }
            _ => at += 1,
        }
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&record[copied..]);
    Some(out)
}

/// The index just past the string that opens at `start` (or the end of the record).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The index just past the run of number characters that starts at `start`.
fn number_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start;
    while at < bytes.len() && matches!(bytes[at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
        at += 1;
    }
    at
}

/// The JSON number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`. Only tokens that
/// are valid JSON are replaced, so a malformed number stays malformed.
fn is_json_number(token: &str) -> bool {
    let mut rest = token.strip_prefix('-').unwrap_or(token).as_bytes();
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let integral = digits(rest);
    if integral == 0 || (integral > 1 && rest[0] == b'0') {
        return false;
    }
    rest = &rest[integral..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let count = digits(fraction);
        if count == 0 {
            return false;
        }
        rest = &fraction[count..];
    }
    if let Some(exponent) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exponent = exponent
            .strip_prefix(b"+")
            .or_else(|| exponent.strip_prefix(b"-"))
            .unwrap_or(exponent);
        let count = digits(exponent);
        if count == 0 {
            return false;
        }
        rest = &exponent[count..];
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinite_tokens_are_replaced_outside_strings_only() {
        let record = r#"{"a":1e400,"b":"1e400","c":[-1e400,2],"d":1e308}"#;
        assert_eq!(
            rewrite(record, StandIn::LargestDouble).as_deref(),
            Some(
                r#"{"a":1.7976931348623157e308,"b":"1e400","c":[-1.7976931348623157e308,2],"d":1e308}"#
            )
        );
        assert_eq!(
            rewrite(record, StandIn::InfinityText).as_deref(),
            Some(r#"{"a":"Infinity","b":"1e400","c":["-Infinity",2],"d":1e308}"#)
        );
    }

    #[test]
    fn long_integers_and_escaped_quotes_are_handled() {
        let long = format!(r#"{{"s":"\"1e400","n":{}}}"#, "9".repeat(400));
        assert_eq!(
            rewrite(&long, StandIn::InfinityText).as_deref(),
            Some(r#"{"s":"\"1e400","n":"Infinity"}"#)
        );
    }

    #[test]
    fn finite_and_malformed_numbers_are_left_alone() {
        for record in [
            r#"{"a":1e308}"#,
            r#"{"a":1e-400}"#,
            r#"{"a":01e400}"#,
            r#"{"a":1.e400}"#,
            r#"{"a":1e+}"#,
            r#"{"a":--1e400}"#,
            "{",
        ] {
            assert_eq!(rewrite(record, StandIn::LargestDouble), None, "{record}");
        }
    }

    #[test]
    fn the_grammar_is_json_s() {
        for valid in ["0", "-0", "1", "10", "1.5", "1e5", "1E+5", "-1.25e-7"] {
            assert!(is_json_number(valid), "{valid}");
        }
        for invalid in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5.5", "1-2"] {
            assert!(!is_json_number(invalid), "{invalid}");
        }
    }
}
