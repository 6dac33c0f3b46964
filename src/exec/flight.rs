//! One computation per key at a time: single flight inside this process and the claim
//! across processes on one cache, for any sub-step (model calls today; verdicts and
//! submissions can take the same path).
//!
//! Identical sub-steps (same key) in flight at the same time compute once. The first caller
//! computes; the others wait for it and then read the cache entry it wrote (recorded under
//! their own episodes). An error is shared too: the first caller already spent the whole
//! retry and time budget, and N waiters retrying would multiply the requests against a
//! failing provider; the error is never cached, so the next run computes again. Another
//! evalgrid process on the same cache computing the same key holds its claim
//! ([`Store::try_claim`]); this one waits for the claim to end, then finds the answer cached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::step_error::StepError;
use super::substep::{Done, Fresh, SubStep};
use crate::cache::Store;
use crate::cache::claims::Claim;
use crate::plan::StepKey;

/// What a failed computation leaves for identical ones that waited on it: they fail with the
/// same error, kept whole (its typed cause included) behind an `Arc`.
#[derive(Debug, Clone)]
struct SharedError(Arc<StepError>);

impl SharedError {
    /// The error a waiter gets: the shared one itself, except that a cache failure (the
    /// first caller's own write) reads as the waiter's failed episode, as it always has.
    fn to_error(&self) -> StepError {
        match &*self.0 {
            StepError::Cache(_) => StepError::Episode { message: self.0.to_string(), source: Some(Box::new(Arc::clone(&self.0))) },
            _ => StepError::Shared(Arc::clone(&self.0)),
        }
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<SharedError>>>;

/// Sub-steps in flight by key; an entry lives while someone holds or waits on it.
#[derive(Debug, Default)]
pub struct Flights(Mutex<HashMap<StepKey, Slot>>);

/// Membership in one key's entry; leaving removes the entry when nobody else is in it, also
/// when the computation is cancelled (dropped mid-await).
struct Joined<'a> {
    map: &'a Flights,
    key: StepKey,
    slot: Slot,
}

impl Flights {
    fn join(&self, key: StepKey) -> Joined<'_> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = Arc::clone(map.entry(key).or_default());
        Joined { map: self, key, slot }
    }

    /// Whether nothing is in flight.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        let mut map = self.map.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Only the map and this membership hold it: nobody else waits.
        if map.get(&self.key).is_some_and(|slot| Arc::ptr_eq(slot, &self.slot)) && Arc::strong_count(&self.slot) == 2 {
            map.remove(&self.key);
        }
    }
}

/// How one sub-step runs once.
pub struct Once<'a, T> {
    /// Whether a miss may be computed here; the cross-process claim is taken only then (an
    /// offline run writes no lock file).
    pub claim: bool,
    /// A cached value this calls stale is computed again and stored over (`--retry-outcome`).
    pub stale: &'a (dyn Fn(&T) -> bool + Sync),
    /// Counts the callers answered by a failure shared from the one in flight.
    pub shared: &'a AtomicU64,
}

impl SubStep {
    /// The cached value (one cache read on a hit), or `compute`'s, computed once for every
    /// identical sub-step in flight here or in another process on the cache. `settled` sees
    /// the outcome before any waiter does.
    pub async fn run_once<T, F, Fut>(
        self,
        store: &Store,
        flights: &Flights,
        once: Once<'_, T>,
        compute: F,
        settled: impl FnOnce(&Result<Done<T>, StepError>),
    ) -> Result<Done<T>, StepError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Fresh<T>, StepError>>,
    {
        let joined = flights.join(self.key());
        let mut slot = joined.slot.lock().await;
        if let Some(error) = slot.as_ref() {
            once.shared.fetch_add(1, Ordering::Relaxed);
            return Err(error.to_error());
        }
        // Checked under the slot: a sub-step asked twice at once is refreshed once, and the
        // second finds the new value.
        let refresh = match self.peek::<T>(store).await? {
            Some(value) if !(once.stale)(&value) => return self.hit(store, value).await,
            cached => cached.is_some(),
        };
        let step = self.refreshed(refresh);
        let claim = if once.claim { Some(claim(store, step.key()).await?) } else { None };
        let done = step.run(store, compute).await.map(|done| Done { refreshed: refresh, ..done });
        settled(&done);
        drop(claim);
        // Waiters read a cached value from the cache (recorded under their own episodes);
        // anything else they get from here.
        done.map_err(|error| {
            let error = Arc::new(error);
            *slot = Some(SharedError(Arc::clone(&error)));
            StepError::Shared(error)
        })
    }
}

/// Waits until this process holds the claim on `key` (see [`Store::try_claim`]); another
/// process holding it is computing the same sub-step.
async fn claim(store: &Store, key: StepKey) -> Result<Claim, StepError> {
    let mut wait = std::time::Duration::from_millis(10);
    loop {
        let claimed = if store.quick_io() {
            store.try_claim(key)?
        } else {
            let store = store.clone();
            tokio::task::spawn_blocking(move || store.try_claim(key)).await.map_err(StepError::worker)??
        };
        if let Some(claim) = claimed {
            return Ok(claim);
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_millis(250));
    }
}
