//! What can go wrong loading or calling an extension. Each Display is the text a user sees (a
//! `Warning:` line, a command's error) or the model sees (a tool's error result), so the wording
//! is part of the contract (docs/extensions.md).

use std::path::PathBuf;

use zi_os::config_file::ConfigFileError;

use crate::worker::error_text;

/// Why the job in progress must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StopReason {
    /// Its caller cancelled it.
    #[error("{}", crate::worker::CANCELLED)]
    Cancelled,
    /// It ran past its budget; carries what the job was (`Extension command`, …).
    #[error("{0} exceeded its time limit")]
    TimeLimit(&'static str),
}

/// Why loading an extension or one of its calls failed.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// The script raised an error, or mlua reported one: shown as one message without the
    /// traceback ([`error_text`]).
    #[error("{}", error_text(.0))]
    Lua(#[from] mlua::Error),
    /// The Lua state refused the memory limit.
    #[error("{0}")]
    MemoryLimit(mlua::Error),
    /// The operating system started no thread for the extension.
    #[error("could not start a thread: {0}")]
    Thread(std::io::Error),
    /// The entry script could not be read.
    #[error(transparent)]
    Read(#[from] ConfigFileError),
    /// The entry script is gone.
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    /// The job was stopped.
    #[error(transparent)]
    Stopped(#[from] StopReason),
    /// No command of this name is registered.
    #[error("{}", zi_agent::extension::unknown_command(.0))]
    UnknownCommand(String),
    /// A command returned something other than a string, a number or nothing.
    #[error("Command {name} returned a {kind}; return a string or nothing")]
    CommandValue {
        /// The command.
        name: String,
        /// The Lua type it returned.
        kind: &'static str,
    },
    /// A tool returned a value that has no JSON form.
    #[error("{place}Tool {name} returned a value that is not JSON: {}", error_text(.error))]
    NotJson {
        /// `source:line: ` of the tool's execute function, or empty.
        place: String,
        /// The tool.
        name: String,
        /// What the conversion reported.
        error: mlua::Error,
    },
    /// A tool's result does not match its `output_schema`.
    #[error(
        "Tool {name} returned a result that does not match its output_schema:\n{}",
        problems.join("\n")
    )]
    OutputSchema {
        /// The tool.
        name: String,
        /// Every violation, one per line.
        problems: Vec<String>,
    },
    /// The extension was abandoned after it did not stop within the grace period.
    #[error("Extension {0} is not responding")]
    NotResponding(String),
    /// The extension's thread has ended.
    #[error("Extension {0} has stopped")]
    Gone(String),
}

/// Why `ctx.exec` did not run its command to the end.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The session's sandbox settings are invalid, or it is required and cannot confine: the
    /// sandbox's own words (zi-sandbox words these for every tool alike).
    #[error("{0}")]
    Sandbox(String),
    /// The command did not start.
    #[error("Cannot run {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// zi could not learn whether the command had exited.
    #[error("Cannot wait for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// The extension's job was stopped; the command was killed.
    #[error(transparent)]
    Stopped(#[from] StopReason),
}

/// Why a registration (`zi.register_command`, `zi.register_tool`,
/// `zi.register_subagent_profile`) or a progress report was refused; raised into the script
/// with its line.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// A command name that is not kebab-case or too long.
    #[error(
        "Invalid command name {0:?}: use lowercase kebab-case, at most {max} bytes",
        max = crate::catalog::MAX_NAME_BYTES
    )]
    CommandName(String),
    /// A command name zi keeps for itself.
    #[error("Command name {0:?} is reserved by zi")]
    ReservedCommand(String),
    /// A command description over 4 KiB.
    #[error("Description of command {0} exceeds 4 KiB")]
    Description(String),
    /// An argument hint over 1 KiB.
    #[error("Argument hint of command {0} exceeds 1 KiB")]
    ArgumentHint(String),
    /// A tool name providers would not accept.
    #[error(
        "Invalid tool name {0:?}: use letters, digits, '_' or '-', at most {max} bytes",
        max = crate::catalog::MAX_NAME_BYTES
    )]
    ToolName(String),
    /// The script reported an error while zi read the registration.
    #[error(transparent)]
    Lua(#[from] ExtensionError),
    /// A field of the registration table could not be read (its `__index` failed).
    #[error("{0}")]
    Field(mlua::Error),
    /// A subagent profile that breaks a profile rule.
    #[error("Invalid subagent profile {name:?}: {}", problem.registration_message())]
    Profile {
        /// The profile's name as given.
        name: String,
        /// The rule it breaks.
        problem: zi_config::subagent_profiles::ProfileProblem,
    },
    /// A second profile of the same name from this extension.
    #[error("Subagent profile {0} is already registered")]
    DuplicateProfile(String),
    /// More profiles than one extension may register.
    #[error(
        "At most {max} subagent profiles can be registered",
        max = zi_config::subagent_profiles::MAX_EXTENSION_PROFILES
    )]
    TooManyProfiles,
    /// A progress report that is not session JSON.
    #[error(transparent)]
    ProgressJson(#[from] zi_agent::custom::CustomError),
    /// A progress report whose JSON text could not be written.
    #[error(transparent)]
    ProgressEncoding(#[from] serde_json::Error),
    /// A progress update over the bound.
    #[error("Progress update exceeds {} KiB", crate::progress::MAX_PROGRESS_BYTES / 1024)]
    ProgressTooLarge,
}

/// A configured extension path that holds no extension.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// A file that is not a `.lua` script.
    #[error("{} is not a .lua file", .0.display())]
    NotLua(PathBuf),
    /// Nothing is at the path.
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
}
