//! `provider:` of a model entry as a type: who answers for a model, read once by `spec`
//! so no other layer compares provider strings.

use std::fmt;

use serde::Serialize;

use crate::providers::ProviderKind;

/// Who answers for a model entry; serialised lowercase, the same strings as when it was a
/// `String`, so every cache key that holds it is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// A built-in agent of the benchmark: no model calls.
    Builtin,
    /// Replies from a file: calls answered without HTTP, for tests.
    Scripted,
    /// OpenAI Chat Completions or Responses, and compatible servers.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

impl Provider {
    /// Every provider a pipeline may name, in the order listings and hints show them.
    pub const ALL: [Self; 5] = [Self::Builtin, Self::OpenAi, Self::Anthropic, Self::Gemini, Self::Scripted];

    /// The name written in pipeline files, identical to the serde form.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Scripted => "scripted",
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
        }
    }

    /// The provider written `name` in a pipeline file, if there is one.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Whether a built-in agent plays (so no model is called).
    #[must_use]
    pub fn is_builtin(self) -> bool {
        self == Self::Builtin
    }

    /// Whether replies come from a file instead of a server.
    #[must_use]
    pub fn is_scripted(self) -> bool {
        self == Self::Scripted
    }

    /// Whether the model is called over HTTP (and so takes transport settings).
    #[must_use]
    pub fn over_http(self) -> bool {
        self.api_kind().is_some()
    }

    /// The wire protocol family the model's calls use, or `None` when no HTTP call is made
    /// (`openai` may still be routed to the Responses API per request).
    #[must_use]
    pub fn api_kind(self) -> Option<ProviderKind> {
        match self {
            Self::OpenAi => Some(ProviderKind::OpenAi),
            Self::Anthropic => Some(ProviderKind::Anthropic),
            Self::Gemini => Some(ProviderKind::Gemini),
            Self::Builtin | Self::Scripted => None,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Provider;

    /// The serde form, the name and the parse agree for every provider, so keys that held
    /// the old `String` hold the same bytes now.
    #[test]
    fn names_round_trip_and_serialise_as_before() {
        for p in Provider::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(p.as_str()));
            assert_eq!(Provider::parse(p.as_str()), Some(p));
        }
        let names: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names, ["builtin", "openai", "anthropic", "gemini", "scripted"]);
        assert_eq!(Provider::parse("OpenAI"), None);
        assert!(Provider::Scripted.api_kind().is_none() && Provider::Gemini.over_http());
    }
}
