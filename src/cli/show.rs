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
