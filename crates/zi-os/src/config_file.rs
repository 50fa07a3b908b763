//! Reading configuration files (models.json, auth.json, settings.json, trust.json, context
//! files, journal headers): only regular files, opened without blocking, read with a bound.
//!
//! A FIFO, a device or a symlink to `/dev/zero` in place of a configuration file must never
//! hang start-up or grow without limit. So the file is opened with `O_NONBLOCK` (opening a FIFO
//! never waits for a writer), checked with `fstat` on the open descriptor (no race with a rename),
//! refused unless it is a regular file, and read through a `take(max + 1)` so even a file that
//! grows while it is read cannot exceed the bound. Symlinks are followed: a symlink to a regular
//! file is fine.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a configuration file was refused. The texts name the file and never its contents.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The path names a directory, a FIFO, a device or a socket.
    #[error("{} is not a regular file ({kind})", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead (`a directory`, `a FIFO`, …).
        kind: &'static str,
    },
    /// The file is larger than the bound.
    #[error("{} exceeds {max} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound in bytes.
        max: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{} is not valid UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// Opening or reading the file failed.
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error of the system call.
        error: std::io::Error,
    },
}

/// Opens `path` for reading if it is a regular file. `Ok(None)` when it does not exist.
pub fn open_regular(path: &Path) -> Result<Option<(File, Metadata)>, ConfigFileError> {
    let io = |error| ConfigFileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; it has no effect on
        // reads of a regular file, which is all that is read afterwards. O_NOCTTY: a terminal
        // device never becomes the controlling terminal.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io(error)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ConfigFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta),
        });
    }
    Ok(Some((file, meta)))
}

/// Reads a regular file of at most `max` bytes. `Ok(None)` when it does not exist.
pub fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, ConfigFileError> {
    let Some((file, meta)) = open_regular(path)? else {
        return Ok(None);
    };
    let too_large = || ConfigFileError::TooLarge {
        path: path.to_path_buf(),
        max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| ConfigFileError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

/// [`read_bounded`] for UTF-8 text.
pub fn read_bounded_text(path: &Path, max: u64) -> Result<Option<String>, ConfigFileError> {
    match read_bounded(path, max)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ConfigFileError::NotUtf8 {
                path: path.to_path_buf(),
            }),
    }
}

fn kind_of(meta: &Metadata) -> &'static str {
    if meta.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"))
    }

    #[test]
    fn missing_regular_and_oversized_files() {
        let dir = temp_dir();
        let path = dir.path().join("c.json");
        assert!(matches!(read_bounded(&path, 4), Ok(None)));
        std::fs::write(&path, "1234").unwrap_or_default();
        assert_eq!(
            read_bounded_text(&path, 4).ok().flatten().as_deref(),
            Some("1234")
        );
        let error = read_bounded(&path, 3).err().map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.ends_with("exceeds 3 bytes")));
        std::fs::write(&path, [0xff, 0xfe]).unwrap_or_default();
        assert!(matches!(
            read_bounded_text(&path, 4),
            Err(ConfigFileError::NotUtf8 { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let dir = temp_dir();
        let fifo = dir.path().join("fifo.json");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap_or_else(|e| panic!("{e}"));
        for (path, kind) in [
            (fifo, "a FIFO"),
            (zero, "a character device"),
            (dir.path().to_path_buf(), "a directory"),
        ] {
            match read_bounded(&path, 1024) {
                Err(ConfigFileError::NotRegular { kind: found, .. }) => assert_eq!(found, kind),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }
}
