use super::*;

fn t(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn match_defaults_to_the_end_ignoring_case_and_punctuation() {
    assert!(match_any("The answer is Paris.", &t(&["paris"]), Location::End, true, false));
    assert!(!match_any("Paris is the answer", &t(&["paris"]), Location::End, true, false));
    assert!(match_any("Paris is the answer", &t(&["paris"]), Location::Begin, true, false));
    assert!(!match_any("The answer is Paris.", &t(&["paris"]), Location::End, false, false));
    assert!(match_any("x paris y", &t(&["Paris"]), Location::Any, true, false));
}

#[test]
fn numeric_match_strips_currency_and_separators() {
    assert!(match_any("It costs $1,250.", &t(&["1250"]), Location::End, true, true));
    assert!(!match_any("It is 25", &t(&["5"]), Location::End, true, true));
    assert!(match_any("3.0 apples then 7", &t(&["3"]), Location::Any, true, true));
    assert!(!match_any("60%", &t(&["60"]), Location::End, true, true));
    assert!(match_any("answer: 1e3", &t(&["1000"]), Location::End, true, true));
}

#[test]
fn python_float_formatting() {
    assert_eq!(format_g(1250.0, 5), "1250");
    assert_eq!(format_g(123_456.0, 5), "1.2346e+05");
    assert_eq!(format_g(0.0001, 5), "0.0001");
    assert_eq!(format_g(0.00001, 5), "1e-05");
    assert_eq!(float_repr(4.0), "4.0");
    assert_eq!(float_repr(1e20), "1e+20");
    assert_eq!(float_repr(0.1), "0.1");
    assert_eq!(float_repr(1e-5), "1e-05");
}

#[test]
fn exact_and_f1_normalise_like_squad() {
    assert!(exact("The Eiffel-Tower!", &t(&["eiffel tower"])));
    assert!(!exact("a", &t(&["the"])));
    assert!(exact("4", &t(&["4.0"])));
    assert!((f1("the cat sat", &t(&["cat sat down"]), &[]) - 0.8).abs() < 1e-12);
    assert!((f1("nothing", &t(&["a"]), &[]) - 0.0).abs() < 1e-12);
}

#[test]
fn pattern_and_answer() {
    let r = Regex::new(r"(?i)ANSWER:\s*(\w+)").unwrap();
    assert!(pattern(&r, "so ANSWER: yes", &t(&["Yes"]), true, false));
    assert!(!pattern(&r, "so ANSWER: no", &t(&["Yes"]), true, false));
    assert_eq!(extract_answer(AnswerPattern::Letter, "ANSWER: A\nwait, ANSWER: B"), Some("B"));
    assert_eq!(extract_answer(AnswerPattern::Word, "ANSWER: yes."), Some("yes"));
    assert_eq!(extract_answer(AnswerPattern::Line, "think\nANSWER: New York City"), Some("New York City"));
    assert!(answer(AnswerPattern::Letter, "ANSWER: c", &t(&["C"])));
}

#[test]
fn choices_parse_and_unshuffle() {
    assert_eq!(parse_choice_answers("ANSWER: B", 4, false), vec!["B"]);
    assert_eq!(parse_choice_answers("ANSWER: (c).", 4, false), vec!["C"]);
    assert_eq!(parse_choice_answers("ANSWER: A, C", 4, true), vec!["A", "C"]);
    assert!(parse_choice_answers("ANSWER: E", 4, false).is_empty());
    assert_eq!(target_positions(&t(&["A,C"])).unwrap(), vec![0, 2]);
    // The model saw original choices in order [2, 0, 1]: its `A` is original choice 2.
    assert!(choice("ANSWER: A", &[2], &[2, 0, 1], false));
    assert!(!choice("ANSWER: A", &[0], &[2, 0, 1], false));
}

#[test]
fn grades_take_the_last_verdict() {
    let offered = t(&["C", "I"]);
    assert_eq!(parse_grade("GRADE: I ... on reflection GRADE: C", &offered).as_deref(), Some("C"));
    assert_eq!(parse_grade("GRADE: Correct", &offered).as_deref(), Some("C"));
    assert_eq!(parse_grade("GRADE: P", &offered), None);
    assert_eq!(parse_grade("downgrade: C", &offered), None);
    assert_eq!(parse_grade("GRADE: CI", &offered), None);
}
