//! The `zi` table a Lua extension sees (docs/extensions.md), and the per-call `ctx`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mlua::{
    FromLuaMulti, Function, IntoLuaMulti, Lua, LuaSerdeExt, MultiValue, Table, Value as LuaValue,
};
use serde_json::Value;
use zi_agent::AgentSession;
use zi_agent::custom::{CustomDelivery, CustomMessageInput};
use zi_os::sync::lock;
use zi_protocol::event::EntryData;
use zi_protocol::image::ImageContent;
use zi_protocol::message::{ContentBlock, MessageContent};

use crate::catalog;
use crate::progress::ProgressSender;
use crate::worker::{CommandSpec, Shared, ToolSpec};

/// Registry tables holding the registered functions.
pub const COMMANDS: &str = "zi.commands";
pub const TOOLS: &str = "zi.tools";
pub const HANDLERS: &str = "zi.handlers";
const EVENTS: &[&str] = &[
    "session_start",
    "session_shutdown",
    "agent_start",
    "agent_settled",
];

/// The text of an error raised by zi itself (no location yet).
fn error_message(error: &mlua::Error) -> String {
    crate::worker::error_text(error)
}

fn runtime(message: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(message.into())
}

/// An error that names the script line calling into zi, like Lua's own `error`.
fn located(lua: &Lua, message: impl std::fmt::Display) -> mlua::Error {
    let place = lua.inspect_stack(1).and_then(|frame| {
        let line = frame.curr_line();
        let source = frame.source().short_src.map(|s| s.into_owned())?;
        (line > 0).then(|| format!("{source}:{line}: "))
    });
    runtime(format!("{}{message}", place.unwrap_or_default()))
}

/// Whether `text` starts as a located Lua error does: `SOURCE:LINE: message`.
fn has_location(text: &str) -> bool {
    let Some(end) = text.find(": ") else {
        return false;
    };
    text[..end].rsplit_once(':').is_some_and(|(source, line)| {
        !source.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
    })
}

/// `error` with the calling script line in front, unless it names a place already (a located
/// error, or a Lua error from a function the callback ran); a memory error stays what it is.
fn placed(lua: &Lua, error: mlua::Error) -> mlua::Error {
    if matches!(error, mlua::Error::MemoryError(_)) {
        return error;
    }
    let text = error_message(&error);
    if has_location(&text) {
        error
    } else {
        located(lua, text)
    }
}

/// A function of the `zi` table or of `ctx`, `name` as scripts write it. Every error it raises
/// names the script line that called it, like Lua's own errors (docs/extensions.md#errors):
/// its arguments are converted inside it, so a value zi cannot take — a function where data
/// is expected, a table that contains itself — reports the extension's file and line, also to
/// a `pcall` that catches it.
fn api_function<A, R, F>(lua: &Lua, name: &'static str, body: F) -> mlua::Result<Function>
where
    A: FromLuaMulti,
    R: IntoLuaMulti,
    F: Fn(&Lua, A) -> mlua::Result<R> + Send + 'static,
{
    lua.create_function(move |lua, arguments: MultiValue| {
        let arguments = A::from_lua_multi(arguments, lua).map_err(|error| {
            located(
                lua,
                format!("bad argument to {name}: {}", error_message(&error)),
            )
        })?;
        body(lua, arguments).map_err(|error| placed(lua, error))
    })
}

pub(crate) fn only_while_loading(shared: &Shared, what: &str) -> mlua::Result<()> {
    if shared.loading.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(runtime(format!(
            "{what} is only allowed while the extension loads"
        )))
    }
}

fn session(shared: &Shared) -> mlua::Result<AgentSession> {
    shared
        .session
        .get()
        .and_then(|host| host.session())
        .ok_or_else(|| runtime("The session is not available yet (the extension is still loading)"))
}

/// Installs `zi`, routes `print`/`io.write` to stderr (stdout belongs to the protocol), removes
/// `os.exit`, confines `require` to the extension's directory, and makes `pcall` unable to
/// swallow a stop.
pub fn install(lua: &Lua, shared: &Arc<Shared>, module_dir: &Path) -> mlua::Result<()> {
    lua.set_named_registry_value(COMMANDS, lua.create_table()?)?;
    lua.set_named_registry_value(TOOLS, lua.create_table()?)?;
    lua.set_named_registry_value(HANDLERS, lua.create_table()?)?;
    let globals = lua.globals();
    let zi = lua.create_table()?;

    add_registration_functions(lua, &zi, shared)?;
    add_session_functions(lua, &zi, shared)?;
    zi.set("extension_id", shared.id.as_str())?;
    globals.set("zi", zi)?;

    let package: Table = globals.get("package")?;
    let dir = module_dir.display().to_string();
    package.set("path", format!("{dir}/?.lua;{dir}/?/init.lua"))?;
    package.set("cpath", "")?;

    let s = shared.clone();
    globals.set(
        "__zi_stopping",
        lua.create_function(move |_, ()| {
            Ok(s.control().is_some_and(|c| c.stop_reason().is_some()))
        })?,
    )?;
    lua.load(PRELUDE).set_name("=zi-prelude").exec()?;
    Ok(())
}

/// `zi.register_command`, `zi.register_tool`, `zi.register_subagent_profile` and `zi.on`: what
/// an extension declares while it loads.
fn add_registration_functions(lua: &Lua, zi: &Table, shared: &Arc<Shared>) -> mlua::Result<()> {
    let s = shared.clone();
    zi.set(
        "register_command",
        api_function(lua, "zi.register_command", move |lua, spec: Table| {
            register_command(lua, &s, spec)
        })?,
    )?;
    let s = shared.clone();
    zi.set(
        "register_tool",
        api_function(lua, "zi.register_tool", move |lua, spec: Table| {
            register_tool(lua, &s, spec)
        })?,
    )?;
    let s = shared.clone();
    zi.set(
        "register_subagent_profile",
        api_function(
            lua,
            "zi.register_subagent_profile",
            move |lua, spec: Table| {
                crate::profiles::register(&s, spec).map_err(|e| located(lua, e))
            },
        )?,
    )?;
    let s = shared.clone();
    zi.set(
        "on",
        api_function(
            lua,
            "zi.on",
            move |lua, (event, handler): (String, Function)| {
                only_while_loading(&s, "zi.on")?;
                if !EVENTS.contains(&event.as_str()) {
                    return Err(runtime(format!(
                        "Unknown event {event:?}; use one of {}",
                        EVENTS.join(", ")
                    )));
                }
                let handlers: Table = lua.named_registry_value(HANDLERS)?;
                let list: Table = match handlers.get::<Option<Table>>(event.as_str())? {
                    Some(list) => list,
                    None => {
                        let list = lua.create_table()?;
                        handlers.set(event.as_str(), &list)?;
                        list
                    }
                };
                list.push(handler)
            },
        )?,
    )?;
    Ok(())
}

/// `zi.append_entry`, `zi.get_entries`, `zi.send_message`, `zi.get_active_tools` and
/// `zi.set_active_tools`: what an extension may do with the session.
fn add_session_functions(lua: &Lua, zi: &Table, shared: &Arc<Shared>) -> mlua::Result<()> {
    let s = shared.clone();
    zi.set(
        "append_entry",
        api_function(
            lua,
            "zi.append_entry",
            move |lua, (custom_type, data): (String, LuaValue)| {
                let data = match data {
                    LuaValue::Nil => None,
                    value => Some(lua.from_value::<Value>(value)?),
                };
                let entry = session(&s)
                    .map_err(|e| located(lua, error_message(&e)))?
                    .append_custom_entry(&custom_type, data)
                    .map_err(|e| located(lua, e.to_string()))?;
                Ok(entry.id)
            },
        )?,
    )?;
    let s = shared.clone();
    zi.set(
        "get_entries",
        api_function(lua, "zi.get_entries", move |lua, custom_type: String| {
            let entries = session(&s)?.custom_entries(&custom_type);
            let list = lua.create_table()?;
            for entry in entries {
                let item = lua.create_table()?;
                item.set("id", entry.id)?;
                item.set("timestamp", entry.timestamp)?;
                if let EntryData::Custom { custom_type, data } = entry.data {
                    item.set("custom_type", custom_type)?;
                    if let Some(data) = data {
                        item.set("data", lua.to_value(&data)?)?;
                    }
                }
                list.push(item)?;
            }
            Ok(list)
        })?,
    )?;
    let s = shared.clone();
    zi.set(
        "send_message",
        api_function(lua, "zi.send_message", move |lua, spec: Table| {
            send_message(lua, &s, spec).map_err(|e| located(lua, error_message(&e)))
        })?,
    )?;
    let s = shared.clone();
    zi.set(
        "get_active_tools",
        api_function(lua, "zi.get_active_tools", move |lua, ()| {
            let session = session(&s).map_err(|e| located(lua, error_message(&e)))?;
            Ok(session.tools().active_names())
        })?,
    )?;
    let s = shared.clone();
    zi.set(
        "set_active_tools",
        api_function(
            lua,
            "zi.set_active_tools",
            move |lua, names: Vec<String>| {
                let session = session(&s).map_err(|e| located(lua, error_message(&e)))?;
                session
                    .tools()
                    .set_active(&names)
                    .map_err(|e| located(lua, e.to_string()))
            },
        )?,
    )?;
    Ok(())
}

const PRELUDE: &str = r#"
local stopping = __zi_stopping
__zi_stopping = nil
local raw_pcall, raw_xpcall, raw_resume = pcall, xpcall, coroutine.resume
local pack, unpack = table.pack, table.unpack
local function checked(results)
  if not results[1] and stopping() then error(results[2], 0) end
  return unpack(results, 1, results.n)
end
pcall = function(...) return checked(pack(raw_pcall(...))) end
xpcall = function(...) return checked(pack(raw_xpcall(...))) end
coroutine.resume = function(...) return checked(pack(raw_resume(...))) end
print = function(...)
  local parts = pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  io.stderr:write(table.concat(parts, "\t", 1, parts.n), "\n")
end
io.stdout = io.stderr
io.output(io.stderr)
os.exit = function() error("os.exit is not available to extensions", 2) end
"#;

fn register_command(lua: &Lua, shared: &Shared, spec: Table) -> mlua::Result<()> {
    only_while_loading(shared, "zi.register_command").map_err(|e| located(lua, e.to_string()))?;
    let name: String = spec.get("name")?;
    let description: String = spec
        .get::<Option<String>>("description")?
        .unwrap_or_default();
    let hint: Option<String> = spec.get("argument_hint")?;
    let execute: Function = spec
        .get("execute")
        .map_err(|_| runtime(format!("Command {name} needs an execute function")))?;
    catalog::validate_command(&name, &description, hint.as_deref()).map_err(|e| located(lua, e))?;
    let commands: Table = lua.named_registry_value(COMMANDS)?;
    if commands.contains_key(name.as_str())? {
        return Err(located(
            lua,
            format!("Command {name} is already registered"),
        ));
    }
    commands.set(name.as_str(), execute)?;
    lock(&shared.registrations).commands.push(CommandSpec {
        name,
        description,
        argument_hint: hint,
    });
    Ok(())
}

fn register_tool(lua: &Lua, shared: &Shared, spec: Table) -> mlua::Result<()> {
    only_while_loading(shared, "zi.register_tool").map_err(|e| located(lua, e.to_string()))?;
    let name: String = spec.get("name")?;
    catalog::validate_tool_name(&name).map_err(|e| located(lua, e))?;
    let description: String = spec
        .get::<Option<String>>("description")?
        .unwrap_or_default();
    let parameters = match spec.get::<LuaValue>("parameters")? {
        LuaValue::Nil => serde_json::json!({"type": "object", "properties": {}}),
        value => lua.from_value::<Value>(value)?,
    };
    if !parameters.is_object() {
        return Err(runtime(format!(
            "Tool {name}: parameters must be a JSON Schema object"
        )));
    }
    // An empty Lua table converts to an array; a schema's `properties` must be an object.
    let parameters = fix_empty_properties(parameters);
    let timeout_ms = spec
        .get::<Option<u64>>("timeout_ms")?
        .unwrap_or(catalog::DEFAULT_TOOL_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > catalog::MAX_TOOL_TIMEOUT_MS {
        return Err(runtime(format!(
            "Tool {name}: timeout_ms must be between 1 and {}",
            catalog::MAX_TOOL_TIMEOUT_MS
        )));
    }
    let active = spec.get::<Option<bool>>("active")?.unwrap_or(true);
    let output = match spec.get::<LuaValue>("output_schema")? {
        LuaValue::Nil => None,
        value => {
            let schema = fix_empty_properties(lua.from_value::<Value>(value)?);
            let validator = jsonschema::validator_for(&schema)
                .map_err(|e| located(lua, format!("Tool {name}: invalid output_schema: {e}")))?;
            Some(Arc::new(validator))
        }
    };
    let execute: Function = spec
        .get("execute")
        .map_err(|_| runtime(format!("Tool {name} needs an execute function")))?;
    let tools: Table = lua.named_registry_value(TOOLS)?;
    if tools.contains_key(name.as_str())? {
        return Err(located(lua, format!("Tool {name} is already registered")));
    }
    tools.set(name.as_str(), execute)?;
    lock(&shared.registrations).tools.push(ToolSpec {
        name,
        description,
        parameters,
        timeout: Duration::from_millis(timeout_ms),
        active,
        output,
    });
    Ok(())
}

fn fix_empty_properties(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        for key in ["properties", "patternProperties", "definitions", "$defs"] {
            if object
                .get(key)
                .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
            {
                object.insert(key.to_string(), Value::Object(Default::default()));
            }
        }
        if object
            .get("required")
            .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
        {
            object.remove("required");
        }
        for key in ["properties", "definitions", "$defs"] {
            if let Some(Value::Object(children)) = object.get_mut(key) {
                for child in children.values_mut() {
                    *child = fix_empty_properties(std::mem::take(child));
                }
            }
        }
        if let Some(items) = object.get_mut("items") {
            *items = fix_empty_properties(std::mem::take(items));
        }
    }
    schema
}

fn send_message(lua: &Lua, shared: &Shared, spec: Table) -> mlua::Result<()> {
    let custom_type: String = spec.get("custom_type")?;
    let content = match spec.get::<LuaValue>("content")? {
        LuaValue::String(text) => MessageContent::Text(text.to_string_lossy()),
        LuaValue::Table(parts) => {
            let mut blocks = Vec::new();
            for (index, part) in parts.sequence_values::<LuaValue>().enumerate() {
                blocks.push(content_part(index + 1, part?)?);
            }
            MessageContent::Parts(blocks)
        }
        _ => {
            return Err(runtime(
                "Message content must be a string or a list of parts",
            ));
        }
    };
    let display = spec.get::<Option<bool>>("display")?.unwrap_or(true);
    let details = match spec.get::<LuaValue>("details")? {
        LuaValue::Nil => None,
        value => Some(lua.from_value::<Value>(value)?),
    };
    let delivery = match spec.get::<Option<String>>("delivery")?.as_deref() {
        None | Some("append") => CustomDelivery::Append,
        Some("trigger_turn") => CustomDelivery::TriggerTurn,
        Some("steer") => CustomDelivery::Steer,
        Some("follow_up") => CustomDelivery::FollowUp,
        Some("next_turn") => CustomDelivery::NextTurn,
        Some(other) => {
            return Err(runtime(format!(
                "Unknown delivery {other:?}; use append, trigger_turn, steer, follow_up or next_turn"
            )));
        }
    };
    let starter = session(shared)?
        .send_custom_message(
            CustomMessageInput {
                custom_type,
                content,
                display,
                details,
            },
            delivery,
        )
        .map_err(|e| runtime(e.to_string()))?;
    // Dropping the starter releases a triggered run.
    drop(starter);
    Ok(())
}

/// One part of a message's content list (`index` counts from 1, as Lua does): a string,
/// `{text = …}`, or `{type = "image", data = <base64>, mime_type = …}`, whose image is checked
/// as `session.prompt` checks its images, with the same problems in the message.
fn content_part(index: usize, part: LuaValue) -> mlua::Result<ContentBlock> {
    let block = match part {
        LuaValue::String(text) => return Ok(ContentBlock::text(text.to_string_lossy())),
        LuaValue::Table(block) => block,
        _ => return Err(runtime(PART_KINDS)),
    };
    match block.get::<Option<String>>("type")?.as_deref() {
        None | Some("text") => Ok(ContentBlock::text(block.get::<String>("text")?)),
        Some("image") => {
            let text_of = |key: &str| -> mlua::Result<String> {
                Ok(match block.get::<LuaValue>(key)? {
                    LuaValue::String(value) => value.to_string_lossy(),
                    _ => String::new(),
                })
            };
            let image = ImageContent::new(text_of("data")?, &text_of("mime_type")?)
                .map_err(|problem| runtime(format!("Message content[{index}] {problem}")))?;
            Ok(image.into())
        }
        Some(_) => Err(runtime(PART_KINDS)),
    }
}

const PART_KINDS: &str = "Message content parts must be strings, {text = …} or {type = \"image\", data = …, mime_type = …}";

/// The `ctx` of one call: mode, cwd, session, `cancelled()` and `exec{}`.
pub fn context(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Table> {
    let ctx = lua.create_table()?;
    ctx.set("mode", shared.env.mode.as_str())?;
    ctx.set("cwd", shared.env.cwd.display().to_string())?;
    ctx.set("extension_id", shared.id.as_str())?;
    if let Ok(session) = session(shared) {
        let info = lua.create_table()?;
        info.set("id", session.session_id())?;
        match session.journal_path() {
            Some(file) => {
                info.set("type", "journal")?;
                info.set("file", file.display().to_string())?;
            }
            None => info.set("type", "memory")?,
        }
        ctx.set("session", info)?;
    }
    let s = shared.clone();
    ctx.set(
        "cancelled",
        api_function(lua, "ctx.cancelled", move |_, ()| {
            Ok(s.control().is_some_and(|c| c.is_cancelled()))
        })?,
    )?;
    let s = shared.clone();
    ctx.set(
        "exec",
        api_function(lua, "ctx.exec", move |lua, spec: Table| exec(lua, &s, spec))?,
    )?;
    Ok(ctx)
}

/// `ctx.progress(text | table)`, only in a tool's `ctx`: replaces the pending update (see
/// [`crate::progress`]); an update over the bounds raises an error at the calling line.
pub fn add_progress(lua: &Lua, ctx: &Table, progress: ProgressSender) -> mlua::Result<()> {
    ctx.set(
        "progress",
        api_function(lua, "ctx.progress", move |lua, report: LuaValue| {
            let report = match report {
                LuaValue::String(text) => Value::String(text.to_string_lossy()),
                LuaValue::Table(_) => lua.from_value::<Value>(report)?,
                other => {
                    return Err(located(
                        lua,
                        format!(
                            "ctx.progress takes a string or a table, not a {}",
                            other.type_name()
                        ),
                    ));
                }
            };
            let partial = crate::progress::partial_result(report).map_err(|e| located(lua, e))?;
            progress.report(partial);
            Ok(())
        })?,
    )
}

/// `ctx.exec{"cmd", "arg", …, cwd = …}`: runs a process in its own process group (see
/// [`crate::exec`]). Returns `{code, stdout, stderr}`.
fn exec(lua: &Lua, shared: &Shared, spec: Table) -> mlua::Result<Table> {
    let mut argv: Vec<String> = Vec::new();
    if let Some(cmd) = spec.get::<Option<String>>("cmd")? {
        argv.push(cmd);
        if let Some(args) = spec.get::<Option<Vec<String>>>("args")? {
            argv.extend(args);
        }
    } else {
        for value in spec.sequence_values::<String>() {
            argv.push(value?);
        }
    }
    let Some((program, args)) = argv.split_first() else {
        return Err(runtime("ctx.exec needs a command"));
    };
    let cwd = spec
        .get::<Option<String>>("cwd")?
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| shared.env.cwd.clone());
    let control = shared.control();
    let sandbox = shared.env.sandbox.get();
    let finished = crate::exec::run(program, args, &cwd, &sandbox, control.as_deref())
        .map_err(|error| runtime(error.to_string()))?;
    let result = lua.create_table()?;
    result.set("code", finished.code)?;
    result.set("stdout", lua.create_string(&finished.stdout)?)?;
    result.set("stderr", lua.create_string(&finished.stderr)?)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::has_location;

    #[test]
    fn located_texts_start_with_source_and_line() {
        assert!(has_location("/a/b.lua:27: Progress update exceeds 16 KiB"));
        assert!(has_location("b.lua:1: x"));
        assert!(!has_location("deserialize error: recursive table detected"));
        assert!(!has_location(
            "bad argument #1 to `f`: error converting Lua nil to String"
        ));
        assert!(!has_location(":12: no source"));
        assert!(!has_location("b.lua:: no line"));
        assert!(!has_location("Progress update exceeds 16 KiB"));
    }
}
