//! The start-up configuration (docs/cli.md): the command line and the variables it reads,
//! resolved once into typed values by [`resolve`]. Everything after it reads [`StartUp`]; clap's
//! [`Args`] stays in `crate::args`. Resolution reads no file: what needs one (the model catalog,
//! settings, the journal, the working directory's existence) is checked when a session is built
//! (docs/cli.md#start-up).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use zi_config::approval::config::MAX_TIMEOUT_MS;
use zi_config::approval::policy::POLICY_VALUES;
use zi_config::approval::{ApprovalLayer, Policy, Rule, RuleKind};
use zi_protocol::ThinkingLevel;
use zi_protocol::approval_rule::RuleError;

use crate::args::{Args, CommandLine, Mode, ModeValue};

/// What this invocation does, and how each of its sessions is built.
#[derive(Debug)]
pub struct StartUp {
    pub launch: Launch,
    pub session: SessionOptions,
}

/// The mode of the run (docs/cli.md#modes), `auto` already decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// The full-screen view; the positional prompts are sent at start.
    Interactive { prompts: Vec<String> },
    /// A one-shot run: piped stdin, then these positional prompts; text or JSONL out.
    Headless { json: bool, prompts: Vec<String> },
    /// Zi RPC v1 on stdio.
    Rpc,
    /// The Agent Client Protocol on stdio.
    Acp,
}

impl Launch {
    /// The `ctx.mode` extensions see (docs/extensions.md).
    pub fn name(&self) -> &'static str {
        match self {
            Launch::Interactive { .. } => "interactive",
            Launch::Headless { json: true, .. } => "json",
            Launch::Headless { json: false, .. } => "text",
            Launch::Rpc => "rpc",
            Launch::Acp => "acp",
        }
    }
}

/// Which session a build opens (docs/configuration.md#session-journals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    /// A new journal (`--new-session`, the default).
    New,
    /// No journal on disk (`--no-session`).
    Ephemeral,
    /// The newest journal of the cwd, else a new one (`-c`).
    Continue,
    /// Exactly this journal, absolute (`-r FILE`).
    Resume(PathBuf),
}

/// Where a value that a flag or a variable can give came from; errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Environment,
}

/// The sandbox flags (docs/approvals.md#configuration); settings fill in the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxOptions {
    /// `--sandbox` or `ZI_SANDBOX`.
    pub mode: Option<(zi_sandbox::Mode, Origin)>,
    /// `--sandbox-network`.
    pub network: bool,
    /// `--sandbox-writable-root`, absolute.
    pub writable_roots: Vec<PathBuf>,
}

/// The approval layers of the environment and the command line
/// (docs/approvals.md#layers-and-precedence).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalOptions {
    /// `ZI_APPROVALS`.
    pub environment: Option<Policy>,
    /// `--approvals`, `--approval-timeout-ms`, `--allow`, `--ask`, `--deny`.
    pub flags: ApprovalLayer,
}

/// `--code-mode` / `--code-only` (docs/code-mode.md#settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeModeFlag {
    /// No flag: the `codeMode` setting decides.
    Unset,
    /// `code` beside the other tools.
    Beside,
    /// `code` alone.
    Only,
}

/// A key given on the command line (or handed to a subagent child): never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    /// The key itself, for the credentials and a child's handoff only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// What every session of the invocation is built from (crate::runtime::build). ACP's
/// `session/new` and the interactive `/new` and `/resume` change the cwd and session choice of
/// a copy.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// zi's own directory: relative paths of the command line resolve against it.
    pub process_cwd: PathBuf,
    /// `--cwd`, absolute; made canonical (and checked) when a session is built.
    pub cwd: Option<PathBuf>,
    /// `--agent-dir` / `ZI_AGENT_DIR` (absolute), else `~/.zi/agent`.
    pub agent_dir: PathBuf,
    /// `--session-dir` / `ZI_SESSION_DIR` as given: relative to the session's cwd.
    pub session_dir: Option<PathBuf>,
    pub choice: SessionChoice,
    /// `--model` / `ZI_DEFAULT_MODEL`: a reference the catalog resolves.
    pub model: Option<String>,
    /// `--thinking` / `ZI_DEFAULT_THINKING`.
    pub thinking: Option<ThinkingLevel>,
    pub api_key: Option<ApiKey>,
    /// `--system-prompt`.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` (empty: `APPEND_SYSTEM.md` applies).
    pub append_system_prompt: Vec<String>,
    /// `--extension`, absolute.
    pub extensions: Vec<PathBuf>,
    pub sandbox: SandboxOptions,
    pub approvals: ApprovalOptions,
    pub code_mode: CodeModeFlag,
    /// The `ctx.mode` extensions see ([`Launch::name`]).
    pub mode_name: &'static str,
}

impl SessionOptions {
    /// `path` against zi's own directory.
    pub fn absolute(&self, path: &Path) -> PathBuf {
        absolute(path, &self.process_cwd)
    }
}

/// What resolution reads besides argv: no file, only the process's state.
pub struct Environment {
    pub process_cwd: std::io::Result<PathBuf>,
    /// Whether stdin and stdout are both terminals (`--mode auto`, `--mode interactive`).
    pub terminals: bool,
    pub home: Option<OsString>,
    /// `ZI_APPROVALS`.
    pub approvals: Option<String>,
}

impl Environment {
    /// This process's.
    pub fn current() -> Environment {
        use std::io::IsTerminal;
        Environment {
            process_cwd: std::env::current_dir(),
            terminals: std::io::stdin().is_terminal() && std::io::stdout().is_terminal(),
            home: std::env::var_os("HOME"),
            approvals: std::env::var("ZI_APPROVALS").ok(),
        }
    }
}

/// Why the command line cannot start zi: printed on stderr, exit 1 (docs/cli.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartUpError {
    /// A `ZI_*` variable set to the empty string.
    EmptyVariable(&'static str),
    /// A flag given an empty value.
    EmptyFlag(&'static str),
    Thinking(String),
    NoTerminal,
    RpcPrompts,
    AcpPrompts,
    AcpSessionChoice,
    CurrentDir(String),
    NoHome,
    /// The flag or variable named.
    Sandbox(&'static str),
    /// The flag or variable named.
    Policy(&'static str),
    ApprovalTimeout,
    Rule(RuleError),
}

impl fmt::Display for StartUpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartUpError::EmptyVariable(name) => write!(f, "{name} must not be empty"),
            StartUpError::EmptyFlag(name) => write!(f, "{name} requires a value"),
            StartUpError::Thinking(text) => write!(
                f,
                "Invalid thinking level: {text}. Use off, minimal, low, medium, high, xhigh or max."
            ),
            StartUpError::NoTerminal => {
                f.write_str("Interactive mode requires TTY stdin and stdout")
            }
            StartUpError::RpcPrompts => {
                f.write_str("RPC mode accepts input only through its JSONL protocol")
            }
            StartUpError::AcpPrompts => {
                f.write_str("ACP mode accepts input only through the Agent Client Protocol")
            }
            StartUpError::AcpSessionChoice => f.write_str(
                "ACP mode opens sessions with session/new and session/load; --continue and --resume do not apply",
            ),
            StartUpError::CurrentDir(error) => {
                write!(f, "Cannot read the current directory: {error}")
            }
            StartUpError::NoHome => f.write_str(
                "Cannot locate the agent directory: HOME is not set; use --agent-dir",
            ),
            StartUpError::Sandbox(name) => {
                write!(f, "{name} must be read-only, workspace-write, or full")
            }
            StartUpError::Policy(name) => write!(f, "{name} must be {POLICY_VALUES}"),
            StartUpError::ApprovalTimeout => write!(
                f,
                "--approval-timeout-ms must be an integer from 0 through {MAX_TIMEOUT_MS}"
            ),
            StartUpError::Rule(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for StartUpError {}

fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// The agent directory: `flag` (relative to `process_cwd`), else `<home>/.zi/agent`.
pub fn agent_dir(
    flag: Option<&Path>,
    process_cwd: &Path,
    home: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, StartUpError> {
    match flag {
        Some(dir) => Ok(absolute(dir, process_cwd)),
        None => home
            .filter(|home| !home.is_empty())
            .map(|home| Path::new(home).join(".zi").join("agent"))
            .ok_or(StartUpError::NoHome),
    }
}

/// Resolves the command line, checking in the order zi always has: empty values, the thinking
/// level, what the mode accepts, the directories, then the sandbox and approval flags.
pub fn resolve(line: CommandLine, env: Environment) -> Result<StartUp, StartUpError> {
    let CommandLine {
        args,
        from_environment,
    } = line;
    let origin = |id: &str| {
        if from_environment.contains(&id) {
            Origin::Environment
        } else {
            Origin::Flag
        }
    };
    check_not_empty(&args, origin)?;
    let thinking = match args.thinking.as_deref() {
        Some(text) => Some(
            ThinkingLevel::parse(text).ok_or_else(|| StartUpError::Thinking(text.to_string()))?,
        ),
        None => None,
    };
    let launch = launch(&args, env.terminals)?;
    let process_cwd = env
        .process_cwd
        .map_err(|error| StartUpError::CurrentDir(error.to_string()))?;
    let agent_dir = agent_dir(
        args.agent_dir.as_deref().map(Path::new),
        &process_cwd,
        env.home.as_deref(),
    )?;
    let sandbox = sandbox(&args, origin("sandbox"), &process_cwd)?;
    let approvals = approvals(&args, env.approvals.as_deref())?;
    let choice = match &args.resume {
        Some(file) => SessionChoice::Resume(absolute(file, &process_cwd)),
        None if args.continue_session => SessionChoice::Continue,
        None if args.no_session => SessionChoice::Ephemeral,
        None => SessionChoice::New,
    };
    let code_mode = match (args.code_only, args.code_mode) {
        (true, _) => CodeModeFlag::Only,
        (false, true) => CodeModeFlag::Beside,
        (false, false) => CodeModeFlag::Unset,
    };
    let session = SessionOptions {
        cwd: (args.cwd.as_deref()).map(|dir| absolute(Path::new(dir), &process_cwd)),
        agent_dir,
        session_dir: args.session_dir.map(PathBuf::from),
        choice,
        model: args.model,
        thinking,
        api_key: args.api_key.map(ApiKey),
        system_prompt: args.system_prompt,
        append_system_prompt: args.append_system_prompt,
        extensions: (args.extension.iter())
            .map(|path| absolute(path, &process_cwd))
            .collect(),
        sandbox,
        approvals,
        code_mode,
        mode_name: launch.name(),
        process_cwd,
    };
    Ok(StartUp { launch, session })
}

/// Empty values (docs/cli.md#environment): `X must not be empty` for a variable, `--x requires
/// a value` for a flag.
fn check_not_empty(args: &Args, origin: impl Fn(&str) -> Origin) -> Result<(), StartUpError> {
    let empty = |value: Option<&str>| value == Some("");
    let empty_path = |value: &Option<OsString>| value.as_ref().is_some_and(|v| v.is_empty());
    let checks: [(&str, &'static str, &'static str, bool); 8] = [
        (
            "mode",
            "--mode",
            "ZI_MODE",
            args.mode == Some(ModeValue::Empty),
        ),
        (
            "model",
            "--model",
            "ZI_DEFAULT_MODEL",
            empty(args.model.as_deref()),
        ),
        (
            "thinking",
            "--thinking",
            "ZI_DEFAULT_THINKING",
            empty(args.thinking.as_deref()),
        ),
        ("api_key", "--api-key", "", empty(args.api_key.as_deref())),
        ("cwd", "--cwd", "", empty_path(&args.cwd)),
        (
            "agent_dir",
            "--agent-dir",
            "ZI_AGENT_DIR",
            empty_path(&args.agent_dir),
        ),
        (
            "session_dir",
            "--session-dir",
            "ZI_SESSION_DIR",
            empty_path(&args.session_dir),
        ),
        (
            "sandbox",
            "--sandbox",
            "ZI_SANDBOX",
            empty(args.sandbox.as_deref()),
        ),
    ];
    match checks.into_iter().find(|check| check.3) {
        Some((id, _, variable, _)) if origin(id) == Origin::Environment => {
            Err(StartUpError::EmptyVariable(variable))
        }
        Some((_, flag, _, _)) => Err(StartUpError::EmptyFlag(flag)),
        None => Ok(()),
    }
}

/// The mode (`-p` is `--mode text`; `auto` is interactive between terminals, else text) and
/// what it accepts (docs/cli.md#modes).
fn launch(args: &Args, terminals: bool) -> Result<Launch, StartUpError> {
    let mode = match args.mode {
        _ if args.print => Mode::Text,
        Some(ModeValue::Given(mode)) => mode,
        Some(ModeValue::Empty) | None => Mode::Auto,
    };
    let prompts = args.prompts.clone();
    match mode {
        Mode::Interactive | Mode::Auto if terminals => Ok(Launch::Interactive { prompts }),
        Mode::Interactive => Err(StartUpError::NoTerminal),
        Mode::Rpc if !prompts.is_empty() => Err(StartUpError::RpcPrompts),
        Mode::Rpc => Ok(Launch::Rpc),
        Mode::Acp if !prompts.is_empty() => Err(StartUpError::AcpPrompts),
        Mode::Acp if args.continue_session || args.resume.is_some() => {
            Err(StartUpError::AcpSessionChoice)
        }
        Mode::Acp => Ok(Launch::Acp),
        Mode::Json => Ok(Launch::Headless {
            json: true,
            prompts,
        }),
        Mode::Text | Mode::Auto => Ok(Launch::Headless {
            json: false,
            prompts,
        }),
    }
}

fn sandbox(
    args: &Args,
    origin: Origin,
    process_cwd: &Path,
) -> Result<SandboxOptions, StartUpError> {
    let mode = match args.sandbox.as_deref() {
        Some(text) => {
            let name = match origin {
                Origin::Environment => "ZI_SANDBOX",
                Origin::Flag => "--sandbox",
            };
            let mode = zi_sandbox::Mode::parse(text).ok_or(StartUpError::Sandbox(name))?;
            Some((mode, origin))
        }
        None => None,
    };
    Ok(SandboxOptions {
        mode,
        network: args.sandbox_network,
        writable_roots: (args.sandbox_writable_root.iter())
            .map(|root| absolute(root, process_cwd))
            .collect(),
    })
}

/// The command line's approval layer, then `ZI_APPROVALS`.
fn approvals(args: &Args, environment: Option<&str>) -> Result<ApprovalOptions, StartUpError> {
    let policy = |text: &str, name| Policy::parse(text).ok_or(StartUpError::Policy(name));
    let mut flags = ApprovalLayer {
        policy: (args.approvals.as_deref())
            .map(|text| policy(text, "--approvals"))
            .transpose()?,
        ..ApprovalLayer::default()
    };
    if let Some(text) = &args.approval_timeout_ms {
        let timeout = text.parse::<u64>().ok().filter(|ms| *ms <= MAX_TIMEOUT_MS);
        flags.timeout_ms = Some(timeout.ok_or(StartUpError::ApprovalTimeout)?);
    }
    for (kind, rules) in [
        (RuleKind::Allow, &args.allow_rules),
        (RuleKind::Ask, &args.ask_rules),
        (RuleKind::Deny, &args.deny_rules),
    ] {
        for text in rules {
            flags
                .rules
                .push((kind, Rule::parse(text).map_err(StartUpError::Rule)?));
        }
    }
    Ok(ApprovalOptions {
        environment: environment
            .map(|text| policy(text, "ZI_APPROVALS"))
            .transpose()?,
        flags,
    })
}

#[cfg(test)]
mod tests;
