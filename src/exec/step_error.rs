//! The one error type of episode and score steps, below both the call layer and the
//! runner trait (so neither has to import the other for it).

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
}
