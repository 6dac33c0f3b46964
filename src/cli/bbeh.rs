//! `evalgrid bbeh score <responses.jsonl> --out <dir>`: rescore responses
//! produced by another harness with the official scorer, and say per item
//! what was extracted and why it was marked wrong.

use super::exit::Exit;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use evalgrid::envs::bbeh::benchmark::data_path;
use evalgrid::envs::bbeh::dataset::{Item, TASKS, load_task, mini_indices};
use evalgrid::envs::bbeh::{harmonic_mean, score};
use serde::Deserialize;
use serde_json::json;

use super::args::BbehCommand;
use super::{Env, Failure, output};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    task: String,
    index: usize,
    response: String,
    #[serde(default)]
    subset: Option<String>,
}

pub(crate) fn bbeh(env: &Env, command: &BbehCommand) -> Result<Exit, Failure> {
    let BbehCommand::Score { responses, out } = command;
    let text = fs_err::read_to_string(responses).map_err(Failure::invalid)?;
    let dir = data_path(env.registry.data_dir());
    let mut items: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    let mut rows = Vec::new();
    for (n, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", responses.display(), n + 1);
        let line: Line = serde_json::from_str(raw).map_err(|e| Failure::invalid(anyhow::anyhow!("{}: {e}", at())))?;
        let task = TASKS
            .iter()
            .find(|t| **t == line.task || t.strip_prefix("bbeh_") == Some(line.task.as_str()))
            .ok_or_else(|| Failure::invalid(anyhow::anyhow!("{}: unknown task `{}`", at(), line.task)))?;
        if !items.contains_key(*task) {
            let loaded = load_task(&dir, task).map_err(|e| anyhow::anyhow!("{e} (run `evalgrid datasets fetch bbeh` first)"))?;
            items.insert((*task).to_owned(), loaded);
        }
        let task_items = &items[*task];
        let item = task_items.get(line.index).ok_or_else(|| Failure::invalid(anyhow::anyhow!("{}: task `{task}` has no item {}", at(), line.index)))?;
        if line.subset.as_deref() == Some("mini") && !mini_indices(task, task_items.len()).contains(&line.index) {
            return Err(Failure::invalid(anyhow::anyhow!("{}: item {} of `{task}` is not in BBEH Mini", at(), line.index)));
        }
        let detail = score(&line.response, &item.target);
        rows.push(((*task).to_owned(), line.index, detail));
    }
    write_outputs(out, &rows)?;
    let correct = rows.iter().filter(|r| r.2.correct).count();
    output::line(&format!("scored {} responses: {correct} correct; wrote {}/items.csv, per_task.csv, summary.json", rows.len(), out.display()));
    Ok(Exit::Ok)
}

fn write_outputs(out: &Path, rows: &[(String, usize, evalgrid::envs::bbeh::ScoreDetail)]) -> Result<(), Failure> {
    fs_err::create_dir_all(out)?;
    let mut items_csv = String::from("task,index,extracted,correct,answer_found\n");
    let mut per_task: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (task, index, d) in rows {
        let _ = writeln!(items_csv, "{task},{index},{},{},{}", csv_field(&d.prediction_after_preprocess), d.correct, d.extraction_found_prefix);
        let e = per_task.entry(task).or_default();
        e.0 += 1;
        e.1 += usize::from(d.correct);
    }
    let mut per_task_csv = String::from("task,n,correct,accuracy\n");
    let mut accs = Vec::new();
    for (task, (n, c)) in &per_task {
        let acc = *c as f64 / *n as f64;
        accs.push(100.0 * acc);
        let _ = writeln!(per_task_csv, "{task},{n},{c},{acc}");
    }
    let n: usize = per_task.values().map(|v| v.0).sum();
    let correct: usize = per_task.values().map(|v| v.1).sum();
    let summary = json!({
        "n": n,
        "correct": correct,
        "micro": if n == 0 { serde_json::Value::Null } else { json!(correct as f64 / n as f64) },
        "harmonic_mean": if accs.is_empty() { serde_json::Value::Null } else { json!(harmonic_mean(&accs)) },
        "tasks": per_task.len(),
    });
    fs_err::write(out.join("items.csv"), items_csv)?;
    fs_err::write(out.join("per_task.csv"), per_task_csv)?;
    fs_err::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)? + "\n")?;
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}
