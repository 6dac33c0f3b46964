//! The cell scheduler: runs every cell whose steps are not cached, up to
//! `jobs` at a time, landing each finished step atomically in the cache.
//!
//! Ctrl-C (or [`Cancel::cancel`]) stops launching new cells and drops the cells in
//! flight, cancelling their HTTP requests: every sub-step already answered (model calls,
//! verdicts, submissions) is in the cache, an unanswered request is not, so re-running
//! the same command resumes exactly where it stopped and pays only for what was lost. Two processes on one cache coordinate through per-key
//! locks: the second waits for the first and then reads its result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinSet;

use super::calls::CallContext;
use super::progress::{Display, Progress};
use super::runner::{EpisodeContext, EpisodeRunner, StepError};
use crate::cache::{CacheError, Entry, Failure, Head, Store, Stored};
use crate::plan::{Cell, Plan, StepKey, StepKind, episode_components, score_components};
use crate::spec::Pipeline;

/// Shared cancellation flag (set by Ctrl-C), awaitable so a waiting scheduler wakes at once.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<(AtomicBool, tokio::sync::Notify)>);

impl Cancel {
    /// Asks the scheduler to stop: no new cells, and the cells in flight are dropped.
    pub fn cancel(&self) {
        self.0.0.store(true, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    /// Whether cancellation was requested.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.0.load(Ordering::SeqCst)
    }

    /// Resolves once cancellation is requested.
    pub async fn cancelled(&self) {
        loop {
            // Registered before the check, so a cancel in between is not missed.
            let notified = self.0.1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Cells that wait on model calls kept in flight at once when `--jobs` is not given: far
/// above the CPU count, since such a cell costs no CPU while it waits and each model's lane
/// paces its own calls (concurrency, AIMD, rate limits), so every endpoint is kept busy.
pub const DEFAULT_WAITING_JOBS: usize = 256;

/// What a run calls with each cell it computed ([`RunOptions::on_scored`]).
pub type OnScored = Arc<dyn Fn(&Cell) + Send + Sync>;

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// CPU-bound cells in flight at once (built-in agents, model-written code).
    pub jobs: usize,
    /// Cells that wait on model calls ([`EpisodeRunner::waits_on_models`]) in flight at once.
    pub waiting_jobs: usize,
    /// Only re-run cells whose last attempt failed.
    pub retry_errors_only: bool,
    /// Finish classes (`context_exceeded`, …): re-run the cached cells with answers of these
    /// outcomes (and, unless `retry_errors_only`, only those), asking those calls again.
    pub retry_outcomes: Vec<String>,
    /// How progress shows on stderr: a bar, plain log lines, or nothing.
    pub progress: Display,
    /// Called after each finished cell with (run, cached, failed, total) so far, e.g. to
    /// publish a shard's progress record for `status` on another machine.
    pub on_cell: Option<Arc<dyn Fn(RunCounts) + Send + Sync>>,
    /// Called with each cell this run computed, once its episode and score are cached (the
    /// report's transcript pages are written from then on).
    pub on_scored: Option<OnScored>,
    /// After a cancel, how long the calls already sent may still answer (and be stored)
    /// before the cells in flight are dropped (`run --grace`).
    pub grace: std::time::Duration,
}

/// Cell counts of a run so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    /// Cells computed by this run.
    pub run: usize,
    /// Cells found cached (or finished by another process).
    pub cached: usize,
    /// Cells that failed.
    pub failed: usize,
    /// Cells this run covers.
    pub total: usize,
}

/// State of a cell as seen from the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CellState {
    /// Episode and score are cached.
    Cached,
    /// Not cached, but an earlier run of the same cell used other keys.
    Stale,
    /// Never run.
    Missing,
    /// The last attempt failed.
    Failed,
}

/// Totals of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunSummary {
    /// Cells in the plan.
    pub cells_total: usize,
    /// Cells that were already cached.
    pub cells_cached: usize,
    /// Cells computed now.
    pub cells_run: usize,
    /// Cells that failed.
    pub cells_failed: usize,
    /// Cells skipped (cancelled, or not failed under `--retry-errors`).
    pub cells_skipped: usize,
    /// Whether Ctrl-C stopped the run early.
    pub interrupted: bool,
    /// Whether the budget held a call back, so cells were left unstarted.
    pub budget_reached: bool,
    /// Cells left for a later run because the budget held their calls back (never started,
    /// or stopped at a call the budget held back): they stay `missing`, not failed.
    pub cells_not_started: usize,
    /// Failed cells with their error.
    pub failures: Vec<(String, String)>,
}

/// Quick classification used by `run` and `status` (no content read).
#[must_use]
pub fn classify(store: &Store, cell: &Cell) -> CellState {
    if store.contains(cell.episode_key) && store.contains(cell.score_key) {
        CellState::Cached
    } else if store.failure(cell.episode_key).is_some() || store.failure(cell.score_key).is_some() {
        CellState::Failed
    } else if store.head(&cell.id).is_some() {
        CellState::Stale
    } else {
        CellState::Missing
    }
}

/// Runs every pending cell of `plan`; returns per-cell score outputs of all
/// cells that have one (cached or fresh), in plan order, and the summary.
pub async fn run_cells(
    pipeline: Arc<Pipeline>,
    plan: &Plan,
    store: Store,
    runner: Arc<dyn EpisodeRunner>,
    calls: Arc<CallContext>,
    options: &RunOptions,
    cancel: Cancel,
) -> Result<RunSummary, CacheError> {
    let mut summary = RunSummary { cells_total: plan.cells.len(), ..RunSummary::default() };
    let pending = pending_cells(plan, &store, options, &mut summary)?;
    let expected = if options.progress == Display::None { None } else { expected_calls(&pipeline, &pending, runner.as_ref(), &store) };
    let progress = Progress::with_display(plan.cells.len() as u64, summary.cells_cached as u64, options.progress).expecting_calls(expected);
    if options.progress != Display::Bar {
        progress.finish();
    }
    calls.attach_progress(progress.clone());
    let _watch = (options.progress != Display::None).then(|| {
        let (calls, shown) = (Arc::clone(&calls), progress.clone());
        progress.watch(move || {
            shown.set_calls(calls.calls_made());
            calls.progress_line()
        })
    });
    let mut set = JoinSet::new();
    let mut queue = Queue::new(pending, &pipeline, runner.as_ref(), options);
    let mut launched = 0usize;
    let (mut aborted, mut dropped) = (false, 0usize);
    // Set at the cancel: no call is sent from then on, and the calls in flight may answer
    // until this instant.
    let mut deadline: Option<tokio::time::Instant> = None;
    // The first cache error that ends the run: once it happens no call is sent, and the
    // cells in flight finish (their answers stored, or kept in the journal) before it is
    // returned, instead of being dropped with paid answers on their way.
    let mut fatal: Option<CacheError> = None;
    let total_pending = queue.len();
    loop {
        // Each class of cells runs up to its bound: the set holds every cell task not yet
        // joined, and the queue counts each class in flight, so these are the only gates.
        while !cancel.is_cancelled() && !calls.budget_reached() && fatal.is_none() {
            let Some((cell, refresh, waiting)) = queue.next() else { break };
            let (pipeline, store, runner, calls) = (Arc::clone(&pipeline), store.clone(), Arc::clone(&runner), Arc::clone(&calls));
            launched += 1;
            set.spawn(async move {
                let id = cell.id.clone();
                let result = run_cell(&pipeline, &cell, &store, runner.as_ref(), &calls, refresh).await;
                (id, cell, result, waiting)
            });
        }
        let joined = tokio::select! {
            joined = set.join_next() => joined,
            () = cancel.cancelled(), if deadline.is_none() => {
                calls.stop_sending("the run was interrupted (Ctrl-C)");
                deadline = Some(tokio::time::Instant::now() + options.grace);
                continue;
            }
            () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() && !aborted => {
                // The grace is over: dropping the cells in flight cancels their HTTP
                // requests now; what they had answered is already cached.
                set.abort_all();
                aborted = true;
                continue;
            }
        };
        let Some(joined) = joined else { break };
        if joined.as_ref().is_err_and(tokio::task::JoinError::is_cancelled) {
            dropped += 1;
            continue;
        }
        let (id, cell, result, waiting) =
            joined.map_err(|e| CacheError::Io { path: store.root().to_owned(), source: std::io::Error::other(format!("cell task failed: {e}")) })?;
        queue.finished(waiting);
        // A cell that stopped at a call held back by the interruption is left for the
        // rerun, like the cells dropped: its answered calls are cached.
        if deadline.is_some() && matches!(result, Err(CellError::Step(..))) {
            dropped += 1;
            continue;
        }
        // The call counters first, so the progress line this cell may print carries them.
        progress.set_calls(calls.calls_made());
        progress.set_extra(&calls.progress_line());
        let computed = result.as_ref().map(|ran| *ran).map_err(|_| ());
        if let Err(error) = settle(&store, &progress, &mut summary, id, &cell, result) {
            if fatal.is_none() {
                calls.stop_sending(&format!("the run stopped at a cache error: {error}"));
                fatal = Some(error);
            }
            continue;
        }
        if let (Some(on_scored), Ok(true)) = (&options.on_scored, &computed) {
            on_scored(&cell);
        }
        if let Some(on_cell) = &options.on_cell {
            on_cell(RunCounts { run: summary.cells_run, cached: summary.cells_cached, failed: summary.cells_failed, total: summary.cells_total });
        }
    }
    progress.finish();
    if let Some(error) = fatal {
        return Err(error);
    }
    summary.cells_skipped += total_pending - launched + dropped;
    summary.budget_reached = calls.budget_reached();
    if summary.budget_reached {
        summary.cells_not_started += total_pending - launched;
    }
    summary.interrupted = cancel.is_cancelled() && (launched < total_pending || dropped > 0);
    Ok(summary)
}

/// The pending cells in two classes, each bounded on its own: cells that wait on model calls
/// (up to `waiting_jobs`) and CPU-bound cells (up to `jobs`). Within a class, cells are taken
/// in turn across models (each model's in plan order), so with several endpoints each one's
/// cells start at once instead of the first model's filling every job.
struct Queue {
    classes: [Class; 2],
}

/// One class's cells not yet started (each with its `refresh`), how many run, and its bound.
type Class = (std::collections::VecDeque<(Cell, bool)>, usize, usize);

impl Queue {
    fn new(pending: Vec<(Cell, bool)>, pipeline: &Pipeline, runner: &dyn EpisodeRunner, options: &RunOptions) -> Self {
        let mut by_class: [Vec<Vec<(Cell, bool)>>; 2] = [Vec::new(), Vec::new()];
        let mut models: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (cell, refresh) in pending {
            let class = usize::from(runner.waits_on_models(&pipeline.models[cell.model], &pipeline.tasks[cell.task]));
            let at = models[class].iter().position(|m| *m == cell.model).unwrap_or_else(|| {
                models[class].push(cell.model);
                by_class[class].push(Vec::new());
                models[class].len() - 1
            });
            by_class[class][at].push((cell, refresh));
        }
        let [cpu, waiting] = by_class.map(interleave);
        Self { classes: [(cpu, 0, options.jobs.max(1)), (waiting, 0, options.waiting_jobs.max(1))] }
    }

    fn len(&self) -> usize {
        self.classes.iter().map(|(queue, ..)| queue.len()).sum()
    }

    /// The next cell whose class has room (waiting cells first), and its class.
    fn next(&mut self) -> Option<(Cell, bool, bool)> {
        for (class, (queue, running, limit)) in self.classes.iter_mut().enumerate().rev() {
            if *running < *limit
                && let Some((cell, refresh)) = queue.pop_front()
            {
                *running += 1;
                return Some((cell, refresh, class == 1));
            }
        }
        None
    }

    fn finished(&mut self, waiting: bool) {
        let running = &mut self.classes[usize::from(waiting)].1;
        *running = running.saturating_sub(1);
    }
}

/// One model's cells after another's in turn: the first of each, then the second of each, …
fn interleave(groups: Vec<Vec<(Cell, bool)>>) -> std::collections::VecDeque<(Cell, bool)> {
    let mut iters: Vec<_> = groups.into_iter().map(IntoIterator::into_iter).collect();
    let mut out = std::collections::VecDeque::new();
    loop {
        let before = out.len();
        out.extend(iters.iter_mut().filter_map(Iterator::next));
        if out.len() == before {
            return out;
        }
    }
}

/// Whether the cached episode of `cell` holds an answer of one of these finish classes
/// (its `call_outcomes` tally), so that `--retry-outcome` runs it again.
#[must_use]
pub fn has_outcome(store: &Store, cell: &Cell, classes: &[String]) -> bool {
    #[derive(serde::Deserialize)]
    struct Tally {
        #[serde(default)]
        call_outcomes: Option<Value>,
    }
    if classes.is_empty() {
        return false;
    }
    let Ok(Some(Tally { call_outcomes: Some(Value::Object(models)) })) = store.get_output::<Tally>(cell.episode_key) else { return false };
    models.values().any(|counts| classes.iter().any(|class| counts.get(class).and_then(Value::as_u64).is_some_and(|n| n > 0)))
}

/// The cells of `plan` to run, in plan order, each with whether its cached steps are computed
/// again (`--retry-outcome`); cells cached whole are counted in `summary` instead, and with
/// `retry_errors_only` or `retry_outcomes` so are the cells those do not name (skipped).
/// The calls the pending cells will make, as `run --dry-run` counts them: each planned call
/// not cached yet, and the helpers' (a judge's gradings: one per graded answer, an answer
/// already known graded once); `None` when a cell's calls depend on its episode (a game).
fn expected_calls(pipeline: &Pipeline, pending: &[(Cell, bool)], runner: &dyn EpisodeRunner, store: &Store) -> Option<u64> {
    let mut n = 0u64;
    let mut graded = std::collections::HashSet::new();
    for (cell, _) in pending {
        let (model, task) = (&pipeline.models[cell.model], &pipeline.tasks[cell.task]);
        let planned = runner.planned_calls(model, task, cell.seed)?;
        n += planned.iter().filter(|(r, s)| super::calls::call_key(model, r, s).is_some_and(|k| !store.contains(k))).count() as u64;
        let answered = |request: &crate::providers::ChatRequest, site: &super::CallSite| {
            super::estimate::cached_answer(store, model, request, site).map(|answer| answer.text)
        };
        for call in crate::envs::registry::planned_helper_calls(model, task, cell.seed, &answered) {
            let key = super::calls::call_key(&call.model, &call.request, &call.site);
            if call.known && (key.is_some_and(|k| store.contains(k)) || !key.is_some_and(|k| graded.insert(k))) {
                continue;
            }
            n += 1;
        }
    }
    Some(n)
}

fn pending_cells(plan: &Plan, store: &Store, options: &RunOptions, summary: &mut RunSummary) -> Result<Vec<(Cell, bool)>, CacheError> {
    let mut pending = Vec::new();
    let only_retries = options.retry_errors_only || !options.retry_outcomes.is_empty();
    for cell in &plan.cells {
        match classify(store, cell) {
            CellState::Cached if has_outcome(store, cell, &options.retry_outcomes) => pending.push((cell.clone(), true)),
            CellState::Cached if store.get(cell.score_key)?.is_some() && store.get(cell.episode_key)?.is_some() => {
                summary.cells_cached += 1;
            }
            CellState::Failed if options.retry_errors_only || options.retry_outcomes.is_empty() => pending.push((cell.clone(), false)),
            _ if only_retries => summary.cells_skipped += 1,
            _ => pending.push((cell.clone(), false)),
        }
    }
    Ok(pending)
}

/// Counts one finished cell in `summary` and the progress bar; a failed step is recorded
/// in the cache (never as an answer) and printed. A cache error ends the run.
fn settle(store: &Store, progress: &Progress, summary: &mut RunSummary, id: String, cell: &Cell, result: Result<bool, CellError>) -> Result<(), CacheError> {
    match result {
        Ok(true) => summary.cells_run += 1,
        // Another process finished it while we waited for its lock.
        Ok(false) => summary.cells_cached += 1,
        // Held back by the budget: left for a rerun with a larger one, not a failure.
        Err(CellError::Step(_, err)) if err.is_budget() => {
            summary.cells_skipped += 1;
            summary.cells_not_started += 1;
        }
        Err(CellError::Step(kind, err)) => {
            let key = if kind == StepKind::Episode { cell.episode_key } else { cell.score_key };
            let text = err.to_string();
            store.record_failure(&Failure { key, cell: id.clone(), kind, error: text.clone() })?;
            progress.println(&format!("error: cell `{id}`: {text}"));
            summary.cells_failed += 1;
            summary.failures.push((id, text));
        }
        Err(CellError::Cache(e)) => return Err(e),
    }
    progress.inc();
    progress.update(summary.cells_run as u64, summary.cells_cached as u64, summary.cells_failed as u64);
    Ok(())
}

enum CellError {
    Step(StepKind, StepError),
    Cache(CacheError),
}

impl From<CacheError> for CellError {
    fn from(e: CacheError) -> Self {
        Self::Cache(e)
    }
}

/// Runs one cell under its episode key's lock (the score key derives from
/// the episode key, so one lock covers both); `Ok(true)` when this process
/// computed a step of it, `Ok(false)` when another process already had.
async fn run_cell(pipeline: &Pipeline, cell: &Cell, store: &Store, runner: &dyn EpisodeRunner, calls: &CallContext, refresh: bool) -> Result<bool, CellError> {
    let _lock = match store.try_lock(cell.episode_key)? {
        Some(lock) => lock,
        None => {
            let (s, key) = (store.clone(), cell.episode_key);
            tokio::task::spawn_blocking(move || s.lock(key)).await.map_err(|e| CellError::Step(StepKind::Episode, StepError::worker(e)))??
        }
    };
    let model = &pipeline.models[cell.model];
    let task = &pipeline.tasks[cell.task];
    let episode_components = episode_components(pipeline, cell);
    let (episode, fresh_episode) = cached_or_compute(store, cell.episode_key, StepKind::Episode, &episode_components, refresh, || async {
        let started = Instant::now();
        let outcomes = crate::exec::runner::OutcomeTally::default();
        let ctx = EpisodeContext { episode_key: cell.episode_key, calls, outcomes: &outcomes };
        let mut output = runner.run_episode(ctx, model, task, cell.seed).await.map_err(|e| CellError::Step(StepKind::Episode, e))?;
        if let (Some(record), Some(tally)) = (output.as_object_mut(), outcomes.to_value()) {
            record.insert("call_outcomes".into(), tally);
        }
        Ok((output, started.elapsed()))
    })
    .await?;
    let score_components = score_components(pipeline, cell.task, cell.episode_key);
    let (_, fresh_score) = cached_or_compute(store, cell.score_key, StepKind::Score, &score_components, refresh, || async {
        let started = Instant::now();
        let output = runner.score(task, &episode.output).map_err(|e| CellError::Step(StepKind::Score, e))?;
        Ok((output, started.elapsed()))
    })
    .await?;
    store.set_head(&Head { cell: cell.id.clone(), episode_key: cell.episode_key, episode_components, score_key: cell.score_key, score_components })?;
    Ok(fresh_episode || fresh_score)
}

/// Returns the cached entry for `key` or computes and stores it; the flag
/// says whether it was computed here. The caller holds the cell's lock. With `refresh`
/// the step is computed again and stored over the cached entry (`run --retry-outcome`).
async fn cached_or_compute<F, Fut>(
    store: &Store,
    key: StepKey,
    kind: StepKind,
    components: &Value,
    refresh: bool,
    compute: F,
) -> Result<(Entry, bool), CellError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(Value, std::time::Duration), CellError>>,
{
    if !refresh && let Some(entry) = store.get(key)? {
        return Ok((entry, false));
    }
    let (output, elapsed) = compute().await?;
    let entry = Entry {
        key,
        kind,
        components: components.clone(),
        output,
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        writer: concat!("evalgrid ", env!("CARGO_PKG_VERSION")).to_owned(),
    };
    if refresh {
        store.replace(&entry)?;
        return Ok((entry, true));
    }
    match store.put(&entry)? {
        Stored::Written => Ok((entry, true)),
        // Another machine finished the same step first: its entry is the answer.
        Stored::Adopted(existing) => Ok((existing, false)),
    }
}
