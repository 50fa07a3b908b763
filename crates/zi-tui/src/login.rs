//! `/login` and `/logout` (docs/interactive.md#commands): the sign-ins of `zi login` inside the
//! view. `/login` without a provider opens a picker of the subscriptions; the flow runs in a
//! task and reports through notices (the address to open, the device code, progress). While it
//! runs, Enter hands the composer's text to the sign-in as the pasted address or code — never to
//! the transcript or the prompt history — and Esc cancels it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zi_ai::auth::login::{LoginError, LoginEvent, LoginOptions, LoginOutcome, LoginUi, status};
use zi_ai::auth::{AuthEndpoints, SUBSCRIPTIONS, subscription};
use zi_protocol::state::ModelState;

use crate::app::{App, UiEvent};
use crate::keys::Action;
use crate::picker::{Entry, OpenPicker, Picker, Purpose};
use crate::transcript::Item;

/// What the view needs to sign in; zi-cli provides it.
#[derive(Clone)]
pub struct LoginSetup {
    /// Whose auth.json receives the sign-in.
    pub agent_dir: PathBuf,
    /// The sign-in servers (the real ones, or a test's).
    pub endpoints: AuthEndpoints,
    /// Opens an address in the person's browser (when one is available).
    pub open_url: Arc<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for LoginSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginSetup")
            .field("agent_dir", &self.agent_dir)
            .finish_non_exhaustive()
    }
}

/// What a running sign-in tells the view.
#[derive(Debug)]
pub enum LoginUpdate {
    /// A step of the sign-in (a code to show, an address to open).
    Event(LoginEvent),
    /// The sign-in ended.
    Finished(Result<LoginOutcome, LoginError>),
}

/// A sign-in in progress.
pub struct Running {
    cancel: CancellationToken,
    paste: mpsc::Sender<String>,
}

/// The flow's front end: each event becomes a [`UiEvent::Login`].
struct ViewUi {
    tasks: tokio::sync::mpsc::UnboundedSender<UiEvent>,
    open_url: Arc<dyn Fn(&str) + Send + Sync>,
}

impl LoginUi for ViewUi {
    fn show(&self, event: LoginEvent) {
        let _ = self.tasks.send(UiEvent::Login(LoginUpdate::Event(event)));
    }

    fn open_browser(&self, url: &str) {
        (self.open_url)(url);
    }
}

fn setup(app: &mut App) -> Option<LoginSetup> {
    let setup = app.options().login.clone();
    if setup.is_none() {
        app.transcript
            .push(Item::Error("Signing in is not available here".into()));
    }
    setup
}

/// `/login [PROVIDER] [--enterprise DOMAIN]`.
pub fn login(app: &mut App, args: &str) {
    if app.login.is_some() {
        app.transcript.push(Item::Error(
            "A sign-in is already running (Esc cancels it)".into(),
        ));
        return;
    }
    if app.busy() {
        app.transcript
            .push(Item::Error("Sign in while zi is idle".into()));
        return;
    }
    let Some(setup) = setup(app) else {
        return;
    };
    let mut words = args.split_whitespace();
    let provider = words.next();
    let enterprise = match (words.next(), words.next(), words.next()) {
        (None, ..) => None,
        (Some("--enterprise"), Some(domain), None) => Some(domain.to_string()),
        _ => {
            app.transcript.push(Item::Error(
                "Usage: /login [PROVIDER] [--enterprise DOMAIN]".into(),
            ));
            return;
        }
    };
    match provider {
        Some(provider) => start(app, &setup, provider, enterprise),
        None => app.picker = Some(picker(&setup)),
    }
}

/// The subscriptions, each with its sign-in state.
fn picker(setup: &LoginSetup) -> OpenPicker {
    let signed_in: Vec<&str> = status(&setup.agent_dir)
        .map(|all| {
            all.into_iter()
                .filter(|s| s.signed_in)
                .map(|s| s.provider)
                .collect()
        })
        .unwrap_or_default();
    let entries = SUBSCRIPTIONS
        .iter()
        .map(|s| {
            let state = if signed_in.contains(&s.id) {
                "signed in"
            } else {
                "not signed in"
            };
            Entry {
                search: s.id.to_string(),
                ..Entry::new(s.name, format!("{} · {state}", s.id))
            }
        })
        .collect();
    OpenPicker {
        picker: Picker::new("Sign in to", "nothing matches", entries),
        purpose: Purpose::Login(SUBSCRIPTIONS.iter().map(|s| s.id).collect()),
    }
}

/// A provider picked in the picker.
pub fn picked(app: &mut App, provider: &str) {
    if let Some(setup) = setup(app) {
        start(app, &setup, provider, None);
    }
}

fn start(app: &mut App, setup: &LoginSetup, provider: &str, enterprise: Option<String>) {
    if let Err(error) = zi_ai::auth::login::login_provider(provider) {
        app.transcript.push(Item::Error(error.to_string()));
        return;
    }
    let (paste, mut pasted) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    app.login = Some(Running {
        cancel: cancel.clone(),
        paste,
    });
    let options = LoginOptions {
        agent_dir: setup.agent_dir.clone(),
        endpoints: setup.endpoints.clone(),
        enterprise,
    };
    let ui = ViewUi {
        tasks: app.tasks().clone(),
        open_url: setup.open_url.clone(),
    };
    let provider = provider.to_string();
    tokio::spawn(async move {
        let result =
            zi_ai::auth::login::login(&provider, &options, &ui, &mut pasted, &cancel).await;
        let _ = ui.tasks.send(UiEvent::Login(LoginUpdate::Finished(result)));
    });
}

/// A key while a sign-in runs: Enter hands the composer's text to it, Esc cancels it. `true`
/// when the key was taken.
pub fn key(app: &mut App, action: Action) -> bool {
    let Some(running) = &app.login else {
        return false;
    };
    match action {
        Action::Submit => {
            let text = app.composer.take();
            if !text.trim().is_empty() && running.paste.try_send(text).is_err() {
                app.transcript
                    .push(Item::Error("The sign-in is not reading input".into()));
            }
            true
        }
        Action::Escape => {
            running.cancel.cancel();
            true
        }
        _ => false,
    }
}

/// What a running sign-in reported.
pub fn update(app: &mut App, update: LoginUpdate) {
    let item = match update {
        LoginUpdate::Event(LoginEvent::AuthorizeUrl { url, callback }) => {
            let back = match callback {
                Some(callback) => format!(
                    "zi waits for the browser to return to {callback}; without a browser here, open the address elsewhere and paste the address it ends on (or its code), then press Enter."
                ),
                None => "Open it, then paste the address the browser ends on (or its code) and press Enter.".into(),
            };
            Item::Notice(format!(
                "Sign in to ChatGPT in a browser: {url}\n{back} Esc cancels."
            ))
        }
        LoginUpdate::Event(LoginEvent::DeviceCode {
            verification_uri,
            user_code,
            expires_in,
        }) => Item::Notice(format!(
            "Open {verification_uri} and enter the code {user_code} (valid for {} min). Esc cancels.",
            expires_in.div_ceil(60)
        )),
        LoginUpdate::Event(LoginEvent::Progress(text)) => Item::Notice(text),
        LoginUpdate::Event(LoginEvent::Warning(text)) => Item::Error(format!("Warning: {text}")),
        LoginUpdate::Finished(result) => {
            app.login = None;
            app.ask_refresh();
            match result {
                Ok(outcome) => {
                    let example = outcome.models.first().cloned().unwrap_or_default();
                    Item::Notice(format!(
                        "{}\nSelect one with /model (e.g. /model {example}).",
                        outcome.message()
                    ))
                }
                Err(error) => Item::Error(error.to_string()),
            }
        }
    };
    app.transcript.push(item);
}

/// `/logout PROVIDER`.
pub fn logout(app: &mut App, args: &str) {
    let Some(setup) = setup(app) else {
        return;
    };
    let provider = args.trim();
    if provider.is_empty() || provider.contains(char::is_whitespace) {
        let ids: Vec<&str> = SUBSCRIPTIONS.iter().map(|s| s.id).collect();
        app.transcript.push(Item::Error(format!(
            "Usage: /logout PROVIDER ({})",
            ids.join(", ")
        )));
        return;
    }
    let item = match zi_ai::auth::login::logout(&setup.agent_dir, provider) {
        Ok(true) => {
            let name = subscription(provider).map_or(provider, |s| s.name);
            let mut text = format!("Signed out of {name} ({provider})");
            if let ModelState::Selected { model } = app.session.state().model
                && model.provider == provider
            {
                text.push_str(&format!(
                    "; the selected model {provider}/{} is no longer configured: choose another with /model",
                    model.id
                ));
            }
            Item::Notice(text)
        }
        Ok(false) => Item::Notice(format!("{provider} was not signed in")),
        Err(error) => Item::Error(error.to_string()),
    };
    app.ask_refresh();
    app.transcript.push(item);
}
