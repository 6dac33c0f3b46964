//! The §6.6 scripted episodes end to end through the real sandbox (needs numpy: skipped
//! with a message otherwise) on every available backend.

use super::super::episode::{FailureKind, SandboxRunner};
use super::super::gpu::{GpuPool, Slot};
use super::super::test_support::{Fixture, backends, minishapes_fixture, skip_without_numpy};
use super::*;

fn task_with_limit(limit_s: f64) -> Fixture {
    let mut fx = minishapes_fixture();
    fx.task.time_limit_s = limit_s;
    fx
}

#[test]
fn spec_episode_yields_stated_accuracy_and_failure_rate() {
    if skip_without_numpy("spec_episode_yields_stated_accuracy_and_failure_rate") {
        return;
    }
    let fx = task_with_limit(2.0);
    let task = &fx.task;
    let pool = GpuPool::from_slots(vec![Slot::Cpu { id: 0, threads: 1 }]);
    for sb in backends() {
        let mut episode = Episode::from_task(task).expect("labels");
        let mut agent = ScriptedAgent::spec_episode();
        let mut runner = SandboxRunner { sandbox: sb, pool: &pool, task };
        let rec = play(&mut episode, &mut agent, &mut runner).expect("episode");
        let kinds: Vec<Option<FailureKind>> = rec.submissions.iter().map(|s| s.failure_kind).collect();
        assert_eq!(
            kinds,
            vec![Some(FailureKind::NoCode), Some(FailureKind::Exception), Some(FailureKind::NoResultsFile), None, Some(FailureKind::Timeout),],
            "{:#?}",
            rec.submissions
        );
        assert_eq!(rec.run_accuracy, 0.535);
        assert_eq!(rec.best_so_far, vec![0.0, 0.0, 0.0, 0.535, 0.535]);
        assert_eq!(rec.failure_rate, 0.8);
        assert_eq!(super::super::metrics::per_run_failure_rate(&[rec.submissions.iter().map(|s| s.accuracy).collect()]), Some(0.0));
        // Feedback the agent saw after responses 1-4 (none after the 5th).
        assert_eq!(agent.feedback_seen.len(), 4);
        assert_eq!(agent.feedback_seen[0], "No code block found in your response. Accuracy: 0.0");
        assert!(agent.feedback_seen[1].contains("RuntimeError: scripted failure"), "{}", agent.feedback_seen[1]);
        assert!(agent.feedback_seen[2].ends_with("\n\nAccuracy: 0.0, Results file not found"));
        assert!(agent.feedback_seen[3].contains("train accuracy 0.52"));
        assert!(agent.feedback_seen[3].ends_with("\n\nAccuracy: 0.535"));
        let last = &rec.submissions[4];
        assert!(last.feedback.ends_with("Accuracy: 0.0, Timeout after 2 s"));
        let wall = last.run_wall_s.expect("ran");
        assert!((2.0..4.5).contains(&wall), "timeout wall {wall}");
    }
}

#[test]
fn reference_episode_reaches_0_995() {
    if skip_without_numpy("reference_episode_reaches_0_995") {
        return;
    }
    let fx = task_with_limit(60.0);
    let task = &fx.task;
    let pool = GpuPool::from_slots(vec![Slot::Cpu { id: 0, threads: 1 }]);
    let Some(sb) = backends().into_iter().next() else {
        return;
    };
    let mut episode = Episode::from_task(task).expect("labels");
    let mut agent = ScriptedAgent::reference_episode();
    let mut runner = SandboxRunner { sandbox: sb, pool: &pool, task };
    let rec = play(&mut episode, &mut agent, &mut runner).expect("episode");
    let accs: Vec<f64> = rec.submissions.iter().map(|s| s.accuracy).collect();
    assert_eq!(accs, vec![0.0, 0.335, 0.8725, 0.985, 0.995], "{:#?}", rec.submissions);
    assert_eq!(rec.run_accuracy, 0.995);
    assert!(rec.submissions[4].feedback.contains("train accuracy 0.9925"));
}

#[test]
fn agent_may_stop_early() {
    let fx = task_with_limit(2.0);
    let task = &fx.task;
    let pool = GpuPool::from_slots(vec![Slot::Cpu { id: 0, threads: 1 }]);
    let Some(sb) = backends().into_iter().next() else {
        return;
    };
    let mut episode = Episode::from_task(task).expect("labels");
    let mut agent = ScriptedAgent::new(vec!["no code".into()]);
    let mut runner = SandboxRunner { sandbox: sb, pool: &pool, task };
    let rec = play(&mut episode, &mut agent, &mut runner).expect("episode");
    assert_eq!((rec.submissions.len(), rec.run_accuracy, rec.failure_rate), (1, 0.0, 1.0));
}
