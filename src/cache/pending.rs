//! Background responses still running at the provider, by the key of the call that
//! started them, so an interrupted run never pays twice for the same call.
//!
//! A Responses API call in background mode runs on the server after its POST; a run
//! stopped by Ctrl-C or a Slurm time limit leaves it running (and billing) there. Its
//! response id is recorded here as soon as the POST returns it, before the first poll,
//! and the next run of the same call polls that response instead of POSTing again. The
//! record is removed once the answer is cached, or when the response ended without one
//! (failed, cancelled, gone).
//!
//! Layout: `v1/pending/ab/<call key>.json` holding `{"response_id", "recorded_at"}`. A
//! record is published with a rename and synced at once (file and directory), not batched
//! with the group commit: it is one small file per background call (calls that run for
//! minutes), and losing it to a crash means paying for the call twice. Records stay in this
//! directory (like locks), also with a shared remote: the response belongs to the process
//! that started it, and its provider key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::durable::{now_s, remove_record, write_synced};
use super::store::{CacheError, Store};
use crate::plan::StepKey;

/// What is remembered about a background response started by a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingResponse {
    /// The provider's response id (`resp_…`), polled at `…/responses/{id}`.
    pub response_id: String,
    /// When it was recorded (Unix seconds), to tell a response the provider may have
    /// dropped already.
    pub recorded_at: u64,
}

/// The pending-response records of one cache directory.
#[derive(Clone, Debug)]
pub struct PendingResponses {
    dir: PathBuf,
}

impl PendingResponses {
    /// The records of `store`'s directory (`v1/pending/`).
    #[must_use]
    pub fn of(store: &Store) -> Self {
        Self { dir: store.root().join("pending") }
    }

    fn path(&self, key: StepKey) -> PathBuf {
        let hex = key.to_hex();
        self.dir.join(&hex[..2]).join(format!("{hex}.json"))
    }

    /// The response recorded for call `key`, if any (an unreadable record is none).
    #[must_use]
    pub fn get(&self, key: StepKey) -> Option<PendingResponse> {
        std::fs::read(self.path(key)).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// Records that call `key` started response `response_id`, replacing any earlier
    /// record, and returns once the record survives a crash.
    pub fn record(&self, key: StepKey, response_id: &str) -> Result<(), CacheError> {
        let path = self.path(key);
        let shard = path.parent().unwrap_or(&self.dir).to_owned();
        let record = PendingResponse { response_id: response_id.to_owned(), recorded_at: now_s() };
        let bytes = serde_json::to_vec(&record).expect("a pending record is plain JSON and always serializes");
        write_synced(&shard, &path, &bytes)
    }

    /// Forgets the record of call `key` (none is fine).
    pub fn remove(&self, key: StepKey) -> Result<(), CacheError> {
        remove_record(&self.path(key))
    }

    /// Every record, by call key, for `status` and clean-up; unreadable ones skipped.
    #[must_use]
    pub fn list(&self) -> Vec<(String, PendingResponse)> {
        let mut out = Vec::new();
        for shard in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                let Some(key) = name.strip_suffix(".json") else { continue };
                if let Some(record) = std::fs::read(file.path()).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()) {
                    out.push((key.to_owned(), record));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_is_kept_across_handles_replaced_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (a, b) = (StepKey::compute(&json!("a")), StepKey::compute(&json!("b")));
        let pending = PendingResponses::of(&store);
        assert_eq!(pending.get(a), None);
        pending.record(a, "resp_1").unwrap();
        pending.record(b, "resp_2").unwrap();
        // Another run (a new handle on the same directory) sees them.
        let again = PendingResponses::of(&Store::open(dir.path()).unwrap());
        assert_eq!(again.get(a).map(|record| record.response_id), Some("resp_1".to_owned()));
        again.record(a, "resp_3").unwrap();
        assert_eq!(pending.get(a).map(|record| record.response_id), Some("resp_3".to_owned()));
        assert_eq!(pending.list().iter().map(|(key, record)| (key.clone(), record.response_id.as_str())).collect::<Vec<_>>(), {
            let mut expected = vec![(a.to_hex(), "resp_3"), (b.to_hex(), "resp_2")];
            expected.sort();
            expected
        });
        pending.remove(a).unwrap();
        pending.remove(a).unwrap();
        assert_eq!((pending.get(a), pending.list().len()), (None, 1));
        // A torn record reads as none: the call is POSTed again, never polled at random.
        std::fs::write(pending.path(b), b"{\"response_id\": \"re").unwrap();
        assert_eq!(pending.get(b), None);
    }
}
