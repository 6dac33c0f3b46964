//! Benchmark-specific commands: Eleusis import, BBQ-Bench calls and the
//! offline BBQ baselines grid.

use serde_json::Value;

use crate::support::{Workspace, repo};

#[test]
fn eleusis_import_reproduces_published_headlines_via_the_cli() {
    let ws = Workspace::new();
    let results = repo().join("../shared/data/eleusis/results");
    let mut files: Vec<_> = std::fs::read_dir(&results).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut cmd = ws.cmd();
    cmd.args(["eleusis", "import"]).args(&files).args(["--out", "imported"]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 differences"));
    let vectors: Value = serde_json::from_str(&std::fs::read_to_string(repo().join("../shared/data/eleusis/vectors.json")).unwrap()).unwrap();
    let csv = std::fs::read_to_string(ws.path("imported/metrics.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let mut checked = 0;
    for line in csv.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let published = &vectors["published_headline"][fields[0]];
        for (name, value) in published.as_object().unwrap() {
            let col = header.iter().position(|h| h == name).unwrap_or_else(|| panic!("column {name} missing"));
            let ours: f64 = fields[col].parse().unwrap();
            assert!((ours - value.as_f64().unwrap()).abs() < 1e-9, "{} {name}: {ours} vs {value}", fields[0]);
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

#[test]
fn bbq_call_prints_what_the_model_sees() {
    let ws = Workspace::new();
    let out = ws.run(&["bbq", "call", "is_prime", "97"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let out = ws.run(&["bbq", "call", "is_prime", "(1,2)"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("error:"));
    let out = ws.run(&["bbq", "call", "no_such_task", "1"]);
    assert_eq!(out.status.code(), Some(2));
}

/// An input with a leading minus is an input, not a flag: negative integers reach the
/// function (spec values: `is_prime` 7 → 1 but −7 → 0, `digit_sum` −45 → 9,
/// 6x³ − 9x² + 2x + 3 at −3 → −246), and `-abc` is refused by the function as the model
/// would be told (exit 1), not by the argument parser (exit 2).
#[test]
fn bbq_call_inputs_may_start_with_a_minus() {
    let ws = Workspace::new();
    for (task, input, expected) in
        [("is_prime", "7", "1"), ("is_prime", "-7", "0"), ("digit_sum", "-45", "9"), ("func_6x3_9x2_2x_3", "-3", "-246"), ("is_greater_than_58", "-100", "0")]
    {
        let out = ws.run(&["bbq", "call", task, input]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!((out.status.code(), stdout.trim()), (Some(0), expected), "{task} {input}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = ws.run(&["bbq", "call", "caesar_cipher", "-abc"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "error: invalid input \"-abc\": strings may contain only lower-case letters a-z");
}

/// Each benchmark's tools are a command the benchmark adds (not one the CLI names), listed
/// in `--help` with the built-in commands, after `datasets`.
#[test]
fn benchmark_tool_commands_are_listed_in_help() {
    let ws = Workspace::new();
    let out = ws.run(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> =
        text.lines().skip_while(|l| *l != "Commands:").skip(1).take_while(|l| !l.is_empty()).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(
        commands,
        [
            "run", "status", "report", "diff", "show", "export", "check", "validate", "cache", "batch", "datasets", "bbeh", "bbq", "eleusis", "weirdml",
            "slurm", "k8s", "bench", "help"
        ],
        "{text}"
    );
    for line in [
        "  bbeh      BBEH tools: rescore responses produced elsewhere\n",
        "  bbq       BBQ-Bench tools: call a hidden function as the model would\n",
        "  eleusis   Eleusis tools: import published results and compute every metric\n",
        "  weirdml   WeirdML tools: import the author's published results and time horizons\n",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}

#[test]
fn bbq_baselines_run_offline_and_rerun_cached() {
    let ws = Workspace::new();
    let text = std::fs::read_to_string(repo().join("pipelines/bbq-baselines.yaml")).unwrap();
    // A slice of the grid keeps the debug-build test quick.
    let text = text.replace("select: all", "select: [is_prime, is_greater_than_58, contains_ab, caesar_cipher]").replace("seeds: [0, 1, 2]", "seeds: [0]");
    ws.write("bbq.yaml", &text);
    let (code, v) = ws.run_json(&["run", "bbq.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 8);
    let csv = std::fs::read_to_string(ws.path("reports/bbq-baselines/summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "solve_rate").unwrap();
    let rate = |model: &str| -> f64 { csv.lines().find(|l| l.starts_with(&format!("bbq,{model},*,"))).unwrap().split(',').nth(col).unwrap().parse().unwrap() };
    assert!(rate("solver") > rate("random"), "{csv}");
    let (_, v) = ws.run_json(&["run", "bbq.yaml", "--json"]);
    assert_eq!(v["cells_run"], 0);
    assert_eq!(v["cells_cached"], 8);
}
