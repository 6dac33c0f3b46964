//! `budget.usd` and `run --budget-usd` at the CLI edge: every model the run calls needs a
//! price (exit 2 naming the one without), the grid's cached answers count as spent, and a
//! run the budget stopped says so and exits 3.

use evalgrid::cache::Store;
use evalgrid::exec::RunSummary;
use evalgrid::exec::calls::budget::Budget;
use evalgrid::exec::spend::plan_spent;
use evalgrid::plan::Plan;
use evalgrid::spec::{Pipeline, Provider};

use super::Failure;

/// The run's budget (`--budget-usd` over `budget.usd`), or `None` without one; refused
/// when a model with cells in the run has no `price`, or the limit is not positive.
pub(crate) fn budget(pipeline: &Pipeline, plan: &Plan, store: &Store, flag: Option<f64>) -> Result<Option<Budget>, Failure> {
    let Some(limit) = flag.or(pipeline.budget_usd) else { return Ok(None) };
    if !(limit.is_finite() && limit > 0.0) {
        return Err(Failure::invalid(anyhow::anyhow!("--budget-usd must be a positive number of US dollars, not {limit}")));
    }
    for cell in &plan.cells {
        let model = &pipeline.models[cell.model];
        if model.price.is_none() && !matches!(model.provider, Provider::Builtin | Provider::Scripted) {
            return Err(Failure::invalid(anyhow::anyhow!(
                "model `{}` has no price, so a budget cannot hold its calls: set `price: {{input_per_mtok: …, output_per_mtok: …}}` on the model, or run without `budget.usd` / --budget-usd",
                model.id
            )));
        }
    }
    let spent = plan_spent(store, pipeline, plan)?;
    Ok(Some(Budget::new(limit, spent.usd)))
}

/// The line a run the budget stopped ends with.
pub(crate) fn reached_line(summary: &RunSummary, budget: &Budget) -> String {
    format!(
        "budget reached: ${:.2} spent, {} cells not started; raise the budget to go on (budget.usd or --budget-usd; ${:.2} now, and answers already paid are never paid again)",
        budget.spent_usd(),
        thousands(summary.cells_not_started),
        budget.limit_usd()
    )
}

/// `1204` → `1,204`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_read_with_thousands_separators() {
        assert_eq!(super::thousands(1204), "1,204");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1_000_000), "1,000,000");
    }
}
