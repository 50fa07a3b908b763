//! The operation × activity grid of busy rejections (docs/rpc.md#admission-while-busy): which
//! operation was refused, what the session was doing, and the exact text the table names.

use std::fmt;

/// An operation that the session refuses while it is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A prompt that would start a run (`session.prompt` `direct`, or `continue` while idle).
    Prompt,
    /// Input for the queues: a `steer` or `follow_up` prompt, or an extension's steered or
    /// follow-up custom message.
    QueueInput,
    /// `model.select`.
    SelectModel,
    /// `thinking.select`.
    SelectThinking,
    /// `command.invoke`: an extension command.
    InvokeCommand,
    /// An extension's custom message that is appended or triggers a turn.
    CustomMessage,
    /// `session.compact`: a manual compaction.
    Compact,
}

impl Operation {
    /// Every operation, in the row order of docs/rpc.md#admission-while-busy.
    pub const ALL: [Operation; 7] = [
        Operation::Prompt,
        Operation::QueueInput,
        Operation::SelectModel,
        Operation::SelectThinking,
        Operation::InvokeCommand,
        Operation::Compact,
        Operation::CustomMessage,
    ];

    /// What the rejection says could not be done ("Cannot <action> while …").
    fn action(self) -> &'static str {
        match self {
            Operation::Prompt => "prompt",
            Operation::QueueInput => "queue input",
            Operation::SelectModel => "change model",
            Operation::SelectThinking => "change thinking level",
            Operation::InvokeCommand => "run an extension command",
            Operation::CustomMessage => "append or trigger a custom message",
            Operation::Compact => "compact",
        }
    }
}

/// What the session is doing that refuses an [`Operation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    /// A run streams (activity `running`).
    Running,
    /// A run or a manual compaction is being interrupted (activity `aborting`).
    Aborting,
    /// An extension command owns the session (activity `extension_command`).
    ExtensionCommand,
    /// A manual compaction owns the session (activity `compacting`).
    Compacting,
    /// The session is idle but input waits in the queues; only the operations that need empty
    /// queues (`command.invoke`, `session.compact`) are refused for it.
    QueuedInput,
}

impl Activity {
    /// Every activity, in the column order of docs/rpc.md#admission-while-busy (queued input,
    /// which the text under the table names, last).
    pub const ALL: [Activity; 5] = [
        Activity::Running,
        Activity::Aborting,
        Activity::ExtensionCommand,
        Activity::Compacting,
        Activity::QueuedInput,
    ];

    /// The condition the rejection names ("… while <condition>").
    fn condition(self) -> &'static str {
        match self {
            Activity::Running => "the agent is running",
            Activity::Aborting => "the agent is aborting",
            Activity::ExtensionCommand => "an extension command is active",
            Activity::Compacting => "context compaction is active",
            Activity::QueuedInput => "queued input is pending",
        }
    }
}

/// The text of an operation refused during an activity (`SessionError::Busy`'s `Display`).
pub(super) struct BusyText<'a>(pub(super) &'a Operation, pub(super) &'a Activity);

impl fmt::Display for BusyText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_busy(f, *self.0, *self.1)
    }
}

/// The text of `operation` refused during `activity`: "Cannot <action> while <condition>",
/// except for the cells of the table that say something else (their texts are Zi RPC v1's).
fn write_busy(f: &mut fmt::Formatter<'_>, operation: Operation, activity: Activity) -> fmt::Result {
    match (operation, activity) {
        // A direct prompt during a run needs a queue delivery instead.
        (Operation::Prompt, Activity::Running) => {
            f.write_str("streamingBehavior is required while the agent is running")
        }
        // An extension command names the run even while it is being aborted.
        (Operation::InvokeCommand, Activity::Aborting) => {
            write_busy(f, operation, Activity::Running)
        }
        (Operation::InvokeCommand, Activity::ExtensionCommand) => {
            f.write_str("Cannot run an extension command while another extension command is active")
        }
        // A custom message during an abort would be queued input.
        (Operation::CustomMessage, Activity::Aborting) => {
            write_busy(f, Operation::QueueInput, activity)
        }
        (Operation::CustomMessage, Activity::ExtensionCommand) => {
            f.write_str("Cannot trigger a turn while an extension command is active")
        }
        _ => write!(
            f,
            "Cannot {} while {}",
            operation.action(),
            activity.condition()
        ),
    }
}
