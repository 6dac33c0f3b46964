//! Built-in offline agents driving an [`Episode`]: the [`Agent`] trait, what an agent may see
//! ([`Observation`]: exactly what the model is shown), a seeded [`RandomAgent`] baseline and
//! [`play`], which runs any agent to the end of an episode and returns its record.

use super::episode::Episode;
use super::function::{Input, Output};
use super::generator::{Case, SplitMix64, sample_input};
use super::parse::validate;
use super::record::{EpisodeRecord, Phase, QueryResult};
use super::task::{OutputKind, Task};

/// What the model is shown at a decision point; agents see nothing else (in particular not
/// per-case correctness or the test outputs).
#[derive(Debug, Clone)]
pub struct Observation<'a> {
    /// Task configuration (input/output types, budget, batch size).
    pub task: &'a Task,
    /// Phase awaiting an action.
    pub phase: Phase,
    /// Current round.
    pub round: u32,
    /// Budget left.
    pub remaining_budget: u32,
    /// Sample pairs.
    pub samples: &'a [Case],
    /// Full query history.
    pub history: &'a [QueryResult],
    /// Test inputs (only in the evaluation phase; empty otherwise).
    pub test_inputs: Vec<&'a Input>,
    /// Current scratchpad.
    pub scratchpad: &'a str,
}

impl<'a> Observation<'a> {
    /// The model-visible state of `episode`.
    pub fn of(episode: &'a Episode) -> Observation<'a> {
        let phase = episode.phase();
        Observation {
            task: episode.task(),
            phase,
            round: episode.round(),
            remaining_budget: episode.remaining_budget(),
            samples: episode.samples(),
            history: episode.history(),
            test_inputs: if phase == Phase::Evaluation { episode.test_inputs() } else { Vec::new() },
            scratchpad: episode.scratchpad(),
        }
    }

    /// All known (input, output) pairs: samples then history.
    pub fn known(&self) -> Vec<(&'a Input, &'a Output)> {
        self.samples.iter().map(|c| (&c.input, &c.output)).chain(self.history.iter().map(|q| (&q.input, &q.output))).collect()
    }
}

/// A synchronous player of BBQ-Bench episodes (one method per phase).
pub trait Agent {
    /// Inputs for this round's `query` call, written as the model would (e.g. `(1, 2, 3)`).
    fn queries(&mut self, obs: &Observation<'_>) -> Vec<String>;
    /// The scratchpad text carried to the next phase.
    fn scratchpad(&mut self, obs: &Observation<'_>) -> String;
    /// One prediction per test input, in order.
    fn predictions(&mut self, obs: &Observation<'_>) -> Vec<String>;
}

/// Runs `agent` on `episode` until it finishes and returns the record. Terminates for any
/// agent: every call either advances the phase or counts towards forfeiting it.
pub fn play<A: Agent + ?Sized>(mut episode: Episode, agent: &mut A) -> EpisodeRecord {
    // Generous bound: each phase ends after at most `max_attempts` failures.
    let limit = 4 * (episode.task().rounds() as usize + 1) * (episode.params().max_attempts as usize + 1) + 16;
    for _ in 0..limit {
        match episode.phase() {
            Phase::Finished => break,
            Phase::Query => {
                let q = agent.queries(&Observation::of(&episode));
                // Errors are recorded as failed attempts inside the episode.
                let _ = episode.query(&q);
            }
            Phase::Scratchpad => {
                let s = agent.scratchpad(&Observation::of(&episode));
                let _ = episode.set_scratchpad(&s);
            }
            Phase::Evaluation => {
                let p = agent.predictions(&Observation::of(&episode));
                let _ = episode.submit_predictions(p);
            }
        }
    }
    episode.into_record()
}

/// Levenshtein distance between two byte strings.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Distance between inputs: L1 for integers/tuples, edit distance for strings.
pub fn input_distance(a: &Input, b: &Input) -> u128 {
    match (a, b) {
        (Input::Int(x), Input::Int(y)) => (i128::from(*x) - i128::from(*y)).unsigned_abs(),
        (Input::Tuple(xs), Input::Tuple(ys)) if xs.len() == ys.len() => xs.iter().zip(ys).map(|(x, y)| (i128::from(*x) - i128::from(*y)).unsigned_abs()).sum(),
        (Input::Str(x), Input::Str(y)) => edit_distance(x.as_bytes(), y.as_bytes()) as u128,
        _ => u128::MAX,
    }
}

/// Predicts the output of the nearest known input (first on ties); with nothing known, `0`
/// for integer outputs and the input itself for string outputs.
pub fn nearest_prediction(task: &Task, known: &[(&Input, &Output)], x: &Input) -> String {
    known.iter().min_by_key(|(k, _)| input_distance(k, x)).map(|(_, o)| plain(o)).unwrap_or_else(|| match (task.output, x) {
        (OutputKind::Str, Input::Str(s)) => s.clone(),
        _ => "0".to_string(),
    })
}

/// An output as a prediction text (strings without quotes, §4.8 matching).
pub fn plain(o: &Output) -> String {
    match o {
        Output::Int(v) => v.to_string(),
        Output::Str(s) => s.clone(),
    }
}

/// Queries random valid inputs from the task's sampler and predicts by nearest queried input:
/// the no-reasoning baseline the solver must beat.
#[derive(Debug, Clone)]
pub struct RandomAgent {
    rng: SplitMix64,
}

impl RandomAgent {
    /// A random agent fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        RandomAgent { rng: SplitMix64::new(seed) }
    }
}

impl Agent for RandomAgent {
    fn queries(&mut self, obs: &Observation<'_>) -> Vec<String> {
        let n = obs.task.query_batch_size.min(obs.remaining_budget).max(1);
        (0..n)
            .map(|_| {
                let mut x = sample_input(obs.task.id, &mut self.rng);
                for _ in 0..100 {
                    if validate(obs.task.id, &x).is_ok() {
                        break;
                    }
                    x = sample_input(obs.task.id, &mut self.rng);
                }
                x.to_string()
            })
            .collect()
    }

    fn scratchpad(&mut self, obs: &Observation<'_>) -> String {
        format!("{} queries so far; predicting by nearest neighbour.", obs.history.len())
    }

    fn predictions(&mut self, obs: &Observation<'_>) -> Vec<String> {
        let known = obs.known();
        obs.test_inputs.iter().map(|x| nearest_prediction(obs.task, &known, x)).collect()
    }
}

#[cfg(test)]
mod tests;
