//! Steps derived from others and a pure function of their key (metrics, report): looked up,
//! else computed and stored, in one helper, so every such step is cached the same way.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::entry::Entry;
use super::store::{CacheError, Store};
use crate::plan::{StepKey, StepKind};

/// Why a derived step has no output.
#[derive(Debug, thiserror::Error)]
pub enum DerivedError<E> {
    /// Reading or writing the cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The cached output (or the computed one) does not have the step's shape.
    #[error("malformed output")]
    Malformed,
    /// The computation failed (nothing was stored).
    #[error(transparent)]
    Compute(E),
}

impl Store {
    /// The output of the step `key` (`kind`, keyed by `components`), read from the cache, or
    /// computed and stored; `fresh` evicts the cached one first (its files are gone). Returns
    /// the output and whether it came from the cache. Whoever wrote first wrote the same.
    ///
    /// # Errors
    /// A cache failure, an output of the wrong shape, or `compute`'s own error.
    pub fn cached_step<T, E>(
        &self,
        (key, kind, components): (StepKey, StepKind, Value),
        fresh: bool,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, bool), DerivedError<E>>
    where
        T: Serialize + DeserializeOwned,
    {
        if fresh {
            self.evict(key)?;
        }
        if let Some(entry) = self.get(key)? {
            return Ok((serde_json::from_value(entry.output).map_err(|_| DerivedError::Malformed)?, true));
        }
        let out = compute().map_err(DerivedError::Compute)?;
        let output = serde_json::to_value(&out).map_err(|_| DerivedError::Malformed)?;
        let writer = concat!("evalgrid ", env!("CARGO_PKG_VERSION")).to_owned();
        let _ = self.put(&Entry { key, kind, components, output, duration_ms: 0, writer })?;
        Ok((out, false))
    }
}
