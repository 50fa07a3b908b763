//! ChatGPT sign-in: the authorization URL is shown (and a browser opened), then zi waits at
//! most [`LOGIN_TIMEOUT`] for whichever comes first — the browser's redirect to the local
//! callback, or the redirect's address (or the bare code) pasted by the person, which is how a
//! sign-in over SSH finishes. The code is then exchanged for tokens.

use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::callback::{self, Redirect, Reply};
use super::{LOGIN_TIMEOUT, LoginError, LoginEvent, LoginOptions, LoginUi};
use crate::auth::codex::{Pkce, authorize_url, exchange_code, random_state, redirect_uri};
use crate::auth::entry::OAuthEntry;

/// What a pasted line holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pasted {
    /// A code, with the state it came with when the line had one.
    Code { code: String, state: Option<String> },
    /// The redirect of a refused consent.
    Denied(String),
    /// Nothing usable (an empty line).
    Nothing,
}

/// Reads a pasted line: the redirect's full address (its `code` and `state`), `code#state`, a
/// query string with `code=`, or else the code itself.
pub fn parse_pasted(line: &str) -> Pasted {
    let line = line.trim();
    if line.is_empty() {
        return Pasted::Nothing;
    }
    let query = if let Ok(url) = reqwest::Url::parse(line)
        && matches!(url.scheme(), "http" | "https")
    {
        url.query().unwrap_or("").to_string()
    } else if let Some((code, state)) = line.split_once('#') {
        return Pasted::Code {
            code: code.to_string(),
            state: Some(state.to_string()).filter(|s| !s.is_empty()),
        };
    } else if line.contains("code=") {
        line.trim_start_matches('?').to_string()
    } else {
        return Pasted::Code {
            code: line.to_string(),
            state: None,
        };
    };
    let redirect = Redirect::parse(&query);
    if let Some(denial) = redirect.denial {
        return Pasted::Denied(denial);
    }
    match redirect.code {
        Some(code) => Pasted::Code {
            code,
            state: redirect.state,
        },
        None => Pasted::Nothing,
    }
}

pub(super) async fn sign_in(
    options: &LoginOptions,
    ui: &dyn LoginUi,
    paste: &mut mpsc::Receiver<String>,
) -> Result<OAuthEntry, LoginError> {
    let pkce = Pkce::generate()?;
    let state = random_state()?;
    let wanted = options.endpoints.callback_port;
    let (port, replies) = match TcpListener::bind(("127.0.0.1", wanted)).await {
        Ok(listener) => {
            let port = listener.local_addr().map_or(wanted, |a| a.port());
            (port, Some(callback::serve(listener, state.clone())))
        }
        Err(error) => {
            ui.show(LoginEvent::Warning(format!(
                "could not listen on 127.0.0.1:{wanted} ({error}); paste the address instead"
            )));
            (wanted, None)
        }
    };
    let redirect = redirect_uri(port);
    let url = authorize_url(&options.endpoints, &redirect, &pkce.challenge, &state);
    ui.show(LoginEvent::AuthorizeUrl {
        url: url.clone(),
        callback: replies.is_some().then(|| redirect.clone()),
    });
    ui.open_browser(&url);
    let code = tokio::time::timeout(LOGIN_TIMEOUT, wait_for_code(replies, paste, &state))
        .await
        .map_err(|_| LoginError::TimedOut)??;
    ui.show(LoginEvent::Progress(
        "Exchanging the code for tokens…".into(),
    ));
    Ok(exchange_code(&options.endpoints, &code, &pkce.verifier, &redirect).await?)
}

/// The code from the callback or a pasted line, whichever comes first.
async fn wait_for_code(
    mut replies: Option<mpsc::Receiver<Reply>>,
    paste: &mut mpsc::Receiver<String>,
    state: &str,
) -> Result<String, LoginError> {
    let mut paste_open = true;
    loop {
        if replies.is_none() && !paste_open {
            return Err(LoginError::NoReplyPath);
        }
        let callback = async {
            match replies.as_mut() {
                Some(replies) => replies.recv().await,
                None => std::future::pending().await,
            }
        };
        let pasted = async {
            if paste_open {
                paste.recv().await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            reply = callback => match reply {
                Some(reply) => return reply,
                None => replies = None,
            },
            line = pasted => match line.as_deref().map(parse_pasted) {
                None => paste_open = false,
                Some(Pasted::Nothing) => {}
                Some(Pasted::Denied(reason)) => return Err(LoginError::Denied(reason)),
                Some(Pasted::Code { state: Some(other), .. }) if other != state => {
                    return Err(LoginError::StateMismatch);
                }
                Some(Pasted::Code { code, .. }) => return Ok(code),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(code: &str, state: Option<&str>) -> Pasted {
        Pasted::Code {
            code: code.into(),
            state: state.map(str::to_string),
        }
    }

    #[test]
    fn pasted_lines_give_the_code_and_state() {
        assert_eq!(
            parse_pasted(" http://localhost:1455/auth/callback?code=c1&state=s1 \n"),
            code("c1", Some("s1"))
        );
        assert_eq!(parse_pasted("c2#s2"), code("c2", Some("s2")));
        assert_eq!(parse_pasted("code=c3&state=s3"), code("c3", Some("s3")));
        assert_eq!(parse_pasted("?code=c4"), code("c4", None));
        assert_eq!(parse_pasted("c5"), code("c5", None));
        assert_eq!(parse_pasted("   "), Pasted::Nothing);
        assert_eq!(
            parse_pasted("http://localhost:1455/auth/callback?error=access_denied&state=s"),
            Pasted::Denied("access_denied".into())
        );
        assert_eq!(
            parse_pasted("http://localhost:1455/auth/callback?state=s"),
            Pasted::Nothing
        );
    }

    struct Quiet;
    impl super::super::LoginUi for Quiet {
        fn show(&self, _: LoginEvent) {}
        fn open_browser(&self, _: &str) {}
    }

    #[tokio::test(start_paused = true)]
    async fn login_times_out_after_five_minutes() {
        let dir = tempfile::tempdir().unwrap();
        let options = LoginOptions {
            agent_dir: dir.path().to_path_buf(),
            endpoints: crate::auth::AuthEndpoints {
                callback_port: 0,
                ..Default::default()
            },
            enterprise: None,
        };
        let (_keep, mut paste) = mpsc::channel(1);
        let started = tokio::time::Instant::now();
        let cancel = tokio_util::sync::CancellationToken::new();
        let result =
            super::super::login("openai-codex", &options, &Quiet, &mut paste, &cancel).await;
        assert!(matches!(result, Err(LoginError::TimedOut)), "{result:?}");
        assert_eq!(started.elapsed(), LOGIN_TIMEOUT);
        assert!(!dir.path().join("auth.json").exists(), "nothing written");
    }
}
