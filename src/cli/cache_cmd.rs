//! `evalgrid cache stats|verify|gc`.

use super::exit::Exit;
use std::collections::HashSet;

use evalgrid::cache::{Store, maintenance};
use evalgrid::plan::{StepKey, metrics_components, plan, report_components};
use serde_json::json;

use super::args::CacheCommand;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn cache(env: &Env, command: CacheCommand) -> Result<Exit, Failure> {
    let store = Store::open(&env.cache_dir)?;
    match command {
        CacheCommand::Stats { json } => {
            let s = maintenance::stats(&store)?;
            if json {
                output::json(&serde_json::to_value(&s)?);
            } else {
                for (kind, n) in &s.entries {
                    output::line(&format!("{kind:8} {n}"));
                }
                output::line(&format!("entries  {} bytes\nblobs    {} ({} bytes)", s.entry_bytes, s.blobs, s.blob_bytes));
            }
            Ok(Exit::Ok)
        }
        CacheCommand::Verify { json } => {
            let v = maintenance::verify(&store)?;
            if json {
                output::json(&json!({"checked": v.checked, "bad": v.bad.iter().map(|(p, r)| json!({"path": p, "reason": r})).collect::<Vec<_>>()}));
            } else {
                for (path, reason) in &v.bad {
                    output::line(&format!("bad {}: {reason}", path.display()));
                }
                output::line(&format!("{} checked, {} bad", v.checked, v.bad.len()));
                if !v.bad.is_empty() {
                    output::note("note: a run treats bad entries as misses and computes them again; `evalgrid cache gc` removes them now");
                }
            }
            Ok(Exit::failed_if(!v.bad.is_empty()))
        }
        CacheCommand::Gc { keep } => {
            let keep_set = if keep.is_empty() {
                None
            } else {
                let mut set: HashSet<StepKey> = HashSet::new();
                for path in &keep {
                    let pipeline = load_pipeline(env, path)?;
                    let plan = plan(&pipeline, None);
                    let scored: Vec<_> = plan.cells.iter().filter(|c| store.contains(c.score_key)).cloned().collect();
                    let metrics = StepKey::compute(&metrics_components(&pipeline, &plan.cells, &scored));
                    set.insert(metrics);
                    set.insert(StepKey::compute(&report_components(&pipeline, metrics)));
                    for c in &plan.cells {
                        set.insert(c.episode_key);
                        set.insert(c.score_key);
                        // Calls, verdicts and submissions the cell's episode used,
                        // also when it failed half-way and has no entry.
                        set.extend(store.substeps(c.episode_key)?);
                    }
                }
                Some(set)
            };
            let c = maintenance::gc(&store, keep_set.as_ref())?;
            output::line(&format!("removed {} files ({} bytes)", c.removed, c.bytes));
            Ok(Exit::Ok)
        }
    }
}
