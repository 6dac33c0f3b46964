//! The answer journal at the CLI edge: earlier runs' kept answers moved into the cache, and
//! room reserved for this run's calls in flight (every lane's concurrency × the response
//! cap, bounded by [`evalgrid::cache::journal::MAX_RESERVE`] and by half the free space).

use evalgrid::cache::Store;
use evalgrid::spec::{Pipeline, Provider};

use super::output;

/// Moves what earlier runs kept into the cache, then, when the run has `calls` to make,
/// reserves its journal; each problem is a warning (the run goes on, as before journals
/// existed).
pub(crate) fn prepare(store: &Store, pipeline: &Pipeline, shard: Option<evalgrid::plan::Shard>, calls: bool) {
    match store.recover_journals() {
        Ok(0) => {}
        Ok(moved) => output::note(&format!("moved {moved} paid answer(s) kept in the journal by an earlier run into the cache")),
        Err(error) => output::note(&format!("warning: cannot move the journal's answers into the cache yet ({error:#}); they stay in the journal")),
    }
    let config = super::run::client_config(&pipeline.transport, shard);
    let per_lane = match config.concurrency {
        evalgrid::providers::ConcurrencyMode::Static { max_concurrency } => max_concurrency,
        evalgrid::providers::ConcurrencyMode::Adaptive(aimd) => aimd.cap,
    } as u64;
    let lanes = pipeline.models.iter().filter(|m| !matches!(m.provider, Provider::Builtin | Provider::Scripted)).count() as u64;
    if lanes == 0 || !calls {
        return;
    }
    let wanted = per_lane.saturating_mul(lanes).saturating_mul(pipeline.transport.max_response_bytes);
    store.reserve_journal_soon(wanted, |error| {
        output::note(&format!("warning: cannot reserve the answer journal ({error}); a full disk would lose the answers in flight"));
    });
}
