//! Black-box tests of subagent profile loading (docs/delegation.md#profiles): the real binary reads
//! `<agentDir>/subagents/*.md` and, for trusted projects, `<cwd>/.zi/subagents/*.md`, and
//! reports every skipped file, collision and bound on stderr as a `Warning:` line naming the
//! file, while it still starts and serves. Lua registrations (`zi.register_subagent_profile`)
//! come last.

use std::path::Path;

use zi_test_support::dirs::{AgentDir, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::start_mock;

use crate::ext_support::{self, agent_with, scene, spawn, write};

const REVIEWER: &str =
    "---\ndescription: Reviews a diff\nthinking: high\n---\nReview the change.\n";

fn warning(path: &Path, message: &str) -> String {
    format!(
        "Warning: (subagent profiles) {}: {message}\n",
        path.display()
    )
}

fn collision(loser: &Path, name: &str, winner: &Path) -> String {
    format!(
        "Warning: (subagent profiles) {}: profile {name} is already defined by {}; ignoring this one\n",
        loser.display(),
        winner.display()
    )
}

/// Starts zi, checks that it serves a request, and returns its stderr after EOF.
async fn stderr_of(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> String {
    let mut p: Harness = spawn(agent, cwd, extra).await;
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(state["messageCount"], 0, "{state}");
    p.exit_by_eof().await.stderr
}

#[tokio::test]
async fn invalid_profiles_are_reported_by_file_and_the_rest_still_load() {
    let (_mock, agent, cwd) = scene().await;
    let dir = agent.path().join("subagents");
    write(&dir.join("reviewer.md"), REVIEWER);
    write(&dir.join("Bad.md"), REVIEWER);
    write(&dir.join("nodesc.md"), "---\nmodel: a/b\n---\nBody\n");
    write(&dir.join("empty.md"), "---\ndescription: d\n---\n\n");
    write(
        &dir.join("think.md"),
        "---\ndescription: d\nthinking: huge\n---\nBody\n",
    );
    write(&dir.join("list.md"), "---\n- a\n---\nBody\n");
    write(&dir.join("yaml.md"), "---\ndescription: [open\n---\nBody\n");
    // The same profile under a second name is a profile too: no warning for it.
    write(&dir.join("scout.md"), REVIEWER);
    // Files the directory's ignore files match are not read at all.
    write(&dir.join(".gitignore"), "draft-*.md\n");
    write(&dir.join("draft-Bad.md"), "---\n- a\n---\n");
    let stderr = stderr_of(&agent, &cwd.path, &[]).await;
    for (file, message) in [
        (
            "Bad.md",
            "filename must be a bounded lowercase subagent profile name",
        ),
        (
            "nodesc.md",
            "description must be a non-empty string of at most 4096 bytes",
        ),
        ("empty.md", "profile instructions cannot be empty"),
        ("think.md", "thinking must be a supported thinking level"),
        ("list.md", "Frontmatter must be a YAML mapping"),
    ] {
        let expected = warning(&dir.join(file), message);
        assert!(stderr.contains(&expected), "{expected:?} not in {stderr}");
    }
    let yaml = format!(
        "Warning: (subagent profiles) {}: ",
        dir.join("yaml.md").display()
    );
    assert!(stderr.contains(&yaml), "{stderr}");
    assert!(
        !stderr.contains("reviewer.md") && !stderr.contains("scout.md"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Warning: (subagent profiles)").count(),
        6,
        "{stderr}"
    );
}

#[tokio::test]
async fn project_profiles_need_trust_and_win_over_global_ones() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let project = cwd.path.join(".zi").join("subagents");
    write(&project.join("reviewer.md"), REVIEWER);
    write(&project.join("broken.md"), "---\ndescription: d\n---\n");
    let untrusted = agent_with(&mock);
    let global = untrusted.path().join("subagents");
    write(&global.join("reviewer.md"), REVIEWER);
    let stderr = stderr_of(&untrusted, &cwd.path, &[]).await;
    assert!(
        !stderr.contains(".zi/subagents"),
        "an untrusted project is not read: {stderr}"
    );
    assert!(!stderr.contains("subagent profiles"), "{stderr}");

    let trusted = agent_with(&mock).trust(&[&cwd.path]);
    let global = trusted.path().join("subagents");
    write(&global.join("reviewer.md"), REVIEWER);
    let stderr = stderr_of(&trusted, &cwd.path, &[]).await;
    assert!(
        stderr.contains(&warning(
            &project.join("broken.md"),
            "profile instructions cannot be empty"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&collision(
            &global.join("reviewer.md"),
            "reviewer",
            &project.join("reviewer.md")
        )),
        "the project profile wins: {stderr}"
    );
}

#[tokio::test]
async fn file_and_catalog_bounds_are_limit_warnings() {
    let (_mock, agent, cwd) = scene().await;
    let dir = agent.path().join("subagents");
    let big = dir.join("big.md");
    write(
        &big,
        &format!("---\ndescription: d\n---\n{}", "x".repeat(1024 * 1024)),
    );
    for i in 0..65 {
        write(&dir.join(format!("p{i:02}.md")), REVIEWER);
    }
    let stderr = stderr_of(&agent, &cwd.path, &[]).await;
    let too_big = format!(
        "Resource files cannot exceed 1048576 bytes: {}",
        big.display()
    );
    assert!(stderr.contains(&warning(&big, &too_big)), "{stderr}");
    assert!(
        stderr.contains(&warning(
            &dir.join("p64.md"),
            "At most 64 subagent profiles can be loaded"
        )),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("Warning: (subagent profiles)").count(),
        2,
        "{stderr}"
    );
}

#[tokio::test]
async fn no_profile_directories_no_stderr() {
    let (mock, agent, cwd) = scene().await;
    let stderr = stderr_of(&agent, &cwd.path, &[]).await;
    assert!(!stderr.contains("subagent"), "{stderr}");
    let trusted = agent_with(&mock).trust(&[&cwd.path]);
    let stderr = stderr_of(&trusted, &cwd.path, &[]).await;
    assert!(!stderr.contains("subagent"), "{stderr}");
}

#[tokio::test]
async fn lua_registrations_come_after_markdown_and_after_earlier_extensions() {
    let (_mock, agent, cwd) = scene().await;
    let markdown = agent.path().join("subagents").join("reviewer.md");
    write(&markdown, REVIEWER);
    let first = write(
        &cwd.path.join("first.lua"),
        r#"zi.register_subagent_profile{ name = "reviewer", description = "d", instructions = "i" }
zi.register_subagent_profile{ name = "scout", description = "Finds files", instructions = "Look.", thinking = "low" }
"#,
    );
    let second = write(
        &cwd.path.join("second.lua"),
        r#"zi.register_subagent_profile{ name = "scout", description = "d", instructions = "i" }
"#,
    );
    let stderr = stderr_of(
        &agent,
        &cwd.path,
        &["--extension", &first, "--extension", &second],
    )
    .await;
    assert!(
        stderr.contains(&collision(Path::new(&first), "reviewer", &markdown)),
        "a Markdown profile shadows a registration: {stderr}"
    );
    assert!(
        stderr.contains(&collision(Path::new(&second), "scout", Path::new(&first))),
        "the earlier extension wins: {stderr}"
    );
    assert!(!stderr.contains("failed to load"), "{stderr}");
    assert_eq!(
        stderr.matches("Warning: (subagent profiles)").count(),
        2,
        "{stderr}"
    );
}

#[tokio::test]
async fn invalid_lua_registrations_are_reported_with_file_and_line() {
    let (_mock, agent, cwd) = scene().await;
    let bad = write(
        &cwd.path.join("bad.lua"),
        r#"-- a profile with an unknown thinking level
zi.register_subagent_profile{ name = "scout", description = "d", instructions = "i", thinking = "huge" }
"#,
    );
    let good = write(
        &cwd.path.join("good.lua"),
        r#"zi.register_subagent_profile{ name = "reviewer", description = "d", instructions = "i" }
"#,
    );
    let markdown = agent.path().join("subagents").join("reviewer.md");
    write(&markdown, REVIEWER);
    let stderr = stderr_of(
        &agent,
        &cwd.path,
        &["--extension", &bad, "--extension", &good],
    )
    .await;
    assert!(
        stderr.contains(&format!(
            "Warning: Extension {bad} failed to load: {bad}:2: Invalid subagent profile \"scout\": thinking must be a supported thinking level\n"
        )),
        "{stderr}"
    );
    // The other extension still loads (its registration meets the Markdown profile).
    assert!(
        stderr.contains(&collision(Path::new(&good), "reviewer", &markdown)),
        "{stderr}"
    );
}

#[tokio::test]
async fn reload_reads_the_registrations_again() {
    let (_mock, agent, cwd) = scene().await;
    let dir = agent.path().join("subagents");
    write(&dir.join("reviewer.md"), REVIEWER);
    write(&dir.join("scout.md"), REVIEWER);
    let ext = write(
        &cwd.path.join("team.lua"),
        r#"zi.register_subagent_profile{ name = "reviewer", description = "d", instructions = "i" }
"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--extension", &ext]).await;
    write(
        Path::new(&ext),
        r#"zi.register_subagent_profile{ name = "scout", description = "d", instructions = "i" }
"#,
    );
    let reloaded = ext_support::invoke(&mut p, "r", "reload", "").await;
    assert_eq!(
        reloaded["result"],
        serde_json::json!({"message": "Reloaded 1 extension"}),
        "{reloaded}"
    );
    // A broken next generation keeps the previous one (and its profiles) without a new report.
    write(
        Path::new(&ext),
        "zi.register_subagent_profile{ name = \"Bad\", description = \"d\", instructions = \"i\" }\n",
    );
    let failed = ext_support::invoke(&mut p, "f", "reload", "").await;
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("{ext}:1: Invalid subagent profile \"Bad\"")),
        "{failed}"
    );
    let stderr = p.exit_by_eof().await.stderr;
    let ext = Path::new(&ext);
    assert_eq!(
        stderr
            .matches(&collision(ext, "reviewer", &dir.join("reviewer.md")))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches(&collision(ext, "scout", &dir.join("scout.md")))
            .count(),
        1,
        "the reload registered scout: {stderr}"
    );
}

/// The `profile` parameter of the `spawn_subagent` tool in the provider request of one prompt:
/// the catalog as the model sees it (`None`: no delegation tools).
async fn advertised_profiles(
    p: &mut Harness,
    mock: &zi_test_support::mock_llm::MockLlm,
    id: &str,
) -> Option<serde_json::Value> {
    mock.push(zi_test_support::mock_llm::Step::text("ok"));
    let before = mock.requests().len();
    let after = p.last_sequence();
    p.request_ok(
        id,
        "session.prompt",
        Some(serde_json::json!({"delivery": "direct", "text": "hi"})),
    )
    .await;
    p.event_after("agent_settled", after).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), before + 1);
    let tools = requests[before].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    tools
        .iter()
        .find(|t| t["function"]["name"] == "spawn_subagent")
        .map(|t| t["function"]["parameters"]["properties"]["profile"].clone())
}

#[tokio::test]
async fn the_composed_catalog_reaches_the_model_and_follows_reload() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    let agent = agent_with(&mock).trust(&[&cwd.path]);
    write(
        &cwd.path.join(".zi/subagents/reviewer.md"),
        "---\ndescription: project reviewer\n---\nReview.\n",
    );
    write(
        &agent.path().join("subagents/reviewer.md"),
        "---\ndescription: global reviewer\n---\nReview.\n",
    );
    write(
        &agent.path().join("subagents/scout.md"),
        "---\ndescription: global scout\n---\nLook.\n",
    );
    let ext = write(
        &cwd.path.join("team.lua"),
        r#"zi.register_subagent_profile{ name = "scout", description = "lua scout", instructions = "i" }
zi.register_subagent_profile{ name = "planner", description = "lua planner", instructions = "i" }
"#,
    );
    let mut p = spawn(&agent, &cwd.path, &["--no-session", "--extension", &ext]).await;
    let profile = advertised_profiles(&mut p, &mock, "p1")
        .await
        .expect("the delegation tools with a non-empty catalog");
    assert_eq!(
        profile["enum"],
        serde_json::json!(["reviewer", "scout", "planner"]),
        "{profile}"
    );
    let description = profile["description"].as_str().unwrap_or_default();
    for line in [
        "reviewer: project reviewer",
        "scout: global scout",
        "planner: lua planner",
    ] {
        assert!(description.contains(line), "{line:?} in {description}");
    }
    write(
        Path::new(&ext),
        r#"zi.register_subagent_profile{ name = "fixer", description = "lua fixer", instructions = "i" }
"#,
    );
    let reloaded = ext_support::invoke(&mut p, "r", "reload", "").await;
    assert!(reloaded["ok"] == true, "{reloaded}");
    let profile = advertised_profiles(&mut p, &mock, "p2").await.unwrap();
    assert_eq!(
        profile["enum"],
        serde_json::json!(["reviewer", "scout", "fixer"]),
        "{profile}"
    );
    p.exit_by_eof().await;
}

#[tokio::test]
async fn an_untrusted_project_adds_nothing_and_no_profiles_means_no_tools() {
    let mock = start_mock().await;
    let cwd = temp_cwd();
    write(
        &cwd.path.join(".zi/subagents/reviewer.md"),
        "---\ndescription: project reviewer\n---\nReview.\n",
    );
    let agent = agent_with(&mock);
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    assert_eq!(advertised_profiles(&mut p, &mock, "p1").await, None);
    p.exit_by_eof().await;

    write(
        &agent.path().join("subagents/reviewer.md"),
        "---\ndescription: global reviewer\n---\nReview.\n",
    );
    let mut p = spawn(&agent, &cwd.path, &["--no-session"]).await;
    let profile = advertised_profiles(&mut p, &mock, "p1").await.unwrap();
    assert_eq!(profile["enum"], serde_json::json!(["reviewer"]));
    let description = profile["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("reviewer: global reviewer"),
        "{description}"
    );
    p.exit_by_eof().await;
}
