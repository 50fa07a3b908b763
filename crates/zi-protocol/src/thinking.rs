//! Thinking levels: the closed, ordered set shared by the protocol, settings and providers.

use serde::{Deserialize, Serialize};

/// A thinking (reasoning effort) level, in ascending order of effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No reasoning.
    Off,
    /// The least reasoning.
    Minimal,
    /// Low effort.
    Low,
    /// Medium effort.
    Medium,
    /// High effort.
    High,
    /// Extra-high effort.
    Xhigh,
    /// The most reasoning.
    Max,
}

impl ThinkingLevel {
    /// Every level, in order.
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }

    /// The exact wire string, case-sensitive.
    pub fn parse(text: &str) -> Option<ThinkingLevel> {
        ThinkingLevel::ALL
            .into_iter()
            .find(|level| level.as_str() == text)
    }

    /// Position in [`ThinkingLevel::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_level_and_nothing_else() {
        for level in ThinkingLevel::ALL {
            assert_eq!(ThinkingLevel::parse(level.as_str()), Some(level));
        }
        assert_eq!(ThinkingLevel::parse("HIGH"), None);
        assert_eq!(ThinkingLevel::parse(""), None);
    }
}
