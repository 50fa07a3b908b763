//! The policy matrix and rule precedence through the evaluator
//! (docs/approvals.md#policies-and-rules, docs/approvals.md#how-a-call-is-evaluated).

use std::path::PathBuf;

use zi_protocol::approval::{ApprovalDecision, ApprovalKind, ApprovalReason};

use super::*;

fn base() -> PathBase {
    PathBase {
        cwd: PathBuf::from("/nonexistent-zi-test/p"),
        home: Some(PathBuf::from("/nonexistent-zi-test/home")),
    }
}

fn rules(list: &[(RuleKind, &str, RuleSource)]) -> RuleSet {
    let mut set = RuleSet::default();
    for (kind, text, source) in list {
        set.push(
            *kind,
            SourcedRule::new(Rule::parse(text).unwrap(), *source, &base()),
        );
    }
    set
}

fn subject(tool: &str, arg: &str) -> Subject {
    match tool {
        "bash" => Subject::exec(arg, false),
        "write" | "edit" => {
            Subject::file_change(paths::canonical(&base(), arg), format!("Edit {arg}"), None)
        }
        "read" => Subject::read(paths::canonical(&base(), arg)),
        other => Subject::tool(other),
    }
}

fn verdict(policy: Policy, set: &RuleSet, tool: &str, arg: &str) -> Verdict {
    let grants = Grants::default();
    let base = base();
    Evaluator {
        policy,
        broken: None,
        rules: set,
        grants: &grants,
        base: &base,
    }
    .evaluate(tool, &subject(tool, arg), None)
}

fn asked(policy: Policy, tool: &str, arg: &str) -> bool {
    matches!(
        verdict(policy, &RuleSet::default(), tool, arg),
        Verdict::Ask(_)
    )
}

#[test]
fn the_policy_matrix() {
    let calls = [
        ("read", "a.txt"),
        ("bash", "ls -la"),
        ("bash", "rm -rf x"),
        ("write", "src/a.rs"),
        ("edit", "src/a.rs"),
        ("word_stats", ""),
        ("update_plan", ""),
    ];
    let expected = [
        (
            Policy::Never,
            [false, false, false, false, false, false, false],
        ),
        (
            Policy::OnFailure,
            [false, false, false, false, false, false, false],
        ),
        (
            Policy::AcceptEdits,
            [false, false, true, false, false, true, false],
        ),
        (
            Policy::Untrusted,
            [false, false, true, true, true, true, false],
        ),
    ];
    for (policy, row) in expected {
        for ((tool, arg), want) in calls.iter().zip(row) {
            assert_eq!(asked(policy, tool, arg), want, "{policy:?} {tool} {arg}");
        }
    }
}

#[test]
fn never_with_an_ask_rule_is_approval_required() {
    let set = rules(&[(RuleKind::Ask, "bash(git push:*)", RuleSource::Global)]);
    assert_eq!(
        verdict(Policy::Never, &set, "bash", "git push origin main"),
        Verdict::Refuse(Refusal::Never {
            reason: ApprovalReason::Rule {
                rule: "bash(git push:*)".into(),
                source: "global".into()
            }
        })
    );
}

#[test]
fn deny_beats_ask_beats_allow_across_layers() {
    let set = rules(&[
        (RuleKind::Allow, "bash(rm:*)", RuleSource::Connection),
        (RuleKind::Deny, "bash(rm:*)", RuleSource::Global),
        (RuleKind::Allow, "bash(git push:*)", RuleSource::Cli),
        (RuleKind::Ask, "bash(git push:*)", RuleSource::Project),
    ]);
    assert_eq!(
        verdict(Policy::Untrusted, &set, "bash", "rm x"),
        Verdict::Refuse(Refusal::DeniedByRule {
            rule: "bash(rm:*)".into(),
            source: RuleSource::Global
        })
    );
    let Verdict::Ask(ask) = verdict(Policy::OnFailure, &set, "bash", "git push") else {
        panic!("an ask rule asks");
    };
    assert_eq!(ask.kind, ApprovalKind::Exec);
    assert_eq!(
        ask.suggested_rule, None,
        "no allow_session, nothing to suggest"
    );
    assert_eq!(
        ask.decisions,
        [
            ApprovalDecision::AllowOnce,
            ApprovalDecision::Deny,
            ApprovalDecision::CancelTurn
        ]
    );
}

#[test]
fn allow_rules_need_every_part_and_paths_resolve() {
    let set = rules(&[
        (RuleKind::Allow, "bash(cargo test:*)", RuleSource::Cli),
        (RuleKind::Allow, "bash(cargo build)", RuleSource::Cli),
        (RuleKind::Allow, "edit(src/**)", RuleSource::Global),
    ]);
    assert_eq!(
        verdict(Policy::Untrusted, &set, "bash", "cargo test && cargo build"),
        Verdict::Run
    );
    assert!(matches!(
        verdict(Policy::Untrusted, &set, "bash", "cargo test && curl x"),
        Verdict::Ask(_)
    ));
    assert!(matches!(
        verdict(Policy::Untrusted, &set, "bash", "cargo test > out"),
        Verdict::Ask(_)
    ));
    assert_eq!(
        verdict(Policy::Untrusted, &set, "write", "src/x/y.rs"),
        Verdict::Run
    );
    assert_eq!(
        verdict(Policy::Untrusted, &set, "edit", "./src/../src/y.rs"),
        Verdict::Run
    );
    assert!(matches!(
        verdict(Policy::Untrusted, &set, "edit", "src/../lib/y.rs"),
        Verdict::Ask(_)
    ));
}

#[test]
fn broken_approvals_fail_closed_except_contained_tools() {
    let set = RuleSet::default();
    let grants = Grants::default();
    let base = base();
    let broken = ("/a/settings.json".to_string(), "bad".to_string());
    let evaluator = Evaluator {
        policy: Policy::Never,
        broken: Some(&broken),
        rules: &set,
        grants: &grants,
        base: &base,
    };
    assert!(matches!(
        evaluator.evaluate("bash", &subject("bash", "ls"), None),
        Verdict::Refuse(Refusal::ConfigInvalid { .. })
    ));
    assert_eq!(
        evaluator.evaluate("read", &subject("read", "a"), None),
        Verdict::Run
    );
}

#[test]
fn escapes_ask_even_when_allowed_and_grants_apply() {
    let set = rules(&[(RuleKind::Allow, "bash", RuleSource::Cli)]);
    let base = base();
    let mut grants = Grants::default();
    let escape = Escape::SandboxUnavailable {
        message: "Landlock is disabled at boot".into(),
    };
    let call = subject("bash", "make");
    let evaluator = |grants: &Grants| {
        Evaluator {
            policy: Policy::OnFailure,
            broken: None,
            rules: &set,
            grants,
            base: &base,
        }
        .evaluate("bash", &call, Some(&escape))
    };
    let Verdict::Ask(ask) = evaluator(&grants) else {
        panic!("an escape asks");
    };
    assert_eq!(ask.kind, ApprovalKind::Escalation);
    assert_eq!(ask.suggested_rule, None);
    grants.grant_call("bash", &call, Some(&escape), &base);
    assert_eq!(evaluator(&grants), Verdict::Run);
}

#[test]
fn session_grants_and_suggested_rules() {
    let set = RuleSet::default();
    let base = base();
    let mut grants = Grants::default();
    let call = subject("bash", "git push  origin main");
    let ask = |grants: &Grants, call: &Subject, tool: &str| {
        Evaluator {
            policy: Policy::Untrusted,
            broken: None,
            rules: &set,
            grants,
            base: &base,
        }
        .evaluate(tool, call, None)
    };
    let Verdict::Ask(first) = ask(&grants, &call, "bash") else {
        panic!("asked");
    };
    assert_eq!(first.suggested_rule.as_deref(), Some("bash(git push:*)"));
    grants.grant_call("bash", &call, None, &base);
    assert_eq!(
        ask(&grants, &subject("bash", "git push origin main"), "bash"),
        Verdict::Run
    );
    assert!(matches!(
        ask(&grants, &subject("bash", "git push origin dev"), "bash"),
        Verdict::Ask(_)
    ));
    let edit = subject("edit", "src/a/b.rs");
    let Verdict::Ask(file) = ask(&grants, &edit, "edit") else {
        panic!("asked");
    };
    assert_eq!(file.suggested_rule.as_deref(), Some("edit(src/a/**)"));
    grants.grant_call("edit", &edit, None, &base);
    assert_eq!(
        ask(&grants, &subject("write", "src/a/b.rs"), "write"),
        Verdict::Run
    );
}
