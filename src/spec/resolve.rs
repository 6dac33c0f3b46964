//! Raw YAML mirror → validated [`Pipeline`], collecting every problem.

use std::collections::{BTreeMap, BTreeSet};

use serde_saphyr::Spanned;

use super::catalog::{Catalog, CatalogIssue, IssueSite, Selection};
use super::diagnostic::{Diagnostic, Position, suggestion};
use super::pipeline::{
    CREDENTIAL_HEADERS, CellFilter, HeaderSource, MetricsConfig, ModelConfig, Params, Pipeline, Price, ReportConfig, ReportFile, TaskInstance, TransportConfig,
    WeirdMlReport,
};
use super::provider::Provider;
use super::raw::{RawFilter, RawModel, RawPipeline, RawPrice, RawSeeds, RawSelect, RawTask, RawWeirdMlReport};
use super::yaml::position_of;
use crate::providers::{Background, OpenAiApi, StreamMode};

/// Largest seed range accepted, to stop a typo from planning billions of cells.
const MAX_SEEDS: u64 = 1_000_000;

/// Partially built pipeline plus the problems met so far.
struct Resolver<'c> {
    catalog: &'c dyn Catalog,
    diagnostics: Vec<Diagnostic>,
    /// Folder of the pipeline file, for relative paths in it.
    base_dir: std::path::PathBuf,
}

/// Validates `raw` against `catalog`; on failure returns every diagnostic.
pub fn resolve(mut raw: RawPipeline, catalog: &dyn Catalog, source_path: std::path::PathBuf, source_hash: String) -> Result<Pipeline, Vec<Diagnostic>> {
    let base_dir = source_path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let mut r = Resolver { catalog, diagnostics: Vec::new(), base_dir };
    // A task entry's `agent:` is its `params.agent`, said once.
    for entry in &mut raw.tasks.value {
        if let Some(agent) = entry.agent.take() {
            if entry.params.contains_key("agent") {
                r.push(position_of(&agent), "`agent:` is given twice: on the entry and in `params`", None);
            } else {
                entry.params.insert("agent".into(), agent);
            }
        }
    }
    let name = r.name(&raw.name);
    let tasks = r.tasks(&raw.tasks);
    let benchmarks: Vec<String> = tasks.iter().map(|t| t.benchmark.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let models = r.models(&raw.models, &benchmarks);
    let seeds = r.seeds(&raw.seeds);
    let include = raw.include.iter().map(filter).collect::<Vec<_>>();
    let exclude = raw.exclude.iter().map(filter).collect::<Vec<_>>();
    let metrics = r.metrics(raw.metrics.and_then(|m| m.select).unwrap_or_default(), &benchmarks);
    let report = raw.report.map_or_else(
        || ReportConfig { title: name.clone(), decimals: 3, prices: BTreeMap::new(), weirdml: None },
        |rep| ReportConfig {
            weirdml: rep.weirdml.as_ref().and_then(|w| {
                if !benchmarks.iter().any(|b| b == "weirdml") {
                    r.push(position_of(&w.estimates), "`report.weirdml` needs WeirdML tasks in this pipeline: its horizons are fitted on their runs", None);
                }
                r.weirdml_report(w, &models)
            }),
            prices: rep.prices.iter().filter_map(|(id, p)| Some((id.clone(), r.price(p)?))).collect(),
            title: rep.title.unwrap_or_else(|| name.clone()),
            decimals: rep.decimals.map_or(3, |d| {
                if d.value > 12 {
                    r.push(position_of(&d), "`report.decimals` must be at most 12", None);
                }
                d.value
            }),
        },
    );
    let transport = r.transport(raw.transport.unwrap_or_default());
    let budget_usd = raw.budget.map(|b| {
        if !(b.usd.value.is_finite() && b.usd.value > 0.0) {
            r.push(position_of(&b.usd), "`budget.usd` must be a positive number of US dollars", None);
        }
        b.usd.value
    });
    let mut report = report;
    r.helpers(&raw.tasks, &models, &mut report.prices, budget_usd.is_some());
    r.servable(&raw.models, &models, (&tasks, &seeds, &include, &exclude));
    if budget_usd.is_some() {
        r.unpriced(&raw.models, &models, (&tasks, &seeds, &include, &exclude));
    }
    if r.diagnostics.is_empty() {
        let cells = count_cells(&models, &tasks, &seeds, &include, &exclude);
        if cells == 0 {
            r.push(
                position_of(&raw.models),
                "the grid is empty: no model × task × seed cell is left",
                Some("check `include`/`exclude` and that `models`, `tasks` and `seeds` are non-empty".into()),
            );
        }
    }
    if r.diagnostics.is_empty() {
        Ok(Pipeline {
            name,
            source_path,
            source_hash,
            models,
            tasks,
            seeds,
            include,
            exclude,
            metrics,
            report,
            transport,
            sandbox: raw.sandbox.unwrap_or_default(),
            budget_usd,
        })
    } else {
        r.diagnostics.sort_by_key(|d| d.position);
        Err(r.diagnostics)
    }
}

impl Resolver<'_> {
    /// Each model of a kept cell that cannot play its task (a log-probability scorer on an
    /// endpoint without them) is an error at the model's `provider`, before any call.
    fn servable(
        &mut self,
        raw: &Spanned<Vec<RawModel>>,
        models: &[ModelConfig],
        (tasks, seeds, include, exclude): (&[TaskInstance], &[u64], &[CellFilter], &[CellFilter]),
    ) {
        for m in models {
            let Some(site) = raw.value.iter().find(|r| r.id.value == m.id).map(|r| position_of(&r.provider)) else { continue };
            for t in tasks {
                let q = t.qualified();
                let kept = seeds
                    .iter()
                    .any(|&s| (include.is_empty() || include.iter().any(|f| f.matches(&m.id, &q, s))) && !exclude.iter().any(|f| f.matches(&m.id, &q, s)));
                if kept && let Some(why) = self.catalog.cannot_serve(t, m) {
                    self.push(
                        site,
                        format!("model `{}` cannot play task `{q}`: {why}", m.id),
                        Some("`exclude:` this model × task pair, or use a server that gives them (see docs/tasks.md, \"Log-probabilities\")".into()),
                    );
                }
            }
        }
    }
}

fn filter(raw: &Spanned<RawFilter>) -> CellFilter {
    CellFilter { model: raw.value.model.clone(), task: raw.value.task.clone(), seed: raw.value.seed.map(|s| s.to_string()) }
}

fn count_cells(models: &[ModelConfig], tasks: &[TaskInstance], seeds: &[u64], include: &[CellFilter], exclude: &[CellFilter]) -> usize {
    let mut n = 0;
    for m in models {
        for t in tasks {
            let q = t.qualified();
            for &s in seeds {
                let kept = (include.is_empty() || include.iter().any(|f| f.matches(&m.id, &q, s))) && !exclude.iter().any(|f| f.matches(&m.id, &q, s));
                n += usize::from(kept);
            }
        }
    }
    n
}

/// A calendar date written `YYYY-MM-DD`.
fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else { return false };
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else { return false };
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return false,
    };
    parts[0].len() == 4 && parts[1].len() == 2 && parts[2].len() == 2 && (1..=days).contains(&d)
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Resolver<'_> {
    /// A `price:` entry, each rate finite and not negative and `batch_factor` in (0, 1],
    /// else reported at the value (a NaN, infinite or negative rate would switch a budget
    /// off silently); `None` when any is wrong.
    fn price(&mut self, raw: &RawPrice) -> Option<Price> {
        let before = self.diagnostics.len();
        let rates = [
            ("input_per_mtok", Some(&raw.input_per_mtok)),
            ("output_per_mtok", Some(&raw.output_per_mtok)),
            ("cached_input_per_mtok", raw.cached_input_per_mtok.as_ref()),
        ];
        for (name, rate) in rates {
            if let Some(rate) = rate.filter(|r| !super::pipeline::rate_ok(r.value)) {
                self.push(
                    position_of(rate),
                    format!("`price.{name}` must be a finite, non-negative number of US dollars per million tokens, not {}", rate.value),
                    None,
                );
            }
        }
        if let Some(factor) = raw.batch_factor.as_ref().filter(|f| !super::pipeline::factor_ok(f.value)) {
            self.push(
                position_of(factor),
                format!("`price.batch_factor` must be more than 0 and at most 1, not {}", factor.value),
                Some("it is the share of the price a batch API call costs, e.g. 0.5".into()),
            );
        }
        (self.diagnostics.len() == before).then(|| Price {
            input_per_mtok: raw.input_per_mtok.value,
            output_per_mtok: raw.output_per_mtok.value,
            cached_input_per_mtok: raw.cached_input_per_mtok.as_ref().map(|p| p.value),
            batch_factor: raw.batch_factor.as_ref().map(|p| p.value),
        })
    }

    /// The helper models the tasks call (a `qa` judge, the Eleusis rule compiler): a `price:`
    /// written on one joins `prices` under the id its calls are counted under (the cost
    /// table, the estimate and the budget read it there); under a budget, a paid helper
    /// without one is refused at its entry, as a contestant is.
    fn helpers(&mut self, tasks: &Spanned<Vec<RawTask>>, models: &[ModelConfig], prices: &mut BTreeMap<String, Price>, budget: bool) {
        let written = prices.clone();
        let mut lifted: BTreeMap<String, Price> = BTreeMap::new();
        for entry in &tasks.value {
            for helper in self.catalog.helpers(&entry.benchmark.value, &entry.params.iter().map(|(k, v)| (k.clone(), v.value.value.clone())).collect()) {
                let at = entry.params.get(helper.param).map_or(position_of(&entry.benchmark), position_of);
                let id = helper.model.id.clone();
                match helper.model.price {
                    Some(price) if price.problem().is_some() => {}
                    Some(price) => {
                        let other = lifted.get(&id).or_else(|| written.get(&id)).copied();
                        if other.is_some_and(|other| other != price) {
                            self.push(
                                at,
                                format!("`{id}` has two different prices here and elsewhere: its calls are counted under the one id `{id}`, so every `{id}` needs the same price"),
                                None,
                            );
                        }
                        lifted.insert(id.clone(), price);
                        prices.insert(id, price);
                    }
                    None => {
                        let paid = !helper.model.provider.is_builtin() && !helper.model.provider.is_scripted();
                        let called = models.iter().any(|m| helper.for_builtin || !m.provider.is_builtin());
                        if budget && paid && called && !written.contains_key(&id) {
                            self.push(
                                at,
                                format!("the `{id}` model `{}` has no price, so a budget cannot hold its calls", helper.model.model),
                                Some(format!(
                                    "set `price: {{input_per_mtok: …, output_per_mtok: …}}` in its entry (`params.{}`), or run without `budget.usd`",
                                    helper.param
                                )),
                            );
                        }
                    }
                }
            }
        }
    }

    /// Under a budget, every model with cells that calls a paid API needs a `price:`.
    fn unpriced(&mut self, raw: &Spanned<Vec<RawModel>>, models: &[ModelConfig], grid: (&[TaskInstance], &[u64], &[CellFilter], &[CellFilter])) {
        let (tasks, seeds, include, exclude) = grid;
        for m in models.iter().filter(|m| m.price.is_none() && !m.provider.is_builtin() && !m.provider.is_scripted()) {
            if count_cells(std::slice::from_ref(m), tasks, seeds, include, exclude) == 0 {
                continue;
            }
            let at = raw.value.iter().find(|r| r.id.value == m.id).map_or(position_of(raw), |r| position_of(&r.id));
            self.push(
                at,
                format!("model `{}` has no price, so a budget cannot hold its calls", m.id),
                Some("set `price: {input_per_mtok: …, output_per_mtok: …}` on the model, or run without `budget.usd`".into()),
            );
        }
    }

    fn push(&mut self, position: Position, message: impl Into<String>, hint: Option<String>) {
        self.diagnostics.push(Diagnostic::new(position, message).with_hint(hint));
    }

    /// The pipeline's name is its reports folder's name, so it must be one path segment:
    /// `..` would write the report into the project root, `.` into `reports/` itself.
    fn name(&mut self, name: &Spanned<String>) -> String {
        if !is_identifier(&name.value) {
            self.push(position_of(name), format!("pipeline name `{}` must be non-empty and use only letters, digits, `-`, `_`, `.`", name.value), None);
        } else if name.value.bytes().all(|b| b == b'.') {
            self.push(
                position_of(name),
                format!("pipeline name `{}` is not a folder name: the report goes to `reports/<name>/`", name.value),
                Some("use a name with a letter or digit, e.g. `my-eval`".into()),
            );
        }
        name.value.clone()
    }

    fn transport(&mut self, raw: super::raw::RawTransport) -> TransportConfig {
        let d = TransportConfig::default();
        let max_attempts = self.at_least_one(raw.max_attempts, "max_attempts").unwrap_or(d.max_attempts);
        let max_response_bytes = self.at_least_one(raw.max_response_bytes, "max_response_bytes").unwrap_or(d.max_response_bytes);
        TransportConfig {
            max_attempts,
            max_response_bytes,
            retry_base_ms: raw.retry_base_ms.unwrap_or(d.retry_base_ms),
            retry_max_ms: raw.retry_max_ms.unwrap_or(d.retry_max_ms),
            call_timeout_s: raw.call_timeout_s.unwrap_or(d.call_timeout_s),
            request_timeout_s: raw.request_timeout_s.unwrap_or(d.request_timeout_s),
            connect_timeout_s: raw.connect_timeout_s.unwrap_or(d.connect_timeout_s),
            max_concurrency: self.at_least_one(raw.max_concurrency, "max_concurrency"),
            concurrency_cap: self.at_least_one(raw.concurrency_cap, "concurrency_cap").unwrap_or(d.concurrency_cap),
            per_shard_concurrency: self.at_least_one(raw.per_shard_concurrency, "per_shard_concurrency"),
            background_poll_ms: raw.background_poll_ms.unwrap_or(d.background_poll_ms).max(1),
            background_poll_max_ms: raw.background_poll_max_ms.unwrap_or(d.background_poll_max_ms).max(1),
            stream_idle_timeout_s: self.at_least_one(raw.stream_idle_timeout_s, "stream_idle_timeout_s").unwrap_or(d.stream_idle_timeout_s),
            stream_total_timeout_s: self.at_least_one(raw.stream_total_timeout_s, "stream_total_timeout_s").unwrap_or(d.stream_total_timeout_s),
            first_byte_timeout_s: self.at_least_one(raw.first_byte_timeout_s, "first_byte_timeout_s").unwrap_or(d.first_byte_timeout_s),
            server_slots: raw.server_slots.map_or(d.server_slots, |name| self.server_slots(&name)),
        }
    }

    /// `transport.server_slots`: one of its names, else reported at its position (and `auto`).
    fn server_slots(&mut self, name: &Spanned<String>) -> crate::providers::ServerSlots {
        use crate::providers::ServerSlots;
        ServerSlots::from_name(&name.value).unwrap_or_else(|| {
            let names = ServerSlots::NAMES.map(|n| format!("`{n}`")).join(", ");
            self.push(position_of(name), format!("`transport.server_slots` must be one of {names}, not `{}`", name.value), None);
            ServerSlots::Auto
        })
    }

    /// A `transport.{name}` count, size or timeout that must be at least 1 (zero would
    /// stop every call): 0 is reported at its position and read as 1.
    fn at_least_one<T: Copy + Ord + From<u8>>(&mut self, raw: Option<Spanned<T>>, name: &str) -> Option<T> {
        let raw = raw?;
        if raw.value == T::from(0) {
            self.push(position_of(&raw), format!("`transport.{name}` must be at least 1"), None);
        }
        Some(raw.value.max(T::from(1)))
    }

    /// `scripted` models name a replies file (relative to the pipeline);
    /// its content hash joins the params so an edited script invalidates.
    fn scripted_params(&mut self, m: &RawModel, mut params: Params) -> Option<Params> {
        let Some(file) = params.get("file").and_then(serde_json::Value::as_str).map(str::to_owned) else {
            self.push(position_of(&m.provider), "a `scripted` model needs `params.file`: a JSON replies file", None);
            return None;
        };
        let path = self.base_dir.join(&file);
        match std::fs::read(&path) {
            Ok(bytes) => {
                params.insert("file".into(), serde_json::Value::from(path.display().to_string()));
                params.insert("file_blake3".into(), serde_json::Value::from(blake3::hash(&bytes).to_hex().to_string()));
                Some(params)
            }
            Err(e) => {
                self.push(position_of(&m.provider), format!("cannot read replies file `{}`: {e}", path.display()), None);
                None
            }
        }
    }

    /// `report.weirdml`: its files read (paths relative to the pipeline) and checked to be
    /// JSON, release dates checked against the models and the calendar.
    fn weirdml_report(&mut self, raw: &RawWeirdMlReport, models: &[ModelConfig]) -> Option<WeirdMlReport> {
        let estimates = self.report_file(&raw.estimates, "estimates");
        let published = raw.published.as_ref().map(|p| self.report_file(p, "published"));
        if let (Some(first), None) = (raw.published_models.first(), &raw.published) {
            self.push(position_of(first), "`report.weirdml.published_models` needs `report.weirdml.published`, the results file they are in", None);
        }
        let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        let mut release_dates = BTreeMap::new();
        for (id, date) in &raw.release_dates {
            if !ids.contains(&id.as_str()) {
                self.push(
                    position_of(date),
                    format!("`report.weirdml.release_dates` names `{id}`, which is not a model of this pipeline"),
                    suggestion(id, &ids),
                );
            } else if !is_date(&date.value) {
                self.push(
                    position_of(date),
                    format!("`report.weirdml.release_dates.{id}`: `{}` is not a date", date.value),
                    Some("write it as YYYY-MM-DD".into()),
                );
            }
            release_dates.insert(id.clone(), date.value.clone());
        }
        let resamples = raw.resamples.as_ref().map_or(5_000, |n| {
            if n.value == 0 {
                self.push(position_of(n), "`report.weirdml.resamples` must be at least 1", None);
            }
            n.value
        });
        Some(WeirdMlReport {
            estimates: estimates?,
            published: published.map(|p| p.ok_or(())).transpose().ok()?,
            published_models: raw.published_models.iter().map(|m| m.value.clone()).collect(),
            release_dates,
            resamples,
        })
    }

    /// A JSON file named in `report.weirdml.<what>`, read once and hashed.
    fn report_file(&mut self, raw: &Spanned<String>, what: &str) -> Option<ReportFile> {
        let path = self.base_dir.join(&raw.value);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => {
                self.push(
                    position_of(raw),
                    format!("`report.weirdml.{what}`: cannot read `{}`: {e}", path.display()),
                    Some("paths are relative to the pipeline file".into()),
                );
                return None;
            }
        };
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            self.push(position_of(raw), format!("`report.weirdml.{what}`: `{}` is not JSON: {e}", path.display()), None);
            return None;
        }
        let blake3 = blake3::hash(&bytes).to_hex().to_string();
        Some(ReportFile { path, bytes: std::sync::Arc::new(bytes), blake3 })
    }

    fn metrics(&mut self, select: Vec<Spanned<String>>, benchmarks: &[String]) -> MetricsConfig {
        let mut known: Vec<String> = benchmarks.iter().flat_map(|b| self.catalog.metrics(b)).collect();
        known.sort_unstable();
        known.dedup();
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        for name in select {
            if !known.contains(&name.value.as_str()) {
                self.push(position_of(&name), format!("unknown metric `{}`", name.value), suggestion(&name.value, &known));
            } else if out.contains(&name.value) {
                self.push(position_of(&name), format!("metric `{}` selected twice", name.value), None);
            } else {
                out.push(name.value);
            }
        }
        MetricsConfig { select: out }
    }

    fn seeds(&mut self, seeds: &Spanned<RawSeeds>) -> Vec<u64> {
        let list: Vec<u64> = match &seeds.value {
            RawSeeds::List(list) => list.clone(),
            RawSeeds::Range { from, to } if from > to => {
                self.push(position_of(seeds), format!("seed range is empty: from {from} > to {to}"), None);
                Vec::new()
            }
            RawSeeds::Range { from, to } if to - from >= MAX_SEEDS => {
                self.push(position_of(seeds), format!("seed range has more than {MAX_SEEDS} seeds"), None);
                Vec::new()
            }
            RawSeeds::Range { from, to } => (*from..=*to).collect(),
        };
        let set: BTreeSet<u64> = list.iter().copied().collect();
        if set.len() != list.len() {
            self.push(position_of(seeds), "seeds contain duplicates", None);
        }
        if set.is_empty() && self.diagnostics.is_empty() {
            self.push(position_of(seeds), "`seeds` is empty", Some("give at least one seed, e.g. `seeds: [0]`".into()));
        }
        set.into_iter().collect()
    }

    fn tasks(&mut self, tasks: &Spanned<Vec<RawTask>>) -> Vec<TaskInstance> {
        if tasks.value.is_empty() {
            self.push(position_of(tasks), "`tasks` is empty", None);
        }
        let known = self.catalog.benchmarks();
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for entry in &tasks.value {
            let bench = &entry.benchmark.value;
            if !known.contains(&bench.as_str()) {
                self.push(
                    position_of(&entry.benchmark),
                    format!("unknown benchmark `{bench}`"),
                    suggestion(bench, &known).or_else(|| Some(format!("known benchmarks: {}", known.join(", ")))),
                );
                continue;
            }
            let selection = match entry.select.as_ref().map(|s| &s.value) {
                None | Some(RawSelect::All) => Selection::All,
                Some(RawSelect::Names(names)) => Selection::Names(names.iter().map(|n| n.value.clone()).collect()),
            };
            let params = entry.params.iter().map(|(k, v)| (k.clone(), v.value.value.clone())).collect();
            match self.catalog.resolve_tasks_in(&self.base_dir, bench, &selection, &params) {
                Ok(instances) => {
                    for t in instances {
                        if seen.insert((t.benchmark.clone(), t.task.clone())) {
                            out.push(t);
                        } else {
                            self.push(position_of(&entry.benchmark), format!("task `{}` is selected twice", t.qualified()), None);
                        }
                    }
                }
                Err(issues) => {
                    for issue in issues {
                        let pos = task_site(entry, &issue);
                        self.push(pos, issue.message, issue.hint);
                    }
                }
            }
        }
        out
    }

    fn models(&mut self, models: &Spanned<Vec<RawModel>>, benchmarks: &[String]) -> Vec<ModelConfig> {
        if models.value.is_empty() {
            self.push(position_of(models), "`models` is empty", None);
        }
        let providers = self.catalog.providers();
        let mut ids = BTreeMap::new();
        let mut out = Vec::new();
        for m in &models.value {
            let id = &m.id.value;
            if !is_identifier(id) {
                self.push(position_of(&m.id), format!("model id `{id}` must use only letters, digits, `-`, `_`, `.`"), None);
            }
            if let Some(first) = ids.insert(id.clone(), position_of(&m.id)) {
                self.push(position_of(&m.id), format!("duplicate model id `{id}`"), Some(format!("first defined at line {}; ids must be unique", first.line)));
            }
            let name = &m.provider.value;
            let Some(provider) = Provider::parse(name).filter(|p| providers.contains(p)) else {
                let names: Vec<&str> = providers.iter().map(|p| p.as_str()).collect();
                self.push(position_of(&m.provider), format!("unknown provider `{name}`"), suggestion(name, &names));
                continue;
            };
            let raw_params = unspan(&m.params);
            let params = if provider.is_builtin() {
                if m.base_url.is_some() {
                    self.push(position_of(&m.provider), "built-in models take no `base_url`", None);
                }
                match self.catalog.resolve_builtin(&m.model.value, &raw_params, benchmarks) {
                    Ok(p) => p,
                    Err(issues) => {
                        for issue in issues {
                            let pos = match &issue.site {
                                IssueSite::Param(name) => m.params.get(name).map_or(position_of(&m.model), position_of),
                                _ => position_of(&m.model),
                            };
                            self.push(pos, issue.message, issue.hint);
                        }
                        continue;
                    }
                }
            } else if provider.is_scripted() {
                match self.scripted_params(m, raw_params) {
                    Some(p) => p,
                    None => continue,
                }
            } else {
                raw_params
            };
            let headers = self.headers(m);
            let api = self.api(m, provider);
            let background = self.background(m, provider, api);
            let stream = self.stream(m, provider);
            let batch = self.batch(m, provider);
            let serve = self.serve(m, provider);
            let agent = self.agent(m, provider);
            out.push(ModelConfig {
                id: id.clone(),
                provider,
                model: m.model.value.clone(),
                base_url: m.base_url.as_ref().map(|b| b.value.trim_end_matches('/').to_owned()),
                api_key_env: m.api_key_env.as_ref().map(|k| k.value.clone()),
                params,
                price: m.price.as_ref().and_then(|p| self.price(p)),
                accept_other_model: m.accept_other_model.as_ref().is_some_and(|a| a.value),
                headers,
                api,
                background,
                stream,
                batch,
                serve,
                agent,
            });
        }
        out
    }

    /// `agent:` of a model entry: settings over the harbor entries' agent (checked here).
    fn agent(&mut self, m: &RawModel, provider: Provider) -> Option<serde_json::Map<String, serde_json::Value>> {
        let raw = m.agent.as_ref()?;
        if provider.is_builtin() {
            self.push(position_of(raw), "a built-in agent takes no `agent:` settings", Some("`agent:` sets the terminal agent that API models play".into()));
            return None;
        }
        match super::agent::check_overrides(&raw.value) {
            Ok(map) => Some(map),
            Err(message) => {
                self.push(position_of(raw), message, None);
                None
            }
        }
    }

    /// `serve:` of a model entry: an OpenAI- or Anthropic-protocol model whose server
    /// evalgrid starts, so it takes no `base_url` of its own.
    fn serve(&mut self, m: &RawModel, provider: Provider) -> Option<super::serve::ServeConfig> {
        let raw = m.serve.as_ref()?;
        if !matches!(provider, Provider::OpenAi | Provider::Anthropic) {
            self.push(
                position_of(raw),
                format!("`serve` needs `provider: openai` (or `anthropic`), the protocols llama.cpp and vLLM serve, not `{provider}`"),
                None,
            );
            return None;
        }
        if let Some(url) = &m.base_url {
            self.push(position_of(url), "a model with `serve` takes no `base_url`: evalgrid starts the server on a free loopback port", None);
        }
        match super::serve::resolve(raw, &self.base_dir) {
            Ok(serve) => Some(serve),
            Err(problems) => {
                for (at, message, hint) in problems {
                    self.push(at, format!("model `{}`: {message}", m.id.value), hint);
                }
                None
            }
        }
    }

    /// `stream:` of a model entry (`auto`, `true`, `false`), for models called over HTTP;
    /// `params.stream` is refused, since it would enter the cache key and the body parser.
    fn stream(&mut self, m: &RawModel, provider: Provider) -> StreamMode {
        let over_http = provider.over_http();
        for name in ["stream", "stream_options"] {
            if let Some(raw) = m.params.get(name).filter(|_| over_http) {
                self.push(
                    position_of(raw),
                    format!("`params.{name}` is not a generation parameter"),
                    Some("set `stream: true`, `false` or `auto` on the model entry: streaming is transport, never part of a cache key".into()),
                );
            }
        }
        let Some(raw) = &m.stream else { return StreamMode::Auto };
        let at = position_of(raw);
        if !over_http {
            self.push(at, format!("`stream` applies to models called over HTTP, not `provider: {provider}`"), None);
            return StreamMode::Auto;
        }
        StreamMode::parse(&raw.value).unwrap_or_else(|| {
            self.push(
                at,
                format!("unknown `stream: {}`", raw.value),
                Some(format!(
                    "use `auto` (stream when the output cap is {} tokens or more, or Anthropic thinking is on), `true` or `false`",
                    crate::providers::stream::AUTO_STREAM_MIN_TOKENS
                )),
            );
            StreamMode::Auto
        })
    }

    /// `api:` of a model entry: `chat`, `responses` or `auto`, on `provider: openai` only.
    fn api(&mut self, m: &RawModel, provider: Provider) -> OpenAiApi {
        let Some(raw) = &m.api else { return OpenAiApi::Auto };
        let at = position_of(raw);
        if provider != Provider::OpenAi {
            self.push(at, format!("`api` applies to `provider: openai` only, not `{provider}`"), None);
            return OpenAiApi::Auto;
        }
        OpenAiApi::parse(&raw.value).unwrap_or_else(|| {
            self.push(at, format!("unknown `api: {}`", raw.value), Some("use `chat` (Chat Completions), `responses` (Responses API) or `auto`".into()));
            OpenAiApi::Auto
        })
    }

    /// `background:` of a model entry: `auto`, `true` or `false`, on `provider: openai` only
    /// and not with `api: chat` (background mode is a Responses API feature).
    fn background(&mut self, m: &RawModel, provider: Provider, api: OpenAiApi) -> Background {
        let Some(raw) = &m.background else { return Background::Auto };
        let at = position_of(raw);
        if provider != Provider::OpenAi {
            self.push(at, format!("`background` applies to `provider: openai` only, not `{provider}`"), None);
            return Background::Auto;
        }
        let Some(background) = Background::parse(&raw.value) else {
            self.push(at, format!("unknown `background: {}`", raw.value), Some("use `auto`, `true` or `false`".into()));
            return Background::Auto;
        };
        if api == OpenAiApi::Chat && background == Background::On {
            self.push(at, "`background: true` needs the Responses API", Some("use `api: responses` (or `auto`), or drop `background`".into()));
        }
        background
    }

    /// `batch:` of a model entry: a switch or `{max_requests, poll_ms, window_ms, lookup_ms}`, for the
    /// providers whose batch API evalgrid speaks (OpenAI Chat Completions and Responses,
    /// Anthropic Message Batches, Gemini batch mode).
    fn batch(&mut self, m: &RawModel, provider: Provider) -> Option<crate::spec::BatchMode> {
        let raw = m.batch.as_ref()?;
        let at = position_of(raw);
        match crate::spec::BatchMode::parse(&raw.value) {
            Ok(Some(_)) if !matches!(provider, Provider::OpenAi | Provider::Anthropic | Provider::Gemini) => {
                self.push(
                    at,
                    format!("`batch` is not supported for `provider: {provider}`"),
                    Some("batch mode speaks the OpenAI, Anthropic and Gemini batch APIs; drop `batch` for this model".into()),
                );
                None
            }
            Ok(mode) => mode,
            Err(message) => {
                self.push(at, message, Some("use `batch: true` or `batch: {max_requests: 500, poll_ms: 60000, window_ms: 2000}`".into()));
                None
            }
        }
    }

    /// `headers:` of a model entry: valid names, a string or `{env: VAR}` each, and
    /// credentials only from the environment (a literal one would be stored in keys).
    fn headers(&mut self, m: &RawModel) -> BTreeMap<String, HeaderSource> {
        let mut out = BTreeMap::new();
        for (name, raw) in &m.headers {
            let lower = name.to_ascii_lowercase();
            let at = position_of(raw);
            if lower.is_empty() || !lower.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
                self.push(at, format!("`{name}` is not a valid HTTP header name"), None);
                continue;
            }
            if lower == "content-type" || lower == "content-length" || lower == "host" {
                self.push(at, format!("header `{name}` is set by evalgrid and cannot be replaced"), None);
                continue;
            }
            let source = match &raw.value {
                serde_json::Value::String(_) if CREDENTIAL_HEADERS.contains(&lower.as_str()) => {
                    self.push(
                        at,
                        format!("header `{name}` carries a credential and must not be written in the pipeline file"),
                        Some(format!("use `{name}: {{env: VARIABLE}}`: the value is then read at call time and never stored")),
                    );
                    continue;
                }
                serde_json::Value::String(text) if text.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) => HeaderSource::Value(text.clone()),
                serde_json::Value::Object(map) if map.len() == 1 && map.get("env").is_some_and(serde_json::Value::is_string) => {
                    HeaderSource::Env(map["env"].as_str().unwrap_or_default().to_owned())
                }
                _ => {
                    self.push(at, format!("header `{name}` needs a printable string value or `{{env: VARIABLE}}`"), None);
                    continue;
                }
            };
            out.insert(lower, source);
        }
        out
    }
}

fn task_site(entry: &RawTask, issue: &CatalogIssue) -> Position {
    match (&issue.site, entry.select.as_ref()) {
        (IssueSite::Selected(i), Some(sel)) => match &sel.value {
            RawSelect::Names(names) => names.get(*i).map_or(position_of(sel), position_of),
            RawSelect::All => position_of(sel),
        },
        (IssueSite::Param(name), _) => entry.params.get(name).map_or(position_of(&entry.benchmark), position_of),
        (IssueSite::ParamItem(name, i), _) => {
            entry.params.get(name).map_or(position_of(&entry.benchmark), |p| p.value.items.get(*i).copied().unwrap_or_else(|| position_of(p)))
        }
        _ => position_of(&entry.benchmark),
    }
}

fn unspan(params: &BTreeMap<String, Spanned<serde_json::Value>>) -> Params {
    params.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_follow_the_calendar() {
        for ok in ["2025-06-10", "2024-02-29", "2000-02-29", "1999-12-31"] {
            assert!(super::is_date(ok), "{ok}");
        }
        for bad in ["2025-02-29", "1900-02-29", "2025-13-01", "2025-04-31", "2025-6-10", "25-06-10", "2025-06-10T00", "", "2025/06/10", "2025-00-10"] {
            assert!(!super::is_date(bad), "{bad}");
        }
    }
}
