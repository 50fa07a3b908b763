//! Keeping zi's credentials away from the processes it starts
//! (docs/providers.md#what-tools-can-read): the `--api-key` value in zi's own command line,
//! provider key variables in tool environments, and their values in zi's initial environment. A
//! handoff meant for zi alone is removed whole by [`crate::env::scrub`].
//!
//! `/proc/<pid>/cmdline` and `/proc/<pid>/environ` read the memory where the kernel placed the
//! process's arguments and initial environment, whatever the process did with them since:
//! `cmdline` is readable by every process of the machine, `environ` by every process of the same
//! user outside a sandbox. So a secret there is overwritten in place, as early as possible and
//! before any other thread exists.

use std::ffi::{CString, OsStr, OsString};
use std::sync::Mutex;

use crate::sync::lock;

/// Environment variables no tool process inherits.
static WITHHELD: Mutex<Vec<OsString>> = Mutex::new(Vec::new());

/// Adds `names` to the variables [`withhold_from`] removes.
pub fn withhold(names: impl IntoIterator<Item = impl Into<OsString>>) {
    let mut withheld = lock(&WITHHELD);
    for name in names {
        let name = name.into();
        if !withheld.contains(&name) {
            withheld.push(name);
        }
    }
}

/// Removes every withheld variable from `command`'s environment (a `bash` command, `ctx.exec`).
pub fn withhold_from(command: &mut std::process::Command) {
    for name in lock(&WITHHELD).iter() {
        command.env_remove(name);
    }
}

/// The variables withheld so far.
pub fn withheld() -> Vec<OsString> {
    lock(&WITHHELD).clone()
}

/// A range of zi's own memory that `/proc/self/stat` names by its start and end fields
/// (1-based field numbers, as proc(5) counts them).
fn stat_range(start_field: usize) -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name start with field 3.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let start: usize = fields.nth(start_field - 3)?.parse().ok()?;
    let end: usize = fields.next()?.parse().ok()?;
    (start != 0 && start < end).then_some((start, end))
}

/// Overwrites, in zi's argument memory, the value of every `flag VALUE` and `flag=VALUE` before
/// a `--` (the way zi's parser reads them) with `*`, so `/proc/<zi>/cmdline` and `ps` show the
/// flag but not its value. Returns how many values were hidden.
///
/// # Safety
///
/// No other thread may read the arguments meanwhile (`std::env::args` included): call it from
/// `main` before any thread starts, after the arguments were parsed.
pub unsafe fn hide_flag_values(flag: &str) -> usize {
    // Most starts give no such flag: `/proc/self/stat` is read only when a value is there to
    // hide (every start pays this before `ready`: docs/performance.md#start-up-and-idle-memory).
    let mut copy: Vec<u8> = std::env::args_os()
        .flat_map(|argument| {
            let mut bytes = std::os::unix::ffi::OsStringExt::into_vec(argument);
            bytes.push(0);
            bytes
        })
        .collect();
    if hide_in(&mut copy, flag.as_bytes()) == 0 {
        return 0;
    }
    // Fields 48 and 49: arg_start and arg_end.
    let Some((start, end)) = stat_range(48) else {
        return 0;
    };
    // SAFETY: the kernel reports [start, end) as this process's argument strings, which live
    // in its writable stack mapping for its whole life; the caller guarantees that nothing
    // reads them concurrently.
    let arguments = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    hide_in(arguments, flag.as_bytes())
}

/// [`hide_flag_values`] on a copy of the argument area: NUL-separated arguments.
fn hide_in(arguments: &mut [u8], flag: &[u8]) -> usize {
    let mut hidden = 0;
    let mut value_next = false;
    let mut with_equals = flag.to_vec();
    with_equals.push(b'=');
    for argument in arguments.split_mut(|&b| b == 0) {
        if value_next {
            argument.fill(b'*');
            hidden += usize::from(!argument.is_empty());
            value_next = false;
            continue;
        }
        if argument == b"--" {
            break;
        }
        if argument == flag {
            value_next = true;
        } else if argument.starts_with(&with_equals) {
            argument[with_equals.len()..].fill(b'*');
            hidden += 1;
        }
    }
    hidden
}

/// Keeps `name`'s value in zi's environment (for zi and the subagent children it starts) but
/// overwrites it where the kernel placed the initial environment, so `/proc/<zi>/environ` shows
/// `NAME=` followed by NUL bytes. Does nothing when the variable is unset or was set since.
///
/// # Safety
///
/// No other thread may read or write the environment meanwhile: call it from `main` before any
/// thread starts.
pub unsafe fn hide_initial_value(name: &str) {
    let Ok(c_name) = CString::new(name) else {
        return;
    };
    // SAFETY: getenv returns NULL or a NUL-terminated string that stays valid (glibc never
    // frees environment strings), and nobody else touches the environment now (the caller's
    // contract). The copy is made before the environment changes.
    unsafe {
        let value = libc::getenv(c_name.as_ptr());
        if value.is_null() {
            return;
        }
        // Fields 50 and 51: env_start and env_end; read only for a variable that is set.
        let Some((start, end)) = stat_range(50) else {
            return;
        };
        let length = libc::strlen(value);
        let address = value as usize;
        if address < start || address + length > end {
            return;
        }
        let copy = OsString::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
            std::slice::from_raw_parts(value.cast::<u8>(), length),
        ));
        // setenv stores a copy of its own: the environment no longer points into the initial
        // block, which can be cleared.
        std::env::set_var(name, &copy);
        std::ptr::write_bytes(value, 0, length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(arguments: &[&str], flag: &str) -> (Vec<String>, usize) {
        let mut area = arguments.join("\0").into_bytes();
        area.push(0);
        let count = hide_in(&mut area, flag.as_bytes());
        let text = String::from_utf8(area).unwrap_or_default();
        let parts = text.trim_end_matches('\0').split('\0').map(str::to_string);
        (parts.collect(), count)
    }

    #[test]
    fn flag_values_are_overwritten_in_both_forms_until_the_end_of_options() {
        let (args, count) = hidden(
            &[
                "zi",
                "--api-key",
                "sk-one",
                "-p",
                "--api-key=sk-two",
                "--",
                "--api-key",
                "prompt",
            ],
            "--api-key",
        );
        assert_eq!(count, 2);
        assert_eq!(
            args,
            [
                "zi",
                "--api-key",
                "******",
                "-p",
                "--api-key=******",
                "--",
                "--api-key",
                "prompt"
            ]
        );
        let (args, count) = hidden(&["zi", "--api-keys", "x", "--api-key"], "--api-key");
        assert_eq!(count, 0);
        assert_eq!(args, ["zi", "--api-keys", "x", "--api-key"]);
    }

    #[test]
    fn withheld_variables_leave_the_command_environment() {
        withhold(["ZI_TEST_WITHHELD_A", "ZI_TEST_WITHHELD_A"]);
        assert_eq!(
            withheld()
                .iter()
                .filter(|name| *name == "ZI_TEST_WITHHELD_A")
                .count(),
            1
        );
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", "echo \"[$ZI_TEST_WITHHELD_A]\""])
            .env("ZI_TEST_WITHHELD_A", "secret");
        withhold_from(&mut command);
        let output = command.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "[]\n");
    }
}
