//! YAML front matter of a profile file (docs/delegation.md#profile-files). Unlike the flat
//! `key: value` reader that skills and prompt templates use, this parses real YAML, because a
//! profile's description may be quoted, folded or multi-line.

use serde_yaml_ng::{Mapping, Value};

use super::validate::ProfileField;

/// The front matter's mapping and the trimmed body.
#[derive(Debug, Default)]
pub struct FrontMatter {
    fields: Mapping,
    pub body: String,
}

impl FrontMatter {
    /// One key as a profile field: absent, a string, or another YAML value.
    pub fn field(&self, key: &str) -> ProfileField {
        match self.fields.get(key) {
            None => ProfileField::Absent,
            Some(Value::String(text)) => ProfileField::Text(text.clone()),
            Some(_) => ProfileField::NotText,
        }
    }
}

/// Why the front matter could not be read; `Display` is the warning text.
#[derive(Debug, thiserror::Error)]
pub enum FrontMatterError {
    #[error("Frontmatter must be a YAML mapping")]
    NotMapping,
    #[error("{0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// After normalising CRLF and CR to LF: text starting with `---` that contains a later `\n---`
/// has the part in between parsed as YAML and everything after the closing `\n---` as the body
/// (trimmed). Otherwise the whole text is the body. An empty or null document is an empty
/// mapping.
pub fn parse(text: &str) -> Result<FrontMatter, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let Some(end) = text
        .strip_prefix("---")
        .and_then(|rest| rest.find("\n---"))
        .map(|at| at + 3)
    else {
        return Ok(FrontMatter {
            fields: Mapping::new(),
            body: text.trim().to_string(),
        });
    };
    let fields = match serde_yaml_ng::from_str::<Value>(&text[3..end])? {
        Value::Null => Mapping::new(),
        Value::Mapping(fields) => fields,
        _ => return Err(FrontMatterError::NotMapping),
    };
    Ok(FrontMatter {
        fields,
        body: text[end + 4..].trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> FrontMatter {
        parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn yaml_values_and_the_trimmed_body() {
        let matter = parsed(
            "---\r\ndescription: >-\r\n  Reviews\r\n  diffs\r\nmodel: 'a/b'\r\nthinking: 3\r\n---\r\n\r\n  Body text.\r\n\r\n",
        );
        assert_eq!(
            matter.field("description"),
            ProfileField::Text("Reviews diffs".into())
        );
        assert_eq!(matter.field("model"), ProfileField::Text("a/b".into()));
        assert_eq!(matter.field("thinking"), ProfileField::NotText);
        assert_eq!(matter.field("name"), ProfileField::Absent);
        assert_eq!(matter.body, "Body text.");
    }

    #[test]
    fn yaml_one_point_two_scalars_stay_strings() {
        // YAML 1.1 would read `off` and `no` as booleans; profiles use `thinking: off`.
        let matter = parsed("---\nthinking: off\ndescription: no\n---\nBody");
        assert_eq!(matter.field("thinking"), ProfileField::Text("off".into()));
        assert_eq!(matter.field("description"), ProfileField::Text("no".into()));
    }

    #[test]
    fn missing_empty_and_unclosed_front_matter() {
        let none = parsed("Just instructions.\n");
        assert_eq!(none.field("description"), ProfileField::Absent);
        assert_eq!(none.body, "Just instructions.");
        let empty = parsed("---\n---\nBody");
        assert_eq!(empty.body, "Body");
        let null = parsed("---\n~\n---\nBody");
        assert_eq!(null.field("description"), ProfileField::Absent);
        // No closing `\n---`: the whole text is the body.
        assert_eq!(parsed("---\ndescription: x\n").body, "---\ndescription: x");
        // Old Mac line ends are normalised too.
        assert_eq!(
            parsed("---\rdescription: d\r---\rB").field("description"),
            ProfileField::Text("d".into())
        );
    }

    #[test]
    fn non_mappings_and_bad_yaml_are_errors() {
        let error = |text: &str| parse(text).err().map(|e| e.to_string());
        assert_eq!(
            error("---\n- a\n- b\n---\nBody").as_deref(),
            Some("Frontmatter must be a YAML mapping")
        );
        assert_eq!(
            error("---\njust text\n---\nBody").as_deref(),
            Some("Frontmatter must be a YAML mapping")
        );
        let yaml = error("---\ndescription: [unclosed\n---\nBody");
        assert!(yaml.is_some_and(|e| !e.is_empty()));
    }
}
