//! The score step: every scorer of the task over every answer of the episode record (no
//! dataset read: the record carries the targets and the choice order).

use serde_json::{Map, Value, json};

use super::config::{ChoiceMethod, Scorer, ScorerKind};
use super::episode::Answer;
use super::inspect;
use super::judge::grade_value;
use crate::envs::ScoreDetail;
use crate::exec::StepError;
use crate::providers::logprobs::option_logprobs;
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
        ScorerKind::Choice { method: ChoiceMethod::Logprobs, .. } => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            hit(likeliest_letter(a).and_then(|shown| a.order.get(shown)).is_some_and(|original| targets.contains(original)))
        }
        ScorerKind::Choice { method: ChoiceMethod::Loglikelihood, .. } => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            hit(loglikelihood_argmax(a, None).and_then(|shown| a.order.get(shown)).is_some_and(|original| targets.contains(original)))
        }
        ScorerKind::AccLoglikelihood { norm } => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            let pred = loglikelihood_argmax(a, norm.then_some(a.choices.as_slice()));
            hit(pred.and_then(|shown| a.order.get(shown)).is_some_and(|original| targets.contains(original)))
        }
        ScorerKind::Choice { multiple_correct, .. } => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            hit(inspect::choice(&a.answer, &targets, &a.order, *multiple_correct))
        }
        ScorerKind::Acc | ScorerKind::AccNorm => {
            let targets = inspect::target_positions(&a.targets).map_err(|t| StepError::score_msg(format!("target `{t}` is not a choice letter")))?;
            let pred = choice_argmax(a, matches!(scorer.kind, ScorerKind::AccNorm));
            hit(pred.and_then(|shown| a.order.get(shown)).is_some_and(|original| targets.contains(original)))
        }
        ScorerKind::ExactMatch(options) => {
            let filtered = super::lm_eval::apply_filter(&options.filter, &a.answer);
            hit(a.targets.iter().any(|t| super::lm_eval::exact_match(options, &filtered, t)))
        }
        ScorerKind::Judge(j) => {
            a.judged.get(&scorer.name).and_then(Value::as_str).and_then(|reply| inspect::parse_grade(reply, &j.grades)).map(|g| grade_value(&g))
        }
    })
}

/// What one scorer extracted from an answer and why, as Inspect's built-ins fill
/// `Score.answer` and `Score.explanation` (exports show them beside the value).
#[must_use]
pub fn detail(scorer: &Scorer, a: &Answer) -> ScoreDetail {
    let reply = Some(a.answer.clone());
    let (answer, explanation, ungraded) = match &scorer.kind {
        ScorerKind::Match { .. } | ScorerKind::Includes { .. } => (Some(crate::envs::pystr::py_strip(&a.answer).to_owned()), reply, false),
        ScorerKind::Exact | ScorerKind::F1 { .. } => (reply, None, false),
        ScorerKind::Pattern { pattern, ignore_case, .. } => {
            let found = regex::RegexBuilder::new(pattern).case_insensitive(*ignore_case).size_limit(1 << 20).build().ok().and_then(|re| {
                re.captures(&a.answer).map(|c| {
                    let groups: Vec<&str> = c.iter().skip(1).flatten().map(|m| m.as_str()).collect();
                    if groups.is_empty() { c.get(0).map_or_else(String::new, |m| m.as_str().to_owned()) } else { groups.join(", ") }
                })
            });
            let why = if found.is_some() { reply } else { Some(format!("Scoring pattern not matched in output: {}", a.answer)) };
            (found, why, false)
        }
        ScorerKind::Answer { pattern } => (inspect::extract_answer(*pattern, &a.answer).map(str::to_owned), reply, false),
        ScorerKind::Choice { method: ChoiceMethod::Logprobs, .. } => {
            let letters: Vec<String> = (0..a.order.len()).map(inspect::letter).collect();
            (likeliest_letter(a).map(inspect::letter), Some(explain_logprobs(&letters, &option_logprobs(&a.logprobs, &letters))), false)
        }
        ScorerKind::Choice { method: ChoiceMethod::Loglikelihood, .. } => {
            let letters: Vec<String> = (0..a.order.len()).map(inspect::letter).collect();
            let lls: Vec<Option<f64>> = a.loglikelihoods.iter().copied().map(Some).collect();
            (loglikelihood_argmax(a, None).map(inspect::letter), Some(explain_logprobs(&letters, &lls)), false)
        }
        ScorerKind::Choice { multiple_correct, .. } => {
            let letters = inspect::parse_choice_answers(&a.answer, a.order.len(), *multiple_correct);
            (Some(letters.join(", ")), reply, false)
        }
        ScorerKind::Acc | ScorerKind::AccNorm => {
            let pred = choice_argmax(a, matches!(scorer.kind, ScorerKind::AccNorm));
            (pred.and_then(|p| a.choices.get(p).cloned()), Some(explain_logprobs(&a.choices, &option_logprobs(&a.logprobs, &a.choices))), false)
        }
        ScorerKind::AccLoglikelihood { norm } => {
            let pred = loglikelihood_argmax(a, norm.then_some(a.choices.as_slice()));
            let lls: Vec<Option<f64>> = a.loglikelihoods.iter().copied().map(Some).collect();
            (pred.and_then(|p| a.choices.get(p).cloned()), Some(explain_logprobs(&a.choices, &lls)), false)
        }
        ScorerKind::ExactMatch(options) => (Some(super::lm_eval::apply_filter(&options.filter, &a.answer)), reply, false),
        ScorerKind::Judge(j) => match a.judged.get(&scorer.name).and_then(Value::as_str) {
            None => (reply, None, false),
            Some(said) if inspect::parse_grade(said, &j.grades).is_some() => (reply, Some(said.to_owned()), false),
            Some(said) => (reply, Some(format!("Grade not found in model output: {said}")), true),
        },
    };
    ScoreDetail { scorer: scorer.name.clone(), answer, explanation, ungraded }
}

/// The shown position of the option letter with the highest next-token log-probability
/// (ties to the first); `None` when no letter is among the alternatives the server sent.
fn likeliest_letter(a: &Answer) -> Option<usize> {
    let letters: Vec<String> = (0..a.order.len()).map(inspect::letter).collect();
    let lps = option_logprobs(&a.logprobs, &letters);
    let mut best: Option<(usize, f64)> = None;
    for (i, lp) in lps.into_iter().enumerate() {
        if let Some(lp) = lp
            && best.is_none_or(|(_, b)| lp > b)
        {
            best = Some((i, lp));
        }
    }
    best.map(|(i, _)| i)
}

/// lm-evaluation-harness's pick among the choices (`np.argmax` over each choice's
/// log-likelihood, divided by the choice's length in characters for `acc_norm`): a choice
/// not among the next token's alternatives has log-likelihood `-inf`, and ties go to the
/// first, as `argmax` does. `None` only for an item without choices.
#[must_use]
pub fn choice_argmax(a: &Answer, norm: bool) -> Option<usize> {
    let lls = option_logprobs(&a.logprobs, &a.choices);
    let mut best: Option<(usize, f64)> = None;
    for (i, (ll, choice)) in lls.into_iter().zip(&a.choices).enumerate() {
        let ll = ll.unwrap_or(f64::NEG_INFINITY);
        // Python's `len` of a str counts code points.
        let v = if norm { ll / choice.chars().count() as f64 } else { ll };
        // `np.argmax`: the first maximum; a NaN (0 / 0) wins, as it does in numpy.
        if best.is_none_or(|(_, b)| v > b || (v.is_nan() && !b.is_nan())) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// lm-evaluation-harness's pick from each shown choice's continuation log-likelihood
/// (`np.argmax`, the first maximum; a NaN wins), each divided by its choice's length in
/// characters when `norm` gives the choices (`acc_norm`). `None` for an item without them.
#[must_use]
pub fn loglikelihood_argmax(a: &Answer, norm: Option<&[String]>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, &ll) in a.loglikelihoods.iter().enumerate() {
        // Python's `len` of a str counts code points.
        let v = match norm {
            Some(choices) => ll / choices.get(i).map_or(0, |c| c.chars().count()) as f64,
            None => ll,
        };
        if best.is_none_or(|(_, b)| v > b || (v.is_nan() && !b.is_nan())) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// Each option with its log-probability (`–` when absent), for exports' explanation.
fn explain_logprobs(options: &[String], lps: &[Option<f64>]) -> String {
    options.iter().zip(lps).map(|(o, lp)| format!("{o}: {}", lp.map_or_else(|| "–".to_owned(), |v| format!("{v:.4}")))).collect::<Vec<_>>().join(", ")
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
    let (mut tokens_in, mut tokens_out) = (0_u64, 0_u64);
    for a in &answers {
        tokens_in = tokens_in.saturating_add(a.input_tokens);
        tokens_out = tokens_out.saturating_add(a.output_tokens);
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
        // The letter a log-probability `choice` scorer picked (`null`: none among the alternatives).
        if scorers.iter().any(|s| matches!(s.kind, ScorerKind::Choice { method: ChoiceMethod::Logprobs, .. })) {
            row["pick"] = json!(likeliest_letter(a).map(inspect::letter));
        }
        if scorers.iter().any(|s| matches!(s.kind, ScorerKind::Choice { method: ChoiceMethod::Loglikelihood, .. })) {
            row["pick"] = json!(loglikelihood_argmax(a, None).map(inspect::letter));
        }
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
