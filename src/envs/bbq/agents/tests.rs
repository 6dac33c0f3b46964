//! Agent tests: the solver solves a clear majority of tasks for seed 0 and beats the random
//! baseline, agents are deterministic, and `play` terminates for a misbehaving agent.

use super::super::solver::SolverAgent;
use super::super::task::{TaskId, TaskParams};
use super::*;

fn run_all(make: impl Fn() -> Box<dyn Agent>, seed: u64) -> Vec<EpisodeRecord> {
    TaskId::ALL
        .into_iter()
        .map(|t| {
            let mut agent = make();
            play(Episode::new(t, seed, TaskParams::default()).unwrap(), agent.as_mut())
        })
        .collect()
}

fn solved(records: &[EpisodeRecord]) -> usize {
    records.iter().filter(|r| r.solved).count()
}

#[test]
fn solver_solves_a_clear_majority_and_beats_random() {
    let solver = run_all(|| Box::new(SolverAgent::new(1)), 0);
    let random = run_all(|| Box::new(RandomAgent::new(1)), 0);
    let (s, r) = (solved(&solver), solved(&random));
    assert!(s >= 15, "solver solved only {s}/20");
    assert!(s > r, "solver {s} vs random {r}");
    for rec in &solver {
        assert!(rec.failures.is_empty(), "{}: {:?}", rec.task, rec.failures);
        assert!(rec.queries_used <= rec.total_queries);
    }
}

#[test]
fn agents_are_deterministic_from_their_seed() {
    for t in [TaskId::ParitySum, TaskId::FuncGcdPlusLcm] {
        let a = play(Episode::new(t, 5, TaskParams::default()).unwrap(), &mut SolverAgent::new(9));
        let b = play(Episode::new(t, 5, TaskParams::default()).unwrap(), &mut SolverAgent::new(9));
        assert_eq!(a, b);
        let c = play(Episode::new(t, 5, TaskParams::default()).unwrap(), &mut RandomAgent::new(9));
        let d = play(Episode::new(t, 5, TaskParams::default()).unwrap(), &mut RandomAgent::new(9));
        assert_eq!(c, d);
    }
}

#[test]
fn random_agent_queries_are_valid_and_spend_the_budget() {
    let r = play(Episode::new(TaskId::TriangleType, 0, TaskParams::default()).unwrap(), &mut RandomAgent::new(3));
    assert!(r.failures.is_empty());
    if !r.solved {
        assert_eq!(r.queries_used, 30);
        assert_eq!(r.rounds.len(), 31);
    }
}

/// Always sends an invalid batch and the wrong number of predictions.
struct Broken;

impl Agent for Broken {
    fn queries(&mut self, _: &Observation<'_>) -> Vec<String> {
        vec!["not an input".into()]
    }
    fn scratchpad(&mut self, _: &Observation<'_>) -> String {
        String::new()
    }
    fn predictions(&mut self, _: &Observation<'_>) -> Vec<String> {
        Vec::new()
    }
}

#[test]
fn play_terminates_for_an_agent_that_always_fails() {
    let r = play(Episode::new(TaskId::DigitSum, 0, TaskParams::default()).unwrap(), &mut Broken);
    assert!(!r.solved);
    assert_eq!(r.queries_used, 0);
    assert_eq!(r.rounds.len(), 31);
    // Round 0: one forfeited evaluation; rounds 1..30: query and evaluation forfeited.
    assert_eq!(r.forfeits.len(), 1 + 2 * 30);
    assert_eq!(r.failures.len(), 3 * (1 + 2 * 30));
    assert!(r.rounds[1..].iter().all(|x| x.query_forfeited && x.evaluation_forfeited));
}

#[test]
fn observation_hides_test_inputs_outside_evaluation() {
    let mut e = Episode::new(TaskId::IsPrime, 0, TaskParams::default()).unwrap();
    assert_eq!(Observation::of(&e).test_inputs.len(), 13);
    e.submit_predictions(vec!["0".into(); 13]).unwrap();
    let obs = Observation::of(&e);
    assert!(obs.test_inputs.is_empty());
    assert_eq!(obs.known().len(), 4);
}

#[test]
fn nearest_prediction_uses_the_closest_known_input() {
    let task = TaskId::CaesarCipher.task();
    let (a, b) = (Input::Str("abc".into()), Input::Str("zzzz".into()));
    let (oa, ob) = (Output::Str("klm".into()), Output::Str("jjjj".into()));
    let known = vec![(&a, &oa), (&b, &ob)];
    assert_eq!(nearest_prediction(&task, &known, &Input::Str("abd".into())), "klm");
    assert_eq!(nearest_prediction(&task, &[], &Input::Str("q".into())), "q");
}
