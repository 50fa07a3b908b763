//! The servers of one session: background connection (at most four at once, started once
//! `ready` is out, so neither their processes nor their connections cost `ready` anything),
//! catalogs, calls with their bounds, timeouts, cancellation and progress, recovery of
//! a lost connection with a fresh client (a call is never replayed), and shutdown.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::ServerResult;
use rmcp::service::ServiceError;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use zi_agent::ToolOutput;
use zi_agent::tool::ProgressSink;
use zi_os::redact::Redactor;
use zi_os::sync::lock;

use crate::arguments::call_arguments;
use crate::bounds::{
    MAX_ACTIVE_CALLS, MAX_CONCURRENT_CONNECTS, MAX_SCHEMA_TOTAL_BYTES, MAX_TOOLS_TOTAL,
};
use crate::catalog::{CatalogTool, Listing, RefusedTool, list_tools};
use crate::config::{Exposure, ServerConfig};
use crate::connection::{Connection, connect};
use crate::errors::{
    CatalogBound, DescribeError, Refused, RequiredServerFailed, StartError, Unavailable,
    UnknownServer,
};
use crate::results::map_result;
use crate::secrets;

/// Reads zi's environment (injected, so only `zi-cli` touches the process environment).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where a warning the manager has after start-up goes (the text after `Warning: `); zi-cli
/// routes it like its other warnings (in the interactive mode: a notice in the view).
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Clone)]
enum State {
    /// Not tried yet.
    Pending,
    Connecting,
    Ready(Arc<Connection>),
    Failed(String),
    /// The session ended.
    Closed,
}

pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    redactor: Redactor,
    state: Mutex<State>,
    catalog: Mutex<Arc<Vec<CatalogTool>>>,
    /// Listed tools zi does not offer, with why (a hostile schema costs its tool only).
    refused: Mutex<Arc<Vec<RefusedTool>>>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    /// True once the first attempt has settled (ready or failed).
    settled: watch::Sender<bool>,
    /// The background connection was started (it starts once).
    started: AtomicBool,
}

impl Server {
    fn state(&self) -> State {
        lock(&self.state).clone()
    }

    fn set_state(&self, state: State) {
        let mut current = lock(&self.state);
        if !matches!(*current, State::Closed) {
            *current = state;
        }
    }

    pub(crate) fn catalog(&self) -> Arc<Vec<CatalogTool>> {
        lock(&self.catalog).clone()
    }

    fn refused(&self) -> Arc<Vec<RefusedTool>> {
        lock(&self.refused).clone()
    }

    /// Why `tool` is not offered, when the server listed it and zi refused it.
    fn refusal(&self, tool: &str) -> Option<Refused> {
        let refused = self.refused();
        let refused = refused.iter().find(|r| r.name == tool)?;
        Some(Refused {
            tool: tool.to_string(),
            server: self.config.name.clone(),
            reason: refused.reason.clone(),
        })
    }

    fn scrub(&self, text: String) -> String {
        self.redactor.scrub(text)
    }
}

/// What a call receives from the tool that makes it.
pub struct CallContext {
    /// Fires when the call is interrupted: zi sends the server a cancellation and stops waiting.
    pub cancel: CancellationToken,
    /// Where the server's progress notifications go while the call runs.
    pub progress: ProgressSink,
}

/// Every configured server's connection, catalog and calls, shared by the catalog tools, the
/// direct tools and zi-cli (which starts the servers and shuts them down).
pub struct McpManager {
    servers: Vec<Arc<Server>>,
    cwd: PathBuf,
    env: EnvLookup,
    connects: Semaphore,
    calls: Semaphore,
    /// Bumped whenever a catalog changes (direct tools rebuild on a new value).
    generation: AtomicU64,
    closed: CancellationToken,
    this: Weak<McpManager>,
    /// Unset: warnings are `Warning:` lines on stderr.
    warnings: std::sync::OnceLock<WarningSink>,
}

impl McpManager {
    /// The manager of `servers`, none connected yet: stdio servers start in `cwd`, and
    /// `env` supplies the values their definitions take from zi's environment.
    pub fn new(servers: Vec<ServerConfig>, cwd: PathBuf, env: EnvLookup) -> Arc<McpManager> {
        Arc::new_cyclic(|this| McpManager {
            servers: servers
                .into_iter()
                .map(|config| {
                    Arc::new(Server {
                        redactor: secrets::redactor(&config, env.as_ref()),
                        config,
                        state: Mutex::new(State::Pending),
                        catalog: Mutex::new(Arc::new(Vec::new())),
                        refused: Mutex::new(Arc::new(Vec::new())),
                        connecting: tokio::sync::Mutex::new(()),
                        settled: watch::channel(false).0,
                        started: AtomicBool::new(false),
                    })
                })
                .collect(),
            cwd,
            env,
            connects: Semaphore::new(MAX_CONCURRENT_CONNECTS),
            calls: Semaphore::new(MAX_ACTIVE_CALLS),
            generation: AtomicU64::new(0),
            closed: CancellationToken::new(),
            this: this.clone(),
            warnings: std::sync::OnceLock::new(),
        })
    }

    /// Sends the manager's warnings to `sink` instead of stderr (set once; later calls change
    /// nothing).
    pub fn set_warning_sink(&self, sink: WarningSink) {
        let _ = self.warnings.set(sink);
    }

    fn warn(&self, message: &str) {
        match self.warnings.get() {
            Some(sink) => sink(message),
            None => eprintln!("Warning: {message}"),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, UnknownServer> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .ok_or_else(|| UnknownServer {
                name: name.to_string(),
                configured: self.servers.iter().map(|s| s.config.name.clone()).collect(),
            })
    }

    /// Connects every server not started yet in the background (must run inside the tokio
    /// runtime). zi calls it once `ready` is written (the one-shot and interactive modes: when
    /// the mode starts), so spawning four server processes never competes with start-up; the
    /// catalog tools call it too, so a first use before that does not wait for nothing.
    /// Failures become `Warning:` lines and `mcp_status` entries.
    pub fn start(&self) {
        self.start_where(|_| true);
    }

    fn start_where(&self, wanted: impl Fn(&Server) -> bool) {
        for server in &self.servers {
            if !wanted(server) || server.started.swap(true, Ordering::SeqCst) {
                continue;
            }
            let server = server.clone();
            let this = self.this.clone();
            tokio::spawn(async move {
                let Some(manager) = this.upgrade() else {
                    return;
                };
                let closed = manager.closed.clone();
                tokio::select! {
                    result = manager.ensure_connected(&server) => {
                        // A start cut short by the session's end is no failure to report.
                        if let Err(error) = result
                            && !closed.is_cancelled()
                        {
                            manager.warn(&format!(
                                "MCP server \"{}\" failed to start: {error}",
                                server.config.name
                            ));
                        }
                    }
                    () = closed.cancelled() => {}
                }
                server.settled.send_replace(true);
            });
        }
    }

    /// Connects the `required` servers and waits for every one's first attempt; the first
    /// failure is the error. The others start with [`McpManager::start`].
    pub async fn wait_required(&self) -> Result<(), RequiredServerFailed> {
        self.start_where(|server| server.config.required);
        for server in self.servers.iter().filter(|s| s.config.required) {
            settled(server).await;
            if let State::Failed(reason) = server.state() {
                return Err(RequiredServerFailed {
                    server: server.config.name.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Waits (cancellably) until no server is still in its first connection attempt.
    pub(crate) async fn wait_settled(&self, cancel: &CancellationToken) {
        self.start();
        let all = futures::future::join_all(self.servers.iter().map(|s| settled(s)));
        tokio::select! {
            _ = all => {}
            () = cancel.cancelled() => {}
        }
    }

    /// The live connection, made (or made again, after a loss) if needed.
    async fn ensure_connected(&self, server: &Arc<Server>) -> Result<Arc<Connection>, Unavailable> {
        let _permit = server.connecting.lock().await;
        match server.state() {
            State::Ready(connection) if !connection.is_closed() => return Ok(connection),
            State::Closed => return Err(Unavailable(StartError::Ended.to_string())),
            _ => {}
        }
        let _slot = self
            .connects
            .acquire()
            .await
            .map_err(|_| Unavailable(StartError::Ended.to_string()))?;
        server.set_state(State::Connecting);
        let attempt = self.connect_and_list(server);
        let result = match tokio::time::timeout(server.config.startup_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(StartError::Timeout(server.config.startup_timeout)),
        };
        match result {
            Ok(connection) => {
                server.set_state(State::Ready(connection.clone()));
                Ok(connection)
            }
            Err(error) => {
                let error = server.scrub(error.to_string());
                server.set_state(State::Failed(error.clone()));
                Err(Unavailable(error))
            }
        }
    }

    async fn connect_and_list(&self, server: &Arc<Server>) -> Result<Arc<Connection>, StartError> {
        let resolved = secrets::resolve(&server.config, self.env.as_ref())?;
        let refresh = {
            let this = self.this.clone();
            let server = Arc::downgrade(server);
            Box::new(move || {
                if let (Some(manager), Some(server)) = (this.upgrade(), server.upgrade()) {
                    tokio::spawn(async move { manager.refresh(&server).await });
                }
            })
        };
        let connection = connect(&server.config, &resolved, &self.cwd, refresh).await?;
        let listing = list_tools(&connection).await?;
        self.install_catalog(server, listing)?;
        Ok(Arc::new(connection))
    }

    /// Replaces a server's catalog if the totals over all servers stay within the bounds.
    /// Each newly refused tool is a warning that names it.
    fn install_catalog(&self, server: &Server, listing: Listing) -> Result<(), CatalogBound> {
        let Listing { tools, refused } = listing;
        let (mut count, mut bytes) = (tools.len(), 0usize);
        bytes += tools.iter().map(|t| t.schema_bytes).sum::<usize>();
        for other in self
            .servers
            .iter()
            .filter(|s| s.config.name != server.config.name)
        {
            let listing = other.catalog();
            count += listing.len();
            bytes += listing.iter().map(|t| t.schema_bytes).sum::<usize>();
        }
        if count > MAX_TOOLS_TOTAL {
            return Err(CatalogBound::Tools);
        }
        if bytes > MAX_SCHEMA_TOTAL_BYTES {
            return Err(CatalogBound::SchemaBytes);
        }
        *lock(&server.catalog) = Arc::new(tools);
        let before = server.refused();
        let refused: Vec<RefusedTool> = refused
            .into_iter()
            .map(|r| RefusedTool {
                name: server.scrub(r.name),
                reason: server.scrub(r.reason),
            })
            .collect();
        for tool in refused.iter().filter(|r| !before.contains(r)) {
            self.warn(&format!(
                "MCP server \"{}\": tool {} is not offered: {}",
                server.config.name, tool.name, tool.reason
            ));
        }
        *lock(&server.refused) = Arc::new(refused);
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// `notifications/tools/list_changed`: lists again; a failed refresh keeps the old catalog.
    async fn refresh(&self, server: &Arc<Server>) {
        let State::Ready(connection) = server.state() else {
            return;
        };
        let result: Result<(), StartError> = match list_tools(&connection).await {
            Ok(listing) => self.install_catalog(server, listing).map_err(Into::into),
            Err(error) => Err(error.into()),
        };
        if let Err(error) = result {
            tracing::warn!(
                server = %server.config.name,
                "MCP tool list refresh failed, keeping the previous catalog: {}",
                server.scrub(error.to_string())
            );
        }
    }

    /// Calls one tool. Every failure is an error result naming the server and the tool.
    pub async fn call(
        &self,
        server_name: &str,
        tool: &str,
        arguments: Option<Value>,
        context: CallContext,
    ) -> ToolOutput {
        let server = match self.server(server_name) {
            Ok(server) => server.clone(),
            Err(error) => return ToolOutput::error(error.to_string()),
        };
        let arguments = match call_arguments(tool, arguments) {
            Ok(arguments) => arguments,
            Err(failed) => return failed,
        };
        let Ok(_permit) = self.calls.try_acquire() else {
            return ToolOutput::error(format!(
                "Too many MCP calls in progress (at most {MAX_ACTIVE_CALLS}); try again when one finishes"
            ));
        };
        let connection = tokio::select! {
            connected = self.ensure_connected(&server) => match connected {
                Ok(connection) => connection,
                Err(error) => {
                    return ToolOutput::error(format!("MCP server {server_name} is unavailable: {error}"));
                }
            },
            () = context.cancel.cancelled() => return ToolOutput::error(zi_agent::errors::TOOL_ABORTED),
        };
        if let Some(refusal) = server.refusal(tool) {
            return ToolOutput::error(refusal.to_string());
        }
        if !server.catalog().iter().any(|t| t.name == tool) {
            return ToolOutput::error(format!(
                "MCP server {server_name} has no tool {tool} (mcp_search lists the tools)"
            ));
        }
        // Its progress is routed before the request is sent: the server may report at once.
        let sent = connection
            .send_call(tool, arguments, context.progress.clone())
            .await;
        let (mut handle, token) = match sent {
            Ok(sent) => sent,
            Err(error) => return self.lost(&server, &connection, tool, error),
        };
        let timeout = server.config.tool_timeout;
        let outcome = tokio::select! {
            response = &mut handle.rx => Some(response),
            () = context.cancel.cancelled() => None,
            // A bound the server broke (on any stream of the connection) loses it now.
            () = connection.notifications.fault.raised() => {
                connection.notifications.end_progress(&token);
                return self.lost(&server, &connection, tool, ServiceError::TransportClosed);
            }
            () = tokio::time::sleep(timeout) => {
                connection.notifications.end_progress(&token);
                let _ = handle.cancel(Some("timed out".into())).await;
                return ToolOutput::error(format!(
                    "MCP tool {tool} on server {server_name} timed out after {} ms",
                    timeout.as_millis()
                ));
            }
        };
        connection.notifications.end_progress(&token);
        match outcome {
            None => {
                // notifications/cancelled tells the server to stop; the call is not waited for.
                let _ = handle.cancel(Some("interrupted".into())).await;
                ToolOutput::error(zi_agent::errors::TOOL_ABORTED)
            }
            Some(Ok(Ok(ServerResult::CallToolResult(result)))) => {
                map_result(server_name, tool, result, &server.redactor)
            }
            Some(Ok(Ok(_))) => ToolOutput::error(format!(
                "MCP server {server_name} answered tools/call for {tool} with an unexpected result"
            )),
            Some(Ok(Err(ServiceError::McpError(error)))) => {
                ToolOutput::error(server.scrub(format!(
                    "MCP tool {tool} on server {server_name} failed: {}",
                    error.message
                )))
            }
            Some(Ok(Err(error))) => self.lost(&server, &connection, tool, error),
            Some(Err(_)) => self.lost(&server, &connection, tool, ServiceError::TransportClosed),
        }
    }

    /// The connection broke during a call: the next call starts a fresh client; this one is
    /// reported, never replayed.
    fn lost(
        &self,
        server: &Server,
        connection: &Connection,
        tool: &str,
        error: ServiceError,
    ) -> ToolOutput {
        let fault = connection.notifications.fault();
        let status = fault.is_none() && crate::errors::is_http_status(&error);
        let reason = fault.unwrap_or_else(|| crate::errors::service(&error));
        let reason = server.scrub(reason);
        // Whatever is left of the old server (a stdio group with descendants) goes now; the
        // next call starts a fresh client (a server that answered an error status may have
        // dropped the session too).
        connection.kill();
        server.set_state(State::Failed(format!("connection lost: {reason}")));
        let name = &server.config.name;
        ToolOutput::error(if status {
            format!(
                "MCP server {name}: {reason} during the call to {tool}; the call was not retried"
            )
        } else {
            format!(
                "MCP server {name} lost the connection during the call to {tool} ({reason}); the call was not retried"
            )
        })
    }

    /// What `mcp_status` reports: no command line, URL query, header or environment value.
    pub(crate) fn status(&self) -> Value {
        let servers: Vec<Value> = self
            .servers
            .iter()
            .map(|server| {
                let (state, error) = match server.state() {
                    State::Pending | State::Connecting => ("connecting", None),
                    State::Ready(connection) if connection.is_closed() => (
                        "disconnected",
                        Some("the connection closed; the next call reconnects".to_string()),
                    ),
                    State::Ready(_) => ("ready", None),
                    State::Failed(error) => ("failed", Some(error)),
                    State::Closed => ("closed", None),
                };
                let mut entry = json!({
                    "name": server.config.name,
                    "transport": server.config.transport.kind(),
                    "tools": server.config.exposure.as_str(),
                    "required": server.config.required,
                    "state": state,
                    "toolCount": server.catalog().len(),
                });
                if let Some(error) = error {
                    entry["error"] = Value::String(error);
                }
                let refused = server.refused();
                if !refused.is_empty() {
                    entry["refusedTools"] = refused
                        .iter()
                        .map(|r| json!({"name": r.name, "reason": r.reason}))
                        .collect();
                }
                entry
            })
            .collect();
        json!({ "servers": servers })
    }

    /// The catalog-mode servers' listings, by server name.
    pub(crate) fn listings(
        &self,
        exposure: Option<Exposure>,
    ) -> Vec<(String, Arc<Vec<CatalogTool>>)> {
        self.servers
            .iter()
            .filter(|s| exposure.is_none_or(|e| s.config.exposure == e))
            .map(|s| (s.config.name.clone(), s.catalog()))
            .collect()
    }

    pub(crate) fn describe(&self, server: &str, tool: &str) -> Result<CatalogTool, DescribeError> {
        let server = self.server(server)?;
        server
            .catalog()
            .iter()
            .find(|t| t.name == tool)
            .cloned()
            .ok_or_else(|| match server.refusal(tool) {
                Some(refusal) => refusal.into(),
                None => DescribeError::NoTool {
                    server: server.config.name.clone(),
                    tool: tool.to_string(),
                },
            })
    }

    /// Ends every connection: clients close, stdio process groups are killed.
    pub async fn shutdown(&self) {
        self.closed.cancel();
        let mut connections = Vec::new();
        for server in &self.servers {
            if let State::Ready(connection) =
                std::mem::replace(&mut *lock(&server.state), State::Closed)
            {
                connections.push(connection);
            }
        }
        for connection in connections {
            connection.kill();
        }
    }
}

async fn settled(server: &Server) {
    let mut settled = server.settled.subscribe();
    let _ = settled.wait_for(|done| *done).await;
}
