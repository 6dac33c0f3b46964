//! A call's identity: where it sits in its episode ([`CallSite`]), the endpoint it goes to,
//! and its key components (model identity, exact body, site, versions).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::exec::step_error::StepError;
use crate::plan::key::key_components;
use crate::plan::{StepKey, StepKind};
use crate::providers::{ChatRequest, Endpoint, request_body, request_fingerprint_of, route};
use crate::spec::ModelConfig;

/// Version of the call-step record; bump when `ChatResponse`'s stored shape changes.
pub const CALL_VERSION: u32 = 1;

/// Where a call sits, so repeated identical prompts in different places stay
/// distinct when they must (multi-turn games) and shared when they may.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CallSite {
    /// Episode the call belongs to, for calls whose answer depends on the
    /// episode's history; `None` for independent single-shot questions.
    pub scope: Option<StepKey>,
    /// Position inside the episode, e.g. `turn 3 attempt 1`.
    pub position: String,
    /// Sample (seed / epoch) index: k samples are k cache entries.
    pub sample: u64,
}

/// The cache key a call would have; `None` for built-in models.
#[must_use]
pub fn call_key(model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Option<StepKey> {
    endpoint(model, request).ok().map(|e| StepKey::compute(&call_components(&e, request, site)))
}

/// Key components of a call: model identity and exact body, site, versions.
#[must_use]
pub fn call_components(endpoint: &Endpoint, request: &ChatRequest, site: &CallSite) -> Value {
    components_of(endpoint, request, &request_body(endpoint, request), site)
}

/// Where the body sits in a call's components (a JSON pointer): a live call sends the
/// body's encoding cut from the components' own.
pub(super) const BODY: &str = "/inputs/request/body";

/// [`call_components`] of a body already built, so a live call builds its body once.
pub(super) fn components_of(endpoint: &Endpoint, request: &ChatRequest, body: &Value, site: &CallSite) -> Value {
    let mut fields = Map::new();
    fields.insert("request".into(), request_fingerprint_of(endpoint, request, body));
    fields.insert("site".into(), json!(site));
    key_components(StepKind::Call, "providers", CALL_VERSION, fields)
}

/// The endpoint a model's calls go to (see [`crate::providers::route::endpoint`]); a model
/// that makes no API calls is `Unsupported`.
pub(crate) fn endpoint(model: &ModelConfig, request: &ChatRequest) -> Result<Endpoint, StepError> {
    route::endpoint(model, request).map_err(|e| StepError::Unsupported(e.to_string()))
}

/// Adds the key and secret headers, read from the environment now.
pub(crate) fn with_key(endpoint: Endpoint, model: &ModelConfig) -> Result<Endpoint, StepError> {
    route::with_secrets(endpoint, model).map_err(|e| StepError::episode_msg(e.to_string()))
}
