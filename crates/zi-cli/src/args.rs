//! Command-line arguments (docs/cli.md#options, docs/cli.md#environment).

use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Auto,
    Interactive,
    Text,
    Json,
    Rpc,
    /// The Agent Client Protocol (`zi acp`, docs/acp.md).
    Acp,
}

pub const ENV_HELP: &str = "\
Environment variables:
  ZI_MODE              default for --mode
  ZI_AGENT_DIR         default for --agent-dir (else ~/.zi/agent)
  ZI_SESSION_DIR       default for --session-dir
  ZI_DEFAULT_MODEL     default for --model
  ZI_DEFAULT_THINKING  default for --thinking
  ZI_SANDBOX           default for --sandbox
  ZI_APPROVALS         default for --approvals
  ZI_LOG               log filter for diagnostics on stderr (e.g. debug, zi_rpc=trace); default warn
  HOME                 home directory for the default agent dir
  ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY,
  XAI_API_KEY, DEEPSEEK_API_KEY, MISTRAL_API_KEY, CEREBRAS_API_KEY
                       keys of the built-in providers (after --api-key and <agent-dir>/auth.json)
  ZI_OPENAI_AUTH_URL, ZI_CODEX_BASE_URL, ZI_LOGIN_CALLBACK_PORT, ZI_GITHUB_URL,
  ZI_GITHUB_API_URL, ZI_COPILOT_BASE_URL
                       endpoints of the ChatGPT and GitHub Copilot subscriptions (https://, or
                       http://127.0.0.1 only)

Custom providers and overrides are declared in <agent-dir>/models.json; settings live in
<agent-dir>/settings.json and, for trusted projects, <cwd>/.zi/settings.json.

Subcommands:
  zi rpc schema        print the JSON Schema (draft 2020-12) of every Zi RPC v1 request and frame
  zi login [PROVIDER]  sign in to ChatGPT (openai-codex) or GitHub Copilot (github-copilot);
                       --status shows the sign-ins, --enterprise DOMAIN for GitHub Enterprise
  zi logout PROVIDER   remove a provider's sign-in (or key) from <agent-dir>/auth.json
  zi acp [FLAGS]       serve the Agent Client Protocol on stdio (editors: Zed, JetBrains, Neovim,
                       Emacs; acpx); the same as --mode acp (docs/acp.md)

Exit codes: 0 success (RPC: stdin closed); 1 errors; 129/130/143 after SIGHUP/SIGINT/SIGTERM.";

/// zi: a coding agent that applications drive over Zi RPC v1, or that answers one prompt.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "zi",
    version,
    about = "zi: a coding agent host. `zi --mode rpc` serves Zi RPC v1 over stdio; `zi -p PROMPT` answers once.",
    args_override_self = true,
    after_help = ENV_HELP
)]
pub struct Args {
    /// Output mode: auto picks text unless stdin and stdout are terminals.
    #[arg(long, value_enum, env = "ZI_MODE", value_name = "MODE")]
    pub mode: Option<Mode>,

    /// Print mode: the same as --mode text.
    #[arg(short = 'p', long = "print", action = ArgAction::SetTrue)]
    pub print: bool,

    /// Working directory of the session (default: the current directory).
    #[arg(long, value_name = "PATH")]
    pub cwd: Option<PathBuf>,

    /// Global agent directory (settings.json, models.json, sessions/).
    #[arg(long, env = "ZI_AGENT_DIR", value_name = "PATH")]
    pub agent_dir: Option<PathBuf>,

    /// Directory for session journals (replaces <agent-dir>/sessions/--<cwd>--).
    #[arg(long, env = "ZI_SESSION_DIR", value_name = "PATH")]
    pub session_dir: Option<PathBuf>,

    /// Model as provider/id, or a bare id that names exactly one model.
    #[arg(long, env = "ZI_DEFAULT_MODEL", value_name = "PROVIDER/ID")]
    pub model: Option<String>,

    /// Thinking level: off, minimal, low, medium, high, xhigh, max.
    #[arg(long, env = "ZI_DEFAULT_THINKING", value_name = "LEVEL")]
    pub thinking: Option<String>,

    /// API key for the selected model's provider; kept in memory only.
    #[arg(long, value_name = "KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Replace the built-in base system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Text appended to the system prompt (repeatable).
    #[arg(long, value_name = "TEXT", action = ArgAction::Append)]
    pub append_system_prompt: Vec<String>,

    /// Load an extension (repeatable).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    pub extension: Vec<PathBuf>,

    /// Start a new persistent session (the default).
    #[arg(long, overrides_with_all = ["no_session", "continue_session", "resume"])]
    pub new_session: bool,

    /// Start an ephemeral session that is never written to disk.
    #[arg(long, overrides_with_all = ["new_session", "continue_session", "resume"])]
    pub no_session: bool,

    /// Continue the most recent session of the working directory.
    #[arg(short = 'c', long = "continue", overrides_with_all = ["new_session", "no_session", "resume"])]
    pub continue_session: bool,

    /// Resume the session journal FILE.
    #[arg(short = 'r', long, value_name = "FILE", overrides_with_all = ["new_session", "no_session", "continue_session"])]
    pub resume: Option<PathBuf>,

    /// Sandbox of bash commands: read-only, workspace-write, or full (the default: no sandbox).
    #[arg(long, env = "ZI_SANDBOX", value_name = "MODE")]
    pub sandbox: Option<String>,

    /// Allow network access inside the sandbox.
    #[arg(long)]
    pub sandbox_network: bool,

    /// An extra writable root of the workspace-write sandbox (repeatable).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    pub sandbox_writable_root: Vec<PathBuf>,

    /// Tool approval policy: never, on-failure, accept-edits, or untrusted (docs/approvals.md).
    #[arg(long, value_name = "POLICY")]
    pub approvals: Option<String>,

    /// Allow rule, e.g. 'bash(cargo test:*)' (repeatable).
    #[arg(long = "allow", value_name = "RULE", action = ArgAction::Append)]
    pub allow_rules: Vec<String>,

    /// Ask rule, e.g. 'bash(git push:*)' (repeatable).
    #[arg(long = "ask", value_name = "RULE", action = ArgAction::Append)]
    pub ask_rules: Vec<String>,

    /// Deny rule, e.g. 'read(.env)' (repeatable).
    #[arg(long = "deny", value_name = "RULE", action = ArgAction::Append)]
    pub deny_rules: Vec<String>,

    /// How long an approval request waits, in ms (0: no timeout).
    #[arg(long, value_name = "MS")]
    pub approval_timeout_ms: Option<String>,

    /// Offer the `code` tool (Code Mode, docs/code-mode.md) beside the other tools.
    #[arg(long)]
    pub code_mode: bool,

    /// Offer the model only the `code` tool; the other tools are reachable from its cells.
    #[arg(long)]
    pub code_only: bool,

    /// Prompts for the one-shot modes, run in order after piped stdin.
    #[arg(value_name = "PROMPT")]
    pub prompts: Vec<String>,
}

/// Parses the arguments (the first is the program name). Errors are returned as the message to
/// print (exit 1); help and version are returned as `Ok(Err(text))` to print on stdout (exit 0).
pub fn parse_from(
    argv: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<Result<Args, String>, String> {
    match Args::try_parse_from(argv) {
        Ok(args) => Ok(Ok(args)),
        Err(error) => match error.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                Ok(Err(error.render().to_string()))
            }
            clap::error::ErrorKind::UnknownArgument => {
                let argument = error
                    .get(clap::error::ContextKind::InvalidArg)
                    .map(|value| value.to_string())
                    .unwrap_or_default();
                Err(format!("Unknown argument: {argument}"))
            }
            _ => Err(error.render().to_string().trim_end().to_string()),
        },
    }
}

/// Rejects empty values from flags and ZI_* variables.
pub fn check_not_empty(args: &Args) -> Result<(), String> {
    let checks: [(&str, &str, Option<&str>); 5] = [
        ("--model", "ZI_DEFAULT_MODEL", args.model.as_deref()),
        (
            "--thinking",
            "ZI_DEFAULT_THINKING",
            args.thinking.as_deref(),
        ),
        ("--api-key", "", args.api_key.as_deref()),
        (
            "--agent-dir",
            "ZI_AGENT_DIR",
            args.agent_dir.as_ref().and_then(|p| p.to_str()),
        ),
        (
            "--session-dir",
            "ZI_SESSION_DIR",
            args.session_dir.as_ref().and_then(|p| p.to_str()),
        ),
    ];
    for (flag, env, value) in checks {
        if value == Some("") {
            let from_env = !env.is_empty()
                && std::env::var(env).is_ok_and(|v| v.is_empty())
                && !flag_given(flag);
            return Err(if from_env {
                format!("{env} must not be empty")
            } else {
                format!("{flag} requires a value")
            });
        }
    }
    Ok(())
}

pub fn flag_given(flag: &str) -> bool {
    std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}
