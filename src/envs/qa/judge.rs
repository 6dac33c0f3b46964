//! The `judge` scorer's model and prompt: Inspect's `model_graded_qa` template and default
//! instructions, the judge's model entry written inline (as the Eleusis rule compiler's is)
//! and never a contestant.

use serde_json::{Map, Value};

use crate::spec::{ModelConfig, Provider};

/// Id the judge's calls are counted under in the model-outcomes table.
pub const JUDGE_ID: &str = "judge";

/// Inspect's `DEFAULT_MODEL_GRADED_QA_TEMPLATE` (with its leading and trailing newline).
const TEMPLATE: &str = "\nYou are assessing a submitted answer on a given task based on a criterion. Here is the data:\n\n[BEGIN DATA]\n***\n[Task]: {question}\n***\n[Submission]: {answer}\n***\n[Criterion]: {criterion}\n***\n[END DATA]\n\nDoes the submission meet the criterion?\n\n{instructions}\n";

/// Inspect's `default_instructions(partial_credit)`.
#[must_use]
pub fn default_instructions(partial_credit: bool) -> String {
    let letter = if partial_credit { "P" } else { "" };
    let prompt = if partial_credit { "\"P\" for partially correct answers," } else { "" };
    format!(
        "\nAfter assessing the submitted answer, reply with 'GRADE: $LETTER' (without quotes) where LETTER is one of C{letter}I.  Please choose ONE option for the grade: either \"C\" for correct answers, {prompt}or \"I\" for incorrect answers.\n\nFor example, after reviewing a correct answer you might write 'GRADE: C' or after reviewing an incorrect answer you might write 'GRADE: I'.\n\nFirst, write out in a step by step manner your reasoning about the criterion to be sure that your conclusion is correct. Avoid simply stating the correct answers at the outset. Then, end with your answer formatted as 'GRADE: $LETTER' (without quotes) where LETTER is one of C{letter}I.\n"
    )
}

/// The grading prompt for one answer: the question, the answer, the criterion (the targets,
/// joined as Inspect's `target.text` joins them) and the rubric.
#[must_use]
pub fn prompt(question: &str, answer: &str, targets: &[String], rubric: Option<&str>, grades: &[String]) -> String {
    let instructions = rubric.map_or_else(|| default_instructions(grades.iter().any(|g| g == "P")), str::to_owned);
    // One pass, so text inside the answer is never taken for a placeholder.
    let mut out = String::with_capacity(TEMPLATE.len() + question.len() + answer.len() + instructions.len());
    let mut rest = TEMPLATE;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
        match &rest[open + 1..close] {
            "question" => out.push_str(question),
            "answer" => out.push_str(answer),
            "criterion" => out.push_str(&targets.concat()),
            "instructions" => out.push_str(&instructions),
            other => out.push_str(other),
        }
        rest = &rest[(close + 1).min(rest.len())..];
    }
    out.push_str(rest);
    out
}

/// A grade's value: `C` 1, `P` 0.5, `I` 0.
#[must_use]
pub fn grade_value(grade: &str) -> f64 {
    match grade {
        "C" => 1.0,
        "P" => 0.5,
        _ => 0.0,
    }
}

/// The judge's model from its inline entry (`provider` defaults to `openai`).
pub fn judge_model(entry: &Map<String, Value>) -> Result<ModelConfig, String> {
    const KEYS: &[&str] = &["provider", "model", "base_url", "api_key_env", "params", "accept_other_model", "batch"];
    if let Some(k) = entry.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("unknown field `{k}` (a judge entry has {})", KEYS.join(", ")));
    }
    let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_owned);
    let name = text("provider").unwrap_or_else(|| "openai".into());
    let provider = Provider::parse(&name).ok_or_else(|| format!("unknown provider `{name}`"))?;
    if provider.is_builtin() {
        return Err(format!("provider `{name}` has no model to ask; a judge is a model (or a `scripted` stand-in)"));
    }
    let model = text("model").ok_or("`model` is required")?;
    let params = match entry.get("params") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err("`params` must be a mapping".into()),
    };
    // Judge calls are single-turn: `batch:` sends them through the provider's batch API.
    let batch = match entry.get("batch") {
        None => None,
        Some(raw) => crate::spec::BatchMode::parse(raw)?,
    };
    if batch.is_some() && !matches!(provider, Provider::OpenAi | Provider::Anthropic | Provider::Gemini) {
        return Err(format!("`batch` is not supported for provider `{name}`"));
    }
    Ok(ModelConfig {
        id: JUDGE_ID.into(),
        provider,
        model,
        base_url: text("base_url"),
        api_key_env: text("api_key_env"),
        params: params.into_iter().collect(),
        price: None,
        accept_other_model: entry.get("accept_other_model").and_then(Value::as_bool).unwrap_or(false),
        headers: std::collections::BTreeMap::new(),
        api: crate::providers::OpenAiApi::Auto,
        background: crate::providers::Background::Auto,
        stream: crate::providers::StreamMode::Auto,
        batch,
        serve: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_fills_inspects_template_once() {
        let p = prompt("2+2?", "it is {criterion}", &["4".into()], None, &["C".into(), "I".into()]);
        assert!(p.contains("[Task]: 2+2?\n***\n[Submission]: it is {criterion}\n***\n[Criterion]: 4\n"), "{p}");
        assert!(p.contains("LETTER is one of CI."), "{p}");
        assert!(prompt("q", "a", &["t".into()], None, &["C".into(), "P".into(), "I".into()]).contains("one of CPI"));
        assert!(prompt("q", "a", &["t".into()], Some("Be strict."), &[]).ends_with("Be strict.\n"));
    }

    #[test]
    fn judge_entries_are_checked() {
        let entry = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert!(judge_model(&entry(serde_json::json!({"model": "gpt-x"}))).is_ok());
        assert!(judge_model(&entry(serde_json::json!({"provider": "builtin", "model": "x"}))).is_err());
        assert!(judge_model(&entry(serde_json::json!({"provider": "openai"}))).is_err());
        assert!(judge_model(&entry(serde_json::json!({"model": "x", "temperature": 0}))).is_err());
        let batched = judge_model(&entry(serde_json::json!({"provider": "anthropic", "model": "c", "batch": {"max_requests": 50}}))).unwrap();
        assert_eq!(batched.batch.map(|b| b.max_requests), Some(50));
        assert!(judge_model(&entry(serde_json::json!({"provider": "scripted", "model": "x", "batch": true}))).unwrap_err().contains("not supported"));
        assert!(judge_model(&entry(serde_json::json!({"model": "x", "batch": "yes"}))).is_err());
    }
}
