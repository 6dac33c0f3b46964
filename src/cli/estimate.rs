//! `run --dry-run`: which cells would run, how many model calls they make, and per model
//! what those calls will cost ([`evalgrid::exec::estimate`]), as text or `--json`.

use evalgrid::cache::Store;
use evalgrid::envs::registry;
use evalgrid::exec::EpisodeRunner as _;
use evalgrid::exec::estimate::{Estimator, ModelEstimate, cached_answer};
use evalgrid::exec::{CallSite, CellState, call_key, classify, has_outcome};
use evalgrid::plan::Plan;
use evalgrid::providers::ChatRequest;
use evalgrid::spec::Pipeline;
use serde_json::json;

use super::args::RunArgs;
use super::exit::Exit;
use super::{Env, Failure, output};

pub(crate) fn dry_run(env: &Env, pipeline: &Pipeline, store: &Store, plan: &Plan, args: &RunArgs, outcomes: &[String]) -> Result<Exit, Failure> {
    let mut counts = [0usize; 4];
    let (mut calls_known, mut calls_unknown_cells, mut would_run) = (0usize, 0usize, 0usize);
    let only_retries = args.retry_errors || !outcomes.is_empty();
    let mut estimator = Estimator::new(pipeline.models.len());
    // Helper calls already counted (a judge grades the same answer once, whichever cell gave it).
    let mut graded = std::collections::HashSet::new();
    for cell in &plan.cells {
        let state = classify(store, cell);
        counts[state as usize] += 1;
        let runs = match state {
            // `--retry-outcome`: the cells holding such answers run again (their other calls are hits).
            CellState::Cached => has_outcome(store, cell, outcomes),
            CellState::Failed => args.retry_errors || outcomes.is_empty(),
            _ => !only_retries,
        };
        let (model, task) = (&pipeline.models[cell.model], &pipeline.tasks[cell.task]);
        let planned = env.registry.planned_calls(model, task, cell.seed);
        // Every planned call is walked: cached ones (of this cell or another) measure the rest.
        match &planned {
            Some(calls) => calls.iter().for_each(|(request, site)| estimator.call(store, cell.model, model, request, site)),
            None if runs => estimator.unknown_cell(cell.model),
            None => {}
        }
        // Then the helpers' calls (a judge's gradings): exact where the answer they grade is
        // known (cached, or a built-in agent's), else one per answer still to come.
        let answered = |request: &ChatRequest, site: &CallSite| cached_answer(store, model, request, site).map(|answer| answer.text);
        let mut helper_calls = 0;
        for call in registry::planned_helper_calls(model, task, cell.seed, &answered) {
            if !runs && !call.known {
                continue;
            }
            let mut helper = call.model;
            helper.price = helper.price.or_else(|| pipeline.report.prices.get(&helper.id).copied());
            if call.known && !call_key(&helper, &call.request, &call.site).is_some_and(|key| graded.insert(key)) {
                continue;
            }
            helper_calls += usize::from(estimator.helper_call(store, &helper, &call.request, &call.site, call.known));
        }
        if !runs {
            continue;
        }
        would_run += 1;
        calls_known += helper_calls;
        match planned {
            Some(calls) => calls_known += calls.iter().filter(|(r, s)| call_key(model, r, s).is_some_and(|k| !store.contains(k))).count(),
            None => calls_unknown_cells += 1,
        }
    }
    let estimates = estimator.finish(&pipeline.models);
    if args.json {
        output::json(&json!({
            "cells_total": plan.cells.len(), "cells_cached": counts[0], "cells_run": 0, "cells_failed": counts[3],
            "cells_to_run": would_run, "model_calls_to_make": calls_known,
            "cells_with_unknown_calls": calls_unknown_cells, "dry_run": true, "report_dir": null,
            "estimate": estimates.iter().map(estimate_json).collect::<Vec<_>>(),
            "batch_models": pipeline.models.iter().filter(|m| m.batch.is_some()).map(|m| &m.id).collect::<Vec<_>>(),
        }));
        return Ok(Exit::Ok);
    }
    let unknown = if calls_unknown_cells > 0 {
        format!(", plus the calls of {calls_unknown_cells} multi-turn episode(s), which depend on the game")
    } else {
        String::new()
    };
    output::line(&format!(
        "{} cells: {} cached, {} stale, {} missing, {} failed; a run would compute {would_run} cells and make {calls_known} model API calls{unknown}",
        plan.cells.len(),
        counts[0],
        counts[1],
        counts[2],
        counts[3]
    ));
    for estimate in estimates.iter().filter(|e| e.calls > 0 || e.unknown_cells > 0) {
        output::line(&estimate_line(estimate));
    }
    for model in pipeline.models.iter().filter(|m| m.batch.is_some()) {
        let factor = model.price.and_then(|p| p.batch_factor).unwrap_or(0.5);
        output::line(&format!(
            "  {}: batch mode: its single-turn calls (BBEH, qa) go through the batch API, billed at {factor} × the price above (answers within 24 h); multi-turn episodes call live",
            model.id
        ));
    }
    Ok(Exit::Ok)
}

fn estimate_json(e: &ModelEstimate) -> serde_json::Value {
    let triple = |t: Option<(f64, f64, f64)>| t.map(|(expected, low, high)| json!({"expected": expected, "low": low, "high": high}));
    json!({
        "model": e.model, "calls": e.calls, "cells_not_estimated": e.unknown_cells,
        "input_tokens": e.input_tokens, "tokenizer": e.tokenizer, "output_bound_tokens": e.output_bound_tokens,
        "cost_min_usd": e.cost_range_usd.map(|r| r.0), "cost_max_usd": e.cost_range_usd.map(|r| r.1),
        "pilot_calls": e.pilot_calls, "output_tokens": triple(e.output_tokens_expected), "cost_usd": triple(e.cost_expected_usd),
    })
}

/// `  m: 460 calls · 812,345 input tokens (o200k_base) · output ≤ 184,000 tokens · $0.81 – $2.65`,
/// then, after a pilot, `· expected $1.52 (95 %: $1.47 – $1.58, from 460 cached calls)`.
fn estimate_line(e: &ModelEstimate) -> String {
    let mut line = format!(
        "  {}: {} calls · {} input tokens ({}) · output ≤ {} tokens",
        e.model,
        e.calls,
        thousands(e.input_tokens),
        e.tokenizer,
        thousands(e.output_bound_tokens)
    );
    match e.cost_range_usd {
        Some((low, high)) => line.push_str(&format!(" · ${low:.2} – ${high:.2}")),
        None => line.push_str(" · no price (set `price:` on the model for a cost)"),
    }
    if let Some((expected, low, high)) = e.cost_expected_usd {
        line.push_str(&format!(" · expected ${expected:.2} (95 %: ${low:.2} – ${high:.2}, measured on {} cached calls)", e.pilot_calls));
    } else if let Some((expected, low, high)) = e.output_tokens_expected {
        line.push_str(&format!(" · expected {expected:.0} output tokens (95 %: {low:.0} – {high:.0})"));
    }
    if e.unknown_cells > 0 {
        line.push_str(&format!(" · plus {} multi-turn episode(s) not estimated", e.unknown_cells));
    }
    line
}

fn thousands(n: u64) -> String {
    super::budget::thousands(usize::try_from(n).unwrap_or(usize::MAX))
}
