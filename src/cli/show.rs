//! `evalgrid show`: one cell's transcript from the cache.

use super::exit::Exit;
use evalgrid::envs::transcript;
use evalgrid::plan::plan;
use serde_json::json;

use super::args::ShowArgs;
use super::{Env, Failure, load_pipeline, output};

pub(crate) fn show(env: &Env, args: &ShowArgs) -> Result<Exit, Failure> {
    let pipeline = load_pipeline(env, &args.pipeline)?;
    let plan = plan(&pipeline, None);
    let cell = plan.cells.iter().find(|c| c.id == args.cell).ok_or_else(|| Failure::invalid(anyhow::anyhow!("no cell `{}` in this pipeline", args.cell)))?;
    let store = env.store()?;
    let Some(episode) = store.get(cell.episode_key)? else {
        // Exit 1, and with `--json` an `{"error": …}` object (printed by `cli::main`).
        return Err(Failure::from(anyhow::anyhow!("cell `{}` has no cached episode; run the pipeline first", cell.id)));
    };
    let score = store.get(cell.score_key)?.map(|e| e.output);
    if args.json {
        output::json(&json!({"cell": cell.id, "episode_key": cell.episode_key, "episode": episode.output, "score": score}));
    } else {
        let task = &pipeline.tasks[cell.task];
        output::line(&format!("cell {}  (episode {})", cell.id, cell.episode_key.short()));
        // A benchmark that can say what each item sent (`qa`, BBEH) is shown as sent: the
        // rendered prompt (a `choice` row's options included) and each scorer's value.
        let exchanges =
            evalgrid::envs::registry::get(&task.benchmark).map(|b| b.exchanges(env.registry.data_dir(), task, &episode.output, cell.seed)).unwrap_or_default();
        if !exchanges.is_empty() {
            output::line(as_sent(&exchanges, &episode.output, score.as_ref()).trim_end());
            if let Some(mut score) = score {
                // Per item above; the cell's totals here.
                if let Some(map) = score.as_object_mut() {
                    map.remove("items");
                }
                output::line(&format!("score:\n{}", outline_at(&score, 1).trim_end()));
            }
            return Ok(Exit::Ok);
        }
        let text = transcript(&task.benchmark, &episode.output);
        // A benchmark without its own transcript (WeirdML, BBQ-Bench) gives JSON: shown as an
        // outline instead, multi-line text (code, scratchpads, answers) on its own lines.
        let readable = !text.trim_start().starts_with('{');
        if readable {
            output::line(&text);
        } else {
            output::line(outline(&episode.output).trim_end());
        }
        match score {
            Some(score) if !readable => output::line(&format!("score:\n{}", outline_at(&score, 1).trim_end())),
            Some(score) => output::line(&format!("score: {score}")),
            None => {}
        }
    }
    Ok(Exit::Ok)
}

/// Each item as the model saw it: the system prompt and the turns sent, the answer, the
/// targets, a judge's reply where one graded it, and each scorer's value for the item (from
/// the score record's `items`, matched by item number).
fn as_sent(exchanges: &[evalgrid::envs::Exchange], episode: &serde_json::Value, score: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    let by_index = |list: Option<&Value>, index: u64| -> Option<Value> {
        list?.as_array()?.iter().find(|v| v.get("index").and_then(Value::as_u64) == Some(index)).cloned()
    };
    let mut out = String::new();
    for x in exchanges {
        out.push_str(&format!("\n## item {}\n", x.id.clone().unwrap_or_else(|| x.item.to_string())));
        if let Some(system) = &x.system {
            out.push_str("system:\n");
            text_block(&mut out, system, 1);
        }
        for m in &x.prompt {
            let role = match m.role {
                evalgrid::providers::Role::User => "user",
                evalgrid::providers::Role::Assistant => "assistant",
            };
            out.push_str(&format!("{role}:\n"));
            text_block(&mut out, &m.content, 1);
        }
        out.push_str("answer:\n");
        text_block(&mut out, &x.answer, 1);
        if let Some(reason) = &x.finish_reason {
            out.push_str(&format!("finish: {reason}\n"));
        }
        let answer = by_index(episode.get("answers"), x.item);
        out.push_str(&format!("target: {}", x.targets.join(" | ")));
        // A choice target names letters in the dataset's order; shuffled options are shown
        // in another, so the options it names are given as shown too.
        let order: Vec<u64> =
            answer.as_ref().and_then(|a| a.get("order")).and_then(Value::as_array).map(|o| o.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
        if !x.choices.is_empty() && !order.is_empty() {
            let shown: Vec<String> = x
                .targets
                .iter()
                .flat_map(|t| t.chars().filter(char::is_ascii_uppercase))
                .filter_map(|c| {
                    let original = u64::from(c) - u64::from('A');
                    let at = order.iter().position(|&o| o == original)?;
                    let letter = char::from(b'A' + u8::try_from(at).ok()?);
                    Some(format!("{letter}) {}", x.choices.get(at)?))
                })
                .collect();
            if !shown.is_empty() {
                out.push_str(&format!(" (as shown: {})", shown.join(", ")));
            }
        }
        out.push('\n');
        for (judge, reply) in answer.as_ref().and_then(|a| a.get("judged")).and_then(Value::as_object).into_iter().flatten() {
            out.push_str(&format!("{judge} replied:\n"));
            text_block(&mut out, reply.as_str().unwrap_or_default(), 1);
        }
        if let Some(scores) = by_index(score.and_then(|s| s.get("items")), x.item).and_then(|i| i.get("scores").cloned()).and_then(|s| s.as_object().cloned()) {
            let values: Vec<String> = scores.iter().map(|(name, v)| format!("{name} {}", scalar(v))).collect();
            out.push_str(&format!("scores: {}\n", values.join(", ")));
        }
    }
    out
}

/// An episode record as an indented outline: `key: value` for scalars, lists of numbers or
/// words on one line, each element of a list of records numbered `[1]`, `[2]`, … and text
/// with line breaks as `| `-prefixed lines, so a transcript reads as text, not as JSON.
fn outline(value: &serde_json::Value) -> String {
    outline_at(value, 0)
}

/// [`outline`] indented by `depth` levels.
fn outline_at(value: &serde_json::Value, depth: usize) -> String {
    let mut out = String::new();
    outline_into(&mut out, value, depth);
    out
}

fn outline_into(out: &mut String, value: &serde_json::Value, depth: usize) {
    use serde_json::Value;
    let pad = "  ".repeat(depth);
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::String(s) if s.contains('\n') => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        text_block(out, s, depth + 1);
                    }
                    Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array() || i.as_str().is_some_and(|s| s.contains('\n'))) => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        outline_into(out, v, depth + 1);
                    }
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        outline_into(out, v, depth + 1);
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(v))),
                }
            }
        }
        Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array() || i.as_str().is_some_and(|s| s.contains('\n'))) => {
            for (i, item) in items.iter().enumerate() {
                out.push_str(&format!("{pad}[{}]\n", i + 1));
                match item {
                    Value::String(s) => text_block(out, s, depth + 1),
                    _ => outline_into(out, item, depth + 1),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// A value on one line: strings bare, lists comma-separated, `–` for null.
fn scalar(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "–".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "(none)".to_owned(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Object(map) if map.is_empty() => "(none)".to_owned(),
        other => other.to_string(),
    }
}

/// Text with its line breaks kept, each line prefixed `| ` at `depth`.
fn text_block(out: &mut String, text: &str, depth: usize) {
    let pad = "  ".repeat(depth);
    for line in text.lines() {
        out.push_str(&format!("{pad}| {line}\n"));
    }
}
