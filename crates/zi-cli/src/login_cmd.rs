//! `zi login [PROVIDER] [--status] [--enterprise DOMAIN]` and `zi logout PROVIDER`
//! (docs/cli.md, docs/providers.md#subscriptions): sign in to ChatGPT or GitHub Copilot, show
//! the sign-ins, sign out. Both honour `--agent-dir` / `ZI_AGENT_DIR` like every zi command.
//!
//! Instructions, the address and the device code go to stdout; warnings and errors to stderr.
//! Lines typed while a ChatGPT sign-in waits are the pasted address (or code).

use std::ffi::OsString;
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;

use clap::Parser;
use clap::parser::ValueSource;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_ai::auth::login::{
    LoginError, LoginEvent, LoginOptions, LoginUi, login, login_provider, logout, status,
};
use zi_ai::auth::{SUBSCRIPTIONS, subscription};

use crate::startup::StartUpError;

/// zi login: sign in to a subscription (ChatGPT for openai-codex, GitHub Copilot).
#[derive(Debug, Parser)]
#[command(name = "zi login", bin_name = "zi login")]
struct LoginArgs {
    /// openai-codex (ChatGPT Plus/Pro) or github-copilot; without it, zi asks.
    #[arg(value_name = "PROVIDER")]
    provider: Option<String>,
    /// Show each subscription's sign-in (never a token) and exit.
    #[arg(long)]
    status: bool,
    /// GitHub Enterprise domain (github-copilot), e.g. company.ghe.com.
    #[arg(long, value_name = "DOMAIN")]
    enterprise: Option<String>,
    /// Global agent directory (its auth.json keeps the sign-ins).
    // An `OsString`, not a `PathBuf`: clap rejects an empty path with its own error; zi names
    // the flag or the variable, as every zi command does (docs/cli.md#environment).
    #[arg(long, env = "ZI_AGENT_DIR", value_name = "PATH")]
    agent_dir: Option<OsString>,
}

/// zi logout: remove a provider's sign-in (or key) from auth.json.
#[derive(Debug, Parser)]
#[command(name = "zi logout", bin_name = "zi logout")]
struct LogoutArgs {
    #[arg(value_name = "PROVIDER")]
    provider: String,
    /// Global agent directory.
    #[arg(long, env = "ZI_AGENT_DIR", value_name = "PATH")]
    agent_dir: Option<OsString>,
}

/// Runs `zi login` / `zi logout` when argv names one; the exit code.
pub fn run(argv: &[OsString]) -> Option<i32> {
    let rest = argv.get(1..)?;
    Some(match rest.first()?.to_str()? {
        "login" => match parse::<LoginArgs>(rest) {
            Ok(args) => run_login(args),
            Err(code) => code,
        },
        "logout" => match parse::<LogoutArgs>(rest) {
            Ok(args) => run_logout(args),
            Err(code) => code,
        },
        _ => return None,
    })
}

/// Parses, printing help (exit 0) or the error (exit 1); an empty agent directory is named as
/// every zi command names it: `ZI_AGENT_DIR must not be empty`, `--agent-dir requires a value`.
fn parse<T: Parser>(argv: &[OsString]) -> Result<T, i32> {
    let parsed = T::command()
        .try_get_matches_from(argv)
        .and_then(|matches| Ok((T::from_arg_matches(&matches)?, matches)));
    let (args, matches) = parsed.map_err(|error| {
        let text = error.render().to_string();
        match error.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                print!("{text}");
                0
            }
            _ => fail(text.trim_end()),
        }
    })?;
    if matches
        .get_one::<OsString>("agent_dir")
        .is_some_and(|dir| dir.is_empty())
    {
        let error = if matches.value_source("agent_dir") == Some(ValueSource::EnvVariable) {
            StartUpError::EmptyVariable("ZI_AGENT_DIR")
        } else {
            StartUpError::EmptyFlag("--agent-dir")
        };
        return Err(fail(&error.to_string()));
    }
    Ok(args)
}

/// `--agent-dir` (relative to the current directory), else `~/.zi/agent`.
fn agent_dir(flag: Option<OsString>) -> anyhow::Result<PathBuf> {
    let flag = flag.map(PathBuf::from);
    let cwd = match &flag {
        Some(dir) if dir.is_relative() => std::env::current_dir()
            .map_err(|e| anyhow::anyhow!("Cannot read the current directory: {e}"))?,
        _ => PathBuf::new(),
    };
    let home = std::env::var_os("HOME");
    Ok(crate::startup::agent_dir(
        flag.as_deref(),
        &cwd,
        home.as_deref(),
    )?)
}

fn run_logout(args: LogoutArgs) -> i32 {
    let agent_dir = match agent_dir(args.agent_dir) {
        Ok(dir) => dir,
        Err(error) => return fail(&error.to_string()),
    };
    match logout(&agent_dir, &args.provider) {
        Ok(true) => println!("Signed out of {}", args.provider),
        Ok(false) => println!("{} was not signed in", args.provider),
        Err(error) => return fail(&error.to_string()),
    }
    0
}

fn fail(message: &str) -> i32 {
    eprintln!("{message}");
    1
}

fn run_login(args: LoginArgs) -> i32 {
    let agent_dir = match agent_dir(args.agent_dir) {
        Ok(dir) => dir,
        Err(error) => return fail(&error.to_string()),
    };
    if args.status {
        return match status(&agent_dir) {
            Ok(lines) => {
                let now = zi_os::clock::now_millis();
                for line in lines {
                    println!("{}", line.line(now));
                }
                0
            }
            Err(error) => fail(&error.to_string()),
        };
    }
    if let Some(provider) = &args.provider
        && let Err(error) = login_provider(provider)
    {
        return fail(&error.to_string());
    }
    // An auth.json zi could not write is refused before anything is asked or shown.
    if let Err(error) = zi_ai::auth::store::read_auth_map(&agent_dir) {
        return fail(&error.to_string());
    }
    let endpoints = match crate::runtime::auth_endpoints() {
        Ok(endpoints) => endpoints,
        Err(error) => return fail(&format!("{error:#}")),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&format!("Could not start the async runtime: {error}")),
    };
    let options = LoginOptions {
        agent_dir,
        endpoints,
        enterprise: args.enterprise,
    };
    runtime.block_on(sign_in(args.provider, options))
}

async fn sign_in(provider: Option<String>, options: LoginOptions) -> i32 {
    let cancel = CancellationToken::new();
    let signals = match crate::signals::install(cancel.clone()) {
        Ok(signals) => signals,
        Err(error) => return fail(&format!("Could not install signal handlers: {error}")),
    };
    signals.serving();
    let mut lines = stdin_lines();
    let provider = match provider {
        Some(provider) => provider,
        None => match pick(&mut lines, &cancel).await {
            Some(provider) => provider,
            None => return signals.exit_code().unwrap_or(1),
        },
    };
    let result = login(&provider, &options, &Terminal, &mut lines, &cancel).await;
    match result {
        Ok(outcome) => {
            println!("{}", outcome.message());
            0
        }
        Err(LoginError::Cancelled) => {
            eprintln!("{}", LoginError::Cancelled);
            signals.exit_code().unwrap_or(130)
        }
        Err(error) => fail(&error.to_string()),
    }
}

/// Lines typed on stdin, read by a thread (the read blocks; the process exits without it).
fn stdin_lines() -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if sender.blocking_send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// `zi login` without a provider: a numbered list, one line read (a number or an id).
async fn pick(lines: &mut mpsc::Receiver<String>, cancel: &CancellationToken) -> Option<String> {
    println!("Sign in to:");
    for (number, subscription) in SUBSCRIPTIONS.iter().enumerate() {
        println!(
            "  {}) {} — {}",
            number + 1,
            subscription.name,
            subscription.id
        );
    }
    print!("Choose 1-{}: ", SUBSCRIPTIONS.len());
    let _ = std::io::stdout().flush();
    let line = tokio::select! {
        () = cancel.cancelled() => return None,
        line = lines.recv() => line,
    };
    println!();
    let Some(line) = line else {
        eprintln!("No provider chosen");
        return None;
    };
    let answer = line.trim();
    let chosen = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| SUBSCRIPTIONS.get(n.wrapping_sub(1)))
        .map(|s| s.id.to_string())
        .unwrap_or_else(|| answer.to_string());
    match login_provider(&chosen) {
        Ok(subscription) => Some(subscription.id.to_string()),
        Err(error) => {
            eprintln!("{error}");
            None
        }
    }
}

/// The terminal front end: plain lines on stdout, warnings on stderr.
struct Terminal;

impl LoginUi for Terminal {
    fn show(&self, event: LoginEvent) {
        match event {
            LoginEvent::AuthorizeUrl { url, callback } => {
                let name = subscription(zi_ai::auth::CODEX).map_or("ChatGPT", |s| s.name);
                println!("Sign in to {name} in a browser:\n\n  {url}\n");
                match callback {
                    Some(callback) => println!(
                        "zi is waiting for the browser to return to {callback}.\nWithout a browser on this machine, open the address elsewhere and paste the address it ends on (or its code) here, then press Enter."
                    ),
                    None => println!(
                        "Open the address, then paste the address the browser ends on (or its code) here and press Enter."
                    ),
                }
            }
            LoginEvent::DeviceCode {
                verification_uri,
                user_code,
                expires_in,
            } => println!(
                "Open {verification_uri} and enter the code {user_code} (valid for {} min).\nWaiting for GitHub…",
                expires_in.div_ceil(60)
            ),
            LoginEvent::Progress(text) => println!("{text}"),
            LoginEvent::Warning(text) => eprintln!("Warning: {text}"),
        }
        let _ = std::io::stdout().flush();
    }

    fn open_browser(&self, url: &str) {
        crate::browser::open(url);
    }
}
