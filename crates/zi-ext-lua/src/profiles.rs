//! `zi.register_subagent_profile{name, description, instructions, model?, thinking?}`
//! (docs/delegation.md#where-zi-looks-and-precedence): the same contract as a Markdown profile,
//! checked by the same [`admit`]. Registrations of a generation come after every Markdown profile;
//! zi-agent's `SubagentProfileRegistry` composes them and reports collisions.

use mlua::{Table, Value as LuaValue};
use zi_config::subagent_profiles::validate::admit;
use zi_config::subagent_profiles::{
    MAX_EXTENSION_PROFILES, ProfileDeclaration, ProfileField, ProfileSource,
};
use zi_os::sync::lock;

use crate::error::{ExtensionError, RegistrationError};
use crate::worker::Shared;

fn field(value: LuaValue) -> ProfileField {
    match value {
        LuaValue::Nil => ProfileField::Absent,
        LuaValue::String(text) => match text.to_str() {
            Ok(text) => ProfileField::Text(text.to_string()),
            Err(_) => ProfileField::NotText,
        },
        _ => ProfileField::NotText,
    }
}

/// Validates and records one registration; the error text gets the caller's line.
pub fn register(shared: &Shared, spec: Table) -> Result<(), RegistrationError> {
    crate::api::only_while_loading(shared, "zi.register_subagent_profile")
        .map_err(ExtensionError::from)?;
    let get = |key: &str| {
        spec.get::<LuaValue>(key)
            .map(field)
            .map_err(RegistrationError::Field)
    };
    let name = match get("name")? {
        ProfileField::Text(name) => name,
        _ => String::new(),
    };
    let declaration = ProfileDeclaration {
        name: name.clone(),
        description: get("description")?,
        instructions: get("instructions")?,
        model: get("model")?,
        thinking: get("thinking")?,
    };
    let profile =
        admit(declaration, ProfileSource::Extension(shared.entry.clone())).map_err(|problem| {
            RegistrationError::Profile {
                name: name.clone(),
                problem,
            }
        })?;
    let mut registrations = lock(&shared.registrations);
    if registrations
        .profiles
        .iter()
        .any(|p| p.name == profile.name)
    {
        return Err(RegistrationError::DuplicateProfile(name));
    }
    if registrations.profiles.len() == MAX_EXTENSION_PROFILES {
        return Err(RegistrationError::TooManyProfiles);
    }
    registrations.profiles.push(profile);
    Ok(())
}
