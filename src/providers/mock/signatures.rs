//! The mock's reasoning signatures, and the check the real APIs make on a tool round that
//! replays a function call: Anthropic (thinking on) wants the assistant turn with the
//! `tool_use` to start with its signed thinking blocks; Gemini wants the `thoughtSignature`
//! back on the first `functionCall` part of the model turn. Either answers 400 otherwise,
//! with the messages below (as the APIs word them).

use serde_json::Value;

/// Prefix of the Anthropic thinking signatures the mock issues (the route index follows).
pub(super) const ANTHROPIC_SIGNATURE: &str = "mock-signature-";

/// Prefix of the Gemini thought signatures the mock issues (the route index follows).
pub(super) const GEMINI_SIGNATURE: &str = "mock-thought-signature-";

fn kind(value: &Value) -> &str {
    value.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// Why Anthropic would reject `body` (thinking on) for a tool round without its signed thinking.
pub(super) fn anthropic(body: &Value) -> Option<String> {
    let thinking = body.get("thinking").is_some_and(|thinking| kind(thinking) != "disabled");
    if !thinking {
        return None;
    }
    let messages = body.get("messages").and_then(Value::as_array)?;
    for (index, message) in messages.iter().enumerate() {
        let Some(blocks) = message.get("content").and_then(Value::as_array) else { continue };
        if message.get("role").and_then(Value::as_str) != Some("assistant") || !blocks.iter().any(|block| kind(block) == "tool_use") {
            continue;
        }
        let first = blocks.first().map_or("nothing", kind);
        if first != "thinking" && first != "redacted_thinking" {
            return Some(format!(
                "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final \
                 `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend \
                 you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at \
                 https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
            ));
        }
        for (at, block) in blocks.iter().enumerate() {
            let signed = match kind(block) {
                "thinking" => block.get("signature").and_then(Value::as_str).is_some_and(|signature| signature.starts_with(ANTHROPIC_SIGNATURE)),
                "redacted_thinking" => block.get("data").and_then(Value::as_str).is_some_and(|data| !data.is_empty()),
                _ => true,
            };
            if !signed {
                return Some(format!("messages.{index}.content.{at}: Invalid `signature` in `{}` block", kind(block)));
            }
        }
    }
    None
}

/// Why Gemini would reject `body` for a function call without its thought signature.
pub(super) fn gemini(body: &Value) -> Option<String> {
    let contents = body.get("contents").and_then(Value::as_array)?;
    for content in contents.iter().filter(|content| content.get("role").and_then(Value::as_str) == Some("model")) {
        let parts = content.get("parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let Some((position, first_call)) = parts.iter().enumerate().find(|(_, part)| part.get("functionCall").is_some()) else { continue };
        match first_call.get("thoughtSignature").and_then(Value::as_str) {
            None => {
                let name = first_call.pointer("/functionCall/name").and_then(Value::as_str).unwrap_or_default();
                return Some(format!(
                    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing \
                     thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}` , position {}. \
                     Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                    position + 1
                ));
            }
            Some(signature) if !signature.starts_with(GEMINI_SIGNATURE) => return Some("Corrupted thought signature.".into()),
            Some(_) => {}
        }
    }
    None
}
