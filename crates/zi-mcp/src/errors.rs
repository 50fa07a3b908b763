//! Errors in words the model can act on (docs/mcp.md). The SDK's own texts chain the Display of
//! every layer, Rust type names included (`Transport send error: Transport
//! [rmcp::transport::worker::WorkerTransport<…>] error: Client error: …`); zi rebuilds each text
//! from the error's parts instead: `HTTP 500 from http://host:port/mcp`, `cannot connect to …`.

use std::error::Error;

use crate::bounds::{MAX_SCHEMA_TOTAL_BYTES, MAX_TOOLS_TOTAL};
use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// Why an HTTP request to a server failed, in words; the error type of zi's Streamable HTTP
/// client, so the SDK carries it to wherever the failure is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpFailure {
    text: String,
    /// The server answered with an error status (rather than not answering at all).
    status: bool,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Error for HttpFailure {}

impl HttpFailure {
    /// `HTTP 500 from http://host:port/mcp`.
    pub(crate) fn status(status: reqwest::StatusCode, url: &str) -> HttpFailure {
        HttpFailure {
            text: format!("HTTP {} from {url}", status.as_u16()),
            status: true,
        }
    }

    /// A request that got no usable answer (refused, timed out, cut off).
    pub(crate) fn request(error: &reqwest::Error, url: &str) -> HttpFailure {
        let cause = innermost(error);
        let text = if error.is_connect() {
            format!("cannot connect to {url} ({cause})")
        } else if error.is_timeout() {
            format!("no answer from {url} in time")
        } else if error.is_body() || error.is_decode() {
            format!("the answer from {url} could not be read ({cause})")
        } else {
            format!("the request to {url} failed ({cause})")
        };
        HttpFailure {
            text,
            status: false,
        }
    }
}

/// The configured URL as errors show it: without query and fragment (they may carry tokens).
pub(crate) fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_string(),
    }
}

/// A request's failure, in words.
pub(crate) fn service(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => data.message.to_string(),
        ServiceError::TransportSend(error) => transport(error),
        ServiceError::TransportClosed => "the connection closed".to_string(),
        ServiceError::UnexpectedResponse => {
            "the server answered with a result of another kind".to_string()
        }
        ServiceError::Cancelled { .. } => "the request was cancelled".to_string(),
        ServiceError::Timeout { timeout } => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        other => without_type_names(&other.to_string()),
    }
}

/// Whether the request failed because the server answered with an HTTP error status.
pub(crate) fn is_http_status(error: &ServiceError) -> bool {
    let ServiceError::TransportSend(error) = error else {
        return false;
    };
    matches!(
        error
            .error
            .downcast_ref::<StreamableHttpError<HttpFailure>>(),
        Some(StreamableHttpError::Client(HttpFailure {
            status: true,
            ..
        }))
    )
}

/// Why `initialize` failed, in words.
pub(crate) fn initialize(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => transport(error),
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection during initialize".to_string()
        }
        ClientInitializeError::JsonRpcError(data) => {
            format!("the server refused initialize: {}", data.message)
        }
        ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ExpectedInitResult(_)
        | ClientInitializeError::ConflictInitResponseId(..) => {
            "the server did not answer initialize as MCP requires".to_string()
        }
        ClientInitializeError::Cancelled => "initialize was cancelled".to_string(),
    }
}

/// A transport's failure: zi's HTTP client's in its own words, a stdio pipe's I/O error, or
/// the innermost cause of anything else.
fn transport(error: &DynamicTransportError) -> String {
    let inner: &(dyn Error + 'static) = error.error.as_ref();
    match inner.downcast_ref::<StreamableHttpError<HttpFailure>>() {
        Some(http) => http_error(http),
        None => innermost(inner),
    }
}

fn http_error(error: &StreamableHttpError<HttpFailure>) -> String {
    match error {
        StreamableHttpError::Client(failure) => failure.to_string(),
        // zi's bound violations travel as I/O errors whose text says which bound.
        StreamableHttpError::Io(error) => error.to_string(),
        StreamableHttpError::UnexpectedContentType(kind) => format!(
            "the server answered with content type {} instead of JSON or an event stream",
            kind.as_deref().unwrap_or("(none)")
        ),
        StreamableHttpError::UnexpectedEndOfStream => {
            "the server's event stream ended before its answer".to_string()
        }
        StreamableHttpError::Deserialize(error) => {
            format!("the server sent a message that is not MCP JSON ({error})")
        }
        StreamableHttpError::AuthRequired(_) => {
            "the server requires authorization (HTTP 401); configure headers or headerEnvironment"
                .to_string()
        }
        StreamableHttpError::Sse(error) => format!("the server's event stream broke ({error})"),
        other => without_type_names(&other.to_string()),
    }
}

/// The Display of the deepest cause: the words of whoever noticed the problem first.
fn innermost(error: &(dyn Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    without_type_names(&current.to_string())
}

/// `text` without bracketed Rust type paths (`Transport [a::B<c::D>] error` → `Transport
/// error`): the last resort for a text zi does not rebuild.
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        let mut depth = 0usize;
        let mut end = None;
        for (index, c) in rest[start..].char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(start + index);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            break;
        };
        if rest[start..end].contains("::") {
            out.push_str(rest[..start].trim_end());
            rest = &rest[end + 1..];
        } else {
            out.push_str(&rest[..=end]);
            rest = &rest[end + 1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_paths_are_dropped_and_other_brackets_kept() {
        assert_eq!(
            without_type_names(
                "Transport [rmcp::transport::worker::WorkerTransport<a::B<[u8; 4]>>] error: Client error: x"
            ),
            "Transport error: Client error: x"
        );
        assert_eq!(without_type_names("list [1, 2] ok"), "list [1, 2] ok");
        assert_eq!(without_type_names("open [ bracket"), "open [ bracket");
    }

    #[test]
    fn urls_lose_query_and_fragment() {
        assert_eq!(
            shown_url("http://127.0.0.1:9/mcp?token=secret#x"),
            "http://127.0.0.1:9/mcp"
        );
        assert_eq!(shown_url("not a url?token=1"), "not a url");
    }

    #[test]
    fn an_http_status_reads_as_status_and_url() {
        let failure =
            HttpFailure::status(reqwest::StatusCode::INTERNAL_SERVER_ERROR, "http://h:1/mcp");
        assert_eq!(failure.to_string(), "HTTP 500 from http://h:1/mcp");
        let send = ServiceError::TransportSend(DynamicTransportError {
            transport_name: "rmcp::transport::Whatever<zi_mcp::http::BoundedHttpClient>".into(),
            transport_type_id: std::any::TypeId::of::<HttpFailure>(),
            error: Box::new(StreamableHttpError::Client(failure)),
        });
        assert_eq!(service(&send), "HTTP 500 from http://h:1/mcp");
        assert!(is_http_status(&send));
        assert!(!is_http_status(&ServiceError::TransportClosed));
    }
}

/// A tool call or `mcp_describe` named a server that is not configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unknown MCP server: {name}. Configured servers: {}", configured.join(", "))]
pub(crate) struct UnknownServer {
    pub(crate) name: String,
    pub(crate) configured: Vec<String>,
}

/// A listed tool zi does not offer, as a call or `mcp_describe` reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP tool {tool} on server {server} is not offered: {reason}")]
pub(crate) struct Refused {
    pub(crate) tool: String,
    pub(crate) server: String,
    /// Scrubbed of the server's secrets.
    pub(crate) reason: String,
}

/// Why `mcp_describe` has no tool to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DescribeError {
    #[error(transparent)]
    UnknownServer(#[from] UnknownServer),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("MCP server {server} has no tool {tool} (mcp_search lists the tools)")]
    NoTool { server: String, tool: String },
}

/// A listing that would break the bounds over all servers (docs/mcp.md#bounds).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CatalogBound {
    #[error("its tools would bring the total over {MAX_TOOLS_TOTAL} tools")]
    Tools,
    #[error(
        "its input schemas would bring the total over {} MiB",
        MAX_SCHEMA_TOTAL_BYTES / (1024 * 1024)
    )]
    SchemaBytes,
}

/// Why a server could not be started, or its tools listed again. The texts never hold a
/// resolved secret once scrubbed ([`Unavailable`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error(transparent)]
    Secret(#[from] crate::secrets::SecretError),
    #[error(transparent)]
    Connect(#[from] crate::connection::ConnectError),
    #[error(transparent)]
    List(#[from] crate::catalog::ListError),
    #[error(transparent)]
    Catalog(#[from] CatalogBound),
    #[error("did not become ready within {} ms", .0.as_millis())]
    Timeout(std::time::Duration),
    #[error("the session has ended")]
    Ended,
}

/// A server that is not available, in words scrubbed of its secrets: redaction works on text,
/// so once scrubbed the reason stays text (it is also what `mcp_status` shows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unavailable(pub(crate) String);

/// A `required` server that failed its first start (docs/mcp.md): start-up fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server \"{server}\" is required but failed to start: {reason}")]
pub struct RequiredServerFailed {
    /// The server's name.
    pub server: String,
    /// Why it failed, scrubbed of its secrets.
    pub reason: String,
}
