//! Code Mode's bounds (docs/code-mode.md#limits). Settings may only lower the first three.

/// Time a cell may run, in ms (`codeModeTimeoutMs`).
pub const TIMEOUT_MS: u64 = 120_000;
/// Calls a cell may make (`codeModeMaxCalls`).
pub const MAX_CALLS: u64 = 64;
/// Engine memory, in MiB (`codeModeMemoryMiB`).
pub const MEMORY_MIB: u64 = 64;
/// `console.log` output kept per cell, in bytes.
pub const LOG_BYTES: usize = 64 << 10;
/// Calls of parallel-safe tools that may run at once.
pub const MAX_PARALLEL: usize = 4;
/// `code` arguments: the description and the code.
pub const MAX_DESCRIPTION_CHARS: u64 = 160;
/// Largest `code` argument in bytes.
pub const MAX_CODE_BYTES: u64 = 256 << 10;

/// The limits of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit of the cell, nested approval waits excluded (`codeModeTimeoutMs`).
    pub timeout_ms: u64,
    /// Most nested tool calls per cell (`codeModeMaxCalls`).
    pub max_calls: u64,
    /// The worker's memory limit in MiB (`codeModeMemoryMiB`).
    pub memory_mib: u64,
    /// `console.log` output kept, in bytes.
    pub log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: TIMEOUT_MS,
            max_calls: MAX_CALLS,
            memory_mib: MEMORY_MIB,
            log_bytes: LOG_BYTES,
        }
    }
}
