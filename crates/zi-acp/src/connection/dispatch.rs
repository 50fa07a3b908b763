//! Routing each message to its handler (docs/acp.md#connection). Quick handlers answer on the
//! input thread, in input order; the ones that read files or wait run as tasks.

use std::sync::Arc;

use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, CancelRequestNotification, Implementation,
    InitializeRequest, InitializeResponse, McpCapabilities, PromptCapabilities, PromptRequest,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities,
    SessionListCapabilities, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Connection;
use crate::jsonrpc::{self, Incoming, PARSE_ERROR, RpcError};
use crate::lines::Record;
use crate::link::ClientCaps;
use crate::outgoing::Waiter;
use crate::{config, permissions};

/// The authentication method zi offers: it finds credentials itself (docs/acp.md,
/// "Authentication"). When `zi login` exists, its methods join this list.
pub const CREDENTIALS_METHOD: &str = "zi-credentials";

/// Decodes a method's params; serde's message names the field (`missing field `cwd``).
pub(crate) fn decode<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|error| RpcError::invalid_params(format!("Invalid params: {error}")))
}

impl Connection {
    /// Handles one input record.
    pub(super) fn handle(self: &Arc<Self>, record: Record) {
        let line = match record {
            Record::Line(line) => line,
            Record::InvalidUtf8 => {
                let error = RpcError::new(PARSE_ERROR, "Parse error: the line is not UTF-8");
                return self.link.send(jsonrpc::error_line(&Value::Null, &error));
            }
            Record::Oversized => {
                let error = RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "Invalid request: a message over 16 MiB is refused",
                );
                return self.link.send(jsonrpc::error_line(&Value::Null, &error));
            }
        };
        match jsonrpc::parse(&line) {
            Err(rejected) => self
                .link
                .send(jsonrpc::error_line(&rejected.id, &rejected.error)),
            Ok(Incoming::Request { id, method, params }) => self.request(id, &method, params),
            Ok(Incoming::Notification { method, params }) => self.notification(&method, params),
            Ok(Incoming::Response { id, outcome }) => self.response(&id, outcome),
        }
    }

    fn request(self: &Arc<Self>, id: Value, method: &str, params: Option<Value>) {
        match method {
            "initialize" => {
                let outcome = self.initialize(params);
                self.respond(&id, outcome)
            }
            "authenticate" => {
                let outcome = authenticate(params);
                self.respond(&id, outcome)
            }
            "session/new" => self.new_session(id, params),
            "session/load" => self.load_session(id, params, true),
            "session/resume" => self.load_session(id, params, false),
            "session/list" => self.list_sessions(id, params),
            "session/close" => self.close_session(id, params, false),
            "session/delete" => self.close_session(id, params, true),
            "session/prompt" => self.prompt(id, params),
            "session/set_mode" => {
                let outcome = self.set_mode(params);
                self.respond(&id, outcome)
            }
            "session/set_config_option" => {
                let outcome = self.set_config_option(params);
                self.respond(&id, outcome)
            }
            "session/set_model" => {
                let outcome = self.set_model(params);
                self.respond(&id, outcome)
            }
            _ => self.respond::<Value>(&id, Err(RpcError::method_not_found(method))),
        }
    }

    fn notification(self: &Arc<Self>, method: &str, params: Option<Value>) {
        match method {
            "session/cancel" => match decode::<CancelNotification>(params) {
                // A notification cannot be answered: an unknown session is ignored.
                Ok(cancel) => {
                    if let Ok(acp) = self.session(&cancel.session_id.0) {
                        acp.cancel();
                    }
                }
                Err(error) => tracing::debug!("session/cancel ignored: {}", error.message),
            },
            "$/cancel_request" => match decode::<CancelRequestNotification>(params) {
                Ok(cancel) => {
                    let id = serde_json::to_value(&cancel.request_id).unwrap_or(Value::Null);
                    self.cancel_request(&id);
                }
                Err(error) => tracing::debug!("$/cancel_request ignored: {}", error.message),
            },
            other => tracing::debug!("unknown notification ignored: {other}"),
        }
    }

    /// The client's answer to a request zi sent.
    fn response(&self, id: &Value, outcome: Result<Value, Value>) {
        match self.link.outgoing.answered(id) {
            Some(Waiter::Permission {
                session_id,
                approval_id,
            }) => {
                let Some(acp) = self.open_session(&session_id) else {
                    return;
                };
                let answered = match permissions::outcome(outcome) {
                    Some(decision) => acp
                        .session
                        .respond_approval(&approval_id, decision, None, None)
                        .map(|_| ())
                        .map_err(|error| format!("{error:?}")),
                    None => {
                        acp.session.cancel_approval(&approval_id);
                        Ok(())
                    }
                };
                if let Err(error) = answered {
                    tracing::debug!("a permission answer was not applied: {error}");
                }
            }
            Some(Waiter::Reply(sender)) => {
                let _ = sender.send(outcome);
            }
            None => tracing::debug!("an answer to no pending request: {id}"),
        }
    }

    fn initialize(&self, params: Option<Value>) -> Result<InitializeResponse, RpcError> {
        let request: InitializeRequest = params_of(params)?;
        let caps = &request.client_capabilities;
        let terminal_output = caps
            .meta
            .as_ref()
            .and_then(|meta| meta.get("terminal_output"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let client = ClientCaps {
            read_text_file: caps.fs.read_text_file,
            write_text_file: caps.fs.write_text_file,
            terminal_output,
            auth_terminal: caps.auth.terminal,
        };
        self.link.set_client(client);
        Ok(InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities())
            .auth_methods(auth_methods(&client))
            .agent_info(
                Implementation::new("zi", env!("CARGO_PKG_VERSION")).title("zi".to_string()),
            ))
    }

    fn prompt(self: &Arc<Self>, id: Value, params: Option<Value>) {
        let outcome = params_of::<PromptRequest>(params).and_then(|request| {
            let acp = self.session(&request.session_id.0)?;
            acp.prompt(id.clone(), &request.prompt)
        });
        if let Err(error) = outcome {
            self.respond::<Value>(&id, Err(error));
        }
    }

    fn set_mode(&self, params: Option<Value>) -> Result<SetSessionModeResponse, RpcError> {
        let request: SetSessionModeRequest = params_of(params)?;
        let acp = self.session(&request.session_id.0)?;
        acp.set_mode(&request.mode_id.0)?;
        Ok(SetSessionModeResponse::new())
    }

    fn set_config_option(
        &self,
        params: Option<Value>,
    ) -> Result<SetSessionConfigOptionResponse, RpcError> {
        let request: SetSessionConfigOptionRequest = params_of(params)?;
        let acp = self.session(&request.session_id.0)?;
        let value = match &request.value {
            agent_client_protocol_schema::v1::SessionConfigOptionValue::ValueId { value } => {
                value.0.to_string()
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "Invalid params: zi's options are selects; value must be a value id",
                ));
            }
        };
        match request.config_id.0.as_ref() {
            "mode" => acp.set_mode(&value)?,
            "model" => config::select_model(&acp.session, &value)?,
            "thinking" => config::select_thinking(&acp.session, &value)?,
            other => {
                return Err(RpcError::invalid_params(format!(
                    "Unknown config option: {other}"
                )));
            }
        }
        Ok(SetSessionConfigOptionResponse::new(
            acp.snapshot().options(),
        ))
    }

    /// The legacy `session/set_model {sessionId, modelId}` (older clients), answered `{}`.
    fn set_model(&self, params: Option<Value>) -> Result<Value, RpcError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct SetModel {
            session_id: String,
            model_id: String,
        }
        let request: SetModel = params_of(params)?;
        let acp = self.session(&request.session_id)?;
        config::select_model(&acp.session, &request.model_id)?;
        Ok(json!({}))
    }
}

fn params_of<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    decode(params)
}

/// What zi offers (docs/acp.md#connection).
fn capabilities() -> AgentCapabilities {
    AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
        .mcp_capabilities(McpCapabilities::new().http(true))
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .close(SessionCloseCapabilities::new())
                .delete(SessionDeleteCapabilities::new())
                .additional_directories(
                    agent_client_protocol_schema::v1::SessionAdditionalDirectoriesCapabilities::new(
                    ),
                ),
        )
}

/// The prefix of the `terminal` methods that run `zi login PROVIDER`.
const LOGIN_METHOD: &str = "zi-login-";

/// How zi gets credentials (docs/acp.md#authentication). zi reads them itself, per request
/// (API keys, and the subscriptions `zi login` signed in to), so the `agent` method asks the
/// client for nothing. A client that can run the agent in a terminal (`auth.terminal`) is also
/// offered one `terminal` method per subscription: it runs `zi acp … login PROVIDER`.
fn auth_methods(client: &ClientCaps) -> Vec<AuthMethod> {
    let mut methods = vec![AuthMethod::Agent(
        AuthMethodAgent::new(CREDENTIALS_METHOD, "zi credentials").description(
            "zi reads API keys from <agent-dir>/auth.json (default ~/.zi/agent/auth.json) or the \
             provider's environment variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, …), and the \
             ChatGPT and GitHub Copilot subscriptions `zi login` signed in to; nothing to do here"
                .to_string(),
        ),
    )];
    if client.auth_terminal {
        for subscription in zi_ai::auth::SUBSCRIPTIONS {
            methods.push(AuthMethod::Terminal(
                AuthMethodTerminal::new(
                    format!("{LOGIN_METHOD}{}", subscription.id),
                    format!("Sign in: {}", subscription.name),
                )
                .description(format!("Runs `zi login {}` in a terminal", subscription.id))
                .args(vec!["login".to_string(), subscription.id.to_string()]),
            ));
        }
    }
    methods
}

fn authenticate(params: Option<Value>) -> Result<AuthenticateResponse, RpcError> {
    let request: AuthenticateRequest = params_of(params)?;
    if request.method_id.0.starts_with(LOGIN_METHOD) {
        return Err(RpcError::invalid_params(format!(
            "{} is a terminal method: the client runs it, it is not authenticated",
            request.method_id.0
        )));
    }
    if request.method_id.0.as_ref() != CREDENTIALS_METHOD {
        return Err(RpcError::invalid_params(format!(
            "Unknown authentication method: {}",
            request.method_id.0
        )));
    }
    Ok(AuthenticateResponse::new())
}
