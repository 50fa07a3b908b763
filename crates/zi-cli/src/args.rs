//! Command-line arguments (docs/cli.md#options, docs/cli.md#environment): clap's view of argv
//! and the `ZI_*` variables, kept at the edge. [`crate::startup::resolve`] turns them into the
//! typed start-up configuration the rest of zi-cli reads.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};

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

/// `--mode` / `ZI_MODE` as given: a mode, or empty. An empty value is not clap's error but
/// resolution's `ZI_MODE must not be empty` (docs/cli.md#environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeValue {
    Empty,
    Given(Mode),
}

/// Parses [`ModeValue`], listing [`Mode`]'s values in `--help` and in clap's error.
#[derive(Clone)]
struct ModeParser;

impl TypedValueParser for ModeParser {
    type Value = ModeValue;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<ModeValue, clap::Error> {
        if value.is_empty() {
            return Ok(ModeValue::Empty);
        }
        EnumValueParser::<Mode>::new()
            .parse_ref(cmd, arg, value)
            .map(ModeValue::Given)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            Mode::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
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
// No `Debug`: the struct holds `--api-key` in clear text.
#[derive(Clone, Parser)]
#[command(
    name = "zi",
    version,
    about = "zi: a coding agent host. `zi --mode rpc` serves Zi RPC v1 over stdio; `zi -p PROMPT` answers once.",
    args_override_self = true,
    after_help = ENV_HELP
)]
pub struct Args {
    /// Output mode: auto picks text unless stdin and stdout are terminals.
    #[arg(long, env = "ZI_MODE", value_name = "MODE", value_parser = ModeParser)]
    pub mode: Option<ModeValue>,

    /// Print mode: the same as --mode text.
    #[arg(short = 'p', long = "print", action = ArgAction::SetTrue)]
    pub print: bool,

    /// Working directory of the session (default: the current directory).
    // An `OsString` so that an empty value gets zi's `--cwd requires a value`.
    #[arg(long, value_name = "PATH")]
    pub cwd: Option<OsString>,

    /// Global agent directory (settings.json, models.json, sessions/).
    // An `OsString`, not a `PathBuf`: clap rejects an empty path with its own error, and
    // resolution says which of the flag and the variable was empty.
    #[arg(long, env = "ZI_AGENT_DIR", value_name = "PATH")]
    pub agent_dir: Option<OsString>,

    /// Directory for session journals (replaces <agent-dir>/sessions/--<cwd>--).
    #[arg(long, env = "ZI_SESSION_DIR", value_name = "PATH")]
    pub session_dir: Option<OsString>,

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

/// The arguments of a run, with the ids of the values that came from the environment.
pub struct CommandLine {
    pub args: Args,
    /// Field names (`agent_dir`, `sandbox`, …) whose value is a `ZI_*` variable's, not a flag's.
    pub from_environment: Vec<&'static str>,
}

/// The arguments whose value may come from a variable.
const WITH_ENVIRONMENT: [&str; 6] = [
    "mode",
    "agent_dir",
    "session_dir",
    "model",
    "thinking",
    "sandbox",
];

/// What a valid command line asks for.
pub enum Parsed {
    /// A run with these arguments.
    Run(Box<CommandLine>),
    /// `--help` or `--version`: the text to print on stdout (exit 0).
    Print(String),
}

/// Parses the arguments (the first is the program name). An error is the message to print
/// (exit 1).
pub fn parse_from(argv: impl IntoIterator<Item = OsString>) -> anyhow::Result<Parsed> {
    parse_with(Args::command(), argv)
}

/// [`parse_from`] with the command to parse by (tests parse without the environment).
fn parse_with(
    command: clap::Command,
    argv: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<Parsed> {
    let parsed = command
        .try_get_matches_from(argv)
        .and_then(|matches| Ok((Args::from_arg_matches(&matches)?, matches)));
    match parsed {
        Ok((args, matches)) => {
            let from_environment = WITH_ENVIRONMENT
                .into_iter()
                .filter(|id| matches.value_source(id) == Some(ValueSource::EnvVariable))
                .collect();
            Ok(Parsed::Run(Box::new(CommandLine {
                args,
                from_environment,
            })))
        }
        Err(error) => match error.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                Ok(Parsed::Print(error.render().to_string()))
            }
            clap::error::ErrorKind::UnknownArgument => {
                let argument = error
                    .get(clap::error::ContextKind::InvalidArg)
                    .map(|value| value.to_string())
                    .unwrap_or_default();
                Err(anyhow::anyhow!("Unknown argument: {argument}"))
            }
            _ => Err(anyhow::anyhow!("{}", error.render().to_string().trim_end())),
        },
    }
}

/// `zi acp [FLAGS] login PROVIDER` (or `logout PROVIDER`): the `zi login` argv of an ACP
/// client's terminal sign-in, with the invocation's agent directory
/// (docs/acp.md#authentication). A directory from `ZI_AGENT_DIR` is left to the variable, which
/// `zi login` reads too (and names when it is empty).
pub fn acp_sign_in(line: &CommandLine) -> Option<Vec<OsString>> {
    let args = &line.args;
    let first = args.prompts.first()?;
    if first != "login" && first != "logout" {
        return None;
    }
    let mut argv: Vec<OsString> = vec!["zi".into()];
    argv.extend(args.prompts.iter().map(Into::into));
    if let Some(dir) = &args.agent_dir
        && !line.from_environment.contains(&"agent_dir")
    {
        argv.push("--agent-dir".into());
        argv.push(dir.clone());
    }
    Some(argv)
}

/// Parses `argv` as clap would with no `ZI_*` variable set, so a test's outcome does not
/// depend on the environment it runs in.
#[cfg(test)]
pub fn parse_without_environment(argv: &[&str]) -> anyhow::Result<CommandLine> {
    let command = Args::command().mut_args(|arg| arg.env(None));
    let argv = std::iter::once("zi")
        .chain(argv.iter().copied())
        .map(OsString::from);
    match parse_with(command, argv)? {
        Parsed::Run(line) => Ok(*line),
        Parsed::Print(text) => Err(anyhow::anyhow!("{text}")),
    }
}
