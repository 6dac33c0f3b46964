//! The background ledger of one call: the cache's record of the Responses background run it
//! started ([`PendingResponses`] under the call's key), so an interrupted call is polled, not
//! paid for again, next run. This is the only place that forgets a record.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::cache::{PendingResponses, Store};
use crate::exec::step_error::StepError;
use crate::exec::substep::Done;
use crate::plan::StepKey;
use crate::providers::{ChatResponse, ResponseLedger};

/// One background call's record, and whether the call got an answer.
pub(super) struct CallLedger {
    pending: PendingResponses,
    key: StepKey,
    answered: AtomicBool,
}

impl CallLedger {
    /// The ledger of call `key` in `store`.
    pub(super) fn new(store: &Store, key: StepKey) -> Self {
        Self { pending: PendingResponses::of(store), key, answered: AtomicBool::new(false) }
    }

    /// The server answered (whatever the answer is worth).
    pub(super) fn answered(&self) {
        self.answered.store(true, Ordering::Relaxed);
    }

    /// Once the call is settled: an answer that is cached (or refused, and a rerun should ask
    /// again) no longer needs the response; one whose cache write failed keeps it, so a
    /// rerun fetches it unpaid.
    pub(super) fn settle(&self, done: &Result<Done<ChatResponse>, StepError>) {
        if self.answered.load(Ordering::Relaxed) && !matches!(done, Err(StepError::Cache(_))) {
            self.forget();
        }
    }
}

impl ResponseLedger for CallLedger {
    fn recorded(&self) -> Option<String> {
        self.pending.get(self.key).map(|record| record.response_id)
    }

    fn record(&self, response_id: &str) {
        // Without the record the call still runs; only an interrupted run would send it again.
        if let Err(error) = self.pending.record(self.key, response_id) {
            tracing::warn!(response = response_id, call = %self.key.short(), "cannot record a background response for resuming: {error}");
        }
    }

    fn forget(&self) {
        if let Err(error) = self.pending.remove(self.key) {
            tracing::warn!(call = %self.key.short(), "cannot remove the record of a finished background response: {error}");
        }
    }
}
