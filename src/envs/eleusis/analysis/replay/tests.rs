//! Tests of `replay`: the three shipped files replay with zero differences, injected
//! corruption is reported at the right turn and field, and the import pipeline / CSV.

use serde_json::{Value, json};

use super::super::results::{Confidence, from_value};
use super::*;
use crate::envs::eleusis::test_support::{RESULTS_FILES, data_dir};

fn paths() -> Vec<PathBuf> {
    RESULTS_FILES.iter().map(|f| data_dir().join("results").join(f)).collect()
}

fn shipped(i: usize) -> ResultsFile {
    read_results(&paths()[i]).expect("shipped file")
}

#[test]
fn shipped_files_replay_without_differences() {
    for path in paths() {
        let run = read_results(&path).expect("read");
        let diffs = replay_run(&run);
        assert!(diffs.is_empty(), "{}: {:?}", path.display(), &diffs[..diffs.len().min(5)]);
    }
}

/// Replays round `r` (0-based) of Gemini after `edit`, returning the differences.
fn replay_edited(r: usize, edit: impl FnOnce(&mut RoundRecord)) -> Vec<ReplayDiff> {
    let run = shipped(2);
    let mut round = run.rounds[r].clone();
    edit(&mut round);
    replay_round(&round, game_config(&run))
}

fn fields(diffs: &[ReplayDiff]) -> Vec<(Option<u32>, &str)> {
    diffs.iter().map(|d| (d.turn, d.field.as_str())).collect()
}

#[test]
fn corrupted_hand_board_and_verdict_are_reported() {
    let d = replay_edited(0, |r| r.turns[1].hand.swap(0, 1));
    assert_eq!(fields(&d), [(Some(2), "hand")]);
    assert_eq!(d[0].round, 1);

    let d = replay_edited(0, |r| r.turns[2].mainline_state = Some("A♠".to_owned()));
    assert_eq!(fields(&d), [(Some(3), "board")]);
    assert_eq!((d[0].recorded.as_str(), d[0].replayed.is_empty()), ("A♠", false));

    let d = replay_edited(0, |r| {
        let a = r.turns[0].action_result.as_mut().expect("action");
        a.accepted = a.accepted.map(|x| !x);
    });
    assert_eq!(fields(&d), [(Some(1), "accepted")]);
}

#[test]
fn check_kind_and_outcome_differences_are_reported() {
    // Find a shadow check and drop it: the engine still expects one.
    let run = shipped(2);
    let (r, t) = run
        .rounds
        .iter()
        .enumerate()
        .find_map(|(i, r)| r.turns.iter().position(|t| t.guess_attempt.as_ref().is_some_and(|g| g.is_shadow() && !g.is_correct())).map(|t| (i, t)))
        .expect("a wrong shadow check");
    let d = replay_edited(r, |round| round.turns[t].guess_attempt = None);
    assert_eq!(fields(&d), [(Some(t as u32 + 1), "check_kind")]);
    assert_eq!((d[0].recorded.as_str(), d[0].replayed.as_str()), ("none", "shadow"));

    // A float confidence never triggers a shadow check, so the recorded one is unexpected.
    let d = replay_edited(r, |round| {
        round.turns[t].llm_response.confidence_level = Some(Confidence::Float(9.0));
    });
    assert_eq!(fields(&d), [(Some(t as u32 + 1), "check_kind")]);

    // Flipping the winning verdict changes the outcome (and the game continues).
    let d = replay_edited(0, |round| {
        let last = round.turns.last_mut().expect("turns");
        last.guess_attempt.as_mut().expect("winning guess").correct = Some(false);
    });
    let f = fields(&d);
    assert!(f.contains(&(None, "success")) && f.contains(&(None, "game_over_reason")), "{f:?}");
}

#[test]
fn impossible_rounds_stop_with_a_diff_instead_of_panicking() {
    let d = replay_edited(0, |r| {
        r.turns[0].action_result.as_mut().expect("action").card = Some("K♠".to_owned());
        r.turns[0].hand[0] = "x".to_owned();
    });
    assert!(fields(&d).contains(&(Some(1), "card")), "{d:?}");
    let d = replay_edited(0, |r| r.turns[0].action_result = None);
    assert!(fields(&d).contains(&(Some(1), "card")), "{d:?}");
    let d = replay_edited(0, |r| r.batch_round_index = None);
    assert_eq!(fields(&d), [(None, "batch_round_index")]);
    let d = replay_edited(0, |r| {
        r.rule_description = "made up".to_owned();
        r.rule_name = "made_up".to_owned();
    });
    assert_eq!(fields(&d), [(None, "rule")]);
    let d = replay_edited(0, |r| {
        let extra = r.turns[0].clone();
        r.turns.push(extra);
    });
    assert!(fields(&d).iter().any(|(_, f)| *f == "turn"), "{d:?}");
}

#[test]
fn recorded_judge_returns_the_stored_verdict() {
    let attempt =
        GuessAttempt { correct: Some(true), reasoning: Some("Rules appear equivalent: 208000 comparisons, all matched".to_owned()), ..GuessAttempt::default() };
    let req = JudgeRequest { kind: GuessKind::Formal, guess: "g", secret: SecretRule::OnlyAces, mainline: &[], turn: 1 };
    let v = RecordedJudge { attempt: Some(&attempt) }.judge(&req);
    assert!(v.equivalent && v.message.starts_with("Rules appear equivalent"));
    let v = RecordedJudge { attempt: None }.judge(&req);
    assert!(!v.equivalent);
}

#[test]
fn import_reports_metrics_replay_and_csv() {
    let report = import(&paths()).expect("import");
    assert_eq!(report.files.len(), 3);
    assert!(report.files.iter().all(|f| f.replay_diffs.is_empty() && f.rounds == 78));
    assert_eq!((report.k_quartile.k, report.k_ratio.k), (0.20, 0.49));
    let csv = metrics_csv(&report);
    let mut lines = csv.lines();
    assert!(
        lines.next().is_some_and(|h| h.starts_with(
            "model,avg_floored_score,avg_score,avg_no_stakes_score,avg_failed_guesses_counting,success_rate_counting,avg_caution,boldness_index,avg_output_tokens_per_turn,"
        )),
        "{csv}"
    );
    let text = std::fs::read_to_string(data_dir().join("vectors.json")).expect("vectors");
    let published: Value = serde_json::from_str(&text).expect("json");
    let header: Vec<&str> = csv.lines().next().unwrap_or_default().split(',').collect();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let row = &published["published_headline"][cells[0]];
        for (name, cell) in header.iter().zip(&cells).skip(1).take(8) {
            let value: f64 = cell.parse().expect("float cell");
            let expected = row[*name].as_f64().expect("published");
            assert!((value - expected).abs() <= 1e-9, "{} {name}: {value} vs {expected}", cells[0]);
        }
        assert_eq!(cells.last(), Some(&"0"));
    }
}

#[test]
fn import_errors_and_csv_quoting() {
    assert!(matches!(import(&[]), Err(ImportError::NoInput)));
    let missing = import(&[PathBuf::from("/nonexistent.results.json")]).expect_err("missing");
    // Each cause once, as the command line prints the chain.
    let mut chain = missing.to_string();
    let mut cause = std::error::Error::source(&missing);
    while let Some(e) = cause {
        chain = format!("{chain}: {e}");
        cause = e.source();
    }
    assert_eq!(chain, "/nonexistent.results.json: cannot read /nonexistent.results.json: No such file or directory (os error 2)");
    let run = from_value(&json!({"config": {"player": "A, \"B\""}, "rounds": []})).expect("run");
    let pool = super::super::metrics::analyze(&[run], &AnalysisOptions::default());
    let report = ImportReport {
        files: vec![FileReport {
            path: "x".to_owned(),
            model: "A, \"B\"".to_owned(),
            rounds: 0,
            turns: 0,
            metrics: pool.runs[0].clone(),
            replay_diffs: Vec::new(),
        }],
        k_quartile: pool.k_quartile,
        k_ratio: pool.k_ratio,
        quartile_edges: pool.quartile_edges,
        quartile_method: pool.quartile_method,
        rules: pool.rules,
        by_rule: pool.by_rule,
    };
    let csv = metrics_csv(&report);
    assert!(csv.lines().nth(1).is_some_and(|l| l.starts_with("\"A, \"\"B\"\"\",,,")), "{csv}");
}
