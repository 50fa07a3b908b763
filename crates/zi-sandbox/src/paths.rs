//! Canonical targets of `write`/`edit` (docs/approvals.md#paths-in-rules) and the path checks of
//! docs/approvals.md#write-and-edit.

use std::path::{Component, Path, PathBuf};

/// Why a `write`/`edit` target needs an escape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathDenied {
    /// The canonical target is under no writable root.
    OutsideWritableRoots {
        /// The canonical target.
        path: PathBuf,
    },
    /// The canonical target is under `protected` (`<cwd>/.git`, `<cwd>/.zi`, the agent directory).
    ProtectedPath {
        /// The canonical target.
        path: PathBuf,
        /// The protected path it is under.
        protected: PathBuf,
    },
}

impl PathDenied {
    /// The canonical target that was denied.
    pub fn path(&self) -> &Path {
        match self {
            PathDenied::OutsideWritableRoots { path } | PathDenied::ProtectedPath { path, .. } => {
                path
            }
        }
    }
}

/// The canonical form of an absolute `path`: its deepest existing ancestor with symlinks
/// resolved, then the rest appended with `.` and `..` applied lexically (nothing below the
/// ancestor exists, so nothing there can be a symlink yet). A symlink pointing out of a
/// directory therefore yields a path outside it.
pub fn canonical_target(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let base = loop {
        match existing.canonicalize() {
            Ok(base) => break base,
            Err(_) => match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                // `..` or `/` at the end: resolve lexically from what is left.
                _ => break lexical(&existing),
            },
        }
    };
    let mut out = base;
    for name in rest.iter().rev() {
        match Path::new(name).components().next() {
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(_) => out.push(name),
        }
    }
    out
}

/// Whether the metadata of `path` (canonical, as the kernel names an open object) may change in
/// `workspace-write`: it lies strictly below one of `roots`. A root itself is not below it, so
/// `chmod /tmp` cannot clear the sticky bit of a shared directory; `read-only` has no roots.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn strictly_below_a_root(path: &Path, roots: &[PathBuf]) -> bool {
    path.is_absolute()
        && roots
            .iter()
            .any(|root| path != root.as_path() && path.starts_with(root))
}

fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_changes_are_allowed_strictly_below_a_root() {
        let roots = [PathBuf::from("/work/proj"), PathBuf::from("/tmp")];
        let below = |p: &str| strictly_below_a_root(Path::new(p), &roots);
        assert!(below("/work/proj/src/main.rs"));
        assert!(below("/work/proj/.git/config"));
        assert!(below("/tmp/x"));
        assert!(!below("/work/proj"), "a root keeps its own metadata");
        assert!(!below("/tmp"));
        assert!(!below("/work/project/x"), "components, not string prefixes");
        assert!(!below("/work/x"));
        assert!(!below("/etc/passwd"));
        assert!(!below("/dev/null"));
        assert!(!below("work/proj/x"), "relative names are never inside");
        assert!(
            !strictly_below_a_root(Path::new("/tmp/x"), &[]),
            "read-only"
        );
    }

    #[test]
    fn symlinks_resolve_and_missing_parts_apply_lexically() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("src/link")).unwrap();
        assert_eq!(
            canonical_target(&root.join("src/link/passwd")),
            PathBuf::from("/etc/passwd")
        );
        assert_eq!(
            canonical_target(&root.join("src/new/../../x/y")),
            root.join("x/y")
        );
        assert_eq!(
            canonical_target(&root.join("src/a.txt")),
            root.join("src/a.txt")
        );
    }
}
