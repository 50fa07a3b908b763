//! The wall clock: the epoch milliseconds of messages and approval requests, and the ISO-8601
//! UTC timestamps of journal entries and headers.

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Formats a timestamp as ISO-8601 UTC with milliseconds.
pub fn iso_timestamp(millis: i64) -> String {
    jiff::Timestamp::from_millisecond(millis)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%S.%3fZ").to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_string())
}

/// Parses an ISO-8601 timestamp back to epoch milliseconds (0 if malformed).
pub fn timestamp_millis(timestamp: &str) -> i64 {
    timestamp
        .parse::<jiff::Timestamp>()
        .map_or(0, |ts| ts.as_millisecond())
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}
