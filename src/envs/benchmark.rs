//! The one trait a benchmark implements. `plan`, `exec`, `metrics` and `report` only ever
//! see `&dyn Benchmark` from [`super::registry`]'s list, so adding a benchmark is a folder
//! under `envs/` plus one line in that list (see `docs/adding-a-benchmark.md`).

use std::path::Path;

use serde_json::Value;

use crate::exec::{BoxFuture, CallSite, EpisodeContext, StepError};
use crate::exhibit::{Figure, Section, TableView};
use crate::providers::ChatRequest;
use crate::spec::{CatalogIssue, ModelConfig, Params, Selection, TaskInstance};

use super::metric::{MetricDef, Unit, UnitMetric, cell_unit};
use super::tool::{ToolContext, ToolError, ToolOutput};

/// One scored cell as a benchmark's report code sees it.
#[derive(Clone, Debug)]
pub struct ScoredCell<'a> {
    /// Model id (the pipeline's label).
    pub model: &'a str,
    /// Task id as qualified in tables (e.g. `bbeh_dyck_languages/mini`).
    pub task: String,
    /// Seed.
    pub seed: u64,
    /// The cell's score record.
    pub score: &'a Value,
}

/// What a benchmark's extra tables are computed from (in the metrics step).
pub struct SectionInput<'a> {
    /// The pipeline's models, in order.
    pub models: &'a [ModelConfig],
    /// This benchmark's scored cells, in plan order.
    pub cells: Vec<ScoredCell<'a>>,
    /// Cells of this benchmark planned per model id (more than scored = incomplete).
    pub planned: &'a dyn Fn(&str) -> usize,
    /// The episode record of the `i`-th cell of `cells`, read from the cache (`None`
    /// when it is not there).
    pub episode: &'a (dyn Fn(usize) -> Result<Option<Value>, StepError> + Sync),
    /// The pipeline's report settings (a benchmark's own, such as `report.weirdml`, are in
    /// the metrics key, so tables computed from them are cached correctly).
    pub report: &'a crate::spec::ReportConfig,
}

/// What a benchmark's figures are drawn from (in the report step).
pub struct FigureInput<'a> {
    /// The pipeline's models, in order.
    pub models: &'a [ModelConfig],
    /// This benchmark's summary tables (one per suite).
    pub tables: Vec<TableView>,
    /// This benchmark's extra tables, as [`Benchmark::sections`] made them.
    pub sections: Vec<&'a Section>,
    /// This benchmark's scored cells, in plan order.
    pub cells: Vec<ScoredCell<'a>>,
    /// The pipeline's report settings.
    pub report: &'a crate::spec::ReportConfig,
}

/// The usual episode dispatch: a built-in agent's episode runs on a CPU thread (it blocks),
/// an API player's through `api` (it awaits model calls).
pub fn builtin_on_cpu_or<'a>(
    model: &'a ModelConfig,
    task: &'a TaskInstance,
    seed: u64,
    builtin: fn(&ModelConfig, &TaskInstance, u64) -> Result<Value, StepError>,
    api: impl std::future::Future<Output = Result<Value, StepError>> + Send + 'a,
) -> BoxFuture<'a, Result<Value, StepError>> {
    Box::pin(async move {
        if !model.is_builtin() {
            return api.await;
        }
        let (model, task) = (model.clone(), task.clone());
        crate::exec::on_cpu(move || builtin(&model, &task, seed)).await?
    })
}

/// The answers of an episode's items, or its first failure with how many failed: the items
/// answered meanwhile are cached, so a rerun asks only the failed ones (BBEH, `qa`).
///
/// # Errors
/// The first item's failure, as the source of an episode error that counts them all.
pub fn all_items<T>(results: Vec<Result<T, StepError>>) -> Result<Vec<T>, StepError> {
    let total = results.len();
    let mut ok = Vec::with_capacity(total);
    let mut failed = 0;
    let mut first = None;
    for result in results {
        match result {
            Ok(value) => ok.push(value),
            Err(error) => {
                failed += 1;
                first.get_or_insert(error);
            }
        }
    }
    match first {
        // The first failure is the source; the count says how many more there were.
        Some(first) => Err(StepError::episode_in(format!("{failed} of {total} items failed (answered items are cached); first"), first)),
        None => Ok(ok),
    }
}

/// A benchmark: its tasks, agents, episodes, scorer, metrics and report exhibits.
pub trait Benchmark: Send + Sync {
    /// Name used in pipelines (`benchmark: <name>`) and cell ids.
    fn name(&self) -> &'static str;

    /// Resolves a task entry's `select` and `params` into task instances, with errors that
    /// point at the offending entry.
    ///
    /// # Errors
    /// Unknown task names, bad parameters, datasets not installed.
    fn resolve_tasks(&self, data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>>;

    /// [`Self::resolve_tasks`] for an entry of a pipeline in `base_dir`, so a benchmark whose
    /// tasks are files the user names (`qa`) reads them relative to the pipeline.
    ///
    /// # Errors
    /// As [`Self::resolve_tasks`].
    fn resolve_tasks_in(&self, data_dir: &Path, base_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        let _ = base_dir;
        self.resolve_tasks(data_dir, select, params)
    }

    /// Validates a built-in agent (`provider: builtin, model: <agent>`) and fills its defaults.
    ///
    /// # Errors
    /// An agent this benchmark does not have, or bad agent parameters.
    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>>;

    /// Summary-table columns and how each aggregates.
    fn metrics(&self) -> Vec<MetricDef>;

    /// Per-unit metrics (the columns of `items.csv`, compared between models in
    /// `comparisons.csv`); none by default.
    fn unit_metrics(&self) -> Vec<UnitMetric> {
        Vec::new()
    }

    /// The scored units of one cell's score record; by default the cell itself (a benchmark
    /// whose cells hold several items, like BBEH, lists them).
    fn units(&self, score: &Value) -> Vec<Unit> {
        cell_unit(score, &self.unit_metrics())
    }

    /// Summary-table columns of a suite made of `tasks`; by default [`Self::metrics`] (a
    /// benchmark whose columns are declared by its tasks, like `qa`'s scorers, lists them).
    fn metrics_for(&self, _tasks: &[&TaskInstance]) -> Vec<MetricDef> {
        self.metrics()
    }

    /// Per-unit metrics of a suite made of `tasks`; by default [`Self::unit_metrics`].
    fn unit_metrics_for(&self, _tasks: &[&TaskInstance]) -> Vec<UnitMetric> {
        self.unit_metrics()
    }

    /// The units of one cell with values in the order of `metrics` (what
    /// [`Self::unit_metrics_for`] gave); by default [`Self::units`].
    fn units_for(&self, score: &Value, _metrics: &[UnitMetric]) -> Vec<Unit> {
        self.units(score)
    }

    /// The answer behind each unit of [`Self::units_for`], in the same order, for the
    /// report's item pages (one short line each); none by default.
    fn unit_answers(&self, _score: &Value) -> Vec<Option<String>> {
        Vec::new()
    }

    /// What changed in a task since the episode record `previous` was made, in the user's
    /// terms (e.g. the dataset rows edited), for `status --explain` and `diff`; none by default.
    fn explain(&self, _task: &TaskInstance, _previous: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Generation parameters this benchmark adds to `model`'s own (e.g. a reasoning effort
    /// its reference forces), so the run log and the report can say so.
    fn injected_params(&self, _model: &ModelConfig) -> Vec<(String, Value)> {
        Vec::new()
    }

    /// Whether cells want a GPU (their resource class is then `gpu` for `--class` and the
    /// Slurm and Kubernetes job generators).
    fn uses_gpu(&self) -> bool {
        false
    }

    /// Whether a cell played by `model` runs model-written code (and so needs the sandbox).
    fn runs_model_code(&self, _model: &ModelConfig) -> bool {
        false
    }

    /// The container runtime a task's trials need (`environment: {runtime: …}`), so `evalgrid
    /// check` and the shard job generators can say whether this machine has one; none by
    /// default.
    fn container_runtime(&self, _task: &TaskInstance) -> Option<crate::sandbox::container::RuntimeChoice> {
        None
    }

    /// The container images (tags) a task's trials start from, so `cache gc --keep` drops
    /// only images no kept pipeline uses; `None` when the benchmark uses images it cannot
    /// name (then no image is dropped). No images by default.
    fn container_images(&self, _task: &TaskInstance) -> Option<Vec<String>> {
        Some(Vec::new())
    }

    /// Plays one episode and returns its record (cached as the episode step).
    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>>;

    /// Why `model` cannot play `task` at all (a scorer needing what its endpoint never
    /// gives, such as log-probabilities), checked before any call; `None`: it can.
    fn cannot_serve(&self, _task: &TaskInstance, _model: &ModelConfig) -> Option<String> {
        None
    }

    /// The models this benchmark's tasks call besides the contestant, read from a task
    /// entry's `params` (as written or as resolved): paid like contestants, so the budget,
    /// `check`, the estimate and the cost table count them. None by default.
    fn helpers(&self, _params: &Params) -> Vec<crate::spec::Helper> {
        Vec::new()
    }

    /// The helper calls an episode will make once its own calls are answered (a `qa`
    /// judge's gradings), for `--dry-run`; `answered` gives a planned call's cached answer
    /// text, if any. None by default.
    fn planned_helper_calls(
        &self,
        _model: &ModelConfig,
        _task: &TaskInstance,
        _seed: u64,
        _answered: &dyn Fn(&ChatRequest, &CallSite) -> Option<String>,
    ) -> Vec<HelperCall> {
        Vec::new()
    }

    /// The calls an episode will make when they are known up front (for `--dry-run`);
    /// `None` when they depend on the answers.
    fn planned_calls(&self, _data_dir: &Path, _model: &ModelConfig, _task: &TaskInstance, _seed: u64) -> Option<Vec<(ChatRequest, CallSite)>> {
        None
    }

    /// Scores an episode record (cached as the score step).
    ///
    /// # Errors
    /// A record this scorer cannot read.
    fn score(&self, data_dir: &Path, task: &TaskInstance, episode: &Value) -> Result<Value, StepError>;

    /// Human-readable transcript of an episode record, for `show` and the report.
    fn transcript(&self, episode: &Value) -> String {
        serde_json::to_string_pretty(episode).unwrap_or_default()
    }

    /// The prompt and answer of each unit of an episode record (exports to Inspect and Every
    /// Eval Ever); none by default, where the export shows the cell's transcript instead.
    fn exchanges(&self, _data_dir: &Path, _task: &TaskInstance, _episode: &Value, _seed: u64) -> Vec<super::Exchange> {
        Vec::new()
    }

    /// The score field shown for each cell in the report's cell list.
    fn headline_field(&self) -> Option<&'static str> {
        None
    }

    /// The value shown for a cell in the report's cell list when the benchmark's fields are
    /// its own (a `qa` task's scorers), not one fixed [`Self::headline_field`].
    fn cell_headline(&self, _score: &Value) -> Option<String> {
        None
    }

    /// Per judge scorer of a scored cell: `(scorer, replies with no grade, replies)`, so the
    /// report can say when a judge does not grade (its units then have no value).
    fn ungraded(&self, _task: &TaskInstance, _score: &Value) -> Vec<(String, u64, u64)> {
        Vec::new()
    }

    /// Extra tables computed over this benchmark's scored cells (metrics step, cached).
    ///
    /// # Errors
    /// A record that cannot be read.
    fn sections(&self, _input: &SectionInput<'_>) -> Result<Vec<Section>, StepError> {
        Ok(Vec::new())
    }

    /// Figures drawn from this benchmark's tables, sections and scores (report step).
    fn figures(&self, _input: &FigureInput<'_>) -> Vec<Figure> {
        Vec::new()
    }

    /// This benchmark's command-line tools as one command named after it (`evalgrid <name>
    /// <tool> …`), or `None`; the CLI adds it beside its own, so no CLI file names a benchmark.
    fn tools(&self) -> Option<clap::Command> {
        None
    }

    /// Runs the tool that `matches` (parsed by the command [`Self::tools`] returned) selects;
    /// the CLI prints the output and maps the outcome to the exit code.
    ///
    /// # Errors
    /// Invalid input, or a tool that cannot finish (see [`ToolError`]).
    fn run_tool(&self, _matches: &clap::ArgMatches, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Invalid(format!("benchmark `{}` has no tools", self.name()).into()))
    }
}

/// A helper model's call an episode will make (`run --dry-run`): a judge's grading.
#[derive(Clone, Debug)]
pub struct HelperCall {
    /// The helper's model (its `id` is the one its calls are counted under).
    pub model: ModelConfig,
    /// The request; where the answer it depends on is not known yet, one made with an empty
    /// answer, to count the rest of its prompt.
    pub request: ChatRequest,
    /// Its site.
    pub site: CallSite,
    /// Whether the answer it depends on is known (cached, or a built-in agent's), so the
    /// request (and its key) is exactly the one a run would send.
    pub known: bool,
}
