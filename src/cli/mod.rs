//! The command-line edge: parse arguments, call the library, print, and map
//! outcomes to exit codes ([`exit::Exit`]: 0 ok, 1 some cells failed or a check failed,
//! 2 invalid input, 130 interrupted).

mod args;
mod batch_cmd;
mod bench;
mod budget;
mod cache_cmd;
mod check;
mod datasets;
mod diff;
mod estimate;
mod exit;
mod export;
mod jobs;
mod journal;
mod log;
mod output;
mod run;
mod show;
mod status;
mod tools;

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _};
use evalgrid::envs::Registry;
use evalgrid::plan::{Plan, parse_filter, plan};
use evalgrid::serve::{Found, ServeError};
use evalgrid::spec::{Engine, Pipeline, SpecError, load};
use std::collections::BTreeMap;

use args::{Cli, Command, Globals};

use exit::Exit;

/// Resolved global settings every command gets.
pub(crate) struct Env {
    /// Cache directory (with a shared cache, its local read-through copy).
    pub(crate) cache_dir: std::path::PathBuf,
    /// The shared cache (`s3://bucket/prefix`), if any.
    pub(crate) cache_url: Option<String>,
    /// Benchmarks, reading datasets from the data directory.
    pub(crate) registry: Registry,
}

impl Env {
    /// Resolves `--cache` / `--cache-dir`: a URL names the shared cache, a path the
    /// directory (`--cache-dir` wins for the directory). Unknown schemes are invalid input.
    fn new(cache: Option<String>, cache_dir: Option<std::path::PathBuf>, registry: Registry) -> Result<Self, Failure> {
        let (cache_url, dir) = match cache {
            Some(url) if url.contains("://") => {
                if !url.starts_with("s3://") {
                    return Err(Failure::invalid(anyhow::anyhow!("--cache `{url}`: only s3://bucket/prefix URLs (S3-compatible storage) are supported")));
                }
                (Some(url), None)
            }
            Some(path) => (None, Some(std::path::PathBuf::from(path))),
            None => (None, None),
        };
        let cache_dir = cache_dir.or(dir).unwrap_or_else(|| "cache".into());
        Ok(Self { cache_dir, cache_url, registry })
    }

    /// Opens the cache; a shared cache is probed first and refused (exit 2, naming the
    /// server) when it cannot give first writer wins.
    pub(crate) fn store(&self) -> Result<evalgrid::cache::Store, Failure> {
        let Some(url) = &self.cache_url else { return Ok(evalgrid::cache::Store::open(&self.cache_dir)?) };
        let remote = evalgrid::cache::Remote::open(url).map_err(Failure::invalid)?;
        Ok(evalgrid::cache::Store::open_shared(&self.cache_dir, remote)?)
    }
}

/// An error with the exit code it should produce.
pub(crate) struct Failure {
    code: Exit,
    error: anyhow::Error,
}

impl Failure {
    fn invalid(error: impl Into<anyhow::Error>) -> Self {
        Self { code: Exit::Invalid, error: error.into() }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Self { code: Exit::Failed, error: e.into() }
    }
}

/// Runs the CLI and returns the process exit code.
pub(crate) fn main() -> ExitCode {
    // The built-in commands, plus each benchmark's own (listed after `datasets`).
    let matches = tools::add(Cli::command(), "datasets").get_matches();
    let globals = Globals::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    log::init(globals.verbose);
    let json = wants_json(&matches);
    let result = Env::new(globals.cache, globals.cache_dir, Registry::new(globals.data_dir)).and_then(|env| {
        let tool = matches.subcommand().and_then(|(name, args)| Some((tools::find(name)?, args)));
        match tool {
            Some((benchmark, args)) => tools::run(&env, benchmark, args),
            None => command(&env, Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()).command),
        }
    });
    match result {
        Ok(code) => code.into(),
        Err(f) => {
            let message = format!("{:#}", f.error);
            output::error(&message);
            if json && !output::json_printed() {
                output::json(&serde_json::json!({"error": message, "exit_code": f.code.code()}));
            }
            f.code.into()
        }
    }
}

/// Whether the command line asked for `--json` (at any subcommand depth): such a command
/// prints exactly one JSON object on stdout, an `{"error": …}` one when it failed before
/// printing its own (bad pipeline, cache error, report not writable).
fn wants_json(matches: &clap::ArgMatches) -> bool {
    matches.try_get_one::<bool>("json").ok().flatten().copied().unwrap_or(false) || matches.subcommand().is_some_and(|(_, sub)| wants_json(sub))
}

/// Runs a built-in command.
fn command(env: &Env, command: Command) -> Result<Exit, Failure> {
    match command {
        Command::Run(a) => run::run(env, &a),
        Command::Check(a) => check::check(env, &a),
        Command::Status(a) => status::status(env, &a),
        Command::Report(a) => run::report(env, &a),
        Command::Show(a) => show::show(env, &a),
        Command::Diff(a) => diff::diff(env, &a),
        Command::Export(a) => export::export(env, &a),
        Command::Validate(a) => validate(env, &a.pipelines),
        Command::Cache(c) => cache_cmd::cache(env, c),
        Command::Batch(c) => batch_cmd::batch(env, c),
        Command::Datasets(c) => datasets::datasets(env, &c),
        Command::Bench(a) => bench::bench(env, &a),
        Command::Slurm(a) => jobs::slurm(env, &a),
        Command::K8s(a) => jobs::k8s(env, &a),
    }
}

/// Loads and validates a pipeline, served models keyed by their weights (see
/// [`load_served`]); invalid input maps to exit code 2.
pub(crate) fn load_pipeline(env: &Env, path: &Path) -> Result<Pipeline, Failure> {
    Ok(load_served(env, path, false)?.0)
}

/// Loads and validates a pipeline without looking at served models' weights or engines:
/// enough to count and place cells, not to key them.
pub(crate) fn load_spec(env: &Env, path: &Path) -> Result<Pipeline, Failure> {
    load(path, &env.registry).map_err(|e| match e {
        SpecError::Invalid(report) => Failure::invalid(anyhow::anyhow!("{report}")),
        other => Failure::invalid(other),
    })
}

/// Loads a pipeline and identifies its served models (engine version, weights hash, from
/// the cache's hash memo when the files did not change), returning the engines found.
/// `probe`: the command may start a server, so each engine is probed (and its version
/// recorded); else the version recorded in the cache is used, with a note.
pub(crate) fn load_served(env: &Env, path: &Path, probe: bool) -> Result<(Pipeline, BTreeMap<Engine, Found>), Failure> {
    let mut pipeline = load_spec(env, path)?;
    if pipeline.models.iter().all(|m| m.serve.is_none()) {
        return Ok((pipeline, BTreeMap::new()));
    }
    let memo = evalgrid::cache::HashMemo::new(&env.cache_dir);
    let (engines, notes) = evalgrid::serve::identify(&mut pipeline, &memo, probe).map_err(|e| serve_failure(&pipeline, e))?;
    for note in notes {
        output::note(&format!("note: {note}"));
    }
    Ok((pipeline, engines))
}

/// A served model's error with its place in the pipeline file, exit 2 for configuration
/// and 1 for a runtime failure.
pub(crate) fn serve_failure(pipeline: &Pipeline, error: ServeError) -> Failure {
    let model = match &error {
        ServeError::EngineMissing { model, .. }
        | ServeError::Unreadable { model, .. }
        | ServeError::PinMismatch { model, .. }
        | ServeError::Spawn { model, .. }
        | ServeError::Exited { model, .. }
        | ServeError::Killed { model, .. }
        | ServeError::Timeout { model, .. } => model.clone(),
    };
    let at = pipeline.models.iter().find(|m| m.id == model).and_then(|m| m.serve.as_ref()).map(|s| s.position);
    let code = if error.is_configuration() { Exit::Invalid } else { Exit::Failed };
    let error = anyhow::Error::new(error);
    let error = match at {
        Some(p) => error.context(format!("{}:{}:{}", pipeline.source_path.display(), p.line, p.column)),
        None => error,
    };
    Failure { code, error }
}

/// Loads a pipeline and plans it with an optional `--filter`.
pub(crate) fn load_plan(env: &Env, path: &Path, filter: Option<&str>) -> Result<(Pipeline, Plan), Failure> {
    let pipeline = load_pipeline(env, path)?;
    let plan = filtered_plan(&pipeline, filter)?;
    Ok((pipeline, plan))
}

/// The plan narrowed by `--filter`; a filter that keeps no cell of a non-empty grid is an
/// error (exit 2) listing what it could have matched, never a silent run of nothing.
pub(crate) fn filtered_plan(pipeline: &Pipeline, filter: Option<&str>) -> Result<Plan, Failure> {
    let parsed = filter.map(parse_filter).transpose().map_err(Failure::invalid)?;
    let narrowed = plan(pipeline, parsed.as_ref());
    if let Some(text) = filter
        && narrowed.cells.is_empty()
        && !plan(pipeline, None).cells.is_empty()
    {
        let quoted = |names: Vec<String>| names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let tasks = quoted(pipeline.tasks.iter().map(evalgrid::spec::TaskInstance::qualified).collect());
        let models = quoted(pipeline.models.iter().map(|m| m.id.clone()).collect());
        let seeds = pipeline.seeds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        return Err(Failure::invalid(anyhow::anyhow!(
            "--filter `{}` matches no cell of this pipeline; its tasks are {tasks} (matched as `benchmark/task`, e.g. `task=*/name`), its models {models}, its seeds {seeds}",
            text.trim()
        )));
    }
    Ok(narrowed)
}

fn validate(env: &Env, paths: &[std::path::PathBuf]) -> Result<Exit, Failure> {
    let mut bad = false;
    for path in paths {
        match load_spec(env, path) {
            Ok(p) => {
                let cells = plan(&p, None).cells.len();
                output::line(&format!(
                    "{}: ok ({} models × {} tasks × {} seeds = {cells} cells)",
                    path.display(),
                    p.models.len(),
                    p.tasks.len(),
                    p.seeds.len()
                ));
            }
            Err(f) => {
                output::error(&format!("{:#}", f.error));
                bad = true;
            }
        }
    }
    Ok(if bad { Exit::Invalid } else { Exit::Ok })
}

/// Prints the process's peak resident set size (for `bench status`).
pub(crate) fn report_peak_rss() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kib) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
        output::note(&format!("peak-rss-kib {}", kib.trim().trim_end_matches("kB").trim()));
    }
}
