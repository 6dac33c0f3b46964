//! Prompt templates (minijinja 3, strict: an undefined variable is an error) over an item's
//! columns, with `choices` rendered as lettered lines the way Inspect's `multiple_choice`
//! solver writes them.

use serde_json::{Map, Value};

use super::inspect::letter;
use super::item::Item;

/// The template of a question without choices.
pub const DEFAULT_TEMPLATE: &str = "{{ input }}";

/// The template of a multiple-choice question: Inspect's `SINGLE_ANSWER_TEMPLATE`.
pub const CHOICE_TEMPLATE: &str = "Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {{ letters }}.\n\n{{ input }}\n\n{{ choices }}";

/// Inspect's `MULTIPLE_ANSWER_TEMPLATE`, for `choice: {multiple_correct: true}`.
pub const MULTIPLE_CHOICE_TEMPLATE: &str = "Answer the following multiple choice question where multiple answers may be correct. The entire content of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of {{ letters }}.\n\n{{ input }}\n\n{{ choices }}";

/// The template of `choice: {method: logprobs}`: the question, the lettered choices and
/// `Answer:`, so the next token is the letter (lm-evaluation-harness's MMLU layout); no
/// instruction to write `ANSWER: X`, which a base model would not follow.
pub const LOGPROBS_TEMPLATE: &str = "{{ input }}\n\n{{ choices }}\nAnswer:";

/// What one render may spend (minijinja fuel: about one per step, and one per 64 bytes of text
/// it makes), so a pipeline author's loop of 1e10 or a 100 MB string ends at `validate` with an
/// error instead of running for minutes or exhausting memory; ample for any real prompt.
pub const FUEL: u64 = 1_000_000;

/// The longest prompt a template may render: far above a model's context, far below memory.
pub const MAX_PROMPT_BYTES: usize = 16 << 20;

/// A task's compiled templates.
pub struct Prompt {
    env: minijinja::Environment<'static>,
    has_system: bool,
}

/// A template that does not compile or does not render for one item.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PromptError {
    /// Which template: `template` or `system`.
    pub part: &'static str,
    /// The template went past [`FUEL`] or [`MAX_PROMPT_BYTES`]: the template's fault, not a row's.
    pub over_bounds: bool,
    message: String,
}

impl PromptError {
    fn new(part: &'static str, e: &minijinja::Error) -> Self {
        let over_bounds = matches!(e.kind(), minijinja::ErrorKind::OutOfFuel);
        Self { part, over_bounds, message: format!("{part}: {}", describe(e)) }
    }
}

fn describe(e: &minijinja::Error) -> String {
    let mut text = match e.kind() {
        minijinja::ErrorKind::UndefinedError => "undefined value".to_owned(),
        minijinja::ErrorKind::OutOfFuel => format!(
            "the template ran out of fuel: more than {FUEL} steps or about {} MB of text in one render (a loop or a string too large for a prompt)",
            FUEL * 64 / 1_000_000
        ),
        _ => e.kind().to_string(),
    };
    if let Some(detail) = e.detail() {
        text = format!("{text}: {detail}");
    }
    if let Some(line) = e.line() {
        text = format!("{text} (template line {line})");
    }
    text
}

/// What a chosen choice order shows: the choices as `A) …` lines, in the order the model sees.
#[must_use]
pub fn lettered(choices: &[String], order: &[usize]) -> String {
    order.iter().enumerate().map(|(i, j)| format!("{}) {}", letter(i), choices.get(*j).map_or("", String::as_str))).collect::<Vec<_>>().join("\n")
}

impl Prompt {
    /// Compiles the user template and an optional system template.
    pub fn new(template: &str, system: Option<&str>) -> Result<Self, PromptError> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        env.add_template_owned("template", template.to_owned()).map_err(|e| PromptError::new("template", &e))?;
        if let Some(system) = system {
            env.add_template_owned("system", system.to_owned()).map_err(|e| PromptError::new("system", &e))?;
        }
        Ok(Self { env, has_system: system.is_some() })
    }

    /// The variables an item offers: every column, then `input`, `target` (the first
    /// accepted answer), `targets`, `id`, `choices` (lettered lines in `order`), `letters`.
    fn context(item: &Item, order: &[usize]) -> Value {
        let mut ctx: Map<String, Value> = item.fields.clone();
        ctx.insert("input".into(), Value::String(item.input.clone()));
        ctx.insert("target".into(), Value::String(item.targets.first().cloned().unwrap_or_default()));
        ctx.insert("targets".into(), Value::from(item.targets.clone()));
        ctx.insert("id".into(), Value::String(item.label()));
        if !item.choices.is_empty() {
            ctx.insert("choices".into(), Value::String(lettered(&item.choices, order)));
            ctx.insert("letters".into(), Value::String((0..item.choices.len()).map(letter).collect::<Vec<_>>().join(",")));
        }
        Value::Object(ctx)
    }

    /// The item's system prompt (the template's, else the row's) and user message.
    pub fn render(&self, item: &Item, order: &[usize]) -> Result<(Option<String>, String), PromptError> {
        let ctx = minijinja::Value::from(minijinja::value::Serde(Self::context(item, order)));
        let render = |name: &'static str| -> Result<String, PromptError> {
            let t = self.env.get_template(name).map_err(|e| PromptError::new(name, &e))?;
            let text = t.render(&ctx).map_err(|e| PromptError::new(name, &e))?;
            if text.len() > MAX_PROMPT_BYTES {
                let message = format!("{name}: the rendered prompt is {} bytes, more than the {} MiB a prompt may have", text.len(), MAX_PROMPT_BYTES >> 20);
                return Err(PromptError { part: name, over_bounds: true, message });
            }
            Ok(text)
        };
        let system = if self.has_system { Some(render("system")?) } else { item.system.clone() };
        Ok((system, render("template")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::qa::dataset::{Place, Row};
    use crate::envs::qa::item::{FieldMap, item};
    use serde_json::json;

    fn it(v: Value) -> Item {
        item(Row { place: Place::Line(1), fields: v.as_object().unwrap().clone() }, 0, &FieldMap::default()).unwrap()
    }

    #[test]
    fn renders_columns_and_lettered_choices() {
        let p = Prompt::new(CHOICE_TEMPLATE, Some("You are {{ persona }}.")).unwrap();
        let item = it(json!({"input": "Capital of France?", "target": "B", "choices": ["Berlin", "Paris"], "persona": "a tutor"}));
        let (system, user) = p.render(&item, &[0, 1]).unwrap();
        assert_eq!(system.as_deref(), Some("You are a tutor."));
        assert!(user.ends_with("Capital of France?\n\nA) Berlin\nB) Paris"), "{user}");
        assert!(user.contains("one of A,B."), "{user}");
        let (_, shuffled) = p.render(&item, &[1, 0]).unwrap();
        assert!(shuffled.ends_with("A) Paris\nB) Berlin"), "{shuffled}");
    }

    #[test]
    fn undefined_variables_and_bad_syntax_are_errors() {
        let p = Prompt::new("{{ input }} {{ hint }}", None).unwrap();
        let e = p.render(&it(json!({"input": "q", "target": "a"})), &[]).unwrap_err();
        assert!(e.to_string().contains("undefined"), "{e}");
        assert!(Prompt::new("{{ input ", None).is_err());
    }

    #[test]
    fn a_runaway_loop_or_a_huge_string_runs_out_of_fuel() {
        let item = it(json!({"input": "q", "target": "a"}));
        for template in [
            "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
            "{% set s = 'x' * 100000000 %}{{ s }}",
            "{% for i in range(10) %}{{ input * 100000000 }}{% endfor %}",
        ] {
            let e = Prompt::new(template, None).unwrap().render(&item, &[]).unwrap_err();
            assert!(e.over_bounds && e.part == "template" && e.to_string().contains("ran out of fuel"), "{template}: {e}");
        }
        let e = Prompt::new("{{ input }}", Some("{% for i in range(100000) %}{% for j in range(1000) %}.{% endfor %}{% endfor %}")).unwrap();
        let e = e.render(&item, &[]).unwrap_err();
        assert!(e.over_bounds && e.part == "system", "{e}");
        // A large but real prompt (4 MiB of input, a loop of a thousand) is fine.
        let big = it(json!({"input": "y".repeat(4 << 20), "target": "a"}));
        let (_, user) = Prompt::new("{% for i in range(1000) %}{{ i }}{% endfor %}{{ input }}", None).unwrap().render(&big, &[]).unwrap();
        assert!(user.len() > 4 << 20);
    }
}
