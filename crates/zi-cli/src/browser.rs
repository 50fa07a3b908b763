//! Opening an address in the person's browser, for sign-in: `$BROWSER` when set, else `open` on
//! macOS, else `xdg-open` when a display is available (`DISPLAY`, `WAYLAND_DISPLAY`). Anything
//! else (an SSH session) opens nothing: the address is printed anyway. Opening never fails the
//! sign-in.

use std::process::{Command, Stdio};

/// The command that opens `url`, if there is one to run.
fn command_for(url: &str, env: impl Fn(&str) -> Option<String>) -> Option<Vec<String>> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(browser) = set("BROWSER") {
        // `$BROWSER` may list several commands (`a:b`); the first is used. `%s` marks where
        // the address goes; without it, the address is the last argument.
        let first = browser.split(':').next().unwrap_or("");
        let mut words: Vec<String> = first.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return None;
        }
        if words.iter().any(|w| w.contains("%s")) {
            words = words.into_iter().map(|w| w.replace("%s", url)).collect();
        } else {
            words.push(url.to_string());
        }
        return Some(words);
    }
    if cfg!(target_os = "macos") {
        return Some(vec!["open".into(), url.into()]);
    }
    if set("DISPLAY").is_some() || set("WAYLAND_DISPLAY").is_some() {
        return Some(vec!["xdg-open".into(), url.into()]);
    }
    None
}

/// Starts the browser on `url` without waiting for it: no terminal, no output, its own session.
pub fn open(url: &str) {
    let Some(words) = command_for(url, |name| std::env::var(name).ok()) else {
        return;
    };
    let Some((program, args)) = words.split_first() else {
        return;
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own session, which zi's sweep at exit spares: the browser outlives zi.
    match zi_os::process::lifetime::spawn_detached(&mut command) {
        // Reaped in the background so no zombie is left while zi waits for the sign-in.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(error) => tracing::debug!("could not start the browser: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_commands() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            command_for("http://u", env(&[("BROWSER", "firefox --new-tab:chrome")])),
            Some(vec![
                "firefox".into(),
                "--new-tab".into(),
                "http://u".into()
            ])
        );
        assert_eq!(
            command_for("http://u", env(&[("BROWSER", "w3m %s")])),
            Some(vec!["w3m".into(), "http://u".into()])
        );
        if !cfg!(target_os = "macos") {
            assert_eq!(command_for("http://u", env(&[])), None);
            assert_eq!(
                command_for("http://u", env(&[("DISPLAY", ":0")])),
                Some(vec!["xdg-open".into(), "http://u".into()])
            );
        }
    }
}
