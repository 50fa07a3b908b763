//! The eight standard delegation tools (docs/delegation.md#tools): parameter schemas, texts,
//! `details`, and the mapping of supervisor errors to error results.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use zi_agent::tool::{RegisteredTool, Tool, ToolCallContext, ToolOutput, ToolSource, TypedTool};
use zi_config::subagent_profiles::SubagentCatalog;
use zi_os::sync::lock;

use crate::error::SubagentError;
use crate::limits::{CONTROL_TEXT_MAX_BYTES, PROFILE_TEXT_MAX_BYTES, WAIT_TEXT_MAX_BYTES};
use crate::supervisor::control::{Assigned, Interrupted};
use crate::supervisor::{Snapshot, Supervisor};

mod args;
mod clipping;
mod schemas;

use args::{AssignArgs, NameArgs, NoArgs, SendArgs, SpawnArgs, WaitArgs};

use clipping::{clipped_agents, clipped_profiles, clipped_text, profiles_text};

pub const TOOL_NAMES: [&str; 8] = [
    "list_subagent_profiles",
    "spawn_subagent",
    "send_subagent_message",
    "assign_subagent_task",
    "wait_subagents",
    "list_subagents",
    "interrupt_subagent",
    "close_subagent",
];

/// One delegation tool: its texts and schema, and the operation its parsed arguments run.
struct DelegationTool<A> {
    name: &'static str,
    description: &'static str,
    parameters: Value,
    supervisor: Arc<Supervisor>,
    run: Run<A>,
}

/// A tool's operation on the supervisor; its `Err` is the error result's text.
type Run<A> = fn(
    Arc<Supervisor>,
    A,
    ToolCallContext,
) -> BoxFuture<'static, Result<ToolOutput, SubagentError>>;

/// The eight tools over one supervisor and catalog, in the reference's order.
fn tools(supervisor: &Arc<Supervisor>, catalog: &SubagentCatalog) -> Vec<Arc<dyn Tool>> {
    let [
        list_profiles_name,
        spawn_name,
        send_name,
        assign_name,
        wait_name,
        list_name,
        interrupt_name,
        close_name,
    ] = TOOL_NAMES;
    let tool = |name, description, parameters| (name, description, parameters, supervisor.clone());
    vec![
        typed(
            tool(
                list_profiles_name,
                schemas::LIST_PROFILES,
                args::schema::<NoArgs>(),
            ),
            |s, _: NoArgs, _| Box::pin(async move { list_profiles(&s) }),
        ),
        typed(
            tool(spawn_name, schemas::SPAWN, args::spawn_schema(catalog)),
            |s, a: SpawnArgs, c| Box::pin(async move { spawn(&s, a, &c).await }),
        ),
        typed(
            tool(send_name, schemas::SEND, args::schema::<SendArgs>()),
            |s, a: SendArgs, _| Box::pin(async move { send(&s, a).await }),
        ),
        typed(
            tool(assign_name, schemas::ASSIGN, args::schema::<AssignArgs>()),
            |s, a: AssignArgs, _| Box::pin(async move { assign(&s, a).await }),
        ),
        typed(
            tool(wait_name, schemas::WAIT, args::schema::<WaitArgs>()),
            |s, a: WaitArgs, c| Box::pin(async move { wait(&s, a, &c).await }),
        ),
        typed(
            tool(list_name, schemas::LIST, args::schema::<NoArgs>()),
            |s, _: NoArgs, _| Box::pin(async move { list(&s) }),
        ),
        typed(
            tool(
                interrupt_name,
                schemas::INTERRUPT,
                args::schema::<NameArgs>(),
            ),
            |s, a: NameArgs, c| Box::pin(async move { interrupt(&s, a, &c).await }),
        ),
        typed(
            tool(close_name, schemas::CLOSE, args::schema::<NameArgs>()),
            |s, a: NameArgs, c| Box::pin(async move { close(&s, a, &c).await }),
        ),
    ]
}

/// A tool of `(name, description, parameters, supervisor)` whose calls run `run`.
fn typed<A: DeserializeOwned + Send + Sync + 'static>(
    (name, description, parameters, supervisor): (
        &'static str,
        &'static str,
        Value,
        Arc<Supervisor>,
    ),
    run: Run<A>,
) -> Arc<dyn Tool> {
    Arc::new(DelegationTool {
        name,
        description,
        parameters,
        supervisor,
        run,
    })
}

fn details(operation: &str, fields: Value) -> Value {
    let mut value = json!({"type": "subagent", "outcome": "success", "operation": operation});
    if let (Some(target), Value::Object(fields)) = (value.as_object_mut(), fields) {
        target.extend(fields);
    }
    value
}

fn output(text: String, details: Value) -> ToolOutput {
    let mut output = ToolOutput::text(text);
    output.details = Some(details);
    output
}

fn one_agent(snapshot: &Snapshot) -> Result<Value, SubagentError> {
    clipped_agents(std::slice::from_ref(snapshot)).map(|mut list| list.pop().unwrap_or(Value::Null))
}

/// `list_subagent_profiles` (docs/delegation.md#tools).
fn list_profiles(supervisor: &Supervisor) -> Result<ToolOutput, SubagentError> {
    let catalog = supervisor.catalog();
    let profiles: Vec<(String, String)> = catalog
        .profiles()
        .iter()
        .map(|p| (p.name.clone(), p.description.clone()))
        .collect();
    let (profiles, omitted) = clipped_profiles(&profiles, PROFILE_TEXT_MAX_BYTES)?;
    let listed: Vec<Value> = profiles
        .iter()
        .map(|(name, description)| json!({"name": name, "description": description}))
        .collect();
    Ok(output(
        profiles_text(&profiles, omitted),
        details(
            "profiles",
            json!({"profiles": listed, "omittedBytes": omitted}),
        ),
    ))
}

/// `spawn_subagent` (docs/delegation.md#tools).
async fn spawn(
    supervisor: &Arc<Supervisor>,
    args: SpawnArgs,
    call: &ToolCallContext,
) -> Result<ToolOutput, SubagentError> {
    let (profile, name) = (args.profile.as_str(), args.name.0.as_str());
    let snapshot = supervisor
        .spawn(profile, name, &args.prompt, &call.cancel)
        .await?;
    Ok(output(
        json!({"name": name, "profile": profile}).to_string(),
        details(
            "spawn",
            json!({"profile": profile, "agent": one_agent(&snapshot)?}),
        ),
    ))
}

/// `send_subagent_message` (docs/delegation.md#tools).
async fn send(supervisor: &Supervisor, args: SendArgs) -> Result<ToolOutput, SubagentError> {
    let name = args.name.0.as_str();
    let snapshot = supervisor.send(name, &args.text).await?;
    Ok(output(
        format!("Sent context to {name}."),
        details("send", json!({"agent": one_agent(&snapshot)?})),
    ))
}

/// `assign_subagent_task` (docs/delegation.md#tools).
async fn assign(
    supervisor: &Arc<Supervisor>,
    args: AssignArgs,
) -> Result<ToolOutput, SubagentError> {
    let name = args.name.0.as_str();
    let (assigned, snapshot) = supervisor.assign(name, &args.text).await?;
    let text = match assigned {
        Assigned::StartedCycle => format!("Started a new task cycle for {name}."),
        Assigned::Joined => format!("Assigned the task to {name}'s current cycle."),
    };
    Ok(output(
        text,
        details("continue", json!({"agent": one_agent(&snapshot)?})),
    ))
}

/// `wait_subagents` (docs/delegation.md#tools).
async fn wait(
    supervisor: &Supervisor,
    args: WaitArgs,
    call: &ToolCallContext,
) -> Result<ToolOutput, SubagentError> {
    let names: Option<Vec<String>> = args
        .names
        .map(|names| names.into_iter().map(|name| name.0).collect());
    let timeout = args.timeout_ms;
    let collected = supervisor
        .wait(names, timeout, &call.call_id, &call.cancel)
        .await?;
    let pending = collected.pending_names.clone();
    let timed_out = collected.timed_out;
    let text = clipped_text(
        &collected.snapshots,
        WAIT_TEXT_MAX_BYTES,
        |subagents, omitted| json!({"subagents": subagents, "pending_names": pending, "timed_out": timed_out, "omitted_bytes": omitted}),
    )?;
    Ok(output(
        text,
        details(
            "wait",
            json!({"agents": clipped_agents(&collected.snapshots)?, "pendingNames": collected.pending_names, "timedOut": timed_out}),
        ),
    ))
}

/// One `list_subagents` item (docs/delegation.md#tools): `result_ready` only for an undelivered
/// completion.
fn listed(snapshot: &Snapshot) -> Value {
    let mut item = json!({"name": snapshot.name, "status": snapshot.lifecycle});
    if let Some(cycle) = snapshot.work_cycle {
        item["work_cycle"] = json!(cycle);
    }
    if let Some(task) = &snapshot.task {
        item["task"] = json!(task);
    }
    if let Some(elapsed) = snapshot.elapsed_ms {
        item["elapsed_ms"] = json!(elapsed);
    }
    if snapshot.delivery == Some("durable")
        && let Some(completion) = &snapshot.completion
    {
        item["result_ready"] =
            json!({"work_cycle": completion.work_cycle, "status": completion.status.as_str()});
    }
    item
}

/// `list_subagents` (docs/delegation.md#tools).
fn list(supervisor: &Supervisor) -> Result<ToolOutput, SubagentError> {
    let snapshots = supervisor.snapshots();
    let (working, ready) = supervisor.working_and_ready();
    let items: Vec<Value> = snapshots.iter().map(listed).collect();
    Ok(output(
        json!({"subagents": items}).to_string(),
        details(
            "list",
            json!({"agents": clipped_agents(&snapshots)?, "workingNames": working, "readyNames": ready}),
        ),
    ))
}

/// `interrupt_subagent` (docs/delegation.md#tools).
async fn interrupt(
    supervisor: &Supervisor,
    args: NameArgs,
    call: &ToolCallContext,
) -> Result<ToolOutput, SubagentError> {
    let name = args.name.0.as_str();
    let (disposition, snapshot) = supervisor
        .interrupt(name, &call.call_id, &call.cancel)
        .await?;
    let result = match disposition {
        Interrupted::Interrupted => "interrupted",
        Interrupted::AlreadyIdle => "already_idle",
    };
    let all_completed = snapshot.completion.is_some();
    let text = clipped_text(
        std::slice::from_ref(&snapshot),
        CONTROL_TEXT_MAX_BYTES,
        |subagents, omitted| json!({"result": result, "subagents": subagents, "all_completed": all_completed, "omitted_bytes": omitted}),
    )?;
    Ok(output(
        text,
        details(
            "interrupt",
            json!({"agent": one_agent(&snapshot)?, "result": result}),
        ),
    ))
}

/// `close_subagent` (docs/delegation.md#tools).
async fn close(
    supervisor: &Supervisor,
    args: NameArgs,
    call: &ToolCallContext,
) -> Result<ToolOutput, SubagentError> {
    let name = args.name.0.as_str();
    let (previous, snapshot) = supervisor.close(name, &call.call_id).await?;
    let all_completed = snapshot.completion.is_some();
    let previous_status = previous.lifecycle;
    let text = clipped_text(
        std::slice::from_ref(&snapshot),
        CONTROL_TEXT_MAX_BYTES,
        |subagents, omitted| json!({"previous_status": previous_status, "subagents": subagents, "all_completed": all_completed, "omitted_bytes": omitted}),
    )?;
    let mut fields = json!({"agent": one_agent(&snapshot)?, "previousStatus": previous_status});
    if let Some(completion) = &previous.completion {
        fields["previousCompletionStatus"] = json!(completion.status.as_str());
    }
    Ok(output(text, details("close", fields)))
}

impl<A: DeserializeOwned + Send + Sync + 'static> TypedTool for DelegationTool<A> {
    type Args = A;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: A, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        let run = (self.run)(self.supervisor.clone(), args, call);
        Box::pin(async move {
            run.await
                .unwrap_or_else(|error| ToolOutput::error(error.to_string()))
        })
    }
}

/// The tools as a [`ToolSource`]: none while the catalog is empty, rebuilt (the `profile` enum
/// and its description) whenever the catalog changes (docs/delegation.md#tools).
pub struct DelegationTools {
    supervisor: Arc<Supervisor>,
    built: Mutex<Built>,
}

/// The tools last built, and the catalog they were built from.
type Built = (Option<Arc<SubagentCatalog>>, Arc<[Arc<RegisteredTool>]>);

impl DelegationTools {
    pub fn new(supervisor: Arc<Supervisor>) -> DelegationTools {
        DelegationTools {
            supervisor,
            built: Mutex::new((None, Arc::from(Vec::new()))),
        }
    }
}

impl ToolSource for DelegationTools {
    fn tools(&self) -> Arc<[Arc<RegisteredTool>]> {
        let catalog = self.supervisor.catalog();
        let mut built = lock(&self.built);
        if built.0.as_ref().is_some_and(|c| Arc::ptr_eq(c, &catalog)) {
            return built.1.clone();
        }
        let registered: Vec<Arc<RegisteredTool>> = if catalog.is_empty() {
            Vec::new()
        } else {
            tools(&self.supervisor, &catalog)
                .into_iter()
                .filter_map(|tool| RegisteredTool::new(tool).ok().map(Arc::new))
                .collect()
        };
        *built = (Some(catalog), Arc::from(registered));
        built.1.clone()
    }

    /// Disposal closes every child (docs/delegation.md#lifetime).
    fn shutdown(&self) -> BoxFuture<'static, ()> {
        let supervisor = self.supervisor.clone();
        Box::pin(async move { supervisor.shutdown().await })
    }
}
