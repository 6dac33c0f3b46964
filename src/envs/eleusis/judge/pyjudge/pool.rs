//! Warm judge zygotes shared by every [`super::PyJudge`] of this process: a judge made for
//! one check takes an idle zygote (or starts one) and gives it back when dropped, so the
//! interpreter starts once per process and lane rather than once per check, while every
//! check still runs in a fresh child process.
//!
//! Zygotes are started on one long-lived thread: bubblewrap's `--die-with-parent` fires
//! when the *thread* that spawned it exits, and a zygote outlives the (possibly short-lived)
//! thread of the check that first needed it.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::process::{Worker, WorkerFailure};

/// Idle zygotes kept per process (more are started under load, and stopped when given back).
const MAX_IDLE: usize = 16;

/// What a zygote was started with; only a zygote with the same key is reused.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    python: PathBuf,
    memory_limit_bytes: u64,
}

static IDLE: Mutex<Vec<(Key, Worker)>> = Mutex::new(Vec::new());

type Job = (Key, Duration, Sender<Result<Worker, WorkerFailure>>);

/// An idle, live zygote for `python` and the limit, or a new one (`reused` tells which).
pub(super) fn take(python: &Path, memory_limit_bytes: u64, startup: Duration) -> Result<(Worker, bool), WorkerFailure> {
    let key = Key { python: python.to_path_buf(), memory_limit_bytes };
    loop {
        let found = IDLE.lock().ok().and_then(|mut idle| {
            let at = idle.iter().position(|(k, _)| *k == key)?;
            Some(idle.swap_remove(at).1)
        });
        let Some(mut worker) = found else { break };
        if worker.is_idle_and_alive() {
            return Ok((worker, true));
        }
        // A zygote that died while idle: dropping it reaps what is left.
    }
    spawn(key, startup).map(|w| (w, false))
}

/// Keeps a zygote for the next judge when it is healthy and between checks.
pub(super) fn give_back(python: &Path, memory_limit_bytes: u64, mut worker: Worker) {
    if !worker.is_idle_and_alive() {
        return;
    }
    let key = Key { python: python.to_path_buf(), memory_limit_bytes };
    if let Ok(mut idle) = IDLE.lock()
        && idle.len() < MAX_IDLE
    {
        idle.push((key, worker));
    }
}

fn spawn(key: Key, startup: Duration) -> Result<Worker, WorkerFailure> {
    static KEEPER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for (key, startup, reply) in rx {
                let _ = reply.send(Worker::spawn(&key.python, key.memory_limit_bytes, startup));
            }
        });
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    let sent = keeper.lock().map_err(|_| WorkerFailure::Spawn("zygote keeper poisoned".to_owned()))?.send((key, startup, tx));
    sent.map_err(|_| WorkerFailure::Spawn("zygote keeper stopped".to_owned()))?;
    rx.recv().map_err(|_| WorkerFailure::Spawn("zygote keeper stopped".to_owned()))?
}
