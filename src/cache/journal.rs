//! The answer journal (`v1/journal/<pid>-<time>.journal`): room reserved, written out in
//! full, when a run starts, so a paid answer that the cache cannot store (the disk filled
//! while it was in flight) still lands on disk. Each record is appended into the reserved
//! bytes (no new blocks needed) and synced; the next run moves every record into the cache
//! and deletes the file. A journal is locked by its run, so a run on the same cache never
//! takes another live run's records.
//!
//! Record: `EGJ1`, payload length (u32 LE), blake3 of the payload (32 bytes), payload (the
//! JSON of the episode key and the entry). The reserved zeros after the last record end it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::entry::{BUCKET, Entry};
use crate::plan::StepKey;

const MAGIC: &[u8; 4] = b"EGJ1";
const HEADER: usize = 4 + 4 + 32;
/// The most a run reserves, whatever its concurrency.
pub const MAX_RESERVE: u64 = 64 * 1024 * 1024;
/// Below this the journal is not worth a file.
const MIN_RESERVE: u64 = 64 * 1024;

/// One answer kept in the journal.
#[derive(Serialize, Deserialize)]
pub(super) struct Record {
    /// The episode that used the sub-step (its index line is written on recovery).
    pub(super) episode: StepKey,
    /// The entry the cache could not store.
    pub(super) entry: Entry,
}

/// A run's reserved journal.
#[derive(Debug)]
pub struct Journal {
    /// Open and locked (`flock`) for the run's life.
    file: File,
    path: PathBuf,
    capacity: u64,
    /// Where the next record goes.
    offset: Mutex<u64>,
    records: AtomicU64,
}

/// The folder holding every run's journal.
pub(super) fn dir(root: &Path) -> PathBuf {
    root.join(BUCKET).join("journal")
}

impl Journal {
    /// Reserves up to `wanted` bytes (at most [`MAX_RESERVE`], and at most half the space
    /// left on the cache's filesystem); `None` when too little space is left for one.
    pub fn reserve(root: &Path, wanted: u64) -> io::Result<Option<Self>> {
        let dir = dir(root);
        std::fs::create_dir_all(&dir)?;
        let free = crate::platform::free_bytes(&dir).unwrap_or(u64::MAX);
        let capacity = wanted.min(MAX_RESERVE).min(free / 2) / 4096 * 4096;
        if capacity < MIN_RESERVE {
            return Ok(None);
        }
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = dir.join(format!("{}-{nanos}.journal", std::process::id()));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        file.try_lock().map_err(|e| io::Error::other(e.to_string()))?;
        let written = crate::platform::reserve(&file, capacity).and_then(|()| file.sync_all());
        if let Err(error) = written {
            let _ = std::fs::remove_file(&path);
            return Err(error);
        }
        Ok(Some(Self { file, path, capacity, offset: Mutex::new(0), records: AtomicU64::new(0) }))
    }

    /// Bytes reserved.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Answers kept so far.
    #[must_use]
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::SeqCst)
    }

    /// Keeps `entry` (a sub-step of `episode`) durably; an error when it does not fit.
    pub(super) fn append(&self, episode: StepKey, entry: &Entry) -> io::Result<()> {
        let payload = serde_json::to_vec(&Record { episode, entry: entry.clone() }).map_err(io::Error::other)?;
        let length = u32::try_from(payload.len()).map_err(io::Error::other)?;
        let mut record = Vec::with_capacity(HEADER + payload.len());
        record.extend_from_slice(MAGIC);
        record.extend_from_slice(&length.to_le_bytes());
        record.extend_from_slice(blake3::hash(&payload).as_bytes());
        record.extend_from_slice(&payload);
        let mut offset = self.offset.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *offset + record.len() as u64 > self.capacity {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "the answer journal is full"));
        }
        self.file.write_all_at(&record, *offset)?;
        self.file.sync_data()?;
        *offset += record.len() as u64;
        self.records.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // An empty journal is only reserved room: give it back.
        if self.records() == 0 {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Where a store keeps its run's journal, and the reservation still under way.
#[derive(Debug, Default)]
pub(super) struct JournalSlot {
    journal: Mutex<Option<Journal>>,
    /// A reservation made in the background ([`super::Store::reserve_journal_soon`]):
    /// whatever needs the journal waits for it first.
    pending: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl super::Store {
    /// Reserves this run's journal for about `wanted` bytes of answers (see
    /// [`Journal::reserve`]) on a thread of its own, so a run's first calls need not wait for
    /// the room to be allocated and synced (a 64 MB `fallocate` and an `fsync`); `failed`
    /// hears why it could not be. Keeping an answer in the journal, or releasing it, waits
    /// for the reservation to end.
    pub fn reserve_journal_soon(&self, wanted: u64, failed: impl FnOnce(io::Error) + Send + 'static) {
        let (root, slot) = (self.root().to_owned(), std::sync::Arc::clone(&self.journal));
        let reserve = move || match Journal::reserve(&root, wanted) {
            Ok(journal) => *slot.journal.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = journal,
            Err(error) => failed(error),
        };
        // The closure is moved into the thread only if the thread starts; a failed spawn
        // leaves nothing reserved, as a full disk would.
        match std::thread::Builder::new().name("evalgrid-journal".into()).spawn(reserve) {
            Ok(handle) => *self.journal.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle),
            Err(error) => tracing::warn!("cannot start the journal's reservation ({error}); a full disk would lose the answers in flight"),
        }
    }

    fn journal_slot(&self) -> std::sync::MutexGuard<'_, Option<Journal>> {
        let pending = self.journal.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(pending) = pending {
            let _ = pending.join();
        }
        self.journal.journal.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers this run kept in its journal because the cache could not store them.
    #[must_use]
    pub fn journaled(&self) -> u64 {
        self.journal_slot().as_ref().map_or(0, Journal::records)
    }

    /// Keeps `entry` (a sub-step of `episode`) in this run's journal; whether it is kept.
    pub fn keep_in_journal(&self, episode: StepKey, entry: &Entry) -> bool {
        self.journal_slot().as_ref().is_some_and(|journal| journal.append(episode, entry).is_ok())
    }

    /// The run is over: its journal's room is given back (the file kept only when it holds
    /// answers, for the next run).
    pub fn release_journal(&self) {
        drop(self.journal_slot().take());
    }

    /// Moves the answers of earlier runs' journals into the cache, deleting each journal
    /// once all its answers are stored and flushed; the number moved.
    pub fn recover_journals(&self) -> Result<u64, super::CacheError> {
        let io_error = |path: &Path| {
            let path = path.to_owned();
            move |source| super::CacheError::Io { path, source }
        };
        let mut moved = 0;
        for (path, file, records) in left_behind(self.root()).map_err(io_error(&dir(self.root())))? {
            for record in &records {
                self.record_substep(record.episode, record.entry.key, true)?;
                self.put(&record.entry)?;
            }
            self.flush()?;
            std::fs::remove_file(&path).map_err(io_error(&path))?;
            drop(file);
            moved += records.len() as u64;
        }
        Ok(moved)
    }
}

/// The journals of runs that are over (not locked), each with its records; a torn or
/// corrupted record ends its journal's list.
pub(super) fn left_behind(root: &Path) -> io::Result<Vec<(PathBuf, File, Vec<Record>)>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir(root)) else { return Ok(out) };
    for path in entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "journal")) {
        let mut file = OpenOptions::new().read(true).write(true).open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(e),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        out.push((path, file, parse(&bytes)));
    }
    Ok(out)
}

fn parse(mut bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    while bytes.len() >= HEADER && &bytes[..4] == MAGIC {
        let length = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
        let Some(payload) = bytes.get(HEADER..HEADER + length) else { break };
        if blake3::hash(payload).as_bytes() != &bytes[8..HEADER] {
            break;
        }
        let Ok(record) = serde_json::from_slice::<Record>(payload) else { break };
        records.push(record);
        bytes = &bytes[HEADER + length..];
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::StepKind;

    #[test]
    fn records_written_into_the_reserved_room_are_read_back_after_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::reserve(dir.path(), 256 * 1024).unwrap().expect("room");
        assert_eq!(journal.capacity(), 256 * 1024);
        let entry = |n: u64| Entry {
            key: StepKey::compute(&serde_json::json!(n)),
            kind: StepKind::Call,
            components: serde_json::json!({"n": n}),
            output: serde_json::json!("x".repeat(60_000)),
            duration_ms: 0,
            writer: String::new(),
        };
        let episode = StepKey::compute(&serde_json::json!("episode"));
        for n in 0..4 {
            journal.append(episode, &entry(n)).unwrap();
        }
        assert_eq!(journal.append(episode, &entry(9)).unwrap_err().kind(), io::ErrorKind::StorageFull, "five do not fit in 256 KiB");
        assert!(left_behind(dir.path()).unwrap().is_empty(), "a live run's journal is locked");
        drop(journal);
        let found = left_behind(dir.path()).unwrap();
        assert_eq!(found.len(), 1);
        let keys: Vec<StepKey> = found[0].2.iter().map(|r| r.entry.key).collect();
        assert_eq!(keys, (0..4).map(|n| entry(n).key).collect::<Vec<_>>());
    }
}
