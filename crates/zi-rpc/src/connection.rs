//! One RPC connection over a byte stream pair (docs/rpc.md#request-ids-and-capacity,
//! docs/rpc.md#shutdown-eof-signals-and-exit-codes).
//!
//! Input is read by a dedicated thread that splits it into records and decodes and admits them
//! strictly in order: it finishes admitting one record (including the synchronous part of its
//! handler) before it looks at the next, and pauses while output has no room. Handlers that
//! must wait (`session.interrupt`, `session.await_idle`) run as tasks on the runtime; every
//! response goes through the ordered output queue, which releases the request id only once it
//! is written.

use std::io::Read;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use zi_agent::session::approvals::{ApprovalFrame, ApprovalSink};
use zi_agent::session::{AgentSession, EventContext};
use zi_os::sync::lock;
use zi_protocol::encoded::Encoded;
use zi_protocol::errors::{self as messages, ProtocolError, ProtocolErrorCode};
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::frame::{self, ResponseError, ResponseErrorCode};
use zi_protocol::method_table::{Call, Method, RpcMethod};
use zi_protocol::methods;
use zi_protocol::params::{
    ApprovalRespondParams, CommandInvokeParams, EntriesParams, MessagesParams, ModelSelectParams,
    OutcomesParams, PromptParams, SessionListParams, ThinkingSelectParams,
};
use zi_protocol::request::{DecodedRequest, EventMode, Request, decode_record};
use zi_protocol::results::{
    AwaitIdleResult, CommandInvokeResult, CommandList, EmptyResult, EventModeResult, ModelList,
    ModelSelection, PromptResult, ThinkingLevels,
};

use crate::completion::{self, CompletionWatches, WatchCheck};
use crate::output::{FrameKind, Output, Release};
use crate::registry::{AdmitError, Registry};

mod input;
use input::spawn_reader;

/// How long shutdown waits for in-flight work, then for output to drain.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How a connection ended (docs/rpc.md#shutdown-eof-signals-and-exit-codes); the ACP connection
/// ends the same ways (docs/acp.md#shutdown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionResult {
    /// Input ended and the connection settled (exit 0).
    Eof,
    /// The caller's cancellation fired (zi cancels on a signal, whose exit code then applies).
    Cancelled,
    /// Input failed: an invalid framing record or a read error (exit 1).
    InputError(String),
    /// Output failed: a write error, or a client that stopped reading (exit 1).
    OutputError(String),
    /// In-flight work or queued output did not settle within [`SETTLE_TIMEOUT`] (exit 1).
    SettlementError(String),
}

impl ConnectionResult {
    /// What went wrong, for stderr; `None` when the connection ended without a failure (EOF or
    /// the caller's cancellation).
    pub fn failure(&self) -> Option<&str> {
        match self {
            ConnectionResult::Eof | ConnectionResult::Cancelled => None,
            ConnectionResult::InputError(message)
            | ConnectionResult::OutputError(message)
            | ConnectionResult::SettlementError(message) => Some(message),
        }
    }
}

/// How input ended, as the input thread reports it.
enum InputEnd {
    /// Its `invalid_framing` frame is already queued.
    Framing(&'static str),
    ReadError(String),
    Eof,
}

const MODE_ALL: u8 = 0;
const MODE_NONE: u8 = 1;
const MODE_ACTIVITY: u8 = 2;

struct Connection {
    session: AgentSession,
    output: Output,
    registry: Mutex<Registry>,
    /// Signalled whenever an id is released.
    released: Notify,
    watches: Arc<Mutex<CompletionWatches>>,
    event_mode: Arc<AtomicU8>,
    /// Session events are forwarded only while this is true.
    forwarding: Arc<AtomicBool>,
}

/// Serves one connection until EOF, cancellation or failure, then settles and returns.
pub async fn serve<R, W>(
    session: AgentSession,
    input: R,
    output: W,
    cancel: CancellationToken,
) -> ConnectionResult
where
    R: Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    // `ready` leaves on this thread, before the writer and input threads are started
    // (docs/performance.md#start-up-and-idle-memory).
    let ready = frame::encode_ready(&session.state());
    let output = match Output::start_with_first(output, ready) {
        Ok(output) => output,
        Err(error) => {
            return ConnectionResult::OutputError(format!("{}: {error}", messages::OUTPUT_WRITE));
        }
    };
    let connection = Arc::new(Connection {
        session: session.clone(),
        output: output.clone(),
        registry: Mutex::new(Registry::default()),
        released: Notify::new(),
        watches: Arc::new(Mutex::new(CompletionWatches::default())),
        event_mode: Arc::new(AtomicU8::new(MODE_ALL)),
        forwarding: Arc::new(AtomicBool::new(true)),
    });

    let subscription = session.subscribe(event_forwarder(&connection));
    session.set_backpressure(Some(Arc::new(output.clone())));

    // Records are decoded and admitted on the input thread itself, so a request costs no hop
    // to the runtime; this loop only learns how input ended.
    let admitting = Arc::new(Mutex::new(true));
    let (ended_tx, mut ended) = mpsc::channel(1);
    spawn_reader(
        input,
        Arc::downgrade(&connection),
        admitting.clone(),
        ended_tx,
    );

    let reason = tokio::select! {
        biased;
        () = cancel.cancelled() => ConnectionResult::Cancelled,
        () = output.failed() => ConnectionResult::OutputError(output.failure().unwrap_or_default()),
        end = ended.recv() => match end {
            Some(InputEnd::Framing(message)) => ConnectionResult::InputError(message.to_string()),
            Some(InputEnd::ReadError(message)) => ConnectionResult::InputError(message),
            Some(InputEnd::Eof) | None => ConnectionResult::Eof,
        },
    };
    // Stop: no more input (waiting for a record being admitted right now), no more events;
    // abort and discard; let admitted work answer.
    *lock(&admitting) = false;
    drop(ended);
    connection.forwarding.store(false, Ordering::SeqCst);
    // One step: pending approvals resolve `cancelled`/`disconnect` (journaled, without
    // frames), queued input is dropped and the run is aborted, so no call queued behind them
    // is asked unattended; then wait for the abort to settle.
    session.disconnect_approvals();
    let mut result = reason;
    let settle = async {
        session.abort_and_discard().await;
        connection.wait_all_released().await;
    };
    if tokio::time::timeout(SETTLE_TIMEOUT, settle).await.is_err() {
        output.abandon(messages::SETTLEMENT_RESOURCES);
        result = ConnectionResult::SettlementError(messages::SETTLEMENT_RESOURCES.to_string());
    }
    output.close();
    if tokio::time::timeout(SETTLE_TIMEOUT, output.drained())
        .await
        .is_err()
        && result == ConnectionResult::Eof
    {
        result = ConnectionResult::SettlementError(messages::SETTLEMENT_OUTPUT.to_string());
    }
    session.unsubscribe(subscription);
    session.set_backpressure(None);
    match output.failure() {
        Some(message) if message != messages::SETTLEMENT_RESOURCES => {
            ConnectionResult::OutputError(message)
        }
        _ => result,
    }
}

/// The session subscriber: completion-watch tap, then the frame (per event mode).
fn event_forwarder(connection: &Arc<Connection>) -> zi_agent::Subscriber {
    let watches = connection.watches.clone();
    let mode = connection.event_mode.clone();
    let forwarding = connection.forwarding.clone();
    let output = connection.output.clone();
    Arc::new(move |event: &AgentSessionEvent, context: &EventContext| {
        if matches!(
            event,
            AgentSessionEvent::MessageEnd { .. } | AgentSessionEvent::AgentSettled
        ) {
            lock(&watches).observe(event, context.message_count);
        }
        if !forwarding.load(Ordering::SeqCst) {
            return;
        }
        let kind = match mode.load(Ordering::SeqCst) {
            MODE_NONE => return,
            MODE_ACTIVITY => FrameKind::Droppable,
            _ => FrameKind::Required,
        };
        output.enqueue(frame::encode_event(event), kind, None);
    })
}

/// The one answer to an admitted request of method `M`: sending it queues the response (typed
/// by the method table) and releases the id once it is written.
#[must_use = "every admitted request must be answered"]
struct Reply<M: RpcMethod> {
    connection: Arc<Connection>,
    id: String,
    method: PhantomData<fn() -> M>,
}

impl<M: RpcMethod> Reply<M> {
    /// Sends the outcome; an error is converted by its one `From` impl (the session's errors
    /// carry their code and message, docs/rpc.md#error-codes).
    fn send(self, outcome: Result<M::Result, impl Into<ResponseError>>) {
        self.connection
            .respond(self.id, M::METHOD, outcome.map_err(Into::into));
    }

    /// Sends a result of a method that cannot fail.
    fn ok(self, result: M::Result) {
        self.send(Ok::<_, ResponseError>(result));
    }

    /// Sends a result that was serialized earlier (the same wire bytes as sending it typed).
    fn send_encoded(self, outcome: Result<Encoded<M::Result>, serde_json::Error>) {
        let outcome = outcome.map_err(|_| failed(messages::OUTPUT_SERIALIZE));
        self.connection.respond(self.id, M::METHOD, outcome);
    }
}

fn failed(error: impl Into<String>) -> ResponseError {
    ResponseError {
        code: ResponseErrorCode::OperationFailed,
        message: error.into(),
    }
}

impl Connection {
    fn protocol_error(&self, error: ProtocolError) {
        self.output.enqueue(
            frame::encode_protocol_error(&error),
            FrameKind::Required,
            None,
        );
    }

    /// Decodes and admits one record (steps 2–6 of docs/rpc.md#processing-order).
    fn admit(self: &Arc<Self>, line: &str) {
        let request = match decode_record(line) {
            Ok(request) => request,
            Err(error) => return self.protocol_error(error),
        };
        let is_interrupt = request.request.is_interrupt();
        let admitted = lock(&self.registry).admit(&request.id, is_interrupt);
        match admitted {
            Err(AdmitError::Duplicate) => self.protocol_error(ProtocolError {
                code: ProtocolErrorCode::InvalidRequest,
                message: messages::ID_IN_FLIGHT.to_string(),
                id: Some(request.id),
            }),
            Err(AdmitError::Capacity(message)) => {
                let error = ResponseError {
                    code: ResponseErrorCode::Capacity,
                    message: message.to_string(),
                };
                self.output.enqueue(
                    frame::encode_failure(&request.id, request.request.method().name(), &error),
                    FrameKind::Required,
                    None,
                );
            }
            Ok(()) => self.launch(request),
        }
    }

    fn release_action(self: &Arc<Self>, id: String, is_interrupt: bool) -> Release {
        let connection = self.clone();
        Box::new(move || {
            lock(&connection.registry).release(&id, is_interrupt);
            connection.released.notify_waiters();
        })
    }

    /// The typed reply to the request `id` of `call`'s method.
    fn reply<M: RpcMethod>(self: &Arc<Self>, id: String, _call: &Call<M>) -> Reply<M> {
        Reply {
            connection: self.clone(),
            id,
            method: PhantomData,
        }
    }

    fn respond<T: Serialize>(
        self: &Arc<Self>,
        id: String,
        method: Method,
        outcome: Result<T, ResponseError>,
    ) {
        let body = match &outcome {
            // A result that cannot be serialized is answered as a failure instead.
            Ok(result) => frame::encode_success(&id, method.name(), result).or_else(|_| {
                frame::encode_failure(&id, method.name(), &failed(messages::OUTPUT_SERIALIZE))
            }),
            Err(error) => frame::encode_failure(&id, method.name(), error),
        };
        let release = self.release_action(id, method.is_interrupt());
        self.output
            .enqueue(body, FrameKind::Required, Some(release));
    }

    /// Runs the handler: synchronously for everything that does not wait, as a task otherwise.
    /// Each arm answers through the [`Reply`] typed by the method table.
    // Long on purpose: the dispatch is one exhaustive match over `Request`, one arm per row of
    // the method table, so the compiler asks for the arm of every new method here; each arm
    // only calls the session and answers through its typed `Reply`.
    fn launch(self: &Arc<Self>, decoded: DecodedRequest) {
        let DecodedRequest { id, request } = decoded;
        match request {
            Request::Interrupt(call) => {
                let reply = self.reply(id, &call);
                let session = self.session.clone();
                tokio::spawn(async move {
                    reply.send(session.abort().await.map(|()| EmptyResult {}));
                });
            }
            Request::AwaitIdle(call) => {
                let reply = self.reply(id, &call);
                let connection = self.clone();
                tokio::spawn(async move {
                    let completion_id = call.params.map(|params| params.completion_id);
                    reply.send(connection.await_idle(completion_id.as_deref()).await);
                });
            }
            Request::Prompt(call) => {
                let reply = self.reply(id, &call);
                self.prompt(reply, call.params);
            }
            Request::Compact(call) => {
                let reply = self.reply(id, &call);
                let focus = call.params.and_then(|params| params.instructions);
                match self.session.compact(focus) {
                    Ok(started) => started.answer_with(move |outcome| reply.send(outcome)),
                    Err(error) => reply.send(Err(error)),
                }
            }
            Request::GetStats(call) => {
                let stats = self.session.stats();
                self.reply(id, &call).send(stats);
            }
            Request::SetEvents(call) => {
                let reply = self.reply(id, &call);
                let mode = call.params.mode;
                let value = match mode {
                    EventMode::All => MODE_ALL,
                    EventMode::None => MODE_NONE,
                    EventMode::Activity => MODE_ACTIVITY,
                };
                self.event_mode.store(value, Ordering::SeqCst);
                reply.ok(EventModeResult { mode });
            }
            Request::GetState(call) => {
                let reply = self.reply(id, &call);
                // The cached snapshot is v1's; an opted-in connection's carries `approvals`.
                match self.session.state_with_approvals() {
                    Some(state) => reply.ok(state),
                    None => reply.send_encoded(self.session.encoded_state()),
                }
            }
            Request::SetApprovals(call) => {
                let reply = self.reply(id, &call);
                reply.send(
                    self.session
                        .set_approvals(call.params, self.approval_sink()),
                );
            }
            Request::ApprovalRespond(call) => {
                let reply = self.reply(id, &call);
                let ApprovalRespondParams {
                    approval_id,
                    decision,
                    message,
                    rule,
                } = call.params;
                reply.send(
                    self.session
                        .respond_approval(&approval_id, decision, message, rule),
                );
            }
            Request::GetMessages(call) => {
                let MessagesParams { start, limit } = call.params.unwrap_or_default();
                let page = self.session.messages_page(start, limit);
                self.reply(id, &call).send(page);
            }
            Request::GetOutcomes(call) => {
                let OutcomesParams { start, limit } = call.params.unwrap_or_default();
                let page = self.session.outcomes_page(start, limit);
                self.reply(id, &call).ok(page);
            }
            Request::CommandList(call) => self.reply(id, &call).ok(CommandList {
                commands: self.session.extension_commands(),
            }),
            Request::CommandInvoke(call) => {
                let reply = self.reply(id, &call);
                let CommandInvokeParams { name, arguments } = call.params;
                match self.session.invoke_command(&name, arguments) {
                    Ok(running) => {
                        tokio::spawn(async move {
                            let outcome =
                                running.await.map(|message| CommandInvokeResult { message });
                            reply.send(outcome);
                        });
                    }
                    Err(error) => reply.send(Err(error)),
                }
            }
            Request::ModelList(call) => {
                let models = self.session.model_list();
                self.reply(id, &call)
                    .send(models.map(|models| ModelList { models }));
            }
            Request::ModelSelect(call) => {
                let ModelSelectParams {
                    provider,
                    id: model_id,
                } = &call.params;
                let outcome = self.session.select_model(provider, model_id);
                self.reply(id, &call)
                    .send(outcome.map(|model| ModelSelection { model }));
            }
            Request::ThinkingList(call) => self.reply(id, &call).ok(ThinkingLevels {
                levels: self.session.thinking_levels(),
            }),
            Request::ThinkingSelect(call) => {
                let ThinkingSelectParams { level, scope } = call.params;
                let selection = self.session.select_thinking(level, scope);
                self.reply(id, &call).send(selection);
            }
            // The catalog, entry pages and forks read files: off the input thread, so later
            // records are admitted meanwhile.
            Request::ListSessions(call) => {
                let reply = self.reply(id, &call);
                let SessionListParams {
                    start,
                    limit,
                    scope,
                } = call.params.unwrap_or_default();
                let session = self.session.clone();
                blocking(move || reply.ok(session.list_sessions(start, limit, scope)));
            }
            Request::GetEntries(call) => {
                let reply = self.reply(id, &call);
                let EntriesParams { start, limit } = call.params.unwrap_or_default();
                let session = self.session.clone();
                blocking(move || {
                    reply.send(session.entries_page(start, limit));
                });
            }
            Request::Fork(call) => {
                let reply = self.reply(id, &call);
                let session = self.session.clone();
                blocking(move || reply.send(session.fork(&call.params.entry_id)));
            }
        }
    }

    /// Where the session sends this connection's approval frames: required frames, whatever
    /// the event mode, and none once the connection stops.
    fn approval_sink(&self) -> ApprovalSink {
        let forwarding = self.forwarding.clone();
        let output = self.output.clone();
        Arc::new(move |frame: ApprovalFrame<'_>| {
            if !forwarding.load(Ordering::SeqCst) {
                return;
            }
            let body = match frame {
                ApprovalFrame::Request(request) => frame::encode_approval_request(request),
                ApprovalFrame::Resolved(resolution) => frame::encode_approval_resolved(resolution),
            };
            output.enqueue(body, FrameKind::Required, None);
        })
    }

    /// `session.prompt` (docs/rpc.md#sessionprompt, docs/rpc.md#completion-watches).
    fn prompt(self: &Arc<Self>, reply: Reply<methods::Prompt>, params: PromptParams) {
        let PromptParams {
            delivery,
            text,
            completion_id,
            images,
        } = params;
        let watches = self.watches.clone();
        let (previous, admission) = self
            .session
            .prompt_with(delivery, text, images, |streaming| {
                lock(&watches).before_prompt(delivery, completion_id.as_deref(), streaming)
            });
        match admission {
            Ok(admission) => {
                let revision = lock(&self.watches).revision_for(completion_id.as_deref());
                // The response is queued before the run is released, so it precedes the run's
                // first event.
                reply.ok(PromptResult {
                    delivery,
                    completion_revision: revision,
                });
                drop(admission);
            }
            Err(error) => {
                lock(&self.watches).restore(previous);
                reply.send(Err(error));
            }
        }
    }

    /// `session.await_idle` (docs/rpc.md#sessionawait_idle, docs/rpc.md#completion-watches).
    async fn await_idle(
        &self,
        completion_id: Option<&str>,
    ) -> Result<AwaitIdleResult, ResponseError> {
        let Some(id) = completion_id else {
            self.session.wait_idle().await;
            return Ok(AwaitIdleResult::Idle(EmptyResult {}));
        };
        loop {
            self.session.wait_idle().await;
            let check = lock(&self.watches).check(id);
            match check {
                WatchCheck::NotActive => return Err(failed(completion::not_active(id))),
                WatchCheck::Settled(result) => return Ok(AwaitIdleResult::Completion(result)),
                WatchCheck::Unsettled if !self.session.is_streaming() => {
                    return Err(failed(completion::no_settled_observation(id)));
                }
                WatchCheck::Unsettled => {}
            }
        }
    }

    async fn wait_all_released(&self) {
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.registry).is_empty() || self.output.failure().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// Runs a handler that does blocking file I/O on the runtime's blocking pool.
fn blocking(handler: impl FnOnce() + Send + 'static) {
    drop(tokio::task::spawn_blocking(handler));
}
