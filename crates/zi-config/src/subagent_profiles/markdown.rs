//! Markdown profiles: discovery, trust and precedence
//! (docs/delegation.md#where-zi-looks-and-precedence).
//!
//! Roots are read in precedence order (project, then global); the first profile under a name
//! wins. Nothing here fails: every problem becomes a [`ProfileDiagnostic`] and the file is
//! skipped. A missing root costs one `stat`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use zi_os::config_file::{ConfigFileError, read_bounded_text};

use super::diagnostics::{Diagnostics, ProfileDiagnostic};
use super::front_matter;
use super::validate::{ProfileDeclaration, admit};
use super::{ProfileSource, SubagentProfile};

/// Markdown profiles loaded at most (project and global together).
pub const MAX_MARKDOWN_PROFILES: usize = 64;
/// Largest profile file read.
pub const MAX_PROFILE_FILE_BYTES: u64 = 1024 * 1024;
/// Entries read from one profile directory.
pub const MAX_DIRECTORY_ENTRIES: usize = 4096;
/// What a session's resources may retain in all.
pub const SESSION_RESOURCE_BYTES: u64 = 8 * 1024 * 1024;
/// Resource-ignore files of a profile directory, read as gitignore patterns.
pub const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".fdignore"];

/// Which root a profile came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileScope {
    Project,
    Global,
}

/// One directory searched for `*.md` profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRoot {
    pub path: PathBuf,
    pub scope: ProfileScope,
}

/// The roots for a session, in precedence order: `<cwd>/.zi/subagents` when the project is
/// trusted and `<cwd>/.zi` is not the agent directory itself, then `<agentDir>/subagents`.
pub fn profile_roots(cwd: &Path, agent_dir: &Path, trusted: bool) -> Vec<ProfileRoot> {
    let mut roots = Vec::with_capacity(2);
    let project_dir = cwd.join(".zi");
    if trusted && !same_directory(&project_dir, agent_dir) {
        roots.push(ProfileRoot {
            path: project_dir.join("subagents"),
            scope: ProfileScope::Project,
        });
    }
    roots.push(ProfileRoot {
        path: agent_dir.join("subagents"),
        scope: ProfileScope::Global,
    });
    roots
}

fn same_directory(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (a.canonicalize(), b.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Bytes retained by a session's resources, against [`SESSION_RESOURCE_BYTES`].
#[derive(Debug)]
pub struct ResourceBudget {
    limit: u64,
    retained: u64,
}

impl Default for ResourceBudget {
    fn default() -> Self {
        ResourceBudget::new(SESSION_RESOURCE_BYTES)
    }
}

impl ResourceBudget {
    pub fn new(limit: u64) -> Self {
        ResourceBudget { limit, retained: 0 }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Retains `bytes` if they fit.
    pub fn retain(&mut self, bytes: u64) -> bool {
        match self.retained.checked_add(bytes) {
            Some(total) if total <= self.limit => {
                self.retained = total;
                true
            }
            _ => false,
        }
    }
}

/// Loads the profiles of `roots` in precedence order.
pub fn load_markdown_profiles(
    roots: &[ProfileRoot],
    budget: &mut ResourceBudget,
    diagnostics: &mut Diagnostics,
) -> Vec<SubagentProfile> {
    let mut profiles: Vec<SubagentProfile> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut files: HashSet<PathBuf> = HashSet::new();
    let mut limit_reported = false;
    for root in roots {
        if !root.path.is_dir() {
            continue;
        }
        let names = match read_directory(&root.path, diagnostics) {
            Ok(names) => names,
            Err(error) => {
                diagnostics.add(ProfileDiagnostic::Warning {
                    path: root.path.clone(),
                    message: error.to_string(),
                });
                continue;
            }
        };
        let ignored = ignore_rules(&root.path);
        for name in names {
            if name.starts_with('.') || !name.ends_with(".md") {
                continue;
            }
            let path = root.path.join(&name);
            if !path.is_file() || ignored.matched(&path, false).is_ignore() {
                continue;
            }
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            if !files.insert(canonical) {
                continue;
            }
            let Some((profile, bytes)) = load_file(&path, &name, root.scope, diagnostics) else {
                continue;
            };
            if let Some(&winner) = by_name.get(&profile.name) {
                diagnostics.add(ProfileDiagnostic::Collision {
                    name: profile.name,
                    winner_path: profiles[winner].source.path().to_path_buf(),
                    loser_path: path,
                });
                continue;
            }
            if profiles.len() == MAX_MARKDOWN_PROFILES {
                if !limit_reported {
                    limit_reported = true;
                    diagnostics.add(ProfileDiagnostic::Limit {
                        limit: MAX_MARKDOWN_PROFILES as u64,
                        path: Some(path),
                        message: format!(
                            "At most {MAX_MARKDOWN_PROFILES} subagent profiles can be loaded"
                        ),
                    });
                }
                break;
            }
            if !budget.retain(bytes) {
                diagnostics.add(ProfileDiagnostic::Limit {
                    limit: budget.limit(),
                    path: Some(path),
                    message: format!(
                        "Session resources cannot retain more than {} bytes",
                        budget.limit()
                    ),
                });
                continue;
            }
            by_name.insert(profile.name.clone(), profiles.len());
            profiles.push(profile);
        }
    }
    profiles
}

/// The directory's [`IGNORE_FILES`] as one matcher. Ignore files only filter discovery: an
/// unreadable file or a bad pattern makes it filter less, never fails a profile.
fn ignore_rules(dir: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    for name in IGNORE_FILES {
        let path = dir.join(name);
        if let Ok(Some(text)) = read_bounded_text(&path, MAX_PROFILE_FILE_BYTES) {
            for line in text.lines() {
                let _ = builder.add_line(Some(path.clone()), line);
            }
        }
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Up to [`MAX_DIRECTORY_ENTRIES`] entry names, sorted; more entries are a `limit` diagnostic.
fn read_directory(dir: &Path, diagnostics: &mut Diagnostics) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        if names.len() == MAX_DIRECTORY_ENTRIES {
            diagnostics.add(ProfileDiagnostic::Limit {
                limit: MAX_DIRECTORY_ENTRIES as u64,
                path: Some(dir.to_path_buf()),
                message: format!(
                    "Resource directories are limited to {MAX_DIRECTORY_ENTRIES} entries"
                ),
            });
            break;
        }
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Reads and validates one file; `None` (with its diagnostic) when it is skipped.
fn load_file(
    path: &Path,
    file_name: &str,
    scope: ProfileScope,
    diagnostics: &mut Diagnostics,
) -> Option<(SubagentProfile, u64)> {
    let warn = |diagnostics: &mut Diagnostics, message: String| {
        diagnostics.add(ProfileDiagnostic::Warning {
            path: path.to_path_buf(),
            message,
        });
    };
    let text = match read_bounded_text(path, MAX_PROFILE_FILE_BYTES) {
        Ok(Some(text)) => text,
        // Removed since the directory was read.
        Ok(None) => return None,
        Err(ConfigFileError::TooLarge { max, .. }) => {
            diagnostics.add(ProfileDiagnostic::Limit {
                limit: max,
                path: Some(path.to_path_buf()),
                message: format!(
                    "Resource files cannot exceed {max} bytes: {}",
                    path.display()
                ),
            });
            return None;
        }
        Err(error) => {
            warn(diagnostics, error.to_string());
            return None;
        }
    };
    let matter = match front_matter::parse(&text) {
        Ok(matter) => matter,
        Err(error) => {
            warn(diagnostics, error.to_string());
            return None;
        }
    };
    let declaration = ProfileDeclaration {
        name: file_name
            .strip_suffix(".md")
            .unwrap_or(file_name)
            .to_string(),
        description: matter.field("description"),
        instructions: super::validate::ProfileField::Text(matter.body.clone()),
        model: matter.field("model"),
        thinking: matter.field("thinking"),
    };
    let source = match scope {
        ProfileScope::Project => ProfileSource::Project(path.to_path_buf()),
        ProfileScope::Global => ProfileSource::Global(path.to_path_buf()),
    };
    match admit(declaration, source) {
        Ok(profile) => Some((profile, text.len() as u64)),
        Err(problem) => {
            warn(diagnostics, problem.to_string());
            None
        }
    }
}
