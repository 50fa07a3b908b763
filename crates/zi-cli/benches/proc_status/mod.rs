//! Reads a process's memory figures from `/proc/<pid>/status` (benchmarks only).

/// The value in KiB of a `/proc/<pid>/status` line such as `VmRSS:` or `VmHWM:` (0 if absent).
pub fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
