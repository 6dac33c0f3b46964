//! Hand-checked input/output pairs for all 20 functions (worked out from the spec's
//! definitions, not by running this code), rendering, prediction matching and `call`.

use super::super::parse::parse_json_input_with;
use super::super::task::TaskParams;
use super::*;

/// (task, input as the model writes it, expected output as the model sees it).
const TABLE: &[(TaskId, &str, &str)] = &[
    // is_prime: x < 2 → 0; 221 = 13·17; 561 = 3·11·17; 7919 is the 1000th prime.
    (TaskId::IsPrime, "2", "1"),
    (TaskId::IsPrime, "1", "0"),
    (TaskId::IsPrime, "0", "0"),
    (TaskId::IsPrime, "-7", "0"),
    (TaskId::IsPrime, "97", "1"),
    (TaskId::IsPrime, "221", "0"),
    (TaskId::IsPrime, "561", "0"),
    (TaskId::IsPrime, "7919", "1"),
    (TaskId::IsPrime, "999983", "1"),
    (TaskId::IsPrime, "1000000", "0"),
    // is_pythagorean_triple: ordered, positive, c the hypotenuse.
    (TaskId::IsPythagoreanTriple, "(3, 4, 5)", "1"),
    (TaskId::IsPythagoreanTriple, "(4, 3, 5)", "1"),
    (TaskId::IsPythagoreanTriple, "(5, 4, 3)", "0"),
    (TaskId::IsPythagoreanTriple, "(0, 5, 5)", "0"),
    (TaskId::IsPythagoreanTriple, "(-3, 4, 5)", "0"),
    (TaskId::IsPythagoreanTriple, "(20, 21, 29)", "1"),
    (TaskId::IsPythagoreanTriple, "(6, 8, 10)", "1"),
    (TaskId::IsPythagoreanTriple, "(1, 1, 1)", "0"),
    // is_greater_than_58
    (TaskId::IsGreaterThan58, "58", "0"),
    (TaskId::IsGreaterThan58, "59", "1"),
    (TaskId::IsGreaterThan58, "0", "0"),
    (TaskId::IsGreaterThan58, "-1000000", "0"),
    (TaskId::IsGreaterThan58, "1000000", "1"),
    // digit_sum of |x|
    (TaskId::DigitSum, "0", "0"),
    (TaskId::DigitSum, "7", "7"),
    (TaskId::DigitSum, "-45", "9"),
    (TaskId::DigitSum, "1009", "10"),
    (TaskId::DigitSum, "999999", "54"),
    (TaskId::DigitSum, "1000000", "1"),
    // 6x³ − 9x² + 2x + 3
    (TaskId::Func6x3, "0", "3"),
    (TaskId::Func6x3, "1", "2"),
    (TaskId::Func6x3, "-1", "-14"),
    (TaskId::Func6x3, "2", "19"),
    (TaskId::Func6x3, "3", "90"),
    (TaskId::Func6x3, "-3", "-246"),
    (TaskId::Func6x3, "1000000", "5999991000002000003"),
    (TaskId::Func6x3, "-1000000", "-6000009000001999997"),
    // 3a − 10b + 5c
    (TaskId::Func3a10b5c, "(0, 0, 0)", "0"),
    (TaskId::Func3a10b5c, "(1, 1, 1)", "-2"),
    (TaskId::Func3a10b5c, "(2, -1, 3)", "31"),
    (TaskId::Func3a10b5c, "(-5, 0, 4)", "5"),
    (TaskId::Func3a10b5c, "(1000000, -1000000, 1000000)", "18000000"),
    // recursion: 1,1,1,3,5,11,21,43,85,71,41,83,65,31,61,23,45,91,81,63
    (TaskId::FuncRecursion, "1", "1"),
    (TaskId::FuncRecursion, "3", "1"),
    (TaskId::FuncRecursion, "4", "3"),
    (TaskId::FuncRecursion, "10", "71"),
    (TaskId::FuncRecursion, "15", "61"),
    (TaskId::FuncRecursion, "16", "23"),
    (TaskId::FuncRecursion, "20", "63"),
    // a·b + c²
    (TaskId::FuncAbPlusCSq, "(0, 0, 0)", "0"),
    (TaskId::FuncAbPlusCSq, "(2, 3, 0)", "6"),
    (TaskId::FuncAbPlusCSq, "(-2, 3, 4)", "10"),
    (TaskId::FuncAbPlusCSq, "(10, -1, -3)", "-1"),
    (TaskId::FuncAbPlusCSq, "(1000000, 1000000, -1000000)", "2000000000000"),
    // gcd + lcm
    (TaskId::FuncGcdPlusLcm, "(1, 1)", "2"),
    (TaskId::FuncGcdPlusLcm, "(4, 6)", "14"),
    (TaskId::FuncGcdPlusLcm, "(7, 13)", "92"),
    (TaskId::FuncGcdPlusLcm, "(8, 12)", "28"),
    (TaskId::FuncGcdPlusLcm, "(17, 1)", "18"),
    (TaskId::FuncGcdPlusLcm, "(1000000, 1000000)", "2000000"),
    // triangle: squared sides s1 ≤ s2 ≤ s3; = right 2, > acute 1, < obtuse 0
    (TaskId::TriangleType, "(0, 0, 3, 0, 0, 4)", "2"),
    (TaskId::TriangleType, "(0, 0, 1, 0, 0, 1)", "2"),
    (TaskId::TriangleType, "(0, 0, 4, 0, 2, 3)", "1"),
    (TaskId::TriangleType, "(0, 0, 2, 0, 1, 5)", "1"),
    (TaskId::TriangleType, "(0, 0, 10, 0, 1, 1)", "0"),
    (TaskId::TriangleType, "(0, 0, 1, 0, 5, 1)", "0"),
    // contains_ab
    (TaskId::ContainsAb, "ab", "1"),
    (TaskId::ContainsAb, "ba", "0"),
    (TaskId::ContainsAb, "cab", "1"),
    (TaskId::ContainsAb, "a", "0"),
    (TaskId::ContainsAb, "aabb", "1"),
    (TaskId::ContainsAb, "acb", "0"),
    // parity_sum (a = 1 … z = 26)
    (TaskId::ParitySum, "a", "1"),
    (TaskId::ParitySum, "b", "0"),
    (TaskId::ParitySum, "ab", "1"),
    (TaskId::ParitySum, "z", "0"),
    (TaskId::ParitySum, "az", "1"),
    (TaskId::ParitySum, "hello", "0"),
    // max_z_function
    (TaskId::MaxZFunction, "a", "0"),
    (TaskId::MaxZFunction, "aa", "1"),
    (TaskId::MaxZFunction, "aaa", "2"),
    (TaskId::MaxZFunction, "abab", "2"),
    (TaskId::MaxZFunction, "abacaba", "3"),
    (TaskId::MaxZFunction, "abc", "0"),
    (TaskId::MaxZFunction, "zzzz", "3"),
    // add_k_to_kth
    (TaskId::AddKToKth, "a", "'b'"),
    (TaskId::AddKToKth, "z", "'a'"),
    (TaskId::AddKToKth, "abc", "'bdf'"),
    (TaskId::AddKToKth, "cba", "'fdb'"),
    (TaskId::AddKToKth, "aa", "'bc'"),
    (TaskId::AddKToKth, "zy", "'bz'"),
    (TaskId::AddKToKth, "ba", "'db'"),
    (TaskId::AddKToKth, "hello", "'jfopt'"),
    // caesar_cipher +10
    (TaskId::CaesarCipher, "a", "'k'"),
    (TaskId::CaesarCipher, "q", "'a'"),
    (TaskId::CaesarCipher, "z", "'j'"),
    (TaskId::CaesarCipher, "abc", "'klm'"),
    (TaskId::CaesarCipher, "xyz", "'hij'"),
    (TaskId::CaesarCipher, "hello", "'rovvy'"),
    // num_less_than_diag (1-based, ≤)
    (TaskId::NumLessThanDiag, "a", "1"),
    (TaskId::NumLessThanDiag, "b", "0"),
    (TaskId::NumLessThanDiag, "ab", "2"),
    (TaskId::NumLessThanDiag, "ba", "1"),
    (TaskId::NumLessThanDiag, "abc", "3"),
    (TaskId::NumLessThanDiag, "cba", "2"),
    (TaskId::NumLessThanDiag, "zzz", "0"),
    // longest palindromic subsequence
    (TaskId::LongestPalSubseq, "a", "1"),
    (TaskId::LongestPalSubseq, "ab", "1"),
    (TaskId::LongestPalSubseq, "aba", "3"),
    (TaskId::LongestPalSubseq, "abca", "3"),
    (TaskId::LongestPalSubseq, "bbbab", "4"),
    (TaskId::LongestPalSubseq, "character", "5"),
    (TaskId::LongestPalSubseq, "abcd", "1"),
    // is_big_gap (≥ 18)
    (TaskId::IsBigGap, "as", "1"),
    (TaskId::IsBigGap, "ar", "0"),
    (TaskId::IsBigGap, "sa", "1"),
    (TaskId::IsBigGap, "a", "0"),
    (TaskId::IsBigGap, "mz", "0"),
    (TaskId::IsBigGap, "abcz", "1"),
    // num_local_maxima (single char counts 1)
    (TaskId::NumLocalMaxima, "a", "1"),
    (TaskId::NumLocalMaxima, "aaa", "0"),
    (TaskId::NumLocalMaxima, "bab", "2"),
    (TaskId::NumLocalMaxima, "aba", "1"),
    (TaskId::NumLocalMaxima, "acbdb", "2"),
    (TaskId::NumLocalMaxima, "zz", "0"),
    // less_than_target (< "jwz")
    (TaskId::LessThanTarget, "jw", "1"),
    (TaskId::LessThanTarget, "jwz", "0"),
    (TaskId::LessThanTarget, "jwza", "0"),
    (TaskId::LessThanTarget, "jwy", "1"),
    (TaskId::LessThanTarget, "jwyzzz", "1"),
    (TaskId::LessThanTarget, "k", "0"),
    (TaskId::LessThanTarget, "a", "1"),
];

#[test]
fn every_function_matches_its_hand_checked_table() {
    let mut failures = Vec::new();
    for &(task, input, want) in TABLE {
        match call(task.as_str(), input) {
            Ok(got) if got == want => {}
            other => failures.push(format!("{task} {input}: want {want}, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for task in TaskId::ALL {
        let n = TABLE.iter().filter(|(t, _, _)| *t == task).count();
        assert!(n >= 5, "{task} has only {n} hand-checked pairs");
    }
}

#[test]
fn recursion_matches_the_spec_prefix_and_is_periodic_for_huge_x() {
    let want = [1, 1, 1, 3, 5, 11, 21, 43, 85, 71, 41, 83, 65, 31, 61];
    for (i, &w) in want.iter().enumerate() {
        assert_eq!(recursion(i as i128 + 1), w, "f({})", i + 1);
    }
    // Iterative reference for a large x, then the cycle shortcut far beyond the table.
    let mut f = vec![1i128, 1, 1];
    while f.len() < 1_000_000 {
        let n = f.len();
        f.push((2 * f[n - 2] + f[n - 1]) % 100);
    }
    assert_eq!(recursion(1_000_000), f[999_999]);
    assert_eq!(recursion(0), 1);
    let _ = recursion(i128::from(i64::MAX));
}

#[test]
fn inputs_and_outputs_render_as_python_literals() {
    assert_eq!(Input::Tuple(vec![3, -4, 5]).to_string(), "(3, -4, 5)");
    assert_eq!(Input::Str("jav".into()).to_string(), "'jav'");
    assert_eq!(Input::Int(-7).to_string(), "-7");
    assert_eq!(Output::Str("bz".into()).to_string(), "'bz'");
    assert_eq!(Output::Int(-246).to_string(), "-246");
    let v = serde_json::to_value(Input::Tuple(vec![1, 2])).unwrap();
    assert_eq!(v, serde_json::json!([1, 2]));
    let back: Input = serde_json::from_value(v).unwrap();
    assert_eq!(back, Input::Tuple(vec![1, 2]));
    let o: Output = serde_json::from_value(serde_json::json!("ab")).unwrap();
    assert_eq!(o, Output::Str("ab".into()));
}

#[test]
fn accepted_encodings_parse_to_the_same_input() {
    let t = TaskId::Func3a10b5c;
    for text in ["(1, -2, 3)", "[1, -2, 3]", " ( 1,-2 , 3 , ) ", "'(1, -2, 3)'"] {
        assert_eq!(parse_input(t, text), Ok(Input::Tuple(vec![1, -2, 3])), "{text}");
    }
    for text in ["5", "+5", " 5 ", "'5'", "\"5\"", "(5)"] {
        assert_eq!(parse_input(TaskId::IsPrime, text), Ok(Input::Int(5)), "{text}");
    }
    for text in ["jav", "'jav'", "\"jav\"", " jav "] {
        assert_eq!(parse_input(TaskId::ContainsAb, text), Ok(Input::Str("jav".into())), "{text}");
    }
}

#[test]
fn invalid_inputs_get_the_spec_error_kinds() {
    use InputError::*;
    let kind = |t: TaskId, s: &str| match parse_input(t, s) {
        Err(Malformed { .. }) => "malformed",
        Err(WrongArity { .. }) => "arity",
        Err(OutOfDomain { .. }) => "domain",
        Err(UnknownTask(_)) => "unknown",
        Ok(_) => "ok",
    };
    assert_eq!(kind(TaskId::IsPrime, "1.5"), "malformed");
    assert_eq!(kind(TaskId::IsPrime, "true"), "malformed");
    assert_eq!(kind(TaskId::IsPrime, "abc"), "malformed");
    assert_eq!(kind(TaskId::IsPrime, "(1, 2)"), "arity");
    assert_eq!(kind(TaskId::IsPrime, "1000001"), "domain");
    assert_eq!(kind(TaskId::IsPrime, "99999999999999999999999999999999999999999"), "domain");
    assert_eq!(kind(TaskId::FuncRecursion, "0"), "domain");
    assert_eq!(kind(TaskId::FuncGcdPlusLcm, "(0, 5)"), "domain");
    assert_eq!(kind(TaskId::FuncGcdPlusLcm, "(1, 2, 3)"), "arity");
    assert_eq!(kind(TaskId::Func3a10b5c, "7"), "arity");
    assert_eq!(kind(TaskId::Func3a10b5c, "(1, 'a', 3)"), "malformed");
    assert_eq!(kind(TaskId::Func3a10b5c, "(1, 2"), "malformed");
    assert_eq!(kind(TaskId::TriangleType, "(0, 0, 1, 1, 2, 2)"), "domain");
    assert_eq!(kind(TaskId::TriangleType, "(0, 0, 0, 0, 2, 3)"), "domain");
    assert_eq!(kind(TaskId::ContainsAb, ""), "domain");
    assert_eq!(kind(TaskId::ContainsAb, "Hello"), "domain");
    assert_eq!(kind(TaskId::ContainsAb, "abcdefghijklmnopqrstu"), "domain");
    assert_eq!(kind(TaskId::ContainsAb, "ab cd"), "domain");
    assert_eq!(kind(TaskId::ContainsAb, "5"), "malformed");
    assert_eq!(parse_input(TaskId::FuncGcdPlusLcm, "(1, 2, 3)").unwrap_err().to_string(), "invalid input \"(1, 2, 3)\": expected 2 integers, got 3");
    assert_eq!(parse_input(TaskId::IsPrime, "2000000").unwrap_err().to_string(), "invalid input \"2000000\": integers must be between -1000000 and 1000000");
    assert!(matches!(call("nope", "1"), Err(UnknownTask(_))));
}

#[test]
fn json_items_follow_the_accepted_encodings() {
    use serde_json::json;
    let p = TaskParams::default();
    let j = |t: TaskId, v: serde_json::Value| parse_json_input_with(t, &v, &p);
    assert_eq!(j(TaskId::IsPrime, json!(7)), Ok(Input::Int(7)));
    assert_eq!(j(TaskId::IsPrime, json!("7")), Ok(Input::Int(7)));
    assert!(j(TaskId::IsPrime, json!(7.0)).is_err());
    assert!(j(TaskId::IsPrime, json!(true)).is_err());
    assert_eq!(j(TaskId::FuncGcdPlusLcm, json!([4, 6])), Ok(Input::Tuple(vec![4, 6])));
    assert_eq!(j(TaskId::FuncGcdPlusLcm, json!("(4, 6)")), Ok(Input::Tuple(vec![4, 6])));
    assert!(j(TaskId::FuncGcdPlusLcm, json!([4, 6.5])).is_err());
    assert_eq!(j(TaskId::ContainsAb, json!("ab")), Ok(Input::Str("ab".into())));
    assert!(j(TaskId::ContainsAb, json!(true)).is_err());
    assert!(j(TaskId::ContainsAb, json!(5)).is_err());
}

#[test]
fn prediction_matching_follows_the_spec() {
    use serde_json::json;
    let i = Output::Int(-12);
    assert!(i.matches_text("-12"));
    assert!(i.matches_text("  -12\n"));
    assert!(!i.matches_text("-12.0"));
    assert!(!i.matches_text("twelve"));
    assert!(Output::Int(5).matches_text("+5"));
    assert!(Output::Int(5).matches_text("005"));
    assert!(i.matches_json(&json!(-12)));
    assert!(i.matches_json(&json!(-12.0)));
    assert!(!i.matches_json(&json!(-12.5)));
    assert!(i.matches_json(&json!("-12")));
    let s = Output::Str("bz".into());
    assert!(s.matches_text(" bz "));
    assert!(!s.matches_text("BZ"));
    assert!(!s.matches_text("'bz'"));
    assert!(!s.matches_json(&json!(1)));
}

#[test]
fn evaluation_is_total_on_invalid_inputs() {
    for task in TaskId::ALL {
        for x in [
            Input::Int(i64::MIN),
            Input::Int(i64::MAX),
            Input::Tuple(vec![]),
            Input::Tuple(vec![i64::MAX; 6]),
            Input::Str(String::new()),
            Input::Str("ÄÖ z'\\".into()),
        ] {
            let _ = evaluate(task, &x);
        }
    }
}
