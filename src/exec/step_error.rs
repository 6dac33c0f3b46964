//! The one error type of episode and score steps, below both the call layer and the
//! runner trait (so neither has to import the other for it).

use std::fmt::Display;

/// A typed error kept as the cause of a failed step (`source()` returns it, so it can be
/// downcast to its type).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why an episode or score step failed. Never cached as an answer; a failure record keeps
/// its text (`Display`), which reads the same whether or not a typed cause is kept.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The benchmark cannot run this model/task combination.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The episode failed while running (provider error, bad output, a sandbox, dataset or
    /// replies file, a game rule, a record that does not encode).
    #[error("episode failed: {message}")]
    Episode {
        /// What went wrong, with its context if any.
        message: String,
        /// The typed error behind it, if there is one (downcast it through `source()`).
        #[source]
        source: Option<Cause>,
    },
    /// The episode record could not be scored (a record of the wrong shape, a dataset file).
    #[error("scoring failed: {message}")]
    Score {
        /// What went wrong, with its context if any.
        message: String,
        /// The typed error behind it, if there is one.
        #[source]
        source: Option<Cause>,
    },
    /// A CPU task panicked, was cancelled or failed.
    #[error("worker failed: {message}")]
    Worker {
        /// What went wrong.
        message: String,
        /// The typed error behind it (its join error), if there is one.
        #[source]
        source: Option<Cause>,
    },
    /// A model call failed for a transport reason after its retries (the cause kept whole,
    /// so callers can tell a rate limit from a bad request).
    #[error("{} error after {attempts} attempt(s): {error}", error.class())]
    Call {
        /// Why the call failed.
        #[source]
        error: crate::providers::CallError,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// Reading or writing the cache failed.
    #[error("cache: {0}")]
    Cache(#[from] crate::cache::CacheError),
    /// A model call was not sent because an earlier cache write failed for lack of space:
    /// its answer could not be kept, so it would be paid for nothing.
    #[error("not sent: the cache disk is full (free space, then run again)")]
    DiskFull,
    /// A model call was not sent because what the run has spent plus the worst case of the
    /// calls in flight would pass `budget.usd`: the cell is left for a run with a larger
    /// budget, never recorded as failed.
    #[error("not sent: {0}")]
    Budget(String),
    /// The error of an identical call in flight that this one waited on, shared whole: it
    /// reads as that error, and its source is that error's cause.
    #[error(transparent)]
    Shared(std::sync::Arc<StepError>),
}

impl StepError {
    /// The episode failed for the reason `message` says: shown as `episode failed: <message>`.
    pub fn episode_msg(message: impl Into<String>) -> Self {
        Self::Episode { message: message.into(), source: None }
    }

    /// The episode failed because of `error`: shown as `episode failed: <error>`.
    pub fn episode(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Episode { message: error.to_string(), source: Some(Box::new(error)) }
    }

    /// The episode failed because of `error` while doing `context`: shown as
    /// `episode failed: <context>: <error>`.
    pub fn episode_in(context: impl Display, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Episode { message: format!("{context}: {error}"), source: Some(Box::new(error)) }
    }

    /// The record could not be scored for the reason `message` says.
    pub fn score_msg(message: impl Into<String>) -> Self {
        Self::Score { message: message.into(), source: None }
    }

    /// The record could not be scored because of `error`: shown as `scoring failed: <error>`.
    pub fn score(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Score { message: error.to_string(), source: Some(Box::new(error)) }
    }

    /// The record could not be scored because of `error` (e.g. `context` = "not a BBEH
    /// episode record"): shown as `scoring failed: <context>: <error>`.
    pub fn score_in(context: impl Display, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Score { message: format!("{context}: {error}"), source: Some(Box::new(error)) }
    }

    /// A CPU task failed for the reason `message` says (a poisoned lock, a dropped task).
    pub fn worker_msg(message: impl Into<String>) -> Self {
        Self::Worker { message: message.into(), source: None }
    }

    /// The error itself, seen through any sharing between identical in-flight calls, to
    /// match on its variant.
    #[must_use]
    pub fn unshared(&self) -> &Self {
        match self {
            Self::Shared(error) => error.unshared(),
            other => other,
        }
    }

    /// Whether a call of this step was held back by the budget, however deep the episode
    /// wrapped it: such a cell is not started, not failed.
    #[must_use]
    pub fn is_budget(&self) -> bool {
        let source = match self.unshared() {
            Self::Budget(_) => return true,
            Self::Episode { source, .. } | Self::Score { source, .. } | Self::Worker { source, .. } => source.as_deref(),
            _ => None,
        };
        source.and_then(|cause| cause.downcast_ref::<Self>()).is_some_and(Self::is_budget)
    }

    /// A CPU task failed with `error`: shown as `worker failed: <error>`.
    pub fn worker(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Worker { message: error.to_string(), source: Some(Box::new(error)) }
    }
}

#[cfg(test)]
mod tests;
