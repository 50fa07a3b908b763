//! The streamed response body: pre-encoded chunks, an optional hang, and disconnect counting.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;

use super::Shared;

/// A `text/event-stream` response of pre-encoded chunks.
pub(super) fn stream_response(shared: Arc<Shared>, chunks: Vec<Bytes>, hang: bool) -> Response {
    let body = ScriptedBody {
        chunks: chunks.into(),
        hang: hang.then(|| {
            let mut shutdown = shared.shutdown.subscribe();
            Box::pin(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            }) as Pin<Box<dyn Future<Output = ()> + Send>>
        }),
        guard: DisconnectGuard {
            shared,
            finished: false,
        },
    };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Counts a disconnect when a response body is dropped before it was sent to the end.
pub(super) struct DisconnectGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) finished: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.disconnects.fetch_add(1, Ordering::SeqCst);
            self.shared.changes.send_replace(());
        }
    }
}

/// The body of a streamed reply: pre-encoded chunks, then either the end or, for
/// [`Step::Hang`], a wait that only shutdown ends.
pub(super) struct ScriptedBody {
    pub(super) chunks: VecDeque<Bytes>,
    pub(super) hang: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    pub(super) guard: DisconnectGuard,
}

impl Stream for ScriptedBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        match &mut this.hang {
            None => {
                this.guard.finished = true;
                Poll::Ready(None)
            }
            Some(stopped) => match stopped.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    // Shutdown, not the client, ends this stream: abort the connection.
                    this.guard.finished = true;
                    this.hang = None;
                    Poll::Ready(Some(Err(std::io::Error::other("mock server shut down"))))
                }
            },
        }
    }
}
