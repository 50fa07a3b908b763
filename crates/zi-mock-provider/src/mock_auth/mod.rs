//! A mock of the sign-in services zi talks to, over real loopback HTTP: OpenAI's OAuth server
//! (`GET /oauth/authorize`, `POST /oauth/token`: authorization code with PKCE, refresh with
//! rotation), GitHub's device flow (`POST /login/device/code`, `POST /login/oauth/access_token`)
//! and the Copilot token exchange (`GET /copilot_internal/v2/token`). One server answers all of
//! them, so `ZI_OPENAI_AUTH_URL`, `ZI_GITHUB_URL` and `ZI_GITHUB_API_URL` all point at
//! [`MockAuth::base_url`].
//!
//! Every request is recorded with the instant it arrived ([`MockAuth::requests`]); knobs script
//! the consent ([`Consent`]), token lifetimes, a slow or failing token endpoint, and the answers
//! to device-flow polls ([`DevicePoll`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tokio::sync::watch;
use zi_os::sync::lock;

mod github;
mod oauth;
pub use oauth::AuthorizeRefusal;

/// The OAuth client of ChatGPT sign-in, which the mock insists on.
pub const OPENAI_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The GitHub OAuth app of Copilot's device flow.
pub const GITHUB_CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// The user code every device flow shows.
pub const USER_CODE: &str = "ABCD-1234";

/// What the person does on the authorization page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Signs in: the redirect carries a code and the request's state.
    Approve,
    /// Refuses: the redirect carries `error=access_denied`.
    Deny,
    /// A forged redirect: a code, but `state=forged`.
    ForgeState,
}

/// The answer to one device-flow poll (GitHub answers every poll with HTTP 200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicePoll {
    /// `authorization_pending`: the person has not answered yet.
    Pending,
    /// `slow_down`, with the new interval when given.
    SlowDown(Option<u64>),
    /// `expired_token`: the code expired.
    Expired,
    /// `access_denied`: the person refused.
    Denied,
    /// The person approved: this GitHub token.
    Token(String),
}

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct AuthRequest {
    /// The HTTP method.
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The decoded query string.
    pub query: Vec<(String, String)>,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: String,
    /// The body decoded as a form (empty unless it was one).
    pub form: Vec<(String, String)>,
    /// When it arrived.
    pub at: Instant,
}

impl AuthRequest {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// A form field of the body.
    pub fn field(&self, name: &str) -> Option<&str> {
        find(&self.form, name)
    }

    /// A query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        find(&self.query, name)
    }
}

fn find<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// A code the authorization page handed out, and what it was bound to.
struct Grant {
    challenge: String,
    redirect_uri: String,
}

struct State {
    consent: Consent,
    account_id: String,
    expires_in: u64,
    token_delay: Duration,
    fail_next_token: Option<(u16, Value)>,
    /// The next token request fails with this status and echoes its own body back.
    echo_next_token: Option<u16>,
    grants: HashMap<String, Grant>,
    /// The one refresh token that works (the last issued or seeded); rotated by each refresh.
    refresh_token: Option<String>,
    /// Counts every token issued, so each is unique.
    issued: u64,
    last_access: Option<String>,
    device_interval: u64,
    device_expires_in: u64,
    polls: VecDeque<DevicePoll>,
    device_codes: HashSet<String>,
    github_tokens: HashSet<String>,
    copilot_fail_next: Option<u16>,
    copilot_lifetime: i64,
    last_copilot: Option<String>,
}

pub(crate) struct Shared {
    port: u16,
    state: Mutex<State>,
    requests: Mutex<Vec<AuthRequest>>,
    changes: watch::Sender<()>,
    shutdown: watch::Sender<bool>,
}

struct Lifetime {
    shared: Arc<Shared>,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}

/// A running mock sign-in server; clones share it, and it stops with the last handle.
#[derive(Clone)]
pub struct MockAuth {
    shared: Arc<Shared>,
    _lifetime: Arc<Lifetime>,
}

/// Starts a mock sign-in server, panicking if it cannot (tests only).
pub async fn start_auth() -> MockAuth {
    MockAuth::start()
        .await
        .unwrap_or_else(|e| panic!("start the mock sign-in server: {e}"))
}

impl MockAuth {
    /// Binds `127.0.0.1` on a free port and serves on the current tokio runtime.
    pub async fn start() -> std::io::Result<MockAuth> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (shutdown, mut stop) = watch::channel(false);
        let shared = Arc::new(Shared {
            port,
            state: Mutex::new(State {
                consent: Consent::Approve,
                account_id: "acct-mock-1".to_string(),
                expires_in: 3600,
                token_delay: Duration::ZERO,
                fail_next_token: None,
                echo_next_token: None,
                grants: HashMap::new(),
                refresh_token: None,
                issued: 0,
                last_access: None,
                device_interval: 1,
                device_expires_in: 900,
                polls: VecDeque::new(),
                device_codes: HashSet::new(),
                github_tokens: HashSet::new(),
                copilot_fail_next: None,
                copilot_lifetime: 1800,
                last_copilot: None,
            }),
            requests: Mutex::new(Vec::new()),
            changes: watch::Sender::new(()),
            shutdown,
        });
        let router = Router::new()
            .fallback(serve)
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await;
        });
        Ok(MockAuth {
            _lifetime: Arc::new(Lifetime {
                shared: Arc::clone(&shared),
            }),
            shared,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    /// What the authorization page does (default [`Consent::Approve`]).
    pub fn set_consent(&self, consent: Consent) {
        self.state().consent = consent;
    }

    /// The ChatGPT account the issued access tokens name.
    pub fn set_account(&self, account_id: &str) {
        self.state().account_id = account_id.to_string();
    }

    /// `expires_in` of issued tokens, in seconds (default 3600).
    pub fn set_expires_in(&self, seconds: u64) {
        self.state().expires_in = seconds;
    }

    /// How long the token endpoint takes to answer.
    pub fn set_token_delay(&self, delay: Duration) {
        self.state().token_delay = delay;
    }

    /// The next token request gets this status and JSON body (then the endpoint works again).
    pub fn fail_next_token(&self, status: u16, body: Value) {
        self.state().fail_next_token = Some((status, body));
    }

    /// The next token request fails with `status`, its error description echoing the request
    /// body (codes, verifiers and tokens a server might repeat).
    pub fn echo_next_token(&self, status: u16) {
        self.state().echo_next_token = Some(status);
    }

    /// Makes `refresh_token` the one that refreshes (a sign-in a test wrote into auth.json).
    pub fn seed_refresh_token(&self, refresh_token: &str) {
        self.state().refresh_token = Some(refresh_token.to_string());
    }

    /// The refresh token that currently works, and the last access token issued.
    pub fn current_tokens(&self) -> (Option<String>, Option<String>) {
        let state = self.state();
        (state.refresh_token.clone(), state.last_access.clone())
    }

    /// Device flow: the `interval` and `expires_in` of new device codes (defaults 1 s, 900 s).
    pub fn set_device_timing(&self, interval: u64, expires_in: u64) {
        let mut state = self.state();
        state.device_interval = interval;
        state.device_expires_in = expires_in;
    }

    /// Device flow: the answer to the next poll (with none left, polls are pending).
    pub fn push_poll(&self, poll: DevicePoll) {
        self.state().polls.push_back(poll);
    }

    /// Makes a GitHub token valid for the Copilot token exchange (one a test stored).
    pub fn accept_github_token(&self, token: &str) {
        self.state().github_tokens.insert(token.to_string());
    }

    /// The next Copilot token exchange answers this status.
    pub fn fail_next_copilot(&self, status: u16) {
        self.state().copilot_fail_next = Some(status);
    }

    /// Seconds until issued Copilot tokens expire (default 1800).
    pub fn set_copilot_lifetime(&self, seconds: i64) {
        self.state().copilot_lifetime = seconds;
    }

    /// The last Copilot token issued.
    pub fn last_copilot_token(&self) -> Option<String> {
        self.state().last_copilot.clone()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<AuthRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests to one path.
    pub fn requests_to(&self, path: &str) -> Vec<AuthRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// Token requests of one grant type (`authorization_code`, `refresh_token`).
    pub fn token_requests(&self, grant_type: &str) -> Vec<AuthRequest> {
        self.requests_to("/oauth/token")
            .into_iter()
            .filter(|r| r.field("grant_type") == Some(grant_type))
            .collect()
    }

    /// Waits until `done` holds for the recorded requests or `timeout` passed; returns them.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&[AuthRequest]) -> bool,
    ) -> Vec<AuthRequest> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changes = self.shared.changes.subscribe();
        loop {
            let requests = self.requests();
            if done(&requests) {
                return requests;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.requests(),
            }
        }
    }

    /// What the authorization page answers to `authorize_url` (zi's printed URL): the
    /// `Location` of its redirect, without following it. Recorded like a browser's visit.
    pub fn redirect_for(&self, authorize_url: &str) -> Result<String, AuthorizeRefusal> {
        let query = authorize_url
            .split_once('?')
            .map(|(_, query)| query)
            .unwrap_or("");
        let pairs = decode_pairs(query.as_bytes());
        record(
            &self.shared,
            AuthRequest {
                method: "GET".into(),
                path: "/oauth/authorize".into(),
                query: pairs.clone(),
                headers: Vec::new(),
                body: String::new(),
                form: Vec::new(),
                at: Instant::now(),
            },
        );
        oauth::authorize(&self.shared, &pairs)
    }
}

/// A JWT-shaped access token (`header.payload.signature`, never verified) whose payload names a
/// ChatGPT account, as OpenAI's tokens do; `n` makes each one unique.
pub fn fake_jwt(account_id: &str, n: u64) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(
        json!({
            "https://api.openai.com/auth": {"chatgpt_account_id": account_id},
            "n": n,
            "marker": "mock-access-token",
        })
        .to_string(),
    );
    format!("{header}.{payload}.sig-mock-access-{n}")
}

fn decode_pairs(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

fn record(shared: &Shared, request: AuthRequest) {
    lock(&shared.requests).push(request);
    shared.changes.send_replace(());
}

async fn serve(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1024 * 1024)
        .await
        .unwrap_or_default();
    let form_body = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let recorded = AuthRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: decode_pairs(parts.uri.query().unwrap_or("").as_bytes()),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
        form: if form_body {
            decode_pairs(&bytes)
        } else {
            Vec::new()
        },
        at: Instant::now(),
    };
    record(&shared, recorded.clone());
    match (recorded.method.as_str(), recorded.path.as_str()) {
        ("GET", "/oauth/authorize") => match oauth::authorize(&shared, &recorded.query) {
            Ok(location) => redirect(&location),
            Err(refusal) => json_response(400, json!({"error": refusal.to_string()})),
        },
        ("POST", "/oauth/token") => oauth::token(&shared, &recorded).await,
        ("POST", "/login/device/code") => github::device_code(&shared, &recorded),
        ("POST", "/login/oauth/access_token") => github::poll(&shared, &recorded),
        ("GET", "/copilot_internal/v2/token") => github::copilot_token(&shared, &recorded),
        _ => json_response(404, json!({"error": "not_found"})),
    }
}

pub(crate) fn json_response(status: u16, body: Value) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let status = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

fn redirect(location: &str) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        axum::http::StatusCode::FOUND,
        [(axum::http::header::LOCATION, location.to_string())],
    )
        .into_response()
}

fn now_secs() -> i64 {
    zi_os::clock::now_millis() / 1000
}

#[cfg(test)]
mod tests;
