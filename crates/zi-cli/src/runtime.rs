//! Runtime construction (docs/cli.md#start-up): paths, trust, settings, catalog, model,
//! thinking level, journal and the `AgentSession`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use zi_agent::system_prompt::{
    SystemPrompt, SystemPromptParts, find_prompt_file, load_context_files,
};
use zi_agent::{AgentSession, SessionConfig, ToolSet};
use zi_ai::Model;
use zi_ai::builtin::PREFERRED_MODELS;
use zi_ai::catalog::Catalog;
use zi_ai::credentials::Credentials;
use zi_ai::model::clamp_thinking;
use zi_ai::stream::DEFAULT_IDLE_TIMEOUT;
use zi_config::resources::{InputExpander, discover_skills, discover_templates};
use zi_config::settings::SettingsStore;
use zi_config::trust;
use zi_journal::file::SessionHeader;
use zi_os::clock::today;
use zi_protocol::ThinkingLevel;
use zi_tools::ToolEnv;

use crate::startup::{ApiKey, SessionOptions};

/// Reports a start-up diagnostic (a `Warning:` line; see crate::warnings).
pub use crate::warnings::warn;

/// Asks the person at the terminal whether to trust the project at the cwd, whose `.zi/` holds
/// the given names (the interactive mode only): `Some(answer)`, or `None` when they quit.
pub type TrustPrompt<'a> = &'a mut dyn FnMut(&Path, &[String]) -> Option<bool>;

/// The person quit at the trust prompt: zi ends without loading anything.
#[derive(Debug)]
pub struct QuitAtTrustPrompt;

impl std::fmt::Display for QuitAtTrustPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("quit at the project trust prompt")
    }
}

impl std::error::Error for QuitAtTrustPrompt {}

/// The runtime handed to a mode.
pub struct Runtime {
    pub session: AgentSession,
    pub header: SessionHeader,
    /// The MCP servers (none configured: `None`), not started yet: the mode starts them once
    /// `ready` is out.
    pub mcp: Option<Arc<zi_mcp::McpManager>>,
    /// The subagent profiles (Markdown, then extension registrations). In the `rpc` mode the
    /// Markdown profiles are not read yet: the mode reads them right after `ready` (or their
    /// first use does, docs/performance.md#start-up-and-idle-memory).
    pub subagent_profiles: Arc<zi_config::subagent_profiles::SubagentProfileRegistry>,
    /// The agent directory (the interactive mode keeps its history and log there).
    pub agent_dir: PathBuf,
    /// The operator's approval policy asks for some calls (not `never`): the interactive mode
    /// then answers approval requests itself.
    pub asks_approvals: bool,
    /// What the operator set (flags, environment, settings): ACP modes may only be stricter.
    pub floor: zi_acp::factory::OperatorFloor,
}

/// What a session built for another front end than the command line adds (ACP's
/// `session/new`: the client's file system and MCP servers).
#[derive(Default)]
pub struct Embedding {
    /// The client's file system for `read`, `write` and `edit` (docs/acp.md).
    pub file_io: Option<Arc<dyn zi_agent::file_io::FileIo>>,
    /// `mcpServers` definitions merged over the settings' servers by name.
    pub mcp_servers: serde_json::Map<String, serde_json::Value>,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The sign-in and subscription endpoints (`ZI_OPENAI_AUTH_URL`, …): a bad value stops every
/// mode at start-up (docs/providers.md#subscriptions).
pub fn auth_endpoints() -> Result<zi_ai::auth::AuthEndpoints> {
    zi_ai::auth::AuthEndpoints::from_env(env_var).map_err(|error| anyhow!(error))
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

/// Whether the project is trusted (docs/configuration.md#trustjson). With a prompt (interactive
/// mode) an undecided project with `.zi/` content is asked about once, and the answer recorded
/// in trust.json; otherwise trust.json decides and undecided means untrusted.
fn resolve_trust(agent_dir: &Path, cwd: &Path, prompt: Option<TrustPrompt<'_>>) -> Result<bool> {
    if let Some(prompt) = prompt
        && trust::needs_prompt(agent_dir, cwd)
    {
        let content = trust::project_content(agent_dir, cwd);
        let trusted = prompt(cwd, &content).ok_or(QuitAtTrustPrompt)?;
        if let Err(error) = trust::record_decision(agent_dir, cwd, trusted) {
            warn(&format!(
                "(trust) {error}; the answer holds for this run only"
            ));
        }
        return Ok(trusted);
    }
    let (trusted, warnings) = trust::project_trusted(agent_dir, cwd);
    for warning in &warnings {
        warn(warning);
    }
    Ok(trusted)
}

fn model_reference(session: &AgentSession) -> Option<(String, String)> {
    match session.state().model {
        zi_protocol::state::ModelState::Selected { model } => Some((model.provider, model.id)),
        zi_protocol::state::ModelState::Unselected => None,
    }
}

/// The initial model (docs/providers.md#initial-model): `--model`; else the settings default if it
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

/// Builds the session for this invocation; extensions get `session_start` with
/// `start_reason` (`startup`, or `new` / `resume` for the interactive mode's replacements).
pub fn build(
    options: &SessionOptions,
    trust_prompt: Option<TrustPrompt<'_>>,
    start_reason: &str,
) -> Result<Runtime> {
    build_with(options, trust_prompt, start_reason, &Embedding::default())
}

/// [`build`] with what another front end adds ([`Embedding`]).
// Long on purpose: start-up in its fixed order (cwd and session, trust, settings, models and
// credentials, thinking, sandbox, tools, MCP, subagent profiles, extensions, system prompt,
// approvals, the session, its journal record), each step reading what the earlier ones made;
// the separable parts (working_dir, initial_model, system_prompt, load_resources) are their own
// functions.
pub fn build_with(
    options: &SessionOptions,
    trust_prompt: Option<TrustPrompt<'_>>,
    start_reason: &str,
    embedding: &Embedding,
) -> Result<Runtime> {
    let cwd = working_dir(options)?;
    let agent_dir = options.agent_dir.clone();
    // `session.list` lists this directory for the cwd scope (the default one otherwise).
    let session_dir = options.session_dir.as_ref().map(|dir| absolute(dir, &cwd));
    let opened = crate::session_open::open(options, cwd)?;
    let cwd = opened.cwd.clone();
    let trusted = resolve_trust(&agent_dir, &cwd, trust_prompt)?;
    let (mut settings, settings_warnings) = SettingsStore::load(&agent_dir, &cwd, trusted);
    for warning in &settings_warnings {
        warn(warning);
    }
    let requested_thinking = options.thinking;
    if let Some(level) = requested_thinking {
        settings.set_override(
            "defaultThinkingLevel",
            serde_json::Value::from(level.as_str()),
        );
    }

    // One catalog for the session and the subagent supervisor (docs/performance.md#what-an-idle-agent-holds).
    let catalog = Arc::new(Catalog::load(&agent_dir));
    for warning in &catalog.warnings {
        warn(warning);
    }
    let effective = settings.effective();
    let settings_default = match (&effective.default_provider, &effective.default_model) {
        (Some(provider), Some(id)) => catalog.find(provider, id).cloned(),
        _ => None,
    };
    let explicit = match options.model.as_deref() {
        Some(reference) => Some(catalog.resolve(reference).map_err(|e| anyhow!(e))?.clone()),
        None => None,
    };
    let (mut credentials, credential_warnings) =
        Credentials::load(&agent_dir, None, env_var, auth_endpoints()?);
    credentials.set_warn(Arc::new(warn));
    for warning in &credential_warnings {
        warn(warning);
    }
    let restored = opened.restored.as_ref();
    let saved_model = restored.and_then(|r| r.model.clone());
    let model = initial_model(
        options.api_key.as_ref(),
        &catalog,
        &mut credentials,
        (explicit, settings_default),
        saved_model.as_ref(),
    )?;

    // Explicit --thinking, then the journal's level, then settings, then medium.
    let preferred = requested_thinking
        .or_else(|| restored.and_then(|r| r.thinking))
        .or(effective.default_thinking_level)
        .unwrap_or(ThinkingLevel::Medium);
    let thinking = match &model {
        Some(model) => clamp_thinking(&model.supported_thinking_levels(), preferred),
        None => ThinkingLevel::Off,
    };
    let header = opened.header.clone();
    let session_id = header.id.clone();

    let sandbox = crate::sandbox_config::build(&options.sandbox, &settings, &cwd, &agent_dir)?;
    if let Some(warning) = sandbox.startup_warning() {
        warn(&warning);
    }
    let sandbox = zi_sandbox::SandboxHandle::new(sandbox);
    let approvals = crate::approvals::setup(options, &settings, &cwd, &sandbox);
    let shell = std::env::var_os("SHELL").map(PathBuf::from);
    let mut tools = zi_tools::default_tools(
        ToolEnv::new(cwd.clone(), shell)
            .with_sandbox(sandbox.clone())
            .with_file_io(embedding.file_io.clone()),
    );
    let mcp = crate::mcp::configure(&settings, &cwd, &embedding.mcp_servers)?;
    if let Some(mcp) = &mcp {
        tools.extend(mcp.catalog_tools.iter().cloned());
    }
    let code_mode = crate::code_mode::configure(options.code_mode, &settings)?;
    if let Some(code) = &code_mode {
        tools.push(code.tool.clone());
    }
    let subagent_profiles = crate::subagent_profiles::load(&cwd, &agent_dir, trusted);
    if options.mode_name != "rpc" {
        // Where they were always read; only `rpc` has a `ready` to send first.
        subagent_profiles.load();
    }
    let extension_sources =
        crate::extensions::discover(&options.extensions, &cwd, &agent_dir, trusted, &settings);
    let extensions = crate::extensions::load(
        &extension_sources,
        options.mode_name,
        &cwd,
        tools.iter().map(|t| t.name().to_string()).collect(),
        &sandbox,
        &subagent_profiles,
    );
    tools.extend(extensions.tools());
    let mut child_args = crate::delegation::child_approval_flags(&approvals, &sandbox.get());
    child_args.extend(code_mode.as_ref().map(|c| c.child_flag().to_string()));
    let delegation = crate::delegation::configure(crate::delegation::Inputs {
        profiles: subagent_profiles.clone(),
        cwd: &cwd,
        agent_dir: &agent_dir,
        settings: &settings,
        catalog: &catalog,
        credentials: &credentials,
        api_key: options.api_key.clone(),
        child_args,
    });
    let mut tools = ToolSet::new(tools).map_err(|e| anyhow!(e))?;
    if let Some(code) = &code_mode {
        tools.set_nesting_tool(zi_code::NAME, code.exclusive);
    }
    let resources = load_resources(&agent_dir, &cwd, trusted, &settings);
    // Before the sources are added: their tools (MCP servers', the delegation tools of the
    // subagent profiles) come and go, and every turn brings the prompt's tool list up to date
    // (`SystemPrompt::follow_tools`), so the start need not ask them (reading the profiles).
    let system_prompt = system_prompt(options, &agent_dir, &cwd, trusted, &tools, &resources);
    if let Some(mcp) = &mcp {
        tools.add_source(mcp.direct_tools.clone());
    }
    if let Some(delegation) = &delegation {
        tools.add_source(delegation.tool_source());
    }

    let asks_approvals = approvals.operator.policy != zi_config::approval::Policy::Never;
    let floor = zi_acp::factory::OperatorFloor {
        policy: approvals.operator.policy,
        policy_chosen: approvals.operator.policy_source.is_some(),
        sandbox: zi_protocol::approval::SandboxMode::parse(sandbox.get().mode().as_str())
            .unwrap_or_default(),
    };
    let session = AgentSession::new(SessionConfig {
        session_id,
        cwd: cwd.clone(),
        agent_dir: agent_dir.clone(),
        journal: opened.journal,
        catalog,
        credentials,
        model: model.map(Arc::new),
        thinking,
        settings,
        tools,
        system_prompt,
        idle_timeout: DEFAULT_IDLE_TIMEOUT,
        expander: resources,
    });
    session.configure_approvals(approvals);
    if let Some(dir) = session_dir {
        session.set_session_dir(dir);
    }
    match restored {
        None => session.record_bootstrap().map_err(|e| anyhow!(e))?,
        Some(restored) => {
            let current = model_reference(&session);
            let model_changed = current.is_some() && current != saved_model;
            session
                .record_resume(model_changed, restored.thinking != Some(thinking))
                .map_err(|e| anyhow!(e))?;
        }
    }
    if let Some(delegation) = &delegation {
        for warning in delegation.attach(&session) {
            warn(&warning);
        }
    }
    extensions.start(&session, start_reason);
    // Not started here: no server process is spawned before `ready` (main.rs, rpc_mode.rs).
    let mcp = mcp.map(|mcp| mcp.manager);
    Ok(Runtime {
        session,
        header,
        mcp,
        subagent_profiles,
        agent_dir,
        asks_approvals,
        floor,
    })
}

/// The session's first model, after registering `--api-key` for the provider of the model the
/// session would use. A resumed session keeps its model when it is still available; otherwise
/// the usual initial-model rules apply, with a warning.
fn initial_model(
    api_key: Option<&ApiKey>,
    catalog: &Catalog,
    credentials: &mut Credentials,
    (explicit, settings_default): (Option<Model>, Option<Model>),
    saved_model: Option<&(String, String)>,
) -> Result<Option<Model>> {
    let saved = saved_model
        .as_ref()
        .and_then(|(provider, id)| catalog.find(provider, id).cloned());
    if let Some(key) = api_key {
        let provider = explicit
            .as_ref()
            .or(saved.as_ref())
            .or(settings_default.as_ref())
            .map(|m| m.provider.clone())
            .ok_or_else(|| anyhow!("--api-key requires --model or a default model in settings"))?;
        credentials.set_cli_key(provider, key.expose().to_string());
    }
    let model = match (&explicit, saved_model) {
        (None, Some((provider, id))) => match saved.filter(|m| credentials.is_configured(m)) {
            Some(model) => Some(model),
            None => {
                let fallback = select_initial_model(catalog, credentials, None, settings_default);
                warn(&format!(
                    "the session's model {provider}/{id} is unavailable; using {}",
                    fallback
                        .as_ref()
                        .map_or("no model".to_string(), |m| m.reference())
                ));
                fallback
            }
        },
        _ => select_initial_model(catalog, credentials, explicit, settings_default),
    };
    Ok(model)
}

/// The system prompt (docs/configuration.md#system-prompt): `--system-prompt` or `SYSTEM.md`, the
/// appended parts, the tools, the context files and the skills.
fn system_prompt(
    options: &SessionOptions,
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    tools: &ToolSet,
    resources: &InputExpander,
) -> SystemPrompt {
    let mut prompt_warnings = Vec::new();
    let custom = match &options.system_prompt {
        Some(text) => Some(text.clone()),
        None => find_prompt_file("SYSTEM.md", agent_dir, cwd, trusted, &mut prompt_warnings),
    };
    let append = if options.append_system_prompt.is_empty() {
        find_prompt_file(
            "APPEND_SYSTEM.md",
            agent_dir,
            cwd,
            trusted,
            &mut prompt_warnings,
        )
        .into_iter()
        .collect()
    } else {
        options.append_system_prompt.clone()
    };
    let context_files = load_context_files(agent_dir, cwd, &mut prompt_warnings);
    for warning in &prompt_warnings {
        warn(warning);
    }
    SystemPrompt::new(
        SystemPromptParts {
            custom,
            append,
            tools: tools.descriptions(),
            context_files,
            skills: resources.skills().to_vec(),
        },
        cwd,
        &today(),
    )
}

/// `--cwd` (relative to the process's directory) or the process's directory, canonical.
pub fn working_dir(options: &SessionOptions) -> Result<PathBuf> {
    let cwd = options.cwd.as_ref().unwrap_or(&options.process_cwd);
    let cwd = cwd
        .canonicalize()
        .with_context(|| format!("Working directory {} is not accessible", cwd.display()))?;
    if !cwd.is_dir() {
        bail!("Working directory {} is not a directory", cwd.display());
    }
    Ok(cwd)
}

/// Skills and prompt templates in precedence order (docs/configuration.md#skills,
/// docs/configuration.md#prompt-templates): project locations first (trusted projects only), then
/// global ones; the first name wins.
fn load_resources(
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    settings: &SettingsStore,
) -> InputExpander {
    let (global_paths, project_paths) = settings.skill_paths();
    let resolve = |path: &str, base: &Path| -> PathBuf {
        match (path.strip_prefix("~/"), home_dir()) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => absolute(Path::new(path), base),
        }
    };
    let mut skill_roots = Vec::new();
    let mut template_dirs = Vec::new();
    if trusted {
        skill_roots.extend(project_paths.iter().map(|p| resolve(p, cwd)));
        skill_roots.push(cwd.join(".zi").join("skills"));
        if let Some(nearest) = cwd
            .ancestors()
            .map(|dir| dir.join(".agents").join("skills"))
            .find(|dir| dir.is_dir())
        {
            skill_roots.push(nearest);
        }
        template_dirs.push(cwd.join(".zi").join("prompts"));
    }
    skill_roots.extend(global_paths.iter().map(|p| resolve(p, agent_dir)));
    skill_roots.push(agent_dir.join("skills"));
    if let Some(home) = home_dir() {
        skill_roots.push(home.join(".agents").join("skills"));
    }
    template_dirs.push(agent_dir.join("prompts"));
    let (skills, warnings) = discover_skills(&skill_roots);
    for warning in &warnings {
        warn(&format!("(skills) {warning}"));
    }
    InputExpander::new(skills, discover_templates(&template_dirs))
}
