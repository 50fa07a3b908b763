//! Outside Linux the Code Mode worker cannot be confined (docs/code-mode.md#the-sandbox).

use crate::probe::{TestHooks, WorkerEnforcement};

pub fn harden_code_worker(_address_space: u64) {}

pub fn confine_code_worker() -> Result<WorkerEnforcement, crate::WorkerConfineError> {
    Ok(WorkerEnforcement {
        landlock_abi: 0,
        seccomp: false,
    })
}

pub fn code_worker_support(_hooks: &TestHooks) -> Result<u32, crate::WorkerConfineError> {
    Err(crate::WorkerConfineError::NotLinux)
}
