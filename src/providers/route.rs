//! From a pipeline's model entry to the endpoint its calls go to: protocol (and for
//! `provider: openai`, Chat Completions or Responses per call), base URL, literal headers
//! (keyed), and, at call time only, the key and secret headers read from the environment.

use super::ChatRequest;
use super::types::{Endpoint, HeaderValueOf, ProviderKind, Secret};
use crate::spec::{HeaderSource, ModelConfig, Provider};

/// Where a served model's calls point before its server is started (never contacted: a
/// cell that must call the model starts the server first).
pub const SERVED_PLACEHOLDER_URL: &str = "http://127.0.0.1:0/v1";

/// Why a model entry has no usable endpoint.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The provider answers in-process (built-in agents, scripted replies).
    #[error("provider `{0}` makes no API calls")]
    NoApi(String),
    /// A variable the entry names for its key or a secret header is unset or empty.
    #[error("environment variable `{var}` ({what} of model `{model}`) is not set")]
    MissingEnv {
        /// The variable.
        var: String,
        /// What it holds (`api_key_env`, `header \`api-key\``).
        what: String,
        /// The model entry's id.
        model: String,
    },
}

/// The endpoint a model's calls go to, with its literal headers (keyed); secrets are
/// added only by [`with_secrets`], at call time. For `provider: openai` the entry's `api`
/// picks Chat Completions or Responses for this request (`auto` looks at the model,
/// server and request: [`crate::providers::responses::route`]), and `background` whether
/// a Responses call is polled in background mode (not keyed).
pub fn endpoint(model: &ModelConfig, request: &ChatRequest) -> Result<Endpoint, RouteError> {
    let mut kind = model.provider.api_kind().ok_or_else(|| RouteError::NoApi(model.provider.to_string()))?;
    let mut endpoint = Endpoint::new(kind, model.model.clone()).with_stream(model.stream);
    if let Some(url) = &model.base_url {
        endpoint = endpoint.with_base_url(url.clone());
    }
    if let Some(serve) = &model.serve {
        // Until evalgrid starts the server (only for cells that must run) its URL is a
        // loopback placeholder: routing decisions see a local server either way, and the
        // key holds the served identity, not the URL.
        if model.base_url.is_none() {
            endpoint = endpoint.with_base_url(SERVED_PLACEHOLDER_URL.to_owned());
        }
        endpoint.served = Some(serve.key_value());
    }
    if model.provider == Provider::OpenAi {
        kind = super::responses::route(model.api, &model.model, &endpoint.base_url, request);
        // A prompt-scoring call (`echo: true`, `method: loglikelihood`) goes to completions:
        // chat endpoints give no log-probabilities of the prompt's own tokens.
        if request.params.get("echo").and_then(serde_json::Value::as_bool) == Some(true) {
            kind = ProviderKind::OpenAiCompletions;
        }
        endpoint.kind = kind;
        // Transport: the endpoint's fingerprint (the call key) leaves it out.
        endpoint.background = kind.protocol().polls_in_background() && model.background.applies(&model.model, &endpoint.base_url);
    }
    for (name, source) in &model.headers {
        if let HeaderSource::Value(text) = source {
            endpoint = endpoint.with_header(name.clone(), HeaderValueOf::Literal(text.clone()));
        }
    }
    Ok(endpoint)
}

/// Adds the API key and `{env: VAR}` header values, read from the environment now.
pub fn with_secrets(mut endpoint: Endpoint, model: &ModelConfig) -> Result<Endpoint, RouteError> {
    let read = |var: &str, what: &str| match std::env::var(var) {
        Ok(value) if !value.is_empty() => Ok(Secret::new(value)),
        _ => Err(RouteError::MissingEnv { var: var.to_owned(), what: what.to_owned(), model: model.id.clone() }),
    };
    for (name, source) in &model.headers {
        if let HeaderSource::Env(var) = source {
            endpoint = endpoint.with_header(name.clone(), HeaderValueOf::Secret(read(var, &format!("header `{name}`"))?));
        }
    }
    let Some(var) = &model.api_key_env else { return Ok(endpoint) };
    Ok(endpoint.with_api_key(read(var, "api_key_env")?))
}
