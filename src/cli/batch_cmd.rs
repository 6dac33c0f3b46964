//! `evalgrid batch cancel P`: cancels the batches P's models left running; `evalgrid batch
//! forget RECORD…`: the one way to release the calls of a damaged record or of a batch the
//! provider answers 404 for; and `status`'s lines for the batch ledger.

use std::sync::Arc;

use evalgrid::cache::{BatchLedger, BatchRecord, Forgotten, Store};
use evalgrid::exec::calls::batch::cancel_batches;
use evalgrid::providers::{ProviderClient, install_crypto_provider};
use serde_json::json;

use super::args::BatchCommand;
use super::exit::Exit;
use super::run::client_config;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn batch(env: &Env, command: BatchCommand) -> Result<Exit, Failure> {
    let (pipeline, json) = match command {
        BatchCommand::Cancel { pipeline, json } => (pipeline, json),
        BatchCommand::Forget { records, json } => return forget(env, &records, json),
    };
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

/// `batch forget`: each named record is removed (its calls go out again next run); a name no
/// record has is an input error (exit 2), after the others were forgotten.
fn forget(env: &Env, names: &[String], json: bool) -> Result<Exit, Failure> {
    let ledger = BatchLedger::of(&env.store()?);
    let mut rows = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match ledger.forget(name)? {
            Some(Forgotten::Record(r)) => {
                let what = format!(
                    "forgot batch record {} (batch {}, {}, {} calls): the next run sends its calls again, and pays for them again if that batch did run",
                    r.tag,
                    r.batch_id.as_deref().unwrap_or("never created"),
                    r.state,
                    r.keys.len()
                );
                rows.push((what, json!({"record": name, "tag": r.tag, "batch_id": r.batch_id, "state": r.state, "calls": r.keys.len(), "damaged": false})));
            }
            Some(Forgotten::Damaged(d)) => {
                let what = format!("forgot damaged batch record {} ({}): the calls it held go out again with the next run", d.path.display(), d.reason);
                rows.push((what, json!({"record": name, "tag": d.name, "batch_id": null, "calls": null, "damaged": true})));
            }
            None => unknown.push(name.clone()),
        }
    }
    if json {
        output::json(&json!({"forgotten": rows.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(), "unknown": unknown}));
    } else {
        for (line, _) in &rows {
            output::line(line);
        }
    }
    if unknown.is_empty() {
        return Ok(Exit::Ok);
    }
    let known: Vec<String> = ledger
        .list()
        .into_iter()
        .map(|r| r.batch_id.map_or(r.tag.clone(), |id| format!("{} ({id})", r.tag)))
        .chain(ledger.damaged().into_iter().map(|d| d.name))
        .collect();
    let known = if known.is_empty() { "the ledger is empty".to_owned() } else { format!("recorded: {}", known.join(", ")) };
    Err(Failure::invalid(anyhow::anyhow!("no batch record is named {} ({known})", unknown.join(", "))))
}

/// `status`'s and `cache verify`'s lines for the damaged ledger records, and their JSON.
pub(crate) fn damaged_lines(store: &Store) -> Vec<(String, serde_json::Value)> {
    BatchLedger::of(store)
        .damaged()
        .into_iter()
        .map(|d| {
            let line = format!(
                "damaged batch record {}: {}; its model's batches are held back (its calls may be in a batch already paid for): check the provider, then `evalgrid batch forget {}`",
                d.path.display(),
                evalgrid::text::one_line(&d.reason),
                d.name
            );
            (line, json!({"record": d.name, "path": d.path, "reason": d.reason, "lane": d.lane}))
        })
        .collect()
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
