//! WeirdML as an evalgrid benchmark: one cell = one model × task × seed; the
//! episode is up to N submissions of model-written code, each run in the
//! sandbox with feedback to the model. Model calls are cached steps, so a
//! resumed episode replays finished answers; the sandbox runs again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::episode::{CodeRunner, Episode, EpisodeRecord, SandboxRunner};
use super::gpu::{GpuError, GpuPool, PoolConfig};
use super::minishapes::{MiniShapes, MiniShapesError};
use super::sandbox::{IsolationReport, RunResult, Sandbox, SandboxConfig, SandboxError};
use super::scripted::{ScriptedAgent, play};
use super::task::{TaskError, TaskManifest};
use crate::cache::Store;
use crate::envs::metric::{Agg, MetricDef};
use crate::exec::{CallSite, EpisodeContext, Fresh, StepError, SubStep, SubStepError};
use crate::plan::key::key_components;
use crate::plan::{StepKey, StepKind};
use crate::providers::{ChatRequest, Message};
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};
use serde_json::Map;

/// Benchmark name in pipelines.
pub const NAME: &str = "weirdml";
/// Bump when episodes (loop, feedback, sandbox contract) change.
pub const EPISODE_VERSION: u32 = 1;
/// Bump when the score record changes.
pub const SCORE_VERSION: u32 = 1;
/// Built-in agents.
pub const BUILTIN_AGENTS: &[&str] = &["scripted"];
/// The built-in stand-in task.
const MINI_SHAPES: &str = "mini-shapes";
/// Scripts of the built-in `scripted` agent.
const SCRIPTS: &[&str] = &["spec", "reference"];

/// Table columns: task score (mean run accuracy), failure rate per
/// submission, and accuracy after k submissions.
#[must_use]
pub fn metrics() -> Vec<MetricDef> {
    let mut m = vec![
        MetricDef::mean("task_score", "run_accuracy"),
        MetricDef { name: "task_score_ci_low".into(), agg: Agg::MeanCiLow("run_accuracy".into()) },
        MetricDef { name: "task_score_ci_high".into(), agg: Agg::MeanCiHigh("run_accuracy".into()) },
        MetricDef { name: "failure_rate".into(), agg: Agg::Ratio("failures".into(), "submissions".into()) },
    ];
    m.extend((1..=5).map(|k| MetricDef::mean(&format!("accuracy_after_{k}"), &format!("accuracy_after_{k}"))));
    m
}

/// Where task folders live: `data/weirdml/<task>/task.json`; mini-shapes is
/// generated there on first use.
fn task_dir(data_dir: &Path, task: &str) -> PathBuf {
    data_dir.join(NAME).join(task)
}

/// Why a task folder cannot be used (each shown as its cause alone).
#[derive(Debug, thiserror::Error)]
enum TaskSetupError {
    /// The folder's absolute path cannot be made.
    #[error(transparent)]
    Path(std::io::Error),
    /// The built-in mini-shapes task cannot be generated.
    #[error(transparent)]
    Generate(#[from] MiniShapesError),
    /// `task.json` is missing or invalid.
    #[error(transparent)]
    Manifest(#[from] TaskError),
}

fn ensure_task(data_dir: &Path, task: &str) -> Result<TaskManifest, TaskSetupError> {
    // Absolute, so the manifest's paths stay valid from any working directory.
    let dir = std::path::absolute(task_dir(data_dir, task)).map_err(TaskSetupError::Path)?;
    let manifest = dir.join("task.json");
    if task == MINI_SHAPES && !manifest.is_file() {
        MiniShapes::default().write(&dir)?;
    }
    Ok(TaskManifest::from_path(&manifest)?)
}

/// Resolves `select:` (task folder names; `mini-shapes` is built in) and
/// `params: {iterations, time_limit_s}`.
pub fn resolve_tasks(data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
    const PARAMS: &[&str] = &["iterations", "time_limit_s"];
    let mut issues: Vec<CatalogIssue> = params
        .keys()
        .filter(|k| !PARAMS.contains(&k.as_str()))
        .map(|k| CatalogIssue { site: IssueSite::Param(k.clone()), message: format!("unknown WeirdML task parameter `{k}`"), hint: suggestion(k, PARAMS) })
        .collect();
    let names: Vec<String> = match select {
        Selection::All => vec![MINI_SHAPES.to_owned()],
        Selection::Names(n) => n.clone(),
    };
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let manifest = match ensure_task(data_dir, name) {
            Ok(m) => m,
            Err(e) => {
                issues.push(CatalogIssue {
                    site: IssueSite::Selected(i),
                    message: format!("WeirdML task `{name}` is not available: {e}"),
                    hint: Some(format!("put a task folder with task.json under `{}`, or use `{MINI_SHAPES}`", data_dir.join(NAME).display())),
                });
                continue;
            }
        };
        let iterations = params.get("iterations").and_then(Value::as_u64).unwrap_or(u64::from(manifest.iterations));
        let time_limit = params.get("time_limit_s").and_then(Value::as_f64).unwrap_or(manifest.time_limit_s);
        let mut hasher = blake3::Hasher::new_derive_key("evalgrid weirdml task-content v1");
        hasher.update(manifest.prompt.as_bytes());
        for file in manifest.train_files.iter().chain(&manifest.test_inputs) {
            hasher.update(&std::fs::read(manifest.data_dir.join(file)).unwrap_or_default());
        }
        hasher.update(&std::fs::read(&manifest.labels_path).unwrap_or_default());
        out.push(TaskInstance {
            benchmark: NAME.into(),
            task: name.clone(),
            content_hash: hasher.finalize().to_hex().to_string(),
            params: [("iterations".to_owned(), json!(iterations)), ("time_limit_s".to_owned(), json!(time_limit))].into(),
            episode_version: EPISODE_VERSION,
            score_version: SCORE_VERSION,
            suite: NAME.into(),
        });
    }
    if issues.is_empty() { Ok(out) } else { Err(issues) }
}

/// Validates a built-in agent's parameters.
pub fn resolve_builtin(agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
    if agent != "scripted" {
        return Err(vec![CatalogIssue {
            site: IssueSite::Entry,
            message: format!("built-in agent `{agent}` cannot play WeirdML"),
            hint: suggestion(agent, BUILTIN_AGENTS),
        }]);
    }
    let mut issues: Vec<CatalogIssue> = params
        .keys()
        .filter(|k| *k != "script")
        .map(|k| CatalogIssue {
            site: IssueSite::Param(k.clone()),
            message: format!("built-in agent `scripted` has no parameter `{k}`"),
            hint: suggestion(k, &["script"]),
        })
        .collect();
    let script = params.get("script").and_then(Value::as_str).unwrap_or("spec");
    if !SCRIPTS.contains(&script) {
        issues.push(CatalogIssue { site: IssueSite::Param("script".into()), message: format!("unknown script `{script}`"), hint: suggestion(script, SCRIPTS) });
    }
    if issues.is_empty() { Ok([("script".to_owned(), json!(script))].into()) } else { Err(issues) }
}

/// Sandbox and slot pool, probed once per process.
struct Runtime {
    sandbox: Sandbox,
    pool: GpuPool,
}

/// Why the sandbox or the slot pool cannot be set up (kept for every later cell, hence
/// shared).
#[derive(Debug, thiserror::Error)]
enum RuntimeError {
    /// No usable sandbox.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The GPU slot pool cannot be built.
    #[error(transparent)]
    Pool(#[from] GpuError),
}

fn runtime() -> Result<&'static Runtime, StepError> {
    static RUNTIME: OnceLock<Result<Runtime, Arc<RuntimeError>>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let sandbox = Sandbox::new(SandboxConfig::default()).map_err(|e| Arc::new(e.into()))?;
            let pool = GpuPool::new(&PoolConfig::default()).map_err(|e| Arc::new(e.into()))?;
            Ok(Runtime { sandbox, pool })
        })
        .as_ref()
        .map_err(|e| StepError::episode_in("cannot set up the WeirdML sandbox", Arc::clone(e)))
}

/// How submissions are isolated on this machine (for warnings and reports).
pub fn isolation() -> Result<IsolationReport, StepError> {
    runtime().map(|r| r.sandbox.report().clone())
}

fn manifest_for(data_dir: &Path, task: &TaskInstance) -> Result<TaskManifest, StepError> {
    let mut manifest = ensure_task(data_dir, &task.task).map_err(StepError::episode)?;
    if let Some(n) = task.params.get("iterations").and_then(Value::as_u64) {
        manifest.iterations = u32::try_from(n).unwrap_or(u32::MAX);
    }
    if let Some(t) = task.params.get("time_limit_s").and_then(Value::as_f64) {
        manifest.time_limit_s = t;
    }
    Ok(manifest)
}

/// Runs submissions through the sandbox, caching each run as its own step
/// keyed by (episode, submission number, code), so a resumed episode does
/// not retrain what already ran.
struct CachedRunner<'a> {
    inner: SandboxRunner<'a>,
    store: Store,
    episode: StepKey,
    submission: u32,
}

impl CodeRunner for CachedRunner<'_> {
    fn run_code(&mut self, code: &str) -> Result<RunResult, SandboxError> {
        self.submission += 1;
        let step = SubStep::new(self.episode, StepKind::Submission, submission_components(self.episode, self.submission, code));
        match step.run_blocking(&self.store, || self.inner.run_code(code).map(Fresh::cacheable)) {
            Ok(done) => Ok(done.value),
            Err(SubStepError::Compute(e)) => Err(e),
            Err(SubStepError::Cache(e)) => Err(SandboxError::Io { what: "submission cache".into(), source: std::io::Error::other(e) }),
        }
    }
}

/// Key components of one submission run: its episode, its number in the
/// episode and the exact code (by hash).
#[must_use]
pub fn submission_components(episode: StepKey, submission: u32, code: &str) -> Value {
    let mut fields = Map::new();
    fields.insert("episode".into(), json!(episode));
    fields.insert("submission".into(), json!(submission));
    fields.insert("code".into(), json!(blake3::hash(code.as_bytes()).to_hex().to_string()));
    key_components(StepKind::Submission, "weirdml.submission", SUBMISSION_VERSION, fields)
}

/// Version of a cached submission run (bump with the sandbox contract).
const SUBMISSION_VERSION: u32 = 2;

/// Plays one WeirdML episode.
pub async fn run_episode(ctx: EpisodeContext<'_>, data_dir: &Path, model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let manifest = manifest_for(data_dir, task)?;
    let rt = runtime()?;
    let record = if model.is_builtin() {
        let script = model.params.get("script").and_then(Value::as_str).unwrap_or("spec").to_owned();
        let (store, key) = (ctx.calls.store().clone(), ctx.episode_key);
        tokio::task::spawn_blocking(move || -> Result<EpisodeRecord, StepError> {
            let mut agent = if script == "reference" { ScriptedAgent::reference_episode() } else { ScriptedAgent::spec_episode() };
            let mut episode = Episode::from_task(&manifest).map_err(StepError::episode)?;
            let mut runner =
                CachedRunner { inner: SandboxRunner { sandbox: &rt.sandbox, pool: &rt.pool, task: &manifest }, store, episode: key, submission: 0 };
            play(&mut episode, &mut agent, &mut runner).map_err(StepError::episode)
        })
        .await
        .map_err(StepError::worker)??
    } else {
        model_episode(ctx, rt, manifest, model, seed).await?
    };
    serde_json::to_value(record).map_err(StepError::episode)
}

/// The feedback loop with an API model: the conversation grows by the
/// model's answer and the run's feedback after every submission.
async fn model_episode(
    ctx: EpisodeContext<'_>,
    rt: &'static Runtime,
    manifest: TaskManifest,
    model: &ModelConfig,
    seed: u64,
) -> Result<EpisodeRecord, StepError> {
    let manifest = Arc::new(manifest);
    let episode = Arc::new(Mutex::new(Episode::from_task(&manifest).map_err(StepError::episode)?));
    let params: serde_json::Map<String, Value> = model.params.clone().into_iter().collect();
    let mut messages = vec![Message::user(manifest.prompt.clone())];
    let mut iteration = 0u32;
    let runner = Arc::new(Mutex::new(0u32));
    loop {
        if episode.lock().map_err(|_| StepError::worker_msg("episode lock poisoned"))?.is_done() {
            break;
        }
        iteration += 1;
        let request = ChatRequest { messages: messages.clone(), params: params.clone(), ..ChatRequest::default() };
        let site = CallSite { scope: Some(ctx.episode_key), position: format!("submission {iteration}"), sample: seed };
        let response = ctx.chat(model, &request, &site).await?;
        let (ep, man, text) = (Arc::clone(&episode), Arc::clone(&manifest), response.text.clone());
        let (store, key, counter) = (ctx.calls.store().clone(), ctx.episode_key, Arc::clone(&runner));
        let feedback = tokio::task::spawn_blocking(move || -> Result<Option<String>, StepError> {
            let mut count = counter.lock().map_err(|_| StepError::worker_msg("runner lock poisoned"))?;
            let mut runner =
                CachedRunner { inner: SandboxRunner { sandbox: &rt.sandbox, pool: &rt.pool, task: &man }, store, episode: key, submission: *count };
            let mut guard = ep.lock().map_err(|_| StepError::worker_msg("episode lock poisoned"))?;
            let step = guard.step(&text, &mut runner as &mut dyn CodeRunner).map(|s| s.feedback).map_err(StepError::episode);
            *count = runner.submission;
            step
        })
        .await
        .map_err(StepError::worker)??;
        let Some(feedback) = feedback else { break };
        messages.push(Message::assistant(response.text));
        messages.push(Message::user(feedback));
    }
    let record = episode.lock().map_err(|_| StepError::worker_msg("episode lock poisoned"))?.record();
    Ok(record)
}

/// Score record of one run.
pub fn score(episode: &Value) -> Result<Value, StepError> {
    let r: EpisodeRecord = serde_json::from_value(episode.clone()).map_err(|e| StepError::score_in("not a WeirdML record", e))?;
    let mut out = json!({
        "run_accuracy": r.run_accuracy,
        "failures": r.failures,
        "submissions": r.submissions.len(),
        "first_try_accuracy": r.submissions.first().map_or(0.0, |s| s.accuracy),
    });
    for k in 1..=5usize {
        let best = r.best_so_far.get(k - 1).or(r.best_so_far.last()).copied().unwrap_or(0.0);
        out[format!("accuracy_after_{k}")] = json!(best);
    }
    Ok(out)
}

/// WeirdML as the registry sees it.
pub struct WeirdMl;

impl crate::envs::benchmark::Benchmark for WeirdMl {
    fn name(&self) -> &'static str {
        NAME
    }
    fn resolve_tasks(&self, data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        resolve_tasks(data_dir, select, params)
    }
    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        resolve_builtin(agent, params)
    }
    fn metrics(&self) -> Vec<MetricDef> {
        metrics()
    }
    /// One unit per cell (spec: statistics.md).
    fn unit_metrics(&self) -> Vec<crate::envs::metric::UnitMetric> {
        use crate::envs::metric::UnitMetric;
        vec![UnitMetric::new("accuracy", "run_accuracy", "task_score", false)]
    }
    /// Submissions train models, on a GPU when one is given.
    fn uses_gpu(&self) -> bool {
        true
    }
    /// Every submission is model-written (or scripted) code.
    fn runs_model_code(&self, _model: &ModelConfig) -> bool {
        true
    }
    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> crate::exec::BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(run_episode(ctx, data_dir, model, task, seed))
    }
    fn score(&self, _data_dir: &Path, _task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        score(episode)
    }
    fn headline_field(&self) -> Option<&'static str> {
        Some("run_accuracy")
    }
    /// The time horizons of `report.weirdml`, when set.
    fn sections(&self, input: &crate::envs::benchmark::SectionInput<'_>) -> Result<Vec<crate::exhibit::Section>, StepError> {
        Ok(super::timeline::sections(input))
    }
    fn figures(&self, input: &crate::envs::benchmark::FigureInput<'_>) -> Vec<crate::exhibit::Figure> {
        super::report::figures(input)
    }
    fn tools(&self) -> Option<clap::Command> {
        Some(super::tools::command())
    }
    fn run_tool(&self, matches: &clap::ArgMatches, _ctx: &crate::envs::ToolContext<'_>) -> Result<crate::envs::ToolOutput, crate::envs::ToolError> {
        super::tools::run(matches)
    }
}
