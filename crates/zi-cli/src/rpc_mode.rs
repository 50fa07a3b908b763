//! `--mode rpc`: serve Zi RPC v1 on stdin/stdout until EOF, a signal or a failure.

use std::io::Write;

use tokio_util::sync::CancellationToken;

use crate::dispose;
use crate::runtime::Runtime;
use crate::signals::SignalState;
use crate::stdio::Streams;

pub async fn run(
    runtime: Runtime,
    streams: Streams,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let session = runtime.session;
    // Once the `ready` frame (the first write) is on stdout, before any request is read: the
    // subagent profiles are read (their warnings still precede every response) and the MCP
    // servers start, whose processes must not compete with start-up on a busy machine
    // (docs/performance.md#start-up-and-idle-memory).
    let (profiles, mcp) = (runtime.subagent_profiles, runtime.mcp);
    let handle = tokio::runtime::Handle::current();
    let after_ready: Hook = Box::new(move || {
        profiles.load();
        if let Some(mcp) = mcp {
            let _runtime = handle.enter();
            mcp.start();
        }
    });
    let output = AfterFirstWrite::new(streams.output, Some(after_ready));
    let result = zi_rpc::serve(session.clone(), streams.input, output, cancel).await;
    let disposed = dispose(&session).await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    let code = match result.failure() {
        Some(message) => {
            eprintln!("{message}");
            1
        }
        None => 0,
    };
    if disposed { code } else { 1 }
}

type Hook = Box<dyn FnOnce() + Send>;

/// The protocol output, running a hook once its first bytes are written and flushed. The first
/// write is `ready`, so the hook runs right after `ready` is on the client's pipe (on the thread
/// that writes it, before the connection's threads start: the hook must be quick).
struct AfterFirstWrite<W> {
    inner: W,
    hook: Option<Hook>,
    wrote: bool,
}

impl<W> AfterFirstWrite<W> {
    fn new(inner: W, hook: Option<Hook>) -> Self {
        AfterFirstWrite {
            inner,
            hook,
            wrote: false,
        }
    }
}

impl<W: Write> Write for AfterFirstWrite<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.wrote |= written > 0;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()?;
        if self.wrote
            && let Some(hook) = self.hook.take()
        {
            hook();
        }
        Ok(())
    }
}
