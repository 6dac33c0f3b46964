//! Tests of `results`: the three shipped files parse (gzip and plain), tolerant fields,
//! schema errors name their JSON path, and malformed input never panics.

use std::io::Read;

use serde_json::json;

use super::*;
use crate::envs::eleusis::game::pyrandom::PyRandom;
use crate::envs::eleusis::test_support::{RESULTS_FILES, data_dir};

fn shipped(file: &str) -> ResultsFile {
    read_results(&data_dir().join("results").join(file)).expect("shipped results file")
}

fn gunzip(file: &str) -> Vec<u8> {
    let raw = std::fs::read(data_dir().join("results").join(file)).expect("read");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw.as_slice()).read_to_end(&mut out).expect("gunzip");
    out
}

/// A minimal valid round (one turn) for error-path tests.
fn minimal() -> Value {
    json!({
        "config": {"player": "Test Model", "max_turns": 30},
        "rounds": [{
            "round_number": 1, "turn_count": 1, "rule_description": "d", "success": false,
            "score": 0, "batch_round_index": 0,
            "turns": [{
                "turn_number": 1, "hand": ["A♥"], "mainline_state": "2♥",
                "llm_response": {"confidence_level": 7, "guess_rule": false},
                "action_result": {"card": "A♥", "accepted": true},
                "guess_attempt": {"guess": "g", "correct": false, "shadow": true, "node_count": 3},
                "tokens": {"output_tokens": 10}
            }]
        }]
    })
}

fn schema_path(v: &Value) -> String {
    match from_value(v) {
        Err(ResultsError::Schema { path, .. }) => path,
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn shipped_files_parse() {
    let expected = [("Gpt 5.2 High", 75), ("Deepseek R1", 65), ("Gemini 3 Flash Preview Low", 60)];
    for (file, (model, successes)) in RESULTS_FILES.iter().zip(expected) {
        let run = shipped(file);
        assert_eq!(run.model_name(), model);
        assert_eq!(run.rounds.len(), 78);
        assert_eq!(run.rules_library().len(), 26);
        assert_eq!(run.config.max_turns(), 30);
        assert_eq!(run.config.wrong_guess_penalty(), 2);
        assert_eq!(run.config.hand_size(), 12);
        assert_eq!(run.rounds.iter().filter(|r| r.success).count(), successes);
        for (i, r) in run.rounds.iter().enumerate() {
            assert_eq!(r.round_number as usize, i + 1);
            for (j, t) in r.turns.iter().enumerate() {
                assert_eq!(t.turn_number as usize, j + 1);
                assert_eq!(t.hand.len(), 12);
            }
        }
        // Unnamed config keys are kept verbatim.
        assert!(run.config.other.contains_key("rule_compiler_model"));
    }
}

#[test]
fn plain_json_equals_gzip() {
    let file = RESULTS_FILES[1];
    let plain = parse_results(&gunzip(file)).expect("plain");
    assert_eq!(plain, shipped(file));
}

#[test]
fn deepseek_float_confidence_is_kept() {
    // §4.2: Deepseek R1 round 9 turn 11 has confidence 9.5 (a formal guess anyway).
    let run = shipped(RESULTS_FILES[1]);
    let turn = &run.rounds[8].turns[10];
    let c = turn.llm_response.confidence_level.as_ref().expect("confidence");
    assert_eq!(c, &Confidence::Float(9.5));
    assert_eq!(c.as_python_int(), None);
    assert_eq!(c.truncated(), Some(9));
    assert!(turn.llm_response.guess_flag());
}

#[test]
fn confidence_variants() {
    let parse = |v: Value| -> Confidence { serde_json::from_value(v).expect("confidence") };
    assert_eq!(parse(json!(7)), Confidence::Int(7));
    assert_eq!(parse(json!(7.0)), Confidence::Float(7.0));
    assert_eq!(parse(json!(true)), Confidence::Bool(true));
    assert_eq!(parse(json!("8")), Confidence::Other(json!("8")));
    assert_eq!(Confidence::Bool(true).as_python_int(), Some(1));
    assert_eq!(Confidence::Bool(true).numeric(), Some(1.0));
    assert_eq!(Confidence::Float(7.9).truncated(), Some(7));
    assert_eq!(Confidence::Float(-0.5).truncated(), Some(0));
    assert_eq!(Confidence::Float(f64::NAN).numeric(), None);
    assert_eq!(Confidence::Other(json!("8")).numeric(), None);
    assert_eq!(Confidence::Int(85).truncated(), Some(85));
}

#[test]
fn python_truthiness() {
    for (v, t) in [
        (json!(null), false),
        (json!(false), false),
        (json!(true), true),
        (json!(0), false),
        (json!(0.0), false),
        (json!(2), true),
        (json!(""), false),
        (json!("false"), true),
        (json!([]), false),
        (json!([0]), true),
        (json!({}), false),
    ] {
        assert_eq!(truthy(&v), t, "{v}");
    }
}

#[test]
fn tolerant_of_missing_null_and_extra_fields() {
    let mut v = minimal();
    v["rounds"][0]["turns"][0]["hand"] = Value::Null;
    v["rounds"][0]["turns"][0]["llm_response"] = Value::Null;
    v["rounds"][0]["turns"][0]["unexpected"] = json!({"x": [1, 2]});
    v["rounds"][0]["turns"][0]["guess_attempt"]["node_count"] = Value::Null;
    v["rounds"][0]["llm_usage"] = json!({"player": {"total_tokens": 99}});
    v["statistics"] = json!({"total_turns": "stale"});
    v["checkpoint"] = json!({"rules_library": null, "rule_factory_state": {"current_index": 9}});
    let run = from_value(&v).expect("tolerant parse");
    let r = &run.rounds[0];
    assert!(r.turns[0].hand.is_empty());
    assert_eq!(r.turns[0].llm_response, LlmResponse::default());
    assert_eq!(r.llm_usage.as_ref().and_then(|u| u.player.as_ref()).map(Usage::output), Some(99));
    assert!(run.rules_library().is_empty());
    // No config at all: defaults and a fallback name.
    let bare = from_value(&json!({"rounds": []})).expect("bare");
    assert_eq!(bare.model_name(), "unknown");
    assert_eq!(bare.config.max_turns(), 30);
    let nested = from_value(&json!({"config": {"game": {"max_turns": 20}, "max_turns": 30}})).expect("nested game config");
    assert_eq!(nested.config.max_turns(), 20);
}

#[test]
fn schema_errors_name_the_json_path() {
    let mut v = minimal();
    v["rounds"][0]["score"] = json!("high");
    assert_eq!(schema_path(&v), "rounds[0].score");

    let mut v = minimal();
    if let Some(round) = v["rounds"][0].as_object_mut() {
        round.remove("score");
    }
    assert_eq!(schema_path(&v), "rounds[0].score");

    let mut v = minimal();
    v["rounds"][0]["turns"][0]["tokens"]["output_tokens"] = json!("many");
    assert_eq!(schema_path(&v), "rounds[0].turns[0].tokens.output_tokens");

    let mut v = minimal();
    v["rounds"][0]["turns"][0]["guess_attempt"]["correct"] = json!("yes");
    assert_eq!(schema_path(&v), "rounds[0].turns[0].guess_attempt.correct");

    let mut v = minimal();
    v["rounds"][0]["turns"][0]["turn_number"] = json!(-1);
    assert_eq!(schema_path(&v), "rounds[0].turns[0].turn_number");

    let mut v = minimal();
    v["rounds"][0]["llm_usage"] = json!({"player": {"duration_seconds": "slow"}});
    assert_eq!(schema_path(&v), "rounds[0].llm_usage.player.duration_seconds");

    let mut v = minimal();
    v["config"]["max_turns"] = json!(30.5);
    assert_eq!(schema_path(&v), "config.max_turns");

    assert_eq!(schema_path(&json!([1, 2])), "$");
    assert_eq!(schema_path(&json!({"rounds": {"a": 1}})), "rounds");
    let err = from_value(&json!({"rounds": [{"round_number": 1}]})).expect_err("missing");
    assert!(err.to_string().starts_with("at rounds[0]."), "{err}");
}

#[test]
fn bad_bytes_are_errors() {
    assert!(matches!(parse_results(b""), Err(ResultsError::Json { .. })));
    assert!(matches!(parse_results(b"{\n  \"rounds\": [1,"), Err(ResultsError::Json { line: 2, .. })));
    let gz = std::fs::read(data_dir().join("results").join(RESULTS_FILES[0])).expect("read");
    assert!(matches!(parse_results(&gz[..gz.len() / 2]), Err(ResultsError::Gzip(_))));
    assert!(matches!(read_results(Path::new("/nonexistent/results.json")), Err(ResultsError::Io { .. })));
}

#[test]
fn random_corruption_never_panics() {
    let doc = serde_json::to_vec(&minimal()).expect("serialize");
    let mut rng = PyRandom::new(7);
    let alphabet = b"{}[]\",:0123456789.-truefalsnl \xe2\x99\xa5x";
    let mut parsed = 0;
    for _ in 0..3000 {
        let mut bytes = doc.clone();
        for _ in 0..=rng.randbelow_usize(3) {
            let at = rng.randbelow_usize(bytes.len());
            match rng.randbelow(3) {
                0 => bytes[at] = alphabet[rng.randbelow_usize(alphabet.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, alphabet[rng.randbelow_usize(alphabet.len())]),
            }
        }
        if parse_results(&bytes).is_ok() {
            parsed += 1;
        }
    }
    // Some mutations stay valid (whitespace, digits); most are reported as errors.
    assert!(parsed > 0 && parsed < 3000, "{parsed}");
}
