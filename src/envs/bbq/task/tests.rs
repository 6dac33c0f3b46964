//! Task table tests: published budgets, batch sizes and rounds; id round trips; parameter
//! defaults and their (de)serialisation for cache keys.

use super::*;

#[test]
fn budgets_batches_and_rounds_match_section_1() {
    let string_budgets = [
        ("contains_ab", 20, 1),
        ("parity_sum", 20, 1),
        ("max_z_function", 100, 5),
        ("add_k_to_kth", 20, 1),
        ("caesar_cipher", 20, 1),
        ("num_less_than_diag", 200, 10),
        ("length_of_longest_palindromic_subsequence", 100, 5),
        ("is_big_gap", 100, 5),
        ("num_local_maxima", 100, 5),
        ("less_than_target", 100, 5),
    ];
    for id in TaskId::ALL {
        let t = id.task();
        match t.family {
            Family::Numeric => {
                assert_eq!((t.total_queries, t.query_batch_size, t.rounds()), (30, 1, 30), "{id}");
            }
            Family::String => {
                let (_, q, b) = string_budgets.iter().find(|(n, _, _)| *n == id.as_str()).copied().unwrap();
                assert_eq!((t.total_queries, t.query_batch_size, t.rounds()), (q, b, 20), "{id}");
            }
        }
    }
    let numeric = TaskId::ALL.iter().filter(|t| t.task().family == Family::Numeric).count();
    assert_eq!(numeric, 10);
    assert_eq!(TaskId::TriangleType.task().arity(), 6);
    assert_eq!(TaskId::FuncGcdPlusLcm.task().arity(), 2);
}

#[test]
fn ids_round_trip_through_text_and_serde() {
    for id in TaskId::ALL {
        assert_eq!(id.as_str().parse::<TaskId>(), Ok(id));
        let j = serde_json::to_string(&id).unwrap();
        assert_eq!(j, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<TaskId>(&j).unwrap(), id);
    }
    assert_eq!("bbq".parse::<TaskId>(), Err(UnknownTask("bbq".into())));
}

#[test]
fn params_default_to_the_spec_and_deserialise_partially() {
    let p = TaskParams::default();
    let j = serde_json::to_value(&p).unwrap();
    assert_eq!(j["index_rule"], "le_1based");
    assert_eq!(j["big_gap_threshold"], 18);
    assert_eq!(j["big_gap_comparison"], "ge");
    assert_eq!(j["local_maxima_single_char"], 1);
    assert_eq!(j["n_random"], 6);
    assert_eq!(j["min_per_class"], 3);
    assert_eq!(j["scratchpad_max_words"], 300);
    let back: TaskParams = serde_json::from_value(j).unwrap();
    assert_eq!(back, p);
    let partial: TaskParams = serde_json::from_str(r#"{"big_gap_comparison": "gt"}"#).unwrap();
    assert_eq!(partial.big_gap_comparison, GapComparison::Gt);
    assert_eq!(partial.n_random, 6);
    assert!(serde_json::from_str::<TaskParams>(r#"{"nope": 1}"#).is_err());
}

#[test]
fn prompt_lines_state_type_and_domain() {
    let p = TaskParams::default();
    assert_eq!(TaskId::IsPrime.task().input_description(&p), "Input: an integer x with -1000000 <= x <= 1000000");
    assert_eq!(TaskId::FuncRecursion.task().input_description(&p), "Input: an integer x with 1 <= x <= 1000000");
    assert!(TaskId::TriangleType.task().input_description(&p).contains("not collinear"));
    assert_eq!(TaskId::TriangleType.task().output_description(), "Output: 0, 1 or 2");
    assert_eq!(TaskId::CaesarCipher.task().output_description(), "Output: a string");
}
