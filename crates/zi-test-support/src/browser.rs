//! What a browser does during a sign-in test: one plain `GET` of an `http://` address, the way
//! the browser follows the sign-in page's redirect to zi's local callback. `localhost` is taken
//! as 127.0.0.1, where zi listens.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A page as the browser received it.
#[derive(Debug, Clone)]
pub struct Page {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// `GET url` (HTTP/1.1, `Connection: close`); panics when the page cannot be fetched within
/// `timeout`.
pub async fn get(url: &str, timeout: Duration) -> Page {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// address: {url}"));
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let address = authority.replacen("localhost", "127.0.0.1", 1);
    let fetch = async {
        let mut stream = TcpStream::connect(&address).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(timeout, fetch)
        .await
        .unwrap_or_else(|_| panic!("GET {url} took longer than {timeout:?}"))
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in the answer to {url}: {response}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Page { status, body }
}
