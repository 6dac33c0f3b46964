//! Every step kind's key reacts to every one of its inputs (issue 11: the v1
//! envelope overwrote the verdict's and the submission's `code` field).
//!
//! Two checks per kind: changing each *argument* of the kind's components
//! builder changes the key, and every field the builder puts under `inputs`
//! reaches the hash unchanged (no envelope field shadows it).

use serde_json::{Value, json};

use super::eleusis::card::Card;
use super::eleusis::llm_episode::verdict_components;
use super::eleusis::rule::SecretRule;
use super::weirdml::benchmark::submission_components;
use crate::exec::calls::{CallSite, call_components};
use crate::plan::grid::{episode_components, metrics_components, plan, report_components, score_components};
use crate::plan::{KEY_SCHEMA_VERSION, StepKey};
use crate::providers::{ChatRequest, Endpoint, Message, ProviderKind};
use crate::spec::Pipeline;

/// The golden-key pipeline, played by an API model (so the model's URL and params count).
fn pipeline() -> Pipeline {
    let mut p = crate::plan::grid::fixture_pipeline();
    p.seeds = vec![0];
    let m = &mut p.models[0];
    m.provider = crate::spec::Provider::OpenAi;
    m.model = "gpt-x".into();
    m.base_url = Some("http://127.0.0.1:9".into());
    m.params.insert("temperature".into(), json!(0.5));
    p
}

/// Asserts the envelope shape and that every leaf under `inputs`, changed
/// alone, changes the key.
fn every_input_reaches_the_key(kind: &str, components: &Value) {
    assert_eq!(components["schema"], json!(KEY_SCHEMA_VERSION), "{kind}");
    assert_eq!(components["step"], json!(kind));
    let inputs = components["inputs"].as_object().unwrap_or_else(|| panic!("{kind}: no inputs object"));
    assert!(!inputs.is_empty(), "{kind}: empty inputs");
    let base = StepKey::compute(components);
    let mut leaves = Vec::new();
    collect_leaves(&components["inputs"], "/inputs".to_owned(), &mut leaves);
    for pointer in leaves {
        let mut changed = components.clone();
        let slot = changed.pointer_mut(&pointer).expect("leaf exists");
        *slot = match slot.take() {
            Value::String(s) => Value::String(format!("{s}~")),
            Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 1.5),
            Value::Bool(b) => Value::Bool(!b),
            Value::Null => json!("set"),
            other => json!([other]),
        };
        assert_ne!(StepKey::compute(&changed), base, "{kind}: {pointer} does not reach the key");
    }
}

fn collect_leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => m.iter().for_each(|(k, v)| collect_leaves(v, format!("{at}/{k}"), out)),
        Value::Array(a) if !a.is_empty() => a.iter().enumerate().for_each(|(i, v)| collect_leaves(v, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

fn distinct(kind: &str, keys: &[(&str, StepKey)]) {
    for (i, (a, ka)) in keys.iter().enumerate() {
        for (b, kb) in &keys[i + 1..] {
            assert_ne!(ka, kb, "{kind}: `{a}` and `{b}` share a key");
        }
    }
}

#[test]
fn episode_and_score() {
    let p = pipeline();
    let cell = plan(&p, None).cells.remove(0);
    let episode = episode_components(&p, &cell);
    every_input_reaches_the_key("episode", &episode);
    let score = score_components(&p, 0, cell.episode_key);
    every_input_reaches_the_key("score", &score);
    let other_episode = StepKey::compute(&json!({"other": 1}));
    distinct("score", &[("base", StepKey::compute(&score)), ("episode", StepKey::compute(&score_components(&p, 0, other_episode)))]);
}

#[test]
fn metrics_and_report() {
    let p = pipeline();
    let pl = plan(&p, None);
    let metrics = metrics_components(&p, &pl.cells, &pl.cells);
    every_input_reaches_the_key("metrics", &metrics);
    let report = report_components(&p, pl.metrics_key);
    every_input_reaches_the_key("report", &report);
    let mut relabelled = pl.cells.clone();
    relabelled[0].id = "n/eleusis/even_ranks_only/0".into();
    let mut titled = p.clone();
    titled.report.title = "u".into();
    distinct(
        "metrics/report",
        &[
            ("metrics", StepKey::compute(&metrics)),
            ("relabelled", StepKey::compute(&metrics_components(&p, &pl.cells, &relabelled))),
            ("no cells", StepKey::compute(&metrics_components(&p, &pl.cells, &[]))),
            ("fewer planned", StepKey::compute(&metrics_components(&p, &pl.cells[1..], &pl.cells[1..]))),
            ("report", StepKey::compute(&report)),
            ("title", StepKey::compute(&report_components(&titled, pl.metrics_key))),
            ("metrics key", StepKey::compute(&report_components(&p, StepKey::compute(&json!(1))))),
        ],
    );
}

#[test]
fn call_and_compile() {
    // Rule-compiler calls are calls too: same builder, same coverage.
    let endpoint = Endpoint { base_url: "http://127.0.0.1:9".into(), ..Endpoint::new(ProviderKind::OpenAi, "gpt-x") };
    let request = ChatRequest { messages: vec![Message::user("hi")], ..ChatRequest::default() };
    let site = CallSite { scope: Some(StepKey::compute(&json!(0))), position: "turn 1 attempt 1".into(), sample: 0 };
    let base = call_components(&endpoint, &request, &site);
    every_input_reaches_the_key("call", &base);
    let key = |e: &Endpoint, r: &ChatRequest, s: &CallSite| StepKey::compute(&call_components(e, r, s));
    let other_model = Endpoint { model: "gpt-y".into(), ..endpoint.clone() };
    let other_url = Endpoint { base_url: "http://127.0.0.1:10".into(), ..endpoint.clone() };
    let other_kind = Endpoint { kind: ProviderKind::Anthropic, ..endpoint.clone() };
    let other_text = ChatRequest { messages: vec![Message::user("ho")], ..request.clone() };
    let with_system = ChatRequest { system: Some("s".into()), ..request.clone() };
    let json_mode = ChatRequest { json_mode: true, ..request.clone() };
    let mut with_param = request.clone();
    with_param.params.insert("temperature".into(), json!(0.1));
    let other_scope = CallSite { scope: None, ..site.clone() };
    let other_position = CallSite { position: "turn 2 attempt 1".into(), ..site.clone() };
    let other_sample = CallSite { sample: 1, ..site.clone() };
    distinct(
        "call",
        &[
            ("base", key(&endpoint, &request, &site)),
            ("model", key(&other_model, &request, &site)),
            ("base_url", key(&other_url, &request, &site)),
            ("provider", key(&other_kind, &request, &site)),
            ("message", key(&endpoint, &other_text, &site)),
            ("system", key(&endpoint, &with_system, &site)),
            ("json_mode", key(&endpoint, &json_mode, &site)),
            ("params", key(&endpoint, &with_param, &site)),
            ("scope", key(&endpoint, &request, &other_scope)),
            ("position", key(&endpoint, &request, &other_position)),
            ("sample", key(&endpoint, &request, &other_sample)),
        ],
    );
}

#[test]
fn verdict() {
    let cards = |s: &[&str]| s.iter().map(|c| c.parse::<Card>().expect("card")).collect::<Vec<_>>();
    let rule = SecretRule::from_name("even_ranks_only").expect("rule");
    let other_rule = SecretRule::from_name("only_aces").expect("rule");
    let main = cards(&["2♥", "4♠"]);
    let right = "def rule(mainline, card):\n    return card.rank % 2 == 0\n";
    let wrong = "def rule(mainline, card):\n    return True\n";
    let base = verdict_components(rule, Some(right), &main);
    every_input_reaches_the_key("verdict", &base);
    let key = |r, c: Option<&str>, m: &[Card]| StepKey::compute(&verdict_components(r, c, m));
    distinct(
        "verdict",
        &[
            ("right guess", key(rule, Some(right), &main)),
            ("wrong guess", key(rule, Some(wrong), &main)),
            ("no code", key(rule, None, &main)),
            ("rule", key(other_rule, Some(right), &main)),
            ("mainline", key(rule, Some(right), &cards(&["2♥", "6♠"]))),
        ],
    );
}

#[test]
fn submission() {
    let episode = StepKey::compute(&json!("episode"));
    let base = submission_components(episode, 1, "print(1)");
    every_input_reaches_the_key("submission", &base);
    let key = |e, n, c: &str| StepKey::compute(&submission_components(e, n, c));
    distinct(
        "submission",
        &[
            ("base", key(episode, 1, "print(1)")),
            ("code", key(episode, 1, "print(2)")),
            ("number", key(episode, 2, "print(1)")),
            ("episode", key(StepKey::compute(&json!("other")), 1, "print(1)")),
        ],
    );
}
