//! Outside Linux there is no confinement; the probe reports `not Linux` before this is reached.

use std::path::PathBuf;

/// Never built outside Linux.
#[derive(Debug)]
pub struct Confinement(());

impl Confinement {
    pub(crate) fn build(
        _abi: u32,
        _roots: &[PathBuf],
        _network: bool,
    ) -> Result<Self, crate::error::ConfineError> {
        Err(crate::error::ConfineError::NotLinux)
    }

    pub fn apply_in_child(&self) -> std::io::Result<()> {
        Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
    }

    pub fn child_failure(&self) -> Option<&'static str> {
        None
    }
}
