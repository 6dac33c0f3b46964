//! A lane's resume: the batches an earlier run left in the ledger for this lane are found
//! again (an intent by its tag) and polled, so their calls are never submitted twice.

use std::sync::Arc;

use super::BatchLane;
use super::flow::{fail_all, poll};

/// A lane's first call: the batches an earlier run left for this lane are found again
/// (intents by tag), and polled; their keys are not submitted again.
pub(super) async fn resume(lane: Arc<BatchLane>) {
    for mut record in lane.ledger.list().into_iter().filter(|record| record.lane == lane.name) {
        if record.batch_id.is_none() {
            match lane.api.find(&record.tag).await {
                Ok(Some(found)) => {
                    record.batch_id = Some(found.id);
                    record.state = found.status;
                    let _kept = lane.ledger.record(&record);
                }
                Ok(None) => {
                    let _gone = lane.ledger.remove(&record.tag);
                    continue;
                }
                Err(error) => {
                    let message = format!("an interrupted batch (tag {}) could not be looked up ({error}); its calls are not sent again this run", record.tag);
                    fail_all(&lane, &record.keys, &message);
                    continue;
                }
            }
        }
        {
            let mut state = lane.lock();
            for key in &record.unanswered {
                if record.retried.contains(key) {
                    continue;
                }
                state.struck.insert(key.clone());
            }
            for key in record.keys.iter().filter(|key| !record.unanswered.contains(key)) {
                state.covered.insert(key.clone());
            }
        }
        tokio::spawn(poll(Arc::clone(&lane), record));
    }
}
