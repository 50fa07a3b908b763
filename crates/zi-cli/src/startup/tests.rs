//! Each rule of [`resolve`]: defaults, the mode, conflicts, empty values, variables, paths and
//! the typed flags, with the texts docs/cli.md gives.

use std::path::{Path, PathBuf};

use super::*;
use crate::args::parse_without_environment;

const PROCESS_CWD: &str = "/work/here";

fn environment() -> Environment {
    Environment {
        process_cwd: Ok(PathBuf::from(PROCESS_CWD)),
        terminals: false,
        home: Some("/home/someone".into()),
        approvals: None,
    }
}

/// `argv` as clap parses it, the values of `variables` (field names) marked as coming from
/// their `ZI_*` variable.
fn line(argv: &[&str], variables: &[&'static str]) -> CommandLine {
    let mut line =
        parse_without_environment(argv).unwrap_or_else(|error| panic!("{argv:?}: {error}"));
    line.from_environment.extend(variables);
    line
}

fn resolve_in(argv: &[&str], variables: &[&'static str], env: Environment) -> StartUp {
    resolve(line(argv, variables), env).unwrap_or_else(|error| panic!("{argv:?}: {error}"))
}

fn resolved(argv: &[&str]) -> StartUp {
    resolve_in(argv, &[], environment())
}

fn error_in(argv: &[&str], variables: &[&'static str], env: Environment) -> String {
    match resolve(line(argv, variables), env) {
        Ok(start) => panic!("{argv:?} resolved: {start:?}"),
        Err(error) => error.to_string(),
    }
}

fn error(argv: &[&str]) -> String {
    error_in(argv, &[], environment())
}

fn here(path: &str) -> PathBuf {
    Path::new(PROCESS_CWD).join(path)
}

#[test]
fn no_flags_is_a_new_headless_session_in_the_home_agent_dir() {
    let start = resolved(&[]);
    assert_eq!(
        start.launch,
        Launch::Headless {
            json: false,
            prompts: Vec::new()
        }
    );
    let session = start.session;
    assert_eq!(session.process_cwd, Path::new(PROCESS_CWD));
    assert_eq!(session.cwd, None);
    assert_eq!(session.agent_dir, Path::new("/home/someone/.zi/agent"));
    assert_eq!(session.session_dir, None);
    assert_eq!(session.choice, SessionChoice::New);
    assert_eq!(session.model, None);
    assert_eq!(session.thinking, None);
    assert!(session.api_key.is_none());
    assert_eq!(session.code_mode, CodeModeFlag::Unset);
    assert_eq!(
        session.sandbox,
        SandboxOptions {
            mode: None,
            network: false,
            writable_roots: Vec::new()
        }
    );
    assert_eq!(
        session.approvals,
        ApprovalOptions {
            environment: None,
            flags: ApprovalLayer::default()
        }
    );
    assert_eq!(session.mode_name, "text");
}

#[test]
fn auto_is_interactive_between_terminals_and_text_otherwise() {
    let terminals = Environment {
        terminals: true,
        ..environment()
    };
    let start = resolve_in(&["hello"], &[], terminals);
    assert_eq!(
        start.launch,
        Launch::Interactive {
            prompts: vec!["hello".to_string()]
        }
    );
    assert_eq!(start.session.mode_name, "interactive");
    let start = resolved(&["--mode", "auto", "hello"]);
    assert_eq!(
        start.launch,
        Launch::Headless {
            json: false,
            prompts: vec!["hello".to_string()]
        }
    );
}

#[test]
fn each_mode_and_its_extension_name() {
    for (argv, launch, name) in [
        (&["--mode", "rpc"][..], Launch::Rpc, "rpc"),
        (&["--mode", "acp"], Launch::Acp, "acp"),
        (
            &["--mode", "json", "a", "b"],
            Launch::Headless {
                json: true,
                prompts: vec!["a".into(), "b".into()],
            },
            "json",
        ),
        (
            &["--mode", "text", "a"],
            Launch::Headless {
                json: false,
                prompts: vec!["a".into()],
            },
            "text",
        ),
    ] {
        let start = resolved(argv);
        assert_eq!(start.launch, launch, "{argv:?}");
        assert_eq!(start.session.mode_name, name, "{argv:?}");
    }
}

#[test]
fn print_is_text_mode_whatever_the_mode_says() {
    for argv in [&["-p", "hi"][..], &["--mode", "rpc", "--print", "hi"]] {
        assert_eq!(
            resolved(argv).launch,
            Launch::Headless {
                json: false,
                prompts: vec!["hi".into()]
            },
            "{argv:?}"
        );
    }
}

#[test]
fn what_each_mode_refuses() {
    assert_eq!(
        error(&["--mode", "interactive"]),
        "Interactive mode requires TTY stdin and stdout"
    );
    assert_eq!(
        error(&["--mode", "rpc", "hello"]),
        "RPC mode accepts input only through its JSONL protocol"
    );
    assert_eq!(
        error(&["--mode", "acp", "hello"]),
        "ACP mode accepts input only through the Agent Client Protocol"
    );
    for choice in [&["-c"][..], &["--resume", "x.jsonl"]] {
        let argv: Vec<&str> = ["--mode", "acp"].iter().chain(choice).copied().collect();
        assert_eq!(
            error(&argv),
            "ACP mode opens sessions with session/new and session/load; --continue and --resume do not apply"
        );
    }
    // `--no-session` is a session choice ACP keeps.
    let start = resolved(&["--mode", "acp", "--no-session"]);
    assert_eq!(start.session.choice, SessionChoice::Ephemeral);
}

#[test]
fn the_last_session_selector_wins() {
    for (argv, choice) in [
        (&["--new-session"][..], SessionChoice::New),
        (&["--no-session"], SessionChoice::Ephemeral),
        (&["-c"], SessionChoice::Continue),
        (&["--no-session", "-c"], SessionChoice::Continue),
        (&["-c", "--no-session"], SessionChoice::Ephemeral),
        (&["-r", "a.jsonl", "--new-session"], SessionChoice::New),
        (
            &["--no-session", "-r", "a.jsonl"],
            SessionChoice::Resume(here("a.jsonl")),
        ),
        (
            &["-r", "/abs/a.jsonl"],
            SessionChoice::Resume(PathBuf::from("/abs/a.jsonl")),
        ),
    ] {
        assert_eq!(resolved(argv).session.choice, choice, "{argv:?}");
    }
}

#[test]
fn an_empty_flag_requires_a_value() {
    for (argv, flag) in [
        (&["--mode="][..], "--mode"),
        (&["--model="], "--model"),
        (&["--thinking", ""], "--thinking"),
        (&["--api-key="], "--api-key"),
        (&["--agent-dir="], "--agent-dir"),
        (&["--session-dir", ""], "--session-dir"),
        (&["--sandbox="], "--sandbox"),
    ] {
        assert_eq!(error(argv), format!("{flag} requires a value"), "{argv:?}");
    }
}

#[test]
fn an_empty_variable_must_not_be_empty() {
    for (argv, id, variable) in [
        (&["--mode="][..], "mode", "ZI_MODE"),
        (&["--model="], "model", "ZI_DEFAULT_MODEL"),
        (&["--thinking="], "thinking", "ZI_DEFAULT_THINKING"),
        (&["--agent-dir="], "agent_dir", "ZI_AGENT_DIR"),
        (&["--session-dir="], "session_dir", "ZI_SESSION_DIR"),
        (&["--sandbox="], "sandbox", "ZI_SANDBOX"),
    ] {
        assert_eq!(
            error_in(argv, &[id], environment()),
            format!("{variable} must not be empty"),
            "{argv:?}"
        );
    }
}

#[test]
fn empty_values_are_reported_in_flag_order_before_anything_else() {
    // The model before the agent directory, and both before the mode's own refusal.
    assert_eq!(
        error(&["--agent-dir=", "--model=", "--mode", "rpc", "hello"]),
        "--model requires a value"
    );
    assert_eq!(
        error(&["--mode", "rpc", "--thinking=", "hello"]),
        "--thinking requires a value"
    );
}

#[test]
fn variables_give_the_same_values_as_flags() {
    let start = resolve_in(
        &[
            "--mode",
            "rpc",
            "--model",
            "mock/m1",
            "--thinking",
            "high",
            "--agent-dir",
            "agent",
            "--session-dir",
            "journals",
            "--sandbox",
            "read-only",
        ],
        &[
            "mode",
            "model",
            "thinking",
            "agent_dir",
            "session_dir",
            "sandbox",
        ],
        environment(),
    );
    assert_eq!(start.launch, Launch::Rpc);
    let session = start.session;
    assert_eq!(session.model.as_deref(), Some("mock/m1"));
    assert_eq!(session.thinking, Some(ThinkingLevel::High));
    assert_eq!(session.agent_dir, here("agent"));
    assert_eq!(session.session_dir, Some(PathBuf::from("journals")));
    assert_eq!(
        session.sandbox.mode,
        Some((zi_sandbox::Mode::ReadOnly, Origin::Environment))
    );
}

#[test]
fn an_invalid_thinking_level_names_the_levels() {
    assert_eq!(
        error(&["--thinking", "loud"]),
        "Invalid thinking level: loud. Use off, minimal, low, medium, high, xhigh or max."
    );
    assert_eq!(
        resolved(&["--thinking", "xhigh"]).session.thinking,
        Some(ThinkingLevel::Xhigh)
    );
}

#[test]
fn command_line_paths_resolve_against_the_process_directory() {
    let session = resolved(&[
        "--cwd",
        "project",
        "--agent-dir",
        "agent",
        "--session-dir",
        "journals",
        "--extension",
        "ext.lua",
        "--extension",
        "/abs/ext",
        "--sandbox-writable-root",
        "out",
    ])
    .session;
    assert_eq!(session.cwd, Some(here("project")));
    assert_eq!(session.agent_dir, here("agent"));
    // Relative to the session's cwd, which only a build knows (docs/cli.md#options).
    assert_eq!(session.session_dir, Some(PathBuf::from("journals")));
    assert_eq!(
        session.extensions,
        [here("ext.lua"), PathBuf::from("/abs/ext")]
    );
    assert_eq!(session.sandbox.writable_roots, [here("out")]);
    assert_eq!(session.absolute(Path::new("x")), here("x"));
}

#[test]
fn the_agent_directory_needs_a_flag_or_home() {
    for home in [None, Some("".into())] {
        let env = Environment {
            home,
            ..environment()
        };
        assert_eq!(
            error_in(&[], &[], env),
            "Cannot locate the agent directory: HOME is not set; use --agent-dir"
        );
    }
    let env = Environment {
        home: None,
        ..environment()
    };
    let start = resolve_in(&["--agent-dir", "/agent"], &[], env);
    assert_eq!(start.session.agent_dir, Path::new("/agent"));
}

#[test]
fn an_unreadable_current_directory_stops_start_up() {
    let env = Environment {
        process_cwd: Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
        ..environment()
    };
    assert!(
        error_in(&[], &[], env).starts_with("Cannot read the current directory: "),
        "the reason follows"
    );
}

#[test]
fn the_sandbox_mode_is_typed_and_its_error_names_its_origin() {
    assert_eq!(
        error(&["--sandbox", "loose"]),
        "--sandbox must be read-only, workspace-write, or full"
    );
    assert_eq!(
        error_in(&["--sandbox", "loose"], &["sandbox"], environment()),
        "ZI_SANDBOX must be read-only, workspace-write, or full"
    );
    let sandbox = resolved(&[
        "--sandbox",
        "workspace-write",
        "--sandbox-network",
        "--sandbox-writable-root",
        "/tmp/x",
    ])
    .session
    .sandbox;
    assert_eq!(
        sandbox,
        SandboxOptions {
            mode: Some((zi_sandbox::Mode::WorkspaceWrite, Origin::Flag)),
            network: true,
            writable_roots: vec![PathBuf::from("/tmp/x")],
        }
    );
}

#[test]
fn approval_flags_are_parsed_once() {
    let approvals = resolved(&[
        "--approvals",
        "untrusted",
        "--approval-timeout-ms",
        "5000",
        "--allow",
        "bash(cargo test:*)",
        "--deny",
        "read(.env)",
        "--ask",
        "bash(git push:*)",
    ])
    .session
    .approvals;
    assert_eq!(approvals.environment, None);
    assert_eq!(approvals.flags.policy, Some(Policy::Untrusted));
    assert_eq!(approvals.flags.timeout_ms, Some(5000));
    let rules: Vec<(RuleKind, String)> = (approvals.flags.rules.iter())
        .map(|(kind, rule)| (*kind, rule.text.clone()))
        .collect();
    assert_eq!(
        rules,
        [
            (RuleKind::Allow, "bash(cargo test:*)".to_string()),
            (RuleKind::Ask, "bash(git push:*)".to_string()),
            (RuleKind::Deny, "read(.env)".to_string()),
        ]
    );
    let env = Environment {
        approvals: Some("on-failure".into()),
        ..environment()
    };
    let start = resolve_in(&[], &[], env);
    assert_eq!(start.session.approvals.environment, Some(Policy::OnFailure));
}

#[test]
fn bad_approval_values_name_the_flag_or_variable() {
    assert_eq!(
        error(&["--approvals", "sometimes"]),
        "--approvals must be never, on-failure, accept-edits, or untrusted"
    );
    for timeout in ["soon", "-1", "86400001"] {
        assert_eq!(
            error(&[&format!("--approval-timeout-ms={timeout}")]),
            "--approval-timeout-ms must be an integer from 0 through 86400000",
            "{timeout}"
        );
    }
    let rule_error = match Rule::parse("bash(") {
        Ok(rule) => panic!("parsed: {rule:?}"),
        Err(error) => error.to_string(),
    };
    assert_eq!(error(&["--allow", "bash("]), rule_error);
    let env = Environment {
        approvals: Some("sometimes".into()),
        ..environment()
    };
    assert_eq!(
        error_in(&[], &[], env),
        "ZI_APPROVALS must be never, on-failure, accept-edits, or untrusted"
    );
    // The command line's layer is checked before the variable.
    let env = Environment {
        approvals: Some("sometimes".into()),
        ..environment()
    };
    assert_eq!(
        error_in(&["--approvals", "x"], &[], env),
        "--approvals must be never, on-failure, accept-edits, or untrusted"
    );
}

#[test]
fn code_mode_flags() {
    for (argv, flag) in [
        (&[][..], CodeModeFlag::Unset),
        (&["--code-mode"], CodeModeFlag::Beside),
        (&["--code-only"], CodeModeFlag::Only),
        (&["--code-mode", "--code-only"], CodeModeFlag::Only),
    ] {
        assert_eq!(resolved(argv).session.code_mode, flag, "{argv:?}");
    }
}

#[test]
fn the_api_key_never_debug_prints() {
    let start = resolved(&["--api-key", "sk-secret-1234", "--system-prompt", "be brief"]);
    assert_eq!(
        start.session.api_key.as_ref().map(ApiKey::expose),
        Some("sk-secret-1234")
    );
    let printed = format!("{start:?}");
    assert!(!printed.contains("sk-secret-1234"), "{printed}");
    assert!(printed.contains("ApiKey(<redacted>)"), "{printed}");
    assert!(printed.contains("be brief"), "the rest prints: {printed}");
}
