//! One live MCP client over the official SDK (`rmcp`): a stdio child in its own process group
//! or a Streamable HTTP endpoint over zi's reqwest, the `initialize` handshake, and the
//! notifications zi uses (progress, `tools/list_changed`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientInfo, ClientRequest,
    Implementation, Meta, NumberOrString, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestHandle, RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use zi_agent::tool::ProgressSink;
use zi_os::sync::lock;

use crate::config::{ServerConfig, Transport};
use crate::http::BoundedHttpClient;
use crate::secrets::Resolved;
use crate::stdio::{BoundedReader, spawn_server};

/// What the SDK's notification callbacks reach: progress routes per call, the list-changed hook
/// and the first fault of the transport (why a connection was lost).
pub(crate) struct Notifications {
    progress: Mutex<HashMap<ProgressToken, ProgressSink>>,
    /// The number of the next call's progress token on this connection.
    next_token: AtomicI64,
    list_changed: Box<dyn Fn() + Send + Sync>,
    pub(crate) fault: Arc<Fault>,
}

/// The first fault of a transport: why its connection is lost (a bound the server broke).
/// Raising it also wakes the calls waiting on the connection, which end as lost at once (an
/// SSE stream cut off for a bound would otherwise leave its call waiting for its timeout).
#[derive(Default)]
pub(crate) struct Fault {
    reason: Mutex<Option<String>>,
    raised: tokio_util::sync::CancellationToken,
}

impl Fault {
    /// Records `reason` unless a fault was recorded already, and wakes the waiters.
    pub(crate) fn raise(&self, reason: String) {
        lock(&self.reason).get_or_insert(reason);
        self.raised.cancel();
    }

    pub(crate) fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }

    /// Completes once a fault was raised.
    pub(crate) async fn raised(&self) {
        self.raised.cancelled().await;
    }
}

impl Notifications {
    /// Routes the progress of a call about to be sent to `sink`, under a fresh token the call's
    /// request carries ([`Connection::send_call`]). The route must exist before the request leaves:
    /// a server may report progress the moment it reads the request, and the notification is
    /// handled on another task while the caller may not have run again yet (a notification for
    /// a token with no route is dropped).
    pub(crate) fn route_progress(&self, sink: ProgressSink) -> ProgressToken {
        let number = self.next_token.fetch_add(1, Ordering::Relaxed);
        let token = ProgressToken(NumberOrString::Number(number));
        lock(&self.progress).insert(token.clone(), sink);
        token
    }

    pub(crate) fn end_progress(&self, token: &ProgressToken) {
        lock(&self.progress).remove(token);
    }

    pub(crate) fn fault(&self) -> Option<String> {
        self.fault.reason()
    }
}

#[derive(Clone)]
pub(crate) struct Handler(Arc<Notifications>);

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientInfo {
        ClientInfo {
            meta: None,
            protocol_version: ProtocolVersion::default(),
            capabilities: ClientCapabilities::default(),
            client_info: Implementation {
                name: "zi".to_string(),
                title: None,
                version: env!("CARGO_PKG_VERSION").to_string(),
                description: None,
                icons: None,
                website_url: None,
            },
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = lock(&self.0.progress).get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            let mut update = serde_json::json!({"progress": params.progress});
            if let Some(total) = params.total {
                update["total"] = total.into();
            }
            if let Some(message) = params.message {
                update["message"] = message.into();
            }
            sink(update);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.0.list_changed)();
    }
}

/// A connected client. Dropping it closes the session and kills a stdio server's process group.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Handler>,
    pub(crate) notifications: Arc<Notifications>,
    /// Killed (with every descendant) when the connection is dropped or killed.
    group: Mutex<Option<zi_os::command::Group>>,
}

impl Connection {
    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_closed()
    }

    /// Sends `tools/call` for `tool` with its progress routed to `progress` before the request
    /// leaves ([`Notifications::route_progress`]); the request carries zi's token in place of
    /// the SDK's own, which is only known once the request is on its way. The caller ends the
    /// route with the call ([`Notifications::end_progress`]); a failed send ends it here.
    pub(crate) async fn send_call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        progress: ProgressSink,
    ) -> Result<(RequestHandle<RoleClient>, ProgressToken), ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest {
            method: Default::default(),
            params: CallToolRequestParams {
                meta: None,
                name: tool.to_string().into(),
                arguments,
                task: None,
            },
            extensions: Default::default(),
        });
        let token = self.notifications.route_progress(progress);
        let options = PeerRequestOptions {
            timeout: None,
            meta: Some(Meta::with_progress_token(token.clone())),
        };
        match self
            .service
            .send_cancellable_request(request, options)
            .await
        {
            Ok(handle) => Ok((handle, token)),
            Err(error) => {
                self.notifications.end_progress(&token);
                Err(error)
            }
        }
    }

    /// Closes the client and kills a stdio server's process group now, even while calls still
    /// hold the connection.
    pub(crate) fn kill(&self) {
        self.service.cancellation_token().cancel();
        lock(&self.group).take();
    }
}

/// Why a connection could not be made; callers scrub the text of resolved secrets.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error(transparent)]
    Spawn(#[from] crate::stdio::SpawnError),
    #[error("url is not a valid URL: {0}")]
    Url(<reqwest::Url as std::str::FromStr>::Err),
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    /// `initialize` failed: the stream's recorded fault, or the SDK's error in words.
    #[error("{0}")]
    Handshake(String),
}

/// Connects and completes `initialize` (the caller bounds it by `startupTimeoutMs`; dropping
/// the future kills a started child).
pub(crate) async fn connect(
    config: &ServerConfig,
    resolved: &Resolved,
    session_cwd: &std::path::Path,
    list_changed: Box<dyn Fn() + Send + Sync>,
) -> Result<Connection, ConnectError> {
    let fault = Arc::new(Fault::default());
    let notifications = Arc::new(Notifications {
        progress: Mutex::new(HashMap::new()),
        next_token: AtomicI64::new(1),
        list_changed,
        fault: fault.clone(),
    });
    let handler = Handler(notifications.clone());
    match &config.transport {
        Transport::Stdio { command, cwd, .. } => {
            let cwd = match cwd {
                Some(dir) if dir.is_absolute() => dir.clone(),
                Some(dir) => session_cwd.join(dir),
                None => session_cwd.to_path_buf(),
            };
            let spawned = spawn_server(&config.name, command, &cwd, &resolved.environment)?;
            let reader = BoundedReader::new(spawned.stdout, fault);
            let service = handler
                .serve((reader, spawned.stdin))
                .await
                .map_err(|e| handshake_error(e, &notifications))?;
            Ok(Connection {
                service,
                notifications,
                group: Mutex::new(Some(spawned.group)),
            })
        }
        Transport::StreamableHttp { url, .. } => {
            let configured = reqwest::Url::parse(url).map_err(ConnectError::Url)?;
            let client = reqwest::Client::builder()
                .default_headers(resolved.headers.clone())
                .redirect(crate::redirect::same_origin_only(&configured))
                .connect_timeout(config.startup_timeout)
                .build()
                .map_err(ConnectError::Client)?;
            let transport = StreamableHttpClientTransport::with_client(
                BoundedHttpClient::new(client, fault, url),
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| handshake_error(e, &notifications))?;
            Ok(Connection {
                service,
                notifications,
                group: Mutex::new(None),
            })
        }
    }
}

fn handshake_error(
    error: rmcp::service::ClientInitializeError,
    notifications: &Notifications,
) -> ConnectError {
    ConnectError::Handshake(match notifications.fault() {
        Some(fault) => fault,
        None => crate::errors::initialize(&error),
    })
}
