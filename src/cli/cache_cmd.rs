//! `evalgrid cache stats|verify|gc`.

use super::exit::Exit;
use std::collections::{BTreeSet, HashSet};

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
        CacheCommand::Verify { json, weights } => {
            let v = maintenance::verify(&store)?;
            let rehashed = if weights { evalgrid::cache::HashMemo::new(&env.cache_dir).rehash_all()? } else { Vec::new() };
            let stale: Vec<_> = rehashed.iter().filter(|r| r.stale()).collect();
            // Damaged batch ledger records: not misses to recompute, but calls held back.
            let damaged = super::batch_cmd::damaged_lines(&store);
            if json {
                let mut out = json!({"checked": v.checked, "bad": v.bad.iter().map(|(p, r)| json!({"path": p, "reason": r})).collect::<Vec<_>>(),
                    "batch_records_damaged": damaged.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()});
                if weights {
                    out["weights"] = json!({"rehashed": rehashed.iter().filter(|r| r.now.is_some()).count(), "stale": stale, "gone": rehashed.iter().filter(|r| r.now.is_none()).map(|r| &r.path).collect::<Vec<_>>()});
                }
                output::json(&out);
            } else {
                for (path, reason) in &v.bad {
                    output::line(&format!("bad {}: {reason}", path.display()));
                }
                for (line, _) in &damaged {
                    output::line(line);
                }
                let held = if damaged.is_empty() { String::new() } else { format!(", {} damaged batch record(s)", damaged.len()) };
                output::line(&format!("{} checked, {} bad{held}", v.checked, v.bad.len()));
                if !v.bad.is_empty() {
                    output::note("note: a run treats bad entries as misses and computes them again; `evalgrid cache gc` removes them now");
                }
                if weights {
                    for r in &stale {
                        output::line(&format!("stale {}: remembered blake3 {}, its bytes are {}", r.path, r.remembered, r.now.as_deref().unwrap_or_default()));
                    }
                    let read = rehashed.iter().filter(|r| r.now.is_some()).count();
                    output::line(&format!("{read} weights and argument files read again, {} stale (corrected)", stale.len()));
                    if !stale.is_empty() {
                        output::note("note: the next run keys those models by their bytes now");
                    }
                }
            }
            Ok(Exit::failed_if(!v.bad.is_empty() || !stale.is_empty() || !damaged.is_empty()))
        }
        CacheCommand::Gc { keep } => {
            // The container images the kept pipelines use; `None`: some cannot be named.
            let mut images: Option<BTreeSet<String>> = Some(BTreeSet::new());
            let keep_set = if keep.is_empty() {
                None
            } else {
                let mut set: HashSet<StepKey> = HashSet::new();
                for path in &keep {
                    let pipeline = load_pipeline(env, path)?;
                    for task in &pipeline.tasks {
                        let named = evalgrid::envs::registry::get(&task.benchmark).map_or(Some(Vec::new()), |b| b.container_images(task));
                        images = images.zip(named).map(|(mut all, more)| {
                            all.extend(more);
                            all
                        });
                    }
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
            if keep_set.is_some() {
                prune_images(images.as_ref());
            }
            Ok(Exit::Ok)
        }
    }
}

/// Drops the images evalgrid built (`evalgrid-harbor:*`) that no kept pipeline uses, on each
/// runtime found here; says why when it cannot.
fn prune_images(keep: Option<&BTreeSet<String>>) {
    use evalgrid::sandbox::container::{self, Runtime};
    let Some(keep) = keep else {
        output::note("note: container images kept: a kept pipeline uses images evalgrid cannot name");
        return;
    };
    for runtime in [Runtime::Podman, Runtime::Docker] {
        let Ok(rt) = container::locate(runtime) else { continue };
        match container::prune_images(&rt, keep) {
            Ok(0) => {}
            Ok(n) => output::line(&format!("removed {n} container image(s) of {runtime} no kept pipeline uses")),
            // A docker client without a daemon is common and says nothing about the cache.
            Err(e) => tracing::info!("{runtime} images not pruned: {e}"),
        }
    }
}
