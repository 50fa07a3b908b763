//! Finding extensions on disk (docs/extensions.md#where-zi-looks).
//!
//! An extension is `NAME.lua` or a directory `NAME/` holding `init.lua`; its id is `NAME`.
//! A directory without `init.lua` is a folder of extensions: each `*.lua` file and each
//! subdirectory with an `init.lua` in it, in name order.

use std::path::{Path, PathBuf};

pub use crate::error::DiscoveryError;

/// One extension to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionSource {
    /// Stable id: the file stem or directory name.
    pub id: String,
    /// The entry script.
    pub entry: PathBuf,
    /// Where `require` looks for modules.
    pub module_dir: PathBuf,
}

/// Resolves one configured path. A missing path is an error; a folder may hold none.
pub fn resolve(path: &Path) -> Result<Vec<ExtensionSource>, DiscoveryError> {
    if path.is_file() {
        return single_file(path)
            .map(|source| vec![source])
            .ok_or_else(|| DiscoveryError::NotLua(path.to_path_buf()));
    }
    if path.is_dir() {
        if let Some(source) = directory(path) {
            return Ok(vec![source]);
        }
        return Ok(scan(path));
    }
    Err(DiscoveryError::Missing(path.to_path_buf()))
}

/// The extensions inside a folder (missing folders hold none).
pub fn scan(folder: &Path) -> Vec<ExtensionSource> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|path| {
            if path.is_dir() {
                directory(path)
            } else {
                single_file(path)
            }
        })
        .collect()
}

fn single_file(path: &Path) -> Option<ExtensionSource> {
    if path.extension().and_then(|e| e.to_str()) != Some("lua") {
        return None;
    }
    let id = path.file_stem()?.to_str()?.to_string();
    Some(ExtensionSource {
        id,
        entry: path.to_path_buf(),
        module_dir: path.parent()?.to_path_buf(),
    })
}

fn directory(path: &Path) -> Option<ExtensionSource> {
    let entry = path.join("init.lua");
    if !entry.is_file() {
        return None;
    }
    Some(ExtensionSource {
        id: path.file_name()?.to_str()?.to_string(),
        entry,
        module_dir: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_directories_and_folders() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        std::fs::write(root.join("a.lua"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("notes.txt"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(root.join("b")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("b/init.lua"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(root.join("empty")).unwrap_or_else(|e| panic!("{e}"));
        let found = resolve(root).unwrap_or_else(|e| panic!("{e}"));
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(found[1].module_dir, root.join("b"));
        let single = resolve(&root.join("b")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(single.len(), 1);
        assert!(resolve(&root.join("missing.lua")).is_err());
        assert!(resolve(&root.join("notes.txt")).is_err());
    }
}
