//! The BBQ-Bench episode state machine (spec §2, §4.8–4.10), independent of any model:
//! round 0 evaluates on samples only, then rounds of query → scratchpad → evaluation until all
//! test predictions are right or the rounds (and so the budget) run out. Invalid tool use is
//! counted as failed attempts, never panics, and forfeits the phase after `max_attempts`.

use super::function::{Input, evaluate_with};
use super::generator::{Case, GenError, samples, test_set};
use super::parse::{InputError, parse_input_with, parse_json_input_with};
use super::record::{EpisodeRecord, Evaluation, Forfeit, Phase, QueryResponse, QueryResult, RoundRecord, Tool, ToolFailure};
use super::task::{InputKind, Task, TaskId, TaskParams};

/// Why an episode operation was refused; the message is what the model is shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EpisodeError {
    /// `query` with no inputs.
    #[error("empty batch: submit at least one input")]
    EmptyBatch,
    /// More inputs than `query_batch_size`.
    #[error("batch of {got} inputs exceeds the limit of {max} per query{hint}")]
    BatchTooLarge {
        /// Inputs submitted.
        got: usize,
        /// The task's batch size.
        max: u32,
        /// Extra advice for tuple tasks (a tuple sent as a bare list reads as many inputs).
        hint: &'static str,
    },
    /// More inputs than the remaining budget.
    #[error("batch of {requested} inputs exceeds the remaining query budget of {remaining}")]
    OverBudget {
        /// Inputs submitted.
        requested: usize,
        /// Budget left.
        remaining: u32,
    },
    /// An input failed validation; the whole batch is rejected and no budget is consumed.
    #[error("input {index} rejected, batch not run: {source}")]
    InvalidInput {
        /// 1-based position in the batch.
        index: usize,
        /// The validation error (names the input).
        source: InputError,
    },
    /// `submit_predictions` with the wrong number of predictions.
    #[error("expected {expected} predictions (one per test input), got {got}")]
    WrongPredictionCount {
        /// Number of test inputs.
        expected: usize,
        /// Predictions submitted.
        got: usize,
    },
    /// `execute_python` after this phase's one successful call.
    #[error("execute_python may run only once per phase")]
    PythonAlreadyUsed,
    /// `execute_python` after three failures in this phase.
    #[error("execute_python is unavailable for the rest of this phase after repeated failures")]
    PythonForfeited,
    /// The driver called an operation of another phase (a harness bug, not a model failure).
    #[error("{tool:?} is not available in the {phase:?} phase")]
    WrongPhase {
        /// Operation attempted.
        tool: Tool,
        /// Current phase.
        phase: Phase,
    },
}

/// Splits on Unicode whitespace and keeps the first `max_words` words joined by single spaces.
pub fn truncate_words(text: &str, max_words: usize) -> String {
    text.split_whitespace().take(max_words).collect::<Vec<_>>().join(" ")
}

/// One task-run of BBQ-Bench, driven by any agent through phase-checked operations.
#[derive(Debug, Clone)]
pub struct Episode {
    task: Task,
    seed: u64,
    params: TaskParams,
    tests: Vec<Case>,
    samples: Vec<Case>,
    phase: Phase,
    round: u32,
    scratchpad: String,
    history: Vec<QueryResult>,
    attempts: [u32; 4],
    python_used: bool,
    record: EpisodeRecord,
}

impl Episode {
    /// Starts a task-run: generates the test set and samples for `seed` and enters round 0's
    /// evaluation (or round 1's query phase when `params.round_zero` is off).
    pub fn new(task: TaskId, seed: u64, params: TaskParams) -> Result<Episode, GenError> {
        let tests = test_set(task, seed, &params)?;
        let samples = samples(task, seed, &params, &tests)?;
        let spec = task.task();
        let (phase, round) = if params.round_zero { (Phase::Evaluation, 0) } else { (Phase::Query, 1) };
        let record = EpisodeRecord {
            task,
            seed,
            params: params.clone(),
            total_queries: spec.total_queries,
            query_batch_size: spec.query_batch_size,
            max_rounds: spec.rounds(),
            rounds: vec![RoundRecord { round, ..RoundRecord::default() }],
            solved: false,
            solved_round: None,
            solved_at_queries: None,
            queries_used: 0,
            failures: Vec::new(),
            forfeits: Vec::new(),
        };
        Ok(Episode {
            task: spec,
            seed,
            params,
            tests,
            samples,
            phase,
            round,
            scratchpad: String::new(),
            history: Vec::new(),
            attempts: [0; 4],
            python_used: false,
            record,
        })
    }

    /// The task's static configuration.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// Generator seed of the test set and samples.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Parameters in effect.
    pub fn params(&self) -> &TaskParams {
        &self.params
    }

    /// Current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Current round (0 = samples-only evaluation).
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Whether the run is over.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// Queries used so far.
    pub fn queries_used(&self) -> u32 {
        self.record.queries_used
    }

    /// Budget left.
    pub fn remaining_budget(&self) -> u32 {
        self.task.total_queries.saturating_sub(self.record.queries_used)
    }

    /// Sample pairs shown to the model (§4.6).
    pub fn samples(&self) -> &[Case] {
        &self.samples
    }

    /// Test inputs in presentation order (their outputs stay hidden).
    pub fn test_inputs(&self) -> Vec<&Input> {
        self.tests.iter().map(|c| &c.input).collect()
    }

    /// Full query history in query order.
    pub fn history(&self) -> &[QueryResult] {
        &self.history
    }

    /// Current scratchpad (empty before the first scratchpad phase).
    pub fn scratchpad(&self) -> &str {
        &self.scratchpad
    }

    /// The record so far.
    pub fn record(&self) -> &EpisodeRecord {
        &self.record
    }

    /// Consumes the episode, returning its record.
    pub fn into_record(self) -> EpisodeRecord {
        self.record
    }

    /// The samples message (§4.7): `Sample pairs:` and `input → output` lines, or
    /// `No sample cases provided.`
    pub fn samples_message(&self) -> String {
        if self.samples.is_empty() {
            return "No sample cases provided.".to_string();
        }
        let mut s = "Sample pairs:".to_string();
        for c in &self.samples {
            s.push_str(&format!("\n{} → {}", c.input, c.output));
        }
        s
    }

    /// The query history as `input → output` lines (§4.7), empty when nothing was queried.
    pub fn history_lines(&self) -> String {
        self.history.iter().map(|q| format!("{} → {}", q.input, q.output)).collect::<Vec<_>>().join("\n")
    }

    fn current_round(&mut self) -> &mut RoundRecord {
        if self.record.rounds.is_empty() {
            self.record.rounds.push(RoundRecord::default());
        }
        let last = self.record.rounds.len() - 1;
        &mut self.record.rounds[last]
    }

    fn require(&self, tool: Tool, phase: Phase) -> Result<(), EpisodeError> {
        if self.phase == phase { Ok(()) } else { Err(EpisodeError::WrongPhase { tool, phase: self.phase }) }
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.attempts = [0; 4];
        self.python_used = false;
    }

    /// Logs a failed attempt; returns whether this exhausted the tool's attempts.
    fn fail(&mut self, tool: Tool, cause: String) -> bool {
        self.record.failures.push(ToolFailure { round: self.round, phase: self.phase, tool, cause });
        let slot = tool.slot();
        self.attempts[slot] += 1;
        let limit = self.attempt_limit();
        if self.attempts[slot] == limit {
            self.record.forfeits.push(Forfeit { round: self.round, phase: self.phase, tool });
        }
        self.attempts[slot] >= limit
    }

    /// Attempts per tool and phase (at least 1, so a failing agent always makes progress).
    fn attempt_limit(&self) -> u32 {
        self.params.max_attempts.max(1)
    }

    /// Records a failed query attempt; forfeits the query phase after the last attempt.
    fn fail_query(&mut self, err: EpisodeError) -> EpisodeError {
        if self.fail(Tool::Query, err.to_string()) {
            self.current_round().query_forfeited = true;
            self.enter(Phase::Scratchpad);
        }
        err
    }

    /// Runs one `query` call (§2.2, §4.2): checks batch size, budget and every input; on
    /// success answers all inputs, consumes budget and moves to the scratchpad phase.
    pub fn query(&mut self, inputs: &[String]) -> Result<QueryResponse, EpisodeError> {
        self.require(Tool::Query, Phase::Query)?;
        let parsed: Vec<Result<Input, InputError>> = inputs.iter().map(|t| parse_input_with(self.task.id, t, &self.params)).collect();
        self.query_parsed(parsed)
    }

    /// [`Episode::query`] for the JSON items of a tool call (§4.2 encodings).
    pub fn query_json(&mut self, inputs: &[serde_json::Value]) -> Result<QueryResponse, EpisodeError> {
        self.require(Tool::Query, Phase::Query)?;
        let parsed: Vec<Result<Input, InputError>> = inputs.iter().map(|v| parse_json_input_with(self.task.id, v, &self.params)).collect();
        self.query_parsed(parsed)
    }

    fn query_parsed(&mut self, parsed: Vec<Result<Input, InputError>>) -> Result<QueryResponse, EpisodeError> {
        let max = self.task.query_batch_size;
        let remaining = self.remaining_budget();
        let n = parsed.len();
        if n == 0 {
            return Err(self.fail_query(EpisodeError::EmptyBatch));
        }
        if n > usize::try_from(max).unwrap_or(usize::MAX) {
            let hint = if matches!(self.task.input, InputKind::Tuple { .. }) { "; tuples must be written in parentheses, e.g. '(1, 2)'" } else { "" };
            return Err(self.fail_query(EpisodeError::BatchTooLarge { got: n, max, hint }));
        }
        if n > usize::try_from(remaining).unwrap_or(usize::MAX) {
            return Err(self.fail_query(EpisodeError::OverBudget { requested: n, remaining }));
        }
        let mut inputs = Vec::with_capacity(n);
        for (i, p) in parsed.into_iter().enumerate() {
            match p {
                Ok(x) => inputs.push(x),
                Err(source) => {
                    return Err(self.fail_query(EpisodeError::InvalidInput { index: i + 1, source }));
                }
            }
        }
        let results: Vec<QueryResult> =
            inputs.into_iter().map(|input| QueryResult { output: evaluate_with(self.task.id, &input, &self.params), input }).collect();
        self.history.extend(results.iter().cloned());
        self.record.queries_used += u32::try_from(n).unwrap_or(u32::MAX);
        self.current_round().queries.extend(results.iter().cloned());
        self.enter(Phase::Scratchpad);
        Ok(QueryResponse { results, remaining_budget: self.remaining_budget() })
    }

    /// Ends the scratchpad phase with `text` truncated to `scratchpad_max_words` words; an
    /// empty text keeps the previous scratchpad (§4.9). Returns the scratchpad now in effect.
    pub fn set_scratchpad(&mut self, text: &str) -> Result<&str, EpisodeError> {
        self.require(Tool::Scratchpad, Phase::Scratchpad)?;
        let t = truncate_words(text, self.params.scratchpad_max_words);
        if !t.is_empty() {
            self.scratchpad = t;
        }
        let kept = self.scratchpad.clone();
        self.current_round().scratchpad = Some(kept);
        self.enter(Phase::Evaluation);
        Ok(&self.scratchpad)
    }

    /// Submits one prediction per test input (text form, §4.8 matching). Returns per-item
    /// correctness; a wrong length is a failed attempt and the 3rd forfeits the round.
    pub fn submit_predictions(&mut self, predictions: Vec<String>) -> Result<Evaluation, EpisodeError> {
        self.require(Tool::SubmitPredictions, Phase::Evaluation)?;
        let correct: Option<Vec<bool>> =
            (predictions.len() == self.tests.len()).then(|| self.tests.iter().zip(&predictions).map(|(c, p)| c.output.matches_text(p)).collect());
        self.finish_evaluation(predictions, correct)
    }

    /// [`Episode::submit_predictions`] for JSON predictions (integers, integral floats, strings).
    pub fn submit_json_predictions(&mut self, predictions: Vec<serde_json::Value>) -> Result<Evaluation, EpisodeError> {
        self.require(Tool::SubmitPredictions, Phase::Evaluation)?;
        let correct: Option<Vec<bool>> =
            (predictions.len() == self.tests.len()).then(|| self.tests.iter().zip(&predictions).map(|(c, p)| c.output.matches_json(p)).collect());
        let texts = predictions
            .iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        self.finish_evaluation(texts, correct)
    }

    fn finish_evaluation(&mut self, predictions: Vec<String>, correct: Option<Vec<bool>>) -> Result<Evaluation, EpisodeError> {
        let Some(correct) = correct else {
            let err = EpisodeError::WrongPredictionCount { expected: self.tests.len(), got: predictions.len() };
            if self.fail(Tool::SubmitPredictions, err.to_string()) {
                self.current_round().evaluation_forfeited = true;
                self.advance(false);
            }
            return Err(err);
        };
        let all_correct = correct.iter().all(|&c| c);
        let round = self.current_round();
        round.predictions = Some(predictions);
        round.correct.clone_from(&correct);
        round.solved = all_correct;
        self.advance(all_correct);
        Ok(Evaluation { correct, all_correct })
    }

    /// Closes the evaluation: stop when solved, after round R, or with the budget spent.
    fn advance(&mut self, solved: bool) {
        if solved {
            self.record.solved = true;
            self.record.solved_round = Some(self.round);
            self.record.solved_at_queries = Some(self.record.queries_used);
            self.enter(Phase::Finished);
        } else if self.round >= self.task.rounds() || self.remaining_budget() == 0 {
            self.enter(Phase::Finished);
        } else {
            self.round += 1;
            self.record.rounds.push(RoundRecord { round: self.round, ..RoundRecord::default() });
            self.enter(Phase::Query);
        }
    }

    /// Logs a failure detected outside the episode (no tool call, malformed arguments, a
    /// Python error). Query/prediction failures count towards forfeiting that phase; a failed
    /// scratchpad reply keeps the previous scratchpad and ends the scratchpad phase.
    pub fn record_failure(&mut self, tool: Tool, cause: &str) -> Result<(), EpisodeError> {
        match tool {
            Tool::Query => {
                self.require(tool, Phase::Query)?;
                if self.fail(tool, cause.to_string()) {
                    self.current_round().query_forfeited = true;
                    self.enter(Phase::Scratchpad);
                }
            }
            Tool::SubmitPredictions => {
                self.require(tool, Phase::Evaluation)?;
                if self.fail(tool, cause.to_string()) {
                    self.current_round().evaluation_forfeited = true;
                    self.advance(false);
                }
            }
            Tool::ExecutePython => {
                if self.phase == Phase::Finished {
                    return Err(EpisodeError::WrongPhase { tool, phase: self.phase });
                }
                self.fail(tool, cause.to_string());
            }
            Tool::Scratchpad => {
                self.require(tool, Phase::Scratchpad)?;
                self.fail(tool, cause.to_string());
                self.set_scratchpad("")?;
            }
        }
        Ok(())
    }

    /// Claims this phase's one successful `execute_python` run (§4.8); refused after a
    /// success or after `max_attempts` failures in the phase.
    pub fn record_python_success(&mut self) -> Result<(), EpisodeError> {
        if self.phase == Phase::Finished {
            return Err(EpisodeError::WrongPhase { tool: Tool::ExecutePython, phase: self.phase });
        }
        if self.attempts[Tool::ExecutePython.slot()] >= self.attempt_limit() {
            return Err(EpisodeError::PythonForfeited);
        }
        if self.python_used {
            return Err(EpisodeError::PythonAlreadyUsed);
        }
        self.python_used = true;
        Ok(())
    }

    /// Marks `n` queries as used without answering any (tests reach the otherwise unreachable
    /// over-budget state this way: rounds × batch size = budget).
    #[cfg(test)]
    pub(crate) fn spend_budget_for_tests(&mut self, n: u32) {
        self.record.queries_used = n;
    }

    /// Whether `execute_python` may still run in this phase.
    pub fn python_available(&self) -> bool {
        self.phase != Phase::Finished && !self.python_used && self.attempts[Tool::ExecutePython.slot()] < self.attempt_limit()
    }
}

#[cfg(test)]
mod tests;
