//! The model-facing texts of the eight tools (docs/delegation.md#tools); their parameter schemas
//! come from their argument types (`args`).

use zi_config::subagent_profiles::SubagentCatalog;

use crate::limits::{PROFILE_ENUM_DESCRIPTION_MAX_BYTES, PROFILE_PURPOSE_MAX_BYTES, clip};

const PROFILE_HEADING: &str =
    "Admitted profile (reusable configuration, not a runtime name). Choose by purpose:\n";

/// The generated `profile.description` of `spawn_subagent` (docs/delegation.md#tools).
pub fn profile_enum_description(catalog: &SubagentCatalog) -> String {
    let profiles = catalog.profiles();
    let count = profiles.len().max(1);
    let fixed: usize =
        PROFILE_HEADING.len() + profiles.iter().map(|p| p.name.len() + 3).sum::<usize>();
    let budget = PROFILE_PURPOSE_MAX_BYTES
        .min(PROFILE_ENUM_DESCRIPTION_MAX_BYTES.saturating_sub(fixed) / count);
    let lines: Vec<String> = profiles
        .iter()
        .map(|profile| {
            let purpose = profile
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            if budget == 0 {
                profile.name.clone()
            } else if purpose.len() <= budget {
                format!("{}: {purpose}", profile.name)
            } else if budget < 3 {
                format!("{}: {}", profile.name, clip(&purpose, budget))
            } else {
                format!("{}: {}…", profile.name, clip(&purpose, budget - 3))
            }
        })
        .collect();
    format!("{PROFILE_HEADING}{}", lines.join("\n"))
}

pub const LIST_PROFILES: &str = "List the full subagent profile catalog (names and descriptions). Use it when the bounded summaries in spawn_subagent's profile parameter are not enough to choose.";
pub const SPAWN: &str = "Start one background subagent from a profile under a new, unique runtime name. Returns as soon as the subagent has accepted its task, not when it finishes. Its result reaches your context before your next model request on its own; call wait_subagents only when you need to synchronise. At most 4 subagents can be live at once (idle ones count).";
pub const SEND: &str = "Give a subagent extra context for its current or next task without assigning work. Delivered promptly while it works; it never wakes an idle subagent. Use assign_subagent_task to start work.";
pub const ASSIGN: &str = "Assign a task to a subagent. An idle subagent starts a new work cycle; a working one gets the task joined to its current cycle. To get a separate cycle, wait until it is idle first.";
pub const WAIT: &str = "Receive the next completion from the captured subagents when you need to synchronise. Returns as soon as any captured work cycle completes, bundling the others ready at that moment; the rest keep running. Per name an older undelivered result comes before current work. Without names, captures up to 16 working or result-ready subagents. Results reach you without this tool too.";
pub const LIST: &str = "List your direct subagents: task, lifecycle, work cycle, elapsed time and whether an undelivered result is ready (never their conversations). Assign work to idle subagents or close them to free a slot.";
pub const INTERRUPT: &str = "Interrupt a subagent's current work, wait for bounded terminal evidence of that exact work cycle, and keep the subagent reusable.";
pub const CLOSE: &str = "Close a subagent's process, return its bounded terminal evidence and free its slot (idle subagents occupy one of the 4 slots). The name stays reserved.";
