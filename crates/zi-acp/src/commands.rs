//! The slash commands a session offers (docs/acp.md#slash-commands): prompt templates,
//! skills (`skill:NAME`), extension commands and `compact`. A prompt `/name args` runs them:
//! templates and skills expand into the prompt as in every zi mode; an extension command and
//! `compact` run without a model request.

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};
use zi_agent::AgentSession;

fn command(name: String, description: String, hint: Option<String>) -> AvailableCommand {
    let command = AvailableCommand::new(name, description);
    match hint.filter(|h| !h.is_empty()) {
        Some(hint) => command.input(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new(hint),
        )),
        None => command,
    }
}

/// `available_commands_update` for the session's commands now.
pub fn update(session: &AgentSession) -> SessionUpdate {
    let expander = session.input_expander();
    let mut commands: Vec<AvailableCommand> = Vec::new();
    for template in expander.templates() {
        let description = template
            .description
            .clone()
            .unwrap_or_else(|| format!("Prompt template {}", template.name));
        commands.push(command(
            template.name.clone(),
            description,
            template.argument_hint.clone(),
        ));
    }
    for skill in expander.skills() {
        commands.push(command(
            format!("skill:{}", skill.name),
            skill.description.clone(),
            None,
        ));
    }
    for extension in session.extension_commands() {
        commands.push(command(
            extension.name,
            extension.description,
            extension.argument_hint,
        ));
    }
    commands.push(command(
        "compact".into(),
        "Summarize the conversation so far to free context".into(),
        Some("optional instructions for the summary".into()),
    ));
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}
