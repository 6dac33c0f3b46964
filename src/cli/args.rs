//! Command-line definitions (clap). Nothing here does work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Run LLM benchmark grids reproducibly, with every step cached by content hash.
#[derive(Debug, Parser)]
#[command(name = "evalgrid", version, propagate_version = true)]
#[command(
    after_help = "Examples:\n  evalgrid run pipelines/quickstart.yaml\n  evalgrid status pipelines/quickstart.yaml --explain random/eleusis/even_ranks_only/0\n  evalgrid cache verify"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,

    #[command(flatten)]
    pub(crate) globals: Globals,
}

// Options every command takes, benchmarks' own commands included (read alone for those).
// Not a doc comment: a flattened struct's doc would become help text.
#[derive(Debug, Args)]
pub(crate) struct Globals {
    /// The cache: a directory, or `s3://bucket/prefix` for one cache shared by many machines
    /// (endpoint and credentials from the `AWS_*` variables; `--cache-dir` is then its local copy).
    #[arg(long, global = true, env = "EVALGRID_CACHE", value_name = "DIR|s3://BUCKET/PREFIX")]
    pub(crate) cache: Option<String>,

    /// Local cache directory [default: cache]; with `--cache s3://…`, the read-through copy.
    #[arg(long, global = true, env = "EVALGRID_CACHE_DIR")]
    pub(crate) cache_dir: Option<PathBuf>,

    /// Where datasets are installed (`evalgrid datasets fetch`).
    #[arg(long, global = true, env = "EVALGRID_DATA", default_value = "data")]
    pub(crate) data_dir: PathBuf,

    /// Show more log lines on stderr (warnings by default): -v info (retries, background
    /// polls, cancels), -vv debug, -vvv trace. `EVALGRID_LOG` sets it too (`info`, `evalgrid=debug`).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run every cell of a pipeline that is not cached, then build its report.
    #[command(after_help = "Example:\n  evalgrid run pipelines/quickstart.yaml --jobs 8 --filter 'model=oracle,task=*parity*'")]
    Run(RunArgs),
    /// Say which cells are cached, stale, missing or failed, and why.
    #[command(after_help = "Example:\n  evalgrid status pipelines/quickstart.yaml --explain random/eleusis/even_ranks_only/0")]
    Status(StatusArgs),
    /// Build the report from cached results only (never runs an episode).
    #[command(after_help = "Example:\n  evalgrid report pipelines/quickstart.yaml")]
    Report(ReportArgs),
    /// What changed since the previous run: changed cells and why, flips per model, and the
    /// paired test of now against before (also written as `diff.html` in the report).
    #[command(
        after_help = "Example:\n  evalgrid diff pipelines/quickstart.yaml\n  evalgrid diff pipelines/quickstart.yaml --against /path/to/other/cache --json"
    )]
    Diff(DiffArgs),
    /// Print one cell's transcript.
    #[command(after_help = "Example:\n  evalgrid show pipelines/quickstart.yaml oracle/eleusis/only_aces/2")]
    Show(ShowArgs),
    /// Write cached results as Inspect AI eval logs or Every Eval Ever files.
    #[command(after_help = "Example:\n  evalgrid export pipelines/quickstart.yaml --format inspect --out logs/")]
    Export(super::export::ExportArgs),
    /// Send one small request to each model endpoint of a pipeline (never cached): is it
    /// reachable, is the key accepted, which model answers, its context, tools and streaming.
    #[command(after_help = "Example:\n  evalgrid check pipelines/llamacpp.yaml")]
    Check(CheckArgs),
    /// Check pipeline files without running anything.
    #[command(after_help = "Example:\n  evalgrid validate pipelines/*.yaml")]
    Validate(ValidateArgs),
    /// Inspect and maintain the cache.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Batches a pipeline's models (`batch:`) left running at the provider.
    #[command(subcommand)]
    Batch(BatchCommand),
    /// Install datasets with checksum verification.
    #[command(subcommand)]
    Datasets(DatasetsCommand),
    /// Write and submit Slurm job arrays (one per resource class) and a dependent report job.
    #[command(after_help = "Example:\n  evalgrid slurm pipelines/quickstart.yaml --shards 4 --dry-run")]
    Slurm(SlurmArgs),
    /// Write Kubernetes Indexed Job manifests (one per resource class) and a report Job.
    #[command(after_help = "Example:\n  evalgrid k8s pipelines/quickstart.yaml --shards 4 --image ghcr.io/me/evalgrid:0.1")]
    K8s(K8sArgs),
    /// Fixed-workload benchmarks of evalgrid itself (numbers for BENCHMARKS.md).
    #[command(after_help = "Example:\n  evalgrid bench status --cells 100000")]
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// Print one JSON object (`endpoints`: one record per endpoint) on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Options shared by commands that plan a pipeline.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// Only cells matching `model=GLOB,task=GLOB,seed=GLOB`.
    #[arg(long)]
    pub(crate) filter: Option<String>,
}

/// `run --progress`: how a run shows that it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProgressArg {
    /// A bar on a terminal, plain lines otherwise (nothing with EVALGRID_NO_PROGRESS set).
    Auto,
    /// A bar redrawn in place.
    Bar,
    /// One line every 30 s and at each 10 % of cells, for log files.
    Plain,
    /// Nothing.
    None,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) plan: PlanArgs,
    /// Cells in flight at once (default: the number of CPUs for cells that run on the CPU,
    /// 256 for cells that wait on model calls, whose lanes pace the calls).
    #[arg(long, short = 'j')]
    pub(crate) jobs: Option<usize>,
    /// Show what would run and stop.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// After the first Ctrl-C, how many seconds the calls already sent may still answer
    /// (each answer is cached) before the run exits 130; a second Ctrl-C exits at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub(crate) grace: f64,
    /// The most the grid's model calls may cost, in US dollars (overrides `budget.usd`):
    /// a call whose worst case would not fit is not sent, and the run exits 3.
    #[arg(long, value_name = "USD")]
    pub(crate) budget_usd: Option<f64>,
    /// Re-run only cells whose last attempt failed.
    #[arg(long)]
    pub(crate) retry_errors: bool,
    /// Ask again the cached calls whose answer had this outcome (e.g. `context_exceeded`
    /// after serving the model with a larger context), re-running only their cells; repeatable.
    #[arg(long, value_name = "OUTCOME", value_enum)]
    pub(crate) retry_outcome: Vec<RetryOutcome>,
    /// Serve model calls only from the cache; a miss is an error.
    #[arg(long)]
    pub(crate) offline: bool,
    /// Print one JSON object summarising the outcome on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Progress on stderr: `auto` draws a bar on a terminal and prints plain lines (every
    /// 30 s and at each 10 % of cells) otherwise, `none` when EVALGRID_NO_PROGRESS is set.
    #[arg(long, value_enum, default_value_t = ProgressArg::Auto)]
    pub(crate) progress: ProgressArg,
    /// Folder that receives `<pipeline>/summary.md` etc.
    #[arg(long, default_value = "reports")]
    pub(crate) reports_dir: PathBuf,
    /// Run model-written code with resource limits only when bubblewrap is missing
    /// (UNSAFE: it can read this user's files and use the network); the report says so.
    #[arg(long, env = "EVALGRID_UNSAFE_NO_SANDBOX")]
    pub(crate) unsafe_no_sandbox: bool,
    /// Run only shard `i` of `n` (0 <= i < n): a fixed partition of the grid by cell id,
    /// for one job of a Slurm array or Kubernetes Indexed Job. No report is built.
    #[arg(long, value_name = "I/N")]
    pub(crate) shard: Option<evalgrid::plan::Shard>,
    /// Run only cells of one resource class: `cpu` (built-in agents), `api` (model APIs)
    /// or `gpu` (WeirdML).
    #[arg(long, value_name = "CLASS")]
    pub(crate) class: Option<evalgrid::plan::ResourceClass>,
}

/// A model outcome whose cached answers `run --retry-outcome` asks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub(crate) enum RetryOutcome {
    /// The prompt did not fit the model's context window.
    ContextExceeded,
    /// The answer was cut at the token limit (`length`).
    Length,
    /// The answer was withheld by a safety filter.
    ContentFilter,
    /// The model declined.
    Refusal,
    /// A tool call's arguments were not valid JSON.
    Malformed,
}

impl RetryOutcome {
    /// The finish class it names, as stored in answers and episode tallies.
    pub(crate) fn class(self) -> &'static str {
        match self {
            Self::ContextExceeded => "context_exceeded",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Refusal => "refusal",
            Self::Malformed => "malformed",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) plan: PlanArgs,
    /// Explain one cell in detail (id as `model/benchmark/task/seed`).
    #[arg(long)]
    pub(crate) explain: Option<String>,
    /// Print JSON listing every cell with `state` and `reason`.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit 1 unless every cell is cached (for a report job that decides pass or fail).
    #[arg(long)]
    pub(crate) check: bool,
    /// For each suite's closest pair of models, the seeds or items needed to detect a
    /// difference of D (in the metric's units) at 80 % power, α 0.05 two-sided.
    #[arg(long, value_name = "D")]
    pub(crate) power: Option<f64>,
}

/// Options of the job generators (`slurm`, `k8s`).
#[derive(Debug, Args)]
pub(crate) struct JobArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// Shards per resource class (array tasks / completions).
    #[arg(long, default_value_t = 4)]
    pub(crate) shards: u32,
    /// Only these resource classes (default: every class the grid has).
    #[arg(long = "class", value_name = "CLASS")]
    pub(crate) classes: Vec<evalgrid::plan::ResourceClass>,
    /// Where the scripts or manifests are written.
    #[arg(long, default_value = "evalgrid-jobs")]
    pub(crate) out: PathBuf,
    /// Print what would be written and submitted; submit nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SlurmArgs {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Slurm partition.
    #[arg(long)]
    pub(crate) partition: Option<String>,
    /// GPUs per task of the `gpu` class.
    #[arg(long, default_value_t = 1)]
    pub(crate) gpus_per_task: u32,
    /// CPUs per task [default: 4, or fewer when the partition's nodes have fewer (`sinfo`);
    /// omitted when `sinfo` cannot tell]. A number no node has is refused.
    #[arg(long)]
    pub(crate) cpus_per_task: Option<u32>,
    /// Time limit per task (`HH:MM:SS`); a task is asked to stop 15 minutes before it.
    #[arg(long)]
    pub(crate) time: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct K8sArgs {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Container image with evalgrid on its PATH.
    #[arg(long)]
    pub(crate) image: String,
    /// Secrets whose keys become environment variables (API keys, cache credentials).
    #[arg(long = "secret", value_name = "NAME")]
    pub(crate) secrets: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// Also print the summary tables to stdout in this format (`markdown` or `latex`).
    #[arg(long)]
    pub(crate) format: Option<String>,
    /// Print one JSON object summarising the outcome on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Folder that receives `<pipeline>/summary.md` etc.
    #[arg(long, default_value = "reports")]
    pub(crate) reports_dir: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// The previous run: a report folder (its `items.csv`, `keys.csv`) or a cache folder;
    /// by default `<reports-dir>/<pipeline>/previous`, kept when a rerun changed cells.
    #[arg(long)]
    pub(crate) against: Option<PathBuf>,
    /// Print one JSON object (every flipped unit) on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the diff as a self-contained HTML page to this file.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// Folder that holds `<pipeline>/` reports.
    #[arg(long, default_value = "reports")]
    pub(crate) reports_dir: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// Cell id, `model/benchmark/task/seed`.
    pub(crate) cell: String,
    /// Print the raw episode and score records as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Pipeline files.
    #[arg(required = true)]
    pub(crate) pipelines: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BatchCommand {
    /// Cancel the pipeline's recorded batches that are still running, and say which.
    #[command(after_help = "Example:\n  evalgrid batch cancel pipelines/bbeh-batch.yaml")]
    Cancel {
        /// Pipeline file (YAML).
        pipeline: PathBuf,
        /// Print one JSON object (`cancelled`: one record per batch) on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Forget batch ledger records (damaged, or of a batch the provider no longer knows):
    /// the next run sends their calls again, and pays for them again if the batch did run.
    #[command(after_help = "Example:\n  evalgrid batch forget eg-3f2a9c0d1e4b5a6c7d8e\n  evalgrid batch forget batch_abc123")]
    Forget {
        /// Records, each by its tag (`eg-…`, the file name in `cache/v1/batches/`) or batch id,
        /// as `evalgrid status` names them.
        #[arg(required = true)]
        records: Vec<String>,
        /// Print one JSON object (`forgotten`: one record per name) on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum CacheCommand {
    /// Count entries and bytes per step kind.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read every entry and blob and check its hash; exit 1 if any is bad.
    #[command(after_help = "Example:\n  evalgrid cache verify --weights")]
    Verify {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also read again every served model's weights and argument file the cache remembers
        /// a hash of, and correct the memory where the bytes changed unseen (exit 1 then).
        #[arg(long)]
        weights: bool,
    },
    /// Remove temp files, free locks and corrupt entries; with `--keep`,
    /// also every entry those pipelines do not use.
    #[command(after_help = "Example:\n  evalgrid cache gc --keep pipelines/quickstart.yaml")]
    Gc {
        /// Pipelines whose entries must be kept.
        #[arg(long)]
        keep: Vec<PathBuf>,
    },
}

/// The workloads of `evalgrid bench`, each measured against its goal or a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Workload {
    /// No-op `status` on a synthetic grid whose every cell is cached (`--cells`).
    Status,
    /// `report` on the same synthetic grid.
    Report,
    /// Eleusis rule checks: each native rule against itself, 208,000 comparisons.
    Equivalence,
    /// Cost of the sandbox: a sandboxed Python judge check and a `pass` submission.
    Sandbox,
    /// The quickstart pipeline from an empty cache, then cached.
    Quickstart,
    /// Calls through the provider client against the mock server (throughput).
    Providers,
    /// Scoring all BBEH items with the official scorer.
    BbehScore,
    /// The full BBEH grid against the mock server (`--seeds`, `--concurrency`).
    BbehRun,
    /// BBEH items through nginx `limit_req` in front of the mock (`--rate`, `--items`).
    RateLimit,
    /// Three models on three servers with two slots each (BBEH Mini, 120 items a model):
    /// the default `--jobs` against `--jobs 64` and the ideal.
    Lanes,
    /// `validate` + no-op `status` of a `qa` task over a synthetic dataset (`--rows`) × 3
    /// models × 3 seeds, every cell cached.
    QaStatus,
    /// Per-trial cost of evalgrid's container path (start, copy, exec, read, remove) against
    /// the bare runtime commands for the same trial (`--items` trials), and image builds.
    Harbor,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Which fixed workload to measure.
    pub(crate) workload: Workload,
    /// Cells in the synthetic grid (for `status`).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) cells: usize,
    /// Requests per second the rate-limited server allows (for `rate-limit`).
    #[arg(long, default_value_t = 40)]
    pub(crate) rate: u32,
    /// BBEH items to ask, rounded up to whole tasks (for `rate-limit`).
    #[arg(long, default_value_t = 1720)]
    pub(crate) items: usize,
    /// Seeds of the full BBEH grid (for `bbeh-run`: 4,520 calls each).
    #[arg(long, default_value_t = 1)]
    pub(crate) seeds: u32,
    /// Calls in flight (for `bbeh-run`).
    #[arg(long, default_value_t = 100)]
    pub(crate) concurrency: u32,
    /// Dataset rows (for `qa-status`).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) rows: usize,
}

#[derive(Debug, Subcommand)]
pub(crate) enum DatasetsCommand {
    /// Download (or copy with `--from`) a dataset, verify every pin, install it; or download
    /// one file of your own (a `qa` dataset) from a URL, pinned by its SHA-256.
    #[command(
        after_help = "Examples:\n  evalgrid datasets fetch bbeh\n  evalgrid datasets fetch bbeh --from ../shared/data/bbeh\n  evalgrid datasets fetch https://example.org/heldout.jsonl --sha256 9f86d0…"
    )]
    Fetch {
        /// Dataset name (`bbeh`), or an `http(s)://` URL of one file.
        name: String,
        /// Install from a local copy instead of downloading.
        #[arg(long)]
        from: Option<PathBuf>,
        /// The SHA-256 (hex) a URL's file must have; a mismatch installs nothing.
        #[arg(long)]
        sha256: Option<String>,
        /// Where a URL's file goes.
        #[arg(long, default_value = "datasets")]
        into: PathBuf,
        /// The most bytes one downloaded file may have (1 GiB by default); a larger one is
        /// refused, before its body is read when the server says its size.
        #[arg(long, default_value_t = 1 << 30)]
        max_bytes: u64,
        /// Seconds without a byte from the server before a download is given up.
        #[arg(long, default_value_t = 60)]
        read_timeout_s: u64,
        /// Seconds one file's whole download may take.
        #[arg(long, default_value_t = 3600)]
        timeout_s: u64,
    },
}
