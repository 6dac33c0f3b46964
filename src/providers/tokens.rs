//! Prompt tokens counted before a call is sent, for the budget gate and the `run --dry-run`
//! estimate: with OpenAI's own tables (`tiktoken-rs`) for OpenAI models, and for every other
//! family an approximation that says so (o200k_base plus a margin, since each vendor's
//! tokenizer differs and most split text more finely than o200k_base).

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::Tokenizer as Table;

/// Margin added to an o200k_base count for a model whose own tokenizer evalgrid lacks.
pub const APPROXIMATE_MARGIN: f64 = 0.25;

/// How a model's prompt tokens are counted here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tokenizer {
    /// The model's own tiktoken table: counts match the provider's up to message framing.
    Exact(Table),
    /// o200k_base plus [`APPROXIMATE_MARGIN`]: a model of another family.
    Approximate,
}

impl Tokenizer {
    /// The tokenizer for `model` on an `openai` provider (or another family's when not):
    /// exact only where tiktoken knows the model name.
    #[must_use]
    pub fn for_model(openai: bool, model: &str) -> Self {
        match tiktoken_rs::tokenizer::get_tokenizer(model) {
            Some(table @ (Table::O200kBase | Table::O200kHarmony | Table::Cl100kBase)) if openai => Self::Exact(table),
            _ => Self::Approximate,
        }
    }

    fn table(self) -> &'static CoreBPE {
        match self {
            Self::Exact(Table::Cl100kBase) => tiktoken_rs::cl100k_base_singleton(),
            Self::Exact(Table::O200kHarmony) => tiktoken_rs::o200k_harmony_singleton(),
            _ => tiktoken_rs::o200k_base_singleton(),
        }
    }

    /// Tokens of `text` (rounded up for an approximation).
    #[must_use]
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    pub fn count(self, text: &str) -> u64 {
        let n = self.table().count_ordinary(text) as u64;
        match self {
            Self::Exact(_) => n,
            Self::Approximate => (n as f64 * (1.0 + APPROXIMATE_MARGIN)).ceil() as u64,
        }
    }

    /// Whether counts are the model's own.
    #[must_use]
    pub fn is_exact(self) -> bool {
        matches!(self, Self::Exact(_))
    }

    /// How counts are made, for the estimate: `o200k_base`, or the approximation.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Self::Exact(Table::Cl100kBase) => "cl100k_base",
            Self::Exact(Table::O200kHarmony) => "o200k_harmony",
            Self::Exact(_) => "o200k_base",
            Self::Approximate => "approximate: o200k_base + 25 %",
        }
    }
}

/// Tokens framing each message of a chat request on top of its text (role and separators,
/// as OpenAI's cookbook counts them), and the reply's priming.
pub const PER_MESSAGE: u64 = 4;

/// An upper bound on the prompt tokens of a request body: every string in it (texts, roles,
/// tool schemas) counted, plus [`PER_MESSAGE`] per string for framing.
#[must_use]
pub fn body_tokens(tokenizer: Tokenizer, body: &serde_json::Value) -> u64 {
    body_tokens_by(body, &mut |text| tokenizer.count(text))
}

/// [`body_tokens`] with the strings counted by `count` (e.g. one that remembers the long
/// prompts a grid repeats across models and seeds).
pub fn body_tokens_by(body: &serde_json::Value, count: &mut dyn FnMut(&str) -> u64) -> u64 {
    let mut total = PER_MESSAGE;
    let mut stack = vec![body];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::String(text) => total += count(text) + PER_MESSAGE,
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => stack.extend(map.values()),
            _ => total += 1,
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_count_with_their_own_table_and_others_say_they_approximate() {
        let gpt = Tokenizer::for_model(true, "gpt-4o-2024-08-06");
        assert_eq!(gpt, Tokenizer::Exact(Table::O200kBase));
        // tiktoken's own count of this sentence under o200k_base.
        assert_eq!(gpt.count("hello world"), 2);
        let claude = Tokenizer::for_model(false, "claude-sonnet-4-5");
        assert!(!claude.is_exact());
        assert!(claude.count("hello world") >= 2);
        assert!(claude.describe().starts_with("approximate"));
        // A gpt name on another provider's server is still approximated.
        assert!(!Tokenizer::for_model(false, "gpt-4o").is_exact());
    }

    #[test]
    fn a_body_bound_covers_its_texts() {
        let t = Tokenizer::for_model(true, "gpt-4o");
        let body = serde_json::json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 5});
        assert!(body_tokens(t, &body) >= t.count("hello world") + PER_MESSAGE);
    }
}
