//! Subagent profiles for this invocation (docs/delegation.md#where-zi-looks-and-precedence): the
//! Markdown profiles of the trusted project and the agent directory, loaded once at start-up,
//! composed with what the extensions register. Every diagnostic is a stderr `Warning:` line naming
//! the file.

use std::path::Path;
use std::sync::Arc;

use zi_config::subagent_profiles::{ProfileDiagnostic, SubagentProfileRegistry, discover_markdown};

use crate::runtime::warn;

/// Loads the Markdown profiles and returns the registry extensions register into.
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
    let (markdown, diagnostics) = discover_markdown(cwd, agent_dir, trusted);
    for diagnostic in &diagnostics {
        warn(&diagnostic.to_string());
    }
    Arc::new(SubagentProfileRegistry::new(
        markdown,
        Arc::new(|diagnostic: &ProfileDiagnostic| warn(&diagnostic.to_string())),
    ))
}
