//! Generator tests: the spec's PRNG/FNV test vectors, anchor outputs, the Appendix A fixture
//! (read from the spec at test time), §4.5 validation for seed 0, and a property test that
//! test sets separate every near-miss alternative for many seeds.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::alternatives::unseparated;
use super::super::function::{Input, evaluate};
use super::super::parse::validate;
use super::super::task::{OutputKind, TaskId, TaskParams};
use super::*;

#[test]
fn fnv_and_splitmix_match_the_spec_vectors() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"bbq-tests|is_prime|0"), 3_879_826_741_103_335_628);
    let mut r = tests_rng(TaskId::IsPrime, 0);
    assert_eq!(r.next_u64(), 11_319_198_211_448_324_561);
    assert_eq!(r.next_u64(), 11_977_383_438_242_116_170);
    assert_eq!(r.next_u64(), 8_865_552_491_342_075_792);
    assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
}

#[test]
fn randint_stays_in_range_and_below_zero_is_safe() {
    let mut r = SplitMix64::new(7);
    for _ in 0..1000 {
        let v = r.randint(-3, 3);
        assert!((-3..=3).contains(&v));
    }
    assert_eq!(r.below(0), 0);
    assert_eq!(r.randint(5, 4), 5);
}

/// The §4.5 anchor table's "→ true output" column, transcribed from the spec.
#[test]
fn anchor_outputs_match_the_spec_table() {
    let want: &[(TaskId, &[Value])] = &[
        (TaskId::IsPrime, &[json!(0), json!(0), json!(1), json!(0), json!(0), json!(1), json!(0)]),
        (TaskId::IsPythagoreanTriple, &[json!(1), json!(1), json!(0), json!(1), json!(1), json!(0), json!(0)]),
        (TaskId::IsGreaterThan58, &[json!(0), json!(0), json!(1), json!(1), json!(0), json!(1)]),
        (TaskId::DigitSum, &[json!(0), json!(9), json!(1), json!(18), json!(10), json!(21), json!(9)]),
        (TaskId::Func6x3, &[json!(-246), json!(3), json!(2), json!(19), json!(5123), json!(5_910_203)]),
        (TaskId::Func3a10b5c, &[json!(0), json!(3), json!(-10), json!(5), json!(106), json!(-300)]),
        (TaskId::FuncRecursion, &[json!(1), json!(1), json!(1), json!(3), json!(71), json!(5), json!(71), json!(81)]),
        (TaskId::FuncAbPlusCSq, &[json!(0), json!(6), json!(25), json!(10), json!(98), json!(-1)]),
        (TaskId::FuncGcdPlusLcm, &[json!(2), json!(14), json!(92), json!(42), json!(10), json!(325)]),
        (TaskId::TriangleType, &[json!(2), json!(2), json!(1), json!(0), json!(1), json!(0)]),
        (TaskId::ContainsAb, &[json!(1), json!(0), json!(1), json!(0), json!(1), json!(0), json!(1), json!(0)]),
        (TaskId::ParitySum, &[json!(1), json!(0), json!(1), json!(0), json!(0), json!(1)]),
        (TaskId::MaxZFunction, &[json!(0), json!(1), json!(2), json!(2), json!(1), json!(0), json!(3), json!(3)]),
        (TaskId::AddKToKth, &[json!("b"), json!("bdf"), json!("fdb"), json!("bc"), json!("bz"), json!("jfopt")]),
        (TaskId::CaesarCipher, &[json!("k"), json!("z"), json!("a"), json!("j"), json!("rovvy")]),
        (TaskId::NumLessThanDiag, &[json!(1), json!(0), json!(2), json!(1), json!(4), json!(0), json!(20)]),
        (TaskId::LongestPalSubseq, &[json!(1), json!(1), json!(2), json!(3), json!(3), json!(3), json!(5)]),
        (TaskId::IsBigGap, &[json!(1), json!(1), json!(0), json!(1), json!(1), json!(0), json!(0), json!(1)]),
        (TaskId::NumLocalMaxima, &[json!(1), json!(1), json!(1), json!(1), json!(2), json!(0), json!(1), json!(2)]),
        (TaskId::LessThanTarget, &[json!(0), json!(1), json!(1), json!(0), json!(0), json!(1), json!(0), json!(0), json!(1)]),
    ];
    assert_eq!(want.len(), 20);
    for (task, outs) in want {
        let got: Vec<Value> = anchors(*task).iter().map(|x| serde_json::to_value(evaluate(*task, x)).unwrap()).collect();
        assert_eq!(&got, outs, "{task}");
        for x in anchors(*task) {
            assert_eq!(validate(*task, &x), Ok(()), "{task} anchor {x}");
        }
    }
}

fn spec_text() -> String {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for rel in ["../shared/specs/bbq.md", "../../shared/specs/bbq.md"] {
        if let Ok(t) = std::fs::read_to_string(dir.join(rel)) {
            return t;
        }
    }
    panic!("shared/specs/bbq.md not found next to {}", dir.display());
}

/// The JSON block of Appendix A.
fn fixture() -> Value {
    let text = spec_text();
    let start = text.find("## Appendix A").expect("Appendix A heading");
    let rest = &text[start..];
    let open = rest.find("```json").expect("json block") + "```json".len();
    let close = rest[open..].find("```").expect("end of json block");
    serde_json::from_str(&rest[open..open + close]).expect("fixture is valid JSON")
}

fn pairs(cases: &[Case]) -> Value {
    Value::Array(cases.iter().map(|c| json!([c.input, c.output])).collect())
}

#[test]
fn appendix_a_fixture_reproduces_exactly_for_seed_0() {
    let fx = fixture();
    assert_eq!(fx.as_object().map(|o| o.len()), Some(20));
    let p = TaskParams::default();
    for task in TaskId::ALL {
        let tests = test_set(task, 0, &p).unwrap();
        let samp = samples(task, 0, &p, &tests).unwrap();
        assert_eq!(pairs(&tests), fx[task.as_str()]["tests"], "{task} tests");
        assert_eq!(pairs(&samp), fx[task.as_str()]["samples"], "{task} samples");
    }
}

/// All §4.5 step-5 checks plus structural invariants of one generated test set.
fn check_test_set(task: TaskId, seed: u64) -> Result<(), String> {
    let p = TaskParams::default();
    let tests = test_set(task, seed, &p).map_err(|e| e.to_string())?;
    let missed = unseparated(task, &tests);
    if !missed.is_empty() {
        return Err(format!("{task} seed {seed}: not separated from {missed:?}"));
    }
    let mut inputs: Vec<&Input> = tests.iter().map(|c| &c.input).collect();
    for x in &inputs {
        validate(task, x).map_err(|e| format!("{task} seed {seed}: {e}"))?;
    }
    inputs.sort();
    inputs.dedup();
    if inputs.len() != tests.len() {
        return Err(format!("{task} seed {seed}: duplicate test inputs"));
    }
    match task.task().output {
        OutputKind::Class { classes } => {
            for c in 0..i128::from(classes) {
                let n = tests.iter().filter(|t| t.output == Output::Int(c)).count();
                if n < p.min_per_class {
                    return Err(format!("{task} seed {seed}: class {c} has {n} cases"));
                }
            }
        }
        OutputKind::Int | OutputKind::Str if inputs.len() < 5 => {
            return Err(format!("{task} seed {seed}: fewer than 5 distinct inputs"));
        }
        _ => {}
    }
    let samp = samples(task, seed, &p, &tests).map_err(|e| e.to_string())?;
    if samp.iter().any(|s| tests.iter().any(|t| t.input == s.input)) {
        return Err(format!("{task} seed {seed}: a sample is also a test input"));
    }
    Ok(())
}

#[test]
fn seed_0_test_sets_pass_validation_and_have_the_stated_sizes() {
    for task in TaskId::ALL {
        check_test_set(task, 0).unwrap();
        let n = test_set(task, 0, &TaskParams::default()).unwrap().len();
        assert!((11..=15).contains(&n), "{task}: {n} test inputs");
    }
}

#[test]
fn samples_follow_section_4_6() {
    let p = TaskParams::default();
    for task in TaskId::ALL {
        let tests = test_set(task, 3, &p).unwrap();
        let samp = samples(task, 3, &p, &tests).unwrap();
        let expected = match task {
            TaskId::ContainsAb => 2,
            TaskId::TriangleType => 6,
            TaskId::IsPrime | TaskId::IsPythagoreanTriple | TaskId::IsGreaterThan58 => 4,
            _ => 0,
        };
        assert_eq!(samp.len(), expected, "{task}");
        // Class 0 samples first, then class 1 (then class 2).
        let classes: Vec<&Output> = samp.iter().map(|c| &c.output).collect();
        let mut sorted = classes.clone();
        sorted.sort();
        assert_eq!(classes, sorted, "{task}");
    }
}

#[test]
fn generation_is_deterministic_and_seed_dependent() {
    let p = TaskParams::default();
    let a = test_set(TaskId::ParitySum, 11, &p).unwrap();
    assert_eq!(a, test_set(TaskId::ParitySum, 11, &p).unwrap());
    assert_ne!(a, test_set(TaskId::ParitySum, 12, &p).unwrap());
}

#[test]
fn impossible_balancing_gives_up_with_an_error() {
    let p = TaskParams { min_per_class: 1000, max_balance_draws: 50, ..TaskParams::default() };
    assert!(matches!(test_set(TaskId::IsPrime, 0, &p), Err(GenError::Exhausted { .. })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// For many seeds, every generated test set separates the true function from each of its
    /// §4.5 near-miss alternatives (and satisfies the other step-5 invariants).
    #[test]
    fn every_test_set_separates_all_alternatives(seed in any::<u64>()) {
        for task in TaskId::ALL {
            if let Err(e) = check_test_set(task, seed) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}
