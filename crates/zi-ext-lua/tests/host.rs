//! The Lua host without a session: loading, registration rules, tools, deadlines and
//! cancellation.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use zi_agent::extension::ExtensionHost;
use zi_agent::{SessionHost, ToolCallContext};
use zi_ext_lua::discovery::{self, ExtensionSource};
use zi_ext_lua::{LoadOptions, LuaHost, load};

fn source(dir: &Path, name: &str, code: &str) -> ExtensionSource {
    let path = dir.join(format!("{name}.lua"));
    std::fs::write(&path, code).unwrap_or_else(|e| panic!("write: {e}"));
    discovery::resolve(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn options(dir: &Path) -> LoadOptions {
    LoadOptions {
        mode: "rpc".into(),
        cwd: dir.to_path_buf(),
        reserved_tools: vec!["bash".into()],
        sandbox: Default::default(),
        subagent_profiles: None,
    }
}

fn call(arguments: serde_json::Value, cancel: CancellationToken) -> ToolCallContext {
    ToolCallContext {
        call_id: "c1".into(),
        raw_arguments: arguments,
        cancel,
        progress: Arc::new(|_| {}),
        host: SessionHost::detached(),
    }
}

fn loaded(dir: &Path, sources: &[ExtensionSource]) -> (LuaHost, Vec<String>) {
    load(sources, &options(dir))
}

#[tokio::test]
async fn tools_return_text_or_json_and_respect_their_timeout() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ext = source(
        dir.path(),
        "tools",
        r#"
        zi.register_tool{ name = "echo", description = "echoes",
          parameters = { type = "object", properties = { text = { type = "string" } } },
          execute = function(p) return p.text end }
        zi.register_tool{ name = "empty_schema", description = "no params", parameters = { type = "object", properties = {} },
          execute = function() return { ok = true, list = { 1, 2 } } end }
        zi.register_tool{ name = "slow", description = "loops", timeout_ms = 200,
          execute = function() while true do end end }
        zi.register_tool{ name = "bash", description = "taken", execute = function() end }
        "#,
    );
    let (host, warnings) = loaded(dir.path(), &[ext]);
    // The built-in name collides, so the whole extension is refused.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("tool bash is already registered"),
        "{warnings:?}"
    );
    assert!(host.tools().is_empty());

    let ext = source(
        dir.path(),
        "tools2",
        r#"
        zi.register_tool{ name = "echo", description = "echoes",
          parameters = { type = "object", properties = { text = { type = "string" } } },
          execute = function(p) return p.text end }
        zi.register_tool{ name = "empty_schema", description = "no params", parameters = { type = "object", properties = {} },
          execute = function() return { ok = true, list = { 1, 2 } } end }
        zi.register_tool{ name = "slow", description = "loops", timeout_ms = 200,
          execute = function() while true do end end }
        "#,
    );
    let (host, warnings) = loaded(dir.path(), &[ext]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let tools = host.tools();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[1].parameters()["properties"], json!({}));
    let echoed = tools[0]
        .execute_json(call(json!({"text": "hi"}), CancellationToken::new()))
        .await;
    assert_eq!(echoed, zi_agent::ToolOutput::text("hi"));
    let structured = tools[1]
        .execute_json(call(json!({}), CancellationToken::new()))
        .await;
    assert_eq!(
        structured.details,
        Some(json!({"ok": true, "list": [1, 2]}))
    );
    let slow = tools[2]
        .execute_json(call(json!({}), CancellationToken::new()))
        .await;
    assert!(slow.is_error);
    assert_eq!(
        slow.content,
        zi_agent::ToolOutput::text("Extension tool exceeded its time limit").content
    );
    // Cancellation stops a running tool; the extension keeps working.
    let cancel = CancellationToken::new();
    let running = tools[2].execute_json(call(json!({}), cancel.clone()));
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    };
    let (cancelled, ()) = tokio::join!(running, canceller);
    assert!(cancelled.is_error);
    let again = tools[0]
        .execute_json(call(json!({"text": "still"}), CancellationToken::new()))
        .await;
    assert_eq!(again, zi_agent::ToolOutput::text("still"));
}

#[tokio::test]
async fn registration_rules_and_require() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let module_dir = dir.path().join("greeter");
    std::fs::create_dir_all(module_dir.join("lib")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        module_dir.join("lib/words.lua"),
        "return { greet = function(n) return 'hello ' .. n end }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        module_dir.join("init.lua"),
        r#"
        local words = require("lib.words")
        zi.register_command{ name = "greet", description = "greets", argument_hint = "NAME",
          execute = function(args)
            -- Registration after loading is refused.
            local ok, err = pcall(zi.register_command, { name = "late", execute = function() end })
            assert(not ok and tostring(err):find("only allowed while the extension loads"))
            print("printing goes to stderr")
            return words.greet(args)
          end }
        "#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bad_name = source(
        dir.path(),
        "badname",
        "zi.register_command{ name = 'Bad_Name', execute = function() end }",
    );
    let sources: Vec<ExtensionSource> = discovery::resolve(&module_dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .chain([bad_name])
        .collect();
    let (host, warnings) = loaded(dir.path(), &sources);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("badname.lua:1: Invalid command name"),
        "{warnings:?}"
    );
    let commands = host.commands();
    // The extension's command, then the built-in `reload`.
    assert_eq!(commands.len(), 2);
    assert_eq!(commands[1].name, "reload");
    assert_eq!(commands[0].extension_id, "greeter");
    assert_eq!(commands[0].argument_hint.as_deref(), Some("NAME"));
    let result = host
        .invoke("greet", "zi".into(), CancellationToken::new())
        .unwrap_or_else(|| panic!("greet is registered"))
        .await;
    assert_eq!(result, Ok(Some("hello zi".to_string())));
    assert!(
        host.invoke("nope", String::new(), CancellationToken::new())
            .is_none()
    );
}

#[tokio::test]
async fn the_catalog_is_bounded() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let many = source(
        dir.path(),
        "many",
        "for i = 1, 100 do zi.register_command{ name = 'c' .. i, execute = function() end } end",
    );
    let more = source(
        dir.path(),
        "more",
        "for i = 101, 129 do zi.register_command{ name = 'c' .. i, execute = function() end } end",
    );
    let twice = source(
        dir.path(),
        "twice",
        "zi.register_command{ name = 'x', execute = function() end }\nzi.register_command{ name = 'x', execute = function() end }",
    );
    let (host, warnings) = loaded(dir.path(), &[many, more, twice]);
    // 100 extension commands plus the built-in `reload`, which the bound does not count.
    assert_eq!(host.commands().len(), 101);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("would exceed 128 commands"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("twice.lua:2: Command x is already registered"),
        "{warnings:?}"
    );
}

/// Issue 23 L6: an error zi raises while converting a value the extension handed it names the
/// extension's file and line, like Lua's own errors — arguments, data and a tool's result.
#[tokio::test]
async fn conversion_errors_name_the_script_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let code = [
        "local schema = { type = 'object', properties = {} }",
        "zi.register_tool{ name = 'cycle', parameters = schema, execute = function(p, ctx)",
        "  local t = {}; t.self = t",
        "  ctx.progress(t)",
        "end }",
        "zi.register_tool{ name = 'func', parameters = schema, execute = function(p, ctx)",
        "  ctx.progress({ f = print })",
        "end }",
        "zi.register_tool{ name = 'caught', parameters = schema, execute = function(p, ctx)",
        "  local ok, err = pcall(function() ctx.progress({ f = print }) end)",
        "  return tostring(err)",
        "end }",
        "zi.register_tool{ name = 'argument', parameters = schema, execute = function(p, ctx)",
        "  ctx.exec(42)",
        "end }",
        "zi.register_tool{ name = 'result', parameters = schema, execute = function()",
        "  return { f = print }",
        "end }",
    ]
    .join("\n");
    let ext = source(dir.path(), "conv", &code);
    let file = dir.path().join("conv.lua").display().to_string();
    let (host, warnings) = loaded(dir.path(), &[ext]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let tools = host.tools();
    let mut texts = Vec::new();
    for tool in &tools {
        let output = tool
            .execute_json(call(json!({}), CancellationToken::new()))
            .await;
        let zi_agent::ToolOutput { content, .. } = output;
        texts.push(zi_protocol::message::concat_text(&content));
    }
    let not_json = "the value cannot be converted to JSON";
    // A `pcall` catches mlua's error object, whose text carries the place too.
    let caught = texts.remove(2);
    assert!(
        caught.contains(&format!(
            "{file}:10: {not_json}: unsupported value type `function`"
        )),
        "{caught}"
    );
    assert_eq!(
        texts,
        [
            format!("{file}:4: {not_json}: recursive table detected"),
            format!("{file}:7: {not_json}: unsupported value type `function`"),
            format!("{file}:14: bad argument to ctx.exec: error converting Lua integer to table"),
            format!(
                "{file}:16: Tool result returned a value that is not JSON: {not_json}: unsupported value type `function`"
            ),
        ]
    );

    // While loading: the registration's line, in the warning that refuses the extension.
    let bad = source(
        dir.path(),
        "badschema",
        "local x = 1\nzi.register_tool{ name = 'x', parameters = { type = 'object', default = print }, execute = function() end }",
    );
    let badschema = dir.path().join("badschema.lua").display().to_string();
    let (_, warnings) = loaded(dir.path(), &[bad]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!(
            "{badschema}:2: the value cannot be converted to JSON: unsupported value type `function`"
        )),
        "{warnings:?}"
    );
}
