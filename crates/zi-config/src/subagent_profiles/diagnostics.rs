//! Resource diagnostics of the subagent-profile kind (docs/delegation.md#diagnostics). They reach
//! the user on stderr as `Warning:` lines like every other start-up diagnostic; `Display` is the
//! text after `Warning: `, and always names the file.

use std::fmt;
use std::path::PathBuf;

/// At most this many diagnostics per load; the last slot says the rest were dropped.
pub(crate) const MAX_DIAGNOSTICS: usize = 512;

/// One problem found while loading profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileDiagnostic {
    /// A file (or directory) that was skipped, with the reason.
    Warning {
        /// The file or directory.
        path: PathBuf,
        /// Why it was skipped.
        message: String,
    },
    /// A later profile under a name already taken: the winner stays, the loser is dropped.
    Collision {
        /// The profile name both use.
        name: String,
        /// Where the profile that stays is defined.
        winner_path: PathBuf,
        /// Where the dropped one is defined.
        loser_path: PathBuf,
    },
    /// A bound stopped loading (`path` is the file or directory it stopped at).
    Limit {
        /// The bound's value.
        limit: u64,
        /// Where loading stopped, when at a file or directory.
        path: Option<PathBuf>,
        /// What was bounded.
        message: String,
    },
    /// The diagnostics bound itself (the `discovery` limit of the reference).
    Truncated,
}

impl fmt::Display for ProfileDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIND: &str = "(subagent profiles)";
        match self {
            ProfileDiagnostic::Warning { path, message } => {
                write!(f, "{KIND} {}: {message}", path.display())
            }
            ProfileDiagnostic::Collision {
                name,
                winner_path,
                loser_path,
            } => write!(
                f,
                "{KIND} {}: profile {name} is already defined by {}; ignoring this one",
                loser_path.display(),
                winner_path.display()
            ),
            ProfileDiagnostic::Limit {
                path: Some(path),
                message,
                ..
            } => write!(f, "{KIND} {}: {message}", path.display()),
            ProfileDiagnostic::Limit {
                path: None,
                message,
                ..
            } => write!(f, "{KIND} {message}"),
            ProfileDiagnostic::Truncated => write!(
                f,
                "(resources) At most {MAX_DIAGNOSTICS} resource diagnostics are reported per load; the rest were dropped"
            ),
        }
    }
}

/// The diagnostics of one load, bounded by [`MAX_DIAGNOSTICS`].
#[derive(Debug, Default)]
pub struct Diagnostics {
    items: Vec<ProfileDiagnostic>,
}

impl Diagnostics {
    pub fn add(&mut self, diagnostic: ProfileDiagnostic) {
        match self.items.len() {
            n if n + 1 < MAX_DIAGNOSTICS => self.items.push(diagnostic),
            n if n + 1 == MAX_DIAGNOSTICS => self.items.push(ProfileDiagnostic::Truncated),
            _ => {}
        }
    }

    pub fn into_vec(self) -> Vec<ProfileDiagnostic> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_slot_reports_the_bound() {
        let mut diagnostics = Diagnostics::default();
        for i in 0..600 {
            diagnostics.add(ProfileDiagnostic::Warning {
                path: PathBuf::from(format!("/p/{i}.md")),
                message: "m".into(),
            });
        }
        let items = diagnostics.into_vec();
        assert_eq!(items.len(), MAX_DIAGNOSTICS);
        assert_eq!(items.last(), Some(&ProfileDiagnostic::Truncated));
        assert_eq!(items[0].to_string(), "(subagent profiles) /p/0.md: m");
    }

    #[test]
    fn collisions_name_both_files() {
        let text = ProfileDiagnostic::Collision {
            name: "reviewer".into(),
            winner_path: PathBuf::from("/w/reviewer.md"),
            loser_path: PathBuf::from("/l/ext.lua"),
        }
        .to_string();
        assert_eq!(
            text,
            "(subagent profiles) /l/ext.lua: profile reviewer is already defined by /w/reviewer.md; ignoring this one"
        );
    }
}
