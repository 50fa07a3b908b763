//! Extension discovery and loading for this invocation (docs/extensions.md#where-zi-looks).
//!
//! Order: `--extension` paths, the trusted project's `.zi/extensions/`, the agent dir's
//! `extensions/`, then settings `extensions[]` (global paths relative to the agent dir, project
//! paths relative to the cwd). The same entry script found twice loads once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use zi_config::settings::SettingsStore;
use zi_config::subagent_profiles::SubagentProfileRegistry;
use zi_ext_lua::discovery::{self, ExtensionSource};
use zi_ext_lua::{LoadOptions, LuaHost};

use crate::runtime::warn;

fn resolve_setting(path: &str, base: &Path) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ if Path::new(path).is_absolute() => PathBuf::from(path),
        _ => base.join(path),
    }
}

/// Every extension source, in discovery order, without duplicates; `explicit_paths` are the
/// `--extension` paths, absolute.
pub fn discover(
    explicit_paths: &[PathBuf],
    cwd: &Path,
    agent_dir: &Path,
    trusted: bool,
    settings: &SettingsStore,
) -> Vec<ExtensionSource> {
    let mut sources = Vec::new();
    let mut explicit = |path: &Path| match discovery::resolve(path) {
        Ok(found) => sources.extend(found),
        Err(error) => warn(&format!("Extension {error}")),
    };
    for path in explicit_paths {
        explicit(path);
    }
    let (global, project) = settings.extension_paths();
    let mut sources_from_dirs = Vec::new();
    if trusted {
        sources_from_dirs.extend(discovery::scan(&cwd.join(".zi").join("extensions")));
    }
    sources_from_dirs.extend(discovery::scan(&agent_dir.join("extensions")));
    sources.extend(sources_from_dirs);
    let mut settings_paths: Vec<PathBuf> = global
        .iter()
        .map(|p| resolve_setting(p, agent_dir))
        .collect();
    if trusted {
        settings_paths.extend(project.iter().map(|p| resolve_setting(p, cwd)));
    }
    for path in settings_paths {
        match discovery::resolve(&path) {
            Ok(found) => sources.extend(found),
            Err(error) => warn(&format!("Extension {error}")),
        }
    }
    let mut seen = Vec::new();
    sources.retain(|source| {
        let key = source
            .entry
            .canonicalize()
            .unwrap_or_else(|_| source.entry.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    sources
}

/// Loads the sources, printing a warning for each one that fails.
pub fn load(
    sources: &[ExtensionSource],
    mode: &str,
    cwd: &Path,
    reserved_tools: Vec<String>,
    sandbox: &zi_sandbox::SandboxHandle,
    subagent_profiles: &Arc<SubagentProfileRegistry>,
) -> LuaHost {
    if sources.is_empty() {
        return LuaHost::default();
    }
    let (host, warnings) = zi_ext_lua::load(
        sources,
        &LoadOptions {
            mode: mode.to_string(),
            cwd: cwd.to_path_buf(),
            reserved_tools,
            sandbox: sandbox.clone(),
            subagent_profiles: Some(subagent_profiles.clone()),
        },
    );
    for warning in &warnings {
        warn(warning);
    }
    host
}
