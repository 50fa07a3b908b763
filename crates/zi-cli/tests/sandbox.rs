//! Black-box tests of the bash sandbox (docs/approvals.md#the-sandbox) on this machine's real
//! kernel: writes inside and outside the roots, TCP, UDP, Unix sockets, no-new-privs, signals to
//! zi, background tasks and descendants, the start-up probe and forced unavailability, the
//! `write`/`edit` path checks, configuration layers, and the v1 shape without configuration.
//!
//! Every directory lives outside `/tmp` and `$TMPDIR` (writable roots of `workspace-write`),
//! wherever the checkout lives ([`outside_writable_roots`]), so "outside the roots" really is
//! outside. Tests print `SKIP: REASON` and
//! pass when the kernel offers no usable Landlock.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use zi_sandbox::{MIN_LANDLOCK_ABI, kernel_landlock_abi};
use zi_test_support::dirs::{AgentDir, TempCwd, outside_writable_roots};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

use crate::wire_support::result_text;

mod configuration;
mod confinement;
mod escalation;
mod write_and_edit;

const ZI: &str = env!("CARGO_BIN_EXE_zi");
const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-sandbox";

/// The kernel's Landlock ABI, or `None` after printing why the sandbox tests are skipped.
fn landlock_abi() -> Option<u32> {
    match kernel_landlock_abi() {
        Ok(abi) if abi >= MIN_LANDLOCK_ABI => Some(abi),
        Ok(abi) => {
            println!("SKIP: Landlock ABI {abi} is older than {MIN_LANDLOCK_ABI}");
            None
        }
        Err(reason) => {
            println!("SKIP: {reason}");
            None
        }
    }
}

/// A cwd, a HOME and an agent directory, all outside `/tmp`.
struct Scene {
    _root: TempCwd,
    mock: MockLlm,
    agent: AgentDir,
    cwd: PathBuf,
    home: PathBuf,
}

async fn scene() -> Scene {
    let root = outside_writable_roots("zi-sandbox-", Path::new(env!("CARGO_TARGET_TMPDIR")));
    let base = root.path.clone();
    let cwd = base.join("project");
    let home = base.join("home");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mock = start_mock().await;
    let agent = AgentDir::new_in(&base).models(&mock, KEY, &[json!({"id": "m1"})]);
    Scene {
        _root: root,
        mock,
        agent,
        cwd,
        home,
    }
}

impl Scene {
    fn command(&self, args: &[&str]) -> ZiCommand {
        ZiCommand::rpc(ZI, &self.agent, &self.cwd)
            .no_session()
            .model("mock/m1")
            .env("HOME", &self.home)
            .args(args)
            .timeout(WAIT)
    }

    async fn spawn(&self, args: &[&str]) -> Harness {
        self.command(args).spawn_rpc().await
    }

    /// Runs one tool call in its own prompt and returns its `tool_execution_end` event.
    async fn call(&self, p: &mut Harness, tool: &str, args: Value) -> Value {
        self.mock.push(Step::tool_call("c", tool, args));
        self.mock.push(Step::text("done"));
        let after = p.last_sequence();
        let id = format!("p{after}");
        p.prompt(&id, "go").await;
        let end = p.event_after("tool_execution_end", after).await;
        p.event_after("agent_settled", after).await;
        end["event"].clone()
    }

    /// The `workspace-write` roots as results name them: the cwd, `/tmp`, then `$TMPDIR`.
    fn roots_text(&self) -> String {
        let mut roots = vec![self.cwd.clone(), PathBuf::from("/tmp")];
        if let Some(tmpdir) =
            std::env::var_os("TMPDIR").and_then(|t| Path::new(&t).canonicalize().ok())
            && !roots.contains(&tmpdir)
        {
            roots.push(tmpdir);
        }
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    async fn bash(&self, p: &mut Harness, command: &str) -> Value {
        self.call(p, "bash", json!({"command": command})).await
    }

    /// Prompts one tool call, waits for its `approval_request` and answers it with `answer`
    /// (the decision; the approval id is added); returns the request and the call's
    /// `tool_execution_end`, once the run settled.
    async fn call_asked(
        &self,
        p: &mut Harness,
        (call_id, tool, args): (&str, &str, Value),
        answer: Value,
    ) -> (Value, Value) {
        self.mock.push(Step::tool_call(call_id, tool, args));
        self.mock.push(Step::text("done"));
        let after = p.last_sequence();
        p.prompt(&format!("p-{call_id}"), "go").await;
        let asked = p
            .wait_for("an approval_request", |f| {
                f["type"] == "approval_request" && f["sequence"].as_u64().unwrap() > after
            })
            .await["approval"]
            .clone();
        let mut params = answer;
        params["approvalId"] = asked["approvalId"].clone();
        p.request_ok(&format!("r-{call_id}"), "approval.respond", Some(params))
            .await;
        let end = p.event_after("tool_execution_end", after).await["event"].clone();
        p.event_after("agent_settled", after).await;
        (asked, end)
    }
}

/// The scene with zi started in it with `args`, or `None` (the test is skipped) when the
/// kernel's Landlock is missing or too old ([`landlock_abi`]).
async fn sandboxed(args: &[&str]) -> Option<(Scene, Harness)> {
    landlock_abi()?;
    let s = scene().await;
    let p = s.spawn(args).await;
    Some((s, p))
}
