//! The composed catalog and its changes (docs/delegation.md#where-zi-looks-and-precedence,
//! docs/delegation.md#bounds): Markdown profiles (fixed at start-up) before the current extension
//! generation's registrations. An extension reload publishes a new catalog; readers (the delegation
//! supervisor and its tools) hold a [`SubagentCatalogWatch`] and see the new one on their next
//! look.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::diagnostics::{Diagnostics, ProfileDiagnostic};
use super::{SubagentCatalog, SubagentProfile};

/// Registrations admitted from one extension generation (all extensions together).
pub const MAX_EXTENSION_PROFILES: usize = 64;

/// The current catalog, always available, with change notification.
pub type SubagentCatalogWatch = watch::Receiver<Arc<SubagentCatalog>>;

/// Where diagnostics go (zi-cli: stderr `Warning:` lines).
pub type DiagnosticSink = Arc<dyn Fn(&ProfileDiagnostic) + Send + Sync>;

/// Owns the Markdown profiles and publishes the composed catalog.
pub struct SubagentProfileRegistry {
    markdown: Vec<SubagentProfile>,
    sender: watch::Sender<Arc<SubagentCatalog>>,
    report: DiagnosticSink,
}

impl fmt::Debug for SubagentProfileRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubagentProfileRegistry")
            .field("catalog", &*self.sender.borrow())
            .finish_non_exhaustive()
    }
}

impl SubagentProfileRegistry {
    /// A registry whose catalog holds `markdown` (already validated and deduplicated) until
    /// extensions register profiles.
    pub fn new(markdown: Vec<SubagentProfile>, report: DiagnosticSink) -> Self {
        let catalog = SubagentCatalog::from_profiles(markdown.clone());
        let (sender, _) = watch::channel(Arc::new(catalog));
        SubagentProfileRegistry {
            markdown,
            sender,
            report,
        }
    }

    /// The catalog now.
    pub fn catalog(&self) -> Arc<SubagentCatalog> {
        self.sender.borrow().clone()
    }

    /// A receiver of the catalog that sees every later change (the delegation tools hold one).
    pub fn subscribe(&self) -> SubagentCatalogWatch {
        self.sender.subscribe()
    }

    /// Replaces the extension registrations (one generation, in load order), reports the
    /// collisions and limits, and publishes the catalog if it changed.
    pub fn set_extension_profiles(&self, registered: Vec<SubagentProfile>) {
        let mut diagnostics = Diagnostics::default();
        let catalog = compose(&self.markdown, registered, &mut diagnostics);
        for diagnostic in diagnostics.into_vec() {
            (self.report)(&diagnostic);
        }
        self.sender.send_if_modified(|current| {
            if **current == catalog {
                false
            } else {
                *current = Arc::new(catalog);
                true
            }
        });
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
