//! The Streamable HTTP client with Zi's bounds (docs/mcp.md#bounds): rmcp's reqwest client
//! as its `StreamableHttpClient` implementation has it, except that each response's headers,
//! each SSE event (and so each of its lines) and each JSON body are bounded. A violation
//! raises the connection's [`Fault`] (why it was lost, which also ends the calls waiting on
//! it) and fails the response; nothing a server sends makes memory grow past the bounds. Every
//! message is read past the nesting bound ([`crate::depth`]), and every failure is an
//! [`HttpFailure`] in words (`HTTP 500 from http://…`), never reqwest's or rmcp's texts.

use std::borrow::Cow;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use crate::bounds::{MAX_HTTP_HEADER_BYTES, MAX_MESSAGE_BYTES, MAX_SSE_EVENT_BYTES};
use crate::connection::Fault;
use crate::depth;
use crate::errors::HttpFailure;
use crate::redirect::RedirectRefused;

type HttpError = StreamableHttpError<HttpFailure>;

/// reqwest with Zi's bounds on what the server sends back.
#[derive(Clone)]
pub(crate) struct BoundedHttpClient {
    inner: reqwest::Client,
    fault: Arc<Fault>,
    /// The configured URL as errors show it ([`crate::errors::shown_url`]).
    url: Arc<str>,
}

impl BoundedHttpClient {
    pub(crate) fn new(inner: reqwest::Client, fault: Arc<Fault>, url: &str) -> Self {
        BoundedHttpClient {
            inner,
            fault,
            url: crate::errors::shown_url(url).into(),
        }
    }

    fn status_failure(&self, status: reqwest::StatusCode) -> HttpError {
        StreamableHttpError::Client(HttpFailure::status(status, &self.url))
    }

    /// Records a bound violation as the connection's fault and returns it as the error.
    fn violation(&self, problem: String) -> HttpError {
        self.fault.raise(problem.clone());
        StreamableHttpError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            problem,
        ))
    }

    /// Sends `request`; a redirect the policy refused ([`RedirectRefused`]) is a fault of the
    /// connection whose text says why.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, HttpError> {
        request.send().await.map_err(|error| {
            let refused = std::error::Error::source(&error)
                .and_then(|source| source.downcast_ref::<RedirectRefused>());
            match refused {
                Some(refused) => self.violation(refused.to_string()),
                None => StreamableHttpError::Client(HttpFailure::request(&error, &self.url)),
            }
        })
    }

    /// Response headers over [`MAX_HTTP_HEADER_BYTES`] (names, values and their separators)
    /// are a violation. (hyper itself refuses a response head over about 400 KiB.)
    fn check_headers(&self, headers: &HeaderMap) -> Result<(), HttpError> {
        let bytes: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        if bytes > MAX_HTTP_HEADER_BYTES {
            return Err(self.violation(format!(
                "the server sent HTTP response headers over {} KiB",
                MAX_HTTP_HEADER_BYTES / 1024
            )));
        }
        Ok(())
    }

    /// The SSE events of a response body, each at most [`MAX_SSE_EVENT_BYTES`].
    fn events(&self, response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let mut meter = EventMeter::default();
        let fault = self.fault.clone();
        let body = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(BodyError::Http)?;
            if meter.add(&chunk) > MAX_SSE_EVENT_BYTES {
                let problem = format!(
                    "the server sent an SSE event over {} MiB",
                    MAX_MESSAGE_BYTES / (1024 * 1024)
                );
                fault.raise(problem.clone());
                return Err(BodyError::Bound(problem));
            }
            Ok(chunk)
        });
        SseStream::from_bytes_stream(body)
            .map(|event| {
                event.map(|mut event| {
                    if let Some(data) = event.data.take() {
                        event.data = Some(match depth::guard(data.as_bytes()) {
                            std::borrow::Cow::Borrowed(_) => data,
                            std::borrow::Cow::Owned(bytes) => {
                                String::from_utf8_lossy(&bytes).into_owned()
                            }
                        });
                    }
                    event
                })
            })
            .boxed()
    }

    /// A JSON body of at most [`MAX_MESSAGE_BYTES`], read chunk by chunk.
    async fn json_message(
        &self,
        mut response: reqwest::Response,
    ) -> Result<ServerJsonRpcMessage, HttpError> {
        let too_large = || {
            format!(
                "the server sent an HTTP body over {} MiB",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            )
        };
        if response
            .content_length()
            .is_some_and(|len| len > MAX_MESSAGE_BYTES as u64)
        {
            return Err(self.violation(too_large()));
        }
        let mut body = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| StreamableHttpError::Client(HttpFailure::request(&e, &self.url)))?;
            let Some(chunk) = chunk else {
                break;
            };
            if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
                return Err(self.violation(too_large()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(serde_json::from_slice(&depth::guard(&body))?)
    }
}

/// Why a bounded body stream failed.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error(transparent)]
    Http(reqwest::Error),
    #[error("{0}")]
    Bound(String),
}

/// Bytes of the SSE event being received: every byte since the last blank line (the end of
/// an event), line ends excepted. An event bound is also a bound on each of its lines.
#[derive(Default)]
struct EventMeter {
    event: usize,
    line: usize,
    after_cr: bool,
}

impl EventMeter {
    /// Counts `bytes`; returns the size of the event in progress.
    fn add(&mut self, bytes: &[u8]) -> usize {
        for &byte in bytes {
            match byte {
                // The LF of a CRLF pair ends nothing more.
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                }
                _ => {
                    self.after_cr = false;
                    self.line += 1;
                    self.event += 1;
                }
            }
        }
        self.event
    }
}

fn content_type_is(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(mime.as_bytes()))
}

impl StreamableHttpClient for BoundedHttpClient {
    type Error = HttpFailure;

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let mut request = self
            .inner
            .get(uri.as_ref())
            .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "))
            .header(HEADER_SESSION_ID, session_id.as_ref());
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        if let Some(token) = auth_token {
            request = request.bearer_auth(token);
        }
        let response = self.send(request).await?;
        if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !response.status().is_success() {
            return Err(self.status_failure(response.status()));
        }
        self.check_headers(response.headers())?;
        if !content_type_is(response.headers(), EVENT_STREAM_MIME_TYPE)
            && !content_type_is(response.headers(), JSON_MIME_TYPE)
        {
            return Err(StreamableHttpError::UnexpectedContentType(
                response
                    .headers()
                    .get(CONTENT_TYPE)
                    .map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
            ));
        }
        Ok(self.events(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
    ) -> Result<(), HttpError> {
        let mut request = self
            .inner
            .delete(uri.as_ref())
            .header(HEADER_SESSION_ID, session_id.as_ref());
        if let Some(token) = auth_token {
            request = request.bearer_auth(token);
        }
        // The answer's body is never read.
        let response = self.send(request).await?;
        match response.status() {
            // The server does not delete sessions: nothing to do.
            reqwest::StatusCode::METHOD_NOT_ALLOWED => Ok(()),
            status if status.is_success() => Ok(()),
            status => Err(self.status_failure(status)),
        }
    }

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut request = self
            .inner
            .post(uri.as_ref())
            .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "));
        if let Some(token) = auth_token {
            request = request.bearer_auth(token);
        }
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        let response = self.send(request.json(&message)).await?;
        self.check_headers(response.headers())?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED
            && let Some(header) = response.headers().get(WWW_AUTHENTICATE)
        {
            let header = header.to_str().map_err(|_| {
                StreamableHttpError::UnexpectedServerResponse(Cow::from(
                    "invalid www-authenticate header value",
                ))
            })?;
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError {
                www_authenticate_header: header.to_string(),
            }));
        }
        if matches!(
            response.status(),
            reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let session_id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let status = response.status();
        if content_type_is(response.headers(), EVENT_STREAM_MIME_TYPE) && status.is_success() {
            return Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session_id,
            ));
        }
        if content_type_is(response.headers(), JSON_MIME_TYPE) {
            // An error status may still carry a JSON-RPC error, which says more than the status.
            return match self.json_message(response).await {
                Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session_id)),
                Err(StreamableHttpError::Deserialize(_)) if !status.is_success() => {
                    Err(self.status_failure(status))
                }
                Err(error) => Err(error),
            };
        }
        if !status.is_success() {
            return Err(self.status_failure(status));
        }
        Err(StreamableHttpError::UnexpectedContentType(
            response
                .headers()
                .get(CONTENT_TYPE)
                .map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_ends_at_a_blank_line_of_any_line_ending() {
        let mut meter = EventMeter::default();
        assert_eq!(meter.add(b"data: abc\n"), 9);
        assert_eq!(meter.add(b"data: de"), 17);
        assert_eq!(meter.add(b"\n\n"), 0);
        assert_eq!(meter.add(b"data: x\r\n\r\n"), 0);
        assert_eq!(meter.add(b"data: y\r\r"), 0);
        // A CRLF split across chunks is one line end, not a blank line.
        assert_eq!(meter.add(b"data: z\r"), 7);
        assert_eq!(meter.add(b"\ndata: w"), 14);
    }
}
