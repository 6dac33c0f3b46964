//! Issue 23: `evalgrid check` sends one small request to each model endpoint, never cached,
//! and says what works: reachable, key accepted, the model id answered, the context window
//! where the server says it, streaming and tools; exit 1 on a problem.

use evalgrid::providers::mock::MockConfig;
use serde_json::Value;

use crate::providers::Mock;
use crate::support::Workspace;

#[test]
fn check_tries_each_endpoint_once_and_says_what_works() {
    let mock = Mock::start(MockConfig { context_window: Some(4096), require_api_key: Some("sk-right".into()), ..MockConfig::default() });
    let ws = Workspace::new();
    let url = mock.url();
    ws.write(
        "p.yaml",
        &format!(
            "name: c\nmodels:\n  - {{id: good, provider: openai, model: m, base_url: \"{url}\", api_key_env: GOOD_KEY}}\n  - {{id: same, provider: openai, model: m, base_url: \"{url}\", api_key_env: GOOD_KEY, params: {{temperature: 0}}}}\n  - {{id: wrong, provider: anthropic, model: m, base_url: \"{url}\", api_key_env: BAD_KEY}}\n  - {{id: dead, provider: openai, model: m, base_url: \"http://127.0.0.1:9/v1\"}}\n  - {{id: bisect, provider: builtin, model: bisect}}\ntasks:\n  - {{benchmark: guess, select: [range_10]}}\nseeds: [0]\n"
        ),
    );
    let out = ws.cmd().env("GOOD_KEY", "sk-right").env("BAD_KEY", "sk-wrong").args(["check", "p.yaml", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a problem is exit 1: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let endpoints = v["endpoints"].as_array().unwrap();
    let by = |id: &str| endpoints.iter().find(|e| e["model"] == id).unwrap_or_else(|| panic!("{id}: {v}"));
    // `same` is the same endpoint with other sampling parameters: checked once; built-ins never.
    assert_eq!(endpoints.len(), 3, "{v}");
    let good = by("good");
    assert_eq!((good["reachable"].as_bool(), good["key_accepted"].as_bool(), good["streaming"].as_bool()), (Some(true), Some(true), Some(true)), "{good}");
    assert_eq!((good["answered_as"].as_str(), good["context_window"].as_u64()), (Some("same"), Some(4096)), "{good}");
    assert!(good["tools"].as_str().is_some_and(|t| t.starts_with("accepted") || t == "called"), "{good}");
    assert_eq!(good["problems"].as_array().map(Vec::len), Some(0), "{good}");
    let wrong = by("wrong");
    assert_eq!((wrong["reachable"].as_bool(), wrong["key_accepted"].as_bool()), (Some(true), Some(false)), "{wrong}");
    let dead = by("dead");
    assert_eq!(dead["reachable"].as_bool(), Some(false), "{dead}");
    // Never cached, and a few requests in all (three for the good endpoint, one for the wrong key).
    assert!(!ws.path("cache").join("entries").exists() || std::fs::read_dir(ws.path("cache").join("entries")).unwrap().next().is_none());
    assert!(mock.server().calls() <= 4, "{}", mock.server().calls());
    // The human form: a table, then one line per problem.
    let out = ws.cmd().env("GOOD_KEY", "sk-right").env("BAD_KEY", "sk-wrong").args(["check", "p.yaml"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("problem: model `dead`") && text.contains("problem: model `wrong`") && text.contains("4096 tokens"), "{text}");
    assert!(!text.contains("sk-right") && !text.contains("sk-wrong"), "no key printed: {text}");
}

/// Issue 48 item 3: a `qa` judge is an endpoint the run calls, so `check` probes it too; on a
/// closed port it is a problem (exit 1), never "all usable".
#[test]
fn check_probes_the_judge_of_a_qa_task() {
    let mock = Mock::start(MockConfig::default());
    let ws = Workspace::new();
    ws.write("d.jsonl", "{\"input\": \"Capital of France?\", \"target\": \"Paris\"}\n");
    ws.write(
        "p.yaml",
        &format!(
            "name: c\nmodels:\n  - {{id: a, provider: openai, model: m, base_url: \"{}\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {{judge: {{model: {{provider: openai, model: grader, base_url: \"http://127.0.0.1:9/v1\"}}}}}}]\nseeds: [0]\n",
            mock.url()
        ),
    );
    let out = ws.run(&["check", "p.yaml", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let endpoints = v["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 2, "{v}");
    let judge = endpoints.iter().find(|e| e["model"] == "judge").unwrap_or_else(|| panic!("{v}"));
    assert_eq!((judge["reachable"].as_bool(), judge["url"].as_str()), (Some(false), Some("http://127.0.0.1:9/v1/chat/completions")), "{judge}");
    assert_eq!(v["ok"], false);
    let text = String::from_utf8_lossy(&ws.run(&["check", "p.yaml"]).stdout).into_owned();
    assert!(text.contains("problem: model `judge`") && text.contains("1 with a problem"), "{text}");
}
