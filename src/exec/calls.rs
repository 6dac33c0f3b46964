//! Cached model calls: every call an episode makes is a step of its own.
//!
//! The key covers the provider, exact model id, base URL and the exact
//! request body (via [`request_fingerprint`]), the sample index, and the
//! call's position in its episode, so k samples are k entries and a resumed
//! episode replays finished calls for free. Errors, refusals and empty
//! outputs are never stored; answers from a model other than the one asked
//! for are returned but not cached (a substituting gateway must not poison
//! the cache). API keys are read from the environment at call time and never
//! enter a key, an entry, a log line or an error message.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::runner::StepError;
use super::substep::{Fresh, SubStep};
use crate::cache::Store;
use crate::plan::key::key_components;
use crate::plan::{StepKey, StepKind};
use crate::providers::{
    CallError, ChatRequest, ChatResponse, Endpoint, ProviderClient, ProviderKind, Secret, request_fingerprint,
};
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

/// Token and call counters for progress and reports.
#[derive(Debug, Default)]
pub struct Usage {
    /// Calls answered from the cache.
    pub cached_calls: AtomicU64,
    /// Calls sent over HTTP (successful).
    pub live_calls: AtomicU64,
    /// HTTP attempts including retries.
    pub attempts: AtomicU64,
    /// Failed calls.
    pub failed_calls: AtomicU64,
    /// Input tokens of live calls.
    pub input_tokens: AtomicU64,
    /// Output tokens of live calls.
    pub output_tokens: AtomicU64,
    /// Cost of live calls in micro-dollars, for models with a `price`.
    pub cost_micro_usd: AtomicU64,
    /// Answers from a model other than the one requested (not cached).
    pub other_model: AtomicU64,
}

impl Usage {
    /// One-line summary for progress bars and run summaries.
    #[must_use]
    pub fn summary(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let live = get(&self.live_calls);
        let cached = get(&self.cached_calls);
        if live + cached + get(&self.failed_calls) == 0 {
            return String::new();
        }
        format!(
            "calls {live} live + {cached} cached · tokens {} in / {} out · ${:.4}",
            get(&self.input_tokens),
            get(&self.output_tokens),
            get(&self.cost_micro_usd) as f64 / 1e6
        )
    }
}

/// Shared state for making model calls during a run.
#[derive(Debug)]
pub struct CallContext {
    store: Store,
    client: Arc<ProviderClient>,
    offline: bool,
    /// Counters.
    pub usage: Usage,
}

impl CallContext {
    /// Creates the context; `offline` serves only from the cache.
    #[must_use]
    pub fn new(store: Store, client: Arc<ProviderClient>, offline: bool) -> Self {
        Self { store, client, offline, usage: Usage::default() }
    }

    /// The cache, for the other sub-steps of an episode (verdicts, submissions).
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sends (or replays) one chat call for `model` at `site`, as a sub-step
    /// of `episode` (recorded under it for `cache gc --keep`).
    pub async fn chat(&self, episode: StepKey, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<ChatResponse, StepError> {
        if model.provider == crate::spec::resolve::SCRIPTED_PROVIDER {
            self.usage.live_calls.fetch_add(1, Ordering::Relaxed);
            return scripted_reply(model, request);
        }
        let endpoint = endpoint(model)?;
        let step = SubStep::new(episode, StepKind::Call, call_components(&endpoint, request, site));
        let done = step
            .run(&self.store, || async {
                if self.offline {
                    return Err(StepError::Episode(format!(
                        "--offline: call {} to `{}` is not in the cache",
                        step.key().short(),
                        model.model
                    )));
                }
                let response = self.send(endpoint, model, request).await?;
                // A substituting gateway must not poison the cache.
                if same_model(&model.model, &response.answered_model) {
                    Ok(Fresh::cacheable(response))
                } else {
                    self.usage.other_model.fetch_add(1, Ordering::Relaxed);
                    Ok(Fresh::uncached(response))
                }
            })
            .await?;
        if done.hit {
            self.usage.cached_calls.fetch_add(1, Ordering::Relaxed);
        }
        Ok(done.value)
    }

    /// Sends one call over HTTP and counts it.
    async fn send(&self, endpoint: Endpoint, model: &ModelConfig, request: &ChatRequest) -> Result<ChatResponse, StepError> {
        let endpoint = with_key(endpoint, model)?;
        let record = self.client.call_recorded(&endpoint, request).await;
        self.usage.attempts.fetch_add(u64::from(record.attempts), Ordering::Relaxed);
        let response = match record.result {
            Ok(response) => response,
            Err(error) => {
                self.usage.failed_calls.fetch_add(1, Ordering::Relaxed);
                return Err(StepError::Episode(describe(&error, record.attempts)));
            }
        };
        self.usage.live_calls.fetch_add(1, Ordering::Relaxed);
        self.usage.input_tokens.fetch_add(response.usage.input, Ordering::Relaxed);
        self.usage.output_tokens.fetch_add(response.usage.output, Ordering::Relaxed);
        if let Some(price) = model.price {
            let usd = response.usage.input as f64 * price.input_per_mtok / 1e6 + response.usage.output as f64 * price.output_per_mtok / 1e6;
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "cost is small and non-negative")]
            self.usage.cost_micro_usd.fetch_add((usd * 1e6).round() as u64, Ordering::Relaxed);
        }
        Ok(response)
    }
}

/// The cache key a call would have; `None` for built-in models.
#[must_use]
pub fn call_key(model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Option<StepKey> {
    endpoint(model).ok().map(|e| StepKey::compute(&call_components(&e, request, site)))
}

/// Key components of a call: model identity and exact body, site, versions.
#[must_use]
pub fn call_components(endpoint: &Endpoint, request: &ChatRequest, site: &CallSite) -> Value {
    let mut fields = Map::new();
    fields.insert("request".into(), request_fingerprint(endpoint, request));
    fields.insert("site".into(), json!(site));
    key_components(StepKind::Call, "providers", CALL_VERSION, fields)
}

/// Provider kind of a pipeline model, or `None` for built-in agents.
#[must_use]
pub fn provider_kind(provider: &str) -> Option<ProviderKind> {
    match provider {
        "openai" => Some(ProviderKind::OpenAi),
        "anthropic" => Some(ProviderKind::Anthropic),
        "gemini" => Some(ProviderKind::Gemini),
        _ => None,
    }
}

fn endpoint(model: &ModelConfig) -> Result<Endpoint, StepError> {
    let kind = provider_kind(&model.provider)
        .ok_or_else(|| StepError::Unsupported(format!("provider `{}` makes no API calls", model.provider)))?;
    let mut endpoint = Endpoint::new(kind, model.model.clone());
    if let Some(url) = &model.base_url {
        endpoint = endpoint.with_base_url(url.clone());
    }
    Ok(endpoint)
}

fn with_key(endpoint: Endpoint, model: &ModelConfig) -> Result<Endpoint, StepError> {
    let Some(var) = &model.api_key_env else { return Ok(endpoint) };
    match std::env::var(var) {
        Ok(key) if !key.is_empty() => Ok(endpoint.with_api_key(Secret::new(key))),
        _ => Err(StepError::Episode(format!("environment variable `{var}` (api_key_env of model `{}`) is not set", model.id))),
    }
}

fn same_model(requested: &str, answered: &str) -> bool {
    let strip = |m: &str| m.strip_prefix("models/").unwrap_or(m).to_owned();
    strip(requested) == strip(answered)
}

fn describe(error: &CallError, attempts: u32) -> String {
    format!("{} error after {attempts} attempt(s): {error}", error.class())
}

/// Replies file of the `scripted` provider: the first rule whose `contains`
/// occurs in the last user message answers; otherwise `default`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
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

/// Answers a call from the model's replies file (deterministic, no HTTP).
fn scripted_reply(model: &ModelConfig, request: &ChatRequest) -> Result<ChatResponse, StepError> {
    let path = model.params.get("file").and_then(Value::as_str).ok_or_else(|| StepError::Episode("scripted model without `params.file`".into()))?;
    let text = std::fs::read_to_string(path).map_err(|e| StepError::Episode(format!("cannot read replies file `{path}`: {e}")))?;
    let script: Script = serde_json::from_str(&text).map_err(|e| StepError::Episode(format!("replies file `{path}`: {e}")))?;
    let last = request.messages.iter().rev().find(|m| m.role == crate::providers::Role::User).map_or("", |m| m.content.as_str());
    let reply = script
        .replies
        .iter()
        .find(|r| last.contains(&r.contains))
        .map(|r| r.reply.clone())
        .or(script.default)
        .ok_or_else(|| StepError::Episode(format!("replies file `{path}` has no reply for this prompt and no `default`")))?;
    Ok(ChatResponse {
        text: reply,
        reasoning: None,
        tool_calls: Vec::new(),
        usage: crate::providers::Usage::default(),
        answered_model: model.model.clone(),
        finish_reason: crate::providers::FinishReason::Stop,
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
    })
}
