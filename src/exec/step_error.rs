//! The one error type of episode and score steps, below both the call layer and the
//! runner trait (so neither has to import the other for it).

use std::fmt::Display;

/// A typed error kept as the cause of a failed step (`source()` returns it, so it can be
/// downcast to its type).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why an episode or score step failed. Never cached as an answer; a failure record keeps
/// its text (`Display`), which is why the variants with a source show exactly what the
/// message-only ones would.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The benchmark cannot run this model/task combination.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The episode failed while running (provider error, bad output, ...).
    #[error("episode failed: {0}")]
    Episode(String),
    /// The episode failed because of a typed error (the sandbox, a dataset or replies file,
    /// a game rule, a record that does not encode), kept as the source. Made by
    /// [`StepError::episode`] and [`StepError::episode_in`].
    #[error("episode failed: {message}")]
    EpisodeCaused {
        /// The error's text, with its context if any.
        message: String,
        /// The error.
        #[source]
        source: Cause,
    },
    /// The episode record could not be scored.
    #[error("scoring failed: {0}")]
    Score(String),
    /// The record could not be scored because of a typed error (a record of the wrong
    /// shape, a dataset file), kept as the source. Made by [`StepError::score`] and
    /// [`StepError::score_in`].
    #[error("scoring failed: {message}")]
    ScoreCaused {
        /// The error's text, with its context if any.
        message: String,
        /// The error.
        #[source]
        source: Cause,
    },
    /// A CPU task panicked or was cancelled.
    #[error("worker failed: {0}")]
    Worker(String),
    /// A CPU task failed with a typed error (its join error), kept as the source. Made by
    /// [`StepError::worker`].
    #[error("worker failed: {message}")]
    WorkerCaused {
        /// The error's text.
        message: String,
        /// The error.
        #[source]
        source: Cause,
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
}

impl StepError {
    /// The episode failed because of `error`: shown as `episode failed: <error>`.
    pub fn episode(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::EpisodeCaused { message: error.to_string(), source: Box::new(error) }
    }

    /// The episode failed because of `error` while doing `context`: shown as
    /// `episode failed: <context>: <error>`.
    pub fn episode_in(context: impl Display, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::EpisodeCaused { message: format!("{context}: {error}"), source: Box::new(error) }
    }

    /// The record could not be scored because of `error`: shown as `scoring failed: <error>`.
    pub fn score(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::ScoreCaused { message: error.to_string(), source: Box::new(error) }
    }

    /// The record could not be scored because of `error` (e.g. `context` = "not a BBEH
    /// episode record"): shown as `scoring failed: <context>: <error>`.
    pub fn score_in(context: impl Display, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::ScoreCaused { message: format!("{context}: {error}"), source: Box::new(error) }
    }

    /// A CPU task failed with `error`: shown as `worker failed: <error>`.
    pub fn worker(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::WorkerCaused { message: error.to_string(), source: Box::new(error) }
    }
}

#[cfg(test)]
mod tests;
