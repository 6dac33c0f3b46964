//! What the scheduler needs from benchmarks, as a trait.
//!
//! The scheduler sits below the benchmark modules; `envs` implements
//! [`EpisodeRunner`] and the CLI hands it in.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::calls::{CallContext, CallSite};
use crate::providers::ChatRequest;
use crate::plan::StepKey;
use crate::spec::{ModelConfig, TaskInstance};

/// What an episode may use while it runs.
#[derive(Clone, Copy, Debug)]
pub struct EpisodeContext<'a> {
    /// Key of the episode step (scope for history-dependent calls).
    pub episode_key: StepKey,
    /// Cached model calls.
    pub calls: &'a CallContext,
}

impl EpisodeContext<'_> {
    /// Sends (or replays) a model call as a sub-step of this episode.
    pub async fn chat(&self, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Result<crate::providers::ChatResponse, StepError> {
        self.calls.chat(self.episode_key, model, request, site).await
    }
}

/// Boxed future returned by runners (object-safe async).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why an episode or score step failed. Never cached as an answer.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The benchmark cannot run this model/task combination.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The episode failed while running (provider error, bad output, ...).
    #[error("episode failed: {0}")]
    Episode(String),
    /// The episode record could not be scored.
    #[error("scoring failed: {0}")]
    Score(String),
    /// A CPU task panicked or was cancelled.
    #[error("worker failed: {0}")]
    Worker(String),
}

/// Runs and scores episodes for every benchmark a pipeline uses.
pub trait EpisodeRunner: Send + Sync {
    /// Plays one episode of `task` with `model` and `seed`; the returned
    /// record is cached under the episode key.
    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>>;

    /// The model calls an episode would make, when they can be known before
    /// running it (single-shot benchmarks); `None` when they depend on the
    /// episode's course (multi-turn games).
    fn planned_calls(&self, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        let _ = (model, task, seed);
        None
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
        Ok(Err(_)) => Err(StepError::Worker("a CPU task panicked".into())),
        Err(_) => Err(StepError::Worker("a CPU task was dropped".into())),
    }
}
