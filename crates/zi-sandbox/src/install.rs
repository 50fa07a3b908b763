//! Installing a confinement on a command: the one `pre_exec` hook that applies it in the child.

use std::os::unix::process::CommandExt as _;
use std::sync::Arc;

use crate::Confinement;

impl Confinement {
    /// Makes `command`'s child apply this confinement after fork and before exec, so the
    /// program never runs unconfined: a failed step fails the spawn
    /// ([`Confinement::child_failure`] names it).
    pub fn install(self: &Arc<Self>, command: &mut std::process::Command) {
        let confinement = Arc::clone(self);
        // SAFETY: `apply_in_child` makes only raw, async-signal-safe system calls on values the
        // parent built beforehand; it allocates nothing and takes no lock (see confine.rs).
        unsafe {
            command.pre_exec(move || confinement.apply_in_child());
        }
    }
}
