//! The score step: every scorer of the task over every answer of the episode record (no
//! dataset read: the record carries the targets and the choice order).

use serde_json::{Map, Value, json};

use super::config::{Scorer, ScorerKind};
use super::episode::Answer;
use super::inspect;
use super::judge::grade_value;
use crate::exec::StepError;
use crate::spec::TaskInstance;

/// The task's scorers, as its params hold them.
pub fn scorers(task: &TaskInstance) -> Result<Vec<Scorer>, StepError> {
    serde_json::from_value(task.params.get("scorers").cloned().unwrap_or(Value::Null)).map_err(|e| StepError::score_in("the task's `scorers`", e))
}

/// One scorer's value for one answer (`None`: unscored, e.g. a judge without a grade).
pub fn value(scorer: &Scorer, a: &Answer) -> Result<Option<f64>, StepError> {
    let hit = |b: bool| Some(f64::from(u8::from(b)));
    Ok(match &scorer.kind {
        ScorerKind::Match { location, ignore_case, numeric } => hit(inspect::match_any(&a.answer, &a.targets, *location, *ignore_case, *numeric)),
        ScorerKind::Includes { ignore_case } => hit(inspect::includes(&a.answer, &a.targets, *ignore_case)),
        ScorerKind::Exact => hit(inspect::exact(&a.answer, &a.targets)),
        ScorerKind::F1 { stop_words } => Some(inspect::f1(&a.answer, &a.targets, stop_words)),
        ScorerKind::Pattern { pattern, ignore_case, match_all } => {
            let re =
                regex::RegexBuilder::new(pattern).case_insensitive(*ignore_case).size_limit(1 << 20).build().map_err(|e| StepError::score_in("pattern", e))?;
            hit(inspect::pattern(&re, &a.answer, &a.targets, *ignore_case, *match_all))
        }
        ScorerKind::Answer { pattern } => hit(inspect::answer(*pattern, &a.answer, &a.targets)),
        ScorerKind::Choice { multiple_correct, .. } => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            hit(inspect::choice(&a.answer, &targets, &a.order, *multiple_correct))
        }
        ScorerKind::Judge(j) => {
            a.judged.get(&scorer.name).and_then(Value::as_str).and_then(|reply| inspect::parse_grade(reply, &j.grades)).map(|g| grade_value(&g))
        }
    })
}

/// The answer's identity for `maj@k`: its text, trimmed and case-folded, hashed.
fn answer_key(answer: &str) -> String {
    blake3::hash(inspect::casefold(crate::envs::pystr::py_strip(answer)).as_bytes()).to_hex()[..12].to_owned()
}

/// The answer's first non-empty line, cut to 120 characters: what the report's item pages
/// show beside the score.
fn answer_line(answer: &str) -> String {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    line.chars().take(120).collect()
}

/// Scores an episode record.
pub fn score(task: &TaskInstance, episode: &Value) -> Result<Value, StepError> {
    let scorers = scorers(task)?;
    let answers: Vec<Answer> =
        serde_json::from_value(episode.get("answers").cloned().unwrap_or(Value::Null)).map_err(|e| StepError::score_in("not a qa episode record", e))?;
    let mut sums = vec![(0.0f64, 0u64); scorers.len()];
    let mut items = Vec::with_capacity(answers.len());
    let (mut tokens_in, mut tokens_out) = (0, 0);
    for a in &answers {
        tokens_in += a.input_tokens;
        tokens_out += a.output_tokens;
        let mut scores = Map::new();
        for (s, sum) in scorers.iter().zip(&mut sums) {
            let v = value(s, a)?;
            if let Some(v) = v {
                sum.0 += v;
                sum.1 += 1;
            }
            scores.insert(s.name.clone(), v.map_or(Value::Null, Value::from));
        }
        let mut row = json!({"index": a.index, "answer": answer_key(&a.answer), "line": answer_line(&a.answer), "scores": scores});
        if let Some(id) = &a.id {
            row["id"] = json!(id);
        }
        items.push(row);
    }
    let mut out = Map::new();
    out.insert("n".into(), json!(answers.len()));
    out.insert("scorers".into(), json!(scorers.iter().map(|s| &s.name).collect::<Vec<_>>()));
    for (s, (sum, n)) in scorers.iter().zip(sums) {
        out.insert(s.name.clone(), if n == 0 { Value::Null } else { json!(sum / n as f64) });
        out.insert(format!("{}_sum", s.name), json!(sum));
        out.insert(format!("{}_n", s.name), json!(n));
    }
    out.insert("input_tokens".into(), json!(tokens_in));
    out.insert("output_tokens".into(), json!(tokens_out));
    out.insert("items".into(), Value::Array(items));
    Ok(Value::Object(out))
}
