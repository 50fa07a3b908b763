//! Lua extensions for zi (docs/extensions.md).
//!
//! [`load`] runs every extension script on its own OS thread (a Lua 5.4 state embedded through
//! mlua), collects what each registered, and refuses a whole extension whose registrations
//! collide with an earlier one. The resulting [`LuaHost`] implements
//! [`zi_agent::extension::ExtensionHost`] (commands and lifecycle events) and hands its tools to
//! the session's tool set as ordinary [`zi_agent::Tool`]s.

mod api;
mod catalog;
pub mod discovery;
mod error;
mod exec;
mod profiles;
mod progress;
mod reload;
mod worker;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use zi_agent::extension::{CommandOutcome, ExtensionHost, LifecycleEvent};
use zi_agent::{AgentSession, SessionHost, Tool, ToolCallContext, ToolOutput, TypedTool};
use zi_config::subagent_profiles::{SubagentProfile, SubagentProfileRegistry};
use zi_os::sync::lock;
use zi_protocol::results::CommandDescriptor;

pub use discovery::ExtensionSource;
pub use error::{DiscoveryError, ExecError, ExtensionError, RegistrationError, StopReason};
pub use worker::{CANCEL_GRACE, COMMAND_DEADLINE, MEMORY_LIMIT_BYTES};
use worker::{ToolResultValue, Worker};

/// How long `load` waits for one script beyond its own deadline.
const LOAD_WAIT: Duration = Duration::from_secs(6);
/// Budget of `session_shutdown` handlers at disposal.
const SHUTDOWN_BUDGET: Duration = Duration::from_secs(1);

/// What every extension's `ctx` reports.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `rpc`, `text` or `json`.
    pub mode: String,
    /// The session's working directory (`ctx.cwd`, and where `ctx.exec` runs).
    pub cwd: PathBuf,
    /// Tool names already taken (built-in tools).
    pub reserved_tools: Vec<String>,
    /// The session's `bash` sandbox: `ctx.exec` commands run inside it
    /// (docs/approvals.md#one-shot-modes-and-subagents); the default is mode `full` (no sandbox).
    pub sandbox: zi_sandbox::SandboxHandle,
    /// Where each generation's `zi.register_subagent_profile` calls go (none: not collected).
    pub subagent_profiles: Option<Arc<SubagentProfileRegistry>>,
}

struct LoadedCommand {
    descriptor: CommandDescriptor,
    worker: Arc<Worker>,
}

/// One generation of the extensions: what one load of every source admitted. A reload builds
/// the next one and swaps it in whole.
#[derive(Default)]
pub(crate) struct Generation {
    workers: Vec<Arc<Worker>>,
    commands: Vec<LoadedCommand>,
    tools: Vec<Arc<dyn Tool>>,
    /// Subagent profiles the admitted extensions registered, in load order.
    profiles: Vec<SubagentProfile>,
}

impl Generation {
    /// Hands this generation's profiles to the registry, which recomposes the catalog.
    fn publish_profiles(&self, options: &LoadOptions) {
        if let Some(registry) = &options.subagent_profiles {
            registry.set_extension_profiles(self.profiles.clone());
        }
    }

    fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }

    /// Stops every thread of a generation that was never started (a refused reload).
    fn discard(&self) {
        for worker in &self.workers {
            worker.discard();
        }
    }

    /// Delivers `session_shutdown` and stops the threads, within [`SHUTDOWN_BUDGET`].
    fn shut_down(&self, reason: &str) -> BoxFuture<'static, ()> {
        for worker in &self.workers {
            worker.notify(LifecycleEvent::SessionShutdown {
                reason: reason.to_string(),
            });
        }
        let workers = self.workers.clone();
        Box::pin(async move {
            let stops = workers.iter().map(|w| w.stop(SHUTDOWN_BUDGET));
            let _ = tokio::time::timeout(
                SHUTDOWN_BUDGET + Duration::from_millis(100),
                futures::future::join_all(stops),
            )
            .await;
        })
    }
}

/// The loaded extensions: the sources they came from (read again by a reload) and the current
/// generation.
pub struct LuaHost {
    inner: Arc<HostInner>,
}

pub(crate) struct HostInner {
    sources: Vec<ExtensionSource>,
    options: LoadOptions,
    generation: Mutex<Generation>,
    session: OnceLock<SessionHost>,
}

impl HostInner {
    fn generation(&self) -> std::sync::MutexGuard<'_, Generation> {
        lock(&self.generation)
    }
}

impl Default for LuaHost {
    fn default() -> Self {
        LuaHost::new(Vec::new(), LoadOptions::default(), Generation::default())
    }
}

/// Loads `sources` in order. Each failure is returned as a diagnostic naming the extension's
/// path (and, for script errors, the line); the other extensions stay loaded.
pub fn load(sources: &[ExtensionSource], options: &LoadOptions) -> (LuaHost, Vec<String>) {
    let (generation, warnings) = load_generation(sources, options);
    generation.publish_profiles(options);
    (
        LuaHost::new(sources.to_vec(), options.clone(), generation),
        warnings,
    )
}

fn load_generation(
    sources: &[ExtensionSource],
    options: &LoadOptions,
) -> (Generation, Vec<String>) {
    let env = worker::HostEnv {
        mode: options.mode.clone(),
        cwd: options.cwd.clone(),
        sandbox: options.sandbox.clone(),
    };
    let mut warnings = Vec::new();
    // Start every script at once; judge them in discovery order.
    let started: Vec<_> = sources
        .iter()
        .map(|source| (source, worker::spawn(source.clone(), env.clone())))
        .collect();
    let mut host = Generation::default();
    let mut tool_names = options.reserved_tools.clone();
    let mut catalog_bytes = 0usize;
    for (source, spawned) in started {
        let path = source.entry.display();
        let (worker, loaded) = match spawned {
            Ok(spawned) => spawned,
            Err(error) => {
                warnings.push(format!("Extension {path} failed to load: {error}"));
                continue;
            }
        };
        let refuse = |warnings: &mut Vec<String>, reason: String| {
            worker.discard();
            warnings.push(format!("Extension {path} failed to load: {reason}"));
        };
        match loaded.recv_timeout(LOAD_WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                refuse(&mut warnings, error.to_string());
                continue;
            }
            Err(_) => {
                refuse(&mut warnings, "loading did not finish in time".to_string());
                continue;
            }
        }
        if host.workers.iter().any(|w| w.shared.id == source.id) {
            refuse(
                &mut warnings,
                format!("an extension with id {} is already loaded", source.id),
            );
            continue;
        }
        let registrations = std::mem::take(&mut *lock(&worker.shared.registrations));
        let descriptors: Vec<CommandDescriptor> = registrations
            .commands
            .iter()
            .map(|c| CommandDescriptor {
                name: c.name.clone(),
                description: c.description.clone(),
                argument_hint: c.argument_hint.clone(),
                extension_id: source.id.clone(),
            })
            .collect();
        let added_bytes: usize = descriptors
            .iter()
            .map(|d| serde_json::to_vec(d).map_or(0, |v| v.len() + 1))
            .sum();
        let problem = registration_problem(
            &host,
            &descriptors,
            &registrations.tools,
            &tool_names,
            catalog_bytes + added_bytes,
        );
        if let Some(problem) = problem {
            refuse(&mut warnings, problem);
            continue;
        }
        catalog_bytes += added_bytes;
        host.commands
            .extend(descriptors.into_iter().map(|descriptor| LoadedCommand {
                descriptor,
                worker: worker.clone(),
            }));
        host.profiles.extend(registrations.profiles);
        for spec in registrations.tools {
            tool_names.push(spec.name.clone());
            host.tools.push(Arc::new(LuaTool {
                spec,
                worker: worker.clone(),
            }));
        }
        host.workers.push(worker);
    }
    (host, warnings)
}

/// Why an extension's registrations cannot join the generation loaded so far: a command or
/// tool name that is taken, or a catalog over its bounds with `catalog_bytes` in it.
fn registration_problem(
    host: &Generation,
    descriptors: &[CommandDescriptor],
    tools: &[worker::ToolSpec],
    tool_names: &[String],
    catalog_bytes: usize,
) -> Option<String> {
    descriptors
        .iter()
        .find(|d| host.commands.iter().any(|c| c.descriptor.name == d.name))
        .map(|d| {
            format!(
                "command {} is already registered by another extension",
                d.name
            )
        })
        .or_else(|| {
            tools
                .iter()
                .find(|t| tool_names.contains(&t.name))
                .map(|t| format!("tool {} is already registered", t.name))
        })
        .or_else(|| {
            if host.commands.len() + descriptors.len() > catalog::MAX_COMMANDS {
                Some(format!(
                    "the command catalog would exceed {} commands",
                    catalog::MAX_COMMANDS
                ))
            } else if catalog_bytes > catalog::MAX_CATALOG_BYTES {
                Some("the command catalog would exceed 512 KiB".to_string())
            } else {
                None
            }
        })
}

impl LuaHost {
    fn new(sources: Vec<ExtensionSource>, options: LoadOptions, generation: Generation) -> Self {
        LuaHost {
            inner: Arc::new(HostInner {
                sources,
                options,
                generation: Mutex::new(generation),
                session: OnceLock::new(),
            }),
        }
    }

    /// The tools the extensions registered, for the session's tool set.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.inner.generation().tools.clone()
    }

    /// Ids of the loaded extensions, in load order.
    pub fn extension_ids(&self) -> Vec<String> {
        self.inner
            .generation()
            .workers
            .iter()
            .map(|w| w.shared.id.clone())
            .collect()
    }

    /// Gives the extensions their session, attaches the host and delivers `session_start`.
    /// Without any extension source nothing is attached, so `command.list` stays empty (no
    /// `reload` either).
    pub fn start(self, session: &AgentSession, reason: &str) -> Arc<LuaHost> {
        if self.inner.sources.is_empty() {
            return Arc::new(self);
        }
        let _ = self.inner.session.set(session.host());
        for worker in &self.inner.generation().workers {
            let _ = worker.shared.session.set(session.host());
        }
        let host = Arc::new(self);
        session.set_extension_host(host.clone());
        host.notify(LifecycleEvent::SessionStart {
            reason: reason.to_string(),
        });
        host
    }
}

impl ExtensionHost for LuaHost {
    fn commands(&self) -> Vec<CommandDescriptor> {
        let mut commands: Vec<CommandDescriptor> = self
            .inner
            .generation()
            .commands
            .iter()
            .map(|c| c.descriptor.clone())
            .collect();
        commands.push(reload::descriptor());
        commands
    }

    fn invoke(
        &self,
        name: &str,
        arguments: String,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, CommandOutcome>> {
        if name == reload::COMMAND {
            return Some(Box::pin(reload::reload(self.inner.clone(), cancel)));
        }
        let generation = self.inner.generation();
        let command = generation
            .commands
            .iter()
            .find(|c| c.descriptor.name == name)?;
        let worker = command.worker.clone();
        let outcome = worker.command(name.to_string(), arguments, cancel);
        // The session's command outcome carries text (zi-agent's CommandOutcome).
        Some(Box::pin(async move {
            outcome.await.map_err(|error| error.to_string())
        }))
    }

    fn notify(&self, event: LifecycleEvent) {
        for worker in &self.inner.generation().workers {
            worker.notify(event.clone());
        }
    }

    fn shutdown(&self) -> BoxFuture<'static, ()> {
        self.shutdown_for("quit")
    }

    fn shutdown_for(&self, reason: &str) -> BoxFuture<'static, ()> {
        self.inner.generation().shut_down(reason)
    }
}

/// A tool defined in Lua.
struct LuaTool {
    spec: worker::ToolSpec,
    worker: Arc<Worker>,
}

impl TypedTool for LuaTool {
    type Args = Value;

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn parameters(&self) -> &Value {
        &self.spec.parameters
    }

    fn active_by_default(&self) -> bool {
        self.spec.active
    }

    fn execute(&self, arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let worker = self.worker.clone();
        let name = self.spec.name.clone();
        let timeout = self.spec.timeout;
        let output_schema = self.spec.output.clone();
        Box::pin(async move {
            let (progress, forwarder) = progress::channel(call.progress);
            let result = forwarder
                .run(worker.tool(name.clone(), arguments, timeout, call.cancel, progress))
                .await;
            // With an output schema the result is a JSON value (a string too), validated.
            let result = match (result, output_schema) {
                (Ok(value), Some(schema)) => {
                    let value = match value {
                        ToolResultValue::Text(text) => Value::String(text),
                        ToolResultValue::Json(value) => value,
                    };
                    check_output(&name, &schema, &value).map(|()| ToolResultValue::Json(value))
                }
                (result, _) => result,
            };
            match result {
                Ok(ToolResultValue::Text(text)) => ToolOutput::text(text),
                Ok(ToolResultValue::Json(value)) => {
                    let text = serde_json::to_string(&value).unwrap_or_default();
                    ToolOutput {
                        details: Some(value),
                        ..ToolOutput::text(text)
                    }
                }
                Err(error) => ToolOutput::error(error.to_string()),
            }
        })
    }
}

/// Checks a tool's result against its `output_schema`; the error lists every violation.
fn check_output(
    name: &str,
    schema: &jsonschema::Validator,
    value: &Value,
) -> Result<(), ExtensionError> {
    let problems = zi_agent::tool::schema_problems(schema, value);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ExtensionError::OutputSchema {
            name: name.to_string(),
            problems,
        })
    }
}
