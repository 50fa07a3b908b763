//! One extension: a Lua state on its own OS thread, driven through a job channel.
//!
//! A busy or misbehaving script never blocks tokio: every call runs on the extension's thread,
//! under an instruction-count hook (in every coroutine too, see [`stop_hook`]) that stops it when
//! its job is cancelled or past its deadline, and under a per-extension memory limit. Results come back over oneshot channels. A script that
//! still does not stop (it swallows the stop error forever) is abandoned after the grace period
//! and the extension is marked unresponsive.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mlua::{Function, Lua, LuaSerdeExt, Table, Value as LuaValue, ffi};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use zi_agent::SessionHost;
use zi_agent::extension::LifecycleEvent;
use zi_os::sync::lock;

use crate::api;
use crate::discovery::ExtensionSource;
use crate::error::{ExtensionError, StopReason};
use crate::progress::ProgressSender;

/// Memory a single extension's Lua state may hold.
pub const MEMORY_LIMIT_BYTES: usize = 64 * 1024 * 1024;
/// Budget of the load script, of each lifecycle handler, and of a command.
pub const LOAD_DEADLINE: Duration = Duration::from_secs(5);
/// Largest extension entry file zi reads.
pub const MAX_SOURCE_BYTES: u64 = 8 * 1024 * 1024;
pub const EVENT_DEADLINE: Duration = Duration::from_secs(1);
/// How long an extension command may run before it is cancelled.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(30);
/// How long a cancelled or overdue job gets to stop.
pub const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// Lifecycle events waiting for an extension; later ones are dropped.
pub const EVENT_QUEUE: usize = 32;
/// Instructions between two checks of the stop conditions.
const HOOK_INTERVAL: u32 = 1000;

pub const CANCELLED: &str = "Extension call was cancelled";

/// Stop conditions of the job in progress.
pub struct Control {
    cancelled: AtomicBool,
    deadline: Instant,
    what: &'static str,
}

impl Control {
    pub fn new(budget: Duration, what: &'static str) -> Arc<Control> {
        Arc::new(Control {
            cancelled: AtomicBool::new(false),
            deadline: Instant::now() + budget,
            what,
        })
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Whether the job must stop (the hook's check: it allocates nothing).
    fn must_stop(&self) -> bool {
        self.is_cancelled() || Instant::now() >= self.deadline
    }

    /// Why the job must stop, if it must.
    pub fn stop_reason(&self) -> Option<StopReason> {
        if self.is_cancelled() {
            Some(StopReason::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(StopReason::TimeLimit(self.what))
        } else {
            None
        }
    }
}

/// Static facts handed to every `ctx`.
#[derive(Debug, Clone)]
pub struct HostEnv {
    pub mode: String,
    pub cwd: std::path::PathBuf,
    /// The sandbox of the session's `bash`, which `ctx.exec` runs inside
    /// (docs/approvals.md#one-shot-modes-and-subagents).
    pub sandbox: zi_sandbox::SandboxHandle,
}

/// A registered command's catalog entry.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
}

/// A registered tool's definition.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub timeout: Duration,
    /// Whether the model sees the tool from the start (`active = false`: dormant).
    pub active: bool,
    /// `output_schema`, compiled once at registration: results are validated against it.
    pub output: Option<Arc<jsonschema::Validator>>,
}

/// What loading registered.
#[derive(Debug, Default)]
pub struct Registrations {
    pub commands: Vec<CommandSpec>,
    pub tools: Vec<ToolSpec>,
    /// `zi.register_subagent_profile` calls, validated, in call order.
    pub profiles: Vec<zi_config::subagent_profiles::SubagentProfile>,
}

/// State shared by the worker thread, its Lua callbacks and the async side.
pub struct Shared {
    pub id: String,
    /// The entry script: the source of the extension's subagent profiles.
    pub entry: std::path::PathBuf,
    pub env: HostEnv,
    pub loading: AtomicBool,
    pub session: OnceLock<SessionHost>,
    pub current: Mutex<Option<Arc<Control>>>,
    pub registrations: Mutex<Registrations>,
    unresponsive: AtomicBool,
    pending_events: AtomicUsize,
}

impl Shared {
    pub fn control(&self) -> Option<Arc<Control>> {
        lock(&self.current).clone()
    }
}

/// A tool call's result.
pub enum ToolResultValue {
    Text(String),
    Json(Value),
}

enum Job {
    Command {
        name: String,
        arguments: String,
        control: Arc<Control>,
        reply: oneshot::Sender<Result<Option<String>, ExtensionError>>,
    },
    Tool {
        name: String,
        params: Value,
        progress: ProgressSender,
        control: Arc<Control>,
        reply: oneshot::Sender<Result<ToolResultValue, ExtensionError>>,
    },
    Event(LifecycleEvent),
    Stop(oneshot::Sender<()>),
}

/// The async side's handle on one extension thread.
pub struct Worker {
    pub shared: Arc<Shared>,
    jobs: Mutex<std_mpsc::Sender<Job>>,
}

/// Yields whether the script loaded.
pub type LoadReceiver = std_mpsc::Receiver<Result<(), ExtensionError>>;

/// Starts an extension thread and runs its script. The receiver yields the load result.
pub fn spawn(
    source: ExtensionSource,
    env: HostEnv,
) -> Result<(Arc<Worker>, LoadReceiver), ExtensionError> {
    let shared = Arc::new(Shared {
        id: source.id.clone(),
        entry: source.entry.clone(),
        env,
        loading: AtomicBool::new(true),
        session: OnceLock::new(),
        current: Mutex::new(None),
        registrations: Mutex::new(Registrations::default()),
        unresponsive: AtomicBool::new(false),
        pending_events: AtomicUsize::new(0),
    });
    let (jobs_tx, jobs_rx) = std_mpsc::channel();
    let (loaded_tx, loaded_rx) = std_mpsc::channel();
    let thread_shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("zi-ext-{}", source.id))
        .stack_size(16 * 1024 * 1024)
        .spawn(move || thread_main(thread_shared, source, jobs_rx, loaded_tx))
        .map_err(ExtensionError::Thread)?;
    Ok((
        Arc::new(Worker {
            shared,
            jobs: Mutex::new(jobs_tx),
        }),
        loaded_rx,
    ))
}

fn thread_main(
    shared: Arc<Shared>,
    source: ExtensionSource,
    jobs: std_mpsc::Receiver<Job>,
    loaded: std_mpsc::Sender<Result<(), ExtensionError>>,
) {
    HOOK_SHARED.with(|slot| *slot.borrow_mut() = Some(shared.clone()));
    let lua = match load(&shared, &source) {
        Ok(lua) => {
            shared.loading.store(false, Ordering::SeqCst);
            let _ = loaded.send(Ok(()));
            lua
        }
        Err(error) => {
            let _ = loaded.send(Err(error));
            return;
        }
    };
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Command {
                name,
                arguments,
                control,
                reply,
            } => {
                let result = with_control(&shared, control, || {
                    run_command(&lua, &shared, &name, arguments)
                });
                let _ = reply.send(result);
            }
            Job::Tool {
                name,
                params,
                progress,
                control,
                reply,
            } => {
                let result = with_control(&shared, control, || {
                    run_tool(&lua, &shared, &name, &params, progress)
                });
                let _ = reply.send(result);
            }
            Job::Event(event) => {
                shared.pending_events.fetch_sub(1, Ordering::SeqCst);
                let control = Control::new(EVENT_DEADLINE, "Lifecycle handler");
                if let Err(error) =
                    with_control(&shared, control, || run_event(&lua, &shared, &event))
                {
                    tracing::warn!(
                        "extension {}: {} handler failed: {error}",
                        shared.id,
                        event.name()
                    );
                }
            }
            Job::Stop(reply) => {
                let _ = reply.send(());
                break;
            }
        }
        // Reclaim what the job left behind while nothing is running.
        let _ = lua.gc_collect();
    }
}

fn with_control<T>(
    shared: &Shared,
    control: Arc<Control>,
    job: impl FnOnce() -> Result<T, ExtensionError>,
) -> Result<T, ExtensionError> {
    if let Some(reason) = control.stop_reason() {
        return Err(reason.into());
    }
    *lock(&shared.current) = Some(control.clone());
    let result = job();
    *lock(&shared.current) = None;
    // A stop raised by the hook surfaces as the stop reason, not as a Lua traceback.
    match (result, control.stop_reason()) {
        (Err(_), Some(reason)) => Err(reason.into()),
        (result, _) => result,
    }
}

fn load(shared: &Arc<Shared>, source: &ExtensionSource) -> Result<Lua, ExtensionError> {
    // A FIFO or device in place of the source must not hang loading (zi_os::config_file).
    let code = zi_os::config_file::read_bounded(&source.entry, MAX_SOURCE_BYTES)?
        .ok_or_else(|| ExtensionError::Missing(source.entry.clone()))?;
    let lua = Lua::new();
    lua.set_memory_limit(MEMORY_LIMIT_BYTES)
        .map_err(ExtensionError::MemoryLimit)?;
    install_stop_hook(&lua)?;
    api::install(&lua, shared, &source.module_dir)?;
    let control = Control::new(LOAD_DEADLINE, "Extension loading");
    with_control(shared, control, || {
        lua.load(code)
            .set_name(format!("@{}", source.entry.display()))
            .exec()
            .map_err(ExtensionError::from)
    })?;
    Ok(lua)
}

thread_local! {
    /// The extension whose Lua state runs on this thread, for [`stop_hook`]. Every extension has
    /// its own thread and its state never runs on another, so the hook needs no other lookup.
    static HOOK_SHARED: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// What the hook raises; the caller reports the job's stop reason instead (see [`with_control`]).
const STOP_MESSAGE: &std::ffi::CStr = c"extension call stopped by zi";

/// Installs [`stop_hook`] on the main thread of `lua` with the C API.
///
/// Not `Lua::set_hook`: mlua's hook belongs to one Lua thread and switches itself off in any other
/// coroutine that inherits it, so a loop inside `coroutine.wrap`/`resume` ran unchecked. Lua copies
/// a thread's hook into every coroutine created from it (`lua_newthread`), and this hook has no
/// per-thread state, so it covers all coroutines: the script has no way to create an unhooked one
/// (the debug library is not loaded).
fn install_stop_hook(lua: &Lua) -> mlua::Result<()> {
    let count = std::ffi::c_int::try_from(HOOK_INTERVAL).unwrap_or(std::ffi::c_int::MAX);
    // SAFETY: sets the hook of the state mlua hands us, inside mlua's protected call.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_sethook(state, Some(stop_hook), ffi::LUA_MASKCOUNT, count);
        })
    }
}

/// Raises a Lua error when the job in progress must stop.
unsafe extern "C-unwind" fn stop_hook(state: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    let must_stop = HOOK_SHARED.with(|slot| {
        slot.borrow()
            .as_ref()
            .and_then(|shared| shared.control())
            .is_some_and(|control| control.must_stop())
    });
    if must_stop {
        // SAFETY: raising an error from a count hook is allowed (lua_sethook(3)). lua_error does
        // not return (it unwinds with longjmp), so no Rust value with a destructor may be alive
        // here: everything above has been dropped and STOP_MESSAGE is static.
        unsafe {
            ffi::lua_pushstring(state, STOP_MESSAGE.as_ptr());
            ffi::lua_error(state);
        }
    }
}

/// A Lua error as one message: the error text without mlua's traceback.
pub fn error_text(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        mlua::Error::RuntimeError(message) | mlua::Error::SyntaxError { message, .. } => message
            .split("\nstack traceback:")
            .next()
            .unwrap_or(message)
            .trim_end()
            .to_string(),
        mlua::Error::MemoryError(_) => "Extension exceeded its memory limit".to_string(),
        // zi reads the value as JSON: a function, userdata or a table that contains itself.
        mlua::Error::DeserializeError(problem) => {
            format!("the value cannot be converted to JSON: {problem}")
        }
        other => other.to_string(),
    }
}

fn handler(lua: &Lua, table: &str, name: &str) -> mlua::Result<Function> {
    let handlers: Table = lua.named_registry_value(table)?;
    handlers.get(name)
}

fn run_command(
    lua: &Lua,
    shared: &Arc<Shared>,
    name: &str,
    arguments: String,
) -> Result<Option<String>, ExtensionError> {
    let execute = handler(lua, api::COMMANDS, name)
        .map_err(|_| ExtensionError::UnknownCommand(name.to_string()))?;
    let ctx = api::context(lua, shared)?;
    let value: LuaValue = execute.call((arguments, ctx))?;
    match value {
        LuaValue::Nil => Ok(None),
        LuaValue::String(text) => Ok(Some(text.to_string_lossy())),
        LuaValue::Integer(n) => Ok(Some(n.to_string())),
        LuaValue::Number(n) => Ok(Some(n.to_string())),
        other => Err(ExtensionError::CommandValue {
            name: name.to_string(),
            kind: other.type_name(),
        }),
    }
}

fn run_tool(
    lua: &Lua,
    shared: &Arc<Shared>,
    name: &str,
    params: &Value,
    progress: ProgressSender,
) -> Result<ToolResultValue, ExtensionError> {
    let execute = handler(lua, api::TOOLS, name)?;
    let ctx = api::context(lua, shared)?;
    api::add_progress(lua, &ctx, progress)?;
    let params = lua.to_value(params)?;
    let value: LuaValue = execute.call((params, ctx))?;
    match value {
        LuaValue::Nil => Ok(ToolResultValue::Text(String::new())),
        LuaValue::String(text) => Ok(ToolResultValue::Text(text.to_string_lossy())),
        // No script line runs any more: the place is where the execute function starts.
        other => lua
            .from_value::<Value>(other)
            .map(ToolResultValue::Json)
            .map_err(|error| {
                let info = execute.info();
                let place = match (info.short_src, info.line_defined) {
                    (Some(source), Some(line)) => format!("{source}:{line}: "),
                    _ => String::new(),
                };
                ExtensionError::NotJson {
                    place,
                    name: name.to_string(),
                    error,
                }
            }),
    }
}

fn run_event(
    lua: &Lua,
    shared: &Arc<Shared>,
    event: &LifecycleEvent,
) -> Result<(), ExtensionError> {
    let handlers: Table = lua.named_registry_value(api::HANDLERS)?;
    let Ok(list) = handlers.get::<Table>(event.name()) else {
        return Ok(());
    };
    let payload = lua.create_table()?;
    let _ = payload.set("type", event.name());
    if let LifecycleEvent::SessionStart { reason } | LifecycleEvent::SessionShutdown { reason } =
        event
    {
        let _ = payload.set("reason", reason.as_str());
    }
    let ctx = api::context(lua, shared)?;
    for function in list.sequence_values::<Function>() {
        function?.call::<()>((payload.clone(), ctx.clone()))?;
    }
    Ok(())
}

impl Worker {
    fn send(&self, job: Job) -> Result<(), ExtensionError> {
        if self.shared.unresponsive.load(Ordering::SeqCst) {
            return Err(ExtensionError::NotResponding(self.shared.id.clone()));
        }
        lock(&self.jobs).send(job).map_err(|_| self.gone())
    }

    fn gone(&self) -> ExtensionError {
        ExtensionError::Gone(self.shared.id.clone())
    }

    /// Waits for a job's reply, cancelling it when `cancel` fires or its budget runs out, and
    /// giving up (marking the extension unresponsive) one grace period later.
    async fn wait<T>(
        &self,
        reply: oneshot::Receiver<Result<T, ExtensionError>>,
        control: Arc<Control>,
        budget: Duration,
        cancel: CancellationToken,
    ) -> Result<T, ExtensionError> {
        tokio::pin!(reply);
        let stop_reason = tokio::select! {
            result = &mut reply => return result.unwrap_or_else(|_| Err(self.gone())),
            () = cancel.cancelled() => {
                control.cancel();
                StopReason::Cancelled
            }
            () = tokio::time::sleep(budget) => StopReason::TimeLimit(control.what),
        };
        match tokio::time::timeout(CANCEL_GRACE, &mut reply).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.gone()),
            Err(_) => {
                self.shared.unresponsive.store(true, Ordering::SeqCst);
                tracing::warn!(
                    "extension {} did not stop within the grace period and is disabled",
                    self.shared.id
                );
                Err(stop_reason.into())
            }
        }
    }

    pub async fn command(
        self: Arc<Self>,
        name: String,
        arguments: String,
        cancel: CancellationToken,
    ) -> Result<Option<String>, ExtensionError> {
        let control = Control::new(COMMAND_DEADLINE, "Extension command");
        let (reply, receiver) = oneshot::channel();
        self.send(Job::Command {
            name,
            arguments,
            control: control.clone(),
            reply,
        })?;
        self.wait(receiver, control, COMMAND_DEADLINE, cancel).await
    }

    pub async fn tool(
        self: Arc<Self>,
        name: String,
        params: Value,
        timeout: Duration,
        cancel: CancellationToken,
        progress: ProgressSender,
    ) -> Result<ToolResultValue, ExtensionError> {
        let control = Control::new(timeout, "Extension tool");
        let (reply, receiver) = oneshot::channel();
        self.send(Job::Tool {
            name,
            params,
            progress,
            control: control.clone(),
            reply,
        })?;
        self.wait(receiver, control, timeout, cancel).await
    }

    /// Queues a lifecycle event; dropped when the extension already has 32 waiting.
    pub fn notify(&self, event: LifecycleEvent) {
        if self.shared.pending_events.fetch_add(1, Ordering::SeqCst) >= EVENT_QUEUE {
            self.shared.pending_events.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if self.send(Job::Event(event)).is_err() {
            self.shared.pending_events.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Asks the thread to finish after the jobs already queued.
    pub async fn stop(&self, budget: Duration) {
        let (reply, receiver) = oneshot::channel();
        if self.send(Job::Stop(reply)).is_ok() {
            let _ = tokio::time::timeout(budget, receiver).await;
        }
    }

    /// Stops a thread from synchronous code (extensions refused after loading).
    pub fn discard(&self) {
        let (reply, _receiver) = oneshot::channel();
        let _ = self.send(Job::Stop(reply));
    }
}
