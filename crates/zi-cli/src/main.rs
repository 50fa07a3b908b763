//! The `zi` binary: arguments, modes, signals and exit codes.

mod acp_mode;
mod approvals;
mod args;
mod browser;
mod code_mode;
mod delegation;
mod extensions;
mod headless;
mod interactive;
mod logging;
mod login_cmd;
mod mcp;
mod rpc_mode;
mod runtime;
mod sandbox_config;
mod session_open;
mod session_switch;
mod signals;
mod startup;
mod stdio;
mod subagent_profiles;
mod warnings;

use std::io::{IsTerminal, Read};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zi_agent::AgentSession;

use startup::{ApiKey, Launch, StartUp};
use zi_os::process::lifetime;

const DISPOSE_TIMEOUT: Duration = Duration::from_secs(5);

fn main() {
    // The Code Mode worker (docs/code-mode.md#the-worker): before tracing, the runtime or any
    // thread, so the process that confines itself is single-threaded and holds nothing of zi.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == zi_code::WORKER_SUBCOMMAND)
    {
        zi_code::worker_main();
    }
    let mut arguments = std::env::args_os().skip(1);
    if arguments
        .next()
        .is_some_and(|a| a == lifetime::SENTINEL_SUBCOMMAND)
    {
        let root = arguments.next().unwrap_or_default();
        lifetime::sentinel_main(&root.to_string_lossy());
    }
    // Before any child starts (docs/cli.md#processes-zi-starts). Failing to become a subreaper
    // (a kernel before 3.4) leaves the marker, the sentinel and the parent-death signal.
    let inherited = std::env::var(lifetime::TREE_VARIABLE).ok();
    let _ = lifetime::init(inherited.as_deref(), std::env::current_exe().ok());
    let code = real_main();
    // Whatever path led here, no `!command` outlives zi, nor anything else zi started.
    zi_os::command::kill_all();
    lifetime::sweep();
    std::process::exit(code);
}

/// Disposes the session within the CLI's bound; false (and a stderr line) on timeout.
pub(crate) async fn dispose(session: &AgentSession) -> bool {
    dispose_for(session, "quit").await
}

/// [`dispose`], with the reason the extensions' `session_shutdown` carries.
pub(crate) async fn dispose_for(session: &AgentSession, reason: &str) -> bool {
    if tokio::time::timeout(DISPOSE_TIMEOUT, session.dispose_for(reason))
        .await
        .is_err()
    {
        eprintln!("Session disposal timed out");
        return false;
    }
    true
}

/// Piped stdin (first prompt) followed by the positional prompts.
fn headless_prompts(positional: Vec<String>) -> anyhow::Result<Vec<String>> {
    let mut prompts = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut bytes = Vec::new();
        stdin
            .lock()
            .take(headless::MAX_PROMPT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| anyhow::anyhow!("Could not read stdin: {error}"))?;
        if bytes.len() > headless::MAX_PROMPT_BYTES {
            anyhow::bail!("Piped stdin exceeds 8 MiB");
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("Piped stdin must be valid UTF-8"))?;
        if !text.trim().is_empty() {
            prompts.push(text);
        }
    }
    prompts.extend(positional);
    if prompts.is_empty() {
        anyhow::bail!("Headless mode requires a prompt or piped stdin");
    }
    if prompts.len() > headless::MAX_PROMPTS {
        anyhow::bail!(
            "Headless mode accepts at most {} prompts",
            headless::MAX_PROMPTS
        );
    }
    if prompts.iter().map(String::len).sum::<usize>() > headless::MAX_PROMPT_BYTES {
        anyhow::bail!("Headless prompts exceed 8 MiB in total");
    }
    Ok(prompts)
}

/// A one-shot run's prompts, piped stdin first (docs/cli.md#modes); other modes as they are.
fn with_piped_stdin(launch: Launch) -> anyhow::Result<Launch> {
    match launch {
        Launch::Headless { json, prompts } => Ok(Launch::Headless {
            json,
            prompts: headless_prompts(prompts)?,
        }),
        launch => Ok(launch),
    }
}

/// `zi rpc schema`, `zi login …`, `zi logout …`: the first arguments select a subcommand before
/// flag parsing, so positional prompts keep working otherwise (`zi -p "rpc schema"` and
/// `zi -p login` are prompts).
fn subcommand(argv: &[std::ffi::OsString]) -> Option<i32> {
    if let Some(code) = login_cmd::run(argv) {
        return Some(code);
    }
    let first = argv.get(1)?.to_str()?;
    if first != "rpc" {
        return None;
    }
    match argv.get(2).and_then(|a| a.to_str()) {
        Some("schema") if argv.len() == 3 => {
            print!("{}", zi_protocol::schema::rpc_schema_text());
            Some(0)
        }
        Some("schema") => {
            eprintln!("zi rpc schema takes no arguments");
            Some(1)
        }
        _ => None,
    }
}

/// The start-up configuration of a run, or the exit code when there is none to make: a
/// subcommand ran, `--help`/`--version` printed, or the command line is invalid (the reason on
/// stderr).
fn start_up() -> Result<StartUp, i32> {
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = subcommand(&argv) {
        return Err(code);
    }
    // `zi acp [FLAGS]` is `--mode acp` (docs/acp.md).
    let acp = argv.get(1).and_then(|a| a.to_str()) == Some("acp");
    if acp {
        argv.remove(1);
    }
    let mut line = match args::parse_from(argv) {
        Ok(args::Parsed::Run(line)) => *line,
        Ok(args::Parsed::Print(text)) => {
            print!("{text}");
            return Err(0);
        }
        Err(message) => {
            eprintln!("{message}");
            return Err(1);
        }
    };
    if acp {
        line.args.mode = Some(args::ModeValue::Given(args::Mode::Acp));
        line.from_environment.retain(|id| *id != "mode");
        // An ACP client's terminal sign-in runs the agent's command line with `login PROVIDER`
        // appended (docs/acp.md#authentication).
        if let Some(argv) = args::acp_sign_in(&line) {
            return Err(login_cmd::run(&argv).unwrap_or(1));
        }
    }
    let mut start = match startup::resolve(line, startup::Environment::current()) {
        Ok(start) => start,
        Err(error) => {
            eprintln!("{error}");
            return Err(1);
        }
    };
    keep_keys_from_tools();
    // A child's key arrives through the environment only (docs/delegation.md#children).
    if let Some(key) = delegation::take_child_api_key()
        && start.session.api_key.is_none()
    {
        start.session.api_key = Some(ApiKey::new(key));
    }
    Ok(start)
}

/// What tools could read of zi's keys (docs/providers.md#what-tools-can-read): the `--api-key`
/// value in `/proc/<zi>/cmdline` is overwritten, and the built-in providers' key variables are
/// cleared in `/proc/<zi>/environ` (zi keeps its own copy) and withheld from tool processes.
fn keep_keys_from_tools() {
    let variables: Vec<&str> = zi_ai::builtin::PROVIDERS
        .iter()
        .filter_map(|provider| provider.env_var)
        .collect();
    // SAFETY: called from `main` after the arguments were parsed (nothing reads them again),
    // before the async runtime or any other thread starts.
    unsafe {
        zi_os::process::secrets::hide_flag_values("--api-key");
        for variable in &variables {
            zi_os::process::secrets::hide_initial_value(variable);
        }
    }
    zi_os::process::secrets::withhold(variables);
}

/// The runtime zi's tasks run on: two workers, every driver.
fn async_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // The I/O driver's event buffer (docs/performance.md#start-up-and-idle-memory): 12 KiB
        // at the default 1,024; zi waits on a handful of descriptors (pipes of its children,
        // provider and MCP sockets), and more ready at once are taken on the next turn.
        .max_io_events_per_tick(64)
        .enable_all()
        .build()
}

fn real_main() -> i32 {
    let StartUp { launch, session } = match start_up() {
        Ok(start) => start,
        Err(code) => return code,
    };
    let launch = match with_piped_stdin(launch) {
        Ok(launch) => launch,
        Err(message) => {
            eprintln!("{message}");
            return 1;
        }
    };
    let interactive = matches!(launch, Launch::Interactive { .. });
    // Before any thread or extension exists, so nothing else ever holds the protocol streams.
    let streams = match stdio::claim() {
        Ok(streams) => streams,
        Err(error) => {
            eprintln!("Could not take over stdin and stdout: {error}");
            return 1;
        }
    };
    logging::init();
    let runtime = match async_runtime() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("Could not start the async runtime: {error}");
            return 1;
        }
    };
    runtime.block_on(async move {
        let cancel = CancellationToken::new();
        let signals = match signals::install_with_reaper(cancel.clone()) {
            Ok(signals) => signals,
            Err(error) => {
                eprintln!("Could not install signal handlers: {error}");
                return 1;
            }
        };
        if launch == Launch::Acp {
            // No session exists until a client asks for one.
            signals.serving();
            return acp_mode::run(session, streams, cancel, signals).await;
        }
        let no_color = zi_tui::Theme::no_color_requested(std::env::var_os("NO_COLOR").as_deref());
        let mut ask_trust = |cwd: &std::path::Path, content: &[String]| {
            interactive::ask_trust(&streams.output, cwd, content, no_color, &cancel)
        };
        let trust_prompt: Option<runtime::TrustPrompt<'_>> = interactive.then_some(&mut ask_trust);
        // Before the runtime is built: its warnings go to the log and the view, not the terminal.
        let early = if interactive {
            interactive::early_screen(&session, &streams.output, no_color)
        } else {
            None
        };
        let built = match runtime::build(&session, trust_prompt, "startup") {
            Ok(built) => built,
            Err(error) if error.is::<runtime::QuitAtTrustPrompt>() => {
                if let Some(screen) = early {
                    screen.end();
                }
                return signals.exit_code().unwrap_or(0);
            }
            Err(error) => {
                if let Some(screen) = early {
                    screen.end();
                }
                eprintln!("{error:#}");
                return 1;
            }
        };
        if let Some(mcp) = &built.mcp
            && let Err(error) = mcp::before_serving(mcp, launch == Launch::Rpc).await
        {
            if let Some(screen) = early {
                screen.end();
            }
            eprintln!("{error}");
            dispose(&built.session).await;
            return 1;
        }
        signals.serving();
        match launch {
            // `Launch::Acp` was served above.
            Launch::Rpc | Launch::Acp => rpc_mode::run(built, streams, cancel, signals).await,
            Launch::Interactive { prompts } => {
                let screen = (streams.output, early);
                interactive::run(built, session, prompts, screen, cancel, signals).await
            }
            Launch::Headless { json, prompts } => {
                headless::run(built, prompts, json, streams.output, cancel, signals).await
            }
        }
    })
}
