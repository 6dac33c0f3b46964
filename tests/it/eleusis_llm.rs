//! A full 78-round Eleusis grid for one API model against the mock server,
//! with a scripted player and a scripted rule compiler.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};

use crate::support::Workspace;

/// Player: plays the first hand card and formally guesses "only red cards"
/// every turn. Compiler: turns that guess into Python.
fn script() -> Script {
    Script::function(|req| {
        let text = &req.last_user;
        if text.contains("<CODE>") {
            return MockOutcome::Reply(MockReply::text("<NAME>only_red</NAME>\n<CODE>\nreturn card.color == \"red\"\n</CODE>"));
        }
        let hand = text.split("#### YOUR HAND").nth(1).and_then(|s| s.lines().map(str::trim).find(|l| !l.is_empty())).unwrap_or("");
        let card = hand.split(", ").next().unwrap_or("");
        MockOutcome::Reply(MockReply::text(format!(
            "<ACTION>{{\"reasoning_summary\": \"probe\", \"card\": \"{card}\", \"tentative_rule\": \"Only red cards.\", \"confidence_level\": 6, \"guess_rule\": true}}</ACTION>"
        )))
    })
}

#[test]
fn full_78_round_grid_against_the_mock_with_scripted_player_and_compiler() {
    if std::process::Command::new("python3").arg("-c").arg("pass").status().is_err() {
        eprintln!("SKIPPED: python3 is needed for the rule judge");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: script(), record_log: false, ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: eleusis-mock\nmodels:\n  - {{id: player, provider: openai, model: mock-player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: eleusis\n    params:\n      compiler: {{provider: openai, model: mock-compiler, base_url: \"{url}\"}}\nseeds: [0, 1, 2]\ntransport: {{max_concurrency: 8}}\nreport: {{prices: {{rule-compiler: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}}}}}\n"
        ),
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--jobs", "4"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 78);
    let csv = std::fs::read_to_string(ws.path("reports/eleusis-mock/summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for column in ["mean_score", "mean_floored_score", "success_rate", "mean_failed_guesses", "mean_no_stakes_score"] {
        assert!(header.split(',').any(|h| h == column), "{column} missing from {header}");
    }
    // "Only red cards" is right for only_red_cards (won on turn 1) and
    // wrong elsewhere (a failed guess on every turn).
    let row = |task: &str| -> Vec<String> {
        csv.lines().find(|l| l.starts_with(&format!("eleusis,player,{task},"))).unwrap().split(',').map(str::to_owned).collect()
    };
    let col = |name: &str| header.split(',').position(|h| h == name).unwrap();
    assert_eq!(row("only_red_cards")[col("mean_score")], "30");
    assert_eq!(row("even_ranks_only")[col("mean_failed_guesses")], "30");
    // The rule compiler's calls have their own tokens line, apart from the player's.
    let md = std::fs::read_to_string(ws.path("reports/eleusis-mock/summary.md")).unwrap();
    let usage = &md[md.find("## Tokens and cost").expect("usage table")..];
    assert!(usage.lines().any(|l| l.starts_with("| player |")), "{usage}");
    let compiler = usage.lines().find(|l| l.starts_with("| rule-compiler |")).unwrap_or_else(|| panic!("{usage}"));
    assert!(!compiler.ends_with("| – |"), "priced from report.prices: {compiler}");
    // One compile call for the one guess text; everything replays from the cache.
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_cached"], 78);
    runtime.block_on(server.shutdown());
}
