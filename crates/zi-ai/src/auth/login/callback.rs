//! The local page the browser returns to after ChatGPT sign-in
//! (`http://localhost:<port>/auth/callback`, served on 127.0.0.1): a tiny HTTP/1.1 handler that
//! reads one request head, answers with a short page, and reports what the redirect carried.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::LoginError;
use crate::auth::codex::CALLBACK_PATH;

/// Largest request head read from the browser.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long one connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// What a request to the callback said: the code, or why the sign-in fails.
pub(super) type Reply = Result<String, LoginError>;

/// Serves the callback until the returned receiver is dropped; each request to the callback
/// path becomes one [`Reply`]. Other paths (`/favicon.ico`) get a 404 and change nothing.
pub(super) fn serve(listener: TcpListener, state: String) -> mpsc::Receiver<Reply> {
    let (sender, receiver) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = sender.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            let (sender, state) = (sender.clone(), state.clone());
            tokio::spawn(async move {
                if let Some(reply) = answer(stream, &state).await {
                    let _ = sender.send(reply).await;
                }
            });
        }
    });
    receiver
}

/// Reads one request and answers it; `None` for a request that is not the callback.
async fn answer(mut stream: TcpStream, state: &str) -> Option<Reply> {
    let head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream))
        .await
        .ok()??;
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != CALLBACK_PATH {
        respond(&mut stream, "404 Not Found", "Not found.").await;
        return None;
    }
    let reply = judge(query, state);
    match &reply {
        Ok(_) => {
            respond(
                &mut stream,
                "200 OK",
                "Signed in to zi. You can close this window.",
            )
            .await
        }
        Err(error) => respond(&mut stream, "400 Bad Request", &error.to_string()).await,
    }
    Some(reply)
}

/// A redirect's query, decoded: the `code`, `state`, and a refusal's `error` text.
pub(super) struct Redirect {
    pub code: Option<String>,
    pub state: Option<String>,
    /// `error: error_description` of a refused consent.
    pub denial: Option<String>,
}

impl Redirect {
    pub(super) fn parse(query: &str) -> Redirect {
        let pairs: Vec<(String, String)> =
            reqwest::Url::parse(&format!("http://redirect.invalid/?{query}"))
                .map(|url| url.query_pairs().into_owned().collect())
                .unwrap_or_default();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        Redirect {
            code: get("code").filter(|code| !code.is_empty()),
            state: get("state"),
            denial: get("error").map(|error| match get("error_description") {
                Some(description) if !description.is_empty() => format!("{error}: {description}"),
                _ => error,
            }),
        }
    }
}

/// The code of a redirect's query, or why it is refused: a state other than this sign-in's, a
/// denied consent, no code.
pub(super) fn judge(query: &str, state: &str) -> Reply {
    let redirect = Redirect::parse(query);
    if redirect.state.as_deref() != Some(state) {
        return Err(LoginError::StateMismatch);
    }
    if let Some(denial) = redirect.denial {
        return Err(LoginError::Denied(denial));
    }
    redirect.code.ok_or(LoginError::NoCode)
}

/// The request head (up to the blank line), at most [`MAX_HEAD_BYTES`].
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD_BYTES {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(head).ok()
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>zi</title></head><body><p>{}</p></body></html>",
        escape(text)
    );
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_is_judged_by_its_state_first() {
        assert_eq!(judge("code=c1&state=s", "s").ok().as_deref(), Some("c1"));
        assert!(matches!(
            judge("code=c1&state=forged", "s"),
            Err(LoginError::StateMismatch)
        ));
        assert!(matches!(
            judge("code=c1", "s"),
            Err(LoginError::StateMismatch)
        ));
        let denied = judge(
            "error=access_denied&error_description=The+user+refused&state=s",
            "s",
        );
        assert_eq!(
            denied.err().map(|e| e.to_string()).as_deref(),
            Some("Sign-in was denied (access_denied: The user refused)")
        );
        assert!(matches!(judge("state=s", "s"), Err(LoginError::NoCode)));
    }
}
