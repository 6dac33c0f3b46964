//! How one server's answers are normalised before any benchmark sees them: a leaf every
//! protocol and the caller's cache path share, so no protocol file imports another and
//! the caller imports none.

use serde_json::Value;

use super::families::is_xai;
use super::types::{ChatRequest, ChatResponse};

/// Param naming the output-cap field explicitly (`max_tokens` or `max_completion_tokens`);
/// read by evalgrid, never sent.
pub const MAX_TOKENS_FIELD: &str = "max_tokens_field";

/// Param naming the tag whose leading block is reasoning (`think` by default), or `false`
/// to keep the answer text exactly as sent; read by evalgrid, never sent.
pub const REASONING_TAG: &str = "reasoning_tag";

/// How one server's answers are normalised before any benchmark sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaping {
    /// A leading `<tag>…</tag>` block in the answer is moved to `reasoning` (vLLM without a
    /// reasoning parser, llama.cpp `--reasoning-format none`); `None` keeps the text whole.
    pub reasoning_tag: Option<String>,
    /// The server is xAI, whose `completion_tokens` leaves out reasoning tokens.
    pub xai: bool,
}

impl Default for Shaping {
    /// `<think>` blocks split off; not xAI.
    fn default() -> Self {
        Self { reasoning_tag: Some("think".into()), xai: false }
    }
}

impl Shaping {
    /// The shaping for a call: `params.reasoning_tag` (a tag name, or `false`/`null` for
    /// none) and the server's family from its base URL.
    #[must_use]
    pub fn for_call(request: &ChatRequest, base_url: &str) -> Self {
        let reasoning_tag = match request.params.get(REASONING_TAG) {
            None => Some("think".to_owned()),
            Some(Value::String(tag)) if !tag.is_empty() => Some(tag.clone()),
            Some(_) => None,
        };
        Self { reasoning_tag, xai: is_xai(base_url) }
    }
}

/// Moves a leading `<tag>…</tag>` block (leading whitespace allowed) from `text` into
/// `reasoning`, after any reasoning the server already separated; an unclosed block (the
/// cap cut the thinking) is all reasoning. Text without the block is left untouched.
#[must_use]
pub fn split_reasoning(mut response: ChatResponse, tag: &str) -> ChatResponse {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let Some(inner) = response.text.trim_start().strip_prefix(open.as_str()) else {
        return response;
    };
    let (thought, answer) = match inner.find(close.as_str()) {
        Some(end) => (&inner[..end], inner[end + close.len()..].trim_start()),
        None => (inner, ""),
    };
    let thought = thought.trim();
    response.reasoning = match (response.reasoning.take(), thought.is_empty()) {
        (Some(before), false) => Some(format!("{before}\n{thought}")),
        (before, true) => before,
        (None, false) => Some(thought.to_owned()),
    };
    response.text = answer.to_owned();
    response
}

/// The reasoning split of OpenAI-compatible answers ([`Shaping::reasoning_tag`]), shared by
/// the two OpenAI protocols' `settle`.
#[must_use]
pub fn split_by_tag(response: ChatResponse, shaping: &Shaping) -> ChatResponse {
    match &shaping.reasoning_tag {
        Some(tag) => split_reasoning(response, tag),
        None => response,
    }
}
