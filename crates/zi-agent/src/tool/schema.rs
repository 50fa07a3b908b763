//! Parameter schemas derived from a tool's argument type, and the argument conversions the
//! derived schemas promise.
//!
//! The schema is part of what the model reads, so a derived one is laid out the way zi's
//! hand-written schemas always were (the tests in `zi-cli/tests/tool_schemas.rs` hold every
//! tool's schema byte for byte): no `$schema`, `title` or description of the type itself, no
//! `format`, an optional field typed without `null` (validation refuses `null` before a call
//! is parsed), no `additionalProperties: true`, a root that always lists its `properties`, a
//! doc comment's wrapped lines read as one line, and the keys of every (sub)schema in the order
//! the tool family names ([`KEY_ORDER`] for most).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value};

/// The key order of the built-in tools', the `code` tool's and the MCP catalog tools' schemas:
/// an object's `properties` before `required`, a property's constraints, then its
/// description, then an array's `items`.
pub const KEY_ORDER: &[&str] = &[
    "type",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "minItems",
    "maxItems",
    "uniqueItems",
    "description",
    "items",
];

/// The parameter schema of argument type `T` (a struct deriving `JsonSchema`; each field's doc
/// comment is its description), laid out with `key_order` (keys it does not name keep their
/// order after the named ones).
pub fn parameters_schema<T: JsonSchema>(key_order: &[&str]) -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(root) = &mut schema {
        root.remove("description");
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    lay_out(&mut schema, key_order);
    schema
}

fn lay_out(schema: &mut Value, key_order: &[&str]) {
    let Value::Object(map) = schema else {
        return;
    };
    map.remove("title");
    map.remove("format");
    if map.get("additionalProperties") == Some(&Value::Bool(true)) {
        map.remove("additionalProperties");
    }
    // `#[serde(default)]` on an optional field: absent is the default, nothing to tell.
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let [only] = kept[..] {
            let only = only.clone();
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::String(description)) = map.get_mut("description") {
        *description = one_line_paragraphs(description);
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            lay_out(property, key_order);
        }
    }
    if let Some(items) = map.get_mut("items") {
        lay_out(items, key_order);
    }
    let rank = |key: &str| {
        key_order
            .iter()
            .position(|k| *k == key)
            .unwrap_or(key_order.len())
    };
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by_key(|(key, _)| rank(key));
    map.extend(entries);
}

/// A doc comment's paragraphs with their wrapped lines joined by spaces.
fn one_line_paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.replace('\n', " "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Removes a schema's description: for a field whose type documents itself for Rust readers
/// (`#[schemars(transform = zi_agent::tool::undescribed)]`) while the model is told nothing.
pub fn undescribed(schema: &mut schemars::Schema) {
    schema.remove("description");
}

/// An optional count as JSON Schema's `integer` accepts it: `5` or `5.0`; a whole number
/// beyond `u64` saturates. Use with `#[serde(default, deserialize_with = …)]`.
pub fn whole_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let Some(number) = Option::<Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if let Some(whole) = number.as_u64() {
        return Ok(Some(whole));
    }
    match number.as_f64() {
        // `as` saturates: a whole number over u64::MAX becomes u64::MAX.
        Some(float) if float >= 0.0 && float.fract() == 0.0 => Ok(Some(float as u64)),
        _ => Err(serde::de::Error::custom(format!(
            "{number} is not a non-negative whole number"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Arguments of a test tool.
    ///
    /// A second paragraph, never in the schema.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only the schema is read")]
    struct Sample {
        /// The file,
        /// on two lines.
        #[schemars(length(max = 16))]
        path: String,
        /// How many.
        #[serde(default, deserialize_with = "whole_number")]
        #[schemars(range(min = 1))]
        count: Option<u64>,
        /// Seconds.
        #[schemars(extend("exclusiveMinimum" = 0))]
        timeout: Option<f64>,
        /// Anything.
        arguments: Option<Map<String, Value>>,
    }

    #[test]
    fn a_derived_schema_is_laid_out_like_a_hand_written_one() {
        let schema = parameters_schema::<Sample>(KEY_ORDER);
        assert_eq!(
            serde_json::to_string(&schema).unwrap_or_default(),
            concat!(
                r#"{"type":"object","properties":{"#,
                r#""path":{"type":"string","maxLength":16,"description":"The file, on two lines."},"#,
                r#""count":{"type":"integer","minimum":1,"description":"How many."},"#,
                r#""timeout":{"type":"number","exclusiveMinimum":0,"description":"Seconds."},"#,
                r#""arguments":{"type":"object","description":"Anything."}},"#,
                r#""required":["path"],"additionalProperties":false}"#
            )
        );
    }

    #[test]
    fn an_argument_free_type_lists_no_properties() {
        #[derive(Deserialize, JsonSchema)]
        struct Nothing {}
        let schema = parameters_schema::<Nothing>(KEY_ORDER);
        assert_eq!(schema, json!({"type": "object", "properties": {}}));
    }

    #[derive(Deserialize)]
    struct Counted {
        #[serde(default, deserialize_with = "whole_number")]
        count: Option<u64>,
    }

    fn count(value: Value) -> Result<Option<u64>, String> {
        serde_json::from_value::<Counted>(value)
            .map(|c| c.count)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn whole_numbers_arrive_as_integers_or_floats() {
        assert_eq!(count(json!({"count": 5})), Ok(Some(5)));
        assert_eq!(count(json!({"count": 5.0})), Ok(Some(5)));
        assert_eq!(count(json!({"count": 1e30})), Ok(Some(u64::MAX)));
        assert_eq!(count(json!({})), Ok(None));
        assert!(count(json!({"count": 2.5})).is_err());
        assert!(count(json!({"count": -1})).is_err());
    }
}
