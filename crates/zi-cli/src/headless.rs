//! The one-shot modes: `--mode text` (`-p`) prints the final assistant text; `--mode json`
//! prints the session header and then every session event as JSONL.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::mpsc;

use tokio_util::sync::CancellationToken;
use zi_agent::AgentSession;
use zi_os::sync::lock;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::message::{AgentMessage, AssistantMessage, ContentBlock, StopReason};
use zi_protocol::request::Delivery;

use crate::dispose;
use crate::runtime::Runtime;
use crate::signals::SignalState;

/// Bounds on headless input (docs/cli.md#modes).
pub const MAX_PROMPTS: usize = 128;
pub const MAX_PROMPT_BYTES: usize = 8 * 1024 * 1024;

/// Starts a thread that writes JSON lines to `output` (zi's stdout), so a slow reader never holds
/// the session lock. Returns the sender and the thread to join.
fn json_writer(output: File) -> (mpsc::Sender<Vec<u8>>, std::thread::JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel::<Vec<u8>>();
    let handle = std::thread::spawn(move || {
        let mut out = BufWriter::new(output);
        while let Ok(line) = receiver.recv() {
            if out.write_all(&line).is_err() {
                return;
            }
            // Flush only when the channel is momentarily empty.
            while let Ok(next) = receiver.try_recv() {
                if out.write_all(&next).is_err() {
                    return;
                }
            }
            let _ = out.flush();
        }
    });
    (sender, handle)
}

fn json_line<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

pub async fn run(
    runtime: Runtime,
    prompts: Vec<String>,
    json: bool,
    output: File,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let session = runtime.session;
    let mut answer = None;
    let writer = if json {
        let (sender, handle) = json_writer(output);
        let _ = sender.send(json_line(&runtime.header));
        let events = sender.clone();
        let subscription = session.subscribe(Arc::new(move |event: &AgentSessionEvent, _: &_| {
            let _ = events.send(json_line(event));
        }));
        Some((sender, handle, subscription))
    } else {
        answer = Some(output);
        None
    };

    // The final assistant message as the runs ended it: usually the last one journaled, but a
    // run stopped by a journal failure ends with an error that is not in the journal.
    let last_ended: Arc<std::sync::Mutex<Option<AssistantMessage>>> = Arc::default();
    let tracker = {
        let last_ended = last_ended.clone();
        session.subscribe(Arc::new(move |event: &AgentSessionEvent, _: &_| {
            if let AgentSessionEvent::MessageEnd {
                message: AgentMessage::Assistant(message),
            } = event
            {
                *lock(&last_ended) = Some(message.clone());
            }
        }))
    };

    let mut failure = None;
    for prompt in prompts {
        if cancel.is_cancelled() {
            break;
        }
        if let Err(error) = run_prompt(&session, prompt, &cancel).await {
            failure = Some(error);
            break;
        }
    }

    if let Some((sender, handle, subscription)) = writer {
        session.unsubscribe(subscription);
        drop(sender);
        let _ = tokio::task::spawn_blocking(move || handle.join()).await;
    }
    session.unsubscribe(tracker);
    let disposed = dispose(&session).await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    if let Some(error) = failure {
        eprintln!("{error}");
        return 1;
    }
    let ended = lock(&last_ended).take();
    let code = match ended.or_else(|| session.last_assistant()) {
        None => {
            eprintln!("The session completed without an assistant message");
            1
        }
        Some(message) => {
            if let Some(output) = answer {
                let mut out = BufWriter::new(output);
                for block in &message.content {
                    if let ContentBlock::Text { text, .. } = block {
                        let _ = writeln!(out, "{text}");
                    }
                }
                let _ = out.flush();
            }
            match message.stop_reason {
                StopReason::Error | StopReason::Aborted => {
                    let reason = message.stop_reason.as_str();
                    eprintln!(
                        "{}",
                        message
                            .error_message
                            .unwrap_or_else(|| format!("Assistant stopped with {reason}"))
                    );
                    1
                }
                _ => 0,
            }
        }
    };
    if disposed { code } else { 1 }
}

/// Runs one prompt to settlement, aborting on cancellation.
async fn run_prompt(
    session: &AgentSession,
    prompt: String,
    cancel: &CancellationToken,
) -> Result<(), zi_agent::errors::SessionError> {
    let admission = session.prompt(Delivery::Direct, prompt)?;
    drop(admission);
    tokio::select! {
        () = session.wait_idle() => {}
        () = cancel.cancelled() => session.abort_and_discard().await,
    }
    Ok(())
}
