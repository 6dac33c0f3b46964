//! The `scripted` provider: answers from a JSON replies file, with no HTTP, for tests and
//! demos. The file is read once per run ([`Scripts`]), not once per call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::types::{ChatRequest, ChatResponse, FinishReason, Role};

/// Replies file of the `scripted` provider: the first rule whose `contains`
/// occurs in the last user message (its text, or the tool outputs it carries) answers;
/// otherwise `default`. A rule may answer with tool calls (`tool_calls`), as an agent; their
/// ids (`call_<turns so far>_<i>`) differ from turn to turn, as a provider's do.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    replies: Vec<ScriptRule>,
    #[serde(default)]
    default: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptRule {
    contains: String,
    #[serde(default)]
    reply: String,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
}

/// A tool call a scripted rule answers with.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

/// Why a scripted model could not answer; the text is what the failed cell says.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The replies file could not be read.
    #[error("cannot read replies file `{path}`")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The replies file is not a replies object.
    #[error("replies file `{path}`")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why.
        #[source]
        source: serde_json::Error,
    },
    /// No rule matched and there is no `default`.
    #[error("replies file `{0}` has no reply for this prompt and no `default`")]
    NoReply(PathBuf),
}

impl Script {
    /// Reads and parses a replies file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read { path: path.to_owned(), source })?;
        serde_json::from_str(&text).map_err(|source| ScriptError::Parse { path: path.to_owned(), source })
    }

    /// The answer to `request`, as model `model` (deterministic, no HTTP).
    pub fn reply(&self, path: &Path, model: &str, request: &ChatRequest) -> Result<ChatResponse, ScriptError> {
        let last = request.messages.iter().rev().find(|m| m.role == Role::User);
        let mut seen = last.map_or_else(String::new, |m| m.content.clone());
        for item in last.map(|m| m.items.as_slice()).unwrap_or_default() {
            if let Some(output) = item.get("output").and_then(serde_json::Value::as_str) {
                seen.push('\n');
                seen.push_str(output);
            }
        }
        let (reply, calls) = self
            .replies
            .iter()
            .find(|r| seen.contains(&r.contains))
            .map(|r| (r.reply.clone(), r.tool_calls.clone()))
            .or_else(|| self.default.clone().map(|d| (d, Vec::new())))
            .ok_or_else(|| ScriptError::NoReply(path.to_owned()))?;
        let tool_calls: Vec<super::types::ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| super::types::ToolCall { id: format!("call_{}_{i}", request.messages.len()), name: c.name, arguments: c.arguments })
            .collect();
        let finish_reason = if tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls };
        Ok(ChatResponse { tool_calls, finish_reason, ..ChatResponse::text_from(model, reply) })
    }
}

/// The replies files of one run, each read at its first use. A file edited during a run is
/// not read again: the run answers from one version of it (its hash is in the cell keys).
#[derive(Debug, Default)]
pub struct Scripts(Mutex<HashMap<PathBuf, Arc<Script>>>);

impl Scripts {
    /// The parsed file at `path` (read now if this run has not read it); errors are not kept,
    /// so a later call reads the file again.
    pub fn get(&self, path: &Path) -> Result<Arc<Script>, ScriptError> {
        if let Some(script) = self.0.lock().unwrap_or_else(PoisonError::into_inner).get(path) {
            return Ok(Arc::clone(script));
        }
        let script = Arc::new(Script::load(path)?);
        self.0.lock().unwrap_or_else(PoisonError::into_inner).entry(path.to_owned()).or_insert_with(|| Arc::clone(&script));
        Ok(script)
    }

    /// How many files this run has read.
    #[must_use]
    pub fn loaded(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Message;

    #[test]
    fn rules_match_the_last_user_turn_or_its_tool_results_and_may_call_tools() {
        let script: Script = serde_json::from_str(
            r#"{"replies": [
                {"contains": "[exit code 0]", "tool_calls": [{"name": "done"}]},
                {"contains": "hello", "reply": "on it", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}
            ], "default": "?"}"#,
        )
        .unwrap();
        let path = Path::new("r.json");
        let mut request = ChatRequest { messages: vec![Message::user("say hello")], ..ChatRequest::default() };
        let first = script.reply(path, "m", &request).unwrap();
        assert_eq!((first.text.as_str(), first.tool_calls.len(), first.finish_reason.clone()), ("on it", 1, FinishReason::ToolCalls));
        assert_eq!(first.tool_calls[0].arguments["command"], "ls");
        request.messages.push(Message::assistant_turn(&first));
        request.messages.push(Message::tool_outputs([("call_0", "[exit code 0]\nfile")], ""));
        let second = script.reply(path, "m", &request).unwrap();
        assert_eq!(second.tool_calls[0].name, "done");
        request.messages.push(Message::user("what now"));
        let third = script.reply(path, "m", &request).unwrap();
        assert_eq!((third.text.as_str(), third.tool_calls.len(), third.finish_reason), ("?", 0, FinishReason::Stop));
    }
}
