//! Tests of the Python judge: the recorded simulation vectors (byte-exact messages, through
//! both the batched driver and the `RuleFn` adapter with the unchanged checker), every
//! recorded guess check of the shipped runs (ignored by default: minutes), hostile guess
//! code, worker restarts and a timing probe. Skipped with a note when `python3` is missing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::*;
use crate::envs::eleusis::analysis::results::{ResultsFile, parse_results};
use crate::envs::eleusis::game::equivalence::check as native_check;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::test_support::data_dir;

/// A judge with test-friendly limits, or `None` (with a note) when python3 is unavailable.
fn judge_with(config: PyJudgeConfig) -> Option<PyJudge> {
    match PyJudge::new(config) {
        Ok(j) => Some(j),
        Err(JudgeError::Unavailable { detail }) if detail.contains("bubblewrap") => {
            eprintln!("SKIPPED: the Python judge needs a working bubblewrap sandbox ({detail})");
            None
        }
        Err(JudgeError::Unavailable { detail }) if detail.contains("not found") => {
            eprintln!("NOTE: python3 not found; skipping Python judge test ({detail})");
            None
        }
        Err(e) => panic!("python3 is present but the judge failed to start: {e}"),
    }
}

fn judge() -> Option<PyJudge> {
    judge_with(PyJudgeConfig { check_time_limit: Duration::from_secs(20), ..PyJudgeConfig::default() })
}

fn cards(s: &str) -> Vec<Card> {
    s.split_whitespace().map(|c| c.parse().expect("card")).collect()
}

fn params() -> SimulationParams {
    SimulationParams::default()
}

fn load(file: &str) -> ResultsFile {
    let bytes = std::fs::read(data_dir().join("results").join(file)).expect("read results");
    parse_results(&bytes).expect("parse results")
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Mainline after a recorded turn: the mainline cards of `mainline_state` (sidelines are the
/// bracketed items) plus the played card if it was accepted.
fn mainline_after(board: &str, played: Option<&str>, accepted: bool) -> Vec<Card> {
    let mut m: Vec<Card> =
        board.split(' ').filter(|t| !t.starts_with('[') && !t.is_empty() && *t != "(empty)").map(|t| t.parse().expect("board card")).collect();
    if accepted && let Some(card) = played {
        m.push(card.parse().expect("played card"));
    }
    m
}

struct SimVector {
    kind: String,
    file: String,
    round: usize,
    turn: usize,
    rule: SecretRule,
    mainline: Vec<Card>,
    correct: bool,
    reasoning: String,
    code_sha256: String,
}

fn sim_vectors() -> Vec<SimVector> {
    let text = std::fs::read_to_string(data_dir().join("vectors.json")).expect("vectors");
    let v: Value = serde_json::from_str(&text).expect("json");
    let list = v["simulation_vectors"].as_array().expect("array");
    list.iter()
        .map(|s| SimVector {
            kind: s["kind"].as_str().expect("kind").to_owned(),
            file: s["results_file"].as_str().expect("file").to_owned(),
            round: s["round_number"].as_u64().expect("round") as usize,
            turn: s["turn_number"].as_u64().expect("turn") as usize,
            rule: SecretRule::from_name(s["rule_name"].as_str().expect("rule")).expect("rule"),
            mainline: serde_json::from_value(s["mainline_after_turn"].clone()).expect("m"),
            correct: s["expected_correct"].as_bool().expect("correct"),
            reasoning: s["expected_reasoning"].as_str().expect("msg").to_owned(),
            code_sha256: s["guessed_code_sha256"].as_str().expect("sha").to_owned(),
        })
        .collect()
}

#[test]
fn simulation_vectors_reproduce_byte_for_byte() {
    let Some(mut judge) = judge() else { return };
    let info = judge.worker_info().expect("worker info");
    assert!(info.hash_seed_fixed, "PYTHONHASHSEED=0 must take effect");
    assert!(info.python_version.starts_with('3'), "{info:?}");
    let vectors = sim_vectors();
    assert_eq!(vectors.len(), 13);
    let mut files: HashMap<String, ResultsFile> = HashMap::new();
    for v in &vectors {
        let run = files.entry(v.file.clone()).or_insert_with(|| load(&v.file));
        let turn = &run.rounds[v.round - 1].turns[v.turn - 1];
        let attempt = turn.guess_attempt.as_ref().expect("guess attempt");
        let code = attempt.guessed_code.as_deref().expect("code");
        assert_eq!(sha256_hex(code), v.code_sha256, "{} r{} t{}", v.kind, v.round, v.turn);
        // The mainline derivation used by the full replay test agrees with the vector.
        let action = turn.action_result.as_ref().expect("action");
        let derived = mainline_after(turn.mainline_state.as_deref().expect("board"), action.card.as_deref(), action.accepted == Some(true));
        assert_eq!(derived, v.mainline);

        let got = judge.check(&v.rule, Some(code), &v.mainline, &params());
        assert_eq!(got.verdict.equivalent, v.correct, "{}: {}", v.kind, got.verdict.message);
        assert_eq!(got.verdict.message, v.reasoning, "{} r{} t{}", v.kind, v.round, v.turn);
        assert_eq!(got.judge_error, None);
        if v.kind == "exception_path" {
            let first = got.first_exception.as_deref().unwrap_or("");
            assert!(first.starts_with("NameError"), "{first}");
        }

        // The RuleFn adapter through the unchanged checker gives the same verdict.
        let rule = judge.guess_rule(Some(code)).expect("load guess");
        let via_adapter = native_check(&v.rule, &rule, &v.mainline, &params());
        assert_eq!(rule.judge_error(), None);
        assert_eq!(via_adapter.message, v.reasoning, "adapter {}", v.kind);
        assert_eq!(via_adapter.comparisons, got.verdict.comparisons);
        assert_eq!(via_adapter.mismatches, got.verdict.mismatches);
    }
    assert_eq!(judge.restarts(), 0);
}

/// Every recorded guess check with code in the three shipped runs (2,807; 707 of them full
/// 208,000-comparison passes). Takes minutes (the guess code runs in CPython), hence ignored
/// by default: `cargo test --release -- --ignored every_recorded_check --nocapture`.
#[test]
#[ignore = "runs 2,807 recorded checks in CPython (several minutes)"]
fn every_recorded_check_reproduces() {
    let Some(mut judge) = judge() else { return };
    let mut total = 0usize;
    let mut matched = 0usize;
    let mut failures = Vec::new();
    let began = Instant::now();
    for file in crate::envs::eleusis::test_support::RESULTS_FILES {
        let run = load(file);
        for round in &run.rounds {
            let rule = SecretRule::from_name(&round.rule_name).expect("rule");
            for turn in &round.turns {
                let Some(attempt) = &turn.guess_attempt else {
                    continue;
                };
                let Some(code) = attempt.guessed_code.as_deref() else {
                    continue;
                };
                let action = turn.action_result.as_ref().expect("action");
                let mainline = mainline_after(turn.mainline_state.as_deref().expect("board"), action.card.as_deref(), action.accepted == Some(true));
                total += 1;
                let got = judge.check(&rule, Some(code), &mainline, &params());
                let want = attempt.reasoning.as_deref().unwrap_or("");
                if got.verdict.equivalent == attempt.is_correct() && got.verdict.message == want {
                    matched += 1;
                } else if failures.len() < 20 {
                    failures.push(format!(
                        "{file} r{} t{}: want {want:?}, got {:?} ({:?})",
                        round.round_number, turn.turn_number, got.verdict.message, got.judge_error
                    ));
                }
            }
        }
    }
    eprintln!("recorded checks: {matched}/{total} match ({:.1} s, {} restarts)", began.elapsed().as_secs_f64(), judge.restarts());
    assert_eq!(total, 2807);
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(matched, total);
}

#[test]
fn no_code_and_syntax_errors_use_reference_messages() {
    let Some(mut judge) = judge() else { return };
    let start = cards("4♠");
    let rule = SecretRule::EvenRanksOnly;
    let v = judge.check(&rule, None, &start, &params());
    assert_eq!(v.verdict, Verdict::no_code());
    let v = judge.check(&rule, Some(""), &start, &params());
    assert_eq!(v.verdict, Verdict::no_code());
    let v = judge.check(&rule, Some("return (card.rank"), &start, &params());
    assert_eq!(v.verdict.message, "Guessed rule code has syntax errors: '(' was never closed (<string>, line 3)");
    assert!(!v.verdict.equivalent);
    // Whitespace-only code is not "empty": the wrapper has no body.
    let v = judge.check(&rule, Some("  \n"), &start, &params());
    assert!(v.verdict.message.starts_with("Guessed rule code has syntax errors: expected an indented block"), "{}", v.verdict.message);
    assert_eq!(judge.validate("return True"), Ok(()));
    assert!(matches!(judge.validate("return ("), Err(GuessLoadError::Syntax(_))));
    assert_eq!(judge.validate(""), Err(GuessLoadError::NoCode));
}

#[test]
fn python_semantics_of_guess_code() {
    let Some(mut judge) = judge() else { return };
    let start = cards("4♠");
    let even = SecretRule::EvenRanksOnly;
    // Truthiness: `card.rank % 2 == 0` spelled with a non-bool return value.
    let v = judge.check(&even, Some("return 1 - card.rank % 2"), &start, &params());
    assert!(v.verdict.equivalent, "{}", v.verdict.message);
    // Enum members never equal strings (§1.1): rejects everything.
    let spades = SecretRule::SpadesOnly;
    let v = judge.check(&spades, Some("return card.suit == 'spades'"), &start, &params());
    assert_eq!(v.verdict.message, "Mismatch at sim 1, turn 1: card=A♠, actual=True, guessed=False");
    let code = "return card.suit.suit_name == 'spades' and card.suit.name == 'SPADES' \
                and card.suit.value == ('spades', '♠', 'black') and str(card)[-1] == '♠' \
                and card.rank_name == str(card)[:-1] and card.suit.symbol == '♠' \
                and card.color == card.suit.color == 'black' and Card(card.rank, card.suit) == card \
                and len({card, Card(card.rank, card.suit)}) == 1";
    let v = judge.check(&spades, Some(code), &start, &params());
    assert!(v.verdict.equivalent, "{} {:?}", v.verdict.message, v.first_exception);
    // Cards have no ordering: `<` raises, every card takes the exception path.
    let v = judge.check(&even, Some("return card < mainline[-1]"), &start, &params());
    assert_eq!(v.verdict.message, "Rules differ: 52/52 comparisons mismatched. Stopped at simulation 1, turn 1.");
    assert!(v.first_exception.as_deref().unwrap_or("").starts_with("TypeError"));
    // `isinstance` is not whitelisted (NameError), `round`/`divmod`/`dict` are.
    let v = judge.check(&even, Some("return isinstance(card, Card)"), &start, &params());
    assert!(v.verdict.message.starts_with("Rules differ: 52/52"));
    let code = "q, r = divmod(card.rank, 2)\nreturn dict(a=r)['a'] == round(0.4)";
    assert!(judge.check(&even, Some(code), &start, &params()).verdict.equivalent);
    // A body starting with `def` defines a nested function; the wrapper returns None.
    let v = judge.check(&even, Some("def f(card, mainline):\n    return True"), &start, &params());
    assert_eq!(v.verdict.message, "Mismatch at sim 1, turn 1: card=2♥, actual=True, guessed=False");
}

fn hostile_config() -> PyJudgeConfig {
    PyJudgeConfig {
        check_time_limit: Duration::from_secs(2),
        call_cpu_limit: Duration::from_millis(100),
        kill_grace: Duration::from_millis(700),
        ..PyJudgeConfig::default()
    }
}

/// Each hostile guess is judged "not equivalent" with a reason, quickly, and the judge keeps
/// working afterwards (a normal equivalent check succeeds).
#[test]
fn hostile_guess_code_is_contained() {
    let Some(mut judge) = judge_with(hostile_config()) else {
        return;
    };
    let alternating = SecretRule::AlternatingColors;
    let start = cards("7♥");
    let good = "if not mainline:\n    return True\nreturn card.color != mainline[-1].color";
    let cases: &[(&str, &str)] = &[
        ("infinite loop", "while True:\n    pass"),
        ("loop swallowing exceptions", "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"),
        ("uninterruptible C loop", "return sum(range(10 ** 12)) > 0"),
        ("10 GB allocation", "x = 'a' * (10 * 1024 ** 3)\nreturn True"),
        ("import os", "import os\nreturn os.system('true') == 0"),
        ("open", "return len(open('/etc/passwd').read()) > 0"),
        ("__import__", "return __import__('os') is not None"),
        (
            "escape via subclasses",
            "for c in ().__class__.__base__.__subclasses__():\n    if c.__name__ == '_wrap_close':\n        c.__init__.__globals__['system']('touch pwned')\nreturn True",
        ),
        ("mutating mainline", "mainline.clear()\nmainline.append(card)\nreturn card.color == 'red'"),
        ("raise", "raise ValueError('boom')"),
        ("bare raise", "raise"),
        ("non-bool return", "return 'yes'"),
        ("deep recursion", "def f(n):\n    return f(n + 1)\nreturn f(0)"),
        ("loop on some cards", "while card.rank == 7:\n    pass\nif not mainline:\n    return True\nreturn card.color != mainline[-1].color"),
    ];
    for (name, code) in cases {
        let began = Instant::now();
        let v = judge.check(&alternating, Some(code), &start, &params());
        let took = began.elapsed();
        assert!(!v.verdict.equivalent, "{name}: {}", v.verdict.message);
        assert!(!v.verdict.message.is_empty(), "{name}");
        assert!(took < Duration::from_secs(4), "{name} took {took:?}");
        eprintln!(
            "{name:28} {:>6.0} ms  {}  judge_error={:?} first_exception={:?}",
            took.as_secs_f64() * 1e3,
            v.verdict.message,
            v.judge_error,
            v.first_exception
        );
        let after = judge.check(&alternating, Some(good), &start, &params());
        assert!(after.verdict.equivalent, "after {name}: {}", after.verdict.message);
    }
    assert!(!std::path::Path::new("pwned").exists());
    // The C-level loop can only be stopped by killing the worker.
    assert!(judge.restarts() >= 1);
}

#[test]
fn mutation_is_isolated_by_copies() {
    let Some(mut judge) = judge() else { return };
    // Correct rule that also wrecks its argument: with per-call copies it stays equivalent
    // (the reference's live list would corrupt the walk, §8 Q8).
    let code = "if not mainline:\n    return True\nr = card.color != mainline[-1].color\n\
                mainline.clear()\nmainline.extend([card] * 5)\nreturn r";
    let v = judge.check(&SecretRule::AlternatingColors, Some(code), &cards("9♠"), &params());
    assert!(v.verdict.equivalent, "{}", v.verdict.message);
    assert_eq!(v.verdict.comparisons, 208_000);
}

#[test]
fn per_call_timeouts_take_the_exception_path() {
    // Generous wall budget: 4 × 100 ms of CPU must fit even on a loaded machine.
    let config = PyJudgeConfig { check_time_limit: Duration::from_secs(15), ..hostile_config() };
    let Some(mut judge) = judge_with(config) else {
        return;
    };
    let code = "while card.rank == 2:\n    pass\nreturn card.rank % 2 == 0";
    let v = judge.check(&SecretRule::EvenRanksOnly, Some(code), &cards("4♠"), &params());
    assert_eq!(v.verdict.message, "Rules differ: 4/52 comparisons mismatched. Stopped at simulation 1, turn 1.");
    assert_eq!(v.judge_error, Some(JudgeError::CallTimeouts { count: 4 }));
    // Through the adapter and the unchanged checker: same exception-path verdict.
    let rule = judge.guess_rule(Some(code)).expect("load");
    let via = native_check(&SecretRule::EvenRanksOnly, &rule, &cards("4♠"), &params());
    assert_eq!(via.message, v.verdict.message);
}

#[test]
fn missing_interpreter_is_reported() {
    let err = PyJudge::new(PyJudgeConfig { python: PathBuf::from("/nonexistent/python3"), ..PyJudgeConfig::default() }).expect_err("must fail");
    assert!(matches!(err, JudgeError::Unavailable { .. }), "{err}");
}

/// Timing of one full 208,000-comparison check with an equivalent Python guess (rule 16),
/// batched and one-request-per-step; compare with the reference's ≈ 51 ms (§3.5).
#[test]
fn timing_full_equivalent_check() {
    let Some(mut judge) = judge() else { return };
    let code = "if not mainline:\n    return True\nreturn card.color != mainline[-1].color";
    let start = cards("7♥");
    let native = Instant::now();
    let reference = native_check(&SecretRule::AlternatingColors, &SecretRule::AlternatingColors, &start, &params());
    let native = native.elapsed();
    assert!(reference.equivalent);
    for batch in [256usize, 1] {
        judge.config.max_batch_states = batch;
        let t = Instant::now();
        let v = judge.check(&SecretRule::AlternatingColors, Some(code), &start, &params());
        let took = t.elapsed();
        assert!(v.verdict.equivalent, "{}", v.verdict.message);
        assert_eq!(v.verdict.comparisons, 208_000);
        eprintln!(
            "TIMING batch={batch:3}: {:.1} ms, {} round trips (native Rust check: {:.2} ms)",
            took.as_secs_f64() * 1e3,
            v.round_trips,
            native.as_secs_f64() * 1e3
        );
    }
    let rule = judge.guess_rule(Some(code)).expect("load");
    let t = Instant::now();
    let via = native_check(&SecretRule::AlternatingColors, &rule, &start, &params());
    eprintln!("TIMING RuleFn adapter (1 round trip per step): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    assert!(via.equivalent);
}

/// End to end through the engine: replay a recorded round with `Round::apply`, the recorded
/// actions and the recorded `guessed_code` per turn; every check matches the file.
#[test]
fn code_judge_drives_round_apply() {
    use crate::envs::eleusis::game::{Action, GameConfig, Round};
    let Some(mut py) = judge() else { return };
    let run = load("gpt_5_2_high.results.json.gz");
    let record = &run.rounds[48]; // round 49, alternating_colors, won by a formal guess
    let rule = SecretRule::from_name(&record.rule_name).expect("rule");
    let batch = record.batch_round_index.expect("batch");
    let mut round = Round::new(rule, batch, GameConfig::default()).expect("round");
    let mut checks = 0;
    for turn in &record.turns {
        let code = turn.guess_attempt.as_ref().and_then(|g| g.guessed_code.clone());
        let mut judge = CodeJudge { py: &mut py, code_for: |_: &str| code.clone(), params: params(), last: None };
        let resp = &turn.llm_response;
        let action = Action {
            card: turn.action_result.as_ref().and_then(|a| a.card.as_deref()).expect("card").parse().expect("card"),
            reasoning: resp.reasoning_text().unwrap_or("").to_owned(),
            tentative_rule: resp.tentative_text().map(str::to_owned),
            confidence: resp.confidence_level.as_ref().and_then(|c| c.as_python_int()),
            guess: resp.guess_flag(),
        };
        let rec = round.apply(action, &mut judge).expect("apply");
        match (&rec.check, &turn.guess_attempt) {
            (Some(c), Some(g)) => {
                checks += 1;
                assert_eq!(Some(&c.message), g.reasoning.as_ref(), "turn {}", turn.turn_number);
                assert_eq!(c.correct, g.is_correct());
                assert_eq!(judge.last.as_ref().and_then(|v| v.judge_error.clone()), None);
            }
            (None, None) => {}
            other => panic!("turn {}: check mismatch {other:?}", turn.turn_number),
        }
    }
    assert!(round.is_over() && round.finish().success);
    assert!(checks > 0);
}

/// Guess code that escapes the restricted builtins (the `_wrap_close` route), switches the
/// audit hook off and copies the secret rule's verdicts out of the worker's frames and
/// requests. Returns `False` when it finds none.
const SELF_JUDGING_GUESS: &str = include_str!("../../../../../tests/fixtures/self_judging_guess.py");

/// Issue 21: the worker is never sent the secret verdicts, so a guess that reads them from
/// its caller loses on a plain and a sequence rule, while a correct guess still wins and a
/// wrong one still loses.
#[test]
fn a_guess_cannot_judge_itself() {
    // The default check budget, as in a real run: the red team's guess won within it.
    let Some(mut judge) = judge_with(PyJudgeConfig::default()) else {
        return;
    };
    let cases: [(SecretRule, &str, &str, &str); 2] = [
        (SecretRule::OnlyRedCards, "7♥", "return card.color == 'red'", "return card.color == 'black'"),
        (
            SecretRule::AlternatingColors,
            "7♥",
            "if not mainline:\n    return True\nreturn card.color != mainline[-1].color",
            "if not mainline:\n    return True\nreturn card.color == mainline[-1].color",
        ),
    ];
    for (rule, start, correct, wrong) in cases {
        let start = cards(start);
        let cheat = judge.check(&rule, Some(SELF_JUDGING_GUESS), &start, &params());
        eprintln!("{rule:?}: self-judging guess: {} ({:?}, {:?})", cheat.verdict.message, cheat.judge_error, cheat.first_exception);
        assert!(!cheat.verdict.equivalent, "{rule:?}: the self-judging guess won: {}", cheat.verdict.message);
        let good = judge.check(&rule, Some(correct), &start, &params());
        assert!(good.verdict.equivalent, "{rule:?}: {}", good.verdict.message);
        let bad = judge.check(&rule, Some(wrong), &start, &params());
        assert!(!bad.verdict.equivalent, "{rule:?}: {}", bad.verdict.message);
    }
}

/// Guess code that escapes the restricted builtins once per process (kept on `Card`) and
/// then runs `body` with `m` (the worker's `__main__`), `os` and `bi` (builtins) in scope.
fn escaping_guess(body: &str) -> String {
    let escape = "try:\n    m = Card._m\nexcept:\n    for c in ().__class__.__base__.__subclasses__():\n        if c.__name__ == '_wrap_close':\n            sys = c.__init__.__globals__['sys']\n            break\n    m = sys.modules['__main__']\n    m.S.guarding = False\n    Card._m = m\nos = m.os\nbi = m.sys.modules['builtins']\n";
    format!("{escape}{body}")
}

/// Issue 35: each check runs in a fresh process. A guess that escapes the restricted
/// builtins, marks its interpreter, tries to leave a file in every place it might write and
/// kills its parent (the zygote) reaches no later check; a correct guess after it still
/// wins. Where evalgrid can give each check its own uid (root, bubblewrap), the kill is
/// refused, so the zygote is never restarted.
#[test]
fn a_check_cannot_reach_a_later_check() {
    let Some(mut judge) = judge() else { return };
    let dirs = "['/tmp', '/workspace', '/dev/shm', '/code', '/']";
    let poison = escaping_guess(&format!(
        "if not m.__dict__.get('poisoned', False):\n    m.poisoned = True\n    for d in {dirs}:\n        try:\n            with bi.open(d + '/evalgrid-poison', 'w') as f:\n                f.write('x')\n        except:\n            pass\n    try:\n        os.kill(os.getppid(), 9)\n    except:\n        pass\nreturn card.color == 'red'"
    ));
    let probe = escaping_guess(&format!(
        "found = m.__dict__.get('poisoned', False)\nfor d in {dirs}:\n    if os.path.exists(d + '/evalgrid-poison'):\n        found = True\nreturn card.color == ('red' if found else 'black')"
    ));
    let program = process::resolve_program(&judge.config().python).expect("python3 resolved above");
    let report = crate::sandbox::shared(&program).expect("sandbox probed above").report().clone();
    // Root under bubblewrap: each check has its own uid, so the kill of the zygote is refused.
    let own_uids = report.isolation == crate::sandbox::Isolation::Bwrap && report.per_run_uid;
    let rule = SecretRule::OnlyRedCards;
    let start = cards("7♥");
    for round in 0..2 {
        let poisoned = judge.check(&rule, Some(&poison), &start, &params());
        // Equivalent only if the escape really reached the worker's interpreter (and the
        // zygote survived the kill).
        assert!(poisoned.verdict.equivalent || !own_uids, "round {round}: {} ({:?})", poisoned.verdict.message, poisoned.first_exception);
        let probed = judge.check(&rule, Some(&probe), &start, &params());
        assert!(!probed.verdict.equivalent, "round {round}: a later check saw the earlier one's state: {}", probed.verdict.message);
        assert_eq!((probed.judge_error, probed.first_exception), (None, None), "round {round}: {}", probed.verdict.message);
        let good = judge.check(&rule, Some("return card.color == 'red'"), &start, &params());
        assert!(good.verdict.equivalent, "round {round}: {}", good.verdict.message);
    }
    if own_uids {
        assert_eq!(judge.restarts(), 0, "a check killed the zygote although it ran as its own uid");
    }
}
