//! A lane's resume: the batches an earlier run left in the ledger for this lane are found
//! again and polled, so their calls are never submitted twice. An intent without a batch id
//! (killed while the create request was in flight) is looked up in the account's batch
//! list: by its tag where the API keeps one (OpenAI `metadata`, Gemini's display name);
//! Anthropic batches carry no tag, so each batch that may be it (created since the intent,
//! same request count, claimed by no record) is polled until it ends, and the first whose
//! results hold the intent's keys is adopted. A list shows a new batch only after a delay,
//! so one look is not enough: the list is searched again, with backoff, until `lookup_ms`
//! has passed since the intent was recorded; only then is the intent taken as never
//! created, and its calls queue again. None of the three APIs takes an idempotency key on
//! create, so this search is the only guard. A damaged record holds back every new batch of
//! the lane it may belong to.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::BatchLane;
use super::flow::{POLL_FAILURES, answer, fail_all, first_answers, poll, queued};
use crate::cache::BatchRecord;
use crate::providers::batch::{BatchObject, Found, Intent};

/// The first wait between two looks at the batch list; it doubles up to [`LOOKUP_MAX_WAIT`].
const LOOKUP_FIRST_WAIT: Duration = Duration::from_millis(250);
/// The longest wait between two looks at the batch list.
const LOOKUP_MAX_WAIT: Duration = Duration::from_secs(8);

/// A lane's first call: the batches an earlier run left for this lane are found again and
/// polled; their keys are not submitted again.
pub(super) async fn resume(lane: Arc<BatchLane>) {
    hold_back_for_damage(&lane);
    for record in lane.ledger.list().into_iter().filter(|record| record.lane == lane.name) {
        cover(&lane, &record);
        if record.batch_id.is_none() {
            tokio::spawn(look_up(Arc::clone(&lane), record));
        } else {
            tokio::spawn(poll(Arc::clone(&lane), record));
        }
    }
}

/// A damaged record that may be this lane's (it names this lane, or no lane can be read from
/// it) may hold calls of a batch already paid for: no new batch is submitted for this lane
/// this run, and each call that would be says which record and which command releases it.
fn hold_back_for_damage(lane: &BatchLane) {
    let damaged: Vec<_> = lane.ledger.damaged().into_iter().filter(|d| d.lane.as_deref().is_none_or(|l| l == lane.name)).collect();
    let Some(first) = damaged.first() else { return };
    let more = if damaged.len() > 1 { format!(" (and {} more damaged record(s))", damaged.len() - 1) } else { String::new() };
    let message = format!(
        "not sent: the batch ledger record {} is damaged ({}){more} and may hold this call, in a batch already paid for; \
         look for that batch at the provider, then run `evalgrid batch forget {}` to send its calls again",
        first.path.display(),
        first.reason,
        first.name
    );
    tracing::warn!("{message}");
    lane.lock().blocked = Some(message);
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

/// Unix milliseconds now.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Searches the batch list for the batch an interrupted intent may have created, until
/// `lookup_ms` after the intent (its recorded second, rounded up; a clock set back counts
/// from now): found by tag, it is polled; candidates (Anthropic), each is polled until one
/// holds the intent's keys; nothing by then, the intent was never created and its calls
/// queue again.
async fn look_up(lane: Arc<BatchLane>, mut record: BatchRecord) {
    let now = now_ms();
    let deadline = record.recorded_at.saturating_add(1).saturating_mul(1000).min(now).saturating_add(lane.mode.lookup_ms);
    let mut wait = LOOKUP_FIRST_WAIT;
    let mut failures = 0;
    // Candidates that ended without holding the intent's keys: never this intent's.
    let mut ruled_out: Vec<String> = Vec::new();
    loop {
        let mut claimed: Vec<String> = lane.ledger.list().into_iter().filter_map(|r| r.batch_id).collect();
        claimed.extend(ruled_out.iter().cloned());
        let intent = Intent { tag: &record.tag, recorded_at: record.recorded_at, requests: record.keys.len(), claimed: &claimed };
        let candidates = match lane.api.find(intent).await {
            Ok(Found::One(found)) if found.tag.is_some() => {
                record.batch_id = Some(found.id);
                record.state = found.status;
                let _kept = lane.ledger.record(&record);
                return poll(lane, record).await;
            }
            Ok(Found::One(found)) => vec![found],
            Ok(Found::Many(candidates)) => {
                tracing::info!(tag = %record.tag, "an interrupted batch matches {} batches: each is polled, and the one holding its calls is adopted", candidates.len());
                candidates
            }
            Ok(Found::None) => Vec::new(),
            Err(error) => {
                // A failed look is no answer: it never counts as "not found".
                failures += 1;
                if failures >= POLL_FAILURES {
                    let message = format!("an interrupted batch (tag {}) could not be looked up ({error}); its calls are not sent again this run", record.tag);
                    return fail_all(&lane, &record.keys, &message);
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LOOKUP_MAX_WAIT);
                continue;
            }
        };
        failures = 0;
        if !candidates.is_empty() {
            match match_candidates(&lane, &mut record, candidates).await {
                Matched::Adopted | Matched::Failed => return,
                Matched::NoneHeld(ids) => ruled_out.extend(ids),
            }
        }
        let now = now_ms();
        if now >= deadline {
            return never_created(&lane, &record);
        }
        tokio::time::sleep(wait.min(Duration::from_millis(deadline - now))).await;
        wait = (wait * 2).min(LOOKUP_MAX_WAIT);
    }
}

/// The intent was never created: its record goes, and its calls queue like new ones.
fn never_created(lane: &Arc<BatchLane>, record: &BatchRecord) {
    let _gone = lane.ledger.remove(&record.tag);
    let again = {
        let mut state = lane.lock();
        // Every key is released (no short circuit): each waiter's call is queued.
        record.keys.iter().filter(|key| state.release(key)).count() > 0
    };
    if again {
        queued(lane);
    }
}

/// What polling an intent's candidate batches came to.
enum Matched {
    /// One held the intent's keys: its answers were handed out.
    Adopted,
    /// They could not be polled: the intent's calls failed for this run, its record stays.
    Failed,
    /// All ended without the intent's keys (their ids).
    NoneHeld(Vec<String>),
}

/// Polls the batches an intent may have created until one ends holding the intent's keys
/// (adopted: its answers are handed out) or all ended without. Another record's batch is
/// never adopted wrongly to harm: only lines whose `custom_id` is one of the intent's keys
/// (content hashes) answer anything.
async fn match_candidates(lane: &Arc<BatchLane>, record: &mut BatchRecord, mut candidates: Vec<BatchObject>) -> Matched {
    let mut failures = 0;
    let mut ruled_out = Vec::new();
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
                    let _kept = lane.ledger.record(record);
                    let answers: HashMap<_, _> = first_answers(lane, &batch.id, lines);
                    answer(lane, record.clone(), answers, &batch.status);
                    return Matched::Adopted;
                }
                Ok(Some((batch, _))) => ruled_out.push(batch.id),
                Ok(None) => open.push(candidate),
                Err(error) => {
                    failures += 1;
                    if failures >= POLL_FAILURES {
                        let message = format!("the batches an interrupted batch (tag {}) may be could not be polled ({error}); it stays recorded", record.tag);
                        fail_all(lane, &record.keys, &message);
                        return Matched::Failed;
                    }
                    open.push(candidate);
                }
            }
        }
        if open.is_empty() {
            return Matched::NoneHeld(ruled_out);
        }
        candidates = open;
        tokio::time::sleep(Duration::from_millis(lane.mode.poll_ms)).await;
    }
}
