//! Tests for `answer_space.rs` on the full shipped BBEH set.

use super::super::dataset::{TASKS, load_all};
use super::super::testdata::data_dir;
use super::*;

const OPEN_TASKS: [&str; 9] = [
    "bbeh_buggy_tables",
    "bbeh_linguini",
    "bbeh_multistep_arithmetic",
    "bbeh_object_counting",
    "bbeh_object_properties",
    "bbeh_spatial_reasoning",
    "bbeh_sportqa",
    "bbeh_temporal_sequence",
    "bbeh_time_arithmetic",
];

#[test]
fn every_finite_space_contains_the_gold_answer_exactly_once() {
    let all = load_all(&data_dir()).unwrap();
    let mut finite = 0;
    for item in &all {
        match answer_space(item) {
            AnswerSpace::Finite(options) => {
                finite += 1;
                let hits: Vec<&String> = options.iter().filter(|o| evaluate_correctness(o, &item.target)).collect();
                assert_eq!(hits.len(), 1, "{}/{}: {hits:?}", item.task, item.index);
                let prefixed = options.iter().filter(|o| evaluate_correctness(&format!("The answer is: {o}"), &item.target)).count();
                assert_eq!(prefixed, 1, "{}/{}", item.task, item.index);
            }
            AnswerSpace::Open { .. } => {
                let sorting = item.task == "bbeh_word_sorting" && !item.input.contains("Is there a mistake in this sequence?");
                let tree = item.task == "bbeh_spatial_reasoning" && item.subtask.is_some();
                assert!(tree || (OPEN_TASKS.contains(&item.task.as_str()) && item.task != "bbeh_spatial_reasoning") || sorting, "{}", item.task);
            }
        }
    }
    // 15 tasks with finite spaces: 12 × 200 + 120 + 100 mistake-finding word-sorting items + 171
    // map/ring spatial-reasoning items (the 29 tree/cousin items are open).
    assert_eq!(finite, 12 * 200 + 120 + 100 + 171);
}

/// Mean expected random accuracy per task (percent) against the paper's Random column
/// (spec `bbeh.md` §5.2, Table 2): within 0.2 points, or within one standard error of a
/// 200-item sample where the spaces are our reading of the task (dyck, spatial_reasoning).
#[test]
fn expected_random_accuracy_matches_paper_random_column() {
    let all = load_all(&data_dir()).unwrap();
    let paper: [(&str, f64); 15] = [
        ("bbeh_boardgame_qa", 33.3),
        ("bbeh_boolean_expressions", 20.0),
        ("bbeh_causal_understanding", 38.0),
        ("bbeh_disambiguation_qa", 21.0),
        ("bbeh_dyck_languages", 1.4),
        ("bbeh_geometric_shapes", 6.2),
        ("bbeh_hyperbaton", 0.0),
        ("bbeh_movie_recommendation", 10.0),
        ("bbeh_nycc", 10.0),
        ("bbeh_sarc_triples", 12.5),
        ("bbeh_shuffled_objects", 14.3),
        ("bbeh_spatial_reasoning", 5.2),
        ("bbeh_web_of_lies", 5.5),
        ("bbeh_word_sorting", 4.3),
        ("bbeh_zebra_puzzles", 15.4),
    ];
    for (task, reported) in paper {
        let items: Vec<&Item> = all.iter().filter(|i| i.task == task).collect();
        let sum: f64 = items.iter().filter_map(|i| expected_random_accuracy(i)).sum();
        let ours = 100.0 * sum / items.len() as f64;
        let tolerance = match task {
            "bbeh_dyck_languages" => 1.0,
            "bbeh_spatial_reasoning" => 0.6,
            _ => 0.2,
        };
        assert!((ours - reported).abs() <= tolerance, "{task}: ours {ours:.3} vs paper {reported}");
    }
    assert!(TASKS.iter().all(|t| paper.iter().any(|(p, _)| p == t) || OPEN_TASKS.contains(t)));
}

#[test]
fn random_answer_is_deterministic_uniform_and_scoreable() {
    let all = load_all(&data_dir()).unwrap();
    let zebra = all.iter().find(|i| i.task == "bbeh_zebra_puzzles").unwrap();
    let AnswerSpace::Finite(options) = answer_space(zebra) else { panic!("zebra is finite") };
    assert_eq!(random_answer(zebra, 42), random_answer(zebra, 42));
    let mut counts = vec![0usize; options.len()];
    let draws = 20_000;
    for seed in 0..draws {
        let a = random_answer(zebra, seed).unwrap();
        counts[options.iter().position(|o| *o == a).unwrap()] += 1;
    }
    let expected = draws as f64 / options.len() as f64;
    assert!(counts.iter().all(|&c| (c as f64 - expected).abs() < 0.1 * expected), "{counts:?}");
    let linguini = all.iter().find(|i| i.task == "bbeh_linguini").unwrap();
    assert_eq!(random_answer(linguini, 1), None);
    assert!(matches!(answer_space(linguini), AnswerSpace::Open { .. }));
}

#[test]
fn spaces_have_the_documented_shapes() {
    let all = load_all(&data_dir()).unwrap();
    let first = |t: &str| all.iter().find(|i| i.task == t).unwrap();
    let sarc = answer_space(first("bbeh_sarc_triples"));
    assert_eq!(sarc.len(), Some(8));
    assert!(matches!(&sarc, AnswerSpace::Finite(v) if v.contains(&"0,1,1".to_string())));
    let hyper = answer_space(first("bbeh_hyperbaton"));
    // 2^10 − 1 concatenations of A–J plus K ("None of the above").
    assert!(matches!(&hyper, AnswerSpace::Finite(v) if v.first().map(String::as_str) == Some("A")
        && v.len() == 1024 && v.contains(&"BC".to_string()) && v.contains(&"ABCDEFGHIJ".to_string()) && v.last().map(String::as_str) == Some("K")));
    let spatial = answer_space(first("bbeh_spatial_reasoning"));
    // Item 0: the ring of 12 dots, each object named once, plus `unknown`.
    assert!(matches!(&spatial, AnswerSpace::Finite(v) if v.len() == 13 && v[0] == "computer keyboard"
        && v.contains(&"southern black widow".to_string()) && v.contains(&"hornbill".to_string()) && v.last().map(String::as_str) == Some("unknown")));
    let tree = all.iter().find(|i| i.task == "bbeh_spatial_reasoning" && i.subtask.is_some()).unwrap();
    assert!(matches!(answer_space(tree), AnswerSpace::Open { .. }));
    let geo = answer_space(first("bbeh_geometric_shapes"));
    assert!(matches!(&geo, AnswerSpace::Finite(v) if v.len() == 16 && v[0] == "(A)"));
    let sizes: Vec<usize> = all.iter().filter(|i| i.task == "bbeh_web_of_lies").filter_map(|i| answer_space(i).len()).collect();
    assert_eq!(sizes.iter().filter(|&&n| n == 27).count(), 160);
    assert_eq!(sizes.iter().filter(|&&n| n == 8).count(), 40);
}

#[test]
fn odd_items_do_not_panic() {
    for task in TASKS.iter().copied().chain(["nope", ""]) {
        for input in ["", "(", "(A)", "(A) x\n(A) y", "Thought 99999999999999999999999: x", "Thought 1000000000000: x", "There are -3 people"] {
            let item = Item { task: task.to_string(), index: 0, input: input.to_string(), target: String::new(), subtask: None };
            let _ = answer_space(&item);
            let _ = random_answer(&item, u64::MAX);
            let _ = expected_random_accuracy(&item);
        }
    }
}
