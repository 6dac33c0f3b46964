//! Inspect AI's JSON eval log (`inspect log schema`, log format version 2), one file per
//! task × model: the eval spec, each scored unit as a sample (input, messages, output,
//! scores, model usage), the results as the mean of each score, and evalgrid's provenance
//! in `eval.metadata.evalgrid`. Checked against inspect_ai 0.3.285 (`inspect log dump`,
//! `read_eval_log`), the release the tests ran with.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::samples::{Group, Sample, mean};
use super::{ascii, provenance, stem};
use crate::envs::Exchange;
use crate::envs::metric::UnitMetric;
use crate::providers::Role;
use crate::spec::Pipeline;

/// The inspect_ai release whose log format these files follow.
pub const INSPECT_VERSION: &str = "0.3.285";

/// `(file name, bytes)` of one log per group.
#[must_use]
pub fn files(pipeline: &Pipeline, groups: &[Group<'_>]) -> Vec<(String, Vec<u8>)> {
    groups.iter().map(|g| (file_name(pipeline, g), unscored_as_nan(ascii::to_vec(&SamplesLast(log(pipeline, g)))))).collect()
}

/// A log with `samples` written after every header field, as Inspect writes it: its
/// header-only read (what `inspect view` and `list_eval_logs` users read first) stops at
/// `samples`, and must have met `version` by then.
struct SamplesLast(Value);

impl serde::Serialize for SamplesLast {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(fields) = &self.0 else { return self.0.serialize(serializer) };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (k, v) in fields.iter().filter(|(k, _)| *k != "samples") {
            map.serialize_entry(k, v)?;
        }
        if let Some(samples) = fields.get("samples") {
            map.serialize_entry("samples", samples)?;
        }
        map.end()
    }
}

/// Inspect writes an unscored sample's value as the JSON constant `NaN` (`Score.unscored`),
/// which its metrics skip; serde_json has no NaN, so such a value is built as `null` and
/// written here. `"value":null` occurs nowhere else: the log's other `value` keys are
/// numbers, and a quote inside a string is written `\"`, so no text can spell it.
fn unscored_as_nan(bytes: Vec<u8>) -> Vec<u8> {
    const NULL: &[u8] = b"\"value\":null";
    if !bytes.windows(NULL.len()).any(|w| w == NULL) {
        return bytes;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = &bytes[..];
    while let Some(at) = rest.windows(NULL.len()).position(|w| w == NULL) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(b"\"value\":NaN");
        rest = &rest[at + NULL.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Inspect's own naming, `{created}_{task}_{model}_{eval id}.json`, which `inspect view` and
/// `list_eval_logs` look for (`_` only between the parts).
fn file_name(pipeline: &Pipeline, g: &Group<'_>) -> String {
    let created = chrono::DateTime::<chrono::Utc>::from(g.span.0).format("%Y-%m-%dT%H-%M-%S+00-00");
    let part = |text: &str| stem(text).replace('_', "-");
    format!("{created}_{}_{}_{}.json", part(&g.task.qualified()), part(&g.model.id), eval_id(pipeline, g))
}

/// The log's id: 22 hex digits of the blake3 of the pipeline's hash, the task and the model,
/// so exporting again writes the same files.
fn eval_id(pipeline: &Pipeline, g: &Group<'_>) -> String {
    let id = blake3::hash(format!("{}\0{}\0{}", pipeline.source_hash, g.task.qualified(), g.model.id).as_bytes()).to_hex();
    id[..22].to_owned()
}

/// The task's id in Inspect, one per task × model: `inspect view` takes logs that share a
/// `task_id` in one folder for retries of one run and lists only the newest, so two models'
/// logs of a task must not share one. Stable across exports (the task's content and the model).
fn task_id(g: &Group<'_>) -> String {
    let id = blake3::hash(format!("{}\0{}", g.task.content_hash, g.model.id).as_bytes()).to_hex();
    id[..22].to_owned()
}

/// RFC 3339 time of a cache entry.
pub(super) fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Inspect's model name, `provider/model`.
fn model_name(g: &Group<'_>) -> String {
    format!("{}/{}", g.model.provider, g.model.model)
}

/// The whole log of one group.
fn log(pipeline: &Pipeline, g: &Group<'_>) -> Value {
    let model = model_name(g);
    let (input, output) = g.samples.iter().fold((0, 0), |(i, o), s| (i + s.exchange.input_tokens, o + s.exchange.output_tokens));
    let mut numbered: Vec<(u64, Value)> = g.samples.iter().map(|s| (s.item, s.label())).collect();
    numbered.sort_unstable_by_key(|(item, _)| *item);
    numbered.dedup_by_key(|(item, _)| *item);
    let ids: Vec<Value> = numbered.into_iter().map(|(_, id)| id).collect();
    json!({
        "version": 2,
        "status": if g.cells.len() == g.planned { "success" } else { "started" },
        "eval": {
            "eval_id": eval_id(pipeline, g),
            "run_id": &pipeline.source_hash[..pipeline.source_hash.len().min(22)],
            "created": rfc3339(g.span.0),
            "task": g.task.qualified(),
            "task_id": task_id(g),
            "task_version": g.task.episode_version,
            "task_attribs": {},
            "task_args": {},
            "task_args_passed": {},
            "dataset": {"name": g.task.task, "samples": ids.len(), "sample_ids": ids, "shuffled": false},
            "model": model,
            "model_generate_config": {},
            "model_args": {"evalgrid_model": g.model.id},
            "config": {"epochs": pipeline.seeds.len()},
            "packages": {"evalgrid": env!("CARGO_PKG_VERSION")},
            "metadata": {
                "evalgrid": provenance::record(pipeline, &g.cells),
                "format": format!("Inspect AI eval log (JSON, version 2) as inspect_ai {INSPECT_VERSION} reads it"),
            },
        },
        "plan": {"name": "evalgrid", "steps": [{"solver": format!("evalgrid/{}", g.task.benchmark), "params": {}}], "config": {}},
        "results": {"total_samples": g.samples.len(), "completed_samples": g.samples.len(), "scores": results(g)},
        "stats": {
            "started_at": rfc3339(g.span.0),
            "completed_at": rfc3339(g.span.1),
            "model_usage": {model.clone(): usage(input, output)},
            "role_usage": {},
            "connection_limit_history": [],
        },
        "invalidated": false,
        "tags": [],
        "metadata": {},
        "samples": g.samples.iter().map(|s| sample(&model, &g.metrics, s)).collect::<Vec<_>>(),
    })
}

/// One scorer per unit metric with a value, its metric the mean over samples.
fn results(g: &Group<'_>) -> Vec<Value> {
    g.metrics
        .iter()
        .filter_map(|m| {
            let (value, n) = mean(&g.samples, &m.name)?;
            Some(json!({
                "name": m.name,
                "scorer": m.name,
                "params": {},
                "scored_samples": n,
                "unscored_samples": g.samples.len() - n,
                "metrics": {"mean": {"name": "mean", "value": value, "params": {}}},
            }))
        })
        .collect()
}

fn usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output})
}

/// Inspect's `stop_reason` for evalgrid's finish class.
fn stop_reason(e: &Exchange) -> &'static str {
    match e.finish_reason.as_deref() {
        None | Some("stop") => "stop",
        Some("length") => "max_tokens",
        Some("context_exceeded") => "model_length",
        Some("content_filter" | "refusal") => "content_filter",
        Some("tool_calls") => "tool_calls",
        Some(_) => "unknown",
    }
}

fn message(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

/// A sample's scores: each value with the answer the scorer extracted and its explanation
/// where the benchmark keeps them; a judge's reply without a grade is there too, unscored
/// (`NaN`, reason `grader_failed`, as Inspect's `model_graded_qa` writes it), so the sample
/// says why it has no value.
fn scores(metrics: &[UnitMetric], s: &Sample) -> Map<String, Value> {
    let detail = |name: &str| s.exchange.details.iter().find(|d| d.scorer == name);
    let mut out = Map::new();
    for m in metrics {
        let value = s.scores.iter().find(|(n, _)| *n == m.name).map(|(_, v)| *v);
        let d = detail(&m.name);
        let mut score = match (value, d) {
            (Some(v), _) => json!({"value": v}),
            (None, Some(d)) if d.ungraded => json!({"value": null, "reason": "grader_failed"}),
            (None, _) => continue,
        };
        if let Some(d) = d {
            if let Some(a) = &d.answer {
                score["answer"] = json!(a);
            }
            if let Some(e) = &d.explanation {
                score["explanation"] = json!(e);
            }
        }
        score["history"] = json!([]);
        out.insert(m.name.clone(), score);
    }
    out
}

/// One sample: the prompt as sent, the answer as the assistant turn and the output.
fn sample(model: &str, metrics: &[UnitMetric], s: &Sample) -> Value {
    let e = &s.exchange;
    let mut answer = message("assistant", &e.answer);
    answer["model"] = json!(model);
    let messages: Vec<Value> = if e.trajectory.is_empty() {
        let mut messages: Vec<Value> = e.system.iter().map(|t| message("system", t)).collect();
        for m in &e.prompt {
            messages.push(message(if m.role == Role::Assistant { "assistant" } else { "user" }, &m.content));
        }
        messages.push(answer.clone());
        messages
    } else {
        // An agent's conversation as it went, its answers marked with the model.
        e.trajectory
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if m["role"] == "assistant" {
                    m["model"] = json!(model);
                }
                m
            })
            .collect()
    };
    let scores = scores(metrics, s);
    let mut metadata = json!({"cell": s.cell, "seed": s.seed});
    if let Some(id) = &e.id {
        metadata["dataset_id"] = json!(id);
    }
    json!({
        "id": s.label(),
        "epoch": s.epoch,
        "input": e.input,
        "target": if e.targets.len() == 1 { json!(e.targets[0]) } else { json!(e.targets) },
        "choices": (!e.choices.is_empty()).then_some(&e.choices),
        "messages": messages,
        "output": {
            "model": model,
            "choices": [{"message": answer, "stop_reason": stop_reason(e)}],
            "completion": e.answer,
            "usage": usage(e.input_tokens, e.output_tokens),
        },
        "scores": scores,
        "metadata": metadata,
        "store": {},
        "events": [],
        "model_usage": {model: usage(e.input_tokens, e.output_tokens)},
        "role_usage": {},
        "attachments": {},
    })
}
