//! Conformance kit for Zi RPC v1 servers.
//!
//! [`run`] launches the server command of a [`Config`] once per check, each time against a fresh
//! mock OpenAI-compatible provider (`zi-mock-provider`'s `MockLlm`), a fresh agent directory holding
//! a `models.json` for it, a fresh `HOME` and a fresh working directory. The command is a template:
//! `{agent_dir}`, `{model}` (`mock/m1`, a reasoning model) and `{cwd}` are substituted, e.g.
//! `zi --mode rpc --no-session --agent-dir {agent_dir} --model {model}`.
//!
//! Every check is tagged MUST or SHOULD with the docs/rpc.md section it tests (an anchor such as
//! `docs/rpc.md#framing`). Failures carry the wire transcript of the check (`>` client bytes, `<`
//! server lines, `#` notes). The last two checks look at every frame of the whole run: framing and
//! sequences, and the JSON Schema (`docs/rpc-schema.json`).

mod checks;
mod conn;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use zi_protocol::decode_cases::Rejection;

use serde_json::{Value, json};
use zi_mock_provider::mock_llm::MockLlm;

use conn::{Conn, ConnError, Transcript};

/// The model the mock provider serves, as `{model}` in the server template.
pub const MODEL: &str = "mock/m1";
const API_KEY: &str = "conformance-key";

/// What to check: the server command and which checks to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server command template.
    pub server: String,
    /// Only run checks whose id contains this text.
    pub filter: Option<String>,
}

/// How binding a check's rule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// A server must follow the rule.
    Must,
    /// A server should follow the rule; the report counts its failures apart (`failedMust`).
    Should,
}

impl Level {
    /// `MUST` or `SHOULD`, as the report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        }
    }
}

/// How one check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// The server followed the rule.
    Pass,
    /// The server broke the rule; the text says how.
    Fail(String),
    /// The check did not run; the text says why.
    Skip(String),
}

/// The result of one check.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The check's id, such as `framing.ready-first`.
    pub id: String,
    /// Whether the rule is a MUST or a SHOULD.
    pub level: Level,
    /// The docs/rpc.md section the rule comes from (`docs/rpc.md#framing`).
    pub section: String,
    /// What the check verifies, in one line.
    pub description: String,
    /// How it ended.
    pub status: Status,
    /// How long it took.
    pub duration_ms: u128,
    /// The wire transcript (kept for failures only).
    pub transcript: Vec<String>,
}

/// The results of a run, in run order.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// One result per check that ran.
    pub results: Vec<CheckResult>,
}

impl Summary {
    /// The number of results whose status matches `pred`.
    pub fn count(&self, pred: impl Fn(&Status) -> bool) -> usize {
        self.results.iter().filter(|r| pred(&r.status)).count()
    }
    /// Checks that passed.
    pub fn passed(&self) -> usize {
        self.count(|s| *s == Status::Pass)
    }
    /// Checks that failed, MUST and SHOULD.
    pub fn failed(&self) -> usize {
        self.count(|s| matches!(s, Status::Fail(_)))
    }
    /// Checks that were skipped.
    pub fn skipped(&self) -> usize {
        self.count(|s| matches!(s, Status::Skip(_)))
    }
    /// Failed MUST checks.
    pub fn failed_must(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.level == Level::Must && matches!(r.status, Status::Fail(_)))
            .count()
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary_line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        )
    }

    /// Human-readable report: one line per check, the transcript of each failure, the summary.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for r in &self.results {
            let (mark, detail) = match &r.status {
                Status::Pass => ("PASS", String::new()),
                Status::Fail(why) => ("FAIL", format!("\n      {why}")),
                Status::Skip(why) => ("SKIP", format!(" ({why})")),
            };
            out.push_str(&format!(
                "{mark} [{:<6}] {:<44} {}{detail}\n",
                r.level.as_str(),
                r.id,
                r.section
            ));
        }
        let failures: Vec<&CheckResult> = self
            .results
            .iter()
            .filter(|r| matches!(r.status, Status::Fail(_)))
            .collect();
        for r in failures {
            out.push_str(&format!("\n--- transcript of {} ---\n", r.id));
            for line in &r.transcript {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str(&format!("\n{}\n", self.summary_line()));
        out
    }

    /// The JSON report `--report` writes: the counts and every check with its status, message,
    /// duration and, for a failure, its transcript.
    pub fn json(&self) -> Value {
        let checks: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                let (status, message) = match &r.status {
                    Status::Pass => ("pass", None),
                    Status::Fail(m) => ("fail", Some(m.clone())),
                    Status::Skip(m) => ("skip", Some(m.clone())),
                };
                json!({
                    "id": r.id,
                    "level": r.level.as_str(),
                    "section": r.section,
                    "description": r.description,
                    "status": status,
                    "message": message,
                    "durationMs": r.duration_ms as u64,
                    "transcript": if status == "fail" { json!(r.transcript) } else { Value::Null },
                })
            })
            .collect();
        json!({
            "passed": self.passed(),
            "failed": self.failed(),
            "skipped": self.skipped(),
            "failedMust": self.failed_must(),
            "checks": checks,
        })
    }
}

/// The outcome of a check body.
pub(crate) type Outcome = Result<(), CheckError>;

/// Why a check body did not pass.
#[derive(Debug)]
pub(crate) enum CheckError {
    /// The server broke the rule; the text says how.
    Fail(String),
    /// The check cannot run here (none does today; the report format keeps the status).
    #[allow(dead_code)]
    Skip(String),
}

impl From<String> for CheckError {
    fn from(s: String) -> Self {
        CheckError::Fail(s)
    }
}

impl From<conn::ConnError> for CheckError {
    fn from(error: conn::ConnError) -> Self {
        CheckError::Fail(error.to_string())
    }
}

impl From<&str> for CheckError {
    fn from(s: &str) -> Self {
        CheckError::Fail(s.to_string())
    }
}

pub(crate) type BoxFut<'a> = Pin<Box<dyn Future<Output = Outcome> + 'a>>;

/// The environment of one check: its mock provider, directories and transcript.
pub(crate) struct Ctx {
    template: Vec<String>,
    pub mock: MockLlm,
    agent: tempfile::TempDir,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    transcript: Transcript,
    all_frames: Arc<Mutex<Vec<Value>>>,
    violations: Vec<Arc<Mutex<Vec<conn::Violation>>>>,
}

impl Ctx {
    fn argv(&self, extra: &[&str]) -> Vec<String> {
        let agent = self.agent.path().display().to_string();
        let cwd = self.cwd.path().display().to_string();
        let mut argv: Vec<String> = self
            .template
            .iter()
            .map(|w| {
                w.replace("{agent_dir}", &agent)
                    .replace("{model}", MODEL)
                    .replace("{cwd}", &cwd)
            })
            .collect();
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }

    /// Spawns the server with extra arguments, without waiting for `ready`.
    pub fn spawn_with(&mut self, extra: &[&str]) -> Result<Conn, ConnError> {
        let conn = Conn::spawn(
            &self.argv(extra),
            self.cwd.path(),
            self.home.path(),
            self.transcript.clone(),
            self.all_frames.clone(),
        )?;
        self.violations.push(conn.violations.clone());
        Ok(conn)
    }

    /// Spawns the server and waits for `ready`.
    pub async fn conn(&mut self) -> Result<Conn, ConnError> {
        let mut conn = self.spawn_with(&[])?;
        conn.ready().await?;
        Ok(conn)
    }
}

pub(crate) struct Check {
    pub id: String,
    pub level: Level,
    pub section: &'static str,
    pub description: String,
    pub body: Body,
}

pub(crate) enum Body {
    Fn(for<'a> fn(&'a mut Ctx) -> BoxFut<'a>),
    /// Sends one record on a fresh connection and expects its recoverable `protocol_error`
    /// (a rejected row of zi-protocol's decode-case table).
    Decode(&'static str, Rejection),
}

fn template(server: &str) -> Vec<String> {
    server.split_whitespace().map(str::to_string).collect()
}

async fn run_decode(
    ctx: &mut Ctx,
    line: &str,
    code: &str,
    message: &str,
    id: Option<&str>,
) -> Outcome {
    let mut conn = ctx.conn().await?;
    let mut bytes = line.as_bytes().to_vec();
    bytes.push(b'\n');
    conn.send_raw(&bytes).await?;
    let frame = conn.protocol_error().await?;
    if frame["code"] != code {
        return Err(format!("expected code {code}, got {}", frame["code"]).into());
    }
    if frame["message"] != message {
        return Err(format!("expected message {message:?}, got {}", frame["message"]).into());
    }
    match id {
        Some(id) if frame["id"] != id => {
            return Err(format!("expected id {id:?}, got {}", frame["id"]).into());
        }
        None if frame.get("id").is_some() => {
            return Err(format!("expected no id key, got {}", frame["id"]).into());
        }
        _ => {}
    }
    // Recoverable: the connection still answers.
    conn.call_ok("after", "session.get_state", None).await?;
    let status = conn.finish().await;
    if status.map(|s| s.success()) != Some(true) {
        return Err(format!("exit after EOF was {status:?}, expected 0").into());
    }
    Ok(())
}

/// Runs every check (or those matching the filter) and returns the results.
pub async fn run(config: &Config) -> Summary {
    let template = template(&config.server);
    let all_frames = Arc::new(Mutex::new(Vec::new()));
    let mut summary = Summary::default();
    let mut violations_all = Vec::new();
    for check in checks::all() {
        if let Some(filter) = &config.filter
            && !check.id.contains(filter.as_str())
        {
            continue;
        }
        let started = Instant::now();
        let status = match setup(&template, all_frames.clone()).await {
            Err(e) => (Status::Fail(format!("setup failed: {e}")), Vec::new()),
            Ok(mut ctx) => {
                let outcome = match &check.body {
                    Body::Fn(f) => f(&mut ctx).await,
                    Body::Decode(line, expected) => {
                        run_decode(&mut ctx, line, expected.code, expected.message, expected.id)
                            .await
                    }
                };
                let transcript = ctx.transcript.lock().map(|t| t.clone()).unwrap_or_default();
                violations_all.append(&mut ctx.violations);
                ctx.mock.shutdown();
                match outcome {
                    Ok(()) => (Status::Pass, Vec::new()),
                    Err(CheckError::Fail(m)) => (Status::Fail(m), transcript),
                    Err(CheckError::Skip(m)) => (Status::Skip(m), Vec::new()),
                }
            }
        };
        summary.results.push(CheckResult {
            id: check.id,
            level: check.level,
            section: check.section.to_string(),
            description: check.description,
            status: status.0,
            duration_ms: started.elapsed().as_millis(),
            transcript: status.1,
        });
    }
    if config.filter.is_none() {
        summary
            .results
            .extend(checks::whole_run(&all_frames, &violations_all));
    }
    summary
}

/// Why a check's environment could not be prepared (reported as `setup failed: …`).
#[derive(Debug, thiserror::Error)]
enum SetupError {
    #[error("the server command is empty")]
    EmptyCommand,
    #[error("start the mock provider: {0}")]
    Mock(std::io::Error),
    /// A temporary directory or the `models.json` in it.
    #[error("{0}")]
    Files(std::io::Error),
}

async fn setup(template: &[String], all_frames: Arc<Mutex<Vec<Value>>>) -> Result<Ctx, SetupError> {
    if template.is_empty() {
        return Err(SetupError::EmptyCommand);
    }
    let mock = MockLlm::start().await.map_err(SetupError::Mock)?;
    let agent = tempfile::Builder::new()
        .prefix("zi-agent-")
        .tempdir()
        .map_err(SetupError::Files)?;
    let models = mock.models_json(
        API_KEY,
        &[json!({"id": "m1", "name": "M1", "reasoning": true, "contextWindow": 128000, "maxTokens": 16384})],
    );
    std::fs::write(agent.path().join("models.json"), models).map_err(SetupError::Files)?;
    let home = tempfile::tempdir().map_err(SetupError::Files)?;
    let cwd = tempfile::tempdir().map_err(SetupError::Files)?;
    Ok(Ctx {
        template: template.to_vec(),
        mock,
        agent,
        home,
        cwd,
        transcript: Arc::new(Mutex::new(Vec::new())),
        all_frames,
        violations: Vec::new(),
    })
}

/// Where a report file goes.
pub fn write_report(summary: &Summary, path: &PathBuf) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&summary.json()).unwrap_or_default();
    std::fs::write(path, text + "\n")
}
