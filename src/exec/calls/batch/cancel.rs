//! `evalgrid batch cancel`: the model's batches still running at the provider are cancelled
//! (`POST …/batches/{id}/cancel`); their records stay, so a rerun collects what they answered
//! and sends the rest once more.

use std::sync::Arc;

use super::lane_name;
use crate::cache::{BatchLedger, Store};
use crate::providers::batch::{BatchApi, state_ended};
use crate::providers::{ChatRequest, ProviderClient, route};
use crate::spec::ModelConfig;

/// One batch `cancel_batches` acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancelled {
    /// The provider's batch id.
    pub batch_id: String,
    /// Calls it covers.
    pub calls: usize,
    /// Its state after the cancel request (`cancelling`), or why the request failed.
    pub outcome: Result<String, String>,
}

/// Cancels `model`'s recorded batches that have not ended.
///
/// # Errors
/// The model has no endpoint or key (a message naming the setting).
pub async fn cancel_batches(client: &Arc<ProviderClient>, store: &Store, model: &ModelConfig) -> Result<Vec<Cancelled>, String> {
    let endpoint = route::endpoint(model, &ChatRequest::default()).map_err(|e| e.to_string())?;
    let endpoint = route::with_secrets(endpoint, model).map_err(|e| e.to_string())?;
    let api = BatchApi::new(client.http().clone(), &endpoint).map_err(|e| e.to_string())?;
    let lane = lane_name(&endpoint);
    let mut out = Vec::new();
    for record in BatchLedger::of(store).list().into_iter().filter(|record| record.lane == lane) {
        let Some(id) = record.batch_id else { continue };
        // A batch the provider answered 404 for cannot be cancelled there either.
        if state_ended(&record.state) || record.state == "not_found" {
            continue;
        }
        let outcome = api.cancel(&id).await.map(|batch| batch.status).map_err(|e| e.to_string());
        out.push(Cancelled { batch_id: id, calls: record.keys.len(), outcome });
    }
    Ok(out)
}
