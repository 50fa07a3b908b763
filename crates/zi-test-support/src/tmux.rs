//! The real `zi` binary in a real terminal: a detached `tmux` session on a private server
//! socket, driven with `send-keys` and read with `capture-pane`, for the interactive mode's
//! black-box tests.
//!
//! zi runs under a small shell script: the script records zi's pid, runs it with the
//! [`ZiCommand`]'s sanitized environment, and after zi exits prints `zi exited with status N`,
//! saves `stty -a`, and reads one line (echoing it back as `shell read: …`) — so a test can check
//! that the terminal came back in its ordinary (cooked, echoing) state.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::zi_command::ZiCommand;

/// How long [`Tmux::wait_for`] waits unless told otherwise.
pub const SCREEN_WAIT: Duration = Duration::from_secs(60);

/// A running tmux session with zi in its only pane. Dropping it kills the tmux server (and zi).
pub struct Tmux {
    dir: tempfile::TempDir,
    _home: Option<tempfile::TempDir>,
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Tmux {
    /// Starts `command` in a `width`×`height` terminal.
    pub fn start(command: &ZiCommand, width: u16, height: u16) -> Tmux {
        let dir = tempfile::Builder::new()
            .prefix("zi-tmux-")
            .tempdir()
            .expect("a temporary directory for tmux");
        let env = command.environment().expect("the child environment");
        let mut argv = vec!["env".to_string(), "-i".to_string()];
        let mut has_term = false;
        for (name, value) in &env.vars {
            let (name, value) = (name.to_string_lossy(), value.to_string_lossy());
            has_term |= name == "TERM";
            argv.push(quote(&format!("{name}={value}")));
        }
        if !has_term {
            argv.push(quote("TERM=tmux-256color"));
        }
        argv.push(quote(&command.program().to_string_lossy()));
        for arg in command.arguments() {
            argv.push(quote(&arg.to_string_lossy()));
        }
        let cwd = command
            .working_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| std::env::current_dir().expect("the current directory"));
        let pid_file = dir.path().join("zi.pid");
        let stty_file = dir.path().join("stty.txt");
        let script = format!(
            "cd {cwd}\nsh -c 'echo $$ > \"$0\"; exec \"$@\"' {pid} {argv}\necho \"zi exited with status $?\"\nstty -a > {stty} 2>&1\nread line\necho \"shell read: $line\"\nsleep 3600\n",
            cwd = quote(&cwd.to_string_lossy()),
            pid = quote(&pid_file.to_string_lossy()),
            argv = argv.join(" "),
            stty = quote(&stty_file.to_string_lossy()),
        );
        let script_path = dir.path().join("run.sh");
        std::fs::write(&script_path, script).expect("write the tmux script");
        let tmux = Tmux {
            dir,
            _home: env.home,
        };
        let out = tmux.tmux(&[
            "new-session",
            "-d",
            "-s",
            "zi",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "sh",
            &script_path.to_string_lossy(),
        ]);
        assert!(
            out.status.success(),
            "tmux new-session failed (is tmux installed?): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("tmux.sock")
    }

    /// Runs a tmux command against this session's server.
    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .arg("-f")
            .arg("/dev/null")
            .args(args)
            .output()
            .expect("run tmux (is it installed? .ci/run installs it)")
    }

    /// `send-keys` with tmux key names (`Enter`, `Escape`, `C-c`, `M-Enter`, `PageUp`, …).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "zi"];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "send-keys {keys:?}: {out:?}");
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", "zi", "-l", text]);
        assert!(out.status.success(), "send-keys -l: {out:?}");
    }

    /// The visible screen as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "zi"]).stdout).into_owned()
    }

    /// The visible screen with its colours and attributes as escape sequences.
    pub fn screen_with_escapes(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-e", "-t", "zi"]).stdout)
            .into_owned()
    }

    /// A tmux format expanded for the pane (`#{alternate_on}`, `#{cursor_flag}`, …).
    pub fn display(&self, format: &str) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["display-message", "-p", "-t", "zi", format])
                .stdout,
        )
        .trim()
        .to_string()
    }

    /// Waits until the screen contains `needle` and returns it; panics with the screen after
    /// `SCREEN_WAIT`.
    pub async fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |screen| screen.contains(needle))
            .await
    }

    /// Waits until `ready` holds for the screen text.
    pub async fn wait_until(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + SCREEN_WAIT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what:?}; the screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// zi's pid (once it has started).
    pub async fn zi_pid(&self) -> i32 {
        let path = self.dir.path().join("zi.pid");
        let deadline = tokio::time::Instant::now() + SCREEN_WAIT;
        loop {
            if let Ok(text) = std::fs::read_to_string(&path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            assert!(tokio::time::Instant::now() < deadline, "zi never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` to zi.
    pub async fn signal(&self, signal: i32) {
        let pid = self.zi_pid().await;
        // zi has not been reaped while the script waits for it (the script's `sh -c` became zi
        // through exec), so the pid cannot have been reused.
        zi_os::process::kill_process(pid, signal);
    }

    /// Waits for zi to exit and returns its status as the script printed it.
    pub async fn exit_status(&self) -> i32 {
        let screen = self
            .wait_until("zi exited with status", |s| {
                s.contains("zi exited with status")
            })
            .await;
        screen
            .split("zi exited with status ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no exit status on the screen:\n{screen}"))
    }

    /// `stty -a` as the script saw the terminal after zi exited.
    pub async fn stty_after_exit(&self) -> String {
        let path = self.dir.path().join("stty.txt");
        let deadline = tokio::time::Instant::now() + SCREEN_WAIT;
        loop {
            if let Ok(text) = std::fs::read_to_string(&path)
                && !text.is_empty()
            {
                return text;
            }
            assert!(tokio::time::Instant::now() < deadline, "no stty output");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Checks that the terminal is back to normal after zi exited: the alternate screen left,
    /// cooked mode with echo (from `stty -a`), the cursor visible, and a line typed at the
    /// shell read back.
    pub async fn assert_restored(&self) {
        let stty = self.stty_after_exit().await;
        let flags: Vec<&str> = stty.split_whitespace().collect();
        for flag in ["icanon", "echo", "isig", "icrnl", "opost"] {
            assert!(flags.contains(&flag), "{flag} is off after exit: {stty}");
        }
        assert_eq!(
            self.display("#{alternate_on}"),
            "0",
            "still on the alternate screen"
        );
        assert_eq!(self.display("#{cursor_flag}"), "1", "the cursor is hidden");
        self.type_text("typed after exit");
        self.keys(&["Enter"]);
        self.wait_for("shell read: typed after exit").await;
    }

    /// Resizes the terminal.
    pub fn resize(&self, width: u16, height: u16) {
        let out = self.tmux(&[
            "resize-window",
            "-t",
            "zi",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        assert!(out.status.success(), "resize-window: {out:?}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
