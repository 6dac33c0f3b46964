//! The batch ledger: every batch a run submitted to a provider's batch API, by its tag, so
//! an interrupted run (Ctrl-C, `kill -9`, a Slurm limit) collects it instead of paying for
//! its calls again.
//!
//! A record is written in two steps, each published with a rename and synced (file and
//! directory) before the request that follows it is sent: the INTENT (tag, input file,
//! call keys) before the create request, then the batch id once the create returned. A
//! rerun polls each recorded batch; an intent without an id (killed between the create and
//! its record) is looked up in the account's batch list (by its tag, or for Anthropic by its
//! time and request count) before anything is created again. A batch that ended without answering some calls keeps their keys in
//! `unanswered` until they went back to the queue once (`retried` lists them in the batch
//! holding that second chance). Layout: `v1/batches/<tag>.json`; like `v1/pending/`, records stay
//! local (a batch belongs to the provider key that created it).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use super::durable::now_s;
use super::durable::{remove_record, write_synced};
use super::store::{CacheError, Store};

/// What is remembered about one submitted batch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// evalgrid's tag, also the batch's `metadata.evalgrid` (OpenAI) or display name (Gemini),
    /// to find it again by listing.
    pub tag: String,
    /// `provider model base_url`: which lane's collector owns it.
    pub lane: String,
    /// The batch's endpoint, e.g. `/v1/chat/completions`, `/v1/messages/batches`.
    pub endpoint: String,
    /// The uploaded input file (OpenAI; empty for the APIs whose create carries the requests).
    pub input_file_id: String,
    /// The provider's batch id, once the create request returned it.
    #[serde(default)]
    pub batch_id: Option<String>,
    /// The call keys (hex) it covers, its `custom_id`s.
    pub keys: Vec<String>,
    /// Its keys that are on their second batch (their first ended without an answer).
    #[serde(default)]
    pub retried: Vec<String>,
    /// The last state seen (`intent`, `validating`, `in_progress`, `completed`, `expired`…).
    pub state: String,
    /// Requests (total, completed, failed) at the last poll.
    #[serde(default)]
    pub counts: (u64, u64, u64),
    /// Calls an ended batch did not answer, not yet sent again.
    #[serde(default)]
    pub unanswered: Vec<String>,
    /// When the intent was recorded (Unix seconds).
    pub recorded_at: u64,
}

/// The batch records of one cache directory.
#[derive(Clone, Debug)]
pub struct BatchLedger {
    dir: PathBuf,
}

impl BatchLedger {
    /// The records of `store`'s directory (`v1/batches/`).
    #[must_use]
    pub fn of(store: &Store) -> Self {
        Self { dir: store.root().join("batches") }
    }

    fn path(&self, tag: &str) -> PathBuf {
        self.dir.join(format!("{tag}.json"))
    }

    /// Writes `record` over any earlier one of its tag; returns once it survives a crash.
    pub fn record(&self, record: &BatchRecord) -> Result<(), CacheError> {
        let bytes = serde_json::to_vec_pretty(record).expect("a batch record is plain JSON and always serializes");
        write_synced(&self.dir, &self.path(&record.tag), &bytes)
    }

    /// Forgets batch `tag` (none is fine).
    pub fn remove(&self, tag: &str) -> Result<(), CacheError> {
        remove_record(&self.path(tag))
    }

    /// Every readable record, oldest first (a torn one is skipped: it was never acted on).
    #[must_use]
    pub fn list(&self) -> Vec<BatchRecord> {
        let mut out: Vec<BatchRecord> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|file| file.path().extension().is_some_and(|ext| ext == "json"))
            .filter_map(|file| std::fs::read(file.path()).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()))
            .collect();
        out.sort_by(|a, b| (a.recorded_at, &a.tag).cmp(&(b.recorded_at, &b.tag)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_then_its_id_survive_new_handles_and_a_torn_record_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ledger = BatchLedger::of(&store);
        let mut record =
            BatchRecord { tag: "t1".into(), lane: "openai m http://h".into(), keys: vec!["ab".into()], state: "intent".into(), ..BatchRecord::default() };
        ledger.record(&record).unwrap();
        record.batch_id = Some("batch_1".into());
        record.state = "validating".into();
        ledger.record(&record).unwrap();
        let again = BatchLedger::of(&Store::open(dir.path()).unwrap());
        assert_eq!(again.list(), vec![record]);
        std::fs::write(dir.path().join("v1/batches/t2.json"), b"{\"tag\": \"t").unwrap();
        assert_eq!(again.list().len(), 1);
        again.remove("t1").unwrap();
        again.remove("t1").unwrap();
        assert!(again.list().is_empty());
    }
}
