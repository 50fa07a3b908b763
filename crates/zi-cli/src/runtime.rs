//! Runtime construction (runtime-reference §3): paths, trust, settings, catalog, model,
//! thinking level, journal and the `AgentSession`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use zi_agent::journal::{Journal, iso_timestamp, now_millis};
use zi_agent::journal_file::{JournalFile, SessionHeader, default_session_dir};
use zi_agent::settings::{SettingsStore, project_trusted};
use zi_agent::system_prompt::{SystemPromptParts, build_system_prompt, today};
use zi_agent::{AgentSession, SessionConfig, ToolSet};
use zi_ai::Model;
use zi_ai::builtin::PREFERRED_MODELS;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_ai::model::clamp_thinking;
use zi_ai::stream::DEFAULT_IDLE_TIMEOUT;
use zi_protocol::ThinkingLevel;

use crate::args::Args;

/// Prints a startup diagnostic.
pub fn warn(message: &str) {
    eprintln!("Warning: {message}");
}

/// The runtime handed to a mode.
pub struct Runtime {
    pub session: AgentSession,
    pub header: SessionHeader,
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

pub fn agent_dir(args: &Args, process_cwd: &Path) -> Result<PathBuf> {
    match &args.agent_dir {
        Some(dir) => Ok(absolute(dir, process_cwd)),
        None => home_dir()
            .map(|home| home.join(".zi").join("agent"))
            .ok_or_else(|| {
                anyhow!("Cannot locate the agent directory: HOME is not set; use --agent-dir")
            }),
    }
}

/// The initial model (runtime-reference §3 step 7): `--model`; else the settings default if it
/// is configured; else the first configured model of the preferred list; else the first
/// configured model in catalog order; else none (RPC still starts, unselected).
fn select_initial_model(
    catalog: &Catalog,
    credentials: &Credentials,
    explicit: Option<Model>,
    settings_default: Option<Model>,
) -> Option<Model> {
    if explicit.is_some() {
        return explicit;
    }
    if let Some(model) = settings_default.filter(|m| credentials.is_configured(m)) {
        return Some(model);
    }
    let preferred = PREFERRED_MODELS.iter().find_map(|reference| {
        let (provider, id) = reference.split_once('/')?;
        catalog
            .find(provider, id)
            .filter(|m| credentials.is_configured(m))
    });
    preferred
        .or_else(|| catalog.models.iter().find(|m| credentials.is_configured(m)))
        .cloned()
}

/// Builds the session for this invocation.
pub fn build(args: &Args) -> Result<Runtime> {
    let process_cwd = std::env::current_dir().context("Cannot read the current directory")?;
    let cwd = match &args.cwd {
        Some(dir) => absolute(dir, &process_cwd),
        None => process_cwd.clone(),
    };
    let cwd = cwd
        .canonicalize()
        .with_context(|| format!("Working directory {} is not accessible", cwd.display()))?;
    if !cwd.is_dir() {
        bail!("Working directory {} is not a directory", cwd.display());
    }
    let agent_dir = agent_dir(args, &process_cwd)?;
    if args.continue_session || args.resume.is_some() {
        bail!("Resuming sessions (--continue, --resume) is not available in this build yet");
    }
    for extension in &args.extension {
        warn(&format!(
            "extensions are not available in this build yet; ignoring {}",
            extension.display()
        ));
    }

    let (trusted, trust_problem) = project_trusted(&agent_dir, &cwd);
    if let Some(problem) = trust_problem {
        warn(&problem);
    }
    let (mut settings, settings_warnings) = SettingsStore::load(&agent_dir, &cwd, trusted);
    for warning in &settings_warnings {
        warn(warning);
    }
    let requested_thinking = match args.thinking.as_deref() {
        Some(text) => Some(ThinkingLevel::parse(text).ok_or_else(|| {
            anyhow!(
                "Invalid thinking level: {text}. Use off, minimal, low, medium, high, xhigh or max."
            )
        })?),
        None => None,
    };
    if let Some(level) = requested_thinking {
        settings.set_override(
            "defaultThinkingLevel",
            serde_json::Value::from(level.as_str()),
        );
    }

    let catalog = Catalog::load(&agent_dir);
    for warning in &catalog.warnings {
        warn(warning);
    }
    let effective = settings.effective();
    let settings_default = match (&effective.default_provider, &effective.default_model) {
        (Some(provider), Some(id)) => catalog.find(provider, id).cloned(),
        _ => None,
    };
    let explicit = match args.model.as_deref() {
        Some(reference) => Some(catalog.resolve(reference).map_err(|e| anyhow!(e))?.clone()),
        None => None,
    };
    let (mut credentials, credential_warnings) =
        Credentials::load(&agent_dir, None, |name| std::env::var(name).ok());
    for warning in &credential_warnings {
        warn(warning);
    }
    if let Some(key) = &args.api_key {
        let provider = explicit
            .as_ref()
            .or(settings_default.as_ref())
            .map(|m| m.provider.clone())
            .ok_or_else(|| anyhow!("--api-key requires --model or a default model in settings"))?;
        credentials.set_cli_key(provider, key.clone());
    }
    let model = select_initial_model(&catalog, &credentials, explicit, settings_default);

    let thinking = match &model {
        Some(model) => clamp_thinking(
            &model.supported_thinking_levels(),
            effective
                .default_thinking_level
                .unwrap_or(ThinkingLevel::Medium),
        ),
        None => ThinkingLevel::Off,
    };

    let session_id = uuid::Uuid::new_v4().to_string();
    let header = SessionHeader::new(&session_id, &cwd, iso_timestamp(now_millis()));
    let file = if args.no_session {
        None
    } else {
        let dir = match &args.session_dir {
            Some(dir) => absolute(dir, &cwd),
            None => default_session_dir(&agent_dir, &cwd),
        };
        Some(JournalFile::pending(
            dir.join(format!("{session_id}.jsonl")),
            header.clone(),
        ))
    };

    let system_prompt = build_system_prompt(
        &SystemPromptParts {
            custom: args.system_prompt.clone(),
            append: args.append_system_prompt.clone(),
            tools: Vec::new(),
        },
        &cwd,
        &today(),
    );

    let session = AgentSession::new(SessionConfig {
        session_id,
        cwd: cwd.clone(),
        agent_dir,
        journal: Journal::new(file),
        catalog,
        credentials,
        model: model.map(Arc::new),
        thinking,
        settings,
        tools: ToolSet::default(),
        system_prompt,
        idle_timeout: DEFAULT_IDLE_TIMEOUT,
    });
    session.record_bootstrap().map_err(|e| anyhow!(e))?;
    Ok(Runtime { session, header })
}
