//! What the grid's cached answers cost: the calls recorded under each cell's episode, with
//! the tokens they were billed. The budget starts from it (a rerun spends only what is left),
//! and `run --dry-run` measures a pilot's output lengths with it.

use crate::cache::{CacheError, Store};
use crate::plan::{Cell, Plan, StepKind};
use crate::providers::ChatResponse;
use crate::spec::{Helper, Pipeline};

/// The cached calls of one cell (or a sum of cells).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    /// Answered calls found in the cache.
    pub calls: u64,
    /// Prompt tokens billed.
    pub input: u64,
    /// Output tokens billed (reasoning included).
    pub output: u64,
    /// US dollars at the model's price (0 without one).
    pub usd: f64,
}

impl std::ops::AddAssign for Spent {
    fn add_assign(&mut self, other: Self) {
        // Saturating: a provider's absurd usage never wraps a sum.
        self.calls = self.calls.saturating_add(other.calls);
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.usd = (self.usd + other.usd).min(f64::MAX);
    }
}

/// The answered calls recorded under `cell`'s episode, finished or not, priced at its
/// model's price, or a helper's (a judge, a rule compiler: `helpers`) for the calls at
/// that helper's site. Entries that are not model calls (verdicts, submissions) are skipped.
pub fn cell_spent(store: &Store, pipeline: &Pipeline, cell: &Cell, helpers: &[Helper]) -> Result<Spent, CacheError> {
    let price = pipeline.models[cell.model].price;
    let mut spent = Spent::default();
    for key in store.substeps(cell.episode_key)? {
        let Some(entry) = store.get(key)? else { continue };
        if entry.kind != StepKind::Call {
            continue;
        }
        let position = entry.components.pointer("/inputs/site/position").and_then(serde_json::Value::as_str).unwrap_or_default();
        let price = helpers.iter().find(|h| position.starts_with(h.site)).map_or(price, |h| h.model.price);
        let Ok(answer) = serde_json::from_value::<ChatResponse>(entry.output) else { continue };
        let usage = answer.usage;
        spent += Spent { calls: 1, input: usage.input, output: usage.output, usd: price.map_or(0.0, |p| p.cost(usage.input, usage.cached, usage.output)) };
    }
    Ok(spent)
}

/// What the cells of `plan` have cost so far, summed over their cached answers; `helpers`
/// gives each cell's helper models, priced.
pub fn plan_spent(store: &Store, pipeline: &Pipeline, plan: &Plan, helpers: &dyn Fn(&Cell) -> Vec<Helper>) -> Result<Spent, CacheError> {
    let mut total = Spent::default();
    for cell in &plan.cells {
        total += cell_spent(store, pipeline, cell, &helpers(cell))?;
    }
    Ok(total)
}
