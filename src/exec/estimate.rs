//! What a grid will cost before the first call (`run --dry-run`): per model, the calls still
//! to make, their prompt tokens (counted, [`crate::providers::tokens`]), the output-token
//! bound, and a cost range from "no output" to "every output at its cap". When some of the
//! grid's calls are cached already (a pilot: `--filter seed=0`), their billed tokens measure
//! the rest: the prompt count is scaled by the pilot's billed-to-counted ratio, the output by
//! the pilot's mean per call, with a 95 % interval for the sum.

use std::collections::{BTreeMap, HashMap};

use crate::cache::Store;
use crate::exec::CallSite;
use crate::exec::calls::{budget::UNCAPPED_OUTPUT_TOKENS, call_components};
use crate::plan::StepKey;
use crate::providers::tokens::{Tokenizer, body_tokens_by};
use crate::providers::{ChatRequest, ChatResponse, Shaping, request_body, route};
use crate::spec::{ModelConfig, Provider};

/// One model's estimate.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ModelEstimate {
    /// The model entry's id.
    pub model: String,
    /// Calls to make (not cached).
    pub calls: u64,
    /// Cells whose calls depend on the episode (multi-turn games): not estimated.
    pub unknown_cells: u64,
    /// How prompt tokens are counted (`o200k_base`, or an approximation that says so).
    pub tokenizer: String,
    /// Prompt tokens of the calls to make, as counted (before any pilot scaling).
    pub input_tokens: u64,
    /// Output tokens if every call used its cap (`max_tokens`).
    pub output_bound_tokens: u64,
    /// Cost with no output at all, and with every output at its cap (US dollars; `None`
    /// without a price).
    pub cost_range_usd: Option<(f64, f64)>,
    /// Cached calls of the grid measured as a pilot.
    pub pilot_calls: u64,
    /// With a pilot: the output tokens expected, and their 95 % interval.
    pub output_tokens_expected: Option<(f64, f64, f64)>,
    /// With a pilot and a price: the cost expected, and its 95 % interval.
    pub cost_expected_usd: Option<(f64, f64, f64)>,
}

/// One model's tallies while the planned calls are walked.
#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    unknown_cells: u64,
    input: u64,
    output_bound: u64,
    pilot: u64,
    pilot_counted_input: u64,
    pilot_billed_input: u64,
    pilot_output: f64,
    pilot_output_sq: f64,
}

/// Walks the planned calls of a grid, one model and call at a time.
#[derive(Debug, Default)]
pub struct Estimator {
    /// By the model's index in the pipeline; helper models (a `qa` judge) after them.
    tallies: BTreeMap<usize, Tally>,
    /// Helper models met, by first sight: helper `i` tallies at index `models + i`.
    helpers: Vec<ModelConfig>,
    /// How many pipeline models there are (where helper indices start).
    models: usize,
    /// Token counts of long strings by (tokenizer, text hash): a prompt repeats across
    /// models and seeds.
    memo: HashMap<(&'static str, blake3::Hash), u64>,
}

impl Estimator {
    /// Counts a cell of model `index` whose calls the benchmark cannot list up front.
    pub fn unknown_cell(&mut self, index: usize) {
        self.tallies.entry(index).or_default().unknown_cells += 1;
    }

    /// An estimator for a pipeline of `models` models (helpers are counted after them).
    #[must_use]
    pub fn new(models: usize) -> Self {
        Self { models, ..Self::default() }
    }

    /// Counts one planned call of model `index`: to make, or (cached) measured as pilot.
    pub fn call(&mut self, store: &Store, index: usize, model: &ModelConfig, request: &ChatRequest, site: &CallSite) {
        self.tally(store, index, model, request, site, true);
    }

    /// Counts one planned call of a helper model (a `qa` judge), under its id: to make, or
    /// (cached, where `known`: its request is the one a run sends) measured as pilot.
    /// Returns whether it is a call to make.
    pub fn helper_call(&mut self, store: &Store, model: &ModelConfig, request: &ChatRequest, site: &CallSite, known: bool) -> bool {
        let i = self.helpers.iter().position(|h| h.id == model.id).unwrap_or_else(|| {
            self.helpers.push(model.clone());
            self.helpers.len() - 1
        });
        self.tally(store, self.models + i, model, request, site, known)
    }

    fn tally(&mut self, store: &Store, index: usize, model: &ModelConfig, request: &ChatRequest, site: &CallSite, lookup: bool) -> bool {
        let Ok(endpoint) = route::endpoint(model, request) else { return false };
        let body = request_body(&endpoint, request);
        let tokenizer = Tokenizer::for_model(model.provider == Provider::OpenAi, &model.model);
        let memo = &mut self.memo;
        let counted = body_tokens_by(&body, &mut |text| {
            if text.len() < 256 {
                return tokenizer.count(text);
            }
            *memo.entry((tokenizer.describe(), blake3::hash(text.as_bytes()))).or_insert_with(|| tokenizer.count(text))
        });
        let tally = self.tallies.entry(index).or_default();
        let key = StepKey::compute(&call_components(&endpoint, request, site));
        if lookup && let Ok(Some(answer)) = store.get_output::<ChatResponse>(key) {
            tally.pilot += 1;
            tally.pilot_counted_input += counted;
            tally.pilot_billed_input += answer.usage.input;
            #[expect(clippy::cast_precision_loss, reason = "token counts")]
            let output = answer.usage.output as f64;
            tally.pilot_output += output;
            tally.pilot_output_sq += output * output;
            return false;
        }
        let cap = endpoint.kind.protocol().output_cap_fields().iter().find_map(|field| body.pointer(field).and_then(serde_json::Value::as_u64));
        tally.calls += 1;
        tally.input = tally.input.saturating_add(counted);
        tally.output_bound = tally.output_bound.saturating_add(cap.unwrap_or(UNCAPPED_OUTPUT_TOKENS));
        true
    }

    /// The estimate of every model met, in pipeline order, then the helper models.
    #[must_use]
    pub fn finish(self, models: &[ModelConfig]) -> Vec<ModelEstimate> {
        let helpers = self.helpers;
        self.tallies
            .into_iter()
            .filter_map(|(index, tally)| models.get(index).or_else(|| helpers.get(index - models.len())).map(|model| model_estimate(model, &tally)))
            .collect()
    }
}

/// The answer a run would be served for this call from the cache, as served (its text held
/// to the server's shaping), if it is cached.
#[must_use]
pub fn cached_answer(store: &Store, model: &ModelConfig, request: &ChatRequest, site: &CallSite) -> Option<ChatResponse> {
    let endpoint = route::endpoint(model, request).ok()?;
    let key = StepKey::compute(&call_components(&endpoint, request, site));
    let answer = store.get_output::<ChatResponse>(key).ok()??;
    Some(endpoint.kind.protocol().settle_cached(answer, &Shaping::for_call(request, &endpoint.base_url)))
}

#[expect(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
fn model_estimate(model: &ModelConfig, t: &Tally) -> ModelEstimate {
    let tokenizer = Tokenizer::for_model(model.provider == Provider::OpenAi, &model.model);
    let price = model.price;
    let cost = |input: f64, output: f64| price.map(|p| (input * p.input_per_mtok + output * p.output_per_mtok) / 1e6);
    let (input, bound) = (t.input as f64, t.output_bound as f64);
    let mut estimate = ModelEstimate {
        model: model.id.clone(),
        calls: t.calls,
        unknown_cells: t.unknown_cells,
        tokenizer: tokenizer.describe().to_owned(),
        input_tokens: t.input,
        output_bound_tokens: t.output_bound,
        cost_range_usd: cost(input, 0.0).zip(cost(input, bound)),
        pilot_calls: t.pilot,
        ..ModelEstimate::default()
    };
    if t.pilot == 0 {
        return estimate;
    }
    let (n, calls) = (t.pilot as f64, t.calls as f64);
    let ratio = if t.pilot_counted_input > 0 { t.pilot_billed_input as f64 / t.pilot_counted_input as f64 } else { 1.0 };
    let mean = t.pilot_output / n;
    let variance = if t.pilot > 1 { ((t.pilot_output_sq - n * mean * mean) / (n - 1.0)).max(0.0) } else { mean * mean };
    // The sum of `calls` outputs: each varies around the mean, and the mean is known from
    // `n` calls only.
    let spread = 1.96 * (variance * (calls + calls * calls / n)).sqrt();
    let expected = calls * mean;
    let (low, high) = ((expected - spread).max(0.0), (expected + spread).min(bound));
    estimate.output_tokens_expected = Some((expected, low, high));
    let billed_input = input * ratio;
    estimate.cost_expected_usd = cost(billed_input, expected).zip(cost(billed_input, low)).zip(cost(billed_input, high)).map(|((e, l), h)| (e, l, h));
    estimate
}
