//! What the scheduler needs from benchmarks, as a trait.
//!
//! The scheduler sits below the benchmark modules; `envs` implements
//! [`EpisodeRunner`] and the CLI hands it in.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::calls::{CallContext, CallSite};
pub use super::step_error::StepError;
use crate::plan::StepKey;
use crate::providers::ChatRequest;
use crate::spec::{ModelConfig, TaskInstance};

/// What an episode may use while it runs.
#[derive(Clone, Copy, Debug)]
pub struct EpisodeContext<'a> {
    /// Key of the episode step (scope for history-dependent calls).
    pub episode_key: StepKey,
    /// Cached model calls.
    pub calls: &'a CallContext,
    /// What the models did in this episode's calls (stored with the episode).
    pub outcomes: &'a OutcomeTally,
}

impl EpisodeContext<'_> {
    /// Sends (or replays) a model call as a sub-step of this episode.
    pub async fn chat(&self, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<crate::providers::ChatResponse, StepError> {
        let response = self.calls.chat(self.episode_key, model, request, site).await?;
        self.outcomes.count(&model.id, output_cap(request), &response);
        Ok(response)
    }

    /// [`Self::chat`], also saying whether the answer came from the cache.
    ///
    /// # Errors
    /// As [`Self::chat`].
    pub async fn chat_traced(&self, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<(crate::providers::ChatResponse, bool), StepError> {
        let (response, hit) = self.calls.chat_traced(self.episode_key, model, request, site).await?;
        self.outcomes.count(&model.id, output_cap(request), &response);
        Ok((response, hit))
    }
}

/// Per model: answers used by an episode, how many were cut at the token limit, filtered,
/// refused or malformed, how many came without usage (their tokens and cost read 0), and
/// the model ids the server said answered (`answered_by`). Stored in the episode record as
/// `call_outcomes`, so the report can show the rates and the provenance.
#[derive(Debug, Default)]
pub struct OutcomeTally(std::sync::Mutex<std::collections::BTreeMap<String, std::collections::BTreeMap<String, Value>>>);

/// The outcome counters a tally keeps, in report order.
pub const OUTCOME_FIELDS: [&str; 7] = ["answers", "length", "content_filter", "refusal", "malformed", "context_exceeded", "no_usage"];

/// The output cap a request asked for (`max_tokens`), when it names one.
#[must_use]
pub fn output_cap(request: &ChatRequest) -> Option<u64> {
    request.params.get("max_tokens").and_then(Value::as_u64)
}

/// Counter of answers the server called complete although their output tokens equal the
/// cap: counted as truncated (`length`) too, and named in the outcomes table's note.
pub const LENGTH_INFERRED: &str = "length_inferred";

impl OutcomeTally {
    /// Counts one answer of `model`, asked with output cap `cap` (`max_tokens`). An answer
    /// the server reports as completed whose output tokens equal the cap is counted as
    /// truncated (llama.cpp's `/v1/responses` says `completed` for a cut answer).
    pub fn count(&self, model: &str, cap: Option<u64>, response: &crate::providers::ChatResponse) {
        let Ok(mut all) = self.0.lock() else { return };
        let counts = all.entry(model.to_owned()).or_default();
        let add = |counts: &mut std::collections::BTreeMap<String, Value>, field: &str, n: u64| {
            let total = counts.get(field).and_then(Value::as_u64).unwrap_or(0).saturating_add(n);
            counts.insert(field.to_owned(), Value::from(total));
        };
        add(counts, "answers", 1);
        add(counts, "input_tokens", response.usage.input);
        add(counts, "cached_tokens", response.usage.cached);
        add(counts, "output_tokens", response.usage.output);
        if response.paid.as_deref() == Some(crate::providers::PAID_BATCH) {
            // The part of the tokens paid at the batch price (the report prices it so).
            add(counts, "batched", 1);
            add(counts, "batch_input_tokens", response.usage.input);
            add(counts, "batch_cached_tokens", response.usage.cached);
            add(counts, "batch_output_tokens", response.usage.output);
        }
        let mut class = response.finish_reason.class();
        if class == "stop" && response.usage_reported && cap.is_some_and(|cap| cap > 0 && response.usage.output == cap) {
            class = "length";
            add(counts, LENGTH_INFERRED, 1);
        }
        if OUTCOME_FIELDS.contains(&class) {
            add(counts, class, 1);
        }
        if !response.usage_reported {
            add(counts, "no_usage", 1);
        }
        // Each answer's wall time, for the report's median latency and output tokens/s.
        if let Value::Array(times) = counts.entry("latency_ms".into()).or_insert_with(|| Value::Array(Vec::new())) {
            times.push(Value::from(response.latency_ms));
        }
        if !response.answered_model.is_empty() {
            let ids = counts.entry("answered_by".into()).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(ids) = ids
                && !ids.iter().any(|id| id == response.answered_model.as_str())
            {
                ids.push(Value::from(response.answered_model.clone()));
                ids.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
    }

    /// The counts as JSON (`{model: {field: n}}`), `None` when no call was made.
    #[must_use]
    pub fn to_value(&self) -> Option<Value> {
        let all = self.0.lock().ok()?;
        (!all.is_empty()).then(|| serde_json::json!(*all))
    }
}

/// Boxed future returned by runners (object-safe async).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs and scores episodes for every benchmark a pipeline uses.
pub trait EpisodeRunner: Send + Sync {
    /// Plays one episode of `task` with `model` and `seed`; the returned
    /// record is cached under the episode key.
    fn run_episode<'a>(&'a self, ctx: EpisodeContext<'a>, model: &'a ModelConfig, task: &'a TaskInstance, seed: u64)
    -> BoxFuture<'a, Result<Value, StepError>>;

    /// The model calls an episode would make, when they can be known before
    /// running it (single-shot benchmarks); `None` when they depend on the
    /// episode's course (multi-turn games).
    fn planned_calls(&self, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        let _ = (model, task, seed);
        None
    }

    /// Whether a cell of `model` on `task` spends its time waiting on model calls rather than
    /// on the CPU (an API model, no model-written code to run): the scheduler keeps many of
    /// those in flight, since the lanes pace the calls, and CPU-bound cells to the CPUs.
    fn waits_on_models(&self, model: &ModelConfig, task: &TaskInstance) -> bool {
        let _ = (model, task);
        false
    }

    /// Turns an episode record into the per-cell score record.
    fn score(&self, task: &TaskInstance, episode: &Value) -> Result<Value, StepError>;
}

/// Runs CPU-heavy work on the rayon pool without blocking tokio workers.
pub async fn on_cpu<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, StepError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        // The receiver only disappears when the run is being torn down.
        let _ = tx.send(result);
    });
    match rx.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(StepError::worker_msg("a CPU task panicked")),
        Err(_) => Err(StepError::worker_msg("a CPU task was dropped")),
    }
}
