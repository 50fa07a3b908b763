//! Completion in the composer. A composer that starts with `/word` completes commands: zi's own,
//! every extension command (`command.list`), every prompt template and skill (`/skill:name`).
//! A word before the cursor that starts with `@` completes paths under the session's cwd, with
//! `.gitignore` (and `.ignore`, git's excludes) respected. Matching is fuzzy (a prefix first);
//! while there are matches a menu above the composer lists the best ones and Tab takes the
//! first.

use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::app::App;
use crate::slash::{fuzzy_score, matches};
use crate::status::clip;
use crate::theme::Theme;
use crate::wrap::text_width;

/// Rows the menu shows at most.
const MENU_ROWS: usize = 6;
/// Paths the `@` index holds at most (a huge tree completes its first ones).
const MAX_PATHS: usize = 20_000;
/// How long a scan of the cwd is reused (files come and go while the agent works).
const INDEX_FRESH: Duration = Duration::from_secs(5);

/// One completion on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// What replaces the word (`/model `, `@src/main.rs `, `@src/`).
    pub text: String,
    /// What the menu shows.
    pub label: String,
    pub about: String,
}

/// The word before the cursor and what it may become, best first.
#[derive(Debug, PartialEq)]
pub struct Completion {
    /// Bytes before the cursor that a candidate replaces.
    pub replace: usize,
    pub candidates: Vec<Candidate>,
}

/// The paths under the cwd, relative, directories with a trailing `/`.
#[derive(Default)]
pub struct FileIndex {
    paths: Vec<String>,
    built: Option<Instant>,
}

impl FileIndex {
    fn paths(&mut self, cwd: &Path) -> &[String] {
        if self.built.is_none_or(|at| at.elapsed() > INDEX_FRESH) {
            self.paths = scan(cwd);
            self.built = Some(Instant::now());
        }
        &self.paths
    }
}

/// Walks `cwd` as git would list it: ignored files and `.git` left out, hidden files kept.
pub fn scan(cwd: &Path) -> Vec<String> {
    let walker = ignore::WalkBuilder::new(cwd)
        .hidden(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    let mut paths = Vec::new();
    for entry in walker.filter_map(Result::ok) {
        let Ok(relative) = entry.path().strip_prefix(cwd) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let mut text = relative.to_string_lossy().into_owned();
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            text.push('/');
        }
        paths.push(text);
        if paths.len() >= MAX_PATHS {
            break;
        }
    }
    paths.sort();
    paths
}

/// The paths matching `pattern`, best first: a prefix, then the earliest scattered match, then
/// the shorter path.
pub fn path_matches<'a>(paths: &'a [String], pattern: &str) -> Vec<&'a String> {
    let pattern = pattern.to_lowercase();
    let mut found: Vec<(usize, &String)> = paths
        .iter()
        .filter_map(|p| fuzzy_score(&p.to_lowercase(), &pattern).map(|score| (score, p)))
        .collect();
    found.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.len().cmp(&b.1.len()))
            .then_with(|| a.1.cmp(b.1))
    });
    found.into_iter().map(|(_, p)| p).collect()
}

/// What the word before the cursor completes to (none: it is no `/command` or `@path`).
pub fn current(app: &mut App) -> Option<Completion> {
    let before = app.composer.before_cursor();
    if let Some(pattern) = before.strip_prefix('/')
        && !pattern.contains(char::is_whitespace)
    {
        let replace = before.len();
        let candidates = matches(app, pattern)
            .into_iter()
            .map(|(name, about)| Candidate {
                text: format!("/{name} "),
                label: format!("/{name}"),
                about,
            })
            .collect();
        return Some(Completion {
            replace,
            candidates,
        });
    }
    let start = before
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &before[start..];
    let pattern = word.strip_prefix('@')?.to_string();
    let replace = word.len();
    let cwd = app.session.cwd().to_path_buf();
    let candidates = path_matches(app.files.paths(&cwd), &pattern)
        .into_iter()
        .take(MENU_ROWS * 4)
        .map(|path| Candidate {
            // A directory stays open for its contents; a file ends the word.
            text: if path.ends_with('/') {
                format!("@{path}")
            } else {
                format!("@{path} ")
            },
            label: format!("@{path}"),
            about: String::new(),
        })
        .collect();
    Some(Completion {
        replace,
        candidates,
    })
}

/// Tab: the word before the cursor becomes the best candidate.
pub fn complete(app: &mut App) {
    if let Some(completion) = current(app)
        && let Some(best) = completion.candidates.first()
    {
        app.composer
            .replace_before_cursor(completion.replace, &best.text);
    }
}

/// The menu's rows at `width` cells (the first, which Tab takes, marked).
pub fn menu_lines(completion: &Completion, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let label_width = completion
        .candidates
        .iter()
        .take(MENU_ROWS)
        .map(|c| text_width(&c.label))
        .max()
        .unwrap_or(0)
        .min(width / 2);
    completion
        .candidates
        .iter()
        .take(MENU_ROWS)
        .enumerate()
        .map(|(n, candidate)| {
            let label = clip(&candidate.label, label_width.max(1));
            let pad = label_width.saturating_sub(text_width(&label));
            let room = width.saturating_sub(label_width + 5);
            let (mark, style) = if n == 0 {
                ("› ", theme.bold())
            } else {
                ("  ", theme.plain())
            };
            let mut spans = vec![
                Span::styled(mark, theme.user()),
                Span::styled(label, style),
                Span::raw(" ".repeat(pad + 2)),
            ];
            if !candidate.about.is_empty() && room > 3 {
                spans.push(Span::styled(clip(&candidate.about, room), theme.dim()));
            }
            Line::from(spans)
        })
        .collect()
}

/// Draws the menu at the bottom of `area` (the transcript's, just above the composer).
pub fn draw(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    let Some(completion) = current(app) else {
        return;
    };
    if completion.candidates.is_empty() {
        return;
    }
    let mut lines = menu_lines(&completion, &app.theme, area.width as usize);
    if completion.candidates.len() > MENU_ROWS {
        lines.push(Line::styled(
            format!(
                "  … {} more · Tab takes the first",
                completion.candidates.len() - MENU_ROWS
            ),
            app.theme.dim(),
        ));
    }
    let height = (lines.len() as u16).min(area.height);
    let rect = Rect::new(area.x, area.bottom() - height, area.width, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines), rect);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_respects_gitignore_and_skips_dot_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in [
            "src/main.rs",
            "ignored/main.txt",
            ".git/HEAD",
            ".github/ci.yml",
            "notes.md",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        let paths = scan(root);
        assert_eq!(
            paths,
            [
                ".github/",
                ".github/ci.yml",
                ".gitignore",
                "notes.md",
                "src/",
                "src/main.rs"
            ]
        );
        assert_eq!(path_matches(&paths, "main"), [&"src/main.rs".to_string()]);
        assert_eq!(
            path_matches(&paths, "s")[..2],
            [&"src/".to_string(), &"src/main.rs".to_string()],
            "prefixes first, shorter first"
        );
    }

    #[test]
    fn the_menu_marks_the_first_candidate_and_aligns_descriptions() {
        let completion = Completion {
            replace: 3,
            candidates: vec![
                Candidate {
                    text: "/review ".into(),
                    label: "/review".into(),
                    about: "Review a file <path>".into(),
                },
                Candidate {
                    text: "/resume ".into(),
                    label: "/resume".into(),
                    about: "replace this session".into(),
                },
            ],
        };
        let rows: Vec<String> = menu_lines(&completion, &Theme::new(true), 40)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(
            rows,
            [
                "› /review  Review a file <path>",
                "  /resume  replace this session"
            ]
        );
    }
}
