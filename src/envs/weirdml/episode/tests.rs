//! Episode state machine with a fake runner: classification precedence, exact feedback
//! text, budget handling and record round-trips (no Python needed).

use super::super::output::CapturedOutput;
use super::super::sandbox::ExitInfo;
use super::*;

fn result(code: i32, timed_out: bool, preds: Predictions, out: &str) -> RunResult {
    RunResult {
        exit: ExitInfo { code: Some(code), signal: None },
        timed_out,
        killed_by_limit: None,
        output: CapturedOutput { head: out.as_bytes().to_vec(), tail: Vec::new(), total_bytes: out.len() as u64, dropped_middle: false },
        output_view: out.to_string(),
        output_truncated: false,
        output_complete: true,
        wall_s: 0.25,
        predictions: preds,
        isolation: Isolation::Bwrap,
        slot: "cpu0".into(),
        survivors: Vec::new(),
    }
}

struct Fake {
    results: Vec<RunResult>,
    codes: Vec<String>,
}

impl CodeRunner for Fake {
    fn run_code(&mut self, code: &str) -> Result<RunResult, SandboxError> {
        self.codes.push(code.to_string());
        if self.results.is_empty() {
            return Err(SandboxError::Python("fake runner exhausted".into()));
        }
        Ok(self.results.remove(0))
    }
}

fn labels() -> Labels {
    Labels { rows: 4, width: 1, values: vec![0, 1, 2, 1] }
}

fn episode(max: u32, limit: f64) -> Episode {
    Episode { task_id: "fake".into(), max_submissions: max, time_limit_s: limit, labels: labels(), records: Vec::new() }
}

fn present(s: &str) -> Predictions {
    Predictions::Present(s.as_bytes().to_vec())
}

const CODE: &str = "```python\nprint('x')\n```";

#[test]
fn classification_and_feedback_text() {
    let cases: Vec<(RunResult, Option<FailureKind>, f64, &str)> = vec![
        (result(0, false, present("0\n1\n2\n0\n"), "ok\n"), None, 0.75, "Accuracy: 0.75"),
        (result(1, false, present("0\n1\n2\n1\n"), "Traceback\n"), None, 1.0, "Accuracy: 1.0"),
        (result(1, false, Predictions::Missing, "Traceback\n"), Some(FailureKind::Exception), 0.0, "Accuracy: 0.0, Results file not found"),
        (result(0, false, Predictions::Missing, "stats\n"), Some(FailureKind::NoResultsFile), 0.0, "Accuracy: 0.0, Results file not found"),
        (result(0, false, present("0\n1\n"), ""), Some(FailureKind::BadFormat), 0.0, "Accuracy: 0.0, Could not parse results file: expected 4 rows, found 2"),
        (
            result(0, false, Predictions::Invalid("results/test_preds.txt is a symlink".into()), ""),
            Some(FailureKind::BadFormat),
            0.0,
            "Accuracy: 0.0, Could not parse results file: results/test_preds.txt is a symlink",
        ),
        (result(0, false, present("1\n0\n0\n0\n"), ""), Some(FailureKind::ZeroAccuracy), 0.0, "Accuracy: 0.0"),
        (result(137, true, present("0\n1\n2\n1\n"), "training\n"), Some(FailureKind::Timeout), 0.0, "Accuracy: 0.0, Timeout after 2 s"),
    ];
    for (run, kind, acc, line) in cases {
        let out = run.output_view.clone();
        let mut ep = episode(5, 2.0);
        let mut fake = Fake { results: vec![run], codes: Vec::new() };
        let step = ep.step(CODE, &mut fake).expect("step");
        let r = step.record;
        assert_eq!((r.failure_kind, r.accuracy, r.failed), (kind, acc, acc == 0.0), "{line}");
        assert_eq!(r.feedback, format!("Terminal output:\n{out}\n\n{line}"));
        assert_eq!(step.feedback.as_deref(), Some(r.feedback.as_str()));
        assert_eq!(fake.codes, vec!["print('x')".to_string()]);
        assert_eq!(r.code_sha256.as_deref().map(str::len), Some(64));
    }
}

#[test]
fn no_code_does_not_run_anything_and_budget_is_enforced() {
    let mut ep = episode(2, 600.0);
    let mut fake = Fake { results: vec![result(0, false, present("0\n1\n2\n1\n"), "")], codes: Vec::new() };
    let s1 = ep.step("I think this is hard.", &mut fake).expect("step");
    assert_eq!(s1.record.failure_kind, Some(FailureKind::NoCode));
    assert_eq!(s1.feedback.as_deref(), Some(NO_CODE_FEEDBACK));
    assert!(fake.codes.is_empty());
    let s2 = ep.step(CODE, &mut fake).expect("step");
    assert_eq!(s2.feedback, None, "no feedback after the last submission");
    assert!(ep.is_done());
    assert!(matches!(ep.step(CODE, &mut fake), Err(EpisodeError::Finished(2))));
    let rec = ep.record();
    assert_eq!((rec.run_accuracy, rec.failures, rec.failure_rate), (1.0, 1, 0.5));
    assert_eq!(rec.best_so_far, vec![0.0, 1.0]);
    let json = serde_json::to_string(&rec).expect("serialize");
    let back: EpisodeRecord = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, rec);
}

#[test]
fn infrastructure_errors_do_not_consume_a_submission() {
    let mut ep = episode(5, 600.0);
    let mut fake = Fake { results: Vec::new(), codes: Vec::new() };
    assert!(matches!(ep.step(CODE, &mut fake), Err(EpisodeError::Sandbox(_))));
    assert!(ep.submissions().is_empty());
}

#[test]
fn fractional_limits_and_python_float_repr_in_feedback() {
    let mut ep = episode(5, 0.5);
    let mut fake = Fake { results: vec![result(0, true, Predictions::Missing, "")], codes: Vec::new() };
    let r = ep.step(CODE, &mut fake).expect("step").record;
    assert!(r.feedback.ends_with("Accuracy: 0.0, Timeout after 0.5 s"));
    assert_eq!(r.score, None);
}

#[test]
fn the_longest_block_is_the_one_that_runs() {
    let mut ep = episode(5, 600.0);
    let mut fake = Fake { results: vec![result(0, false, present("0\n1\n2\n1\n"), "")], codes: Vec::new() };
    let response = "Setup:\n```bash\npip list\n```\nSolution:\n```python\nimport numpy as np\nprint(np.zeros(3))\n```\nDone.";
    ep.step(response, &mut fake).expect("step");
    assert_eq!(fake.codes, vec!["import numpy as np\nprint(np.zeros(3))".to_string()]);
}
