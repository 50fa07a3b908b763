//! Why a settings file is not used: it cannot be read, is not a JSON object, or a known key has
//! an invalid value. `Display` is the exact text of the start-up warning (configuration.md).

use std::path::PathBuf;

use super::{MAX_PATH_BYTES, MAX_PATH_ENTRIES};

/// The first problem of one settings file, in the documented order of its keys.
#[derive(Debug, thiserror::Error)]
pub enum SettingsProblem {
    #[error("{0}")]
    Read(#[from] zi_os::config_file::ConfigFileError),
    #[error("{} must contain a JSON object", path.display())]
    NotAnObject { path: PathBuf },
    #[error("{} is not valid JSON: {source}", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// Known keys never fail to deserialize (they become `Field::Invalid`); this is kept for
    /// the flattened map of unknown keys.
    #[error("{0}")]
    Decode(#[from] serde_json::Error),
    #[error("{key} must be a non-empty string")]
    NotAName { key: &'static str },
    #[error("defaultThinkingLevel must be one of off, minimal, low, medium, high, xhigh, max")]
    NotAThinkingLevel,
    #[error("{key} must be true or false")]
    NotABool { key: &'static str },
    #[error("{key} must be an integer from 1 through 1000000")]
    NotATokenCount { key: &'static str },
    #[error("{key} must be \"all\" or \"one-at-a-time\"")]
    NotAQueueMode { key: &'static str },
    #[error("retryMaxRetries must be an integer from 0 to 3")]
    RetryMaxRetries,
    #[error("retryBaseDelayMs must be an integer from 0 to 17000")]
    RetryBaseDelayMs,
    #[error("Invalid {key} setting")]
    SubagentTimeout { key: &'static str },
    #[error("externalEditor must be a string")]
    ExternalEditor,
    #[error("{key} must be an array of paths")]
    NotAPathList { key: &'static str },
    #[error("{key} has more than {MAX_PATH_ENTRIES} entries")]
    TooManyPaths { key: &'static str },
    #[error("{key} entries must be non-empty paths of at most {MAX_PATH_BYTES} bytes")]
    BadPath { key: &'static str },
    /// The `approvals` value's problem, worded by `approval/config.rs`.
    #[error("{0}")]
    Approvals(#[from] crate::approval::config::ApprovalConfigError),
    /// The `sandbox` object's problem, worded by `settings/sandbox.rs`.
    #[error("{0}")]
    Sandbox(#[from] super::sandbox::SandboxProblem),
}
