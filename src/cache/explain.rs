//! Why a step is stale: the key components that differ from the closest
//! cached entry, as dotted paths (`model.params.temperature: 0.7 → 0.2`).

use serde_json::Value;

/// One differing component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Dotted path inside the components (`model.params.salt`).
    pub path: String,
    /// Value in the cached entry (`None` = absent).
    pub old: Option<String>,
    /// Value now planned (`None` = absent).
    pub new: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
        // A served model's identity, in the words a user thinks of it (issue 36).
        let label = match self.path.as_str() {
            "model.serve.weights" => Some("model weights changed"),
            "model.serve.version" => Some("engine version changed"),
            _ => None,
        };
        match label {
            Some(label) => write!(f, "{label} ({}: {} → {})", self.path, show(&self.old), show(&self.new)),
            None => write!(f, "{}: {} → {}", self.path, show(&self.old), show(&self.new)),
        }
    }
}

/// Why `cell` is not what the run remembered in `head` (the cell's last keys and their
/// components): the episode's changed fields, or the score's prefixed `score `, or a missing
/// result. What `status --explain` prints as a stale cell's reason and `evalgrid diff` as a
/// changed cell's.
#[must_use]
pub fn changes_since(pipeline: &crate::spec::Pipeline, store: &super::Store, cell: &crate::plan::Cell, head: &super::Head) -> Vec<String> {
    use crate::plan::{episode_components, score_components};
    const MISSING: &str = "episode result missing from cache (removed or corrupted)";
    if head.episode_key != cell.episode_key {
        let d = diff(&head.episode_components, &episode_components(pipeline, cell));
        return if d.is_empty() { vec![MISSING.to_owned()] } else { d.iter().map(ToString::to_string).collect() };
    }
    if !store.contains(cell.episode_key) {
        return vec![MISSING.to_owned()];
    }
    let d = diff(&head.score_components, &score_components(pipeline, cell.task, cell.episode_key));
    if d.is_empty() { vec!["score result missing from cache".to_owned()] } else { d.iter().map(|c| format!("score {c}")).collect() }
}

/// Lists the leaf differences between two component objects, sorted by path.
#[must_use]
pub fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", Some(old), Some(new), &mut out);
    out
}

fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                walk(&p, a.get(k), b.get(k), out);
            }
        }
        // Lists of the same length element by element (`scorers[1].judge.rubric`), so a
        // change deep in a list of settings is named, not the whole list.
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() && a != b => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            let (old, new) = (a.map(text), b.map(text));
            // Two long values (a judge's prompt, a template) are cut at the same place around
            // their first difference, so the change itself is what is shown.
            let from = match (&old, &new) {
                (Some(o), Some(n)) => o.chars().zip(n.chars()).take_while(|(x, y)| x == y).count().saturating_sub(CONTEXT),
                _ => 0,
            };
            out.push(Change {
                // A step's own fields live under the key envelope's `inputs`;
                // users know them by their own names (`model.params.salt`).
                path: if path.is_empty() { "(root)".into() } else { path.strip_prefix("inputs.").unwrap_or(path).to_owned() },
                old: old.map(|t| window(&t, from)),
                new: new.map(|t| window(&t, from)),
            });
        }
    }
}

/// Characters kept before the first difference of two long values.
const CONTEXT: usize = 20;
/// Longest value shown whole; longer ones are cut to a window of this many characters.
const SHOWN: usize = 60;

fn text(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() == 64 && s.bytes().all(|c| c.is_ascii_hexdigit()) => s[..12].to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` on one line: whole when short, else the characters from `from` on (`…` marking
/// what was cut on either side), so long values (prompt templates) keep one line per change.
fn window(text: &str, from: usize) -> String {
    let len = text.chars().count();
    if len <= SHOWN {
        return text.replace('\n', "⏎");
    }
    let body: String = text.chars().skip(from).take(SHOWN - 3).collect();
    let (head, tail) = (if from > 0 { "…" } else { "" }, if from + SHOWN - 3 < len { "…" } else { "" });
    format!("{head}{}{tail}", body.replace('\n', "⏎"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_changed_leaf() {
        let a = json!({"model": {"params": {"temperature": 0.7}, "model": "x"}, "seed": 1});
        let b = json!({"model": {"params": {"temperature": 0.2}, "model": "x"}, "seed": 1});
        let d = diff(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].to_string(), "model.params.temperature: 0.7 → 0.2");
    }

    #[test]
    fn replaced_weights_say_so() {
        let d = diff(&json!({"model": {"serve": {"weights": "a".repeat(64)}}}), &json!({"model": {"serve": {"weights": "b".repeat(64)}}}));
        assert_eq!(d[0].to_string(), format!("model weights changed (model.serve.weights: {} → {})", "a".repeat(12), "b".repeat(12)));
    }

    #[test]
    fn long_values_show_their_first_difference() {
        let before = format!("{}Grade the answer. Reply GRADE: C or GRADE: I.", "You are a careful grader. ".repeat(4));
        let after = before.replace("GRADE: C or", "GRADE: C, P or");
        let d = diff(&json!({"judge": before}), &json!({"judge": after}));
        let (old, new) = (d[0].old.clone().unwrap(), d[0].new.clone().unwrap());
        assert!(old.starts_with('…') && new.starts_with('…'), "{old} / {new}");
        assert!(old.contains("GRADE: C or") && new.contains("GRADE: C, P or"), "{old} / {new}");
        // Both sides are cut at the same character, so they read side by side.
        assert_eq!(old.chars().take(15).collect::<String>(), new.chars().take(15).collect::<String>());
        // A short value is shown whole, a difference at the start from the start.
        assert_eq!(window("short", 0), "short");
        assert_eq!(diff(&json!({"t": "x".repeat(80)}), &json!({"t": "y".repeat(80)}))[0].old.clone().unwrap(), format!("{}…", "x".repeat(57)));
    }

    #[test]
    fn added_and_removed_fields() {
        let d = diff(&json!({"p": {"a": 1}}), &json!({"p": {"b": 2}}));
        let text: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(text, vec!["p.a: 1 → (absent)", "p.b: (absent) → 2"]);
    }
}
