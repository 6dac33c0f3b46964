//! The WeirdML iteration loop (spec §4) as a model-independent state machine: up to N
//! submissions; each response → longest code block → one sandboxed run → executor-side
//! score → failure classification → feedback text (asset `weirdml-feedback-v1`).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::codeblock::extract_code;
use super::gpu::GpuPool;
use super::pyfmt::{py_float_repr, seconds_text};
use super::sandbox::{Isolation, LimitKind, Predictions, RunResult, RunSpec, Sandbox, SandboxError};
use super::scorer::{Labels, ScoreError, ScoreOutcome, score_predictions};
use super::task::TaskManifest;

/// Version tag of the feedback wording (part of any cache key over feedback text).
pub const FEEDBACK_ASSET: &str = "weirdml-feedback-v1";

/// Why a submission counts as failed (diagnostics; for scoring failed ⇔ accuracy 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// No fenced code block in the response.
    NoCode,
    /// Non-zero exit or killed by a signal/limit, and no positive accuracy.
    Exception,
    /// Wall-clock limit reached (never scored, even if a file was written).
    Timeout,
    /// Clean exit but no `results/test_preds.txt`.
    NoResultsFile,
    /// Predictions file unparsable (or a symlink / oversized).
    BadFormat,
    /// Parsed, but no prediction was correct.
    ZeroAccuracy,
}

/// One submission, as stored in the episode record (spec §5.3 rows derive from this).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionRecord {
    /// 1-based iteration.
    pub iteration: u32,
    /// sha256 (hex) of the extracted code; `None` when there was none.
    pub code_sha256: Option<String>,
    /// Failure classification (`None` = success).
    pub failure_kind: Option<FailureKind>,
    /// Accuracy exactly 0.
    pub failed: bool,
    /// Test accuracy (0 on failure).
    pub accuracy: f64,
    /// Scorer outcome (`None` when nothing ran or on timeout).
    pub score: Option<ScoreOutcome>,
    /// Feedback view of the terminal output.
    pub output_excerpt: String,
    /// Whether the view was cut to head + tail.
    pub output_truncated: bool,
    /// Total bytes of terminal output.
    pub output_bytes: u64,
    /// Exit code, if the run exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, if any.
    pub signal: Option<i32>,
    /// Killed at the wall-clock limit.
    pub timed_out: bool,
    /// Limit that probably ended the run.
    pub killed_by_limit: Option<LimitKind>,
    /// Wall time of the sandboxed run.
    pub run_wall_s: Option<f64>,
    /// Wall time of the whole step (setup, run, scoring).
    pub step_wall_s: f64,
    /// Slot that ran it.
    pub slot: Option<String>,
    /// Isolation level it ran under.
    pub isolation: Option<Isolation>,
    /// Feedback message generated for the model.
    pub feedback: String,
}

/// A whole run (one conversation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// Task id.
    pub task_id: String,
    /// Feedback wording version.
    pub feedback_asset: String,
    /// Submission budget.
    pub max_submissions: u32,
    /// Per-submission time limit.
    pub time_limit_s: f64,
    /// Submissions made (J_r ≤ budget).
    pub submissions: Vec<SubmissionRecord>,
    /// max accuracy over submissions (0 when none).
    pub run_accuracy: f64,
    /// Best-so-far accuracy after each submission.
    pub best_so_far: Vec<f64>,
    /// Failed submissions.
    pub failures: u32,
    /// failures / submissions (per-submission failure rate of this run).
    pub failure_rate: f64,
}

/// Episode errors; model failures are records, not errors.
#[derive(Debug, Error)]
pub enum EpisodeError {
    /// `step` after the submission budget was used.
    #[error("episode finished: all {0} submissions used")]
    Finished(u32),
    /// Sandbox infrastructure failure (the submission is not recorded; retry it).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Hidden labels could not be loaded.
    #[error(transparent)]
    Labels(#[from] ScoreError),
}

/// Executes extracted code; the sandbox in production, fakes in tests.
pub trait CodeRunner {
    /// Runs `code` once in a fresh sandbox.
    fn run_code(&mut self, code: &str) -> Result<RunResult, SandboxError>;
}

/// Production runner: leases a slot per submission, runs in the sandbox.
#[derive(Debug)]
pub struct SandboxRunner<'a> {
    /// Sandbox.
    pub sandbox: &'a Sandbox,
    /// Slot pool.
    pub pool: &'a GpuPool,
    /// Task (data dir, predictions path, time limit).
    pub task: &'a TaskManifest,
}

impl CodeRunner for SandboxRunner<'_> {
    fn run_code(&mut self, code: &str) -> Result<RunResult, SandboxError> {
        let lease = self.pool.acquire();
        let spec = RunSpec {
            code,
            data_dir: &self.task.data_dir,
            predictions_file: &self.task.predictions_file,
            time_limit: self.task.time_limit(),
            slot: lease.slot(),
        };
        self.sandbox.run(&spec)
    }
}

/// The accuracy line of the feedback for a scored/unscored run.
fn accuracy_line(outcome: &ScoreOutcome) -> String {
    match outcome {
        ScoreOutcome::Scored { accuracy, .. } => format!("Accuracy: {}", py_float_repr(*accuracy)),
        ScoreOutcome::NoResultsFile => "Accuracy: 0.0, Results file not found".into(),
        ScoreOutcome::BadFormat { reason } => {
            format!("Accuracy: 0.0, Could not parse results file: {reason}")
        }
    }
}

/// Classifies a finished run: (failure kind, accuracy, accuracy line). Precedence: timeout;
/// positive accuracy = success whatever the exit status; non-zero exit = exception;
/// otherwise the scorer's verdict (no file, bad format, zero accuracy).
pub fn classify(run: &RunResult, outcome: &ScoreOutcome, time_limit_s: f64) -> (Option<FailureKind>, f64, String) {
    if run.timed_out {
        let line = format!("Accuracy: 0.0, Timeout after {} s", seconds_text(time_limit_s));
        return (Some(FailureKind::Timeout), 0.0, line);
    }
    let acc = outcome.accuracy();
    let line = accuracy_line(outcome);
    if acc > 0.0 {
        return (None, acc, line);
    }
    let kind = if !run.exit.success() {
        FailureKind::Exception
    } else {
        match outcome {
            ScoreOutcome::NoResultsFile => FailureKind::NoResultsFile,
            ScoreOutcome::BadFormat { .. } => FailureKind::BadFormat,
            ScoreOutcome::Scored { .. } => FailureKind::ZeroAccuracy,
        }
    };
    (Some(kind), 0.0, line)
}

/// `Terminal output:\n<view>\n\n<accuracy line>` (spec §4 default feedback).
pub fn feedback_text(output_view: &str, accuracy_line: &str) -> String {
    format!("Terminal output:\n{output_view}\n\n{accuracy_line}")
}

/// Feedback for a response without a code block.
pub const NO_CODE_FEEDBACK: &str = "No code block found in your response. Accuracy: 0.0";

/// Result of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The recorded submission.
    pub record: SubmissionRecord,
    /// Feedback to append (`None` after the last submission: no feedback round follows).
    pub feedback: Option<String>,
}

/// One run's state.
#[derive(Debug, Clone)]
pub struct Episode {
    task_id: String,
    max_submissions: u32,
    time_limit_s: f64,
    labels: Labels,
    records: Vec<SubmissionRecord>,
}

impl Episode {
    /// New episode for `task` with already-loaded hidden labels.
    pub fn new(task: &TaskManifest, labels: Labels) -> Self {
        Self { task_id: task.id.clone(), max_submissions: task.iterations, time_limit_s: task.time_limit_s, labels, records: Vec::new() }
    }

    /// New episode, loading the hidden labels from the manifest.
    pub fn from_task(task: &TaskManifest) -> Result<Self, EpisodeError> {
        let labels = Labels::load(&task.labels_path, task.test_size, task.pred_width)?;
        Ok(Self::new(task, labels))
    }

    /// All submissions used.
    pub fn is_done(&self) -> bool {
        self.records.len() >= self.max_submissions as usize
    }

    /// Submissions so far.
    pub fn submissions(&self) -> &[SubmissionRecord] {
        &self.records
    }

    /// Processes one model response.
    pub fn step(&mut self, response: &str, runner: &mut dyn CodeRunner) -> Result<Step, EpisodeError> {
        if self.is_done() {
            return Err(EpisodeError::Finished(self.max_submissions));
        }
        let start = Instant::now();
        let iteration = self.records.len() as u32 + 1;
        let record = match extract_code(response) {
            None => SubmissionRecord {
                iteration,
                code_sha256: None,
                failure_kind: Some(FailureKind::NoCode),
                failed: true,
                accuracy: 0.0,
                score: None,
                output_excerpt: String::new(),
                output_truncated: false,
                output_bytes: 0,
                exit_code: None,
                signal: None,
                timed_out: false,
                killed_by_limit: None,
                run_wall_s: None,
                step_wall_s: start.elapsed().as_secs_f64(),
                slot: None,
                isolation: None,
                feedback: NO_CODE_FEEDBACK.to_string(),
            },
            Some(block) => {
                let hash = hex(&Sha256::digest(block.content.as_bytes()));
                let run = runner.run_code(&block.content)?;
                let outcome = match &run.predictions {
                    Predictions::Missing => ScoreOutcome::NoResultsFile,
                    Predictions::Invalid(reason) => ScoreOutcome::BadFormat { reason: reason.clone() },
                    Predictions::Present(bytes) => score_predictions(Some(bytes), &self.labels),
                };
                let (kind, accuracy, line) = classify(&run, &outcome, self.time_limit_s);
                SubmissionRecord {
                    iteration,
                    code_sha256: Some(hash),
                    failure_kind: kind,
                    failed: accuracy == 0.0,
                    accuracy,
                    score: (!run.timed_out).then_some(outcome),
                    feedback: feedback_text(&run.output_view, &line),
                    output_excerpt: run.output_view,
                    output_truncated: run.output_truncated,
                    output_bytes: run.output.total_bytes,
                    exit_code: run.exit.code,
                    signal: run.exit.signal,
                    timed_out: run.timed_out,
                    killed_by_limit: run.killed_by_limit,
                    run_wall_s: Some(run.wall_s),
                    step_wall_s: start.elapsed().as_secs_f64(),
                    slot: Some(run.slot),
                    isolation: Some(run.isolation),
                }
            }
        };
        self.records.push(record.clone());
        let feedback = (!self.is_done()).then(|| record.feedback.clone());
        Ok(Step { record, feedback })
    }

    /// Snapshot of the run so far.
    pub fn record(&self) -> EpisodeRecord {
        let accs: Vec<f64> = self.records.iter().map(|r| r.accuracy).collect();
        let best_so_far = super::metrics::best_so_far(&accs);
        let failures = self.records.iter().filter(|r| r.failed).count() as u32;
        let n = self.records.len();
        EpisodeRecord {
            task_id: self.task_id.clone(),
            feedback_asset: FEEDBACK_ASSET.to_string(),
            max_submissions: self.max_submissions,
            time_limit_s: self.time_limit_s,
            submissions: self.records.clone(),
            run_accuracy: best_so_far.last().copied().unwrap_or(0.0),
            best_so_far,
            failures,
            failure_rate: if n == 0 { 0.0 } else { f64::from(failures) / n as f64 },
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
