//! Batch mode: a model entry's single-turn calls through the provider's batch API.
//!
//! Design. One collector per lane (provider, model, base URL). A call whose request is known
//! up front (no episode scope: BBEH, `qa`, judge calls) on a model with `batch:` builds its
//! body exactly as live, then joins the collector instead of sending. The collector submits
//! one batch per `max_requests` calls, or once no new call came for `window_ms` (so a run
//! with fewer calls still submits), polls it every `poll_ms`, and answers each waiting call
//! from the output file by `custom_id` = the call key. The answer is parsed, settled and
//! cached exactly like a live one: the same cache entry (batch mode is in no key), so the
//! report is the live run's. Multi-turn episodes call live.
//!
//! Never paying twice rests on the batch ledger ([`crate::cache::BatchLedger`]): the intent
//! (input file, keys, tag) is synced before the create request, the batch id once it
//! returns. A lane's first call resumes the ledger's batches of the lane: an intent without
//! id is looked up in the account's batch list (by tag; Anthropic, which keeps none: by time
//! and request count, adopted once its results hold the intent's keys; found: polled), again
//! and again with backoff until `lookup_ms` after the intent, since a list shows a new batch
//! late (not found by then: it was never created, and its calls queue normally); every batch
//! with an id is polled, and the keys they cover are never submitted again. A batch the
//! provider answers 404 for, and a damaged record (which may be any of the lane's calls),
//! hold their calls back until `evalgrid batch forget` releases them. Duplicate output lines
//! of one `custom_id`: the first answers, the rest are counted. A batch that ends (expired, failed, cancelled)
//! without answering a call sends it back to the queue once (recorded), then fails it as an
//! error, never cached. Ctrl-C leaves batches running: the next run collects them. A record
//! is removed once every answer it holds is in the cache.

mod cancel;
mod flow;
mod resume;
mod state;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

pub use cancel::{Cancelled, cancel_batches};
pub(crate) use state::LineAnswer;

use self::state::{Joined, LaneState};
use crate::cache::{BatchLedger, Store};
use crate::plan::StepKey;
use crate::providers::batch::{BatchApi, BatchError};
use crate::providers::{Endpoint, ProviderClient};
use crate::spec::BatchMode;

/// The run's batch collectors, one per lane, made at the lane's first batched call.
#[derive(Default)]
pub(super) struct Batcher {
    lanes: Mutex<HashMap<String, Arc<BatchLane>>>,
    /// Output lines that repeated a `custom_id` already answered (ignored: the first wins).
    duplicates: Arc<AtomicU64>,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Batcher")
    }
}

/// One lane's collector: its batch API, settings, ledger and state.
pub(super) struct BatchLane {
    name: String,
    api: BatchApi,
    mode: BatchMode,
    ledger: BatchLedger,
    store: Store,
    client: Arc<ProviderClient>,
    resumed: tokio::sync::OnceCell<()>,
    state: Mutex<LaneState>,
    /// The run's count of repeated output lines ([`Batcher::duplicate_lines`]).
    duplicates: Arc<AtomicU64>,
}

/// The lane name a ledger record carries: `provider model base_url`.
#[must_use]
pub(crate) fn lane_name(endpoint: &Endpoint) -> String {
    format!("{} {} {}", endpoint.kind, endpoint.model, endpoint.base_url)
}

impl Batcher {
    /// Asks `body` of `endpoint` (its key added) through its lane's batches; the answer is
    /// the response line of call `key`.
    pub(super) async fn ask(
        &self,
        client: &Arc<ProviderClient>,
        store: &Store,
        endpoint: &Endpoint,
        mode: BatchMode,
        key: StepKey,
        body: &Value,
    ) -> LineAnswer {
        let lane = match self.lane(client, store, endpoint, mode) {
            Ok(lane) => lane,
            Err(error) => return Err(error.to_string()),
        };
        lane.resumed.get_or_init(|| resume::resume(Arc::clone(&lane))).await;
        let hex = key.to_hex();
        let joined = lane.lock().join(&hex, body);
        match joined {
            Joined::Ready(answer) => answer,
            Joined::Wait { receiver, queued } => {
                if queued {
                    flow::queued(&lane);
                }
                receiver.await.unwrap_or_else(|_| Err("the batch collector stopped before the batch answered".into()))
            }
        }
    }

    /// Output lines of this run's batches that repeated a `custom_id` an earlier line of the
    /// batch answered: ignored (the first line answers), counted for the run summary.
    pub(super) fn duplicate_lines(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }

    /// Call `key` of `endpoint`'s lane is settled (cached, or failed for good): a batch
    /// whose calls are all settled leaves the ledger.
    pub(super) fn settled(&self, endpoint: &Endpoint, key: StepKey) {
        let lane = self.lanes.lock().unwrap_or_else(PoisonError::into_inner).get(&lane_name(endpoint)).cloned();
        if let Some(lane) = lane {
            let done = lane.lock().settle(&key.to_hex());
            for tag in done {
                lane.forget(&tag);
            }
        }
    }

    fn lane(&self, client: &Arc<ProviderClient>, store: &Store, endpoint: &Endpoint, mode: BatchMode) -> Result<Arc<BatchLane>, BatchError> {
        let name = lane_name(endpoint);
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lane) = lanes.get(&name) {
            return Ok(Arc::clone(lane));
        }
        let api = BatchApi::new(client.http().clone(), endpoint)?;
        let lane = Arc::new(BatchLane {
            name: name.clone(),
            api,
            mode,
            ledger: BatchLedger::of(store),
            store: store.clone(),
            client: Arc::clone(client),
            resumed: tokio::sync::OnceCell::new(),
            state: Mutex::new(LaneState::default()),
            duplicates: Arc::clone(&self.duplicates),
        });
        lanes.insert(name, Arc::clone(&lane));
        Ok(lane)
    }
}

impl BatchLane {
    fn lock(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes batch `tag`'s record if it holds no unanswered call either.
    fn forget(&self, tag: &str) {
        let keep = self.ledger.list().into_iter().any(|record| record.tag == tag && !record.unanswered.is_empty());
        if !keep && let Err(error) = self.ledger.remove(tag) {
            tracing::warn!(batch = tag, "cannot remove the record of a collected batch: {error}");
        }
    }
}
