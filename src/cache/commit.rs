//! Group commit: cache files are published without a per-file `fsync`, and one background
//! thread makes everything written so far durable with a single `syncfs` per batch.
//!
//! Why this is safe: a published file is in the page cache, so `kill -9` of evalgrid loses
//! nothing (other processes see it at once). Only a machine crash can lose or tear files
//! written since the last batch, and every entry and blob carries its own checksum, so such
//! a file reads as a miss and is recomputed, never served as a wrong answer. Later steps are
//! keyed by the content of earlier ones, so a recomputed earlier answer never meets a stale
//! later one. [`GroupCommit::flush`] waits for the batch that covers every write so far; a run
//! calls it before it reports success.

use std::fs::File;
use std::path::Path;
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
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Starts the committer for the filesystem holding `dir`.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let handle = File::open(dir)?;
        let shared = Arc::new(Shared { counters: Mutex::new(Counters::default()), changed: Condvar::new() });
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("evalgrid-cache-commit".into()).spawn(move || commit_loop(&worker, &handle))?;
        Ok(Self { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Notes one published write; it becomes durable with the next batch.
    pub fn note(&self) {
        let mut c = self.shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
        c.written += 1;
        self.shared.changed.notify_all();
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
        while c.synced < target {
            if let Some(error) = c.failed.take() {
                return Err(std::io::Error::other(error));
            }
            c = self.shared.changed.wait(c).unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
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
/// once, and marks the batch durable; on stop, syncs what is left and returns.
fn commit_loop(shared: &Shared, handle: &File) {
    loop {
        let target = {
            let mut c = shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
            while c.synced == c.written && !c.stop {
                c = shared.changed.wait(c).unwrap_or_else(PoisonError::into_inner);
            }
            if c.synced == c.written {
                return;
            }
            if !c.stop {
                drop(c);
                std::thread::sleep(WINDOW);
                c = shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
            }
            c.written
        };
        let result = sync_filesystem(handle);
        let mut c = shared.counters.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(()) => {
                c.synced = c.synced.max(target);
                c.batches += 1;
            }
            Err(e) => {
                c.failed = Some(e.to_string());
                if c.stop {
                    return;
                }
            }
        }
        shared.changed.notify_all();
    }
}

/// One `syncfs(2)` of the filesystem holding the cache: a single journal commit for the
/// whole batch, where per-file `fsync` costs one each.
fn sync_filesystem(handle: &File) -> std::io::Result<()> {
    rustix::fs::syncfs(handle).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests;
