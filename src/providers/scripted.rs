//! The `scripted` provider: answers from a JSON replies file, with no HTTP, for tests and
//! demos. The file is read once per run ([`Scripts`]), not once per call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::types::{ChatRequest, ChatResponse, FinishReason, Role, Usage};

/// Replies file of the `scripted` provider: the first rule whose `contains`
/// occurs in the last user message answers; otherwise `default`.
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
    reply: String,
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
        let last = request.messages.iter().rev().find(|m| m.role == Role::User).map_or("", |m| m.content.as_str());
        let reply = self
            .replies
            .iter()
            .find(|r| last.contains(&r.contains))
            .map(|r| r.reply.clone())
            .or_else(|| self.default.clone())
            .ok_or_else(|| ScriptError::NoReply(path.to_owned()))?;
        Ok(ChatResponse {
            text: reply,
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            answered_model: model.to_owned(),
            finish_reason: FinishReason::Stop,
            latency_ms: 0,
            refusal: None,
            usage_reported: true,
            items: Vec::new(),
            paid: None,
        })
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
