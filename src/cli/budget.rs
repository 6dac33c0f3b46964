//! `budget.usd` and `run --budget-usd` at the CLI edge: every model the run calls needs a
//! price (exit 2 naming the one without), the grid's cached answers count as spent, and a
//! run the budget stopped says so and exits 3.

use evalgrid::cache::Store;
use evalgrid::envs::registry;
use evalgrid::exec::RunSummary;
use evalgrid::exec::calls::budget::Budget;
use evalgrid::exec::spend::plan_spent;
use evalgrid::plan::{Cell, Plan};
use evalgrid::spec::{Helper, ModelConfig, Pipeline, Provider};

use super::Failure;

/// The run's budget (`--budget-usd` over `budget.usd`), or `None` without one; refused
/// when a model with cells in the run, or a helper model its cells call (a `qa` judge, the
/// Eleusis rule compiler), has no `price`, or the limit is not positive.
pub(crate) fn budget(pipeline: &Pipeline, plan: &Plan, store: &Store, flag: Option<f64>) -> Result<Option<Budget>, Failure> {
    let Some(limit) = flag.or(pipeline.budget_usd) else { return Ok(None) };
    if !(limit.is_finite() && limit > 0.0) {
        return Err(Failure::invalid(anyhow::anyhow!("--budget-usd must be a positive number of US dollars, not {limit}")));
    }
    let paid = |model: &ModelConfig| model.price.is_none() && !matches!(model.provider, Provider::Builtin | Provider::Scripted);
    for cell in &plan.cells {
        let model = &pipeline.models[cell.model];
        if paid(model) {
            return Err(Failure::invalid(anyhow::anyhow!(
                "model `{}` has no price, so a budget cannot hold its calls: set `price: {{input_per_mtok: …, output_per_mtok: …}}` on the model, or run without `budget.usd` / --budget-usd",
                model.id
            )));
        }
        if let Some(helper) = helpers(pipeline, cell).into_iter().find(|h| paid(&h.model)) {
            return Err(Failure::invalid(anyhow::anyhow!(
                "the `{}` model `{}` of task `{}` has no price, so a budget cannot hold its calls: set `price: {{input_per_mtok: …, output_per_mtok: …}}` in its entry (`params.{}`), or run without `budget.usd` / --budget-usd",
                helper.model.id,
                helper.model.model,
                pipeline.tasks[cell.task].qualified(),
                helper.param
            )));
        }
    }
    let spent = plan_spent(store, pipeline, plan, &|cell| helpers(pipeline, cell))?;
    Ok(Some(Budget::new(limit, spent.usd)))
}

/// The helper models `cell` calls, priced from their entries or the pipeline's helper prices.
pub(crate) fn helpers(pipeline: &Pipeline, cell: &Cell) -> Vec<Helper> {
    registry::cell_helpers(&pipeline.models[cell.model], &pipeline.tasks[cell.task], &pipeline.report.prices)
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
