//! Reading a process's marker from `/proc/<pid>/environ`, also while the process is inside
//! `execve`.
//!
//! A process inside execve shows an empty environment from the moment the kernel replaces its
//! memory until it has laid out the new stack, and a read that spans the replacement ends
//! early, with a part of the old environment. Either would make a marked process look
//! unmarked, and it would outlive its spawn. So every read is checked against the layout
//! `/proc/<pid>/stat` reports — the end of the program's code, 0 until execve is done with the
//! stack, and the bounds of the environment — and a process whose read does not match is read
//! again: one that really has an empty environment (`env -i`) matches at once and costs no
//! wait.

use std::fs::File;
use std::io::Read as _;
use std::time::{Duration, Instant};

use super::TREE_VARIABLE;

/// How long one kill waits, in all, for processes caught inside `execve`: far longer than an
/// exec takes under load, short enough that one stuck in it (a hung file system) does not hold
/// up the stop of a tool.
const EXEC_WAIT: Duration = Duration::from_secs(1);
/// How long to wait before reading a process caught inside `execve` again.
const EXEC_PAUSE: Duration = Duration::from_micros(500);

/// What `/proc/<pid>/environ` shows of a process's marker.
#[derive(Debug, PartialEq, Eq)]
enum Environ {
    /// The whole environment was read: the marker, `None` for none (or the process is gone,
    /// or not zi's to read).
    Read(Option<String>),
    /// The process is inside `execve`: no whole environment to read yet.
    Exec,
}

/// Looks up markers for one kill: processes caught inside `execve` are read again until
/// [`EXEC_WAIT`] after the kill began.
pub(super) struct Markers {
    deadline: Instant,
}

impl Markers {
    pub(super) fn new() -> Self {
        Self {
            deadline: Instant::now() + EXEC_WAIT,
        }
    }

    /// The marker in `pid`'s environment, if it has one zi can read; waits out an exec in
    /// progress.
    pub(super) fn of(&self, pid: i32) -> Option<String> {
        loop {
            match environ(pid) {
                Environ::Read(marker) => return marker,
                Environ::Exec if Instant::now() < self.deadline => std::thread::sleep(EXEC_PAUSE),
                Environ::Exec => return None,
            }
        }
    }
}

fn environ(pid: i32) -> Environ {
    // Opened first: a process zi may not read fails here, before its layout (which then reads
    // as zeros) could pass for an exec in progress.
    let Ok(mut file) = File::open(format!("/proc/{pid}/environ")) else {
        return Environ::Read(None);
    };
    let Some(layout) = layout(pid) else {
        return Environ::Read(None);
    };
    if layout.code_end == 0 {
        return Environ::Exec;
    }
    let Some(size) = layout.environ_size else {
        // A kernel older than 3.5 tells no bounds: read what there is.
        let mut environ = Vec::new();
        return Environ::Read(
            file.read_to_end(&mut environ)
                .ok()
                .and_then(|_| marker_in(&environ)),
        );
    };
    // One read takes the whole environment of one address space; a byte more than the
    // layout promised, or fewer, means the process has exec'd since.
    let mut environ = vec![0; size + 1];
    match file.read(&mut environ) {
        Ok(read) if read == size => Environ::Read(marker_in(&environ[..read])),
        Ok(_) => Environ::Exec,
        Err(_) => Environ::Read(None),
    }
}

fn marker_in(environ: &[u8]) -> Option<String> {
    let prefix = format!("{TREE_VARIABLE}=");
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .and_then(|value| std::str::from_utf8(value).ok())
        .map(str::to_string)
}

/// Where a process's code and environment lie, as `/proc/<pid>/stat` tells.
struct Layout {
    /// The end of the program's code (field 27): the kernel records it once execve has laid out
    /// the new stack and environment, 0 until then.
    code_end: u64,
    /// The environment's length in bytes (fields 50 and 51), `None` on kernels before 3.5.
    environ_size: Option<usize>,
}

/// `None` when the process is gone or a zombie.
fn layout(pid: i32) -> Option<Layout> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields follow the last ')' of "pid (comm) S …", starting with field 3, the state.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let field = |number: usize| fields.get(number - 3).copied();
    if matches!(field(3)?, "Z" | "X") {
        return None;
    }
    let number = |number: usize| field(number).and_then(|value| value.parse::<u64>().ok());
    let environ_size = number(50)
        .zip(number(51))
        .and_then(|(start, end)| usize::try_from(end.checked_sub(start)?).ok());
    Some(Layout {
        code_end: number(27)?,
        environ_size,
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Reads `pid` until its exec is done.
    fn settled(pid: i32) -> Environ {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let environ = environ(pid);
            if environ != Environ::Exec || Instant::now() > deadline {
                return environ;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn an_empty_environment_reads_as_unmarked_and_a_marked_one_as_its_marker() {
        let mut empty = Command::new("sleep");
        empty.arg("30").env_clear();
        let mut marked = Command::new("sleep");
        marked.arg("30").env(TREE_VARIABLE, "1f-00aa.3");
        let children = [empty.spawn().unwrap(), marked.spawn().unwrap()];
        let [empty_read, marked_read] = children.each_ref().map(|child| settled(child.id() as i32));
        for mut child in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(empty_read, Environ::Read(None));
        assert_eq!(marked_read, Environ::Read(Some("1f-00aa.3".to_string())));
        assert_eq!(environ(i32::MAX), Environ::Read(None), "no such process");
    }
}
