//! `evalgrid batch cancel P`: cancels the batches P's models left running, and `status`'s
//! lines for the batch ledger.

use std::sync::Arc;

use evalgrid::cache::{BatchLedger, BatchRecord, Store};
use evalgrid::exec::calls::batch::cancel_batches;
use evalgrid::providers::{ProviderClient, install_crypto_provider};
use serde_json::json;

use super::args::BatchCommand;
use super::exit::Exit;
use super::run::client_config;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn batch(env: &Env, command: BatchCommand) -> Result<Exit, Failure> {
    let BatchCommand::Cancel { pipeline, json } = command;
    let pipeline = load_pipeline(env, &pipeline)?;
    let store = env.store()?;
    install_crypto_provider();
    let client = Arc::new(ProviderClient::new(client_config(&pipeline.transport, None)).map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    let mut failed = false;
    for model in pipeline.models.iter().filter(|m| m.batch.is_some()) {
        match runtime.block_on(cancel_batches(&client, &store, model)) {
            Ok(cancelled) => rows.extend(cancelled.into_iter().map(|c| (model.id.clone(), c))),
            Err(error) => {
                failed = true;
                output::error(&format!("model `{}`: {error}", model.id));
            }
        }
    }
    runtime.shutdown_background();
    failed |= rows.iter().any(|(_, c)| c.outcome.is_err());
    if json {
        let cancelled: Vec<_> = rows
            .iter()
            .map(|(model, c)| json!({"model": model, "batch_id": c.batch_id, "calls": c.calls, "state": c.outcome.as_ref().ok(), "error": c.outcome.as_ref().err()}))
            .collect();
        output::json(&json!({"cancelled": cancelled}));
    } else if rows.is_empty() {
        output::line("no running batch recorded for this pipeline's models: nothing to cancel");
    } else {
        for (model, c) in &rows {
            match &c.outcome {
                Ok(state) => output::line(&format!(
                    "cancelled {} ({} calls of model `{model}`): now {state}; a rerun collects what it answered and sends the rest again",
                    c.batch_id, c.calls
                )),
                Err(error) => output::line(&format!("could not cancel {} (model `{model}`): {error}", c.batch_id)),
            }
        }
    }
    Ok(Exit::failed_if(failed))
}

/// `status`'s lines for the batch ledger: one per recorded batch, and its JSON.
pub(crate) fn batch_lines(store: &Store) -> Vec<(String, serde_json::Value)> {
    let now = evalgrid::cache::batches::now_s();
    BatchLedger::of(store)
        .list()
        .into_iter()
        .map(|r: BatchRecord| {
            let age = now.saturating_sub(r.recorded_at);
            let (total, done, failed) = r.counts;
            let id = r.batch_id.clone().unwrap_or_else(|| format!("(not yet created, tag {})", r.tag));
            let line = format!(
                "batch {id}  {}  {}  {done}/{total} done, {failed} failed  {} calls  {}  age {}",
                r.endpoint,
                r.state,
                r.keys.len(),
                r.lane.split(' ').take(2).collect::<Vec<_>>().join(" "),
                age_text(age)
            );
            let value = json!({"batch_id": r.batch_id, "tag": r.tag, "endpoint": r.endpoint, "state": r.state, "total": total, "completed": done, "failed": failed, "calls": r.keys.len(), "unanswered": r.unanswered.len(), "age_s": age});
            (line, value)
        })
        .collect()
}

fn age_text(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}
