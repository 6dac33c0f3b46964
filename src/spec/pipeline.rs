//! Validated pipeline: the domain types every later layer works with.
//!
//! Nothing here knows YAML; defaults are applied, names resolved to task
//! instances with content hashes, and the seed list expanded.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::providers::{Background, OpenAiApi, StreamMode};
use serde::Serialize;
use serde_json::Value;

/// Resolved parameters: sorted, JSON-valued, defaults filled in.
pub type Params = BTreeMap<String, Value>;

/// A validated pipeline, ready to be planned.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// Pipeline name; names the report folder.
    pub name: String,
    /// File it was loaded from (never part of any key).
    pub source_path: PathBuf,
    /// blake3 of the file bytes, for provenance.
    pub source_hash: String,
    /// Models in file order.
    pub models: Vec<ModelConfig>,
    /// Task instances in file order, each with its benchmark.
    pub tasks: Vec<TaskInstance>,
    /// Seeds in ascending order, deduplicated.
    pub seeds: Vec<u64>,
    /// Cells kept only when they match one of these (empty = all).
    pub include: Vec<CellFilter>,
    /// Cells dropped when they match one of these.
    pub exclude: Vec<CellFilter>,
    /// Metric selection.
    pub metrics: MetricsConfig,
    /// Report options.
    pub report: ReportConfig,
    /// How model calls are made (never part of a key).
    pub transport: TransportConfig,
    /// Whether model-written code must run in bubblewrap (never part of a key).
    pub sandbox: SandboxMode,
    /// `budget.usd`: the most the grid's model calls may cost, in US dollars (never part
    /// of a key: it decides which calls are sent, not what they answer).
    pub budget_usd: Option<f64>,
}

/// `sandbox:` in a pipeline: model-written code runs in bubblewrap, or (only when the
/// user says so) with resource limits alone; the report says which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// bubblewrap is required; without it such a run stops with exit 2.
    #[default]
    Bubblewrap,
    /// Explicit opt-out: rlimits only when bubblewrap is missing (unsafe).
    None,
}

/// Retry, timeout and concurrency settings: transport knobs that can never
/// change an answer, so they stay out of every cache key (lessons §2).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransportConfig {
    /// HTTP attempts per call, the first included.
    pub max_attempts: u32,
    /// First backoff (ms); doubles with jitter.
    pub retry_base_ms: u64,
    /// Largest single backoff (ms).
    pub retry_max_ms: u64,
    /// Budget for one call including retries (s).
    pub call_timeout_s: u64,
    /// Timeout of one HTTP attempt (s).
    pub request_timeout_s: u64,
    /// TCP/TLS connect timeout (s).
    pub connect_timeout_s: u64,
    /// Fixed concurrency per provider and base URL; `None` = adaptive (AIMD).
    pub max_concurrency: Option<usize>,
    /// Ceiling of the adaptive concurrency.
    pub concurrency_cap: usize,
    /// Largest response body accepted (bytes); a longer one fails the call, uncached.
    pub max_response_bytes: u64,
    /// Concurrency cap of each `--shard` run; `None` = the cap divided by the shard count,
    /// so n shards together send what one run would.
    pub per_shard_concurrency: Option<usize>,
    /// First wait before polling a background response (ms); doubles per poll.
    pub background_poll_ms: u64,
    /// Longest wait between polls of a background response (ms).
    pub background_poll_max_ms: u64,
    /// Silence (s) after which a streamed attempt is abandoned as stalled and retried;
    /// streamed calls have no per-attempt total timeout short of `stream_total_timeout_s`.
    pub stream_idle_timeout_s: u64,
    /// Longest one streamed attempt may run while it keeps sending (s); streaming time does
    /// not use up `call_timeout_s`, which bounds waits and retries.
    pub stream_total_timeout_s: u64,
    /// Longest a streamed attempt waits for its first byte (s): time queued behind a
    /// server's busy slots is not a stall; `stream_idle_timeout_s` applies after it.
    pub first_byte_timeout_s: u64,
    /// Where a lane reads its server's slot count, which then caps its concurrency.
    pub server_slots: crate::providers::ServerSlots,
}

impl Pipeline {
    /// The benchmarks of the pipeline's tasks, each once, in pipeline order (the report's
    /// sections and warnings follow it).
    #[must_use]
    pub fn benchmarks(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for t in &self.tasks {
            if !names.contains(&t.benchmark.as_str()) {
                names.push(&t.benchmark);
            }
        }
        names
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            retry_base_ms: 1000,
            retry_max_ms: 60_000,
            call_timeout_s: 900,
            request_timeout_s: 600,
            connect_timeout_s: 10,
            max_concurrency: None,
            concurrency_cap: 100,
            max_response_bytes: crate::providers::DEFAULT_MAX_RESPONSE_BYTES,
            per_shard_concurrency: None,
            background_poll_ms: 1000,
            background_poll_max_ms: 10_000,
            stream_idle_timeout_s: crate::providers::DEFAULT_STREAM_IDLE_TIMEOUT.as_secs(),
            stream_total_timeout_s: crate::providers::DEFAULT_STREAM_TOTAL_TIMEOUT.as_secs(),
            first_byte_timeout_s: crate::providers::DEFAULT_STREAM_FIRST_BYTE_TIMEOUT.as_secs(),
            server_slots: crate::providers::ServerSlots::Auto,
        }
    }
}

/// Prices for cost accounting, US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Price {
    /// Input (prompt) tokens.
    pub input_per_mtok: f64,
    /// Output tokens, reasoning included.
    pub output_per_mtok: f64,
    /// Input tokens served from the provider's prompt cache, where it reports them
    /// (`None`: priced as other input).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    /// What a batch API call costs as a share of the above (`batch_factor`; `None`: 0.5,
    /// the OpenAI, Anthropic and Gemini batch discount).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_factor: Option<f64>,
}

#[cfg(test)]
mod price_tests {
    use super::Price;

    #[test]
    fn cached_input_is_priced_apart_only_where_a_rate_is_given() {
        let p = Price { input_per_mtok: 2.0, output_per_mtok: 8.0, cached_input_per_mtok: Some(0.5), batch_factor: None };
        // 600k fresh × 2 + 400k cached × 0.5 + 100k × 8 = 1.2 + 0.2 + 0.8.
        assert!((p.cost(1_000_000, 400_000, 100_000) - 2.2).abs() < 1e-12);
        let flat = Price { cached_input_per_mtok: None, ..p };
        assert!((flat.cost(1_000_000, 400_000, 100_000) - 2.8).abs() < 1e-12);
        assert!((p.cost(10, 50, 0) - 10.0 * 0.5 / 1e6).abs() < 1e-15, "cached never exceeds input");
        assert!((p.batched().cost(1_000_000, 400_000, 100_000) - 1.1).abs() < 1e-12, "half price by default");
        let third = Price { batch_factor: Some(0.3), ..p };
        assert!((third.batched().cost(1_000_000, 0, 0) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn prices_that_would_switch_a_budget_off_are_refused_and_costs_never_wrap() {
        let p = Price { input_per_mtok: 2.0, output_per_mtok: 8.0, cached_input_per_mtok: None, batch_factor: None };
        assert!(p.problem().is_none());
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            assert!(Price { output_per_mtok: bad, ..p }.problem().is_some(), "{bad}");
            assert!(Price { cached_input_per_mtok: Some(bad), ..p }.problem().is_some(), "{bad}");
        }
        for bad in [0.0, 1.5, -0.5, f64::NAN] {
            assert!(Price { batch_factor: Some(bad), ..p }.problem().is_some(), "{bad}");
        }
        assert!(Price { batch_factor: Some(1.0), ..p }.problem().is_none());
        // Written in a task parameter: the same checks, and YAML's `.nan` arrives as null.
        let param = |v: serde_json::Value| Price::from_param(&v);
        assert_eq!(param(serde_json::json!({"input_per_mtok": 2.0, "output_per_mtok": 8.0})), Ok(p));
        assert!(param(serde_json::json!({"input_per_mtok": null, "output_per_mtok": 8.0})).is_err());
        assert!(param(serde_json::json!({"input_per_mtok": 2.0, "output_per_mtok": -8.0})).is_err());
        assert!(param(serde_json::json!({"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_factor": null})).is_err());
        assert!(param(serde_json::json!({"input_per_mtok": 2.0, "output_per_mtok": 8.0, "typo": 1})).is_err());
        // 2^63 tokens: a finite, non-negative cost.
        let cost = p.cost(u64::MAX, 0, u64::MAX);
        assert!(cost.is_finite() && cost > 0.0);
    }
}

impl Price {
    /// US dollars for `input` prompt tokens of which `cached` were cache hits, and `output`.
    /// Finite and non-negative for a checked price ([`Self::problem`]) whatever usage a
    /// provider reports: an absurd count clamps at `f64::MAX`, never wraps or turns NaN.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "token counts: a huge one only loses digits")]
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let cached = cached.min(input);
        let cached_rate = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        let usd = ((input - cached) as f64 * self.input_per_mtok + cached as f64 * cached_rate + output as f64 * self.output_per_mtok) / 1e6;
        if usd.is_nan() { 0.0 } else { usd.clamp(0.0, f64::MAX) }
    }

    /// What is wrong with this price, if anything: a rate that is negative, NaN or infinite
    /// (which would switch a budget off silently), or a `batch_factor` outside (0, 1].
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        let rates = [
            ("input_per_mtok", Some(self.input_per_mtok)),
            ("output_per_mtok", Some(self.output_per_mtok)),
            ("cached_input_per_mtok", self.cached_input_per_mtok),
        ];
        for (name, rate) in rates {
            if let Some(rate) = rate.filter(|r| !rate_ok(*r)) {
                return Some(format!("`price.{name}` must be a finite, non-negative number of US dollars per million tokens, not {rate}"));
            }
        }
        self.batch_factor.filter(|f| !factor_ok(*f)).map(|f| format!("`price.batch_factor` must be more than 0 and at most 1, not {f}"))
    }

    /// A price written inside a task parameter (a `qa` judge's or the Eleusis rule
    /// compiler's entry): the fields of a model's `price:`, checked as [`Self::problem`].
    ///
    /// # Errors
    /// An unknown or missing field, a value that is not a number, or a [`Self::problem`].
    pub fn from_param(value: &serde_json::Value) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Written {
            input_per_mtok: Option<f64>,
            output_per_mtok: Option<f64>,
            #[serde(default)]
            cached_input_per_mtok: Option<f64>,
            #[serde(default)]
            batch_factor: Option<f64>,
        }
        let written: Written = serde_json::from_value(value.clone())
            .map_err(|e| format!("`price` must be `{{input_per_mtok: …, output_per_mtok: …}}` (optional cached_input_per_mtok, batch_factor): {e}"))?;
        // YAML's `.nan` and `.inf` have no JSON number, so they arrive here as null.
        let rate =
            |name: &str, v: Option<f64>| v.ok_or_else(|| format!("`price.{name}` must be a finite, non-negative number of US dollars per million tokens"));
        let price = Self {
            input_per_mtok: rate("input_per_mtok", written.input_per_mtok)?,
            output_per_mtok: rate("output_per_mtok", written.output_per_mtok)?,
            cached_input_per_mtok: written.cached_input_per_mtok,
            batch_factor: written.batch_factor,
        };
        let object = value.as_object();
        for name in ["cached_input_per_mtok", "batch_factor"] {
            if object.and_then(|o| o.get(name)).is_some_and(serde_json::Value::is_null) {
                return Err(format!("`price.{name}` must be a finite number"));
            }
        }
        price.problem().map_or(Ok(price), Err)
    }

    /// The price of a call answered through a batch API: every rate times `batch_factor`
    /// (0.5 unless the entry says otherwise).
    #[must_use]
    pub fn batched(&self) -> Self {
        let factor = self.batch_factor.unwrap_or(0.5);
        Self {
            input_per_mtok: self.input_per_mtok * factor,
            output_per_mtok: self.output_per_mtok * factor,
            cached_input_per_mtok: self.cached_input_per_mtok.map(|rate| rate * factor),
            batch_factor: self.batch_factor,
        }
    }
}

/// A per-million-token rate a budget can hold: finite and not negative.
#[must_use]
pub fn rate_ok(rate: f64) -> bool {
    rate.is_finite() && rate >= 0.0
}

/// A batch factor that is a discount: in (0, 1].
#[must_use]
pub fn factor_ok(factor: f64) -> bool {
    factor > 0.0 && factor <= 1.0
}

/// One model entry: who answers, and with which settings.
#[derive(Clone, Debug, Serialize)]
pub struct ModelConfig {
    /// User label; appears in tables and cell ids, not in keys.
    pub id: String,
    /// Who answers: `builtin`, `scripted`, `openai`, `anthropic` or `gemini`.
    pub provider: super::Provider,
    /// Exact model name sent to the provider (or built-in agent name).
    pub model: String,
    /// Server base URL; part of the key because it can change answers.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the key; the key itself is
    /// never read here and the name is not part of any key.
    pub api_key_env: Option<String>,
    /// Generation or agent parameters, defaults applied.
    pub params: Params,
    /// Optional prices for the cost table (not part of any key).
    pub price: Option<Price>,
    /// Score answers the server says came from a model other than `model` (a gateway that
    /// routes elsewhere); off by default, so such an answer fails its call instead.
    pub accept_other_model: bool,
    /// Extra HTTP headers by lowercase name (Azure `api-key`, `anthropic-beta`): literal
    /// values are configuration and part of keys; `{env: VAR}` values are secrets, read at
    /// call time and never stored or keyed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderSource>,
    /// Which OpenAI API `provider: openai` calls use (`api:`); `auto`, the default, is left
    /// out of keys and dumps so existing ones stay as they were.
    #[serde(skip_serializing_if = "OpenAiApi::is_auto")]
    pub api: OpenAiApi,
    /// Whether Responses API calls run in background mode and are polled (`background:`
    /// `auto`, `true`, `false`); transport, in no key (the call keys as without it).
    #[serde(skip_serializing_if = "Background::is_auto")]
    pub background: Background,
    /// Whether calls stream (`stream:`); transport, so never in a key (not in
    /// [`Self::key_value`]).
    #[serde(skip_serializing_if = "StreamMode::is_auto")]
    pub stream: StreamMode,
    /// Whether single-turn calls go through the provider's batch API (`batch:`); transport,
    /// never in a key (not in [`Self::key_value`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<super::BatchMode>,
    /// The inference server evalgrid starts for this entry (`serve:`); `None` for a model
    /// behind an endpoint someone else runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serve: Option<super::serve::ServeConfig>,
    /// Agent settings (`agent:`) over a harbor task entry's, so one model with two agent
    /// settings is two contestants; keyed only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<serde_json::Map<String, Value>>,
}

/// Where an extra header's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderSource {
    /// Written in the pipeline file (not for credentials: those must use `env`).
    Value(String),
    /// The name of an environment variable read at call time.
    Env(String),
}

/// Header names that carry credentials: their values must come from `{env: VAR}`, so a
/// key written into a pipeline file is refused instead of reaching a cache key.
pub const CREDENTIAL_HEADERS: &[&str] = &["authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key", "cookie"];

impl ModelConfig {
    /// Whether a built-in agent plays (so no model is called).
    #[must_use]
    pub fn is_builtin(&self) -> bool {
        self.provider.is_builtin()
    }

    /// The part of the model that goes into step keys: everything that can
    /// change an answer, nothing that cannot (label, key variable name).
    #[must_use]
    pub fn key_value(&self) -> Value {
        let mut value = serde_json::json!({
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "params": self.params,
        });
        // Only literal header values can change an answer and be keyed; absent when none,
        // so every existing key stays as it was.
        let literal: BTreeMap<&String, &String> = self
            .headers
            .iter()
            .filter_map(|(name, source)| match source {
                HeaderSource::Value(text) => Some((name, text)),
                HeaderSource::Env(_) => None,
            })
            .collect();
        if !literal.is_empty() {
            value["headers"] = serde_json::json!(literal);
        }
        // The API changes the request (and, through `auto`'s routing, which models use
        // which); keyed only when not the default, so every existing key stays.
        if !self.api.is_auto() {
            value["api"] = serde_json::json!(self.api);
        }
        // A served model is its weights, engine and output-changing settings; its URL
        // (a free port each run) is no part of it. Absent otherwise, so keys stay.
        if let Some(serve) = &self.serve {
            value["base_url"] = Value::Null;
            value["serve"] = serve.key_value();
        }
        if let Some(agent) = &self.agent {
            value["agent"] = Value::Object(agent.clone());
        }
        value
    }
}

/// One task of one benchmark, as the catalog resolved it.
#[derive(Clone, Debug, Serialize)]
pub struct TaskInstance {
    /// Benchmark name (`eleusis`, ...).
    pub benchmark: String,
    /// Task id inside the benchmark (`even_ranks_only`, ...).
    pub task: String,
    /// Hash of the task's content (rule code, item text, ...).
    pub content_hash: String,
    /// Task parameters, defaults applied.
    pub params: Params,
    /// Version of the benchmark's episode code; bumped when behaviour changes.
    pub episode_version: u32,
    /// Version of the benchmark's scorer.
    pub score_version: u32,
    /// Which summary table the task belongs to (e.g. `bbeh` vs `bbeh-mini`):
    /// per-model aggregates never mix suites. Not part of any key.
    pub suite: String,
}

impl TaskInstance {
    /// `benchmark/task`, the name filters and tables use.
    #[must_use]
    pub fn qualified(&self) -> String {
        format!("{}/{}", self.benchmark, self.task)
    }
}

/// A grid filter; `None` fields match everything, names are globs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CellFilter {
    /// Glob over model ids.
    pub model: Option<String>,
    /// Glob over `benchmark/task`.
    pub task: Option<String>,
    /// Glob over the seed's decimal form.
    pub seed: Option<String>,
}

impl CellFilter {
    /// True when every present field matches.
    #[must_use]
    pub fn matches(&self, model: &str, task: &str, seed: u64) -> bool {
        let seed = seed.to_string();
        self.model.as_deref().is_none_or(|g| glob_match(g, model))
            && self.task.as_deref().is_none_or(|g| glob_match(g, task))
            && self.seed.as_deref().is_none_or(|g| glob_match(g, &seed))
    }
}

/// Which metrics to compute (empty = all the benchmark offers).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MetricsConfig {
    /// Selected metric names, in the order given.
    pub select: Vec<String>,
}

/// Presentation options; changing them only re-renders the report.
#[derive(Clone, Debug, Serialize)]
pub struct ReportConfig {
    /// Heading of the summary.
    pub title: String,
    /// Decimal places in tables.
    pub decimals: u32,
    /// Prices of helper models that are not pipeline models, by the id their calls are
    /// counted under (the Eleusis `rule-compiler`): only the cost table uses them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
    /// `report.weirdml`: time horizons of the WeirdML runs (absent, and out of every key,
    /// when not set, so existing keys stay as they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weirdml: Option<WeirdMlReport>,
}

/// An input file of a report setting: read once at load, so the fit uses exactly the bytes
/// whose hash the keys hold; keyed by that hash alone, never by path (lessons §2).
#[derive(Clone, Debug, Serialize)]
pub struct ReportFile {
    /// Where it was read from (messages only).
    #[serde(skip)]
    pub path: PathBuf,
    /// The bytes read.
    #[serde(skip)]
    pub bytes: std::sync::Arc<Vec<u8>>,
    /// blake3 of the bytes: what the metrics and report keys see.
    pub blake3: String,
}

/// `report.weirdml`: place the pipeline's models on the WeirdML author's time-horizon
/// timeline (spec `weirdml-published.md`), given human-time estimates per task.
#[derive(Clone, Debug, Serialize)]
pub struct WeirdMlReport {
    /// Human-time estimates (`all_estimates.json`).
    pub estimates: ReportFile,
    /// The author's `weirdml_results.json`, whose models are drawn beside the pipeline's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<ReportFile>,
    /// Results-file keys of the published models drawn (empty: every one with all tasks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub published_models: Vec<String>,
    /// Release date (`YYYY-MM-DD`) per pipeline model id, for the timeline.
    pub release_dates: BTreeMap<String, String>,
    /// Task-level bootstrap resamples per model (5,000 as published).
    pub resamples: usize,
}

/// Shell-style glob with `*` (any run) and `?` (one character).
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*parity*", "eleusis/opposite_parity"));
        assert!(glob_match("ideal*", "ideal"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("x*", "yx"));
    }

    #[test]
    fn filter_requires_every_present_field() {
        let f = CellFilter { model: Some("r*".into()), task: None, seed: Some("1".into()) };
        assert!(f.matches("random", "eleusis/x", 1));
        assert!(!f.matches("random", "eleusis/x", 2));
        assert!(!f.matches("oracle", "eleusis/x", 1));
    }
}
