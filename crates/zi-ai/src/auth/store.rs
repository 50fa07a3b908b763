//! The one writer of `auth.json` (docs/providers.md#credentials): directory 0700, file 0600,
//! every change made under `.auth.json.lock` from the file as it is *after* the lock was taken
//! (so entries other processes or the person wrote meanwhile survive), through a temporary file,
//! an fsync and a rename, and never over a file that is not a JSON object.
//!
//! The lock is an advisory `flock` on `.auth.json.lock`. Separate opens of the file are separate
//! lock holders, so two tasks of one process exclude each other as two processes do. pi's
//! `proper-lockfile` is a different mechanism: zi and pi must not share one auth.json.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::entry::OAuthEntry;
use zi_os::config_file::{ConfigFileError, read_bounded_text};

/// Largest auth.json zi reads.
pub(crate) const MAX_AUTH_FILE_BYTES: u64 = 1024 * 1024;

/// How long a writer waits for another holder of the lock (a refresh takes at most 30 s).
pub(crate) const LOCK_TIMEOUT: Duration = Duration::from_secs(40);

/// How often a waiting writer tries the lock again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// `<agent_dir>/auth.json`.
pub(crate) fn auth_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("auth.json")
}

/// Why auth.json could not be read or changed. Texts name files, never their contents.
#[derive(Debug, thiserror::Error)]
pub enum AuthStoreError {
    /// The agent directory or the lock file could not be created.
    #[error("Could not create {}: {reason}", path.display())]
    Create {
        /// What was being created.
        path: PathBuf,
        /// The system's error.
        reason: String,
    },
    /// Locking the lock file failed.
    #[error("Could not lock {}: {reason}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The system's error.
        reason: String,
    },
    /// Another zi process held the lock for the whole wait.
    #[error("Gave up waiting for the lock on {} after {}s", path.display(), LOCK_TIMEOUT.as_secs())]
    LockBusy {
        /// The lock file.
        path: PathBuf,
    },
    /// auth.json is not a JSON object; zi does not overwrite what it cannot read.
    #[error("{} is not a valid JSON object; zi leaves it as it is", path.display())]
    Invalid {
        /// auth.json.
        path: PathBuf,
    },
    /// auth.json could not be read, or is over its size bound.
    #[error("Could not read auth.json: {0}")]
    Read(#[from] ConfigFileError),
    /// Writing the new auth.json (a private temporary file, then a rename) failed.
    #[error("Could not write {}: {reason}", path.display())]
    Write {
        /// auth.json.
        path: PathBuf,
        /// The system's error.
        reason: String,
    },
}

/// The lock on auth.json, held until dropped. Reading and writing through it is the only way
/// zi changes the file.
pub(crate) struct AuthLock {
    file: File,
    agent_dir: PathBuf,
}

impl Drop for AuthLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl AuthLock {
    /// Makes the agent dir (0700) and opens the lock file.
    fn open(agent_dir: &Path) -> Result<File, AuthStoreError> {
        std::fs::create_dir_all(agent_dir).map_err(|error| AuthStoreError::Create {
            path: agent_dir.to_path_buf(),
            reason: error.to_string(),
        })?;
        set_private_dir(agent_dir)?;
        let path = agent_dir.join(".auth.json.lock");
        open_private(&path, false).map_err(|error| AuthStoreError::Lock {
            path,
            reason: error.to_string(),
        })
    }

    fn try_take(file: &File, agent_dir: &Path) -> Result<bool, AuthStoreError> {
        match file.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(error)) => Err(AuthStoreError::Lock {
                path: agent_dir.join(".auth.json.lock"),
                reason: error.to_string(),
            }),
        }
    }

    /// Takes the lock, waiting at most [`LOCK_TIMEOUT`] for another holder (async: the wait is
    /// a timer, and dropping the future gives up).
    pub(crate) async fn acquire(agent_dir: &Path) -> Result<AuthLock, AuthStoreError> {
        let file = Self::open(agent_dir)?;
        let deadline = tokio::time::Instant::now() + LOCK_TIMEOUT;
        while !Self::try_take(&file, agent_dir)? {
            if tokio::time::Instant::now() >= deadline {
                return Err(AuthStoreError::LockBusy {
                    path: agent_dir.join(".auth.json.lock"),
                });
            }
            tokio::time::sleep(LOCK_POLL).await;
        }
        Ok(AuthLock {
            file,
            agent_dir: agent_dir.to_path_buf(),
        })
    }

    /// [`AuthLock::acquire`] for code outside an async runtime.
    pub(crate) fn acquire_blocking(agent_dir: &Path) -> Result<AuthLock, AuthStoreError> {
        let file = Self::open(agent_dir)?;
        let deadline = std::time::Instant::now() + LOCK_TIMEOUT;
        while !Self::try_take(&file, agent_dir)? {
            if std::time::Instant::now() >= deadline {
                return Err(AuthStoreError::LockBusy {
                    path: agent_dir.join(".auth.json.lock"),
                });
            }
            std::thread::sleep(LOCK_POLL);
        }
        Ok(AuthLock {
            file,
            agent_dir: agent_dir.to_path_buf(),
        })
    }

    /// The file's object as it is now (missing: empty). Anything but a JSON object is
    /// [`AuthStoreError::Invalid`]: such a file is never written over.
    pub(crate) fn read(&self) -> Result<Map<String, Value>, AuthStoreError> {
        read_auth_map(&self.agent_dir).map(Option::unwrap_or_default)
    }

    /// Replaces the file with `map`: a private temporary file, fsync, rename.
    pub(crate) fn write(&self, map: &Map<String, Value>) -> Result<(), AuthStoreError> {
        let path = auth_path(&self.agent_dir);
        let failed = |path: &Path, error: &dyn std::fmt::Display| AuthStoreError::Write {
            path: path.to_path_buf(),
            reason: error.to_string(),
        };
        let mut text = serde_json::to_string_pretty(map).map_err(|e| failed(&path, &e))?;
        text.push('\n');
        let temp = self
            .agent_dir
            .join(format!(".auth.json.{}.tmp", std::process::id()));
        let mut file = open_private(&temp, true).map_err(|e| failed(&temp, &e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| failed(&temp, &e))?;
        std::fs::rename(&temp, &path).map_err(|error| {
            let _ = std::fs::remove_file(&temp);
            failed(&path, &error)
        })
    }
}

/// auth.json's object, `None` when the file does not exist; anything but a JSON object is
/// [`AuthStoreError::Invalid`].
pub fn read_auth_map(agent_dir: &Path) -> Result<Option<Map<String, Value>>, AuthStoreError> {
    let path = auth_path(agent_dir);
    match read_bounded_text(&path, MAX_AUTH_FILE_BYTES)? {
        None => Ok(None),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            _ => Err(AuthStoreError::Invalid { path }),
        },
    }
}

/// Changes auth.json under the lock: `change` gets the current object, and the file is written
/// when it returns `true`.
pub(crate) fn update_auth_file(
    agent_dir: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> bool,
) -> Result<bool, AuthStoreError> {
    let lock = AuthLock::acquire_blocking(agent_dir)?;
    let mut map = lock.read()?;
    let changed = change(&mut map);
    if changed {
        lock.write(&map)?;
    }
    Ok(changed)
}

/// Stores an `api_key` credential, keeping every other entry (tests seed auth.json with it).
#[cfg(test)]
pub(crate) fn store_api_key(
    agent_dir: &Path,
    provider: &str,
    key: &str,
) -> Result<(), AuthStoreError> {
    update_auth_file(agent_dir, |map| {
        map.insert(
            provider.to_string(),
            serde_json::json!({"type": "api_key", "key": key}),
        );
        true
    })
    .map(drop)
}

/// Stores a sign-in's tokens as the provider's whole entry (a new sign-in replaces the old one).
pub(crate) fn store_oauth(
    agent_dir: &Path,
    provider: &str,
    entry: &OAuthEntry,
) -> Result<(), AuthStoreError> {
    update_auth_file(agent_dir, |map| {
        map.insert(provider.to_string(), entry.to_json());
        true
    })
    .map(drop)
}

/// Removes a provider's entry; `false` when it had none.
pub(crate) fn remove_entry(agent_dir: &Path, provider: &str) -> Result<bool, AuthStoreError> {
    update_auth_file(agent_dir, |map| map.remove(provider).is_some())
}

#[cfg(unix)]
fn open_private(path: &Path, truncate: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .create(true)
        .truncate(truncate)
        .write(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn open_private(path: &Path, truncate: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(truncate)
        .write(true)
        .open(path)
}

#[cfg(unix)]
fn set_private_dir(path: &Path) -> Result<(), AuthStoreError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|error| {
        AuthStoreError::Create {
            path: path.to_path_buf(),
            reason: error.to_string(),
        }
    })
}

#[cfg(not(unix))]
fn set_private_dir(_: &Path) -> Result<(), AuthStoreError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_agent() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[cfg(unix)]
    #[test]
    fn writes_are_private_and_keep_other_entries() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = temp_agent();
        let agent = dir.path().join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            auth_path(&agent),
            r#"{"google":{"type":"oauth","refresh":"r","access":"a","expires":1}}"#,
        )
        .unwrap();
        store_api_key(&agent, "openai", "sk-1").unwrap();
        let entry = OAuthEntry {
            access: "a2".into(),
            refresh: "r2".into(),
            expires: 5,
            ..OAuthEntry::default()
        };
        store_oauth(&agent, "openai-codex", &entry).unwrap();
        let map = read_auth_map(&agent).unwrap().unwrap();
        assert_eq!(map["google"]["refresh"], "r");
        assert_eq!(map["openai"]["key"], "sk-1");
        assert_eq!(map["openai-codex"]["access"], "a2");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&auth_path(&agent)), 0o600);
        assert_eq!(mode(&agent), 0o700);
        assert!(remove_entry(&agent, "openai-codex").unwrap());
        assert!(!remove_entry(&agent, "openai-codex").unwrap());
        assert!(
            !read_auth_map(&agent)
                .unwrap()
                .unwrap()
                .contains_key("openai-codex")
        );
    }

    #[test]
    fn an_invalid_file_is_never_written_over() {
        let dir = temp_agent();
        std::fs::write(auth_path(dir.path()), "{ sk-secret-in-broken-file").unwrap();
        let error = store_api_key(dir.path(), "openai", "k").unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("is not a valid JSON object; zi leaves it as it is")
        );
        assert!(!error.to_string().contains("sk-secret"));
        assert!(remove_entry(dir.path(), "openai").is_err());
        assert_eq!(
            std::fs::read_to_string(auth_path(dir.path())).unwrap(),
            "{ sk-secret-in-broken-file"
        );
        std::fs::write(auth_path(dir.path()), "[]").unwrap();
        assert!(matches!(
            read_auth_map(dir.path()),
            Err(AuthStoreError::Invalid { .. })
        ));
    }

    #[tokio::test]
    async fn the_lock_excludes_a_second_holder_until_dropped() {
        let dir = temp_agent();
        let first = AuthLock::acquire(dir.path()).await.unwrap();
        let file = AuthLock::open(dir.path()).unwrap();
        assert!(!AuthLock::try_take(&file, dir.path()).unwrap());
        drop(first);
        assert!(AuthLock::try_take(&file, dir.path()).unwrap());
    }
}
