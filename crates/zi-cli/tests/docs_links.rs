//! The docs a newcomer follows stay reachable: every `docs/<page>.md#<anchor>` that code cites
//! names a heading that exists, every link between the pages (and from the README) resolves, and no
//! code comment cites a document that is not in the repository (the "§n" of a reference the
//! checkout does not carry). docs/architecture.md's method table is checked against `rpc_methods!`
//! by zi-protocol's `the_architecture_method_table_matches_rpc_methods`.
//!
//! Anchors are computed as GitHub renders them: the heading text lowercased, everything but
//! letters, digits, `_`, `-` and spaces dropped, spaces turned into `-`, and `-1`, `-2`, … added to
//! repeated headings. Headings inside fenced code blocks do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GitHub's anchor of one heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of one Markdown page.
fn anchors(page: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    let mut in_code = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let Some(heading) = line.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        if in_code || !line.starts_with('#') {
            continue;
        }
        let base = slug(heading);
        let count = seen.entry(base.clone()).or_default();
        anchors.insert(match *count {
            0 => base,
            n => format!("{base}-{n}"),
        });
        *count += 1;
    }
    anchors
}

/// Every page under docs/ and the README, by path relative to the root (`docs/rpc.md`).
fn pages() -> BTreeMap<String, String> {
    let mut pages = BTreeMap::new();
    for entry in fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            pages.insert(name, fs::read_to_string(&path).unwrap());
        }
    }
    pages.insert(
        "README.md".into(),
        fs::read_to_string(root().join("README.md")).unwrap(),
    );
    pages
}

/// The source, manifest and Markdown files under `dir`, without build output.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | ".git") {
                source_files(&path, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".toml") || name.ends_with(".md") {
            out.push(path);
        }
    }
}

fn is_anchor_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
}

/// The `docs/<page>.md#<anchor>` citations of one file's text, with their line numbers.
fn citations(text: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("docs/") {
            rest = &rest[start + "docs/".len()..];
            let name_len = rest
                .find(|c: char| !(is_anchor_char(c) || c == '.'))
                .unwrap_or(rest.len());
            let name = &rest[..name_len];
            let Some(after) = rest[name_len..].strip_prefix('#') else {
                continue;
            };
            if !name.ends_with(".md") {
                continue;
            }
            let anchor_len = after.find(|c| !is_anchor_char(c)).unwrap_or(after.len());
            found.push((
                number + 1,
                format!("docs/{name}"),
                after[..anchor_len].to_string(),
            ));
        }
    }
    found
}

#[test]
fn every_docs_anchor_cited_in_code_exists() {
    let pages: BTreeMap<String, BTreeSet<String>> = pages()
        .iter()
        .map(|(name, text)| (name.clone(), anchors(text)))
        .collect();
    let mut files = Vec::new();
    source_files(&root().join("crates"), &mut files);
    source_files(&root().join("examples"), &mut files);
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for (line, page, anchor) in citations(&text) {
            checked += 1;
            if !pages.get(&page).is_some_and(|a| a.contains(&anchor)) {
                let file = file.strip_prefix(root()).unwrap_or(file).display();
                broken.push(format!("{file}:{line}: {page}#{anchor}"));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} citations found: is the scan broken?"
    );
    assert!(
        broken.is_empty(),
        "citations of headings that do not exist:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_link_between_docs_pages_resolves() {
    let pages = pages();
    let anchors: BTreeMap<&str, BTreeSet<String>> = pages
        .iter()
        .map(|(name, text)| (name.as_str(), anchors(text)))
        .collect();
    let mut broken = Vec::new();
    for (name, text) in &pages {
        let dir = Path::new(name).parent().unwrap_or(Path::new(""));
        for (number, line) in text.lines().enumerate() {
            for link in without_code_spans(line).split("](").skip(1) {
                let Some(end) = link.find(')') else { continue };
                let target = &link[..end];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let page = if file.is_empty() {
                    name.clone()
                } else {
                    normalise(&dir.join(file))
                };
                let resolves = if page.ends_with(".md") {
                    match anchors.get(page.as_str()) {
                        Some(known) => anchor.is_empty() || known.contains(anchor),
                        None => anchor.is_empty() && root().join(&page).exists(),
                    }
                } else {
                    root().join(&page).exists()
                };
                if !resolves {
                    broken.push(format!("{name}:{}: ({target})", number + 1));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The line without its `code spans`, whose brackets are not links.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// `docs/../README.md` → `README.md`, without touching the file system.
fn normalise(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part.as_os_str().to_string_lossy().as_ref() {
            ".." => {
                parts.pop();
            }
            "." => {}
            other => parts.push(other.to_string()),
        }
    }
    parts.join("/")
}

/// Every line of the source, manifest and Markdown files under crates/ but this one (whose
/// texts name what they look for), with where it stands: `crates/…/file.rs:12`.
fn code_lines() -> Vec<(String, String)> {
    let mut files = Vec::new();
    source_files(&root().join("crates"), &mut files);
    let this_file = Path::new(file!()).file_name().unwrap();
    let mut lines = Vec::new();
    for file in files.iter().filter(|f| f.file_name() != Some(this_file)) {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        for (number, line) in text.lines().enumerate() {
            lines.push((format!("{shown}:{}", number + 1), line.to_string()));
        }
    }
    lines
}

/// A "§" cites a section of some document; only public standards (RFCs, JSON Schema) may be
/// cited that way, since every other document a comment could mean is not in the repository.
#[test]
fn code_cites_no_document_outside_the_repository() {
    let outside: Vec<String> = code_lines()
        .into_iter()
        .filter(|(_, line)| {
            let standard = line.contains("RFC ") || line.contains("JSON Schema");
            (line.contains('§') && !standard) || line.contains("-reference")
        })
        .map(|(place, line)| format!("{place}: {}", line.trim()))
        .collect();
    assert!(
        outside.is_empty(),
        "cite docs/<page>.md#<anchor> instead (and write what the docs lack into them):\n{}",
        outside.join("\n")
    );
}

/// A heading cited by its quoted text (`docs/mcp.md, "Bounds"`) escapes the anchor check above:
/// renaming the heading would leave the citation dangling unseen. Code cites `docs/mcp.md#bounds`.
#[test]
fn code_cites_docs_headings_by_anchor() {
    let quoted: Vec<String> = code_lines()
        .into_iter()
        .filter(|(_, line)| cites_quoted_heading(line))
        .map(|(place, line)| format!("{place}: {}", line.trim()))
        .collect();
    assert!(
        quoted.is_empty(),
        "cite docs/<page>.md#<anchor> instead of a quoted heading:\n{}",
        quoted.join("\n")
    );
}

/// `docs/<page>.md` followed by a comma or space and a quoted text.
fn cites_quoted_heading(line: &str) -> bool {
    let mut rest = line;
    while let Some(start) = rest.find("docs/") {
        rest = &rest[start + "docs/".len()..];
        let Some(end) = rest.find(".md") else {
            return false;
        };
        let name = &rest[..end];
        let after = &rest[end + ".md".len()..];
        let page = !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        if page && after.starts_with([',', ' ']) && after[1..].trim_start().starts_with('"') {
            return true;
        }
    }
    false
}
