//! The cost estimate of `run --dry-run` (issue 33 item 5): BBEH Mini × 3 models, a 1-seed
//! pilot run first, then the estimate for the rest against what the full run reports, with
//! the mock billing prompt words in and a different output length for every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use evalgrid::providers::Usage;
use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script, prompt_hash};
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

const MAX_TOKENS: u64 = 800;

fn pipeline(url: &str) -> String {
    let model = |id: &str, name: &str, input: f64, output: f64| {
        format!(
            "  - {{id: {id}, provider: openai, model: {name}, base_url: \"{url}\", params: {{max_tokens: {MAX_TOKENS}}}, price: {{input_per_mtok: {input}, output_per_mtok: {output}}}}}\n"
        )
    };
    format!(
        "name: estimate\nmodels:\n{}{}{}tasks:\n  - {{benchmark: bbeh, select: all, params: {{subset: mini}}}}\nseeds: [0, 1]\n",
        model("a", "gpt-4o", 2.5, 10.0),
        model("b", "gpt-4o-mini", 0.15, 0.6),
        model("c", "qwen3-8b", 0.2, 0.8)
    )
}

/// Billed input: the words of every message; output: 20 to 780 tokens, drawn anew for each
/// request (so the pilot's lengths are a sample, not the answer). The draw is a hash of the
/// model, the prompt and how many times that model was asked that prompt, so it does not depend
/// on the order requests arrive in: the same run costs the same every time.
fn billing_mock() -> Mock {
    let asked = Arc::new(Mutex::new(HashMap::<String, u64>::new()));
    let script = Script::function(move |req: &MockRequest| {
        let n = {
            let mut asked = asked.lock().unwrap();
            let count = asked.entry(format!("{}\n{}", req.model, req.last_user)).or_default();
            *count += 1;
            *count
        };
        let words: usize =
            req.body["messages"].as_array().into_iter().flatten().filter_map(|m| m["content"].as_str()).map(|t| t.split_whitespace().count()).sum();
        let output = 20 + prompt_hash(&format!("{}#{}#{n}", req.model, req.last_user)) % (MAX_TOKENS - 39);
        MockOutcome::Reply(MockReply::text("The answer is: (A)").with_usage(Usage { input: words as u64, output, ..Usage::default() }))
    });
    Mock::start(MockConfig { script, ..MockConfig::default() })
}

#[test]
fn after_a_one_seed_pilot_the_estimate_is_within_10_percent_of_what_the_run_then_costs() {
    let mock = billing_mock();
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url()));
    let data = data_dir().to_str().unwrap().to_owned();
    // Before any call: a range from no output to every output at its cap.
    let (code, before) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{before}");
    let first = &before["estimate"][0];
    assert_eq!((first["model"].as_str(), first["calls"].as_u64(), first["tokenizer"].as_str()), (Some("a"), Some(920), Some("o200k_base")), "{first}");
    assert_eq!(before["estimate"][2]["tokenizer"], "approximate: o200k_base + 25 %");
    assert!(first["cost_usd"].is_null() && first["cost_min_usd"].as_f64() < first["cost_max_usd"].as_f64(), "{first}");
    // The pilot: seed 0.
    let (code, pilot) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--filter", "seed=0", "--json"]);
    assert_eq!(code, 0, "{pilot}");
    let (code, estimate) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{estimate}");
    let text = ws.run(&["--data-dir", &data, "run", "p.yaml", "--dry-run"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("measured on 460 cached calls"), "{text}");
    let models: Vec<&Value> = estimate["estimate"].as_array().unwrap().iter().collect();
    let expected: f64 = models.iter().map(|m| m["cost_usd"]["expected"].as_f64().unwrap()).sum();
    let (low, high): (f64, f64) =
        models.iter().fold((0.0, 0.0), |(l, h), m| (l + m["cost_usd"]["low"].as_f64().unwrap(), h + m["cost_usd"]["high"].as_f64().unwrap()));
    assert!(models.iter().all(|m| m["pilot_calls"] == 460 && m["calls"] == 460), "{estimate}");
    // The full run makes the rest: seed 1.
    let (code, full) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{full}");
    let cost = full["calls"]["cost_usd"].as_f64().unwrap();
    let error = (expected - cost).abs() / cost;
    eprintln!("estimate ${expected:.4} (95 %: ${low:.4} – ${high:.4}), the run reported ${cost:.4}: {:.1} % off", error * 100.0);
    assert!(error < 0.10, "estimate ${expected:.4} vs ${cost:.4} reported");
    assert!(low <= cost && cost <= high, "the interval ${low:.4} – ${high:.4} holds ${cost:.4}");
}
