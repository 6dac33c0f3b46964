//! What evalgrid knows about servers and model families: which OpenAI-compatible server a
//! base URL names, each Claude model's output ceiling and thinking style, and each Gemini
//! model's generation.
//!
//! Small, explicit tables (issue 13): a request body must fit the server that receives it,
//! and an unknown server or model falls back to the behaviour evalgrid always had.

use super::base_url::host;

fn host_is(base_url: &str, domain: &str) -> bool {
    host(base_url).is_some_and(|host| host == domain || host.ends_with(&format!(".{domain}")))
}

/// OpenAI's own API or Azure OpenAI: the servers that want `max_completion_tokens`
/// (their reasoning models reject `max_tokens`); every other server documents `max_tokens`.
#[must_use]
pub fn is_openai_platform(base_url: &str) -> bool {
    host(base_url).as_deref() == Some("api.openai.com") || host_is(base_url, "openai.azure.com") || host_is(base_url, "cognitiveservices.azure.com")
}

/// Whether `base_url` is OpenAI's own API, the only server `auto` settings act on.
#[must_use]
pub fn is_openai_api(base_url: &str) -> bool {
    host(base_url).as_deref() == Some("api.openai.com")
}

/// xAI's API, whose `completion_tokens` leaves out the reasoning tokens it bills.
#[must_use]
pub fn is_xai(base_url: &str) -> bool {
    host_is(base_url, "x.ai")
}

/// The `major.minor` version right after `prefix` in a model id (`gpt-5.2-mini` → (5, 2),
/// `gpt-5-2025-08-07` → (5, 0)); `None` when no number follows the prefix.
#[must_use]
pub fn family_version(id: &str, prefix: &str) -> Option<(u32, u32)> {
    let rest = id.strip_prefix(prefix)?;
    let digits = |text: &str| text.bytes().take_while(u8::is_ascii_digit).count();
    let major_len = digits(rest);
    let major = rest[..major_len].parse().ok()?;
    let minor = match rest[major_len..].strip_prefix('.') {
        Some(after) => after[..digits(after)].parse().unwrap_or(0),
        None => 0,
    };
    Some((major, minor))
}

/// A model id reduced to its family name: the part after a gateway's `vendor/` or
/// Bedrock's `anthropic.` prefix, lowercased, with dots turned into dashes
/// (`anthropic/claude-opus-4.7` → `claude-opus-4-7`).
fn family_id(model: &str) -> String {
    let last = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let last = last.strip_prefix("anthropic.").unwrap_or(&last).to_owned();
    last.replace('.', "-")
}

/// Claude model families, most specific first: (prefix, max output tokens, thinking style).
const CLAUDE: &[(&str, u64, ClaudeThinking)] = &[
    ("claude-3-haiku", 4_096, ClaudeThinking::None),
    ("claude-3-opus", 4_096, ClaudeThinking::None),
    ("claude-3-sonnet", 4_096, ClaudeThinking::None),
    ("claude-3-5-haiku", 8_192, ClaudeThinking::None),
    ("claude-3-5-sonnet", 8_192, ClaudeThinking::None),
    ("claude-3-7-sonnet", 64_000, ClaudeThinking::Manual),
    ("claude-haiku-4-5", 64_000, ClaudeThinking::Manual),
    ("claude-sonnet-4-5", 64_000, ClaudeThinking::Manual),
    ("claude-opus-4-5", 64_000, ClaudeThinking::Manual),
    ("claude-opus-4-1", 32_000, ClaudeThinking::Manual),
    ("claude-sonnet-4-6", 128_000, ClaudeThinking::Both),
    ("claude-opus-4-6", 128_000, ClaudeThinking::Both),
    ("claude-opus-4-7", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-opus-4-8", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-sonnet-4", 64_000, ClaudeThinking::Manual),
    ("claude-opus-4", 32_000, ClaudeThinking::Manual),
    ("claude-mythos", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-fable", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-opus-5", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-sonnet-5", 128_000, ClaudeThinking::AdaptiveOnly),
    ("claude-haiku-5", 128_000, ClaudeThinking::AdaptiveOnly),
];

/// How a Claude model takes extended thinking (Anthropic's adaptive-thinking docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeThinking {
    /// No extended thinking.
    None,
    /// Only `{type: enabled, budget_tokens}` (Sonnet/Opus 4.5 and earlier).
    Manual,
    /// Adaptive with `output_config.effort`; manual still accepted (Opus/Sonnet 4.6).
    Both,
    /// Adaptive only: manual thinking and sampling parameters give a 400 (Opus 4.7+, 5.x).
    AdaptiveOnly,
}

fn claude_entry(model: &str) -> Option<(u64, ClaudeThinking)> {
    let id = family_id(model);
    CLAUDE.iter().find(|(prefix, _, _)| id.starts_with(prefix)).map(|(_, max, thinking)| (*max, *thinking))
}

/// A Claude model's maximum output tokens, the default cap when the model entry sets no
/// `max_tokens`; `None` for a model not in the table.
#[must_use]
pub fn claude_max_output(model: &str) -> Option<u64> {
    claude_entry(model).map(|(max, _)| max)
}

/// How a Claude model takes thinking; an unknown model is treated as `Manual`, the only
/// form evalgrid sent before.
#[must_use]
pub fn claude_thinking(model: &str) -> ClaudeThinking {
    claude_entry(model).map_or(ClaudeThinking::Manual, |(_, thinking)| thinking)
}

/// The major generation of a Gemini model (`gemini-2.5-flash` → 2, `gemini-3-pro` → 3);
/// `None` when the id does not say.
#[must_use]
pub fn gemini_generation(model: &str) -> Option<u32> {
    let id = family_id(model.strip_prefix("models/").unwrap_or(model));
    let rest = id.strip_prefix("gemini-")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_platform_is_only_openai_and_azure() {
        for url in
            ["https://api.openai.com", "https://api.openai.com/v1", "https://x.openai.azure.com/openai/v1", "https://r.cognitiveservices.azure.com/openai"]
        {
            assert!(is_openai_platform(url), "{url}");
        }
        for url in [
            "http://127.0.0.1:11434/v1",
            "https://api.x.ai/v1",
            "https://openrouter.ai/api/v1",
            "https://api.deepseek.com",
            "https://notapi.openai.com.evil.io",
            "not a url",
        ] {
            assert!(!is_openai_platform(url), "{url}");
        }
        assert!(is_xai("https://api.x.ai/v1") && !is_xai("https://box.ai/v1"));
    }

    #[test]
    fn claude_table_matches_specific_families_first() {
        assert_eq!(claude_max_output("claude-opus-4-5-20251101"), Some(64_000));
        assert_eq!(claude_max_output("claude-opus-4-20250514"), Some(32_000));
        assert_eq!(claude_max_output("anthropic/claude-opus-4.7"), Some(128_000));
        assert_eq!(claude_max_output("anthropic.claude-sonnet-4-6"), Some(128_000));
        assert_eq!(claude_max_output("claude-3-haiku-20240307"), Some(4_096));
        assert_eq!(claude_max_output("glm-4.6"), None);
        assert_eq!(claude_thinking("claude-opus-4-7"), ClaudeThinking::AdaptiveOnly);
        assert_eq!(claude_thinking("claude-sonnet-5"), ClaudeThinking::AdaptiveOnly);
        assert_eq!(claude_thinking("claude-opus-4-6"), ClaudeThinking::Both);
        assert_eq!(claude_thinking("claude-sonnet-4-5"), ClaudeThinking::Manual);
        assert_eq!(claude_thinking("some-gateway-model"), ClaudeThinking::Manual);
    }

    #[test]
    fn gemini_generation_from_the_id() {
        assert_eq!(gemini_generation("gemini-2.5-flash"), Some(2));
        assert_eq!(gemini_generation("models/gemini-2.0-flash"), Some(2));
        assert_eq!(gemini_generation("gemini-3-pro-preview"), Some(3));
        assert_eq!(gemini_generation("google/gemini-3.1-flash"), Some(3));
        assert_eq!(gemini_generation("gemma-3-27b"), None);
    }
}
