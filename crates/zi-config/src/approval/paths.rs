//! Paths in rules and calls (docs/approvals.md#paths-in-rules).
//!
//! A call's path is made absolute against the session cwd, then its deepest existing ancestor
//! is canonicalised (symlinks resolved) and the rest appended; rules match that canonical path,
//! so a symlink that leads out of a matched directory does not match it. A rule's pattern is
//! resolved the same way up to its first glob character.

use std::path::{Component, Path, PathBuf};

/// Where relative paths and `~/` resolve.
#[derive(Debug, Clone)]
pub struct PathBase {
    /// The session's working directory: relative paths resolve under it.
    pub cwd: PathBuf,
    /// The home directory `~/` names; without one, `~/` is a directory under the cwd.
    pub home: Option<PathBuf>,
}

/// `path` made absolute (`~/` under home, relative under cwd), without `.`/`..` components.
fn absolute(base: &PathBase, path: &str) -> PathBuf {
    let joined = if let Some(rest) = path.strip_prefix("~/") {
        match &base.home {
            Some(home) => home.join(rest),
            None => base.cwd.join(path),
        }
    } else if path == "~" {
        base.home.clone().unwrap_or_else(|| base.cwd.clone())
    } else {
        base.cwd.join(path)
    };
    let mut clean = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean
}

/// The deepest existing ancestor canonicalised, the rest appended.
pub fn canonical(base: &PathBase, path: &str) -> PathBuf {
    canonicalize_existing(&absolute(base, path))
}

fn canonicalize_existing(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A rule's path glob, resolved: the literal directory part canonicalised, the glob kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathPattern {
    pattern: String,
}

impl PathPattern {
    pub(crate) fn new(base: &PathBase, spec: &str) -> PathPattern {
        let absolute = absolute(base, spec);
        let text = absolute.to_string_lossy().into_owned();
        let glob_at = text.find(['*', '?']).unwrap_or(text.len());
        let literal_end = text[..glob_at].rfind('/').map_or(0, |i| i + 1);
        let pattern = if glob_at == text.len() {
            canonicalize_existing(&absolute)
                .to_string_lossy()
                .into_owned()
        } else {
            let literal = canonicalize_existing(Path::new(&text[..literal_end]));
            let mut literal = literal.to_string_lossy().into_owned();
            if !literal.ends_with('/') {
                literal.push('/');
            }
            literal + &text[literal_end..]
        };
        PathPattern { pattern }
    }

    pub(crate) fn matches(&self, path: &Path) -> bool {
        let path = path.to_string_lossy();
        glob_match(self.pattern.as_bytes(), path.as_bytes())
    }
}

/// `*` (no `/`), `**` (any depth, including none: `a/**/b` matches `a/b`, `a/**` matches `a`),
/// `?` (one character other than `/`).
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.first() {
        None => text.is_empty(),
        Some(b'*') if pattern.get(1) == Some(&b'*') => {
            let mut rest = &pattern[2..];
            let slash = rest.first() == Some(&b'/');
            if slash {
                rest = &rest[1..];
            }
            // Zero directories, then any suffix boundary.
            (0..=text.len())
                .any(|i| (i == 0 || !slash || text[i - 1] == b'/') && glob_match(rest, &text[i..]))
        }
        Some(b'*') => {
            let rest = &pattern[1..];
            let mut i = 0;
            loop {
                if glob_match(rest, &text[i..]) {
                    return true;
                }
                if i == text.len() || text[i] == b'/' {
                    return false;
                }
                i += 1;
            }
        }
        Some(b'?') => {
            text.first().is_some_and(|&c| c != b'/') && glob_match(&pattern[1..], &text[1..])
        }
        Some(b'/') if pattern.get(1..3) == Some(b"**") && pattern.len() == 3 => {
            // `dir/**` also matches `dir` itself.
            text.is_empty() || (text[0] == b'/' && glob_match(&pattern[1..], &text[1..]))
        }
        Some(&c) => text.first() == Some(&c) && glob_match(&pattern[1..], &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(dir: &Path) -> PathBase {
        PathBase {
            cwd: dir.to_path_buf(),
            home: Some(dir.join("home")),
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"/p/src/**", b"/p/src/a/b.rs"));
        assert!(glob_match(b"/p/src/**", b"/p/src"));
        assert!(!glob_match(b"/p/src/**", b"/p/srcx/a"));
        assert!(glob_match(b"/p/**/*.rs", b"/p/a.rs"));
        assert!(glob_match(b"/p/**/*.rs", b"/p/a/b/c.rs"));
        assert!(glob_match(b"/p/dist/*.js", b"/p/dist/a.js"));
        assert!(!glob_match(b"/p/dist/*.js", b"/p/dist/x/a.js"));
        assert!(glob_match(b"/p/a?c", b"/p/abc"));
        assert!(!glob_match(b"/p/a?c", b"/p/a/c"));
        assert!(glob_match(b"/p/.env", b"/p/.env"));
    }

    #[test]
    fn symlinks_out_of_a_directory_do_not_match_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("src/link")).unwrap();
        let base = base(&root);
        let rule = PathPattern::new(&base, "src/**");
        assert!(rule.matches(&canonical(&base, "src/new/file.rs")));
        assert!(rule.matches(&canonical(&base, "./src/../src/a.rs")));
        assert!(!rule.matches(&canonical(&base, "src/link/x")));
        assert!(!rule.matches(&canonical(&base, "src/../outside/x")));
        let home = PathPattern::new(&base, "~/.ssh/**");
        assert!(home.matches(&canonical(
            &base,
            &format!("{}/home/.ssh/id", root.display())
        )));
        let absolute = PathPattern::new(&base, &format!("{}/outside/*", root.display()));
        assert!(absolute.matches(&canonical(&base, "src/link/x")));
    }
}
