//! One ACP session: an `AgentSession` with its subscriber (the live mapper and the open
//! prompts), its mode, its approval sink and its output (docs/acp.md).
//!
//! Lock order: the `AgentSession`'s lock (held while events are delivered) → [`Inner`] →
//! the sink → the writer's queue. Nothing here calls into the `AgentSession` while holding
//! [`Inner`].

mod events;
pub mod sink;
mod turn;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_schema::v1::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionNotification, SessionUpdate,
};
use zi_agent::AgentSession;
use zi_protocol::params::{SandboxParams, SetApprovalsParams};

use crate::config::Snapshot;
use crate::factory::{OpenedSession, OperatorFloor};
use crate::jsonrpc::{self, RpcError};
use crate::link::Link;
use crate::lock;
use crate::mapper::live::LiveMapper;
use crate::modes::{self, Mode};
use crate::turns::Turns;
use sink::Sink;

/// How long a disposal may take (zi's usual settlement).
pub const DISPOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the subscriber and the handlers share.
pub(crate) struct Inner {
    pub(crate) mapper: LiveMapper,
    pub(crate) turns: Turns,
    pub(crate) mode: Mode,
    /// A cancelled turn was answered before it settled: its late events are dropped.
    pub(crate) muted: bool,
    /// Runs settled so far (a forced cancel applies only to the run it was asked for).
    pub(crate) settles: u64,
    /// A config push is scheduled.
    pub(crate) refreshing: bool,
}

pub struct AcpSession {
    me: std::sync::Weak<AcpSession>,
    pub id: String,
    pub session: AgentSession,
    pub cwd: PathBuf,
    pub floor: OperatorFloor,
    link: Arc<Link>,
    sink: Sink,
    inner: Mutex<Inner>,
    subscription: Mutex<Option<u64>>,
    closed: AtomicBool,
    start_mcp: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl AcpSession {
    /// Wraps a session the factory built: subscribes the mapper, applies the first mode and
    /// holds its output until [`AcpSession::opened`].
    pub fn attach(
        opened: OpenedSession,
        link: Arc<Link>,
        mapper: LiveMapper,
    ) -> Result<Arc<AcpSession>, RpcError> {
        let OpenedSession {
            session,
            start_mcp,
            floor,
        } = opened;
        let mode = modes::initial(&floor);
        let acp = Arc::new_cyclic(|me| AcpSession {
            me: me.clone(),
            id: session.session_id(),
            cwd: session.cwd().to_path_buf(),
            session,
            floor,
            sink: Sink::held(link.output.clone()),
            link,
            inner: Mutex::new(Inner {
                mapper,
                turns: Turns::default(),
                mode,
                muted: false,
                settles: 0,
                refreshing: false,
            }),
            subscription: Mutex::new(None),
            closed: AtomicBool::new(false),
            start_mcp: Mutex::new(start_mcp),
        });
        if let Err(error) = acp.apply_mode(mode) {
            // Never served: its extensions and tools stop now.
            let session = acp.session.clone();
            acp.link
                .runtime
                .spawn(async move { session.dispose_for("quit").await });
            return Err(error);
        }
        let subscriber = events::subscriber(&acp);
        *lock(&acp.subscription) = Some(acp.session.subscribe(subscriber));
        acp.session
            .set_backpressure(Some(Arc::new(acp.link.output.clone())));
        Ok(acp)
    }

    /// The setup response is queued: let the held updates out, start the MCP servers once
    /// the response is written, and tell the client the commands.
    pub fn opened(&self, response: jsonrpc::Line) {
        let start = lock(&self.start_mcp).take();
        self.sink.send_now(
            response,
            start.map(|f| Box::new(f) as zi_rpc::output::Release),
        );
        self.sink.release();
        self.send_update(crate::commands::update(&self.session));
    }

    /// Holds this session's live output (a load replays first).
    pub fn hold(&self) {
        self.sink.hold();
    }

    /// Queues a replayed update ahead of the held live ones.
    pub fn send_replayed(&self, update: SessionUpdate) {
        self.sink.send_now(
            jsonrpc::notification_line("session/update", &self.notify(update)),
            None,
        );
    }

    /// Queues the response of a load of an open session, then its held updates.
    pub fn reopened(&self, response: jsonrpc::Line) {
        self.sink.send_now(response, None);
        self.sink.release();
    }

    fn notify(&self, update: SessionUpdate) -> SessionNotification {
        SessionNotification::new(self.id.clone(), update)
    }

    fn send_update(&self, update: SessionUpdate) {
        self.sink.send(jsonrpc::notification_line(
            "session/update",
            &self.notify(update),
        ));
    }

    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The config options as they are now (takes the session lock).
    pub fn snapshot(&self) -> Snapshot {
        let mode = lock(&self.inner).mode;
        Snapshot::read(&self.session, mode, self.floor)
    }

    /// The `modes` of a setup response.
    pub fn modes(&self) -> agent_client_protocol_schema::v1::SessionModeState {
        modes::state(lock(&self.inner).mode, &self.floor)
    }

    /// Pushes the complete config options.
    pub fn push_config(&self) {
        let options = self.snapshot().options();
        self.send_update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            options,
        )));
    }

    /// Applies a mode through the broker: refused (with the broker's text) when it is looser
    /// than the operator allows.
    fn apply_mode(&self, mode: Mode) -> Result<(), RpcError> {
        if !mode.allowed(&self.floor) {
            return Err(RpcError::invalid_params(format!(
                "Mode {} is looser than the operator allows (approval policy {}, sandbox {})",
                mode.id(),
                self.floor.policy.as_str(),
                self.floor.sandbox.as_str()
            )));
        }
        let params = SetApprovalsParams {
            enabled: true,
            policy: Some(mode.policy()),
            sandbox: Some(SandboxParams {
                mode: Some(mode.sandbox()),
                network: None,
                // The additional directories are the operator's roots already (the factory
                // adds them), so every mode's sandbox has them.
                writable_roots: None,
            }),
            rules: None,
            timeout_ms: None,
        };
        self.session
            .set_approvals(params, events::approval_sink(self))
            .map(|_| ())
            .map_err(RpcError::from)
    }

    /// `session/set_mode` and the `mode` config option.
    pub fn set_mode(&self, id: &str) -> Result<(), RpcError> {
        let mode = Mode::parse(id)
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown mode: {id}")))?;
        self.apply_mode(mode)?;
        lock(&self.inner).mode = mode;
        self.send_update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            mode.id(),
        )));
        self.push_config();
        Ok(())
    }

    /// Ends the session's work and frees it: open prompts answer `cancelled`, pending
    /// permission requests are withdrawn, then MCP servers, subagents, extensions and
    /// background tasks stop (within [`DISPOSE_TIMEOUT`]).
    pub async fn close(&self, reason: &str) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return true;
        }
        self.sink.release();
        lock(&self.inner).turns.cancel();
        let disposed = tokio::time::timeout(DISPOSE_TIMEOUT, async {
            self.session.abort_and_discard().await;
            self.answer_all_cancelled();
            self.session.dispose_for(reason).await;
        })
        .await
        .is_ok();
        self.answer_all_cancelled();
        if let Some(id) = lock(&self.subscription).take() {
            self.session.unsubscribe(id);
        }
        self.session.set_backpressure(None);
        disposed
    }

    /// Answers every open prompt `cancelled` now and drops the rest of the run's events.
    fn answer_all_cancelled(&self) {
        let mut inner = lock(&self.inner);
        let answers = inner.turns.cancel_all();
        if !answers.is_empty() {
            inner.muted = true;
        }
        for (id, outcome) in answers {
            self.send_answer(&id, outcome);
        }
    }
}
