//! Subagent profiles: the catalog a parent session delegates from (docs/delegation.md#profiles).
//!
//! This module owns the profile type and the composed catalog. Discovery of Markdown profiles
//! (`<cwd>/.zi/subagents/*.md` when trusted, then `<agentDir>/subagents/*.md`, see
//! [`markdown`]) and extension registrations (validated by [`validate::admit`]) fill it through
//! the [`SubagentProfileRegistry`]; the delegation supervisor (crate `zi-delegation`) only reads
//! it.

mod diagnostics;
mod front_matter;
mod markdown;
mod registry;
#[cfg(test)]
mod tests;
pub mod validate;

use std::path::{Path, PathBuf};

pub use diagnostics::ProfileDiagnostic;
pub use registry::{
    DiagnosticSink, MAX_EXTENSION_PROFILES, MarkdownLoader, SubagentProfileRegistry,
};
pub use validate::{ProfileDeclaration, ProfileField, ProfileProblem};

use zi_protocol::ThinkingLevel;

/// Where a profile came from; shown in diagnostics and in the unavailable-model error
/// (`Subagent profile <name> from <source> requests unavailable model: <model>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    /// `<cwd>/.zi/subagents/<name>.md` of a trusted project.
    Project(PathBuf),
    /// `<agentDir>/subagents/<name>.md`.
    Global(PathBuf),
    /// `zi.register_subagent_profile{...}` in the extension at this entry path.
    Extension(PathBuf),
}

impl ProfileSource {
    /// The file the profile was read from (the extension's entry path for registrations).
    pub fn path(&self) -> &Path {
        match self {
            ProfileSource::Project(path)
            | ProfileSource::Global(path)
            | ProfileSource::Extension(path) => path,
        }
    }
}

/// One validated profile (docs/delegation.md#profile-files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentProfile {
    /// `^[a-z][a-z0-9_-]*$`, at most 64 bytes; the file name without `.md`.
    pub name: String,
    /// What the model reads to pick a profile for a subagent.
    pub description: String,
    /// The Markdown body (trimmed), prepended to the first task of a child.
    pub instructions: String,
    /// `provider/model-id`, resolved against the registry at spawn time.
    pub model: Option<String>,
    /// The child's thinking level; `None` keeps the child's default.
    pub thinking: Option<ThinkingLevel>,
    /// Where it was defined.
    pub source: ProfileSource,
}

/// The composed catalog: Markdown profiles (project, then global) before extension
/// registrations; the first profile under a name wins. Sorted by nothing but load order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubagentCatalog {
    profiles: Vec<SubagentProfile>,
}

impl SubagentCatalog {
    /// A catalog of already-validated, already-deduplicated profiles in precedence order.
    pub fn from_profiles(profiles: Vec<SubagentProfile>) -> Self {
        SubagentCatalog { profiles }
    }

    /// Whether no profile is defined: the delegation tools then offer none.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Every profile, in precedence order.
    pub fn profiles(&self) -> &[SubagentProfile] {
        &self.profiles
    }

    /// The profile named `name`.
    pub fn get(&self, name: &str) -> Option<&SubagentProfile> {
        self.profiles.iter().find(|profile| profile.name == name)
    }
}

/// The session's Markdown profiles (trusted project, then global) and the diagnostics of
/// loading them. With neither directory present this costs one or two `stat`s.
pub fn discover_markdown(
    cwd: &Path,
    agent_dir: &Path,
    trusted: bool,
) -> (Vec<SubagentProfile>, Vec<ProfileDiagnostic>) {
    let roots = markdown::profile_roots(cwd, agent_dir, trusted);
    let mut diagnostics = diagnostics::Diagnostics::default();
    let profiles = markdown::load_markdown_profiles(
        &roots,
        &mut markdown::ResourceBudget::default(),
        &mut diagnostics,
    );
    (profiles, diagnostics.into_vec())
}
