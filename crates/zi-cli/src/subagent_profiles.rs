//! Subagent profiles for this invocation (docs/delegation.md#where-zi-looks-and-precedence): the
//! Markdown profiles of the trusted project and the agent directory, read once, composed with
//! what the extensions register. Every diagnostic is a stderr `Warning:` line naming the file.

use std::path::Path;
use std::sync::Arc;

use zi_config::subagent_profiles::{ProfileDiagnostic, SubagentProfileRegistry, discover_markdown};

use crate::runtime::warn;

/// The registry extensions register into; the Markdown profiles are read on its first use
/// ([`SubagentProfileRegistry::deferred`]): the `rpc` mode reads them right after `ready`
/// (docs/performance.md#start-up-and-idle-memory), every other mode before it returns.
///
/// A subagent child (`ZI_SUBAGENT_DEPTH=1`) has no delegation tools whatever its catalog
/// (docs/delegation.md#children), so it reads no profile directory and reports nothing about
/// profiles: its parent, reading the same directories, already did. Its extensions still register
/// into an empty, silent registry.
pub fn load(cwd: &Path, agent_dir: &Path, trusted: bool) -> Arc<SubagentProfileRegistry> {
    if crate::delegation::is_child() {
        return Arc::new(SubagentProfileRegistry::new(
            Vec::new(),
            Arc::new(|_: &ProfileDiagnostic| {}),
        ));
    }
    let (cwd, agent_dir) = (cwd.to_path_buf(), agent_dir.to_path_buf());
    Arc::new(SubagentProfileRegistry::deferred(
        Box::new(move || discover_markdown(&cwd, &agent_dir, trusted)),
        Arc::new(|diagnostic: &ProfileDiagnostic| warn(&diagnostic.to_string())),
    ))
}
