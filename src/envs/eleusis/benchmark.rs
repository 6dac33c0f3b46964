//! Eleusis as an evalgrid benchmark: task resolution, built-in agents,
//! episode and score steps, and the metric columns it offers.

use serde_json::{Value, json};

use super::game::rule::SecretRule;
use super::game::{GameConfig, RoundResult};
use super::play::agents::{Agent, OracleAgent, RandomAgent, play_round};
use super::play::ideal::IdealAgent;
use crate::envs::metric::{Agg, MetricDef};
use crate::exec::StepError;
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Selection, TaskInstance};

/// Benchmark name in pipelines.
pub const NAME: &str = "eleusis";
/// Bump when episode behaviour (game engine, built-in agents) changes.
pub const EPISODE_VERSION: u32 = 1;
/// Bump when the per-round score record changes.
pub const SCORE_VERSION: u32 = 1;
/// Built-in agents this benchmark can run.
pub const BUILTIN_AGENTS: &[&str] = &["random", "oracle", "ideal"];
/// Metric columns: (column name, score field averaged over rounds).
const METRICS: &[(&str, &str)] = &[
    ("mean_score", "score"),
    ("mean_floored_score", "floored_score"),
    ("success_rate", "success"),
    ("mean_failed_guesses", "failed_guesses"),
    ("mean_no_stakes_score", "no_stakes_score"),
    ("mean_turns", "turns_played"),
];

/// Table columns offered by Eleusis.
#[must_use]
pub fn metrics() -> Vec<MetricDef> {
    let mut m: Vec<MetricDef> = METRICS.iter().map(|(name, field)| MetricDef::mean(name, field)).collect();
    m.insert(1, MetricDef { name: "mean_score_ci_low".into(), agg: Agg::MeanCiLow("score".into()) });
    m.insert(2, MetricDef { name: "mean_score_ci_high".into(), agg: Agg::MeanCiHigh("score".into()) });
    m
}

const TASK_PARAMS: &[&str] = &["max_turns", "hand_size", "wrong_guess_penalty", "compiler"];

/// Resolves `select:` to rule tasks, validating `params:`.
pub fn resolve_tasks(select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
    let mut issues = Vec::new();
    let config = game_config(params, &mut issues);
    let rules: Vec<SecretRule> = match select {
        Selection::All => SecretRule::ALL.to_vec(),
        Selection::Names(names) => {
            let known: Vec<&str> = SecretRule::ALL.iter().map(|r| r.name()).collect();
            let mut out = Vec::new();
            for (i, name) in names.iter().enumerate() {
                match SecretRule::from_name(name) {
                    Some(rule) => out.push(rule),
                    None => issues.push(CatalogIssue {
                        site: IssueSite::Selected(i),
                        message: format!("unknown Eleusis rule `{name}`"),
                        hint: suggestion(name, &known),
                    }),
                }
            }
            out
        }
    };
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut resolved: Params = [
        ("hand_size".to_owned(), json!(config.hand_size)),
        ("max_turns".to_owned(), json!(config.max_turns)),
        ("wrong_guess_penalty".to_owned(), json!(config.wrong_guess_penalty)),
    ]
    .into();
    // The rule compiler of API players is part of the task: it decides verdicts.
    if let Some(compiler) = params.get("compiler") {
        if compiler.get("model").and_then(Value::as_str).is_none() {
            return Err(vec![CatalogIssue {
                site: IssueSite::Param("compiler".into()),
                message: "`compiler` must be a mapping with at least `model` (and `provider`, `base_url`, `api_key_env`, `params`)".into(),
                hint: None,
            }]);
        }
        // Its price is checked here and kept out of the task (and so out of every key): the
        // pipeline holds it as the `rule-compiler`'s helper price.
        let mut keyed = compiler.clone();
        if let Some(price) = keyed.as_object_mut().and_then(|c| c.remove("price"))
            && let Err(message) = crate::spec::Price::from_param(&price)
        {
            let message = message.strip_prefix('`').map_or_else(|| message.clone(), |rest| format!("`compiler.{rest}"));
            return Err(vec![CatalogIssue { site: IssueSite::Param("compiler".into()), message, hint: None }]);
        }
        resolved.insert("compiler".into(), keyed);
    }
    let params = resolved;
    Ok(rules
        .into_iter()
        .map(|rule| TaskInstance {
            benchmark: NAME.to_owned(),
            task: rule.name().to_owned(),
            content_hash: rule_content_hash(rule),
            params: params.clone(),
            episode_version: EPISODE_VERSION,
            score_version: SCORE_VERSION,
            suite: NAME.to_owned(),
        })
        .collect())
}

/// Hash of what defines a rule: name, verbatim description, and the md5 of
/// its reference code (which also seeds its decks).
fn rule_content_hash(rule: SecretRule) -> String {
    let text = format!("eleusis-rule\0{}\0{}\0{}", rule.name(), rule.description(), rule.code_md5_low32());
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

fn int_param(params: &Params, name: &str, min: i64, max: i64, default: i64, issues: &mut Vec<CatalogIssue>) -> i64 {
    match params.get(name) {
        None => default,
        Some(v) => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => n,
            _ => {
                issues.push(CatalogIssue {
                    site: IssueSite::Param(name.to_owned()),
                    message: format!("`{name}` must be an integer from {min} to {max}, found `{v}`"),
                    hint: None,
                });
                default
            }
        },
    }
}

fn game_config(params: &Params, issues: &mut Vec<CatalogIssue>) -> GameConfig {
    for name in params.keys() {
        if !TASK_PARAMS.contains(&name.as_str()) {
            issues.push(CatalogIssue {
                site: IssueSite::Param(name.clone()),
                message: format!("unknown Eleusis task parameter `{name}`"),
                hint: suggestion(name, TASK_PARAMS),
            });
        }
    }
    let defaults = GameConfig::default();
    GameConfig {
        hand_size: usize::try_from(int_param(params, "hand_size", 1, 52, 12, issues)).unwrap_or(defaults.hand_size),
        max_turns: u32::try_from(int_param(params, "max_turns", 1, 200, 30, issues)).unwrap_or(defaults.max_turns),
        wrong_guess_penalty: int_param(params, "wrong_guess_penalty", 0, 30, 2, issues),
    }
}

/// Validates a built-in agent's parameters and fills defaults.
pub fn resolve_builtin(agent: &str, params: &Params) -> Result<Params, Vec<CatalogIssue>> {
    let allowed: &[&str] = match agent {
        "random" => &["salt"],
        "oracle" | "ideal" => &[],
        _ => {
            return Err(vec![CatalogIssue {
                site: IssueSite::Entry,
                message: format!("unknown built-in agent `{agent}`"),
                hint: suggestion(agent, BUILTIN_AGENTS),
            }]);
        }
    };
    let mut issues = Vec::new();
    for name in params.keys() {
        if !allowed.contains(&name.as_str()) {
            issues.push(CatalogIssue {
                site: IssueSite::Param(name.clone()),
                message: format!("built-in agent `{agent}` has no parameter `{name}`"),
                hint: if allowed.is_empty() { Some(format!("`{agent}` takes no parameters")) } else { suggestion(name, allowed) },
            });
        }
    }
    let mut out = Params::new();
    if agent == "random" {
        let salt = int_param(params, "salt", 0, i64::MAX, 0, &mut issues);
        out.insert("salt".into(), json!(salt));
    }
    if issues.is_empty() { Ok(out) } else { Err(issues) }
}

/// Plays one round (CPU-bound; the caller runs it off the async workers).
pub fn run_episode(model: &ModelConfig, task: &TaskInstance, seed: u64) -> Result<Value, StepError> {
    let rule = SecretRule::from_name(&task.task).ok_or_else(|| StepError::Unsupported(format!("unknown rule `{}`", task.task)))?;
    let batch = u32::try_from(seed).map_err(|_| StepError::Unsupported(format!("Eleusis seeds are repetition indices and must fit in 32 bits, got {seed}")))?;
    let mut issues = Vec::new();
    let config = game_config(&task.params, &mut issues);
    if !model.is_builtin() {
        return Err(StepError::Unsupported(format!("provider `{}` is not wired to Eleusis yet", model.provider)));
    }
    let mut agent: Box<dyn Agent> = match model.model.as_str() {
        "random" => {
            let salt = model.params.get("salt").and_then(Value::as_u64).unwrap_or(0);
            Box::new(RandomAgent::new(agent_seed(salt, rule, batch)))
        }
        "oracle" => Box::new(OracleAgent::new(rule)),
        "ideal" => Box::new(IdealAgent::new()),
        other => return Err(StepError::Unsupported(format!("unknown built-in agent `{other}`"))),
    };
    let result = play_round(rule, batch, config, agent.as_mut()).map_err(StepError::episode)?;
    serde_json::to_value(result).map_err(StepError::episode)
}

/// Seed of the random agent for one round: independent of other rounds and
/// of the deck order, changed by `salt`.
fn agent_seed(salt: u64, rule: SecretRule, batch: u32) -> u64 {
    let mut h = blake3::Hasher::new_derive_key("evalgrid eleusis random-agent v1");
    h.update(&salt.to_le_bytes());
    h.update(rule.name().as_bytes());
    h.update(&batch.to_le_bytes());
    let bytes = h.finalize();
    u64::from_le_bytes(bytes.as_bytes()[..8].try_into().expect("blake3 output has 32 bytes"))
}

/// Per-round score record from an episode record.
pub fn score(episode: &Value) -> Result<Value, StepError> {
    let r: RoundResult = serde_json::from_value(episode.clone()).map_err(|e| StepError::score_in("not an Eleusis round record", e))?;
    Ok(json!({
        "score": r.score,
        "floored_score": r.floored_score,
        "success": r.success,
        "failed_guesses": r.failed_guesses,
        "win_turn": r.win_turn,
        "no_stakes_score": r.no_stakes_score,
        "turns_played": r.turns_played,
    }))
}

/// Human-readable transcript of a round record, for `evalgrid show`.
#[must_use]
pub fn transcript(episode: &Value) -> String {
    use std::fmt::Write as _;
    let Ok(r) = serde_json::from_value::<RoundResult>(episode.clone()) else {
        return serde_json::to_string_pretty(episode).unwrap_or_default();
    };
    let mut out = format!("rule {} (repetition {}, deck seed {}), starter {}\n", r.rule, r.batch, r.seed, r.starter);
    for t in &r.turns {
        let hand: Vec<String> = t.hand_before.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "turn {:2}  board: {}", t.turn, t.board_before);
        let _ = writeln!(out, "         hand:  {}", hand.join(", "));
        let _ = writeln!(out, "         plays {} → {}", t.card, if t.accepted { "accepted" } else { "rejected" });
        if !t.reasoning.is_empty() {
            let _ = writeln!(out, "         reasoning: {}", t.reasoning);
        }
        if let Some(c) = &t.check {
            let kind = match c.kind {
                super::game::GuessKind::Formal => "guess",
                super::game::GuessKind::Shadow => "shadow check",
            };
            let _ = writeln!(out, "         {kind} \"{}\": {} ({})", c.guess, if c.correct { "correct" } else { "wrong" }, c.message);
        }
    }
    let _ = write!(
        out,
        "end: {:?} after {} turns; score {} (floored {}), failed guesses {}; final board {}",
        r.game_over_reason, r.turns_played, r.score, r.floored_score, r.failed_guesses, r.final_board
    );
    out
}

/// Eleusis as the registry sees it.
pub struct Eleusis;

impl crate::envs::benchmark::Benchmark for Eleusis {
    fn name(&self) -> &'static str {
        NAME
    }
    fn resolve_tasks(&self, _data_dir: &std::path::Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        resolve_tasks(select, params)
    }
    /// The rule compiler, which compiles an API player's guesses.
    fn helpers(&self, params: &Params) -> Vec<crate::spec::Helper> {
        if !params.contains_key("compiler") {
            return Vec::new();
        }
        crate::envs::eleusis::play::llm_episode::compiler_model(params)
            .ok()
            .map(|model| crate::spec::Helper { model, param: "compiler", for_builtin: false, site: "compile attempt" })
            .into_iter()
            .collect()
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
        vec![UnitMetric::new("score", "score", "mean_score", false), UnitMetric::new("success", "success", "success_rate", true)]
    }
    /// API players' guessed rules run as Python in the judge.
    fn runs_model_code(&self, model: &ModelConfig) -> bool {
        !model.is_builtin()
    }
    fn run_episode<'a>(
        &'a self,
        ctx: crate::exec::EpisodeContext<'a>,
        _data_dir: &'a std::path::Path,
        model: &'a ModelConfig,
        task: &'a TaskInstance,
        seed: u64,
    ) -> crate::exec::BoxFuture<'a, Result<Value, StepError>> {
        crate::envs::benchmark::builtin_on_cpu_or(model, task, seed, run_episode, super::play::llm_episode::run_task(ctx, model, task, seed))
    }
    fn score(&self, _data_dir: &std::path::Path, _task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
        score(episode)
    }
    fn transcript(&self, episode: &Value) -> String {
        transcript(episode)
    }
    fn headline_field(&self) -> Option<&'static str> {
        Some("score")
    }
    fn sections(&self, input: &crate::envs::benchmark::SectionInput<'_>) -> Result<Vec<crate::exhibit::Section>, StepError> {
        super::report::sections(input)
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
