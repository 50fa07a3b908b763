//! No process zi starts outlives it, whatever ends first (docs/cli.md#processes-zi-starts).
//!
//! No single kernel mechanism covers every way zi or a child can end, so three work together:
//!
//! - **zi is a child subreaper** ([`init`]): a process whose parent exits is re-parented to zi
//!   instead of init, so everything zi started — daemons that called `setsid`, the tools of a
//!   subagent child that crashed — stays in zi's process tree while zi lives. [`sweep`] ends
//!   that tree by ancestry when zi exits; [`reap_orphans`] reaps the re-parented ones that end
//!   on their own, so no zombie piles up.
//! - **A marker in the environment** ([`mark`]): every process zi starts for a tool, an MCP
//!   server, a `!command` or a subagent child gets `ZI_PROCESS_TREE=<root>.<n>`, which everything
//!   it starts inherits (across `setsid` too). [`kill_marked`] ends one spawn's processes when
//!   zi stops it, its orphans included, and the sentinel — a small process outside zi's tree that
//!   sees zi's end as EOF on a pipe — ends every marked process when zi dies without running
//!   any code (SIGKILL, a crash).
//! - **A parent-death signal** ([`die_with_zi`]): the kernel ends each direct child the moment
//!   zi dies. The signal follows the *thread* that started the child, so zi starts them from
//!   threads that live as long as zi: the async runtime's workers, or an extension's thread
//!   while its `ctx.exec` waits.
//!
//! Processes that clear their environment (`env -i`, `sudo`) lose the marker: the sweep at exit
//! still finds them by ancestry, the sentinel does not.

mod environ;
mod reaper;
mod sentinel;

use std::collections::HashSet;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

pub use reaper::reap_orphans;
pub use sentinel::{SENTINEL_SUBCOMMAND, sentinel_main};

use super::tree::{self, ProcessStat};
use super::{kill_process, start_in_own_session};
use crate::sync::{lock, read};
use environ::Markers;

/// The environment variable that marks the processes of one spawn.
pub const TREE_VARIABLE: &str = "ZI_PROCESS_TREE";

/// Longest marker accepted from the environment (a subagent child's, a nested zi's).
const MAX_ROOT_BYTES: usize = 256;
/// How often a sweep looks again for processes forked while it was killing.
const SWEEP_ROUNDS: usize = 20;
const SWEEP_PAUSE: Duration = Duration::from_millis(5);

/// This zi's marker: inherited from the parent zi that started it, or made up at start-up.
static ROOT: OnceLock<String> = OnceLock::new();
/// The number of the next spawn's marker.
static NEXT: AtomicU64 = AtomicU64::new(1);
/// Held for reading while zi starts a child and records it ([`spawn_owned`]), for writing while
/// orphans are reaped: a child zi waits for itself is never reaped by the reaper first.
static SPAWNING: RwLock<()> = RwLock::new(());
/// Children zi waits for itself (tokio's or std's `Child`).
static OWNED: Mutex<Option<HashSet<i32>>> = Mutex::new(None);
/// Sessions the sweep spares: a browser opened for a sign-in outlives zi.
static EXEMPT: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Makes zi a child subreaper and fixes its marker. `inherited` is `ZI_PROCESS_TREE` of zi's
/// own environment (a subagent child's marker, so its parent ends its processes too);
/// `sentinel` the executable that serves [`SENTINEL_SUBCOMMAND`] (zi's own), `None` for none.
/// Call once from `main`, before any child is started.
/// An error means zi could not become a subreaper (the rest is set up anyway).
pub fn init(inherited: Option<&str>, sentinel: Option<PathBuf>) -> io::Result<()> {
    let root = inherited
        .filter(|root| valid_marker(root))
        .map_or_else(new_root, str::to_string);
    let _ = ROOT.set(root);
    sentinel::configure(sentinel);
    set_subreaper(true)
}

fn set_subreaper(on: bool) -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only changes this process's own attribute.
    let done = unsafe {
        libc::prctl(
            libc::PR_SET_CHILD_SUBREAPER,
            libc::c_ulong::from(on),
            0,
            0,
            0,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn valid_marker(marker: &str) -> bool {
    !marker.is_empty()
        && marker.len() <= MAX_ROOT_BYTES
        && marker
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b'-')
}

/// `<pid in hex>-<64 random bits in hex>`: unique among the processes of this machine.
fn new_root() -> String {
    let mut random = [0u8; 8];
    // SAFETY: getrandom writes at most `random.len()` bytes into the buffer it is given.
    let filled = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    let random = if filled == random.len() as isize {
        u64::from_ne_bytes(random)
    } else {
        crate::clock::now_millis() as u64
    };
    format!("{:x}-{random:016x}", std::process::id())
}

/// This zi's marker (a fresh one when [`init`] was not called: libraries and tests).
pub fn root() -> &'static str {
    ROOT.get_or_init(new_root)
}

/// One spawn's marker: its processes carry exactly this value, or this value followed by `.`
/// (a subagent child's own spawns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker(String);

impl Marker {
    /// The marker's value, as `ZI_PROCESS_TREE` carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a process whose marker is `value` belongs to this spawn.
    fn covers(&self, value: &str) -> bool {
        value == self.0 || self.is_below(value)
    }

    /// Whether a process whose marker is `value` was started below this marker (not with it:
    /// a zi whose marker was inherited shares it with the command that started it).
    fn is_below(&self, value: &str) -> bool {
        value
            .strip_prefix(self.0.as_str())
            .is_some_and(|rest| rest.starts_with('.'))
    }
}

/// Marks `command`'s process and everything it will start ([`TREE_VARIABLE`]) and starts the
/// sentinel if it is not running yet.
pub fn mark(command: &mut std::process::Command) -> Marker {
    let marker = Marker(format!(
        "{}.{}",
        root(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    command.env(TREE_VARIABLE, marker.as_str());
    sentinel::ensure_running();
    marker
}

/// The kernel sends `signal` to `command`'s process when zi dies — more exactly, when the thread
/// that starts it exits, so start it from a thread that lives as long as zi (see the module
/// documentation). A child whose parent died before the signal was set fails to start.
pub fn die_with_zi(command: &mut std::process::Command, signal: i32) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs in the forked child before exec and makes two async-signal-safe
    // system calls; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // zi died between the fork and the prctl: the signal would never come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// A child for a tool (`bash`, `ctx.exec`), an MCP stdio server or a subagent: leader of its own
/// session ([`start_in_own_session`]), marked ([`mark`]) and SIGKILLed when zi dies
/// ([`die_with_zi`]).
pub fn tool_process(command: &mut std::process::Command) -> Marker {
    start_in_own_session(command);
    die_with_zi(command, libc::SIGKILL);
    mark(command)
}

/// Starts a child through `spawn` and records it as one zi waits for itself, so the orphan
/// reaper leaves its exit status to its owner. `pid` tells the child's id.
pub fn spawn_owned<C>(
    spawn: impl FnOnce() -> io::Result<C>,
    pid: impl FnOnce(&C) -> Option<u32>,
) -> io::Result<C> {
    let _spawning = read(&SPAWNING);
    let child = spawn()?;
    if let Some(id) = pid(&child).and_then(|id| i32::try_from(id).ok()) {
        lock(&OWNED).get_or_insert_with(HashSet::new).insert(id);
    }
    Ok(child)
}

/// Starts `command` in its own session as a process that may outlive zi (a browser opened for a
/// sign-in): the sweep at exit spares its session. The caller waits for it.
pub fn spawn_detached(command: &mut std::process::Command) -> io::Result<std::process::Child> {
    start_in_own_session(command);
    let child = spawn_owned(|| command.spawn(), |child| Some(child.id()))?;
    if let Ok(pid) = i32::try_from(child.id()) {
        lock(&EXEMPT).push(pid);
    }
    Ok(child)
}

fn is_owned(pid: i32) -> bool {
    lock(&OWNED)
        .as_ref()
        .is_some_and(|owned| owned.contains(&pid))
}

/// Kills, round after round until none is left, the processes `select` picks from `candidates`'
/// live ones (a process forking meanwhile is caught by the next round).
fn kill_rounds(candidates: impl Fn() -> Vec<ProcessStat>, select: impl Fn(&ProcessStat) -> bool) {
    let own = std::process::id() as i32;
    for round in 0..SWEEP_ROUNDS {
        let found: Vec<i32> = candidates()
            .into_iter()
            .filter(|process| process.pid != own && !process.is_zombie() && select(process))
            .map(|process| process.pid)
            .collect();
        if found.is_empty() {
            return;
        }
        for pid in found {
            kill_process(pid, libc::SIGKILL);
        }
        if round + 1 < SWEEP_ROUNDS {
            std::thread::sleep(SWEEP_PAUSE);
        }
    }
}

/// SIGKILLs every descendant of zi that carries `marker` (one spawn's processes, wherever they
/// went: re-parented orphans are zi's children).
pub fn kill_marked(marker: &Marker) {
    let own = std::process::id() as i32;
    let markers = Markers::new();
    kill_rounds(
        || tree::descendants(own),
        |process| {
            markers
                .of(process.pid)
                .is_some_and(|value| marker.covers(&value))
        },
    );
}

/// Ends zi's whole process tree (the exit path): SIGKILL to every descendant but the sessions
/// of [`spawn_detached`] processes.
pub fn sweep() {
    let own = std::process::id() as i32;
    let exempt = lock(&EXEMPT).clone();
    kill_rounds(
        || tree::descendants(own),
        |process| !exempt.contains(&process.session),
    );
}

#[cfg(test)]
mod tests;
