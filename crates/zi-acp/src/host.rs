//! Many sessions in one process (docs/acp.md#sessions): `session/new`, `session/load`
//! (replay, then the response), `session/resume`, `session/list`, `session/close` and
//! `session/delete`. Building and replaying read files, so they run on blocking tasks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ListSessionsRequest, LoadSessionRequest, LoadSessionResponse, McpServer, NewSessionRequest,
    NewSessionResponse, ResumeSessionResponse, SessionUpdate,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use zi_agent::AgentSession;
use zi_protocol::state::ModelState;

use crate::connection::Connection;
use crate::connection::params;
use crate::factory::OpenRequest;
use crate::jsonrpc::{self, REQUEST_CANCELLED, RpcError};
use crate::mapper::live::LiveMapper;
use crate::mapper::replay::Replay;
use crate::session::AcpSession;
use crate::{listing, mcp};

/// What every setup request carries.
struct Setup {
    cwd: PathBuf,
    additional_dirs: Vec<PathBuf>,
    mcp_servers: Map<String, Value>,
}

fn setup(cwd: &Path, dirs: &[PathBuf], servers: &[McpServer]) -> Result<Setup, RpcError> {
    let cwd = absolute_dir(cwd, "cwd")?;
    let additional_dirs = dirs
        .iter()
        .map(|dir| absolute_dir(dir, "additionalDirectories"))
        .collect::<Result<Vec<_>, _>>()?;
    let (mcp_servers, warnings) = mcp::definitions(servers);
    for warning in warnings {
        eprintln!("Warning: {warning}");
    }
    Ok(Setup {
        cwd,
        additional_dirs,
        mcp_servers,
    })
}

/// An absolute, existing directory, canonical (as zi's own working directory is).
fn absolute_dir(path: &Path, field: &str) -> Result<PathBuf, RpcError> {
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: {field} must be an absolute path: {}",
            path.display()
        )));
    }
    path.canonicalize()
        .ok()
        .filter(|dir| dir.is_dir())
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid params: {field} is not an accessible directory: {}",
                path.display()
            ))
        })
}

fn context_window(session: &AgentSession) -> u64 {
    match session.state().model {
        ModelState::Selected { model } => model.context_window,
        ModelState::Unselected => 0,
    }
}

impl Connection {
    /// Builds the session with the factory, the client's file system bound to it.
    fn open(
        &self,
        setup: Setup,
        resume: Option<PathBuf>,
    ) -> Result<crate::factory::OpenedSession, RpcError> {
        let fs = crate::fs::client_file_io(&self.link, &setup.cwd, &setup.additional_dirs);
        let request = OpenRequest {
            file_io: fs
                .clone()
                .map(|fs| fs as Arc<dyn zi_agent::file_io::FileIo>),
            cwd: setup.cwd,
            additional_dirs: setup.additional_dirs,
            mcp_servers: setup.mcp_servers,
            resume,
        };
        let opened = self.factory.open(request).map_err(RpcError::internal)?;
        if let Some(fs) = fs {
            fs.bind(&opened.session.session_id());
        }
        Ok(opened)
    }

    /// Builds and registers a new session; its output is held until [`AcpSession::opened`].
    fn build(&self, setup: Setup) -> Result<Arc<AcpSession>, RpcError> {
        let cwd = setup.cwd.clone();
        let opened = self.open(setup, None)?;
        let window = context_window(&opened.session);
        let mapper = LiveMapper::new(cwd, self.link.display(), window, 0.0, false);
        let acp = AcpSession::attach(opened, self.link.clone(), mapper)?;
        self.insert(acp.clone());
        Ok(acp)
    }

    pub(crate) fn new_session(self: &Arc<Self>, id: Value, raw: Option<Value>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let built = params::<NewSessionRequest>(raw).and_then(|request| {
                let setup = setup(
                    &request.cwd,
                    &request.additional_directories,
                    &request.mcp_servers,
                )?;
                me.build(setup)
            });
            match built {
                Ok(acp) => {
                    let response = NewSessionResponse::new(acp.id.clone())
                        .modes(acp.modes())
                        .config_options(acp.snapshot().options());
                    acp.opened(jsonrpc::result_line(&id, &response));
                }
                Err(error) => me.respond::<Value>(&id, Err(error)),
            }
        });
    }

    /// `session/load` (`replay`) and `session/resume`.
    pub(crate) fn load_session(self: &Arc<Self>, id: Value, raw: Option<Value>, replay: bool) {
        let me = self.clone();
        let token = self.cancellable(&id);
        tokio::task::spawn_blocking(move || {
            let outcome = me.load(&id, raw, replay, &token);
            me.finished(&id);
            if let Err(error) = outcome {
                me.respond::<Value>(&id, Err(error));
            }
        });
    }

    fn load(
        &self,
        id: &Value,
        raw: Option<Value>,
        replay: bool,
        token: &CancellationToken,
    ) -> Result<(), RpcError> {
        // `session/resume` takes exactly `session/load`'s fields (sessionId, cwd,
        // additionalDirectories, mcpServers), so both decode as the load request.
        let request: LoadSessionRequest = params(raw)?;
        let setup = setup(
            &request.cwd,
            &request.additional_directories,
            &request.mcp_servers,
        )?;
        let session_id = String::from(&*request.session_id.0);
        let respond = |acp: &AcpSession| {
            let modes = acp.modes();
            let options = acp.snapshot().options();
            if replay {
                let response = LoadSessionResponse::new()
                    .modes(modes)
                    .config_options(options);
                jsonrpc::result_line(id, &response)
            } else {
                let response = ResumeSessionResponse::new()
                    .modes(modes)
                    .config_options(options);
                jsonrpc::result_line(id, &response)
            }
        };
        // Already open here: the same session (so cancel keeps working), replayed as it is.
        if let Some(acp) = self.open_session(&session_id).filter(|a| !a.closed()) {
            check_cwd(&acp.cwd, &setup.cwd)?;
            acp.hold();
            if replay {
                let sent = replay_into(&acp.session, &acp.cwd, self, token, |update| {
                    acp.send_replayed(update)
                });
                if sent.is_err() {
                    acp.reopened(jsonrpc::error_line(id, &cancelled()));
                    return Ok(());
                }
            }
            acp.reopened(respond(&acp));
            return Ok(());
        }
        let path = listing::find(self.factory.as_ref(), &session_id)
            .ok_or_else(|| RpcError::session_not_found(&session_id))?;
        let cwd = setup.cwd.clone();
        let opened = self.open(setup, Some(path))?;
        if let Err(error) = check_cwd(opened.session.cwd(), &cwd) {
            let session = opened.session;
            self.link
                .runtime
                .spawn(async move { session.dispose().await });
            return Err(error);
        }
        let carried = if replay {
            let link = self.link.clone();
            let session_id = session_id.clone();
            match replay_into(&opened.session, &cwd, self, token, |update| {
                let note = agent_client_protocol_schema::v1::SessionNotification::new(
                    session_id.clone(),
                    update,
                );
                link.send(jsonrpc::notification_line("session/update", &note));
            }) {
                Ok(carried) => carried,
                Err(()) => {
                    let session = opened.session;
                    self.link
                        .runtime
                        .spawn(async move { session.dispose().await });
                    return Err(cancelled());
                }
            }
        } else {
            let cost = opened
                .session
                .stats()
                .map_or(0.0, |stats| stats.total.usage.cost.total);
            (cost, opened.session.message_count() > 0)
        };
        let window = context_window(&opened.session);
        let mapper = LiveMapper::new(cwd, self.link.display(), window, carried.0, carried.1);
        let acp = AcpSession::attach(opened, self.link.clone(), mapper)?;
        self.insert(acp.clone());
        acp.opened(respond(&acp));
        Ok(())
    }

    pub(crate) fn list_sessions(self: &Arc<Self>, id: Value, raw: Option<Value>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let outcome = params::<ListSessionsRequest>(raw).and_then(|request| {
                listing::list(
                    me.factory.as_ref(),
                    request.cwd.as_deref(),
                    request.cursor.as_deref(),
                )
            });
            me.respond(&id, outcome);
        });
    }

    /// `session/close` and `session/delete` (which also removes the journal and its blobs;
    /// an unknown or already deleted session is not an error).
    pub(crate) fn close_session(self: &Arc<Self>, id: Value, raw: Option<Value>, delete: bool) {
        let me = self.clone();
        self.link.runtime.spawn(async move {
            let session_id = if delete {
                params::<DeleteSessionRequest>(raw).map(|r| String::from(&*r.session_id.0))
            } else {
                params::<CloseSessionRequest>(raw).map(|r| String::from(&*r.session_id.0))
            };
            let session_id = match session_id {
                Ok(session_id) => session_id,
                Err(error) => return me.respond::<Value>(&id, Err(error)),
            };
            let open = me.remove(&session_id);
            if let Some(acp) = &open {
                acp.close("close").await;
            }
            if !delete {
                return match open {
                    Some(_) => me.respond(&id, Ok(CloseSessionResponse::new())),
                    None => me.respond::<Value>(&id, Err(RpcError::session_not_found(&session_id))),
                };
            }
            let factory = me.factory.clone();
            let removed =
                tokio::task::spawn_blocking(move || remove_journal(&*factory, &session_id))
                    .await
                    .unwrap_or_else(|error| Err(RpcError::internal(error.to_string())));
            me.respond(&id, removed.map(|()| DeleteSessionResponse::new()));
        });
    }
}

fn cancelled() -> RpcError {
    RpcError::new(REQUEST_CANCELLED, "Request cancelled")
}

fn check_cwd(session_cwd: &Path, requested: &Path) -> Result<(), RpcError> {
    if session_cwd == requested {
        return Ok(());
    }
    Err(RpcError::invalid_params(format!(
        "Invalid params: cwd {} is not the session's working directory {}",
        requested.display(),
        session_cwd.display()
    )))
}

/// Replays the whole journal (pages of entries, compacted ones read back from the file) into
/// `send`; returns the cost so far and whether it has a title, or `Err` when cancelled.
fn replay_into(
    session: &AgentSession,
    cwd: &Path,
    connection: &Connection,
    token: &CancellationToken,
    mut send: impl FnMut(SessionUpdate),
) -> Result<(f64, bool), ()> {
    let mut replay = Replay::new(cwd.to_path_buf(), connection.link.display());
    let mut start = 0;
    loop {
        if token.is_cancelled() {
            return Err(());
        }
        let Ok(page) = session.entries_page(start, 100) else {
            break;
        };
        for entry in &page.entries {
            for update in replay.entry(entry) {
                send(update);
            }
        }
        match page.next_start {
            Some(next) => start = next,
            None => break,
        }
    }
    for update in replay.finish(context_window(session)) {
        send(update);
    }
    Ok((replay.cost(), replay.titled()))
}

/// Removes `<id>.jsonl` and `<id>.blobs/`.
fn remove_journal(
    factory: &dyn crate::factory::SessionFactory,
    session_id: &str,
) -> Result<(), RpcError> {
    let Some(path) = listing::find(factory, session_id) else {
        return Ok(());
    };
    std::fs::remove_file(&path).map_err(|error| {
        RpcError::internal(format!("Could not delete {}: {error}", path.display()))
    })?;
    let blobs = path.with_extension("blobs");
    if blobs.is_dir() {
        std::fs::remove_dir_all(&blobs).map_err(|error| {
            RpcError::internal(format!("Could not delete {}: {error}", blobs.display()))
        })?;
    }
    Ok(())
}
