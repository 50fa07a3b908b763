//! `zi.register_subagent_profile` on the real Lua host: validated like a Markdown profile,
//! errors at the calling line, composed after Markdown profiles into the registry's catalog.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zi_config::subagent_profiles::{
    ProfileDiagnostic, ProfileSource, SubagentProfile, SubagentProfileRegistry,
};
use zi_ext_lua::discovery::{self, ExtensionSource};
use zi_ext_lua::{LoadOptions, load};
use zi_protocol::ThinkingLevel;

fn source(dir: &Path, name: &str, code: &str) -> ExtensionSource {
    let path = dir.join(format!("{name}.lua"));
    std::fs::write(&path, code).unwrap();
    discovery::resolve(&path).unwrap().remove(0)
}

struct Loaded {
    registry: Arc<SubagentProfileRegistry>,
    warnings: Vec<String>,
    diagnostics: Arc<Mutex<Vec<String>>>,
}

fn load_with(dir: &Path, markdown: Vec<SubagentProfile>, sources: &[ExtensionSource]) -> Loaded {
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let sink = diagnostics.clone();
    let registry = Arc::new(SubagentProfileRegistry::new(
        markdown,
        Arc::new(move |d: &ProfileDiagnostic| sink.lock().unwrap().push(d.to_string())),
    ));
    let options = LoadOptions {
        mode: "rpc".into(),
        cwd: dir.to_path_buf(),
        subagent_profiles: Some(registry.clone()),
        ..LoadOptions::default()
    };
    let (_host, warnings) = load(sources, &options);
    Loaded {
        registry,
        warnings,
        diagnostics,
    }
}

#[test]
fn registrations_join_the_catalog_after_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let ext = source(
        dir.path(),
        "team",
        r#"
        zi.register_subagent_profile{ name = "scout", description = "Finds files",
          instructions = "  Look around.  ", model = "mock/m1", thinking = "low" }
        zi.register_subagent_profile{ name = "reviewer", description = "Shadowed",
          instructions = "Never used." }
        "#,
    );
    let markdown = SubagentProfile {
        name: "reviewer".into(),
        description: "From Markdown".into(),
        instructions: "Review.".into(),
        model: None,
        thinking: None,
        source: ProfileSource::Global(PathBuf::from("/agent/subagents/reviewer.md")),
    };
    let loaded = load_with(
        dir.path(),
        vec![markdown.clone()],
        std::slice::from_ref(&ext),
    );
    assert_eq!(loaded.warnings, Vec::<String>::new());
    let catalog = loaded.registry.catalog();
    assert_eq!(catalog.profiles().len(), 2);
    assert_eq!(catalog.profiles()[0], markdown);
    let scout = catalog.get("scout").unwrap();
    assert_eq!(scout.description, "Finds files");
    assert_eq!(scout.instructions, "  Look around.  ");
    assert_eq!(scout.model.as_deref(), Some("mock/m1"));
    assert_eq!(scout.thinking, Some(ThinkingLevel::Low));
    assert_eq!(scout.source, ProfileSource::Extension(ext.entry.clone()));
    assert_eq!(
        *loaded.diagnostics.lock().unwrap(),
        [format!(
            "(subagent profiles) {}: profile reviewer is already defined by /agent/subagents/reviewer.md; ignoring this one",
            ext.entry.display()
        )]
    );
}

#[test]
fn invalid_registrations_fail_the_extension_at_the_calling_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "name",
            r#"{ name = "Scout", description = "d", instructions = "i" }"#,
            "Invalid subagent profile \"Scout\": name must be a bounded lowercase subagent profile name",
        ),
        (
            "nameless",
            r#"{ description = "d", instructions = "i" }"#,
            "Invalid subagent profile \"\": name must be",
        ),
        (
            "description",
            r#"{ name = "a", description = 5, instructions = "i" }"#,
            "Invalid subagent profile \"a\": description must be a non-empty string of at most 4096 bytes",
        ),
        (
            "instructions",
            r#"{ name = "a", description = "d", instructions = " " }"#,
            "Invalid subagent profile \"a\": profile instructions cannot be empty",
        ),
        (
            "long",
            r#"{ name = "a", description = "d", instructions = string.rep("i", 8193) }"#,
            "Invalid subagent profile \"a\": profile instructions cannot exceed 8192 bytes",
        ),
        (
            "model",
            r#"{ name = "a", description = "d", instructions = "i", model = "" }"#,
            "Invalid subagent profile \"a\": model must be a non-empty string of at most 4096 bytes",
        ),
        (
            "thinking",
            r#"{ name = "a", description = "d", instructions = "i", thinking = "huge" }"#,
            "Invalid subagent profile \"a\": thinking must be a supported thinking level",
        ),
        (
            "twice",
            "{ name = \"a\", description = \"d\", instructions = \"i\" }\nzi.register_subagent_profile{ name = \"a\", description = \"d\", instructions = \"i\" }",
            "Subagent profile a is already registered",
        ),
    ];
    for (name, spec, message) in cases {
        let ext = source(
            dir.path(),
            name,
            &format!("local x = 1\nzi.register_subagent_profile{spec}\n"),
        );
        let loaded = load_with(dir.path(), Vec::new(), std::slice::from_ref(&ext));
        let line = if name == "twice" { 3 } else { 2 };
        let prefix = format!(
            "Extension {} failed to load: {}:{line}: {message}",
            ext.entry.display(),
            ext.entry.display()
        );
        assert_eq!(loaded.warnings.len(), 1, "{name}: {:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].starts_with(&prefix),
            "{prefix:?} vs {:?}",
            loaded.warnings
        );
        assert!(loaded.registry.catalog().is_empty(), "{name}");
    }
}

#[test]
fn one_extension_registers_at_most_sixty_four() {
    let dir = tempfile::tempdir().unwrap();
    let ext = source(
        dir.path(),
        "many",
        r#"
        for i = 1, 64 do
          zi.register_subagent_profile{ name = "p" .. i, description = "d", instructions = "i" }
        end
        local ok, err = pcall(zi.register_subagent_profile,
          { name = "p65", description = "d", instructions = "i" })
        assert(not ok and tostring(err):find("At most 64 subagent profiles can be registered", 1, true), tostring(err))
        "#,
    );
    let loaded = load_with(dir.path(), Vec::new(), &[ext]);
    assert_eq!(loaded.warnings, Vec::<String>::new());
    assert_eq!(loaded.registry.catalog().profiles().len(), 64);
}
