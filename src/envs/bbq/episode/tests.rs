//! Episode tests: a scripted trajectory with an exact expected record, every invalid-query
//! error (the episode continues), forfeits after 3 failed attempts, budget exhaustion,
//! scratchpad truncation, Python accounting, and a no-panic property test.

use proptest::prelude::*;

use super::super::function::Output;
use super::super::parse::InputError;
use super::*;

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn ep(task: TaskId) -> Episode {
    Episode::new(task, 0, TaskParams::default()).unwrap()
}

/// Seed-0 test inputs of `is_greater_than_58` (Appendix A order).
const GT58: [i64; 12] = [59, 25, 34, 63, 58, 51, 11, 13, 1000, 57, 60, -100];

fn preds(rule: impl Fn(i64) -> bool) -> Vec<String> {
    GT58.iter().map(|&x| u8::from(rule(x)).to_string()).collect()
}

#[test]
fn scripted_trajectory_yields_the_exact_record() {
    let mut e = ep(TaskId::IsGreaterThan58);
    let inputs: Vec<Input> = GT58.iter().map(|&x| Input::Int(x)).collect();
    assert_eq!(e.test_inputs(), inputs.iter().collect::<Vec<_>>());
    assert_eq!(e.samples_message(), "Sample pairs:\n38 → 0\n40 → 0\n104 → 1\n76 → 1");

    // Round 0: samples only, everything predicted 0.
    assert_eq!((e.round(), e.phase()), (0, Phase::Evaluation));
    let r0 = e.submit_predictions(vec!["0".into(); 12]).unwrap();
    assert!(!r0.all_correct);

    // Round 1: one query, a scratchpad, a wrong-length submission, then "x > 50".
    assert_eq!((e.round(), e.phase()), (1, Phase::Query));
    let resp = e.query(&strs(&["100"])).unwrap();
    assert_eq!(resp.remaining_budget, 29);
    assert_eq!(resp.results[0].output, Output::Int(1));
    e.set_scratchpad("  maybe   x > 50?\n").unwrap();
    let err = e.submit_predictions(vec!["1".into(); 11]).unwrap_err();
    assert_eq!(err, EpisodeError::WrongPredictionCount { expected: 12, got: 11 });
    assert_eq!(e.phase(), Phase::Evaluation);
    assert!(!e.submit_predictions(preds(|x| x > 50)).unwrap().all_correct);

    // Round 2: two invalid queries (the episode continues), one valid, a long scratchpad,
    // then the right rule.
    let err = e.query(&strs(&["1000001"])).unwrap_err();
    assert!(matches!(err, EpisodeError::InvalidInput { index: 1, source: InputError::OutOfDomain { .. } }));
    let err = e.query(&strs(&["1", "2"])).unwrap_err();
    assert_eq!(err.to_string(), "batch of 2 inputs exceeds the limit of 1 per query");
    assert_eq!((e.phase(), e.queries_used()), (Phase::Query, 1));
    e.query(&strs(&["58"])).unwrap();
    let long: Vec<String> = (0..305).map(|i| format!("w{i}")).collect();
    let kept = e.set_scratchpad(&long.join(" \n ")).unwrap().to_string();
    assert_eq!(kept, long[..300].join(" "));
    let done = e.submit_predictions(preds(|x| x > 58)).unwrap();
    assert!(done.all_correct);
    assert!(e.is_finished());
    assert_eq!(e.history_lines(), "100 → 1\n58 → 0");
    assert!(e.query(&strs(&["1"])).is_err());

    let correct0 = preds(|x| x > 58).iter().map(|p| p == "0").collect();
    let correct1 = GT58.iter().map(|&x| (x > 50) == (x > 58)).collect();
    let want = EpisodeRecord {
        task: TaskId::IsGreaterThan58,
        seed: 0,
        params: TaskParams::default(),
        total_queries: 30,
        query_batch_size: 1,
        max_rounds: 30,
        rounds: vec![
            RoundRecord { round: 0, predictions: Some(vec!["0".into(); 12]), correct: correct0, ..RoundRecord::default() },
            RoundRecord {
                round: 1,
                queries: vec![QueryResult { input: Input::Int(100), output: Output::Int(1) }],
                scratchpad: Some("maybe x > 50?".into()),
                predictions: Some(preds(|x| x > 50)),
                correct: correct1,
                ..RoundRecord::default()
            },
            RoundRecord {
                round: 2,
                queries: vec![QueryResult { input: Input::Int(58), output: Output::Int(0) }],
                scratchpad: Some(long[..300].join(" ")),
                predictions: Some(preds(|x| x > 58)),
                correct: vec![true; 12],
                solved: true,
                ..RoundRecord::default()
            },
        ],
        solved: true,
        solved_round: Some(2),
        solved_at_queries: Some(2),
        queries_used: 2,
        failures: vec![
            ToolFailure {
                round: 1,
                phase: Phase::Evaluation,
                tool: Tool::SubmitPredictions,
                cause: "expected 12 predictions (one per test input), got 11".into(),
            },
            ToolFailure {
                round: 2,
                phase: Phase::Query,
                tool: Tool::Query,
                cause: "input 1 rejected, batch not run: invalid input \"1000001\": integers \
                        must be between -1000000 and 1000000"
                    .into(),
            },
            ToolFailure { round: 2, phase: Phase::Query, tool: Tool::Query, cause: "batch of 2 inputs exceeds the limit of 1 per query".into() },
        ],
        forfeits: vec![],
    };
    let record = e.into_record();
    assert_eq!(record, want);
    let json = serde_json::to_string(&record).unwrap();
    let back: EpisodeRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, record);
}

#[test]
fn three_failed_queries_forfeit_the_phase_without_spending_budget() {
    let mut e = ep(TaskId::ParitySum);
    e.submit_predictions(vec!["0".into(); 12]).unwrap();
    assert!(matches!(e.query(&[]), Err(EpisodeError::EmptyBatch)));
    assert!(e.query(&strs(&["ABC"])).is_err());
    assert_eq!(e.phase(), Phase::Query);
    assert!(e.query(&strs(&["a", "b"])).is_err());
    assert_eq!(e.phase(), Phase::Scratchpad);
    assert_eq!(e.remaining_budget(), 20);
    let rec = e.record();
    assert!(rec.rounds[1].query_forfeited);
    assert_eq!(rec.failures.len(), 3);
    assert_eq!(rec.forfeits, vec![Forfeit { round: 1, phase: Phase::Query, tool: Tool::Query }]);
    // An empty scratchpad keeps the previous (empty) one; next phase is evaluation.
    assert_eq!(e.set_scratchpad("   ").unwrap(), "");
    for _ in 0..3 {
        assert!(e.submit_predictions(vec![]).is_err());
    }
    // Forfeited evaluation: not solved, next round's query phase.
    assert_eq!((e.round(), e.phase()), (2, Phase::Query));
    assert!(e.record().rounds[1].evaluation_forfeited);
    assert_eq!(e.record().forfeits.len(), 2);
}

#[test]
fn tuple_tasks_hint_at_parentheses_and_wrong_phase_is_not_a_failure() {
    let mut e = ep(TaskId::Func3a10b5c);
    let err = e.query(&strs(&["1"])).unwrap_err();
    assert!(matches!(err, EpisodeError::WrongPhase { tool: Tool::Query, phase: Phase::Evaluation }));
    assert!(e.record().failures.is_empty());
    e.submit_predictions(vec!["0".into(); 12]).unwrap();
    let err = e.query(&strs(&["1", "2", "3"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch of 3 inputs exceeds the limit of 1 per query; tuples must be written in \
         parentheses, e.g. '(1, 2)'"
    );
    let err = e.query(&strs(&["(1, 2)"])).unwrap_err();
    assert!(matches!(err, EpisodeError::InvalidInput { source: InputError::WrongArity { expected: 3, got: 2, .. }, .. }));
    let ok = e.query_json(&[serde_json::json!([1, 2, 3])]).unwrap();
    assert_eq!(ok.results[0].output, Output::Int(3 - 20 + 15));
}

#[test]
fn over_budget_is_rejected_and_a_spent_budget_ends_the_run() {
    let mut e = ep(TaskId::NumLessThanDiag);
    e.submit_predictions(vec!["0".into(); 13]).unwrap();
    // Budget = rounds × batch, so over-budget needs a partly spent budget: simulate it.
    e.record.queries_used = 195;
    let ten: Vec<String> = (0..10).map(|_| "a".to_string()).collect();
    assert_eq!(e.query(&ten).unwrap_err(), EpisodeError::OverBudget { requested: 10, remaining: 5 });
    assert_eq!(e.query(&ten[..5]).unwrap().remaining_budget, 0);
    e.set_scratchpad("done").unwrap();
    e.submit_predictions(vec!["0".into(); 13]).unwrap();
    assert!(e.is_finished());
    assert!(!e.record().solved);
}

#[test]
fn rounds_run_out_after_round_r() {
    let mut e = ep(TaskId::ContainsAb);
    let n = e.test_inputs().len();
    for _ in 0..=20 {
        if e.phase() == Phase::Query {
            e.query(&strs(&["zz"])).unwrap();
            e.set_scratchpad("").unwrap();
        }
        e.submit_predictions(vec!["2".into(); n]).unwrap();
    }
    assert!(e.is_finished());
    let r = e.record();
    assert_eq!((r.rounds.len(), r.queries_used, r.solved), (21, 20, false));
}

#[test]
fn python_is_once_per_phase_and_forfeited_after_three_failures() {
    let mut e = ep(TaskId::IsPrime);
    assert!(e.python_available());
    e.record_python_success().unwrap();
    assert_eq!(e.record_python_success(), Err(EpisodeError::PythonAlreadyUsed));
    e.submit_predictions(vec!["0".into(); 13]).unwrap();
    assert!(e.python_available());
    for _ in 0..3 {
        e.record_failure(Tool::ExecutePython, "exit code 1").unwrap();
    }
    assert_eq!(e.record_python_success(), Err(EpisodeError::PythonForfeited));
    assert_eq!(e.record().forfeits.len(), 1);
    // Adapter-detected query failures count like rejected queries.
    for _ in 0..3 {
        e.record_failure(Tool::Query, "no tool call").unwrap();
    }
    assert_eq!(e.phase(), Phase::Scratchpad);
    e.record_failure(Tool::Scratchpad, "empty reply").unwrap();
    assert_eq!(e.phase(), Phase::Evaluation);
}

#[test]
fn round_zero_can_be_disabled() {
    let p = TaskParams { round_zero: false, ..TaskParams::default() };
    let e = Episode::new(TaskId::DigitSum, 0, p).unwrap();
    assert_eq!((e.round(), e.phase()), (1, Phase::Query));
}

#[test]
fn truncation_splits_on_unicode_whitespace() {
    assert_eq!(truncate_words("a\u{3000}b\tc  d", 3), "a b c");
    assert_eq!(truncate_words("", 300), "");
}

#[derive(Debug, Clone)]
enum Op {
    Query(Vec<String>),
    Scratch(String),
    Predict(Vec<String>),
    Fail(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let text = "[a-z0-9(), \\-\\[\\]']{0,12}";
    prop_oneof![
        prop::collection::vec(text, 0..12).prop_map(Op::Query),
        text.prop_map(Op::Scratch),
        prop::collection::vec(text, 0..16).prop_map(Op::Predict),
        (0u8..4).prop_map(Op::Fail),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary operation sequences never panic and keep the budget invariant.
    #[test]
    fn arbitrary_operations_never_panic(task_ix in 0usize..20, ops in prop::collection::vec(op(), 0..60)) {
        let task = TaskId::ALL[task_ix];
        let mut e = ep(task);
        for o in ops {
            let _ = match o {
                Op::Query(q) => e.query(&q).map(|_| ()),
                Op::Scratch(s) => e.set_scratchpad(&s).map(|_| ()),
                Op::Predict(p) => e.submit_predictions(p).map(|_| ()),
                Op::Fail(t) => {
                    let tool = [Tool::Query, Tool::SubmitPredictions, Tool::ExecutePython, Tool::Scratchpad][usize::from(t)];
                    e.record_failure(tool, "x")
                }
            };
            prop_assert!(e.queries_used() <= task.task().total_queries);
            prop_assert!(e.round() <= task.task().rounds());
        }
    }
}
