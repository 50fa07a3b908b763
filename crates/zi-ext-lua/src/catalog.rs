//! Catalog rules for commands and tools (docs/extensions.md#api, docs/rpc.md#commandlist).

use crate::error::RegistrationError;

/// Built-in slash commands an extension may not take.
pub const RESERVED_COMMANDS: &[&str] = &[
    "model",
    "login",
    "logout",
    "settings",
    "codex-settings",
    "compact",
    "copy",
    "reload",
    "new",
    "resume",
    "agent",
];
pub const MAX_COMMANDS: usize = 128;
pub const MAX_CATALOG_BYTES: usize = 512 * 1024;
pub const MAX_NAME_BYTES: usize = 64;
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
pub const MAX_HINT_BYTES: usize = 1024;
/// Tool timeouts: default and ceiling.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TOOL_TIMEOUT_MS: u64 = 3_600_000;

/// `^[a-z][a-z0-9]*(-[a-z0-9]+)*$`, at most 64 bytes.
pub fn is_kebab_name(name: &str) -> bool {
    name.len() <= MAX_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Checks a command registration's fields.
pub fn validate_command(
    name: &str,
    description: &str,
    hint: Option<&str>,
) -> Result<(), RegistrationError> {
    if !is_kebab_name(name) {
        return Err(RegistrationError::CommandName(name.to_string()));
    }
    if RESERVED_COMMANDS.contains(&name) {
        return Err(RegistrationError::ReservedCommand(name.to_string()));
    }
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(RegistrationError::Description(name.to_string()));
    }
    if hint.is_some_and(|h| h.len() > MAX_HINT_BYTES) {
        return Err(RegistrationError::ArgumentHint(name.to_string()));
    }
    Ok(())
}

/// Tool names: `^[a-zA-Z0-9_-]{1,64}$` (what every provider API accepts).
pub fn validate_tool_name(name: &str) -> Result<(), RegistrationError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(RegistrationError::ToolName(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_names() {
        assert!(is_kebab_name("counter"));
        assert!(is_kebab_name("git-status2"));
        assert!(!is_kebab_name("Counter"));
        assert!(!is_kebab_name("2fa"));
        assert!(!is_kebab_name("a--b"));
        assert!(!is_kebab_name("a-"));
        assert!(!is_kebab_name(""));
        assert!(!is_kebab_name("a_b"));
        assert!(is_kebab_name(&"a".repeat(64)));
        assert!(!is_kebab_name(&"a".repeat(65)));
    }

    #[test]
    fn reserved_and_bounds() {
        assert!(validate_command("compact", "", None).is_err());
        assert!(validate_command("codex-settings", "", None).is_err());
        assert!(validate_command("hello", &"d".repeat(4096), Some(&"h".repeat(1024))).is_ok());
        assert!(validate_command("hello", &"d".repeat(4097), None).is_err());
        assert!(validate_command("hello", "", Some(&"h".repeat(1025))).is_err());
        assert!(validate_tool_name("git_status").is_ok());
        assert!(validate_tool_name("bad name").is_err());
    }
}
