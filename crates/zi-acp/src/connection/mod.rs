//! One ACP connection over a byte stream pair (docs/acp.md#connection): the input thread,
//! the session table, and the shutdown that cancels every session's work.

mod dispatch;
mod input;

pub(crate) use dispatch::decode as params;

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_rpc::output::Output;
use zi_rpc::{ConnectionResult, SETTLE_TIMEOUT};

use crate::factory::SessionFactory;
use crate::jsonrpc::{self, RpcError};
use crate::link::Link;
use crate::lock;
use crate::session::AcpSession;

pub(crate) struct Connection {
    pub(crate) link: Arc<Link>,
    pub(crate) factory: Arc<dyn SessionFactory>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    /// Client requests that `$/cancel_request` can stop (a `session/load` replaying), by id.
    cancellable: Mutex<HashMap<String, CancellationToken>>,
    /// No more requests are served (shutdown).
    stopping: AtomicBool,
}

impl Connection {
    pub(crate) fn session(&self, id: &str) -> Result<Arc<AcpSession>, RpcError> {
        lock(&self.sessions)
            .get(id)
            .filter(|acp| !acp.closed())
            .cloned()
            .ok_or_else(|| RpcError::session_not_found(id))
    }

    pub(crate) fn open_session(&self, id: &str) -> Option<Arc<AcpSession>> {
        lock(&self.sessions).get(id).cloned()
    }

    pub(crate) fn insert(&self, acp: Arc<AcpSession>) {
        lock(&self.sessions).insert(acp.id.clone(), acp);
    }

    pub(crate) fn remove(&self, id: &str) -> Option<Arc<AcpSession>> {
        lock(&self.sessions).remove(id)
    }

    /// Answers a request.
    pub(crate) fn respond<R: serde::Serialize>(&self, id: &Value, outcome: Result<R, RpcError>) {
        self.link.send(jsonrpc::response_line(id, &outcome));
    }

    /// A token `$/cancel_request` fires for the request `id`, until [`Connection::finished`].
    pub(crate) fn cancellable(&self, id: &Value) -> CancellationToken {
        let token = CancellationToken::new();
        lock(&self.cancellable).insert(id.to_string(), token.clone());
        token
    }

    pub(crate) fn finished(&self, id: &Value) {
        lock(&self.cancellable).remove(&id.to_string());
    }

    fn cancel_request(&self, id: &Value) {
        if let Some(token) = lock(&self.cancellable).get(&id.to_string()) {
            token.cancel();
        }
        // An open prompt is cancelled as `session/cancel` would cancel its session.
        let sessions: Vec<Arc<AcpSession>> = lock(&self.sessions).values().cloned().collect();
        for acp in sessions {
            acp.cancel_prompt(id);
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Shutdown: every session's work is cancelled, its open prompts answered `cancelled`
    /// (while stdout takes them), then every session is disposed.
    async fn shut_down(&self) -> bool {
        self.stopping.store(true, Ordering::SeqCst);
        let sessions: Vec<Arc<AcpSession>> =
            lock(&self.sessions).drain().map(|(_, acp)| acp).collect();
        let closing = sessions.iter().map(|acp| async move {
            acp.session.disconnect_approvals();
            acp.close("quit").await
        });
        let disposed = futures::future::join_all(closing).await;
        self.link.outgoing.clear();
        disposed.into_iter().all(|ok| ok)
    }
}

/// Serves one connection until EOF, `cancel` (a signal) or a failure, then settles: every
/// session's work is cancelled and its prompts answered, sessions are disposed, output drains.
pub async fn serve<R, W>(
    factory: Arc<dyn SessionFactory>,
    input: R,
    output: W,
    cancel: CancellationToken,
) -> ConnectionResult
where
    R: Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let output = match Output::start(output) {
        Ok(output) => output,
        Err(error) => {
            return ConnectionResult::OutputError(format!("Could not write ACP output: {error}"));
        }
    };
    let link = Arc::new(Link::new(output.clone(), tokio::runtime::Handle::current()));
    let connection = Arc::new(Connection {
        link,
        factory,
        sessions: Mutex::new(HashMap::new()),
        cancellable: Mutex::new(HashMap::new()),
        stopping: AtomicBool::new(false),
    });
    let (ended_tx, mut ended) = mpsc::channel(1);
    input::spawn_reader(input, Arc::downgrade(&connection), ended_tx);
    let mut result = tokio::select! {
        biased;
        () = cancel.cancelled() => ConnectionResult::Cancelled,
        () = output.failed() => ConnectionResult::OutputError(output.failure().unwrap_or_default()),
        end = ended.recv() => match end {
            Some(Err(error)) => {
                ConnectionResult::InputError(format!("Could not read ACP input: {error}"))
            }
            Some(Ok(())) | None => ConnectionResult::Eof,
        },
    };
    if tokio::time::timeout(SETTLE_TIMEOUT, connection.shut_down())
        .await
        .map_or(true, |disposed| !disposed)
    {
        output.abandon("Session disposal timed out");
        result = ConnectionResult::SettlementError("Session disposal timed out".into());
    }
    output.close();
    if tokio::time::timeout(SETTLE_TIMEOUT, output.drained())
        .await
        .is_err()
        && result == ConnectionResult::Eof
    {
        result = ConnectionResult::SettlementError(
            "Pending ACP output could not be written within 5 s".into(),
        );
    }
    match output.failure() {
        Some(message) if !matches!(result, ConnectionResult::SettlementError(_)) => {
            ConnectionResult::OutputError(message)
        }
        _ => result,
    }
}
