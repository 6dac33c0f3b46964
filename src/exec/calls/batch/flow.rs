//! A batch's life: submitted when the collector is full or idle (intent recorded, created,
//! id recorded), polled to its end, its output read back by `custom_id`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::BatchLane;
use super::state::LineAnswer;
use crate::cache::BatchRecord;
use crate::cache::batches::now_s;
use crate::providers::batch::BatchError;

/// Polls in a row that may fail (the network, a 5xx) before a batch's calls give up for
/// this run; the batch stays recorded, so the next run polls it again.
pub(super) const POLL_FAILURES: u32 = 10;

/// Calls were queued: every full batch is submitted now, and what is left once the lane
/// stays idle for the window.
pub(super) fn queued(lane: &Arc<BatchLane>) {
    let (full, generation) = {
        let mut state = lane.lock();
        let mut full = Vec::new();
        while state.queue.len() >= lane.mode.max_requests {
            full.push(state.take(lane.mode.max_requests));
        }
        (full, state.generation)
    };
    for items in full {
        tokio::spawn(submit(Arc::clone(lane), items));
    }
    let lane = Arc::clone(lane);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(lane.mode.window_ms)).await;
        let items = {
            let mut state = lane.lock();
            if state.generation != generation || state.queue.is_empty() {
                return;
            }
            state.take(lane.mode.max_requests)
        };
        submit(lane, items).await;
    });
}

pub(super) fn fail_all(lane: &BatchLane, keys: &[String], message: &str) {
    let mut state = lane.lock();
    for key in keys {
        state.deliver(key, Err(message.to_owned()));
    }
}

/// Submits `items` as one batch and polls it to its end.
async fn submit(lane: Arc<BatchLane>, items: Vec<(String, Value)>) {
    let keys: Vec<String> = items.iter().map(|(key, _)| key.clone()).collect();
    if let Some(reason) = lane.client.halted_reason() {
        return fail_all(&lane, &keys, &format!("not sent: {reason}"));
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tag = format!("eg-{}", &blake3::hash(format!("{}{nanos}", keys.concat()).as_bytes()).to_hex()[..20]);
    let input_file_id = match lane.api.prepare(&items, &tag).await {
        Ok(id) => id,
        Err(error) => return fail_all(&lane, &keys, &error.to_string()),
    };
    let retried: Vec<String> = {
        let state = lane.lock();
        keys.iter().filter(|key| state.struck.contains(*key)).cloned().collect()
    };
    let mut record = BatchRecord {
        tag: tag.clone(),
        lane: lane.name.clone(),
        endpoint: lane.api.path(),
        input_file_id,
        keys: keys.clone(),
        retried,
        state: "intent".into(),
        recorded_at: now_s(),
        ..BatchRecord::default()
    };
    if let Err(error) = lane.ledger.record(&record) {
        return fail_all(&lane, &keys, &format!("the batch ledger cannot be written, so no batch is created (it could not be resumed): {error}"));
    }
    drop_retried(&lane, &record);
    let created = match lane.api.create(&items, &record.input_file_id, &tag).await {
        Ok(created) => created,
        Err(error) => return create_failed(&lane, &record, &error),
    };
    record.batch_id = Some(created.id.clone());
    record.state.clone_from(&created.status);
    if let Err(error) = lane.ledger.record(&record) {
        tracing::warn!(batch = %created.id, "cannot record the batch id (the next run finds it by its tag): {error}");
    }
    poll(lane, record).await;
}

/// The retried keys leave the ended records that held them unanswered.
fn drop_retried(lane: &BatchLane, record: &BatchRecord) {
    if record.retried.is_empty() {
        return;
    }
    // Under the lock, like every other change of a settled record.
    let state = lane.lock();
    for mut old in lane.ledger.list().into_iter().filter(|old| old.lane == lane.name && old.tag != record.tag) {
        let before = old.unanswered.len();
        old.unanswered.retain(|key| !record.retried.contains(key));
        if old.unanswered.len() != before {
            let _kept =
                if old.unanswered.is_empty() && !state.unsettled.contains_key(&old.tag) { lane.ledger.remove(&old.tag) } else { lane.ledger.record(&old) };
        }
    }
}

/// A create the server refused created nothing: the intent goes. One that got no answer
/// may have created the batch: the intent stays, and the next run looks for it by tag.
fn create_failed(lane: &BatchLane, record: &BatchRecord, error: &BatchError) {
    let message = if matches!(error, BatchError::Status { .. }) {
        let _gone = lane.ledger.remove(&record.tag);
        error.to_string()
    } else {
        format!("{error} (the batch may exist: the next run looks for it by its tag before creating another)")
    };
    fail_all(lane, &record.keys, &message);
}

/// Polls `record`'s batch to its end, then answers its calls.
pub(super) async fn poll(lane: Arc<BatchLane>, mut record: BatchRecord) {
    let Some(id) = record.batch_id.clone() else { return };
    let mut failures = 0;
    let batch = loop {
        match lane.api.get(&id).await {
            Ok(batch) => {
                failures = 0;
                if (batch.status.as_str(), batch.counts) != (record.state.as_str(), record.counts) {
                    (record.state, record.counts) = (batch.status.clone(), batch.counts);
                    let _kept = lane.ledger.record(&record);
                }
                if batch.ended() {
                    break batch;
                }
            }
            Err(BatchError::Status { status: 404, .. }) => return not_found(&lane, record, &id),
            Err(error) => {
                failures += 1;
                if failures >= POLL_FAILURES {
                    let open: Vec<String> = record.keys.iter().filter(|key| !record.unanswered.contains(key)).cloned().collect();
                    return fail_all(&lane, &open, &format!("batch {id} could not be polled ({error}); it stays recorded and the next run polls it again"));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(lane.mode.poll_ms)).await;
    };
    let answers: HashMap<String, LineAnswer> = match lane.api.results(&batch).await {
        Ok((lines, problems)) => {
            for problem in problems {
                tracing::warn!(batch = %id, "{problem}");
            }
            first_answers(&lane, &id, lines)
        }
        Err(error) => {
            let open: Vec<String> = record.keys.iter().filter(|key| !record.unanswered.contains(key)).cloned().collect();
            return fail_all(&lane, &open, &format!("the results of batch {id} could not be read ({error}); the next run reads them again"));
        }
    };
    answer(&lane, record, answers, &batch.status);
}

/// The provider does not know batch `id` (HTTP 404: created under another key or project, or
/// deleted). Nothing says it did not run and bill, so its calls are not sent again: they fail
/// for this run, the record stays (state `not_found`, shown by `status`), and the user
/// releases them with `evalgrid batch forget`.
fn not_found(lane: &BatchLane, mut record: BatchRecord, id: &str) {
    record.state = "not_found".into();
    let _kept = lane.ledger.record(&record);
    let open: Vec<String> = record.keys.iter().filter(|key| !record.unanswered.contains(key)).cloned().collect();
    let message = format!(
        "batch {id} is unknown to the provider (HTTP 404: created under another API key or project, or deleted); its {} call(s) are not sent again, \
         since it may have run and been billed. If it is gone for good, `evalgrid batch forget {}` releases them for the next run",
        open.len(),
        record.tag
    );
    tracing::warn!("{message}");
    fail_all(lane, &open, &message);
}

/// The answers of a batch's output lines by `custom_id`: the FIRST line of each id answers;
/// later ones repeating it are ignored, counted for the run summary and logged.
pub(super) fn first_answers(lane: &BatchLane, id: &str, lines: Vec<crate::providers::batch::OutputLine>) -> HashMap<String, LineAnswer> {
    let mut answers = HashMap::with_capacity(lines.len());
    let mut repeated = 0_u64;
    for line in lines {
        match answers.entry(line.custom_id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(line.result);
            }
            std::collections::hash_map::Entry::Occupied(_) => repeated += 1,
        }
    }
    if repeated > 0 {
        lane.duplicates.fetch_add(repeated, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!(batch = %id, "{repeated} output line(s) repeat a custom_id answered by an earlier line: the first line of each was kept");
    }
    answers
}

/// Hands each call of an ended batch its line; calls without one go back to the queue once
/// (a batch's own `batch_expired`/`batch_cancelled` error line is no answer either).
pub(super) fn answer(lane: &Arc<BatchLane>, mut record: BatchRecord, mut answers: HashMap<String, LineAnswer>, status: &str) {
    let no_answer = |answer: &LineAnswer| matches!(answer, Err(message) if message.starts_with("batch_"));
    let mut requeued = false;
    // The record is written under the lock, so a call settled meanwhile cannot have its
    // batch's record removed before this write would bring it back.
    let mut state = lane.lock();
    let mut settled = HashSet::new();
    let open: Vec<String> = record.keys.iter().filter(|key| !record.unanswered.contains(key)).cloned().collect();
    for key in &open {
        match answers.remove(key) {
            Some(line) if !no_answer(&line) => {
                if !state.waiters.contains_key(key) && key.parse::<crate::plan::StepKey>().is_ok_and(|k| lane.store.contains(k)) {
                    continue;
                }
                settled.insert(key.clone());
                state.deliver(key, line);
            }
            _ if state.requeue(key, record.retried.contains(key)) => {
                requeued |= state.waiters.contains_key(key);
                record.unanswered.push(key.clone());
            }
            _ => state.deliver(
                key,
                Err(format!(
                    "batch {} ended `{status}` without answering this call, which went back to the queue once already",
                    record.batch_id.as_deref().unwrap_or("?")
                )),
            ),
        }
    }
    let empty = settled.is_empty();
    if !empty {
        state.unsettled.insert(record.tag.clone(), settled);
    }
    let _kept = if empty && record.unanswered.is_empty() { lane.ledger.remove(&record.tag) } else { lane.ledger.record(&record) };
    drop(state);
    if requeued {
        super::flow::queued(lane);
    }
}
