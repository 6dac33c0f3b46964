//! `evalgrid status`: cached / stale / missing / failed per cell, and why.

use super::exit::Exit;
use evalgrid::cache::{Store, diff};
use evalgrid::exec::{CellState, classify};
use evalgrid::metrics::power::PowerNeed;
use evalgrid::plan::{Cell, episode_components};
use evalgrid::spec::Pipeline;
use evalgrid::text::one_line;
use rayon::prelude::*;
use serde_json::json;

use super::args::StatusArgs;
use super::jobs::{SLURM_SUBMISSION, SlurmJob, slurm_jobs};
use super::{Env, Failure, load_plan, output};

pub(crate) fn status(env: &Env, args: &StatusArgs) -> Result<Exit, Failure> {
    let (pipeline, plan) = load_plan(env, &args.plan.pipeline, args.plan.filter.as_deref())?;
    let store = env.store()?;
    if let Some(id) = &args.explain {
        let cell = plan.cells.iter().find(|c| &c.id == id).ok_or_else(|| {
            Failure::invalid(anyhow::anyhow!(
                "no cell `{id}` in this pipeline (ids look like `{}`)",
                plan.cells.first().map_or("model/benchmark/task/seed", |c| c.id.as_str())
            ))
        })?;
        explain(&pipeline, &store, cell, args.json);
        return Ok(Exit::Ok);
    }
    let mut counts = [0usize; 4];
    let mut rows = Vec::new();
    // Both keys of every cell looked up with one directory read per cache bucket; only a
    // cell that is not cached is classified (and its files read) one by one.
    let cells = &plan.cells;
    let present = store.contains_each(cells.len() * 2, |i| if i % 2 == 0 { cells[i / 2].episode_key } else { cells[i / 2].score_key });
    let states: Vec<CellState> =
        cells.par_iter().zip(present.par_chunks(2)).map(|(cell, both)| if both == [true, true] { CellState::Cached } else { classify(&store, cell) }).collect();
    drop(present);
    for (cell, &state) in plan.cells.iter().zip(&states) {
        counts[state as usize] += 1;
        if state != CellState::Cached && !args.json {
            rows.push((cell, state, reason(&pipeline, &store, cell, state)));
        }
    }
    let shards = shard_lines(&store, &pipeline)?;
    let power = match args.power {
        None => None,
        Some(d) if d.is_finite() && d > 0.0 => Some(power_needs(&pipeline, &plan, &store, d)?),
        Some(d) => return Err(Failure::invalid(anyhow::anyhow!("--power {d}: the difference to detect must be a positive number, in the metric's units"))),
    };
    let jobs = slurm_lines(&store, &pipeline)?;
    let batches = super::batch_cmd::batch_lines(&store);
    let damaged = super::batch_cmd::damaged_lines(&store);
    if args.json {
        let cells: Vec<_> = plan
            .cells
            .iter()
            .zip(&states)
            .map(|(c, &state)| match state {
                CellState::Cached => json!({"cell": c.id, "state": state, "reason": null}),
                _ => json!({"cell": c.id, "state": state, "reason": reason(&pipeline, &store, c, state)}),
            })
            .collect();
        output::json(&json!({
            "cells_total": plan.cells.len(), "cells_cached": counts[0], "cells_stale": counts[1],
            "cells_missing": counts[2], "cells_failed": counts[3], "cells": cells,
            "shards": shards.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            "power": power,
            "slurm_jobs": jobs.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            "batches": batches.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            "batch_records_damaged": damaged.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        }));
    } else {
        output::line(&format!("{} cells: {} cached, {} stale, {} missing, {} failed", plan.cells.len(), counts[0], counts[1], counts[2], counts[3]));
        for (line, _) in shards.iter().chain(&jobs).chain(&batches).chain(&damaged) {
            output::line(line);
        }
        for (cell, state, reason) in &rows {
            let state = match state {
                CellState::Stale => "stale",
                CellState::Missing => "missing",
                CellState::Failed => "failed",
                CellState::Cached => "cached",
            };
            // One line per cell: a newline in a provider's error must not forge another.
            output::line(&format!("{state:8} {}  {}", cell.id, one_line(reason)));
        }
        if let Some(power) = &power {
            power_lines(power, args.power.unwrap_or_default());
        }
    }
    Ok(if args.check { Exit::failed_if(counts[0] < plan.cells.len()) } else { Exit::Ok })
}

/// What each suite's closest pair needs to detect a difference of `d` (`--power`), from the
/// scored cells in the cache; the seeds are those the plan has for the suite.
fn power_needs(pipeline: &Pipeline, plan: &evalgrid::plan::Plan, store: &Store, d: f64) -> Result<Vec<PowerNeed>, Failure> {
    let comparisons = evalgrid::report::comparisons(pipeline, plan, store)?;
    let seeds_of = |suite: &str| {
        let mut seeds: Vec<u64> = plan.cells.iter().filter(|c| pipeline.tasks[c.task].suite == suite).map(|c| c.seed).collect();
        seeds.sort_unstable();
        seeds.dedup();
        seeds.len() as u64
    };
    Ok(evalgrid::metrics::power::power_needs(&comparisons, d, &seeds_of))
}

/// `--power` in words: one paragraph per suite.
fn power_lines(power: &[PowerNeed], d: f64) {
    if power.is_empty() {
        output::line(&format!("power: no pair of models to compare yet (needs two models with scored cells on at least two tasks) for a difference of {d}"));
    }
    for p in power {
        output::line(&format!(
            "power: {} `{}`, closest pair {} vs {}: difference {:.4}, clustered SE {:.4} over {} paired units ({} tasks, {} seed{}), detectable now at 80 % power: {:.4}",
            p.suite,
            p.metric,
            p.model_a,
            p.model_b,
            p.diff,
            p.se,
            p.n_pairs,
            p.clusters,
            p.seeds,
            if p.seeds == 1 { "" } else { "s" },
            p.mde
        ));
        if p.more_units == 0 {
            output::line(&format!("  a difference of {d} is already detectable at 80 % power (α 0.05, two-sided)"));
        } else {
            output::line(&format!(
                "  to detect {d} at 80 % power (α 0.05, two-sided): {} paired units, {} more than now: {} more seed{} ({} in all), or {:.1}× the items per task",
                p.units_needed,
                p.more_units,
                p.more_seeds,
                if p.more_seeds == 1 { "" } else { "s" },
                p.seeds_needed,
                p.units_needed as f64 / p.n_pairs.max(1) as f64
            ));
        }
    }
}

/// A shard that has not updated its record for this long while unfinished is reported
/// as stale (its machine or job probably died).
const STALE_AFTER_S: u64 = 120;

/// One line (and the record, with `stale` added) per shard that published progress.
fn shard_lines(store: &Store, pipeline: &Pipeline) -> Result<Vec<(String, serde_json::Value)>, Failure> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut out = Vec::new();
    for (_, mut record) in store.progress(&super::run::run_id(pipeline))? {
        if record.get("slurm_submission").is_some() {
            continue;
        }
        let get = |k: &str| record[k].as_u64().unwrap_or(0);
        let (done, failed, total, updated) = (get("done"), get("failed"), get("total"), get("updated_at"));
        let finished = record["finished"].as_bool().unwrap_or(false);
        let age = now.saturating_sub(updated);
        let stale = !finished && age > STALE_AFTER_S;
        let state = if finished {
            "finished"
        } else if stale {
            "STALE"
        } else {
            "running"
        };
        let mut line = format!("shard {}", record["shard"].as_str().unwrap_or("?"));
        if let Some(class) = record["class"].as_str() {
            line.push_str(&format!(" ({class})"));
        }
        line.push_str(&format!(": {state}, {done}/{total} cells done, {failed} failed, updated {age} s ago on {}", record["host"].as_str().unwrap_or("?")));
        if let Some(job) = record["slurm_job"].as_str() {
            line.push_str(&format!(" (Slurm {job})"));
        }
        record["stale"] = json!(stale);
        out.push((line, record));
    }
    Ok(out)
}

/// One line (and an object) per job of the pipeline's last `evalgrid slurm` submission: each
/// array task as its shard, then the report job, with the state Slurm gives it now and why it
/// waits, so that a job pending for ever shows (e.g. `PENDING (PartitionConfig)`).
fn slurm_lines(store: &Store, pipeline: &Pipeline) -> Result<Vec<(String, serde_json::Value)>, Failure> {
    let records = store.progress(&super::run::run_id(pipeline))?;
    let Some(submission) = records.iter().find_map(|(part, record)| (part == SLURM_SUBMISSION).then(|| record.get("slurm_submission")).flatten()) else {
        return Ok(Vec::new());
    };
    let shards = submission["shards"].as_u64().unwrap_or(0);
    let arrays: Vec<(&str, &str)> =
        submission["arrays"].as_array().into_iter().flatten().filter_map(|a| Some((a["job"].as_str()?, a["class"].as_str().unwrap_or("?")))).collect();
    let report = submission["report_job"].as_str();
    let ids: Vec<String> = arrays.iter().map(|(job, _)| (*job).to_owned()).chain(report.map(str::to_owned)).collect();
    let jobs = slurm_jobs(&ids);
    let mut out = Vec::new();
    let mut line = |what: String, job: &str, class: &str, shard: Option<String>, found: Option<&SlurmJob>| {
        let (state, reason) = found.map_or(("UNKNOWN", ""), |j| (j.state.as_str(), j.reason.as_str()));
        let waits = !reason.is_empty() && reason != "None";
        let mut text = format!("slurm {what} (job {job}): {state}");
        if waits {
            text.push_str(&format!(" ({})", one_line(reason)));
        }
        if found.is_none() {
            text.push_str(", no longer known to squeue or sacct");
        }
        out.push((text, json!({"job": job, "class": class, "shard": shard, "state": state, "reason": waits.then_some(reason)})));
    };
    for (array, class) in &arrays {
        let prefix = format!("{array}_");
        let mut tasks: Vec<&SlurmJob> = jobs.iter().filter(|j| j.id.starts_with(&prefix)).collect();
        tasks.sort_by_key(|task| task.id[prefix.len()..].parse::<u64>().unwrap_or(u64::MAX));
        if tasks.is_empty() {
            line(format!("{class} array"), array, class, None, None);
        }
        for task in tasks {
            let index = &task.id[prefix.len()..];
            line(format!("{class} shard {index}/{shards}"), &task.id, class, Some(format!("{index}/{shards}")), Some(task));
        }
    }
    if let Some(report) = report {
        line("report".to_owned(), report, "report", None, jobs.iter().find(|j| j.id == report));
    }
    Ok(out)
}

/// One-line reason a cell would run.
fn reason(pipeline: &Pipeline, store: &Store, cell: &Cell, state: CellState) -> String {
    match state {
        CellState::Cached => String::new(),
        CellState::Missing => "never run".to_owned(),
        CellState::Failed => {
            let f = store.failure(cell.episode_key).or_else(|| store.failure(cell.score_key));
            f.map_or_else(|| "failed".to_owned(), |f| format!("last attempt failed: {}", f.error))
        }
        CellState::Stale => changes(pipeline, store, cell).join("; "),
    }
}

fn changes(pipeline: &Pipeline, store: &Store, cell: &Cell) -> Vec<String> {
    match store.head(&cell.id) {
        Some(head) => evalgrid::cache::explain::changes_since(pipeline, store, cell, &head),
        None => vec!["never run".to_owned()],
    }
}

/// What the cell's benchmark says changed in its task since the previous run (the rows of a
/// `qa` dataset), as `evalgrid diff` says it.
fn task_changes(pipeline: &Pipeline, store: &Store, cell: &Cell, head: Option<&evalgrid::cache::Head>) -> Vec<String> {
    head.map(|h| evalgrid::report::diff::task_changes(pipeline, store, cell, h)).unwrap_or_default()
}

fn explain(pipeline: &Pipeline, store: &Store, cell: &Cell, json: bool) {
    let state = classify(store, cell);
    if json {
        // `--json` prints one object whatever else is asked, `--explain` included.
        let head = store.head(&cell.id);
        let rows = task_changes(pipeline, store, cell, head.as_ref());
        let changed: Vec<String> = head
            .as_ref()
            .map(|h| diff(&h.episode_components, &episode_components(pipeline, cell)).iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        let mut out = json!({
            "cell": cell.id, "state": state,
            "episode_key": cell.episode_key, "episode_cached": store.contains(cell.episode_key),
            "score_key": cell.score_key, "score_cached": store.contains(cell.score_key),
            "previous_episode_key": head.as_ref().map(|h| h.episode_key), "changed": changed,
            "reason": (state != CellState::Cached).then(|| reason(pipeline, store, cell, state)),
        });
        // Only benchmarks that name their own changes (a `qa` dataset's rows) add the field.
        if !rows.is_empty() {
            out["changed_rows"] = json!(rows);
        }
        output::json(&out);
        return;
    }
    output::line(&format!("cell     {}", cell.id));
    output::line(&format!("state    {state:?}").to_lowercase());
    output::line(&format!("episode  {} {}", cell.episode_key, if store.contains(cell.episode_key) { "(cached)" } else { "(not cached)" }));
    output::line(&format!("score    {} {}", cell.score_key, if store.contains(cell.score_key) { "(cached)" } else { "(not cached)" }));
    match store.head(&cell.id) {
        None => output::line("previous run: none"),
        Some(head) => {
            output::line(&format!("previous episode key {}", head.episode_key));
            for c in diff(&head.episode_components, &episode_components(pipeline, cell)) {
                output::line(&format!("  changed {c}"));
            }
            for row in task_changes(pipeline, store, cell, Some(&head)) {
                output::line(&format!("  changed {}", one_line(&row)));
            }
        }
    }
    if state != CellState::Cached {
        output::line(&format!("reason   {}", one_line(&reason(pipeline, store, cell, state))));
    }
}
