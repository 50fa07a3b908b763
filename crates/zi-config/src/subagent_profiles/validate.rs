//! The profile contract shared by Markdown files and extension registrations
//! (docs/delegation.md#profile-files, docs/delegation.md#diagnostics): one check per field, in a
//! fixed order, each with its exact message.

use zi_protocol::ThinkingLevel;

use super::{ProfileSource, SubagentProfile};

const MAX_NAME_BYTES: usize = 64;
const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
const MAX_INSTRUCTIONS_BYTES: usize = 8 * 1024;
const MAX_MODEL_BYTES: usize = 4 * 1024;

/// One declared field as its declaration gave it: a YAML or Lua value is either absent, a
/// string, or something else (which fails the field's check, as a non-string does in Zi).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileField {
    /// The declaration does not set it.
    Absent,
    /// A string.
    Text(String),
    /// Any other value.
    NotText,
}

impl ProfileField {
    fn text(&self) -> Option<&str> {
        match self {
            ProfileField::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// A profile as declared, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileDeclaration {
    /// The file name without `.md`, or the registration's `name`.
    pub name: String,
    /// `description`.
    pub description: ProfileField,
    /// The Markdown body, or the registration's `instructions`.
    pub instructions: ProfileField,
    /// `model`.
    pub model: ProfileField,
    /// `thinking`.
    pub thinking: ProfileField,
}

/// Why a declaration is not a profile. `Display` is the reference's warning text; for a
/// Markdown file the name comes from the file name, hence the wording of [`Self::InvalidName`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProfileProblem {
    /// The name is not `^[a-z][a-z0-9_-]*$` of at most 64 bytes.
    #[error("filename must be a bounded lowercase subagent profile name")]
    InvalidName,
    /// The description is absent, not a string, blank or too long.
    #[error("description must be a non-empty string of at most 4096 bytes")]
    InvalidDescription,
    /// The instructions are absent, not a string, or blank.
    #[error("profile instructions cannot be empty")]
    EmptyInstructions,
    /// The instructions are over 8 KiB.
    #[error("profile instructions cannot exceed 8192 bytes")]
    LongInstructions,
    /// The model is set but not a non-blank string within 4 KiB.
    #[error("model must be a non-empty string of at most 4096 bytes")]
    InvalidModel,
    /// The thinking level is set but names no level.
    #[error("thinking must be a supported thinking level")]
    InvalidThinking,
}

impl ProfileProblem {
    /// The text for an extension registration, where the name is a field, not a file name.
    pub fn registration_message(self) -> String {
        match self {
            ProfileProblem::InvalidName => {
                "name must be a bounded lowercase subagent profile name (^[a-z][a-z0-9_-]*$, at most 64 bytes)"
                    .to_string()
            }
            other => other.to_string(),
        }
    }
}

/// `^[a-z][a-z0-9_-]*$`, at most 64 bytes: profile names and runtime names alike.
pub(crate) fn is_profile_name(name: &str) -> bool {
    name.len() <= MAX_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn non_blank_within(text: &str, max: usize) -> bool {
    !text.trim().is_empty() && text.len() <= max
}

/// Checks a declaration; the first failing field decides the problem.
pub fn admit(
    declaration: ProfileDeclaration,
    source: ProfileSource,
) -> Result<SubagentProfile, ProfileProblem> {
    let ProfileDeclaration {
        name,
        description,
        instructions,
        model,
        thinking,
    } = declaration;
    if !is_profile_name(&name) {
        return Err(ProfileProblem::InvalidName);
    }
    let description = match description {
        ProfileField::Text(text) if non_blank_within(&text, MAX_DESCRIPTION_BYTES) => text,
        _ => return Err(ProfileProblem::InvalidDescription),
    };
    let instructions = instructions.text().unwrap_or_default().to_string();
    if instructions.trim().is_empty() {
        return Err(ProfileProblem::EmptyInstructions);
    }
    if instructions.len() > MAX_INSTRUCTIONS_BYTES {
        return Err(ProfileProblem::LongInstructions);
    }
    let model = match model {
        ProfileField::Absent => None,
        ProfileField::Text(text) if non_blank_within(&text, MAX_MODEL_BYTES) => Some(text),
        _ => return Err(ProfileProblem::InvalidModel),
    };
    let thinking = match &thinking {
        ProfileField::Absent => None,
        field => Some(
            field
                .text()
                .and_then(ThinkingLevel::parse)
                .ok_or(ProfileProblem::InvalidThinking)?,
        ),
    };
    Ok(SubagentProfile {
        name,
        description,
        instructions,
        model,
        thinking,
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn text(value: &str) -> ProfileField {
        ProfileField::Text(value.to_string())
    }

    fn declaration() -> ProfileDeclaration {
        ProfileDeclaration {
            name: "reviewer".into(),
            description: text("Reviews diffs"),
            instructions: text("Review the change."),
            model: ProfileField::Absent,
            thinking: ProfileField::Absent,
        }
    }

    fn check(change: impl FnOnce(&mut ProfileDeclaration)) -> Result<SubagentProfile, String> {
        let mut declared = declaration();
        change(&mut declared);
        admit(
            declared,
            ProfileSource::Global(PathBuf::from("/a/reviewer.md")),
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn names_follow_the_runtime_name_rule() {
        for good in ["a", "pathfinder", "code_review-2", &"a".repeat(64)] {
            assert!(is_profile_name(good), "{good}");
        }
        for bad in [
            "",
            "A",
            "2nd",
            "_a",
            "-a",
            "a.b",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!is_profile_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_valid_declaration_keeps_every_field() {
        let profile = check(|d| {
            d.model = text("anthropic/claude-sonnet-4-5");
            d.thinking = text("xhigh");
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(profile.name, "reviewer");
        assert_eq!(profile.description, "Reviews diffs");
        assert_eq!(profile.instructions, "Review the change.");
        assert_eq!(
            profile.model.as_deref(),
            Some("anthropic/claude-sonnet-4-5")
        );
        assert_eq!(profile.thinking, Some(ThinkingLevel::Xhigh));
    }

    type Change = Box<dyn FnOnce(&mut ProfileDeclaration)>;

    #[test]
    fn every_problem_has_the_reference_message() {
        let name = "filename must be a bounded lowercase subagent profile name";
        let description = "description must be a non-empty string of at most 4096 bytes";
        let model = "model must be a non-empty string of at most 4096 bytes";
        let thinking = "thinking must be a supported thinking level";
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|d| d.name = "Reviewer".into()), name),
            (Box::new(|d| d.name = "a".repeat(65)), name),
            (
                Box::new(|d| d.description = ProfileField::Absent),
                description,
            ),
            (
                Box::new(|d| d.description = ProfileField::NotText),
                description,
            ),
            (Box::new(|d| d.description = text(" \n\t")), description),
            (
                Box::new(|d| d.description = text(&"d".repeat(4097))),
                description,
            ),
            (
                Box::new(|d| d.instructions = text("  \n")),
                "profile instructions cannot be empty",
            ),
            (
                Box::new(|d| d.instructions = ProfileField::Absent),
                "profile instructions cannot be empty",
            ),
            (
                Box::new(|d| d.instructions = text(&"i".repeat(8193))),
                "profile instructions cannot exceed 8192 bytes",
            ),
            (Box::new(|d| d.model = text(" ")), model),
            (Box::new(|d| d.model = ProfileField::NotText), model),
            (Box::new(|d| d.model = text(&"m".repeat(4097))), model),
            (Box::new(|d| d.thinking = text("extreme")), thinking),
            (Box::new(|d| d.thinking = text("High")), thinking),
            (Box::new(|d| d.thinking = ProfileField::NotText), thinking),
        ];
        for (change, message) in cases {
            assert_eq!(check(change).err().as_deref(), Some(message));
        }
        // Bounds are inclusive and count bytes.
        assert!(check(|d| d.description = text(&"d".repeat(4096))).is_ok());
        assert!(check(|d| d.instructions = text(&"i".repeat(8192))).is_ok());
        assert!(check(|d| d.model = text(&"m".repeat(4096))).is_ok());
        assert!(check(|d| d.description = text(&"é".repeat(2049))).is_err());
        // The first failing field decides.
        let both = check(|d| {
            d.name = "Bad".into();
            d.description = ProfileField::Absent;
        });
        assert_eq!(both.err().as_deref(), Some(name));
    }

    #[test]
    fn registrations_name_the_field_not_a_file() {
        assert!(
            ProfileProblem::InvalidName
                .registration_message()
                .starts_with("name must be")
        );
        assert_eq!(
            ProfileProblem::InvalidThinking.registration_message(),
            "thinking must be a supported thinking level"
        );
    }
}
