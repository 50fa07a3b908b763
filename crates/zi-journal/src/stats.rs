//! Usage statistics of a whole session journal (`session.get_stats`): token usage, turns, tool
//! calls, retries and compactions, in total and per model, priced with the model catalog (the
//! session passes its prices in: the journal does not know the catalog).
//!
//! A [`StatsTally`] is fed the journal's entries in order. In-memory entries go through
//! [`StatsTally::add_entry`]; entries that live only on disk (the compacted history of a
//! resumed journal, which is never loaded) go through [`tally_prefix`], which reads only the
//! few fields the tally needs from each line. Both end in the same counting rules.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use zi_protocol::event::EntryData;
use zi_protocol::message::{AgentMessage, Cost, Usage};
use zi_protocol::results::{ModelStats, Pricing, SessionStats, UsageStats};

/// Running counts over a prefix of the journal.
#[derive(Debug, Clone, Default)]
pub struct StatsTally {
    total: UsageStats,
    /// `(provider, id, counts)`, in order of first appearance.
    models: Vec<(String, String, UsageStats)>,
    /// The model in effect (the latest model change or assistant message): retries and
    /// compactions are counted for it.
    current: Option<usize>,
}

impl StatsTally {
    /// Counts one journal entry.
    pub fn add_entry(&mut self, data: &EntryData) {
        match data {
            EntryData::Message {
                message: AgentMessage::Assistant(message),
            } => self.assistant(
                &message.provider,
                &message.model,
                &message.usage,
                message.tool_calls().map(|call| call.name.as_str()),
            ),
            EntryData::ModelChange { provider, model_id } => {
                self.current = Some(self.model_index(provider, model_id));
            }
            EntryData::Retry { .. } => self.count(|stats| stats.retries += 1),
            EntryData::Compaction(_) => self.count(|stats| stats.compactions += 1),
            _ => {}
        }
    }

    /// Counts one journal line read from disk.
    fn add_line(&mut self, line: &StatsLine<'_>) {
        match (line.kind.as_ref(), &line.message) {
            ("message", Some(message)) if message.role == "assistant" => self.assistant(
                &message.provider,
                &message.model,
                &message.usage,
                message.content.iter().map(String::as_str),
            ),
            ("model_change", _) => {
                if let (Some(provider), Some(model_id)) = (&line.provider, &line.model_id) {
                    self.current = Some(self.model_index(provider, model_id));
                }
            }
            ("retry", _) => self.count(|stats| stats.retries += 1),
            ("compaction", _) => self.count(|stats| stats.compactions += 1),
            _ => {}
        }
    }

    fn model_index(&mut self, provider: &str, id: &str) -> usize {
        if let Some(index) = self
            .models
            .iter()
            .position(|(p, i, _)| p == provider && i == id)
        {
            return index;
        }
        self.models
            .push((provider.to_string(), id.to_string(), UsageStats::default()));
        self.models.len() - 1
    }

    /// One assistant message: a turn with its usage and tool calls, for its own model.
    fn assistant<'a>(
        &mut self,
        provider: &str,
        model: &str,
        usage: &Usage,
        tool_names: impl Iterator<Item = &'a str>,
    ) {
        let index = self.model_index(provider, model);
        self.current = Some(index);
        let tool_names: Vec<&str> = tool_names.collect();
        for stats in [&mut self.total, &mut self.models[index].2] {
            stats.turns += 1;
            stats.usage.add(usage);
            for name in &tool_names {
                stats.tool_calls.total += 1;
                *stats
                    .tool_calls
                    .by_name
                    .entry((*name).to_string())
                    .or_default() += 1;
            }
        }
    }

    /// Counts an event for the total and the model in effect.
    fn count(&mut self, add: impl Fn(&mut UsageStats)) {
        add(&mut self.total);
        if let Some(index) = self.current {
            add(&mut self.models[index].2);
        }
    }

    /// The public statistics. `price(provider, id, usage)` fills `usage.cost` with the model's
    /// current catalog prices and returns `true`, or returns `false` for a model the catalog does
    /// not know, which keeps the costs its messages recorded. The total cost is the sum of the
    /// models' costs.
    pub fn stats(&self, price: &dyn Fn(&str, &str, &mut Usage) -> bool) -> SessionStats {
        let mut total = self.total.clone();
        total.usage.cost = Cost::default();
        let models = self
            .models
            .iter()
            .map(|(provider, id, stats)| {
                let mut stats = stats.clone();
                let pricing = if price(provider, id, &mut stats.usage) {
                    Pricing::Catalog
                } else {
                    Pricing::Journal
                };
                total.usage.cost.add(&stats.usage.cost);
                ModelStats {
                    provider: provider.clone(),
                    id: id.clone(),
                    pricing,
                    stats,
                }
            })
            .collect();
        SessionStats { total, models }
    }
}

/// Tallies the journal lines at `path` that precede the entry `first_resident_id` (the part of a
/// resumed journal that stays on disk).
pub fn tally_prefix(path: &Path, first_resident_id: &str) -> Result<StatsTally, TallyError> {
    use std::io::BufRead;
    let read = |source| TallyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    let mut tally = StatsTally::default();
    // The header.
    reader.read_until(b'\n', &mut line).map_err(read)?;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(read)? == 0 {
            return Err(TallyError::NotFound {
                path: path.to_path_buf(),
                id: first_resident_id.to_string(),
            });
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let entry: StatsLine<'_> =
            serde_json::from_slice(text).map_err(|source| TallyError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        if entry.id == first_resident_id {
            return Ok(tally);
        }
        tally.add_line(&entry);
    }
}

/// Why the on-disk part of a journal could not be tallied; `Display` names the file.
#[derive(Debug, thiserror::Error)]
pub enum TallyError {
    /// The file could not be read.
    #[error("{}", crate::messages::read_failed(path.display(), source))]
    Read {
        /// The journal file.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file has no entry with the first resident entry's id: it changed under the session.
    #[error("{}", crate::messages::read_failed(path.display(), format_args!("entry {id} was not found")))]
    NotFound {
        /// The journal file.
        path: PathBuf,
        /// The entry the tally stops at.
        id: String,
    },
    /// A line before that entry is not a journal entry.
    #[error("{}", crate::messages::read_failed(path.display(), source))]
    Parse {
        /// The journal file.
        path: PathBuf,
        /// What parsing the line said.
        source: serde_json::Error,
    },
}

/// The fields of one journal line that the tally reads; everything else is skipped unparsed.
#[derive(Deserialize)]
struct StatsLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default)]
    message: Option<StatsMessage>,
    /// `model_change` fields.
    #[serde(default)]
    provider: Option<String>,
    #[serde(default, rename = "modelId")]
    model_id: Option<String>,
}

#[derive(Deserialize)]
struct StatsMessage {
    role: String,
    #[serde(default)]
    provider: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: Usage,
    /// The names of the message's tool calls.
    #[serde(default, deserialize_with = "tool_call_names")]
    content: Vec<String>,
}

/// Reads message content (a string, or blocks) keeping only the names of `toolCall` blocks.
fn tool_call_names<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(default)]
        name: Option<String>,
    }
    struct Names;
    impl<'de> Visitor<'de> for Names {
        type Value = Vec<String>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("message content")
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut blocks: A) -> Result<Vec<String>, A::Error> {
            let mut names = Vec::new();
            while let Some(block) = blocks.next_element::<Block<'de>>()? {
                if block.kind == "toolCall"
                    && let Some(name) = block.name
                {
                    names.push(name);
                }
            }
            Ok(names)
        }
    }
    deserializer.deserialize_any(Names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_counts_like_the_entry_it_holds() {
        let line = r#"{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}},{"type":"toolCall","id":"c2","name":"bash","arguments":{}}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":10,"output":5,"cacheRead":2,"cacheWrite":1,"totalTokens":18,"cost":{"input":0.1,"output":0.2,"cacheRead":0.0,"cacheWrite":0.0,"total":0.3}},"stopReason":"toolUse","timestamp":1},"id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#;
        let parsed: StatsLine<'_> = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        let mut from_line = StatsTally::default();
        from_line.add_line(&parsed);
        let entry: zi_protocol::event::SessionEntry =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        let mut from_entry = StatsTally::default();
        from_entry.add_entry(&entry.data);
        // A catalog that knows no model: the costs stay the journal's.
        let catalog = |_: &str, _: &str, _: &mut Usage| false;
        assert_eq!(from_line.stats(&catalog), from_entry.stats(&catalog));
        let stats = from_line.stats(&catalog);
        assert_eq!(stats.total.turns, 1);
        assert_eq!(stats.total.usage.input, 10);
        assert_eq!(stats.total.tool_calls.total, 2);
        assert_eq!(stats.total.tool_calls.by_name.get("read"), Some(&1));
        assert_eq!(stats.models[0].pricing, Pricing::Journal);
        assert_eq!(stats.total.usage.cost.total, 0.3);
    }
}
