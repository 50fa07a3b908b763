//! Slash commands typed in the composer: zi's own (`/model`, `/thinking`, `/compact`, `/copy`,
//! `/login`, `/logout`, `/help`, `/quit`) and the extensions' (`command.list`). Anything else
//! that starts with `/` is sent as a prompt, where the session expands skills and prompt
//! templates.

use crate::app::{App, UiEvent};
use crate::transcript::Item;

/// zi's own commands and what they do (the help screen lists them).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "model",
        "select a model: /model PROVIDER/ID (no argument: a picker)",
    ),
    (
        "thinking",
        "set the thinking level: /thinking LEVEL (no argument: a picker)",
    ),
    (
        "compact",
        "compact the context now: /compact [instructions]",
    ),
    ("copy", "copy the last answer to the clipboard (OSC 52)"),
    ("new", "replace this session with a new one"),
    (
        "resume",
        "replace this session with another of this directory (picker)",
    ),
    ("reload", "reload the extensions (when any are loaded)"),
    (
        "login",
        "sign in to ChatGPT (Codex) or GitHub Copilot: /login [PROVIDER]",
    ),
    ("logout", "sign out: /logout PROVIDER"),
    ("help", "keys and commands"),
    ("quit", "leave zi"),
];

/// Every command name on offer: built-ins, extension commands, prompt templates, skills.
pub fn names(app: &App) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = BUILTIN
        .iter()
        .map(|(name, about)| (name.to_string(), about.to_string()))
        .collect();
    for command in app.session.extension_commands() {
        // The extensions' own `reload` is what the built-in `/reload` runs.
        if !names.iter().any(|(name, _)| *name == command.name) {
            names.push((command.name, command.description));
        }
    }
    let expander = app.session.input_expander();
    for template in expander.templates() {
        let about = match (&template.description, &template.argument_hint) {
            (Some(about), Some(hint)) => format!("{about} {hint}"),
            (Some(about), None) => about.clone(),
            (None, Some(hint)) => format!("prompt template {hint}"),
            (None, None) => "prompt template".to_string(),
        };
        names.push((template.name.clone(), about));
    }
    for skill in expander.skills() {
        names.push((format!("skill:{}", skill.name), skill.description.clone()));
    }
    names
}

/// Whether `pattern`'s characters appear in `name` in order (fuzzy match), and how well: a
/// prefix beats a scattered match.
pub fn fuzzy_score(name: &str, pattern: &str) -> Option<usize> {
    if name.starts_with(pattern) {
        return Some(0);
    }
    let mut chars = name.char_indices();
    let mut last = 0;
    for p in pattern.chars() {
        let (index, _) = chars.find(|(_, c)| *c == p)?;
        last = index;
    }
    Some(1 + last)
}

/// The commands matching `pattern`, best first.
pub fn matches(app: &App, pattern: &str) -> Vec<(String, String)> {
    let mut found: Vec<(usize, (String, String))> = names(app)
        .into_iter()
        .filter_map(|entry| fuzzy_score(&entry.0, pattern).map(|score| (score, entry)))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.0.cmp(&b.1.0)));
    found.into_iter().map(|(_, entry)| entry).collect()
}

/// Runs `text` if it is a command; false if it should go to the session as a prompt.
pub fn run(app: &mut App, text: &str) -> bool {
    let Some(rest) = text.strip_prefix('/') else {
        return false;
    };
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest.trim_end(), ""),
    };
    match name {
        "quit" | "exit" => app.quit = true,
        "help" => app.help = true,
        "model" => crate::model_picker::model(app, args),
        "thinking" => crate::model_picker::thinking(app, args),
        "compact" => compact(app, args),
        "copy" => copy(app),
        "new" => crate::sessions::replace(app, crate::sessions::SessionTarget::New),
        "resume" if args.is_empty() => crate::session_picker::open(app),
        "resume" => {
            crate::sessions::replace(app, crate::sessions::SessionTarget::Resume(args.into()))
        }
        "reload" => reload(app),
        "login" => crate::login::login(app, args),
        "logout" => crate::login::logout(app, args),
        _ => {
            if app
                .session
                .extension_commands()
                .iter()
                .any(|c| c.name == name)
            {
                invoke(app, name, args);
            } else {
                return false;
            }
        }
    }
    true
}

fn notice(app: &mut App, text: String) {
    app.transcript.push(Item::Notice(text));
}

fn error(app: &mut App, text: String) {
    app.transcript.push(Item::Error(text));
}

fn compact(app: &mut App, args: &str) {
    let focus = (!args.is_empty()).then(|| args.to_string());
    match app.session.compact(focus) {
        Ok(started) => {
            let tasks = app.tasks().clone();
            started.answer_with(move |outcome| {
                if let Err(e) = outcome {
                    let _ = tasks.send(UiEvent::Notice(Item::Error(e.to_string())));
                }
            });
        }
        Err(e) => error(app, e.to_string()),
    }
}

fn copy(app: &mut App) {
    match app.transcript.last_answer() {
        Some(text) => {
            app.clipboard = Some(text);
            notice(app, "Copied the last answer to the clipboard".to_string());
        }
        None => error(app, "There is no answer to copy yet".to_string()),
    }
}

/// `/reload`: the extension host's own `reload` command (docs/extensions.md#reload), which is
/// there only when extensions are loaded.
fn reload(app: &mut App) {
    let offered = app
        .session
        .extension_commands()
        .iter()
        .any(|c| c.name == "reload");
    if offered {
        invoke(app, "reload", "");
    } else {
        error(
            app,
            "No extensions are loaded: nothing to reload".to_string(),
        );
    }
}

fn invoke(app: &mut App, name: &str, args: &str) {
    match app.session.invoke_command(name, args.to_string()) {
        Ok(running) => {
            let tasks = app.tasks().clone();
            tokio::spawn(async move {
                let item = match running.await {
                    Ok(Some(message)) => Item::Notice(message),
                    Ok(None) => return,
                    Err(e) => Item::Error(e.to_string()),
                };
                let _ = tasks.send(UiEvent::Notice(item));
            });
        }
        Err(e) => error(app, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_beat_scattered_matches() {
        assert_eq!(fuzzy_score("model", "mo"), Some(0));
        assert!(fuzzy_score("compact", "cpt").is_some_and(|s| s > 0));
        assert_eq!(fuzzy_score("copy", "x"), None);
    }
}
