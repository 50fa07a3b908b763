//! zi's own environment.

/// Removes `name` from the environment and overwrites its value where the kernel placed the
/// initial environment: `unsetenv` only drops the pointer, and `/proc/<pid>/environ` reads that
/// memory, so without the overwrite a secret would stay readable there for the process's whole
/// life.
///
/// # Safety
///
/// No other thread may read or write the environment meanwhile (call it from `main` first).
pub unsafe fn scrub(name: &str) {
    if let Ok(c_name) = std::ffi::CString::new(name) {
        // SAFETY: getenv returns NULL or a NUL-terminated string in the environment's storage,
        // which nobody else touches now (the caller's contract); only its bytes are overwritten.
        unsafe {
            let value = libc::getenv(c_name.as_ptr());
            if !value.is_null() {
                std::ptr::write_bytes(value, 0, libc::strlen(value));
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { std::env::remove_var(name) };
}
