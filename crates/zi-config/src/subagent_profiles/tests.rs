//! Loading and composing profiles from real directories.

use std::path::{Path, PathBuf};

use zi_os::sync::lock;

use super::diagnostics::Diagnostics;
use super::markdown::{
    ProfileRoot, ProfileScope, ResourceBudget, load_markdown_profiles, profile_roots,
};
use super::registry::compose;
use super::*;

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

fn profile_text(description: &str) -> String {
    format!("---\ndescription: {description}\n---\nDo the work.\n")
}

fn load(roots: &[ProfileRoot]) -> (Vec<SubagentProfile>, Vec<String>) {
    let mut diagnostics = Diagnostics::default();
    let profiles = load_markdown_profiles(roots, &mut ResourceBudget::default(), &mut diagnostics);
    (profiles, texts(diagnostics))
}

fn texts(diagnostics: Diagnostics) -> Vec<String> {
    diagnostics
        .into_vec()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn global(path: &Path) -> ProfileRoot {
    ProfileRoot {
        path: path.to_path_buf(),
        scope: ProfileScope::Global,
    }
}

fn names(profiles: &[SubagentProfile]) -> Vec<&str> {
    profiles.iter().map(|p| p.name.as_str()).collect()
}

#[test]
fn roots_follow_trust_and_skip_the_agent_dir_itself() {
    let cwd = temp();
    let agent = cwd.path().join("agent");
    let project = cwd.path().join(".zi").join("subagents");
    let global_root = agent.join("subagents");
    let paths = |roots: Vec<ProfileRoot>| roots.into_iter().map(|r| r.path).collect::<Vec<_>>();
    assert_eq!(
        paths(profile_roots(cwd.path(), &agent, true)),
        vec![project.clone(), global_root.clone()]
    );
    assert_eq!(
        paths(profile_roots(cwd.path(), &agent, false)),
        vec![global_root]
    );
    // `<cwd>/.zi` is the agent directory (a session started in $HOME with ~/.zi as agent dir).
    let zi = cwd.path().join(".zi");
    std::fs::create_dir_all(&zi).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        paths(profile_roots(cwd.path(), &zi, true)),
        vec![zi.join("subagents")]
    );
}

#[test]
fn files_are_read_in_name_order_with_names_from_the_file() {
    let dir = temp();
    write(&dir.path().join("zeta.md"), &profile_text("Z"));
    write(
        &dir.path().join("alpha.md"),
        "---\ndescription: A\nname: other\nmodel: a/b\nthinking: low\n---\n\n  Steps.  \n",
    );
    write(&dir.path().join(".hidden.md"), &profile_text("H"));
    write(&dir.path().join("notes.txt"), &profile_text("T"));
    std::fs::create_dir_all(dir.path().join("dir.md")).unwrap_or_else(|e| panic!("{e}"));
    write(
        &dir.path().join("nested").join("deep.md"),
        &profile_text("D"),
    );
    let (profiles, diagnostics) = load(&[global(dir.path())]);
    assert_eq!(diagnostics, Vec::<String>::new());
    assert_eq!(names(&profiles), ["alpha", "zeta"]);
    let alpha = &profiles[0];
    assert_eq!(alpha.instructions, "Steps.");
    assert_eq!(alpha.model.as_deref(), Some("a/b"));
    assert_eq!(alpha.thinking, Some(zi_protocol::ThinkingLevel::Low));
    assert_eq!(
        alpha.source,
        ProfileSource::Global(dir.path().join("alpha.md"))
    );
}

#[test]
fn resource_ignore_files_skip_matching_profiles() {
    let dir = temp();
    for name in ["draft-a.md", "draft-keep.md", "old.md", "wip.md", "kept.md"] {
        write(&dir.path().join(name), &profile_text("d"));
    }
    write(
        &dir.path().join(".gitignore"),
        "# drafts\ndraft*.md\n!draft-keep.md\n",
    );
    write(&dir.path().join(".ignore"), "/old.md\r\n");
    write(&dir.path().join(".fdignore"), "wip.md\n[broken\n");
    let (profiles, diagnostics) = load(&[global(dir.path())]);
    assert_eq!(names(&profiles), ["draft-keep", "kept"]);
    assert_eq!(diagnostics, Vec::<String>::new());
}

#[test]
fn invalid_files_are_skipped_with_a_warning_naming_them() {
    let dir = temp();
    let cases = [
        (
            "Bad-Name.md",
            profile_text("x"),
            "filename must be a bounded lowercase subagent profile name",
        ),
        (
            "nodesc.md",
            "---\nmodel: a/b\n---\nBody".to_string(),
            "description must be a non-empty string of at most 4096 bytes",
        ),
        (
            "numdesc.md",
            "---\ndescription: 5\n---\nBody".to_string(),
            "description must be a non-empty string of at most 4096 bytes",
        ),
        (
            "empty.md",
            "---\ndescription: d\n---\n   \n".to_string(),
            "profile instructions cannot be empty",
        ),
        (
            "long.md",
            format!("---\ndescription: d\n---\n{}", "i".repeat(8193)),
            "profile instructions cannot exceed 8192 bytes",
        ),
        (
            "model.md",
            "---\ndescription: d\nmodel: ''\n---\nBody".to_string(),
            "model must be a non-empty string of at most 4096 bytes",
        ),
        (
            "think.md",
            "---\ndescription: d\nthinking: huge\n---\nBody".to_string(),
            "thinking must be a supported thinking level",
        ),
        (
            "list.md",
            "---\n- a\n---\nBody".to_string(),
            "Frontmatter must be a YAML mapping",
        ),
    ];
    for (file, text, _) in &cases {
        write(&dir.path().join(file), text);
    }
    write(&dir.path().join("good.md"), &profile_text("fine"));
    let (profiles, diagnostics) = load(&[global(dir.path())]);
    assert_eq!(names(&profiles), ["good"]);
    for (file, _, message) in &cases {
        let expected = format!(
            "(subagent profiles) {}: {message}",
            dir.path().join(file).display()
        );
        assert!(
            diagnostics.contains(&expected),
            "{expected} not in {diagnostics:#?}"
        );
    }
    assert_eq!(diagnostics.len(), cases.len());
}

#[test]
fn earlier_roots_win_and_later_ones_collide() {
    let project = temp();
    let global_dir = temp();
    write(
        &project.path().join("reviewer.md"),
        &profile_text("project"),
    );
    write(
        &global_dir.path().join("reviewer.md"),
        &profile_text("global"),
    );
    write(
        &global_dir.path().join("scout.md"),
        &profile_text("global scout"),
    );
    let roots = [
        ProfileRoot {
            path: project.path().to_path_buf(),
            scope: ProfileScope::Project,
        },
        global(global_dir.path()),
    ];
    let (profiles, diagnostics) = load(&roots);
    assert_eq!(names(&profiles), ["reviewer", "scout"]);
    assert_eq!(profiles[0].description, "project");
    assert!(matches!(profiles[0].source, ProfileSource::Project(_)));
    assert_eq!(
        diagnostics,
        [format!(
            "(subagent profiles) {}: profile reviewer is already defined by {}; ignoring this one",
            global_dir.path().join("reviewer.md").display(),
            project.path().join("reviewer.md").display()
        )]
    );
}

#[cfg(unix)]
#[test]
fn a_file_reached_twice_through_symlinks_loads_once() {
    let dir = temp();
    let other = temp();
    write(&dir.path().join("real.md"), &profile_text("r"));
    std::os::unix::fs::symlink(dir.path().join("real.md"), other.path().join("real.md"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(
        dir.path().join("missing.md"),
        dir.path().join("dangling.md"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (profiles, diagnostics) = load(&[global(dir.path()), global(other.path())]);
    assert_eq!(names(&profiles), ["real"]);
    assert_eq!(diagnostics, Vec::<String>::new());
}

#[test]
fn the_sixty_fifth_profile_stops_loading_with_one_limit() {
    let first = temp();
    let second = temp();
    for i in 0..70 {
        write(
            &first.path().join(format!("p{i:02}.md")),
            &profile_text("d"),
        );
    }
    write(&second.path().join("extra.md"), &profile_text("d"));
    let (profiles, diagnostics) = load(&[global(first.path()), global(second.path())]);
    assert_eq!(profiles.len(), 64);
    assert_eq!(
        diagnostics,
        [format!(
            "(subagent profiles) {}: At most 64 subagent profiles can be loaded",
            first.path().join("p64.md").display()
        )]
    );
}

#[test]
fn file_size_budget_and_directory_bounds() {
    let dir = temp();
    let big = dir.path().join("big.md");
    write(
        &big,
        &format!("---\ndescription: d\n---\n{}", "x".repeat(1024 * 1024)),
    );
    write(&dir.path().join("small.md"), &profile_text("d"));
    let (profiles, diagnostics) = load(&[global(dir.path())]);
    assert_eq!(names(&profiles), ["small"]);
    assert_eq!(
        diagnostics,
        [format!(
            "(subagent profiles) {}: Resource files cannot exceed 1048576 bytes: {}",
            big.display(),
            big.display()
        )]
    );

    let mut diagnostics = Diagnostics::default();
    let text = profile_text("d");
    let mut budget = ResourceBudget::new(text.len() as u64 + 10);
    let two = temp();
    write(&two.path().join("a.md"), &text);
    write(&two.path().join("b.md"), &text);
    let profiles = load_markdown_profiles(&[global(two.path())], &mut budget, &mut diagnostics);
    assert_eq!(names(&profiles), ["a"]);
    let texts = texts(diagnostics);
    assert_eq!(
        texts,
        [format!(
            "(subagent profiles) {}: Session resources cannot retain more than {} bytes",
            two.path().join("b.md").display(),
            text.len() + 10
        )]
    );

    let crowded = temp();
    for i in 0..4100 {
        std::fs::File::create(crowded.path().join(format!("f{i}.txt")))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let (_, diagnostics) = load(&[global(crowded.path())]);
    assert_eq!(
        diagnostics,
        [format!(
            "(subagent profiles) {}: Resource directories are limited to 4096 entries",
            crowded.path().display()
        )]
    );
}

fn extension_profile(name: &str, entry: &str) -> SubagentProfile {
    SubagentProfile {
        name: name.to_string(),
        description: "d".into(),
        instructions: "i".into(),
        model: None,
        thinking: None,
        source: ProfileSource::Extension(PathBuf::from(entry)),
    }
}

fn markdown_profile(name: &str) -> SubagentProfile {
    SubagentProfile {
        source: ProfileSource::Global(PathBuf::from(format!("/agent/subagents/{name}.md"))),
        ..extension_profile(name, "")
    }
}

#[test]
fn registrations_come_last_and_markdown_shadows_them() {
    let dir = temp();
    write(&dir.path().join("reviewer.md"), &profile_text("md"));
    let (markdown, _) = load(&[global(dir.path())]);
    let mut diagnostics = Diagnostics::default();
    let catalog = compose(
        &markdown,
        vec![
            extension_profile("reviewer", "/ext/a.lua"),
            extension_profile("scout", "/ext/a.lua"),
            extension_profile("scout", "/ext/b.lua"),
        ],
        &mut diagnostics,
    );
    assert_eq!(names(catalog.profiles()), ["reviewer", "scout"]);
    assert_eq!(
        catalog.get("reviewer").map(|p| p.description.as_str()),
        Some("md")
    );
    let texts = texts(diagnostics);
    assert_eq!(
        texts,
        [
            format!(
                "(subagent profiles) /ext/a.lua: profile reviewer is already defined by {}; ignoring this one",
                dir.path().join("reviewer.md").display()
            ),
            "(subagent profiles) /ext/b.lua: profile scout is already defined by /ext/a.lua; ignoring this one".to_string(),
        ]
    );
    let mut diagnostics = Diagnostics::default();
    let many = (0..65)
        .map(|i| extension_profile(&format!("p{i}"), "/ext/c.lua"))
        .collect();
    let catalog = compose(&[], many, &mut diagnostics);
    assert_eq!(catalog.profiles().len(), 64);
    assert_eq!(diagnostics.into_vec().len(), 1);
}

#[test]
fn the_registry_publishes_changed_catalogs() {
    let reported = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reported.clone();
    let registry = SubagentProfileRegistry::new(
        Vec::new(),
        std::sync::Arc::new(move |d: &ProfileDiagnostic| lock(&sink).push(d.to_string())),
    );
    assert!(registry.catalog().is_empty());
    registry.set_extension_profiles(vec![extension_profile("scout", "/e.lua")]);
    let first = registry.catalog();
    assert_eq!(names(first.profiles()), ["scout"]);
    registry.set_extension_profiles(vec![extension_profile("scout", "/e.lua")]);
    assert!(
        std::sync::Arc::ptr_eq(&first, &registry.catalog()),
        "an equal catalog is not a change"
    );
    registry.set_extension_profiles(vec![
        extension_profile("scout", "/e.lua"),
        extension_profile("scout", "/f.lua"),
    ]);
    assert_eq!(lock(&reported).len(), 1);
}

/// A deferred registry reads the Markdown profiles once, on first use, and reports their
/// diagnostics then; registrations before that first use compose after them as usual.
#[test]
fn a_deferred_registry_reads_markdown_on_first_use() {
    let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reported = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let registry = |reads: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
        let reads = reads.clone();
        let sink = reported.clone();
        SubagentProfileRegistry::deferred(
            Box::new(move || {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let diagnostic = ProfileDiagnostic::Limit {
                    limit: 64,
                    path: Some("/agent/subagents/p64.md".into()),
                    message: "At most 64 subagent profiles can be loaded".into(),
                };
                (vec![markdown_profile("scout")], vec![diagnostic])
            }),
            std::sync::Arc::new(move |d: &ProfileDiagnostic| lock(&sink).push(d.to_string())),
        )
    };
    let count = |reads: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
        reads.load(std::sync::atomic::Ordering::SeqCst)
    };

    // An extension generation without registrations needs no Markdown.
    let lazy = registry(&reads);
    lazy.set_extension_profiles(Vec::new());
    assert_eq!((count(&reads), lock(&reported).len()), (0, 0));
    assert_eq!(names(lazy.catalog().profiles()), ["scout"]);
    assert_eq!((count(&reads), lock(&reported).len()), (1, 1));
    lazy.load();
    assert_eq!(names(lazy.catalog().profiles()), ["scout"]);
    assert_eq!((count(&reads), lock(&reported).len()), (1, 1), "read once");

    // Registrations need the Markdown profiles for their collisions: reported in that order.
    let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    lock(&reported).clear();
    let registering = registry(&reads);
    registering.set_extension_profiles(vec![extension_profile("scout", "/e.lua")]);
    assert_eq!(count(&reads), 1);
    let reported = lock(&reported).clone();
    assert_eq!(reported.len(), 2, "{reported:?}");
    assert!(reported[0].contains("At most 64"), "{reported:?}");
    assert!(reported[1].contains("already defined by"), "{reported:?}");
    assert_eq!(names(registering.catalog().profiles()), ["scout"]);
    // A later generation (a reload) composes with the same Markdown profiles.
    registering.set_extension_profiles(vec![extension_profile("fixer", "/e.lua")]);
    assert_eq!(names(registering.catalog().profiles()), ["scout", "fixer"]);
    assert_eq!(count(&reads), 1);
}

#[test]
fn discovery_without_directories_reports_nothing() {
    let cwd = temp();
    let agent = temp();
    let (profiles, diagnostics) = discover_markdown(cwd.path(), agent.path(), true);
    assert!(profiles.is_empty() && diagnostics.is_empty());
}
