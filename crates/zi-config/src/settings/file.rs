//! One settings file as zi reads it: deserialized once into typed fields, with every key zi does
//! not know kept as is (forward compatibility: a newer zi's keys survive an older zi's writes).
//!
//! A known key whose value is not valid deserializes to [`Field::Invalid`] instead of failing,
//! so [`SettingsFile::check`] can report the first problem in the documented order, with the
//! same text as always, and the lenient reading of invocation overrides still sees the value.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use zi_protocol::ThinkingLevel;
use zi_protocol::state::QueueMode;

use super::problem::SettingsProblem;
use super::sandbox::SandboxSettings;
use super::{MAX_PATH_BYTES, MAX_PATH_ENTRIES};

/// One known key of a layer.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) enum Field<T> {
    #[default]
    Absent,
    Valid(T),
    /// Present with a value of the wrong shape or range; kept for the error and for lenient
    /// readings.
    Invalid(Value),
}

impl<T> Field<T> {
    pub(super) fn valid(&self) -> Option<&T> {
        match self {
            Field::Valid(value) => Some(value),
            _ => None,
        }
    }

    fn is_invalid(&self) -> bool {
        matches!(self, Field::Invalid(_))
    }

    /// The later layer's key wins when it is present (valid or not), like a key-wise merge.
    fn or_earlier<'a>(&'a self, earlier: &'a Field<T>) -> &'a Field<T> {
        match self {
            Field::Absent => earlier,
            _ => self,
        }
    }
}

/// How a JSON value becomes a known setting.
pub(super) trait Known: Sized {
    fn from_value(value: &Value) -> Option<Self>;
}

impl<'de, T: Known> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(match T::from_value(&value) {
            Some(known) => Field::Valid(known),
            None => Field::Invalid(value),
        })
    }
}

/// A non-empty string.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Name(pub(super) String);

impl Known for Name {
    fn from_value(value: &Value) -> Option<Self> {
        value
            .as_str()
            .filter(|text| !text.is_empty())
            .map(|text| Name(text.to_string()))
    }
}

impl Known for String {
    fn from_value(value: &Value) -> Option<Self> {
        value.as_str().map(str::to_string)
    }
}

impl Known for bool {
    fn from_value(value: &Value) -> Option<Self> {
        value.as_bool()
    }
}

impl Known for ThinkingLevel {
    fn from_value(value: &Value) -> Option<Self> {
        value.as_str().and_then(ThinkingLevel::parse)
    }
}

impl Known for QueueMode {
    fn from_value(value: &Value) -> Option<Self> {
        match value.as_str()? {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }
}

/// An integer within `MIN..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ranged<const MIN: u64, const MAX: u64>(pub(super) u64);

impl<const MIN: u64, const MAX: u64> Known for Ranged<MIN, MAX> {
    fn from_value(value: &Value) -> Option<Self> {
        value
            .as_u64()
            .filter(|n| (MIN..=MAX).contains(n))
            .map(Ranged)
    }
}

/// A list of at most 128 non-empty paths of at most 4,096 bytes each.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PathList(pub(super) Vec<String>);

impl Known for PathList {
    fn from_value(value: &Value) -> Option<Self> {
        let items = value.as_array()?;
        if items.len() > MAX_PATH_ENTRIES {
            return None;
        }
        items
            .iter()
            .map(|item| {
                item.as_str()
                    .filter(|text| !text.is_empty() && text.len() <= MAX_PATH_BYTES)
                    .map(str::to_string)
            })
            .collect::<Option<Vec<_>>>()
            .map(PathList)
    }
}

pub(super) type Tokens = Ranged<1, 1_000_000>;

/// The keys zi understands, and everything else.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SettingsFile {
    pub(super) default_provider: Field<Name>,
    pub(super) default_model: Field<Name>,
    pub(super) default_thinking_level: Field<ThinkingLevel>,
    pub(super) compaction_enabled: Field<bool>,
    pub(super) compaction_reserve_tokens: Field<Tokens>,
    pub(super) compaction_keep_recent_tokens: Field<Tokens>,
    pub(super) steering_mode: Field<QueueMode>,
    pub(super) follow_up_mode: Field<QueueMode>,
    pub(super) retry_enabled: Field<bool>,
    pub(super) codex_fast_mode: Field<bool>,
    pub(super) retry_max_retries: Field<Ranged<0, 3>>,
    pub(super) retry_base_delay_ms: Field<Ranged<0, 17_000>>,
    pub(super) subagent_wait_timeout_ms: Field<Ranged<0, 3_600_000>>,
    pub(super) subagent_work_timeout_ms: Field<Ranged<1, 3_600_000>>,
    pub(super) external_editor: Field<String>,
    pub(super) extensions: Field<PathList>,
    pub(super) skills: Field<PathList>,
    pub(super) prompts: Field<PathList>,
    pub(super) sandbox: Field<SandboxSettings>,
    /// Keys this zi does not know, kept for forward compatibility.
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

impl SettingsFile {
    /// Deserializes a settings object. Known keys never fail here (see [`Field::Invalid`]).
    pub fn from_map(map: Map<String, Value>) -> Result<SettingsFile, SettingsProblem> {
        Ok(serde_json::from_value(Value::Object(map))?)
    }

    /// The first invalid known key, in the documented order, with its message.
    pub fn check(&self) -> Result<(), SettingsProblem> {
        let names = [
            ("defaultProvider", &self.default_provider),
            ("defaultModel", &self.default_model),
        ];
        for (key, field) in names {
            if field.is_invalid() {
                return Err(SettingsProblem::NotAName { key });
            }
        }
        if self.default_thinking_level.is_invalid() {
            return Err(SettingsProblem::NotAThinkingLevel);
        }
        if self.compaction_enabled.is_invalid() {
            return Err(SettingsProblem::NotABool {
                key: "compactionEnabled",
            });
        }
        let tokens = [
            ("compactionReserveTokens", &self.compaction_reserve_tokens),
            (
                "compactionKeepRecentTokens",
                &self.compaction_keep_recent_tokens,
            ),
        ];
        for (key, field) in tokens {
            if field.is_invalid() {
                return Err(SettingsProblem::NotATokenCount { key });
            }
        }
        for (key, field) in [
            ("steeringMode", &self.steering_mode),
            ("followUpMode", &self.follow_up_mode),
        ] {
            if field.is_invalid() {
                return Err(SettingsProblem::NotAQueueMode { key });
            }
        }
        for (key, field) in [
            ("retryEnabled", &self.retry_enabled),
            ("codexFastMode", &self.codex_fast_mode),
        ] {
            if field.is_invalid() {
                return Err(SettingsProblem::NotABool { key });
            }
        }
        if self.retry_max_retries.is_invalid() {
            return Err(SettingsProblem::RetryMaxRetries);
        }
        if self.retry_base_delay_ms.is_invalid() {
            return Err(SettingsProblem::RetryBaseDelayMs);
        }
        // docs/delegation.md#limits: the whole file is invalid with these exact texts.
        if self.subagent_wait_timeout_ms.is_invalid() {
            return Err(SettingsProblem::SubagentTimeout {
                key: "subagentWaitTimeoutMs",
            });
        }
        if self.subagent_work_timeout_ms.is_invalid() {
            return Err(SettingsProblem::SubagentTimeout {
                key: "subagentWorkTimeoutMs",
            });
        }
        if self.external_editor.is_invalid() {
            return Err(SettingsProblem::ExternalEditor);
        }
        for (key, field) in [
            ("extensions", &self.extensions),
            ("skills", &self.skills),
            ("prompts", &self.prompts),
        ] {
            if let Field::Invalid(value) = field {
                return Err(path_list_problem(key, value));
            }
        }
        if let Field::Invalid(value) = &self.sandbox
            && let Err(problem) = super::sandbox::parse(value)
        {
            return Err(SettingsProblem::Sandbox(problem));
        }
        Ok(())
    }

    /// This layer over `earlier`: each known key present here wins.
    pub(super) fn over(&self, earlier: &SettingsFile) -> SettingsFile {
        SettingsFile {
            default_provider: self
                .default_provider
                .or_earlier(&earlier.default_provider)
                .clone(),
            default_model: self
                .default_model
                .or_earlier(&earlier.default_model)
                .clone(),
            default_thinking_level: self
                .default_thinking_level
                .or_earlier(&earlier.default_thinking_level)
                .clone(),
            compaction_enabled: self
                .compaction_enabled
                .or_earlier(&earlier.compaction_enabled)
                .clone(),
            compaction_reserve_tokens: self
                .compaction_reserve_tokens
                .or_earlier(&earlier.compaction_reserve_tokens)
                .clone(),
            compaction_keep_recent_tokens: self
                .compaction_keep_recent_tokens
                .or_earlier(&earlier.compaction_keep_recent_tokens)
                .clone(),
            steering_mode: self
                .steering_mode
                .or_earlier(&earlier.steering_mode)
                .clone(),
            follow_up_mode: self
                .follow_up_mode
                .or_earlier(&earlier.follow_up_mode)
                .clone(),
            retry_enabled: self
                .retry_enabled
                .or_earlier(&earlier.retry_enabled)
                .clone(),
            codex_fast_mode: self
                .codex_fast_mode
                .or_earlier(&earlier.codex_fast_mode)
                .clone(),
            retry_max_retries: self
                .retry_max_retries
                .or_earlier(&earlier.retry_max_retries)
                .clone(),
            retry_base_delay_ms: self
                .retry_base_delay_ms
                .or_earlier(&earlier.retry_base_delay_ms)
                .clone(),
            subagent_wait_timeout_ms: self
                .subagent_wait_timeout_ms
                .or_earlier(&earlier.subagent_wait_timeout_ms)
                .clone(),
            subagent_work_timeout_ms: self
                .subagent_work_timeout_ms
                .or_earlier(&earlier.subagent_work_timeout_ms)
                .clone(),
            external_editor: self
                .external_editor
                .or_earlier(&earlier.external_editor)
                .clone(),
            extensions: self.extensions.or_earlier(&earlier.extensions).clone(),
            skills: self.skills.or_earlier(&earlier.skills).clone(),
            prompts: self.prompts.or_earlier(&earlier.prompts).clone(),
            sandbox: match (&self.sandbox, &earlier.sandbox) {
                (Field::Valid(later), Field::Valid(earlier)) => Field::Valid(later.over(earlier)),
                (later, earlier) => later.or_earlier(earlier).clone(),
            },
            other: Map::new(),
        }
    }

    /// The valid `sandbox` object of this layer (merged), if any.
    pub(super) fn sandbox(&self) -> Option<&SandboxSettings> {
        self.sandbox.valid()
    }

    /// A path list setting's paths (empty when absent).
    pub(super) fn paths(&self, key: &str) -> Vec<String> {
        let field = match key {
            "extensions" => &self.extensions,
            "skills" => &self.skills,
            _ => &self.prompts,
        };
        field.valid().map(|list| list.0.clone()).unwrap_or_default()
    }

    /// A key this crate does not interpret (`mcpServers`), as written.
    pub(super) fn unparsed(&self, key: &str) -> Option<&Value> {
        self.other.get(key)
    }
}

/// Why a path list setting is invalid.
fn path_list_problem(key: &'static str, value: &Value) -> SettingsProblem {
    match value.as_array() {
        None => SettingsProblem::NotAPathList { key },
        Some(paths) if paths.len() > MAX_PATH_ENTRIES => SettingsProblem::TooManyPaths { key },
        Some(_) => SettingsProblem::BadPath { key },
    }
}
