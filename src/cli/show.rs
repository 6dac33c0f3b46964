//! `evalgrid show`: one cell's transcript from the cache.

use super::exit::Exit;
use evalgrid::envs::transcript;
use evalgrid::plan::plan;
use serde_json::json;

use super::args::ShowArgs;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn show(env: &Env, args: &ShowArgs) -> Result<Exit, Failure> {
    let pipeline = load_pipeline(env, &args.pipeline)?;
    let plan = plan(&pipeline, None);
    let cell = plan.cells.iter().find(|c| c.id == args.cell).ok_or_else(|| Failure::invalid(anyhow::anyhow!("no cell `{}` in this pipeline", args.cell)))?;
    let store = env.store()?;
    let Some(episode) = store.get(cell.episode_key)? else {
        // Exit 1, and with `--json` an `{"error": …}` object (printed by `cli::main`).
        return Err(Failure::from(anyhow::anyhow!("cell `{}` has no cached episode; run the pipeline first", cell.id)));
    };
    let score = store.get(cell.score_key)?.map(|e| e.output);
    if args.json {
        output::json(&json!({"cell": cell.id, "episode_key": cell.episode_key, "episode": episode.output, "score": score}));
    } else {
        let task = &pipeline.tasks[cell.task];
        output::line(&format!("cell {}  (episode {})", cell.id, cell.episode_key.short()));
        output::line(&transcript(&task.benchmark, &episode.output));
        if let Some(score) = score {
            output::line(&format!("score: {score}"));
        }
    }
    Ok(Exit::Ok)
}
