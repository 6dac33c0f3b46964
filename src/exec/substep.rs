//! Cached sub-steps: the one way an episode caches part of its work (model
//! calls, verdicts, submission runs).
//!
//! A sub-step is looked up by key, else computed; only outputs the caller
//! marks cacheable are stored. Every sub-step used (hit or stored) is
//! recorded under its episode's key, so `cache gc --keep` can reach it from
//! the cell even when the episode failed half-way and has no entry.

use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::step_error::StepError;
use crate::cache::{CacheError, Entry, Store, Stored};
use crate::plan::canonical::{to_canonical_bytes, to_canonical_bytes_marking};
use crate::plan::{StepKey, StepKind};

/// One sub-step of an episode: its key components and the episode it serves.
#[derive(Clone, Debug)]
pub struct SubStep {
    episode: StepKey,
    kind: StepKind,
    /// Shared: a call's components hold its whole prompt, and the sub-step is cloned onto
    /// a blocking thread for each cache read and write.
    components: std::sync::Arc<Value>,
    /// The components' canonical encoding, hashed into the key and written into the entry
    /// as it is (the prompt is encoded once).
    encoded: std::sync::Arc<[u8]>,
    key: StepKey,
    /// Computed again and stored over the cached output (see [`SubStep::refreshed`]).
    refresh: bool,
}

/// What a computation produced and whether it may be cached (errors never
/// reach here: they are the computation's `Err`).
#[derive(Debug)]
pub struct Fresh<T> {
    /// The computed value, returned to the caller either way.
    pub value: T,
    /// Whether the value may be stored and served to later runs.
    pub cacheable: bool,
}

impl<T> Fresh<T> {
    /// A value that may be stored.
    pub fn cacheable(value: T) -> Self {
        Self { value, cacheable: true }
    }

    /// A value that is returned but never stored (e.g. a substituted model's answer).
    pub fn uncached(value: T) -> Self {
        Self { value, cacheable: false }
    }
}

/// A sub-step's value and whether it came from the cache.
#[derive(Debug)]
pub struct Done<T> {
    /// The value.
    pub value: T,
    /// `true` when served from the cache.
    pub hit: bool,
    /// `true` when a cached value was computed again and stored over (`--retry-outcome`).
    pub refreshed: bool,
}

/// Why a blocking sub-step failed: its own computation, or the cache.
#[derive(Debug, thiserror::Error)]
pub enum SubStepError<E> {
    /// The computation failed (nothing was stored).
    #[error(transparent)]
    Compute(E),
    /// Reading or writing the cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl SubStep {
    /// A sub-step of `episode` keyed by `components` (built with
    /// [`crate::plan::key::key_components`]).
    #[must_use]
    pub fn new(episode: StepKey, kind: StepKind, components: Value) -> Self {
        let encoded = to_canonical_bytes(&components);
        Self::encoded(episode, kind, components, encoded)
    }

    /// [`SubStep::new`], and the canonical encoding of the value at `part` (a JSON pointer
    /// into `components`), cut from the components' own: a call sends its body as those
    /// bytes. `None` when nothing is at `part`.
    #[must_use]
    pub fn new_with_part(episode: StepKey, kind: StepKind, components: Value, part: &str) -> (Self, Option<Vec<u8>>) {
        let (encoded, range) = match components.pointer(part) {
            Some(value) => to_canonical_bytes_marking(&components, value),
            None => (to_canonical_bytes(&components), None),
        };
        let part = range.map(|range| encoded[range].to_vec());
        (Self::encoded(episode, kind, components, encoded), part)
    }

    fn encoded(episode: StepKey, kind: StepKind, components: Value, encoded: Vec<u8>) -> Self {
        let key = StepKey::of_canonical(&encoded);
        Self { episode, kind, components: std::sync::Arc::new(components), encoded: encoded.into(), key, refresh: false }
    }

    /// The same sub-step, computed again and stored over its cached output when `refresh`
    /// (`run --retry-outcome`: an answer the user asked to be re-asked).
    #[must_use]
    pub fn refreshed(mut self, refresh: bool) -> Self {
        self.refresh = refresh;
        self
    }

    /// The sub-step's cache key.
    #[must_use]
    pub fn key(&self) -> StepKey {
        self.key
    }

    /// Looks the sub-step up (blocking); an entry that does not decode as `T`
    /// is a miss. A hit is recorded under the episode.
    pub fn lookup_blocking<T: DeserializeOwned>(&self, store: &Store) -> Result<Option<T>, CacheError> {
        if self.refresh {
            return Ok(None);
        }
        let Some(value) = store.get(self.key)?.and_then(|e| serde_json::from_value::<T>(e.output).ok()) else { return Ok(None) };
        store.record_substep(self.episode, self.key, false)?;
        Ok(Some(value))
    }

    /// Records the sub-step under its episode, then stores `value` (blocking); returns
    /// the value that is stored: `value`, or the one another process stored first.
    pub fn store_blocking<T: Serialize + DeserializeOwned>(&self, store: &Store, value: T, duration_ms: u64) -> Result<T, CacheError> {
        const WRITER: &str = concat!("evalgrid ", env!("CARGO_PKG_VERSION"));
        let output = serde_json::to_value(&value).map_err(|e| CacheError::Io {
            path: store.entry_path(self.key),
            source: std::io::Error::other(format!("sub-step output does not serialize: {e}")),
        })?;
        // Built whole only where needed (a remote, a refresh, the journal): a call's
        // components are its whole prompt.
        let entry = || Entry {
            key: self.key,
            kind: self.kind,
            components: Value::clone(&self.components),
            output: output.clone(),
            duration_ms,
            writer: WRITER.to_owned(),
        };
        // Index first: a crash between the two leaves a dangling line, never
        // an entry that gc cannot reach.
        let stored = store.record_substep(self.episode, self.key, true).and_then(|()| {
            if self.refresh {
                store.replace(&entry()).map(|()| Stored::Written)
            } else {
                let encoded = Entry::encode_parts(self.key, self.kind, &self.encoded, &output, duration_ms, WRITER);
                store.put_encoded(self.key, &encoded, entry)
            }
        });
        let stored = match stored {
            // A paid answer the full disk cannot hold: kept in the run's journal (reserved
            // when it started), which the next run moves into the cache; this run still
            // stops at the error.
            Err(error) if error.is_storage_full() => {
                store.keep_in_journal(self.episode, &entry());
                return Err(error);
            }
            other => other?,
        };
        // First writer wins: carry on with the answer everyone else will read.
        Ok(match stored {
            Stored::Adopted(entry) => serde_json::from_value(entry.output).unwrap_or(value),
            Stored::Written => value,
        })
    }

    /// The cached value, or `compute`'s, stored when cacheable; for callers
    /// already on a blocking thread.
    pub fn run_blocking<T, E>(&self, store: &Store, compute: impl FnOnce() -> Result<Fresh<T>, E>) -> Result<Done<T>, SubStepError<E>>
    where
        T: Serialize + DeserializeOwned,
    {
        if let Some(value) = self.lookup_blocking(store)? {
            return Ok(Done { value, hit: true, refreshed: false });
        }
        let started = Instant::now();
        let fresh = compute().map_err(SubStepError::Compute)?;
        if !fresh.cacheable {
            return Ok(Done { value: fresh.value, hit: false, refreshed: false });
        }
        let value = self.store_blocking(store, fresh.value, millis(started))?;
        Ok(Done { value, hit: false, refreshed: false })
    }

    /// The cached value, or `compute`'s, stored when cacheable; cache I/O
    /// runs off the async workers.
    pub async fn run<T, F, Fut>(&self, store: &Store, compute: F) -> Result<Done<T>, StepError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Fresh<T>, StepError>>,
    {
        let hit = self.cache_io(store, |me, s| me.lookup_blocking::<T>(s)).await?;
        if let Some(value) = hit {
            return Ok(Done { value, hit: true, refreshed: false });
        }
        let started = Instant::now();
        let fresh = compute().await?;
        if !fresh.cacheable {
            return Ok(Done { value: fresh.value, hit: false, refreshed: false });
        }
        let ms = millis(started);
        // Let the tasks this answer woke (the next call waiting for the freed slot) send
        // before this worker spends its time writing the entry.
        tokio::task::yield_now().await;
        let value = self.cache_io(store, move |me, s| me.store_blocking(s, fresh.value, ms)).await?;
        Ok(Done { value, hit: false, refreshed: false })
    }
}

impl SubStep {
    /// The cached value, if there is one that decodes as `T`, without recording a use.
    pub(super) async fn peek<T: DeserializeOwned + Send + 'static>(&self, store: &Store) -> Result<Option<T>, StepError> {
        self.cache_io(store, |me, s| Ok(s.get(me.key)?.and_then(|e| serde_json::from_value::<T>(e.output).ok()))).await
    }

    /// `value`, read from the cache, as a hit recorded under the episode.
    pub(super) async fn hit<T>(&self, store: &Store, value: T) -> Result<Done<T>, StepError> {
        self.cache_io(store, |me, s| s.record_substep(me.episode, me.key, false)).await?;
        Ok(Done { value, hit: true, refreshed: false })
    }

    /// Runs `work` against the cache: on the calling async worker when the cache is on a
    /// local disk (microseconds; a blocking-thread hand-off costs more), else on a blocking
    /// thread (a network filesystem or an S3 remote makes each operation a round trip).
    async fn cache_io<T: Send + 'static>(
        &self,
        store: &Store,
        work: impl FnOnce(&Self, &Store) -> Result<T, CacheError> + Send + 'static,
    ) -> Result<T, StepError> {
        if store.quick_io() {
            return work(self, store).map_err(StepError::Cache);
        }
        let (me, s) = (self.clone(), store.clone());
        tokio::task::spawn_blocking(move || work(&me, &s)).await.map_err(StepError::worker)?.map_err(StepError::Cache)
    }
}

fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::key::key_components;
    use serde_json::json;

    fn step(episode: StepKey, n: i64) -> SubStep {
        let mut fields = serde_json::Map::new();
        fields.insert("n".into(), json!(n));
        SubStep::new(episode, StepKind::Verdict, key_components(StepKind::Verdict, "test", 1, fields))
    }

    #[test]
    fn computes_once_stores_only_cacheable_and_records_under_each_episode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (e1, e2) = (StepKey::compute(&json!("e1")), StepKey::compute(&json!("e2")));
        let first = step(e1, 1).run_blocking::<u32, String>(&store, || Ok(Fresh::cacheable(7))).unwrap();
        assert!(!first.hit);
        let again = step(e2, 1).run_blocking::<u32, String>(&store, || Err("must not run".into())).unwrap();
        assert!(again.hit && again.value == 7);
        let uncached = step(e1, 2).run_blocking::<u32, String>(&store, || Ok(Fresh::uncached(9))).unwrap();
        assert_eq!(uncached.value, 9);
        assert!(!store.contains(step(e1, 2).key()));
        let failed = step(e1, 3).run_blocking::<u32, String>(&store, || Err("boom".into()));
        assert!(matches!(failed, Err(SubStepError::Compute(_))));
        assert_eq!(store.substeps(e1).unwrap(), vec![step(e1, 1).key()]);
        assert_eq!(store.substeps(e2).unwrap(), vec![step(e1, 1).key()]);
    }

    /// Another machine stores the same sub-step while this one computes it: this one
    /// carries on with the stored answer, so every later step agrees with the cache.
    #[test]
    fn a_sub_step_stored_elsewhere_meanwhile_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let (here, elsewhere) = (Store::open(dir.path()).unwrap(), Store::open(dir.path()).unwrap());
        let e = StepKey::compute(&json!("e"));
        let done = step(e, 1)
            .run_blocking::<u32, String>(&here, || {
                step(e, 1).store_blocking(&elsewhere, 41, 0).map_err(|err| err.to_string())?;
                Ok(Fresh::cacheable(7))
            })
            .unwrap();
        assert_eq!((done.value, done.hit), (41, false));
        assert_eq!(step(e, 1).lookup_blocking::<u32>(&here).unwrap(), Some(41));
    }

    #[tokio::test]
    async fn async_variant_matches_the_blocking_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let e = StepKey::compute(&json!("e"));
        let first = step(e, 1).run(&store, || async { Ok(Fresh::cacheable("a".to_owned())) }).await.unwrap();
        assert!(!first.hit);
        let again = step(e, 1).run::<String, _, _>(&store, || async { Err(StepError::episode_msg("must not run")) }).await.unwrap();
        assert!(again.hit && again.value == "a");
        assert_eq!(store.substeps(e).unwrap(), vec![step(e, 1).key()]);
    }
}
