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
//!
//! A record that cannot be read (truncated, garbage: a disk fault or a hand edit, never a
//! crash, which leaves the old record or the new one whole) is never skipped silently: it may
//! hold calls of a batch already paid for, so [`BatchLedger::damaged`] names it, and its lane
//! submits nothing new until the user forgets it ([`BatchLedger::forget`], `evalgrid batch
//! forget`).

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

    /// Every readable record, oldest first (the damaged ones are in [`Self::damaged`]).
    #[must_use]
    pub fn list(&self) -> Vec<BatchRecord> {
        let mut out: Vec<BatchRecord> = self.files().into_iter().filter_map(|path| read_record(&path).ok()).collect();
        out.sort_by(|a, b| (a.recorded_at, &a.tag).cmp(&(b.recorded_at, &b.tag)));
        out
    }

    /// Every record that cannot be read, by file name: its calls may belong to a batch already
    /// paid for, so they are not submitted again until the record is forgotten.
    #[must_use]
    pub fn damaged(&self) -> Vec<DamagedRecord> {
        let mut out: Vec<DamagedRecord> = self
            .files()
            .into_iter()
            .filter_map(|path| {
                let reason = read_record(&path).err()?;
                let name = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let lane = std::fs::read(&path).ok().and_then(|bytes| salvage_lane(&bytes));
                Some(DamagedRecord { name, path, reason, lane })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Removes the record named `name` (its tag, its file name, or its batch id), readable or
    /// damaged: its calls are submitted again by the next run. What was removed, or `None`.
    ///
    /// # Errors
    /// The file could not be removed.
    pub fn forget(&self, name: &str) -> Result<Option<Forgotten>, CacheError> {
        let stem = name.strip_suffix(".json").unwrap_or(name);
        if let Some(record) = self.list().into_iter().find(|r| r.tag == stem || r.batch_id.as_deref() == Some(name)) {
            self.remove(&record.tag)?;
            return Ok(Some(Forgotten::Record(record)));
        }
        if let Some(damaged) = self.damaged().into_iter().find(|d| d.name == stem) {
            super::store::remove_any(&damaged.path)?;
            return Ok(Some(Forgotten::Damaged(damaged)));
        }
        Ok(None)
    }

    /// The `.json` files of the directory (temp files of a write in progress are not).
    fn files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|file| file.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect()
    }
}

/// A ledger file that cannot be read as a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedRecord {
    /// Its file name less `.json` (the tag it was written under): what `batch forget` takes.
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
    /// Why it cannot be read.
    pub reason: String,
    /// The lane it names, where that much of it is still readable; `None`: it may be any
    /// lane's, so every lane holds back.
    pub lane: Option<String>,
}

/// What [`BatchLedger::forget`] removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forgotten {
    /// A readable record.
    Record(BatchRecord),
    /// A damaged one.
    Damaged(DamagedRecord),
}

fn read_record(path: &std::path::Path) -> Result<BatchRecord, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot be read: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not a batch record ({e})"))
}

/// The `"lane": "…"` value of a damaged record, if that part of it is whole.
fn salvage_lane(bytes: &[u8]) -> Option<String> {
    let at = bytes.windows(6).position(|w| w == b"\"lane\"")? + 6;
    let rest = &bytes[at..];
    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest[colon] != b':' {
        return None;
    }
    let mut values = serde_json::Deserializer::from_slice(&rest[colon + 1..]).into_iter::<String>();
    values.next()?.ok().filter(|lane| lane.split(' ').count() >= 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_then_its_id_survive_new_handles_and_a_damaged_record_is_named_and_forgettable() {
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
        assert_eq!(again.list(), vec![record.clone()]);
        std::fs::write(dir.path().join("v1/batches/t2.json"), b"{\"tag\": \"t2\", \"lane\": \"openai m http://h\", \"keys\": [\"a").unwrap();
        std::fs::write(dir.path().join("v1/batches/t3.json"), b"\x00\xff garbage").unwrap();
        assert_eq!(again.list().len(), 1, "a damaged record is not listed as readable");
        let damaged = again.damaged();
        assert_eq!(damaged.iter().map(|d| (d.name.as_str(), d.lane.as_deref())).collect::<Vec<_>>(), vec![("t2", Some("openai m http://h")), ("t3", None)]);
        assert!(matches!(again.forget("t3.json").unwrap(), Some(Forgotten::Damaged(d)) if d.name == "t3"));
        assert!(matches!(again.forget("batch_1").unwrap(), Some(Forgotten::Record(r)) if r.tag == "t1"), "by batch id");
        assert_eq!(again.forget("t9").unwrap(), None);
        assert_eq!(again.damaged().len(), 1);
        again.remove("t1").unwrap();
        again.forget("t2").unwrap();
        assert!(again.list().is_empty() && again.damaged().is_empty());
    }
}
