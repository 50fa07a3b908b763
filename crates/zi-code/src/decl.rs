//! TypeScript-style declarations of the tools a cell can call, generated from their JSON
//! Schemas, for the `code` tool's description (docs/code-mode.md#the-api).
//!
//! Bounded on purpose (the text goes into every provider request): depth ≤ 4 (deeper → `object`
//! / `unknown[]`), ≤ 40 properties per object, ≤ 16 enum members (else the base type), one line
//! of description per member cut at 120 characters, local `$ref`s (`#/$defs/X`,
//! `#/definitions/X`) inlined once per path (a cycle → `unknown`). Constraints that change what
//! the model should send (integer, minimum/maximum, lengths, items, pattern, format, default) go
//! into the member's comment; the rest is dropped. Names that are not identifiers are quoted
//! (`zi["my-tool"]`).

use serde_json::{Value, json};

const MAX_DEPTH: usize = 4;
const MAX_PROPS: usize = 40;
const MAX_ENUM: usize = 16;
const MAX_DOC: usize = 120;

/// One tool as the declarations show it.
pub struct Decl<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub input: &'a Value,
    /// The output schema when the tool declares one; else the call resolves to the text.
    pub output: Option<&'a Value>,
}

/// `declare const zi: { … }` around `members`.
pub fn wrap(members: &str) -> String {
    format!("declare const zi: {{\n{members}}};\n")
}

/// `declare const zi: { … }` for the tools, in the order given.
#[cfg(test)]
fn declarations(tools: &[Decl]) -> String {
    wrap(&tools.iter().map(member).collect::<String>())
}

/// One tool's member of the declaration: its doc line and its signature.
pub fn member(tool: &Decl) -> String {
    let mut out = String::new();
    let doc = first_line(tool.description);
    if !doc.is_empty() {
        out.push_str(&format!("  /** {doc} */\n"));
    }
    let input = ts_type(tool.input, tool.input, 1, &mut Vec::new());
    let output = tool
        .output
        .map_or("string".to_string(), |o| ts_type(o, o, 1, &mut Vec::new()));
    out.push_str(&format!(
        "  {}(input: {input}): Promise<{output}>;\n",
        member_name(tool.name)
    ));
    out
}

fn member_name(name: &str) -> String {
    let ident = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        Value::String(name.to_string()).to_string()
    }
}

fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let line = line.replace("*/", "* /");
    if line.chars().count() > MAX_DOC {
        let cut: String = line.chars().take(MAX_DOC - 1).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// The TypeScript type of `schema`; `root` resolves local `$ref`s; `depth` is the nesting of
/// the object being printed (indentation and the depth bound).
fn ts_type(schema: &Value, root: &Value, depth: usize, refs: &mut Vec<String>) -> String {
    let Some(map) = schema.as_object() else {
        // `true` / missing schema: anything.
        return if schema == &Value::Bool(false) {
            "never".into()
        } else {
            "unknown".into()
        };
    };
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        if refs.iter().any(|seen| seen == r) {
            return "unknown".into();
        }
        let target = r
            .strip_prefix("#/$defs/")
            .map(|n| &root["$defs"][n])
            .or_else(|| {
                r.strip_prefix("#/definitions/")
                    .map(|n| &root["definitions"][n])
            });
        return match target {
            Some(t) if !t.is_null() => {
                refs.push(r.to_string());
                let out = ts_type(t, root, depth, refs);
                refs.pop();
                out
            }
            _ => "unknown".into(),
        };
    }
    if let Some(c) = map.get("const") {
        return literal(c);
    }
    if let Some(values) = map.get("enum").and_then(Value::as_array)
        && values.len() <= MAX_ENUM
    {
        return values.iter().map(literal).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = map.get(key).and_then(Value::as_array) {
            let mut parts: Vec<String> = Vec::new();
            for option in options {
                let t = ts_type(option, root, depth, refs);
                if !parts.contains(&t) {
                    parts.push(t);
                }
            }
            return parts.join(" | ");
        }
    }
    if let Some(all) = map.get("allOf").and_then(Value::as_array) {
        let parts: Vec<String> = all.iter().map(|s| ts_type(s, root, depth, refs)).collect();
        return parts.join(" & ");
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if map.contains_key("properties") => vec!["object"],
        _ if map.contains_key("items") => vec!["array"],
        _ => vec![],
    };
    if types.is_empty() {
        return "unknown".into();
    }
    let parts: Vec<String> = types
        .iter()
        .map(|t| match *t {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => array_type(map.get("items"), root, depth, refs),
            "object" => object_type(schema, root, depth, refs),
            _ => "unknown".into(),
        })
        .collect();
    parts.join(" | ")
}

fn array_type(items: Option<&Value>, root: &Value, depth: usize, refs: &mut Vec<String>) -> String {
    let Some(items) = items else {
        return "unknown[]".into();
    };
    if depth > MAX_DEPTH {
        return "unknown[]".into();
    }
    let inner = ts_type(items, root, depth, refs);
    if inner.contains(' ') && !inner.starts_with('{') {
        format!("({inner})[]")
    } else if inner.starts_with('{') {
        format!("Array<{inner}>")
    } else {
        format!("{inner}[]")
    }
}

fn object_type(schema: &Value, root: &Value, depth: usize, refs: &mut Vec<String>) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return match schema.get("additionalProperties") {
            Some(extra @ Value::Object(_)) => {
                format!("Record<string, {}>", ts_type(extra, root, depth + 1, refs))
            }
            _ => "Record<string, unknown>".into(),
        };
    };
    if depth > MAX_DEPTH {
        return "object".into();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pad = "  ".repeat(depth + 1);
    let mut out = String::from("{\n");
    for (name, prop) in props.iter().take(MAX_PROPS) {
        let doc = member_doc(prop);
        if !doc.is_empty() {
            out.push_str(&format!("{pad}/** {doc} */\n"));
        }
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        let t = ts_type(prop, root, depth + 1, refs);
        out.push_str(&format!("{pad}{}{optional}: {t};\n", member_name(name)));
    }
    if props.len() > MAX_PROPS {
        out.push_str(&format!(
            "{pad}// … {} more properties\n",
            props.len() - MAX_PROPS
        ));
    }
    out.push_str(&"  ".repeat(depth));
    out.push('}');
    out
}

/// The member's comment: its description, then the constraints that matter.
fn member_doc(prop: &Value) -> String {
    let mut notes: Vec<String> = Vec::new();
    let integer = match prop.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.contains(&json!("integer")),
        _ => false,
    };
    if integer {
        notes.push("integer".into());
    }
    let num = |k: &str| prop.get(k).filter(|v| v.is_number()).map(|v| v.to_string());
    if let Some(v) = num("minimum") {
        notes.push(format!("≥ {v}"));
    }
    if let Some(v) = num("exclusiveMinimum") {
        notes.push(format!("> {v}"));
    }
    if let Some(v) = num("maximum") {
        notes.push(format!("≤ {v}"));
    }
    if let Some(v) = num("exclusiveMaximum") {
        notes.push(format!("< {v}"));
    }
    if let Some(v) = num("minLength") {
        notes.push(format!("min length {v}"));
    }
    if let Some(v) = num("maxLength") {
        notes.push(format!("max length {v}"));
    }
    if let Some(v) = num("minItems") {
        notes.push(format!("min {v} items"));
    }
    if let Some(v) = num("maxItems") {
        notes.push(format!("max {v} items"));
    }
    if let Some(v) = prop.get("format").and_then(Value::as_str) {
        notes.push(format!("format {v}"));
    }
    if let Some(v) = prop.get("pattern").and_then(Value::as_str) {
        notes.push(format!("pattern {}", v.replace("*/", "* /")));
    }
    if let Some(v) = prop.get("default") {
        notes.push(format!("default {}", literal(v)));
    }
    if let Some(values) = prop.get("enum").and_then(Value::as_array)
        && values.len() > MAX_ENUM
    {
        notes.push(format!("one of {} values", values.len()));
    }
    let desc = prop
        .get("description")
        .and_then(Value::as_str)
        .map(first_line)
        .unwrap_or_default();
    match (desc.is_empty(), notes.is_empty()) {
        (_, true) => desc,
        (true, false) => notes.join(", "),
        (false, false) => format!("{desc}; {}", notes.join(", ")),
    }
}

fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_become_typescript() {
        let read = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 4096, "description": "Path of the file"},
                "limit": {"type": "integer", "minimum": 1}
            },
            "required": ["path"]
        });
        let search = json!({
            "type": "object",
            "$defs": {"range": {"type": "object", "properties": {"from": {"type": "string", "format": "date"}}}},
            "properties": {
                "state": {"enum": ["open", "closed"], "default": "open"},
                "created": {"$ref": "#/$defs/range"},
                "limit": {"type": ["integer", "null"]}
            }
        });
        let output = json!({"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]});
        let text = declarations(&[
            Decl {
                name: "read",
                description: "Read a file.\nMore.",
                input: &read,
                output: None,
            },
            Decl {
                name: "my-tool",
                description: "",
                input: &search,
                output: Some(&output),
            },
        ]);
        let expected = r#"declare const zi: {
  /** Read a file. */
  read(input: {
    /** Path of the file; max length 4096 */
    path: string;
    /** integer, ≥ 1 */
    limit?: number;
  }): Promise<string>;
  "my-tool"(input: {
    /** default "open" */
    state?: "open" | "closed";
    created?: {
      /** format date */
      from?: string;
    };
    /** integer */
    limit?: number | null;
  }): Promise<{
    /** integer */
    total: number;
  }>;
};
"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn cycles_and_depth_are_bounded() {
        let cyclic = json!({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
        let text = declarations(&[Decl {
            name: "t",
            description: "",
            input: &cyclic,
            output: None,
        }]);
        assert!(text.contains("next?: unknown;"), "{text}");
        let mut deep = json!({"type": "string"});
        for _ in 0..10 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let text = declarations(&[Decl {
            name: "t",
            description: "",
            input: &deep,
            output: None,
        }]);
        assert!(text.contains("x?: object;"), "{text}");
    }
}
