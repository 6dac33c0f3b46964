//! Malformed pipelines exit 2 with `file:line:col: message` and a hint.

use crate::support::Workspace;

fn check(yaml: &str) -> String {
    let ws = Workspace::new();
    ws.write("bad.yaml", yaml);
    for cmd in ["validate", "run", "status"] {
        let out = ws.run(&[cmd, "bad.yaml"]);
        assert_eq!(out.status.code(), Some(2), "`{cmd}` must exit 2");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    String::from_utf8(ws.run(&["validate", "bad.yaml"]).stderr).unwrap()
}

const GOOD_MODELS: &str = "models:\n  - {id: r, provider: builtin, model: random}\n";

#[test]
fn bad_yaml_syntax() {
    let err = check("name: x\nmodels: [1, 2\ntasks: []\n");
    assert!(err.starts_with("error: bad.yaml:"), "{err}");
}

#[test]
fn misspelled_key_suggests_the_right_one() {
    insta::assert_snapshot!(check(&format!("name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\nsedes: [0]\n")), @r"
    error: bad.yaml:6:1: unknown field `sedes`, expected one of name, description, models, tasks, seeds, include, exclude, metrics, report, transport, sandbox, budget
      |
    6 | sedes: [0]
      | ^
      = hint: did you mean `seeds`?
    ");
}

#[test]
fn wrong_type_is_located() {
    let err = check(&format!("name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\nseeds: [0, two]\n"));
    assert!(err.starts_with("error: bad.yaml:6:"), "{err}");
}

#[test]
fn unknown_benchmark_lists_known_ones() {
    insta::assert_snapshot!(check(&format!("name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusys\nseeds: [0]\n")), @r"
    error: bad.yaml:5:16: unknown benchmark `eleusys`
      |
    5 |   - benchmark: eleusys
      |                ^
      = hint: did you mean `eleusis`?
    ");
}

#[test]
fn unknown_rule_and_param_are_pointed_at() {
    let err = check(&format!(
        "name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\n    select: [even_ranks_only, only_acess]\n    params: {{max_turn: 3}}\nseeds: [0]\n"
    ));
    assert!(err.contains("bad.yaml:6:31: unknown Eleusis rule `only_acess`"), "{err}");
    assert!(err.contains("did you mean `only_aces`?"), "{err}");
    assert!(err.contains("bad.yaml:7:") && err.contains("unknown Eleusis task parameter `max_turn`"), "{err}");
}

#[test]
fn empty_grid_is_rejected() {
    let err = check("name: x\nmodels: []\ntasks:\n  - benchmark: eleusis\nseeds: [0]\n");
    assert!(err.contains("bad.yaml:2:9: `models` is empty"), "{err}");
    let err = check(&format!("name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\nseeds: [0]\nexclude:\n  - {{model: r}}\n"));
    assert!(err.contains("the grid is empty"), "{err}");
}

#[test]
fn duplicate_model_id_names_the_first() {
    insta::assert_snapshot!(check("name: x\nmodels:\n  - {id: r, provider: builtin, model: random}\n  - {id: r, provider: builtin, model: oracle}\ntasks:\n  - benchmark: eleusis\nseeds: [0]\n"), @r"
    error: bad.yaml:4:10: duplicate model id `r`
      |
    4 |   - {id: r, provider: builtin, model: oracle}
      |          ^
      = hint: first defined at line 3; ids must be unique
    ");
}

#[test]
fn duplicate_key_and_bad_agent_param() {
    let err = check(&format!("name: x\nname: y\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\nseeds: [0]\n"));
    assert!(err.contains("bad.yaml:2:1:"), "{err}");
    let err = check("name: x\nmodels:\n  - {id: r, provider: builtin, model: random, params: {slat: 1}}\ntasks:\n  - benchmark: eleusis\nseeds: [0]\n");
    assert!(err.contains("has no parameter `slat`") && err.contains("did you mean `salt`?"), "{err}");
}

#[test]
fn missing_file_and_bad_filter_exit_2() {
    let ws = Workspace::new();
    assert_eq!(ws.run(&["run", "nope.yaml"]).status.code(), Some(2));
    let p = ws.quickstart();
    let out = ws.run(&["run", p.to_str().unwrap(), "--filter", "rule=x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown filter key `rule`"));
}

#[test]
fn every_command_has_help_with_an_example() {
    let ws = Workspace::new();
    for args in [
        &["run", "--help"][..],
        &["status", "--help"],
        &["report", "--help"],
        &["show", "--help"],
        &["validate", "--help"],
        &["cache", "gc", "--help"],
        &["datasets", "fetch", "--help"],
        &["bbeh", "score", "--help"],
        &["bbq", "call", "--help"],
        &["eleusis", "import", "--help"],
        &["bench", "--help"],
    ] {
        let out = ws.run(args);
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example"), "{args:?} has no example:\n{text}");
    }
}

#[test]
fn zero_response_cap_is_pointed_at() {
    let err = check(&format!("name: x\n{GOOD_MODELS}tasks:\n  - benchmark: eleusis\nseeds: [0]\ntransport: {{max_response_bytes: 0}}\n"));
    assert!(err.contains("bad.yaml:7:") && err.contains("`transport.max_response_bytes` must be at least 1"), "{err}");
}
