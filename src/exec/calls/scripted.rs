//! The `scripted` provider's answers, read from its replies file once per run (no HTTP).

use serde_json::Value;

use crate::exec::step_error::StepError;
use crate::providers::scripted::{ScriptError, Scripts};
use crate::providers::{ChatRequest, ChatResponse};
use crate::spec::ModelConfig;

/// Answers a call from the model's replies file (deterministic, no HTTP).
pub(super) fn scripted_reply(scripts: &Scripts, model: &ModelConfig, request: &ChatRequest) -> Result<ChatResponse, StepError> {
    let path = model.params.get("file").and_then(Value::as_str).ok_or_else(|| StepError::episode_msg("scripted model without `params.file`"))?;
    let path = std::path::Path::new(path);
    let failed = |error: ScriptError| match error {
        // The I/O or JSON error stays the failed episode's source.
        ScriptError::Read { path, source } => StepError::episode_in(format!("cannot read replies file `{}`", path.display()), source),
        ScriptError::Parse { path, source } => StepError::episode_in(format!("replies file `{}`", path.display()), source),
        other @ ScriptError::NoReply(_) => StepError::episode_msg(other.to_string()),
    };
    let script = scripts.get(path).map_err(failed)?;
    script.reply(path, &model.model, request).map_err(failed)
}
