//! Every Eval Ever (schema 0.3.0, `tests/fixtures/every_eval_ever/`), one pair of files per
//! task × model in the datastore's layout, `data/<benchmark>/<provider>/<model>/<uuid>.json`:
//! the aggregate (an `EvaluationLog`: one result per unit metric, its score the mean over the
//! units) and the instance-level `<uuid>_samples.jsonl` (one record per unit and metric,
//! linked by `evaluation_result_id`). evalgrid's provenance is in the string-valued
//! `additional_details` and each record's `metadata`, the only places the schema leaves open.

use serde_json::{Value, json};
use sha2::Digest as _;

use super::inspect::rfc3339;
use super::samples::{Group, Sample, mean};
use super::{ascii, provenance, stem};
use crate::envs::metric::UnitMetric;
use crate::spec::Pipeline;

/// The Every Eval Ever schema version written.
pub const SCHEMA_VERSION: &str = "0.3.0";

/// `(file name, bytes)`: the aggregate and the instance file of each group.
#[must_use]
pub fn files(pipeline: &Pipeline, groups: &[Group<'_>]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for g in groups {
        let ids = Ids::of(pipeline, g);
        let base = format!("data/{}/{}/{}/{}", stem(&g.task.benchmark), stem(&g.model.provider.to_string()), stem(&g.model.model), ids.uuid);
        let samples_name = format!("{base}_samples.jsonl");
        let mut lines = Vec::new();
        let mut rows = 0;
        for m in &g.metrics {
            for s in &g.samples {
                if let Some(record) = instance(g, &ids, m, s) {
                    lines.extend(ascii::to_vec(&record));
                    lines.push(b'\n');
                    rows += 1;
                }
            }
        }
        let detail = json!({
            "format": "jsonl",
            "file_path": samples_name,
            "hash_algorithm": "sha256",
            "checksum": format!("{:x}", sha2::Sha256::digest(&lines)),
            "total_rows": rows,
        });
        out.push((format!("{base}.json"), ascii::to_vec(&aggregate(pipeline, g, &ids, detail))));
        out.push((samples_name, lines));
    }
    out
}

/// The identifiers both files share.
struct Ids {
    evaluation: String,
    model: String,
    retrieved: String,
    /// The files' name in the datastore layout: a version-4-shaped UUID made from the
    /// pipeline's hash, the task and the model, so exporting again names the same files.
    uuid: String,
}

impl Ids {
    fn of(pipeline: &Pipeline, g: &Group<'_>) -> Self {
        let retrieved = g.span.1.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()).to_string();
        let mut b = *blake3::hash(format!("{}\0{}\0{}", pipeline.source_hash, g.task.qualified(), g.model.id).as_bytes()).as_bytes();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let hex: String = b[..16].iter().map(|x| format!("{x:02x}")).collect();
        let uuid = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]);
        Self {
            uuid,
            evaluation: format!("{}/{}/{retrieved}", g.task.qualified(), g.model.id),
            model: format!("{}/{}", g.model.provider, g.model.model),
            retrieved,
        }
    }
}

/// The name of one metric's result (`task/metric`).
fn result_id(g: &Group<'_>, m: &UnitMetric) -> String {
    format!("{}/{}", g.task.qualified(), m.name)
}

fn aggregate(pipeline: &Pipeline, g: &Group<'_>, ids: &Ids, detail: Value) -> Value {
    let cells = String::from_utf8(ascii::to_vec(&g.cells)).unwrap_or_default();
    let evalgrid = json!({
        "evalgrid_version": provenance::evalgrid_version(),
        "pipeline": pipeline.name,
        "pipeline_blake3": pipeline.source_hash,
        "evalgrid_cells": cells,
    });
    let results: Vec<Value> = g.metrics.iter().filter_map(|m| result(g, m)).collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": ids.evaluation,
        "evaluation_timestamp": rfc3339(g.span.1),
        "retrieved_timestamp": ids.retrieved,
        "source_metadata": {
            "source_name": "evalgrid",
            "source_type": "evaluation_run",
            "source_organization_name": "unknown",
            "evaluator_relationship": "other",
            "additional_details": evalgrid,
        },
        "eval_library": {"name": "evalgrid", "version": env!("CARGO_PKG_VERSION"), "additional_details": evalgrid},
        "model_info": {
            "name": g.model.model,
            "id": ids.model,
            "inference_platform": g.model.provider.to_string(),
            "additional_details": {"deployment_type": "unknown", "model_availability": "unknown", "evalgrid_model": g.model.id},
        },
        "evaluation_results": results,
        "detailed_evaluation_results": detail,
    })
}

/// One unit metric's aggregate: the mean over the units that have a value.
fn result(g: &Group<'_>, m: &UnitMetric) -> Option<Value> {
    let (score, n) = mean(&g.samples, &m.name)?;
    let mut config = json!({
        "evaluation_description": format!("mean of `{}` over the scored units of {} (items × seeds), as in evalgrid's items.csv", m.name, g.task.qualified()),
        "metric_id": m.name,
        "metric_name": m.name,
        "lower_is_better": false,
    });
    if m.binary {
        config["score_type"] = json!("binary");
    }
    Some(json!({
        "evaluation_result_id": result_id(g, m),
        "evaluation_name": result_id(g, m),
        "source_data": {
            "dataset_name": g.task.task,
            "source_type": "other",
            "additional_details": {"benchmark": g.task.benchmark, "content_blake3": g.task.content_hash},
        },
        "metric_config": config,
        "score_details": {"score": score, "uncertainty": {"num_samples": n}},
    }))
}

/// One unit's record for one metric (none where the unit has no value for it).
fn instance(g: &Group<'_>, ids: &Ids, m: &UnitMetric, s: &Sample) -> Option<Value> {
    let (_, score) = s.scores.iter().find(|(name, _)| *name == m.name)?;
    let e = &s.exchange;
    let formatted: Vec<String> = e.system.iter().cloned().chain(e.prompt.iter().map(|t| t.content.clone())).collect();
    let cell = g.cells.iter().find(|c| c.cell == s.cell);
    let mut metadata = json!({"cell": s.cell, "seed": s.seed.to_string(), "item": s.id.clone().unwrap_or_else(|| s.item.to_string())});
    if let Some(c) = cell {
        metadata["episode_key"] = json!(c.episode_key);
        metadata["score_key"] = json!(c.score_key);
    }
    if let Some(f) = &e.finish_reason {
        metadata["finish_reason"] = json!(f);
    }
    Some(json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": ids.evaluation,
        "model_id": ids.model,
        "evaluation_name": result_id(g, m),
        "evaluation_result_id": result_id(g, m),
        "sample_id": e.id.clone().unwrap_or_else(|| s.item.to_string()),
        "interaction_type": "single_turn",
        "input": {
            "raw": e.input,
            "formatted": formatted.join("\n\n"),
            "reference": e.targets,
            "choices": (!e.choices.is_empty()).then_some(&e.choices),
        },
        "output": {"raw": [e.answer]},
        "messages": null,
        "answer_attribution": [],
        "evaluation": {"score": score, "is_correct": *score >= 1.0},
        "token_usage": {"input_tokens": e.input_tokens, "output_tokens": e.output_tokens, "total_tokens": e.input_tokens + e.output_tokens},
        "metadata": metadata,
    }))
}
