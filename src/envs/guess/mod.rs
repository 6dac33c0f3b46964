//! Guess the number: the smallest complete benchmark, and the worked example of
//! `docs/adding-a-benchmark.md`. A secret integer in `1..=N` (N = 10, 100 or 1000, the
//! task); the player guesses, hears "higher" or "lower", and has `max_turns` tries.
//! Built-in agents `bisect` (optimal) and `linear`; any API model plays through chat.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::benchmark::{Benchmark, FigureInput};
use super::metric::MetricDef;
use super::splitmix::SplitMix64;
use crate::exec::{BoxFuture, CallSite, EpisodeContext, StepError};
use crate::exhibit::{Figure, FigureKind, Series};
use crate::providers::{ChatRequest, Message};
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Name in pipelines.
pub const NAME: &str = "guess";
/// The tasks: the size of the range.
const TASKS: &[(&str, u64)] = &[("range_10", 10), ("range_100", 100), ("range_1000", 1000)];
/// Built-in agents.
const AGENTS: &[&str] = &["bisect", "linear"];

/// The benchmark as the registry sees it.
pub struct Guess;

/// One played round.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    range: u64,
    secret: u64,
    max_turns: u64,
    /// The guesses in order (`None`: the answer held no number).
    guesses: Vec<Option<u64>>,
    solved: bool,
}

fn issue(site: IssueSite, message: String) -> Vec<CatalogIssue> {
    vec![CatalogIssue { site, message, hint: None }]
}

/// The secret of a cell: a pure function of the range and the seed.
fn secret(range: u64, seed: u64) -> u64 {
    1 + SplitMix64::new(seed ^ range.wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64() % range
}

/// The reply to a guess.
fn feedback(guess: Option<u64>, secret: u64) -> &'static str {
    match guess {
        None => "That is not a number. Reply with one integer.",
        Some(g) if g < secret => "higher",
        Some(g) if g > secret => "lower",
        Some(_) => "correct",
    }
}

/// The first integer in a model's answer.
fn parse_guess(text: &str) -> Option<u64> {
    let digits: String = text.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn play_builtin(agent: &str, range: u64, secret: u64, max_turns: u64) -> Record {
    let (mut lo, mut hi) = (1, range);
    let mut guesses = Vec::new();
    for turn in 0..max_turns {
        let g = if agent == "linear" { (turn + 1).min(range) } else { lo + (hi - lo) / 2 };
        guesses.push(Some(g));
        match feedback(Some(g), secret) {
            "higher" => lo = g + 1,
            "lower" => hi = g.saturating_sub(1).max(lo),
            _ => return Record { range, secret, max_turns, guesses, solved: true },
        }
    }
    Record { range, secret, max_turns, guesses, solved: false }
}

async fn play_model(ctx: EpisodeContext<'_>, model: &ModelConfig, range: u64, secret: u64, max_turns: u64, seed: u64) -> Result<Record, StepError> {
    let params: serde_json::Map<String, Value> = model.params.clone().into_iter().collect();
    let mut messages = vec![Message::user(format!(
        "I am thinking of an integer between 1 and {range}. Guess it: reply with one integer. After each guess I say `higher`, `lower` or `correct`. You have {max_turns} guesses."
    ))];
    let mut guesses = Vec::new();
    for turn in 0..max_turns {
        let request = ChatRequest { messages: messages.clone(), params: params.clone(), ..ChatRequest::default() };
        let site = CallSite { scope: Some(ctx.episode_key), position: format!("turn {turn}"), sample: seed };
        let reply = ctx.chat(model, &request, &site).await?;
        // The conversation no longer fits the model's context and only grows: unsolved.
        if reply.finish_reason == crate::providers::FinishReason::ContextExceeded {
            guesses.push(None);
            return Ok(Record { range, secret, max_turns, guesses, solved: false });
        }
        let guess = parse_guess(&reply.text);
        guesses.push(guess);
        let said = feedback(guess, secret);
        if said == "correct" {
            return Ok(Record { range, secret, max_turns, guesses, solved: true });
        }
        messages.push(Message::assistant(reply.text));
        messages.push(Message::user(said));
    }
    Ok(Record { range, secret, max_turns, guesses, solved: false })
}

/// Guesses bisection needs in the worst case: ⌈log2(range + 1)⌉.
fn optimal_turns(range: u64) -> u64 {
    u64::from(64 - range.leading_zeros())
}

impl Benchmark for Guess {
    fn name(&self) -> &'static str {
        NAME
    }

    fn resolve_tasks(&self, _data_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        if let Some(key) = params.keys().find(|k| *k != "max_turns") {
            return Err(issue(IssueSite::Param(key.clone()), format!("unknown parameter `{key}` (known: max_turns)")));
        }
        let max_turns = match params.get("max_turns") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or_else(|| issue(IssueSite::Param("max_turns".into()), "`max_turns` must be an integer from 1 to 10000".into()))?,
            ),
        };
        let names: Vec<&str> = match select {
            Selection::All => TASKS.iter().map(|(n, _)| *n).collect(),
            Selection::Names(names) => names.iter().map(String::as_str).collect(),
        };
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let &(task, range) = TASKS
                    .iter()
                    .find(|(n, _)| n == name)
                    .ok_or_else(|| issue(IssueSite::Selected(i), format!("unknown task `{name}` (known: range_10, range_100, range_1000)")))?;
                let turns = max_turns.unwrap_or_else(|| optimal_turns(range) + 2);
                Ok(TaskInstance {
                    benchmark: NAME.into(),
                    task: task.into(),
                    content_hash: blake3::hash(format!("{task}:{range}").as_bytes()).to_hex().to_string(),
                    params: [("max_turns".to_owned(), json!(turns))].into(),
                    episode_version: 1,
                    score_version: 1,
                    suite: NAME.into(),
                })
            })
            .collect()
    }

    fn resolve_builtin(&self, agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
        if !AGENTS.contains(&agent) {
            return Err(issue(IssueSite::Entry, format!("unknown built-in agent `{agent}` (known: bisect, linear)")));
        }
        Ok(params.clone())
    }

    /// One unit per cell: whether the number was found.
    fn unit_metrics(&self) -> Vec<super::metric::UnitMetric> {
        vec![super::metric::UnitMetric::new("solved", "solved", "solve_rate", true)]
    }

    fn metrics(&self) -> Vec<MetricDef> {
        vec![MetricDef::mean("solve_rate", "solved"), MetricDef::mean("mean_guesses", "guesses"), MetricDef::mean("efficiency", "efficiency")]
    }

    fn run_episode<'a>(
        &'a self,
        ctx: EpisodeContext<'a>,
        _data_dir: &'a Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> BoxFuture<'a, Result<Value, StepError>> {
        Box::pin(async move {
            let range =
                TASKS.iter().find(|(n, _)| *n == task.task).map(|(_, r)| *r).ok_or_else(|| StepError::Unsupported(format!("unknown task `{}`", task.task)))?;
            let max_turns = task.params.get("max_turns").and_then(Value::as_u64).unwrap_or(10);
            let secret = secret(range, seed);
            let record = if model.is_builtin() {
                play_builtin(&model.model, range, secret, max_turns)
            } else {
                play_model(ctx, model, range, secret, max_turns, seed).await?
            };
            serde_json::to_value(record).map_err(StepError::episode)
        })
    }

    fn score(&self, _data_dir: &Path, _task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        let r: Record = serde_json::from_value(episode.clone()).map_err(|e| StepError::score_in("not a guess record", e))?;
        let used = r.guesses.len() as u64;
        #[expect(clippy::cast_precision_loss, reason = "turn counts are small")]
        let efficiency = if r.solved { (optimal_turns(r.range) as f64 / used.max(1) as f64).min(1.0) } else { 0.0 };
        Ok(json!({"solved": r.solved, "guesses": used, "efficiency": efficiency}))
    }

    fn headline_field(&self) -> Option<&'static str> {
        Some("guesses")
    }

    fn figures(&self, input: &FigureInput<'_>) -> Vec<Figure> {
        let mut out = Vec::new();
        for t in &input.tables {
            let series: Vec<Series> = input
                .models
                .iter()
                .filter_map(|m| {
                    let values: Vec<(String, f64)> =
                        t.by_task.iter().filter(|r| r.model == m.id).filter_map(|r| Some((r.task.clone()?, t.value(r, "mean_guesses")?))).collect();
                    (!values.is_empty()).then(|| Series::labelled(&m.id, values))
                })
                .collect();
            if !series.is_empty() {
                out.push(Figure {
                    id: "guess-guesses".into(),
                    title: "Guess the number: mean guesses per task".into(),
                    kind: FigureKind::Bars,
                    x_label: "task".into(),
                    y_label: "guesses".into(),
                    series,
                    diagonal: false,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisection_is_optimal_and_linear_is_not() {
        for seed in 0..50 {
            let s = secret(100, seed);
            assert!((1..=100).contains(&s));
            let b = play_builtin("bisect", 100, s, optimal_turns(100));
            assert!(b.solved, "bisection finds {s} within {} guesses", optimal_turns(100));
        }
        let l = play_builtin("linear", 100, 100, 9);
        assert!(!l.solved && l.guesses.len() == 9);
        assert_eq!(parse_guess("I guess 42, maybe 43"), Some(42));
        assert_eq!(parse_guess("no idea"), None);
        assert_eq!(optimal_turns(10), 4);
    }
}
