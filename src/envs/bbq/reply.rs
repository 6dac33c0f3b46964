//! Reading tool calls out of a model reply (spec §4.8–4.9): native provider tool calls
//! first; when there are none, the JSON-in-text fallback.
//!
//! Accepted text forms, in this order of preference:
//! 1. `<TOOL>{"name": "query", "arguments": {"inputs": [5]}}</TOOL>` blocks (tag case-
//!    insensitive, any number, an unclosed block runs to the end of the reply; the content
//!    may itself be wrapped in a ```json fence). Every block is a call attempt: bad JSON or a
//!    missing `name` is a malformed call.
//! 2. Without `<TOOL>` blocks: fenced code blocks (```json or bare ```) and a reply that is
//!    exactly one JSON object, taken as calls only when the object has a string `name` naming
//!    one of the three tools and an `arguments` key (so JSON notes in a scratchpad are not
//!    mistaken for calls).
//!
//! `arguments` may be an object or a string holding a JSON object (the OpenAI wire form).

use serde_json::{Map, Value};

use super::prompt::{PYTHON, QUERY, SUBMIT};
use crate::providers::ToolCall;

/// Tools the model may name.
const TOOLS: [&str; 3] = [QUERY, SUBMIT, PYTHON];

/// One request found in a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A readable call: tool name and its arguments object.
    Call {
        /// Tool name as written by the model (may be unknown).
        name: String,
        /// Arguments object (`{}` when the model sent none).
        arguments: Map<String, Value>,
    },
    /// A call attempt that could not be read; the text says why (shown to the model).
    Malformed(String),
}

/// A parsed reply: its calls and the text around them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Calls in reply order.
    pub items: Vec<Item>,
    /// Whether the calls came from the provider's native tool calling.
    pub native: bool,
    /// The reply text without `<TOOL>` blocks, trimmed (the scratchpad text).
    pub prose: String,
}

/// Arguments as an object: objects as-is, strings parsed, `null` as `{}`.
fn arguments_object(name: &str, value: &Value) -> Result<Map<String, Value>, String> {
    match value {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(format!("the arguments of `{name}` must be a JSON object")),
            Err(e) => Err(format!("the arguments of `{name}` are not valid JSON: {e}")),
        },
        _ => Err(format!("the arguments of `{name}` must be a JSON object")),
    }
}

/// A `{"name": .., "arguments": ..}` object as a call; `strict` reports why a non-call fails.
fn call_of(value: &Value) -> Result<Item, String> {
    let Some(obj) = value.as_object() else {
        return Err("a tool call must be a JSON object {\"name\": ..., \"arguments\": {...}}".into());
    };
    let Some(name) = obj.get("name").and_then(Value::as_str) else {
        return Err("a tool call needs a string \"name\"".into());
    };
    let arguments = obj.get("arguments").or_else(|| obj.get("parameters")).unwrap_or(&Value::Null);
    Ok(match arguments_object(name, arguments) {
        Ok(arguments) => Item::Call { name: name.to_owned(), arguments },
        Err(e) => Item::Malformed(e),
    })
}

/// Strips one surrounding ``` fence (with an optional language tag).
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let body = rest.split_once('\n').map_or("", |(_, b)| b);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Byte offset of the first ASCII-case-insensitive occurrence of `needle` at or after `from`.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    (from..=h.len().checked_sub(n.len())?).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

/// `<TOOL>` blocks as items, plus the text outside them.
fn tool_blocks(text: &str) -> (Vec<Item>, String) {
    let mut items = Vec::new();
    let mut prose = String::new();
    let mut at = 0;
    while let Some(open) = find_ci(text, "<TOOL>", at) {
        prose.push_str(&text[at..open]);
        let start = open + "<TOOL>".len();
        let (body, next) = match find_ci(text, "</TOOL>", start) {
            Some(close) => (&text[start..close], close + "</TOOL>".len()),
            None => (&text[start..], text.len()),
        };
        items.push(match serde_json::from_str::<Value>(unfence(body)) {
            Ok(v) => call_of(&v).unwrap_or_else(Item::Malformed),
            Err(e) => Item::Malformed(format!("the <TOOL> block is not valid JSON: {e}")),
        });
        at = next;
    }
    prose.push_str(&text[at..]);
    (items, prose.trim().to_owned())
}

/// Fenced blocks (and a whole-reply JSON object) that are well-formed calls of known tools.
fn fenced_calls(text: &str) -> Vec<Item> {
    let whole = text.trim();
    if whole.starts_with('{') && whole.ends_with('}') {
        return serde_json::from_str::<Value>(whole).ok().and_then(|v| known_call(&v)).into_iter().collect();
    }
    let mut items = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(nl) = after.find('\n') else { break };
        let body = &after[nl + 1..];
        let Some(close) = body.find("```") else { break };
        if let Some(item) = serde_json::from_str::<Value>(body[..close].trim()).ok().and_then(|v| known_call(&v)) {
            items.push(item);
        }
        rest = &body[close + 3..];
    }
    items
}

/// `value` as a call when it names a known tool and has `arguments`.
fn known_call(value: &Value) -> Option<Item> {
    let obj = value.as_object()?;
    let name = obj.get("name")?.as_str()?;
    (TOOLS.contains(&name) && obj.contains_key("arguments")).then(|| call_of(value).ok()).flatten()
}

/// Parses a reply: native `tool_calls` when present, else the text fallback.
pub fn parse(text: &str, native: &[ToolCall]) -> Reply {
    if !native.is_empty() {
        let items = native
            .iter()
            .map(|c| match arguments_object(&c.name, &c.arguments) {
                Ok(arguments) => Item::Call { name: c.name.clone(), arguments },
                Err(e) => Item::Malformed(e),
            })
            .collect();
        return Reply { items, native: true, prose: text.trim().to_owned() };
    }
    let (items, prose) = tool_blocks(text);
    if !items.is_empty() {
        return Reply { items, native: false, prose };
    }
    Reply { items: fenced_calls(text), native: false, prose }
}

/// A call in the documented text form, for replaying the model's turn in the conversation.
pub fn render_call(name: &str, arguments: &Value) -> String {
    format!("<TOOL>{{\"name\": {}, \"arguments\": {arguments}}}</TOOL>", Value::String(name.to_owned()))
}

/// The model's turn as text: its prose plus native calls in the `<TOOL>` form (the
/// providers' `Message` carries text only, so tool calls are replayed this way).
pub fn render_turn(text: &str, native: &[ToolCall]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !text.trim().is_empty() {
        parts.push(text.trim().to_owned());
    }
    parts.extend(native.iter().map(|c| render_call(&c.name, &c.arguments)));
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_fallback_forms_are_read() {
        let calls = |t: &str| parse(t, &[]).items;
        let q = |inputs: Value| Item::Call { name: QUERY.into(), arguments: json!({"inputs": inputs}).as_object().unwrap().clone() };
        assert_eq!(calls("<tool>{\"name\": \"query\", \"arguments\": {\"inputs\": [1]}}</tool>"), [q(json!([1]))]);
        assert_eq!(calls("<TOOL>\n```json\n{\"name\": \"query\", \"arguments\": \"{\\\"inputs\\\": [2]}\"}\n```\n</TOOL>"), [q(json!([2]))]);
        assert_eq!(calls("Let me query.\n```json\n{\"name\": \"query\", \"arguments\": {\"inputs\": [3]}}\n```"), [q(json!([3]))]);
        assert_eq!(calls("{\"name\": \"query\", \"arguments\": {\"inputs\": [4]}}"), [q(json!([4]))]);
        assert_eq!(calls("<TOOL>{\"name\": \"query\", \"arguments\": {\"inputs\": [5]}}"), [q(json!([5]))], "unclosed block");
        // JSON notes that are not calls of known tools are not calls.
        assert!(calls("```json\n{\"hypothesis\": \"x > 58\"}\n```").is_empty());
        assert!(calls("```json\n{\"name\": \"guess\", \"arguments\": {}}\n```").is_empty());
        assert!(matches!(&calls("<TOOL>[1, 2]</TOOL>")[..], [Item::Malformed(_)]));
        // Native calls win; their string arguments are parsed.
        let native = [ToolCall { id: "x".into(), name: QUERY.into(), arguments: json!("{\"inputs\": [6]}") }];
        let r = parse("<TOOL>{\"name\": \"query\", \"arguments\": {\"inputs\": [0]}}</TOOL>", &native);
        assert!(r.native);
        assert_eq!(r.items, [q(json!([6]))]);
        let bad = [ToolCall { id: "x".into(), name: QUERY.into(), arguments: json!("{inputs") }];
        assert!(matches!(&parse("", &bad).items[..], [Item::Malformed(_)]));
        assert_eq!(parse("notes <TOOL>{}</TOOL> more", &[]).prose, "notes  more");
    }
}
