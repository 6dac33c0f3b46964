//! `evalgrid run` and `evalgrid report`.

use super::exit::Exit;
use std::sync::Arc;
use std::time::Duration;

use evalgrid::cache::Store;
use evalgrid::envs::registry::Registry;
use evalgrid::exec::progress::Display;
use evalgrid::exec::scheduler::DEFAULT_WAITING_JOBS;
use evalgrid::exec::{CallContext, Cancel, CellState, RunCounts, RunOptions, RunSummary, classify, has_outcome, run_cells};
use evalgrid::plan::{Plan, plan};
use evalgrid::providers::{AimdConfig, ClientConfig, ConcurrencyMode, PollConfig, ProviderClient, RetryPolicy, install_crypto_provider};
use evalgrid::report::early::EarlyPages;
use evalgrid::report::{ReportOutcome, build, build_after};
use evalgrid::spec::{Pipeline, SandboxMode, TransportConfig};
use serde_json::json;

use super::args::{ProgressArg, ReportArgs, RetryOutcome, RunArgs};
use super::{Env, Failure, load_pipeline, load_served, output};
use evalgrid::serve::Servers;
use std::collections::{BTreeMap, BTreeSet};

/// Resolves `--progress auto`: a bar on a terminal (none under `--json`, as before), plain
/// lines in a log file or pipe, nothing when `EVALGRID_NO_PROGRESS` is set.
fn progress_display(args: &RunArgs) -> Display {
    match args.progress {
        ProgressArg::Bar => Display::Bar,
        ProgressArg::Plain => Display::Plain,
        ProgressArg::None => Display::None,
        ProgressArg::Auto if std::env::var_os("EVALGRID_NO_PROGRESS").is_some() => Display::None,
        ProgressArg::Auto if std::io::IsTerminal::is_terminal(&std::io::stderr()) => {
            if args.json {
                Display::None
            } else {
                Display::Bar
            }
        }
        ProgressArg::Auto => Display::Plain,
    }
}

pub(crate) fn run(env: &Env, args: &RunArgs) -> Result<Exit, Failure> {
    // A dry run only reads: served models are keyed with the engine version recorded.
    let (pipeline, engines) = load_served(env, &args.plan.pipeline, !args.dry_run)?;
    let mut plan = super::filtered_plan(&pipeline, args.plan.filter.as_deref())?;
    narrow_to_part(&pipeline, &mut plan, args);
    let store = env.store()?;
    if args.dry_run {
        // A budget the run would refuse (a model or judge without a price) is refused here too.
        if args.budget_usd.is_some() && !args.offline {
            super::budget::budget(&pipeline, &plan, &store, args.budget_usd)?;
        }
        let outcomes: Vec<String> = args.retry_outcome.iter().map(|o| o.class().to_owned()).collect();
        return super::estimate::dry_run(env, &pipeline, &store, &plan, args, &outcomes);
    }
    let mut pipeline = prepare(pipeline, &plan, args.unsafe_no_sandbox)?;
    let budget = if args.offline { None } else { super::budget::budget(&pipeline, &plan, &store, args.budget_usd)? };
    if !args.offline {
        // Room is reserved only for a run that may call a model (a rerun of a cached grid
        // writes nothing).
        let outcomes: Vec<String> = args.retry_outcome.iter().map(|o| o.class().to_owned()).collect();
        let calls = plan.cells.iter().any(|c| must_run(&store, c, args.retry_errors, &outcomes));
        super::journal::prepare(&store, &pipeline, args.shard, calls);
    }
    if !args.offline {
        containers_preflight(&pipeline, &plan, &store, args)?;
    }
    // Servers only for models with a cell to run, started before any cell: one that cannot
    // start ends the run here, and no cell is marked failed for it.
    let mut servers = if args.offline { Servers::default() } else { start_servers(env, &mut pipeline, &engines, &store, &plan, args)? };
    // `--jobs N` bounds every cell; by default CPU-bound cells get the CPUs and cells that
    // wait on model calls get many more, since their lanes pace the calls.
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from)).max(1);
    let waiting_jobs = args.jobs.map_or(DEFAULT_WAITING_JOBS, |jobs| jobs.max(1));
    let pipeline = Arc::new(pipeline);
    // Transcript pages of finished cells are written while the others run, on idle CPU.
    let early = if plan.filtered { None } else { EarlyPages::start(Arc::clone(&pipeline), &plan, store.clone(), &args.reports_dir).map(Arc::new) };
    let on_scored = early.as_ref().map(|early| {
        let early = Arc::clone(early);
        Arc::new(move |cell: &evalgrid::plan::Cell| early.cell_done(cell)) as evalgrid::exec::scheduler::OnScored
    });
    let on_cell = args.shard.map(|shard| shard_progress(&store, &pipeline, shard, args.class));
    if let Some(publish) = &on_cell {
        publish(RunCounts { total: plan.cells.len(), ..RunCounts::default() });
    }
    let retry_outcomes: Vec<String> = args.retry_outcome.iter().map(|o| o.class().to_owned()).collect();
    let grace = Duration::try_from_secs_f64(args.grace).map_err(|_| Failure::invalid(anyhow::anyhow!("--grace must be a number of seconds, at least 0")))?;
    let options = RunOptions {
        jobs,
        waiting_jobs,
        retry_errors_only: args.retry_errors,
        retry_outcomes,
        progress: progress_display(args),
        on_cell: on_cell.clone(),
        on_scored,
        grace,
    };
    let executed = execute(env, &store, &pipeline, &plan, &options, args, &servers.lanes, budget);
    let journaled = store.journaled();
    store.release_journal();
    if journaled > 0 {
        output::note(&format!(
            "note: {journaled} paid answer(s) the full cache could not hold are kept in its journal (v1/journal/); the next run moves them into the cache, unpaid"
        ));
    }
    // The options hold the other handle to the early pages.
    drop(options);
    let early = early.and_then(Arc::into_inner).map(EarlyPages::finish).unwrap_or_default();
    tracing::debug!("{} transcript page(s) written while the run went on", early.pages.len());
    let (summary, calls) = executed?;
    servers.stop();
    let report = if summary.interrupted {
        Ok(None)
    } else if summary.budget_reached {
        output::note("note: no report while cells are left unstarted; `evalgrid report` builds one from what is cached");
        Ok(None)
    } else if plan.filtered {
        output::note("note: no report for part of a grid (--filter, --shard, --class); `evalgrid report` builds it once every part is done");
        Ok(None)
    } else {
        build_after(&pipeline, &plan, &store, &args.reports_dir, &early).map(Some)
    };
    if report.is_ok()
        && let Some(publish) = &on_cell
    {
        publish(RunCounts { run: summary.cells_run, cached: summary.cells_cached, failed: summary.cells_failed, total: usize::MAX });
    }
    // Everything this run cached survives a machine crash before it says it is done.
    let flushed = store.flush();
    // The cells ran and were paid for: the summary is printed even when the report or the
    // flush failed (`--json` then carries the error too), and the error ends the run as before.
    let (report, failure) = match (report, flushed) {
        (Err(e), _) => (None, Some(anyhow::Error::from(e))),
        (Ok(report), Err(e)) => (report, Some(anyhow::Error::from(e))),
        (Ok(report), Ok(())) => (report, None),
    };
    let error = failure.as_ref().map(|e| format!("{e:#}"));
    print_summary(&summary, report.as_ref(), &calls, args.json, error.as_deref());
    let exceeded = calls.usage.context_exceeded.load(std::sync::atomic::Ordering::Relaxed);
    if exceeded > 0 && !args.retry_outcome.contains(&RetryOutcome::ContextExceeded) {
        output::note(&format!(
            "note: {exceeded} answer(s) are `context_exceeded`: the prompt did not fit the model's context window, which is scored as the model's outcome (see the report's model outcomes). After serving the model with a larger context, `evalgrid run {} --retry-outcome context_exceeded` asks exactly those calls again",
            evalgrid::text::one_line(&args.plan.pipeline.display().to_string())
        ));
    }
    if let Some(e) = failure {
        return Err(Failure::from(e));
    }
    Ok(if summary.interrupted {
        Exit::Interrupted
    } else if summary.budget_reached {
        Exit::BudgetReached
    } else {
        Exit::failed_if(summary.cells_failed > 0)
    })
}

/// A shard (`--shard`, as the Slurm and Kubernetes jobs run) whose cells need a container
/// runtime checks, before any trial, that this node has one that can run a container, and
/// fails fast (exit 1) where it has none: a node without podman or docker would otherwise
/// error every trial of its part. A run on one machine errors those trials instead, each
/// with the runtime's message.
fn containers_preflight(pipeline: &Pipeline, plan: &Plan, store: &Store, args: &RunArgs) -> Result<(), Failure> {
    let Some(shard) = args.shard else { return Ok(()) };
    let outcomes: Vec<String> = args.retry_outcome.iter().map(|o| o.class().to_owned()).collect();
    let mut needed: std::collections::BTreeMap<evalgrid::sandbox::container::RuntimeChoice, Vec<String>> = std::collections::BTreeMap::new();
    for cell in plan.cells.iter().filter(|c| must_run(store, c, args.retry_errors, &outcomes)) {
        let task = &pipeline.tasks[cell.task];
        if let Some(choice) = evalgrid::envs::registry::get(&task.benchmark).and_then(|b| b.container_runtime(task)) {
            let names = needed.entry(choice).or_default();
            if !names.contains(&task.qualified()) {
                names.push(task.qualified());
            }
        }
    }
    for (choice, tasks) in needed {
        let check = evalgrid::exec::check::check_runtime(choice, tasks.clone());
        if !check.ok() {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            return Err(anyhow::anyhow!(
                "shard {shard} on node `{}`: no container runtime here can run a container ({}), and its cells of {} need one; no trial was started. Run harbor tasks on nodes with podman or docker (docs/agents.md, \"Beyond one machine\")",
                host.trim(),
                check.problems.join("; "),
                tasks.join(", ")
            )
            .into());
        }
    }
    Ok(())
}

/// Keeps only this run's part of the grid (`--class`, `--shard`); the report is then built
/// once all parts are done (`evalgrid report`).
fn narrow_to_part(pipeline: &Pipeline, plan: &mut Plan, args: &RunArgs) {
    if args.shard.is_none() && args.class.is_none() {
        return;
    }
    if let Some(class) = args.class {
        plan.cells.retain(|c| Registry::resource_class(&pipeline.tasks[c.task].benchmark, &pipeline.models[c.model]) == class);
    }
    if let Some(shard) = args.shard {
        plan.cells = shard.part(&plan.cells);
    }
    plan.filtered = true;
}

/// The pipeline as this run executes it: `--unsafe-no-sandbox` applied, the sandbox
/// allowed or checked for the cells that run model code, and the parameters benchmarks add
/// to models noted.
fn prepare(mut pipeline: Pipeline, plan: &Plan, unsafe_no_sandbox: bool) -> Result<Pipeline, Failure> {
    if unsafe_no_sandbox {
        // Same meaning as `sandbox: none`; the report built by this run says so.
        pipeline.sandbox = SandboxMode::None;
    }
    evalgrid::sandbox::allow_unsandboxed(pipeline.sandbox == SandboxMode::None);
    note_injected_params(&pipeline);
    let needs_sandbox = plan.cells.iter().any(|c| Registry::runs_model_code(&pipeline.tasks[c.task].benchmark, &pipeline.models[c.model]));
    if needs_sandbox {
        check_sandbox()?;
    }
    Ok(pipeline)
}

/// Notes, once per benchmark and model, the parameters a benchmark sends a model that the
/// pipeline did not set.
fn note_injected_params(pipeline: &Pipeline) {
    for m in &pipeline.models {
        let mut seen = Vec::new();
        for t in &pipeline.tasks {
            if seen.contains(&t.benchmark) {
                continue;
            }
            seen.push(t.benchmark.clone());
            let added = Registry::injected_params(&t.benchmark, m);
            if !added.is_empty() {
                output::note(&format!("note: {} sends model `{}` {} it did not set (see the report's provenance)", t.benchmark, m.id, added.join(", ")));
            }
        }
    }
}

/// Runs the plan's cells on a fresh runtime with one HTTP client, stopping cleanly on the
/// first Ctrl-C; returns the summary and the call context (for its usage counters).
#[expect(clippy::too_many_arguments, reason = "the run's parts, each built before the runtime starts")]
fn execute(
    env: &Env,
    store: &Store,
    pipeline: &Arc<Pipeline>,
    plan: &Plan,
    options: &RunOptions,
    args: &RunArgs,
    served_lanes: &BTreeMap<String, usize>,
    budget: Option<evalgrid::exec::calls::budget::Budget>,
) -> Result<(RunSummary, Arc<CallContext>), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    install_crypto_provider();
    let config = ClientConfig { served_lanes: served_lanes.clone(), ..client_config(&pipeline.transport, args.shard) };
    let client = ProviderClient::new(config).map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let mut calls = CallContext::new(store.clone(), Arc::new(client), args.offline)
        .with_retry_outcomes(options.retry_outcomes.clone())
        .with_helper_prices(pipeline.report.prices.clone());
    if let Some(budget) = budget {
        calls = calls.with_budget(budget);
    }
    let calls = Arc::new(calls);
    let cancel = Cancel::default();
    let summary = runtime.block_on(async {
        stop_on_ctrl_c(cancel.clone(), options.grace);
        run_cells(Arc::clone(pipeline), plan, store.clone(), Arc::new(env.registry.clone()), Arc::clone(&calls), options, cancel.clone()).await
    })?;
    // Blocking tasks (a submission being killed, its run folder being removed) finish
    // before the process exits, which would otherwise end them half-way.
    runtime.shutdown_timeout(Duration::from_secs(10));
    Ok((summary, calls))
}

/// Whether `cell` runs in this run (as `run --dry-run` counts it): not cached, or failed and
/// retried, or holding an answer `--retry-outcome` asks again.
fn must_run(store: &Store, cell: &evalgrid::plan::Cell, retry_errors: bool, outcomes: &[String]) -> bool {
    let only_retries = retry_errors || !outcomes.is_empty();
    match classify(store, cell) {
        CellState::Cached => has_outcome(store, cell, outcomes),
        CellState::Failed => retry_errors || outcomes.is_empty(),
        _ => !only_retries,
    }
}

/// Starts the servers of the served models that have a cell to run (none when everything
/// is cached) and points those models at them; the caller stops them.
fn start_servers(
    env: &Env,
    pipeline: &mut Pipeline,
    engines: &BTreeMap<evalgrid::spec::Engine, evalgrid::serve::Found>,
    store: &Store,
    plan: &Plan,
    args: &RunArgs,
) -> Result<Servers, Failure> {
    if pipeline.models.iter().all(|m| m.serve.is_none()) {
        return Ok(Servers::default());
    }
    let outcomes: Vec<String> = args.retry_outcome.iter().map(|o| o.class().to_owned()).collect();
    let needed: BTreeSet<usize> = plan
        .cells
        .iter()
        .filter(|c| pipeline.models[c.model].serve.is_some())
        .filter(|c| must_run(store, c, args.retry_errors, &outcomes))
        // A cell rerun for its judge alone (its model's own answers all cached) needs no
        // server; a benchmark that cannot list its calls up front is assumed to call, and so
        // is every cell under `--retry-outcome` (it asks cached calls again).
        .filter(|c| {
            use evalgrid::exec::EpisodeRunner as _;
            let model = &pipeline.models[c.model];
            !outcomes.is_empty()
                || env
                    .registry
                    .planned_calls(model, &pipeline.tasks[c.task], c.seed)
                    .is_none_or(|calls| calls.iter().any(|(r, s)| evalgrid::exec::call_key(model, r, s).is_none_or(|k| !store.contains(k))))
        })
        .map(|c| c.model)
        .collect();
    let mut note = |s: &evalgrid::serve::Starting| {
        output::note(&format!("starting {} for model {} (log: {})", s.engine, s.models.join(", "), s.log.display()));
    };
    let started = std::time::Instant::now();
    let servers = evalgrid::serve::start(pipeline, &needed, engines, &serve_log_dir(env), &mut note).map_err(|e| super::serve_failure(pipeline, e))?;
    if !servers.is_empty() {
        output::note(&format!("{} server(s) ready after {:.1} s", servers.len(), started.elapsed().as_secs_f64()));
    }
    Ok(servers)
}

/// Where started servers write their logs: beside the cache, one file per server.
pub(crate) fn serve_log_dir(env: &Env) -> std::path::PathBuf {
    env.cache_dir.join("logs").join("serve")
}

/// The first Ctrl-C cancels the run: no call is sent from then on, the calls in flight may
/// answer (and are cached) for `grace`, then the cells left are dropped. The second exits
/// at once.
fn stop_on_ctrl_c(cancel: Cancel, grace: Duration) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            // Model-written code costs no money: it stops now, and its run folder goes.
            evalgrid::sandbox::process::abandon_runs();
            // Task containers (Harbor trials) go too; what a kill -9 leaves, the next run reaps.
            tokio::task::spawn_blocking(evalgrid::sandbox::container::remove_all);
            output::note(&format!(
                "interrupted: no new calls are sent; waiting up to {:.0} s (--grace) for the answers of calls in flight, which are cached; run the same command again to resume (Ctrl-C again to quit at once)",
                grace.as_secs_f64()
            ));
            if tokio::signal::ctrl_c().await.is_ok() {
                // The second Ctrl-C: no clean-up at all. Everything cached is already
                // in place (entries are renamed into place whole; only a machine crash
                // before the group commit's next batch could lose the newest, as misses).
                evalgrid::sandbox::container::remove_all();
                std::process::exit(i32::from(Exit::Interrupted.code()));
            }
        }
    });
}

/// The run id shards of the same pipeline share: its name and the hash of its file.
pub(crate) fn run_id(pipeline: &Pipeline) -> String {
    // The file's hash, so two different pipelines that share a name do not mix records.
    format!("{}-{}", pipeline.name, pipeline.source_hash.trim_start_matches("blake3:").get(..12).unwrap_or("0"))
}

/// A callback that publishes this shard's progress record (at most once a second, and
/// always for the first and last call; `total == usize::MAX` marks the last).
fn shard_progress(
    store: &Store,
    pipeline: &Pipeline,
    shard: evalgrid::plan::Shard,
    class: Option<evalgrid::plan::ResourceClass>,
) -> Arc<dyn Fn(RunCounts) + Send + Sync> {
    let (store, run) = (store.clone(), run_id(pipeline));
    let part = format!("{}-of-{}{}", shard.index, shard.count, class.map(|c| format!("-{c}")).unwrap_or_default());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_owned();
    let slurm = std::env::var("SLURM_ARRAY_JOB_ID")
        .ok()
        .map(|j| format!("{j}_{}", std::env::var("SLURM_ARRAY_TASK_ID").unwrap_or_default()))
        .or_else(|| std::env::var("SLURM_JOB_ID").ok());
    let started = now_s();
    let state = std::sync::Mutex::new((0u64, 0usize));
    Arc::new(move |counts: RunCounts| {
        let last = counts.total == usize::MAX;
        let Ok(mut s) = state.lock() else { return };
        if !last && counts.total > 0 && now_s() == s.0 && counts.run + counts.cached + counts.failed > 0 {
            return;
        }
        if !last {
            s.1 = counts.total;
        }
        s.0 = now_s();
        let record = json!({
            "shard": shard.to_string(), "class": class.map(|c| c.to_string()),
            "done": counts.run + counts.cached, "failed": counts.failed, "total": s.1,
            "host": host, "pid": std::process::id(), "slurm_job": slurm,
            "started_at": started, "updated_at": s.0, "finished": last,
        });
        if let Err(e) = store.put_progress(&run, &part, &record) {
            output::note(&format!("warning: cannot publish shard progress: {e}"));
        }
    })
}

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Model-written code runs on this machine: refuse (exit 2) without bubblewrap unless
/// the user opted out, and say plainly how it is contained when they did.
fn check_sandbox() -> Result<(), Failure> {
    let sandbox = evalgrid::sandbox::shared(std::path::Path::new("python3")).map_err(Failure::invalid)?;
    let report = sandbox.report();
    if report.isolation == evalgrid::sandbox::Isolation::RlimitsOnly {
        output::note("WARNING: --unsafe-no-sandbox / `sandbox: none`: model-written code runs with resource limits only:");
        output::note("  no network isolation, no filesystem isolation. Install `bubblewrap` for real sandboxing.");
        for n in &report.notes {
            output::note(&format!("  {n}"));
        }
    }
    Ok(())
}

/// Transport settings from the pipeline (none of them are keyed).
/// A `--shard i/n` run gets `transport.per_shard_concurrency`, or the cap divided by n, so
/// n shards together send no more than one run would.
pub(crate) fn client_config(t: &TransportConfig, shard: Option<evalgrid::plan::Shard>) -> ClientConfig {
    let n = shard.map_or(1, |s| usize::try_from(s.count).unwrap_or(1).max(1));
    let per_shard = |cap: usize| t.per_shard_concurrency.unwrap_or_else(|| cap.div_ceil(n)).max(1);
    let concurrency = match t.max_concurrency {
        Some(max_concurrency) => ConcurrencyMode::Static { max_concurrency: per_shard(max_concurrency) },
        None => {
            let cap = per_shard(t.concurrency_cap);
            let defaults = AimdConfig::default();
            ConcurrencyMode::Adaptive(AimdConfig { cap, initial: defaults.initial.min(cap), floor: defaults.floor.min(cap), ..defaults })
        }
    };
    ClientConfig {
        connect_timeout: Duration::from_secs(t.connect_timeout_s),
        request_timeout: Duration::from_secs(t.request_timeout_s),
        concurrency,
        retry: RetryPolicy {
            max_attempts: t.max_attempts,
            base_delay: Duration::from_millis(t.retry_base_ms),
            max_delay: Duration::from_millis(t.retry_max_ms),
            total_timeout: Duration::from_secs(t.call_timeout_s),
            retry_rate_limits: true,
        },
        max_response_bytes: t.max_response_bytes,
        polling: PollConfig { first: Duration::from_millis(t.background_poll_ms), max: Duration::from_millis(t.background_poll_max_ms) },
        stream_idle_timeout: Duration::from_secs(t.stream_idle_timeout_s),
        stream_total_timeout: Duration::from_secs(t.stream_total_timeout_s),
        stream_first_byte_timeout: Duration::from_secs(t.first_byte_timeout_s),
        server_slots: t.server_slots,
        ..ClientConfig::default()
    }
}

/// The run's outcome on stdout; `error` is what ended it after the cells ran (the report
/// or the final flush failed), printed by the caller on stderr and here in the JSON.
fn print_summary(summary: &RunSummary, report: Option<&ReportOutcome>, calls: &CallContext, json: bool, error: Option<&str>) {
    let usage = &calls.usage;
    let budget = calls
        .budget()
        .map(|b| json!({"usd": b.limit_usd(), "spent_usd": b.spent_usd(), "reached": summary.budget_reached, "cells_not_started": summary.cells_not_started}));
    if let Some(b) = calls.budget().filter(|_| summary.budget_reached) {
        output::note(&super::budget::reached_line(summary, b));
    }
    let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let other_model = get(&usage.other_model);
    let other_cached = get(&usage.other_model_cached);
    if other_cached > 0 {
        output::note(&format!(
            "note: {other_cached} call(s) were answered by a different model than requested; `accept_other_model` is set, so those answers were cached and scored"
        ));
    }
    if other_model > other_cached {
        output::note(&format!(
            "warning: {} call(s) were answered by a different model than requested; those answers were neither cached nor scored (their cells failed): set `accept_other_model: true` on the model to keep them",
            other_model - other_cached
        ));
    }
    if json {
        output::json(&json!({
            "cells_total": summary.cells_total,
            "cells_cached": summary.cells_cached,
            "cells_run": summary.cells_run,
            "cells_failed": summary.cells_failed,
            "cells_skipped": summary.cells_skipped,
            "interrupted": summary.interrupted,
            "budget": budget,
            "report_dir": report.map(|r| r.dir.display().to_string()),
            "error": error,
            "failures": summary.failures.iter().map(|(c, e)| json!({"cell": c, "error": e})).collect::<Vec<_>>(),
            "calls": {
                "live": get(&usage.live_calls).saturating_sub(get(&usage.batched_calls)), "cached": get(&usage.cached_calls), "failed": get(&usage.failed_calls),
                "shared": get(&usage.shared_calls), "rate_limited": get(&usage.rate_limited), "stream_stalls": get(&usage.stream_stalls),
                "http_attempts": get(&usage.attempts), "input_tokens": get(&usage.input_tokens),
                "output_tokens": get(&usage.output_tokens), "cost_usd": get(&usage.cost_micro_usd) as f64 / 1e6,
                "answered_by_other_model": other_model,
                "answered_by_other_model_cached": other_cached,
                "context_exceeded": get(&usage.context_exceeded), "reasked": get(&usage.reasked),
                "batched": get(&usage.batched_calls), "batch_saved_usd": get(&usage.batch_saved_micro_usd) as f64 / 1e6,
                "batch_duplicate_lines": calls.batch_duplicate_lines(),
            },
        }));
        return;
    }
    let duplicates = calls.batch_duplicate_lines();
    let calls = usage.summary();
    if !calls.is_empty() {
        output::line(&calls);
    }
    if duplicates > 0 {
        output::line(&format!(
            "batch output: {duplicates} line(s) repeated a custom_id an earlier line of their batch answered; the first line of each answered, the repeats were ignored"
        ));
    }
    output::line(&format!(
        "{} cells: {} run, {} cached, {} failed{}",
        summary.cells_total,
        summary.cells_run,
        summary.cells_cached,
        summary.cells_failed,
        if summary.cells_skipped > 0 { format!(", {} skipped", summary.cells_skipped) } else { String::new() }
    ));
    for (cell, error) in &summary.failures {
        // One line per cell: a newline in a provider's error must not forge another.
        output::line(&format!("  failed {cell}: {}", evalgrid::text::one_line(error)));
    }
    if let Some(r) = report {
        output::line(&format!("report: {}/ ({})", r.dir.display(), file_list(&r.files)));
    }
}

pub(crate) fn report(env: &Env, args: &ReportArgs) -> Result<Exit, Failure> {
    let pipeline = load_pipeline(env, &args.pipeline)?;
    let plan = plan(&pipeline, None);
    let store = env.store()?;
    let scored = plan.cells.iter().filter(|c| store.contains(c.score_key)).count();
    let outcome = build(&pipeline, &plan, &store, &args.reports_dir)?;
    store.flush()?;
    match args.format.as_deref() {
        None => {}
        Some("latex") => output::line(fs_err::read_to_string(outcome.dir.join("summary.tex"))?.trim_end()),
        Some("markdown" | "md") => output::line(fs_err::read_to_string(outcome.dir.join("summary.md"))?.trim_end()),
        Some(other) => return Err(Failure::invalid(anyhow::anyhow!("unknown --format `{other}` (expected `markdown` or `latex`)"))),
    }
    if args.json {
        output::json(&json!({
            "cells_total": plan.cells.len(), "cells_cached": scored, "cells_run": 0,
            "cells_failed": 0, "report_dir": outcome.dir.display().to_string(),
            "metrics_cached": outcome.metrics_cached, "report_cached": outcome.report_cached,
        }));
    } else {
        if scored < plan.cells.len() {
            output::note(&format!("note: {} of {} cells have results; run `evalgrid run` for the rest", scored, plan.cells.len()));
        }
        output::line(&format!("report: {}/ ({})", outcome.dir.display(), file_list(&outcome.files)));
    }
    Ok(Exit::Ok)
}

/// Top-level report files by name, folders by count: `index.html, …, figures/ (12)`.
fn file_list(files: &[String]) -> String {
    let mut top = Vec::new();
    let mut folders: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for f in files {
        match f.split_once('/') {
            Some((dir, _)) => *folders.entry(dir).or_default() += 1,
            None => top.push(f.clone()),
        }
    }
    top.extend(folders.into_iter().map(|(d, n)| format!("{d}/ ({n})")));
    top.join(", ")
}
