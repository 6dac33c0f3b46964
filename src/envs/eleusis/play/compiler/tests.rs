//! Tests of the compile prompt, code extraction and the bounded attempt loop, including
//! validation through the Python worker (skipped without python3) and a check that the
//! prompt's worked examples really implement library rules 16, 0 and 15.

use super::*;
use crate::envs::eleusis::game::equivalence::SimulationParams;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::setup::RoundSetup;
use crate::envs::eleusis::judge::pyjudge::{PyJudge, PyJudgeConfig};

#[test]
fn prompt_has_the_reference_parts_in_order() {
    let guess = "Cards alternate {{colour}} \"red\"/black";
    let p = render_compile_prompt(guess);
    let parts = [
        "# Convert a card-game rule into Python code",
        "two standard decks",
        "hearts ♥\u{fe0f} (red)",
        &format!("## The rule to convert\n{guess}\n"),
        "snake_case",
        "ONLY the body",
        "card.suit.suit_name",
        "if not mainline:",
        "bool, int, str, list, tuple, set, dict",
        "range, reversed, sorted, enumerate, zip",
        "len, sum, min, max, abs, any, all",
        "round, divmod",
        "Do not import",
        "{2, 3, 5, 7, 11, 13}",
        "`//`",
        "first card of the mainline must satisfy it",
        "<NAME>nickname_here</NAME>",
        "Rule: Cards must alternate between red and black colors.",
        "Rule: Only cards with an even rank.",
        "Rule: Each card must have a rank greater than or equal",
        "Reply with only the <NAME> and <CODE> tags.",
    ];
    let mut at = 0;
    for part in parts {
        let found = p[at..].find(part).unwrap_or_else(|| panic!("missing {part:?}"));
        at += found + part.len();
    }
    assert!(!p.contains("{{guess}}"));
}

#[test]
fn code_extraction() {
    let reply = "<think>draft <CODE>return False</CODE></think>\n<NAME>odd</NAME>\n<CODE>\nreturn card.rank % 2 == 1\n</CODE>";
    assert_eq!(extract_code(reply).as_deref(), Some("return card.rank % 2 == 1"));
    assert_eq!(extract_code("Here:\n```python\nreturn True\n```").as_deref(), Some("python\nreturn True"), "the language tag stays (reference behaviour)");
    // An empty tag counts as not found: the whole reply is taken (and fails validation).
    assert_eq!(extract_code("<CODE>  </CODE>").as_deref(), Some("<CODE>  </CODE>"));
    assert_eq!(extract_code(" \n "), None);
    assert_eq!(extract_code(""), None);
    assert_eq!(extract_code("return True").as_deref(), Some("return True"));
}

#[test]
fn attempt_loop_is_bounded() {
    let ok = |_: &str| Ok(());
    let mut a = CompileAttempts::new(DEFAULT_COMPILE_ATTEMPTS);
    assert_eq!(a.step(), CompileStep::Ask { attempt: 1 });
    assert_eq!(a.on_reply("", ok), CompileStep::Ask { attempt: 2 });
    assert_eq!(a.on_reply("<CODE>return (</CODE>", |_| Err("'(' was never closed".to_owned())), CompileStep::Ask { attempt: 3 });
    assert_eq!(a.on_reply("<CODE>return True</CODE>", ok), CompileStep::Compiled { code: "return True".to_owned(), attempt: 3 });
    assert_eq!(a.failures().len(), 2);
    assert_eq!(a.on_call_error("late"), a.step(), "decided loops ignore input");

    let mut a = CompileAttempts::new(2);
    a.on_call_error("HTTP 503");
    assert_eq!(a.on_reply("no code here", |_| Err("bad".to_owned())), CompileStep::Exhausted);
    assert_eq!(CompileAttempts::exhausted_verdict().message, "No code provided for guessed rule");
    assert_eq!(CompileAttempts::new(0).step(), CompileStep::Ask { attempt: 1 });
}

#[test]
fn validation_and_examples_through_the_python_worker() {
    let Ok(mut judge) = PyJudge::new(PyJudgeConfig::default()) else {
        eprintln!("NOTE: python3 unavailable; skipping compiler validation test");
        return;
    };
    let mut a = CompileAttempts::new(3);
    let step = a.on_reply("<CODE>if card.rank >\n    return True</CODE>", |c| judge.validate(c).map_err(|e| e.to_string()));
    assert_eq!(step, CompileStep::Ask { attempt: 2 });
    assert!(matches!(&a.failures()[0], CompileFailure::Syntax { error } if error.contains("invalid syntax")));

    // The three worked examples of the prompt are equivalent to their library rules.
    let examples = [
        (SecretRule::AlternatingColors, "Cards must alternate"),
        (SecretRule::EvenRanksOnly, "Only cards with an even rank."),
        (SecretRule::RankNonDecreasingStartAce, "greater than or equal"),
    ];
    for (rule, marker) in examples {
        let at = COMPILER_TEMPLATE.find(marker).expect("example");
        let code = extract_code(COMPILER_TEMPLATE[at..].split("\n\n").next().unwrap_or("")).expect("example code");
        let start = [RoundSetup::new(rule, 0).expect("setup").starter];
        let v = judge.check(&rule, Some(&code), &start, &SimulationParams::default());
        assert!(v.verdict.equivalent, "{}: {}", rule.name(), v.verdict.message);
    }
}
