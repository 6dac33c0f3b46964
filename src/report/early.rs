//! Transcript pages written while the run is still going: each cell's page as soon as its
//! episode and score are cached, on one thread at the lowest CPU priority (it takes only CPU
//! the model calls leave idle), so the report at the end renders only the last cells' pages.
//! A page is the same bytes the report writes (one function renders both), so the report
//! skips exactly the pages written here for the same cell.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use serde_json::Value;

use super::page::{MAX_TRANSCRIPT_PAGES, transcript_page_of, transcript_path};
use super::partial::write_if_changed;
use crate::cache::Store;
use crate::plan::{Cell, Plan, StepKey};
use crate::spec::Pipeline;

/// Transcript page path → the id of the cell whose page it is, for the pages written early.
pub type Written = BTreeMap<String, String>;

/// What the early writer did: the pages it wrote, and each episode's call tally
/// (`call_outcomes`) read on the way, so the report need not read those episodes again.
#[derive(Debug, Default)]
pub struct Early {
    /// The pages written.
    pub pages: Written,
    /// Episode key → its record's `call_outcomes` (`None`: the record has none).
    pub tallies: HashMap<StepKey, Option<Value>>,
}

/// The thread writing pages early, and what it wrote.
pub struct EarlyPages {
    send: Mutex<Option<mpsc::Sender<Cell>>>,
    worker: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    written: Arc<Mutex<Early>>,
}

impl EarlyPages {
    /// Starts the writer for `plan`'s report under `reports_root`; `None` where the report has
    /// no transcript pages (a grid above the page limit). Where one thread cannot be given the
    /// lowest priority alone (outside Linux), it writes nothing and the report writes all.
    #[must_use]
    pub fn start(pipeline: Arc<Pipeline>, plan: &Plan, store: Store, reports_root: &Path) -> Option<Self> {
        if plan.cells.len() > MAX_TRANSCRIPT_PAGES {
            return None;
        }
        let dir = reports_root.join(&pipeline.name);
        let (send, receive) = mpsc::channel::<Cell>();
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(Mutex::new(Early::default()));
        let (stopped, record) = (Arc::clone(&stop), Arc::clone(&written));
        let worker = std::thread::Builder::new()
            .name("evalgrid-pages".into())
            .spawn(move || {
                if !crate::platform::lowest_thread_priority() {
                    return;
                }
                for cell in receive {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some((path, tally)) = write_page(&pipeline, &cell, &store, &dir) {
                        let mut early = record.lock().unwrap_or_else(PoisonError::into_inner);
                        early.tallies.insert(cell.episode_key, tally);
                        early.pages.insert(path, cell.id);
                    }
                }
            })
            .ok()?;
        Some(Self { send: Mutex::new(Some(send)), worker: Some(worker), stop, written })
    }

    /// Queues the page of `cell`, whose episode and score were just cached.
    pub fn cell_done(&self, cell: &Cell) {
        if let Some(send) = self.send.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = send.send(cell.clone());
        }
    }

    /// Stops the writer (the page in progress is finished, the queued ones are left to the
    /// report) and returns the pages written and the tallies read.
    #[must_use]
    pub fn finish(mut self) -> Early {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.send.lock().unwrap_or_else(PoisonError::into_inner).take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        std::mem::take(&mut *self.written.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Writes `cell`'s page where the report puts it (unless those bytes are there already);
/// its report path and its episode's call tally, or `None` when it was not written (the
/// report then writes it).
fn write_page(pipeline: &Pipeline, cell: &Cell, store: &Store, dir: &Path) -> Option<(String, Option<Value>)> {
    let episode = store.get(cell.episode_key).ok()??;
    let name = transcript_path(cell);
    let bytes = transcript_page_of(pipeline, cell, Some(&episode.output));
    write_if_changed(&dir.join(&name), &bytes).ok()?;
    Some((name, episode.output.get("call_outcomes").cloned()))
}
