//! Group commit: cache files are published without a per-file `fsync`, and one background
//! thread makes everything written so far durable with a single `syncfs` per batch (Linux),
//! or, where there is no `syncfs` (macOS), an `fsync` of exactly the batch's files and their
//! directories (see [`crate::platform`]); each write names its file for that.
//!
//! Why this is safe: a published file is in the page cache, so `kill -9` of evalgrid loses
//! nothing (other processes see it at once). Only a machine crash can lose or tear files
//! written since the last batch, and every entry and blob carries its own checksum, so such
//! a file reads as a miss and is recomputed, never served as a wrong answer. Later steps are
//! keyed by the content of earlier ones, so a recomputed earlier answer never meets a stale
//! later one. [`GroupCommit::flush`] waits for the batch that covers every write so far; a run
//! calls it before it reports success.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the committer waits after the first unsynced write for more to join its batch.
const WINDOW: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
struct Counters {
    /// Writes published so far.
    written: u64,
    /// Writes known durable.
    synced: u64,
    /// The last batch failed with this error (reported by `flush`, then retried).
    failed: Option<String>,
    /// Set on drop: sync what is left and stop.
    stop: bool,
    /// Batches synced so far (one `syncfs` each).
    batches: u64,
    /// The files published since the last batch began, when the platform syncs per file
    /// ([`crate::platform::TRACKS_FILES`]); always empty with `syncfs`.
    pending: Vec<PathBuf>,
    /// Files handed to the platform's sync so far, counted once per batch.
    files_synced: u64,
    /// Callers waiting in [`GroupCommit::flush`]: the batch is synced without waiting out
    /// the rest of its window (nothing more is coming that they would wait for).
    flushing: usize,
}

#[derive(Debug)]
struct Shared {
    counters: Mutex<Counters>,
    /// Wakes the committer (new writes, stop) and flushers (a batch finished).
    changed: Condvar,
}

/// The committer of one cache directory; clones of a [`super::Store`] share it.
#[derive(Debug)]
pub struct GroupCommit {
    shared: Arc<Shared>,
    /// Whether each write's path is kept for its batch (the portable path); read once.
    tracks_files: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Starts the committer for the filesystem holding `dir`.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let handle = File::open(dir)?;
        let root = dir.to_owned();
        let shared = Arc::new(Shared { counters: Mutex::new(Counters::default()), changed: Condvar::new() });
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("evalgrid-cache-commit".into()).spawn(move || commit_loop(&worker, &handle, &root))?;
        Ok(Self { shared, tracks_files: crate::platform::TRACKS_FILES, thread: Mutex::new(Some(thread)) })
    }

    /// Notes one published write of the file at `path` (under the committer's directory); it
    /// becomes durable with the next batch.
    pub fn note(&self, path: &Path) {
        let mut c = self.shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
        // Only an idle committer (everything synced) waits for writes; one gathering or
        // syncing a batch looks again when it is done. A notify is a futex call, and a busy
        // run notes two writes per model call.
        let idle = c.synced == c.written;
        c.written += 1;
        if self.tracks_files {
            c.pending.push(path.to_owned());
        }
        if idle {
            self.shared.changed.notify_all();
        }
    }

    /// How many batches were synced so far.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.shared.counters.lock().unwrap_or_else(PoisonError::into_inner).batches
    }

    /// Waits until every write noted before this call is durable.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut c = self.shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let target = c.written;
        c.flushing += 1;
        self.shared.changed.notify_all();
        let mut result = Ok(());
        while c.synced < target {
            if let Some(error) = c.failed.take() {
                result = Err(std::io::Error::other(error));
                break;
            }
            c = self.shared.changed.wait(c).unwrap_or_else(PoisonError::into_inner);
        }
        c.flushing -= 1;
        result
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        {
            let mut c = self.shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
            c.stop = true;
            self.shared.changed.notify_all();
        }
        if let Some(thread) = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _joined = thread.join();
        }
    }
}

/// Waits for unsynced writes, lets a batch gather for [`WINDOW`], syncs the filesystem
/// once (or the batch's files), and marks the batch durable; on stop, syncs what is left and
/// returns. A failed batch keeps its files for the retry.
fn commit_loop(shared: &Shared, handle: &File, root: &Path) {
    loop {
        let (target, mut files) = {
            let mut c = shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
            while c.synced == c.written && !c.stop {
                c = shared.changed.wait(c).unwrap_or_else(PoisonError::into_inner);
            }
            if c.synced == c.written {
                return;
            }
            // Let the batch gather for the window, unless a flush is waiting for it.
            let until = std::time::Instant::now() + WINDOW;
            while !c.stop && c.flushing == 0 {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                c = shared.changed.wait_timeout(c, left).unwrap_or_else(PoisonError::into_inner).0;
            }
            (c.written, std::mem::take(&mut c.pending))
        };
        files.sort_unstable();
        files.dedup();
        let result = crate::platform::sync_batch(handle, root, &files);
        let mut c = shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(()) => {
                c.synced = c.synced.max(target);
                c.batches += 1;
                c.files_synced += files.len() as u64;
            }
            Err(e) => {
                c.pending.append(&mut files);
                c.failed = Some(e.to_string());
                if c.stop {
                    return;
                }
            }
        }
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests;
