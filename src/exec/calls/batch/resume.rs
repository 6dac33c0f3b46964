//! A lane's resume: the batches an earlier run left in the ledger for this lane are found
//! again and polled, so their calls are never submitted twice. An intent without a batch id
//! (killed between the create request and its record) is looked up: by its tag where the
//! API keeps one (OpenAI `metadata`, Gemini's display name); Anthropic batches carry no tag,
//! so each batch that may be it (created since the intent, same request count, claimed by
//! no record) is polled until it ends, and the first whose results hold the intent's keys
//! is adopted; none does: the intent was never created, and its calls queue again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::BatchLane;
use super::flow::{POLL_FAILURES, answer, fail_all, poll, queued};
use crate::cache::BatchRecord;
use crate::providers::batch::{BatchObject, Found, Intent};

/// A lane's first call: the batches an earlier run left for this lane are found again and
/// polled; their keys are not submitted again.
pub(super) async fn resume(lane: Arc<BatchLane>) {
    for mut record in lane.ledger.list().into_iter().filter(|record| record.lane == lane.name) {
        if record.batch_id.is_none() {
            let claimed: Vec<String> = lane.ledger.list().into_iter().filter_map(|r| r.batch_id).collect();
            let intent = Intent { tag: &record.tag, recorded_at: record.recorded_at, requests: record.keys.len(), claimed: &claimed };
            match lane.api.find(intent).await {
                Ok(Found::One(found)) if found.tag.is_some() => {
                    record.batch_id = Some(found.id);
                    record.state = found.status;
                    let _kept = lane.ledger.record(&record);
                }
                Ok(Found::One(found)) => {
                    cover(&lane, &record);
                    tokio::spawn(match_candidates(Arc::clone(&lane), record, vec![found]));
                    continue;
                }
                Ok(Found::Many(candidates)) => {
                    tracing::info!(tag = %record.tag, "an interrupted batch matches {} batches: each is polled, and the one holding its calls is adopted", candidates.len());
                    cover(&lane, &record);
                    tokio::spawn(match_candidates(Arc::clone(&lane), record, candidates));
                    continue;
                }
                Ok(Found::None) => {
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
        cover(&lane, &record);
        tokio::spawn(poll(Arc::clone(&lane), record));
    }
}

/// The keys `record` covers are not submitted again; those it left unanswered are on their
/// retry.
fn cover(lane: &BatchLane, record: &BatchRecord) {
    let mut state = lane.lock();
    for key in &record.unanswered {
        if !record.retried.contains(key) {
            state.struck.insert(key.clone());
        }
    }
    for key in record.keys.iter().filter(|key| !record.unanswered.contains(key)) {
        state.covered.insert(key.clone());
    }
}

/// Polls the batches an intent may have created until one ends holding the intent's keys
/// (adopted: its answers are handed out) or all ended without (the intent was never
/// created: its calls queue again, nothing was paid for them). Another record's batch is
/// never adopted wrongly to harm: only lines whose `custom_id` is one of the intent's keys
/// (content hashes) answer anything.
async fn match_candidates(lane: Arc<BatchLane>, mut record: BatchRecord, mut candidates: Vec<BatchObject>) {
    let mut failures = 0;
    loop {
        let mut open = Vec::new();
        for candidate in candidates {
            let read = match lane.api.get(&candidate.id).await {
                Ok(batch) if !batch.ended() => Ok(None),
                Ok(batch) => lane.api.results(&batch).await.map(|(lines, _)| Some((batch, lines))),
                Err(error) => Err(error),
            };
            match read {
                Ok(Some((batch, lines))) if lines.iter().any(|line| record.keys.contains(&line.custom_id)) => {
                    record.batch_id = Some(batch.id.clone());
                    (record.state, record.counts) = (batch.status.clone(), batch.counts);
                    let _kept = lane.ledger.record(&record);
                    let answers: HashMap<_, _> = lines.into_iter().map(|line| (line.custom_id, line.result)).collect();
                    return answer(&lane, record, answers, &batch.status);
                }
                Ok(Some(_)) => {}
                Ok(None) => open.push(candidate),
                Err(error) => {
                    failures += 1;
                    if failures >= POLL_FAILURES {
                        let message = format!("the batches an interrupted batch (tag {}) may be could not be polled ({error}); it stays recorded", record.tag);
                        return fail_all(&lane, &record.keys, &message);
                    }
                    open.push(candidate);
                }
            }
        }
        if open.is_empty() {
            let _gone = lane.ledger.remove(&record.tag);
            let again = {
                let mut state = lane.lock();
                // Every key is released (no short circuit): each waiter's call is queued.
                record.keys.iter().filter(|key| state.release(key)).count() > 0
            };
            if again {
                queued(&lane);
            }
            return;
        }
        candidates = open;
        tokio::time::sleep(Duration::from_millis(lane.mode.poll_ms)).await;
    }
}
