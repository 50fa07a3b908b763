//! The composed catalog (docs/delegation.md#where-zi-looks-and-precedence,
//! docs/delegation.md#bounds): Markdown profiles (read once) before the current extension
//! generation's registrations. An extension reload publishes a new catalog; readers (the delegation
//! supervisor and its tools) ask the registry on every look and see the new one.
//!
//! The Markdown profiles can be read on first use ([`SubagentProfileRegistry::deferred`]): the
//! first look at the catalog, a generation that registers profiles (its collisions need them) or
//! [`SubagentProfileRegistry::load`] reads them, whichever comes first (docs/performance.md:
//! nothing a session does not need runs before `ready`).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use zi_os::sync::lock;

use super::diagnostics::{Diagnostics, ProfileDiagnostic};
use super::{SubagentCatalog, SubagentProfile};

/// Registrations admitted from one extension generation (all extensions together).
pub const MAX_EXTENSION_PROFILES: usize = 64;

/// Where diagnostics go (zi-cli: stderr `Warning:` lines).
pub type DiagnosticSink = Arc<dyn Fn(&ProfileDiagnostic) + Send + Sync>;

/// Reads the Markdown profiles: the profiles and the diagnostics of reading them.
pub type MarkdownLoader =
    Box<dyn FnOnce() -> (Vec<SubagentProfile>, Vec<ProfileDiagnostic>) + Send>;

/// Owns the Markdown profiles and the composed catalog.
pub struct SubagentProfileRegistry {
    state: Mutex<State>,
    report: DiagnosticSink,
}

struct State {
    markdown: Markdown,
    /// The current generation's registrations, in load order.
    registered: Vec<SubagentProfile>,
    /// The same `Arc` until the catalog changes (readers cache what they built from it).
    catalog: Arc<SubagentCatalog>,
}

enum Markdown {
    Pending(MarkdownLoader),
    Loaded(Vec<SubagentProfile>),
}

impl fmt::Debug for SubagentProfileRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("SubagentProfileRegistry")
            .field("loaded", &matches!(state.markdown, Markdown::Loaded(_)))
            .field("catalog", &*state.catalog)
            .finish_non_exhaustive()
    }
}

impl SubagentProfileRegistry {
    /// A registry whose catalog holds `markdown` (already validated and deduplicated) until
    /// extensions register profiles.
    pub fn new(markdown: Vec<SubagentProfile>, report: DiagnosticSink) -> Self {
        let catalog = Arc::new(SubagentCatalog::from_profiles(markdown.clone()));
        SubagentProfileRegistry {
            state: Mutex::new(State {
                markdown: Markdown::Loaded(markdown),
                registered: Vec::new(),
                catalog,
            }),
            report,
        }
    }

    /// A registry that runs `loader` on first use (see the module documentation) and reports
    /// its diagnostics then.
    pub fn deferred(loader: MarkdownLoader, report: DiagnosticSink) -> Self {
        SubagentProfileRegistry {
            state: Mutex::new(State {
                markdown: Markdown::Pending(loader),
                registered: Vec::new(),
                catalog: Arc::new(SubagentCatalog::default()),
            }),
            report,
        }
    }

    /// Reads the Markdown profiles now if they were not read yet.
    pub fn load(&self) {
        drop(self.loaded_state());
    }

    /// The catalog now (reading the Markdown profiles first if they were not read yet).
    pub fn catalog(&self) -> Arc<SubagentCatalog> {
        self.loaded_state().catalog.clone()
    }

    /// Replaces the extension registrations (one generation, in load order), reports the
    /// collisions and limits, and publishes the catalog if it changed.
    pub fn set_extension_profiles(&self, registered: Vec<SubagentProfile>) {
        let mut state = lock(&self.state);
        if registered.is_empty() && matches!(state.markdown, Markdown::Pending(_)) {
            // Nothing to compose yet: the first use composes the Markdown profiles alone.
            state.registered = registered;
            return;
        }
        drop(state);
        let mut state = self.loaded_state();
        state.registered = registered;
        self.compose_into(&mut state);
    }

    /// The state with the Markdown profiles read: a pending loader runs here, under the lock,
    /// so concurrent first readers wait for one read instead of reading twice.
    fn loaded_state(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = lock(&self.state);
        if !matches!(state.markdown, Markdown::Pending(_)) {
            return state;
        }
        let placeholder = Markdown::Loaded(Vec::new());
        if let Markdown::Pending(loader) = std::mem::replace(&mut state.markdown, placeholder) {
            let (markdown, diagnostics) = loader();
            for diagnostic in &diagnostics {
                (self.report)(diagnostic);
            }
            state.markdown = Markdown::Loaded(markdown);
            self.compose_into(&mut state);
        }
        state
    }

    /// Composes the loaded Markdown profiles and the registrations, reports the diagnostics and
    /// keeps the catalog's `Arc` when nothing changed.
    fn compose_into(&self, state: &mut State) {
        let Markdown::Loaded(markdown) = &state.markdown else {
            return;
        };
        let mut diagnostics = Diagnostics::default();
        let catalog = compose(markdown, state.registered.clone(), &mut diagnostics);
        for diagnostic in diagnostics.into_vec() {
            (self.report)(&diagnostic);
        }
        if *state.catalog != catalog {
            state.catalog = Arc::new(catalog);
        }
    }
}

/// Markdown profiles first; then the first [`MAX_EXTENSION_PROFILES`] registrations, each
/// only under a name nothing earlier took (a `collision` whose loser is the extension's entry).
pub fn compose(
    markdown: &[SubagentProfile],
    registered: Vec<SubagentProfile>,
    diagnostics: &mut Diagnostics,
) -> SubagentCatalog {
    let mut profiles = markdown.to_vec();
    let mut by_name: HashMap<String, PathBuf> = markdown
        .iter()
        .map(|p| (p.name.clone(), p.source.path().to_path_buf()))
        .collect();
    for (index, profile) in registered.into_iter().enumerate() {
        if index == MAX_EXTENSION_PROFILES {
            diagnostics.add(ProfileDiagnostic::Limit {
                limit: MAX_EXTENSION_PROFILES as u64,
                path: Some(profile.source.path().to_path_buf()),
                message: format!(
                    "At most {MAX_EXTENSION_PROFILES} subagent profiles can be loaded"
                ),
            });
            break;
        }
        if let Some(winner) = by_name.get(&profile.name) {
            diagnostics.add(ProfileDiagnostic::Collision {
                name: profile.name,
                winner_path: winner.clone(),
                loser_path: profile.source.path().to_path_buf(),
            });
            continue;
        }
        by_name.insert(profile.name.clone(), profile.source.path().to_path_buf());
        profiles.push(profile);
    }
    SubagentCatalog::from_profiles(profiles)
}
