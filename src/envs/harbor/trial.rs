//! One trial, in Harbor's order: the agent phase under `[agent].timeout_sec` (`oracle`
//! copies `solution/` to `/solution` and runs `bash /solution/solve.sh`; `nop` does
//! nothing), then the verifier in the same container (`tests/` copied to `/tests` only now,
//! `bash /tests/test.sh` under `[verifier].timeout_sec`), then the reward read from
//! `/logs/verifier/reward.json`, else `reward.txt`, as current Harbor does (test.sh's exit
//! code is ignored). The container is behind [`TrialContainer`] so the order and the
//! outcomes are tested without a runtime.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::task::Loaded;

/// Bytes of each phase's output kept in the record (head and tail; the middle is cut).
pub const OUTPUT_CAP: usize = 64 * 1024;
/// Largest reward file read.
pub const REWARD_CAP: usize = 64 * 1024;

/// The built-in agents: no model, the task's own reference solution or nothing.
pub const AGENTS: &[&str] = &["oracle", "nop"];

/// A command run in the trial's container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseRun {
    /// stdout and stderr, capped (a note says where bytes were cut), decoded lossily.
    pub output: String,
    /// Exit code (`None`: killed, or it never ran).
    pub exit_code: Option<i32>,
    /// Whether it ran past its limit and was killed.
    pub timed_out: bool,
    /// Wall seconds.
    pub seconds: f64,
}

/// The running container of one trial, as the trial sees it.
pub trait TrialContainer {
    /// Runs `script` with `bash -c` from the working directory, killed after `timeout`.
    ///
    /// # Errors
    /// The runtime failed (not the command: its failure is its exit code).
    fn exec(&mut self, script: &str, timeout: Duration, env: &[(String, String)]) -> Result<PhaseRun, String>;
    /// Copies a host folder's contents to `dest` in the container.
    ///
    /// # Errors
    /// The runtime failed.
    fn copy_in(&mut self, host_dir: &Path, dest: &str) -> Result<(), String>;
    /// Reads a file of the container (`None` when absent), at most `max` bytes.
    ///
    /// # Errors
    /// The runtime failed.
    fn read_file(&mut self, path: &str, max: usize) -> Result<Option<Vec<u8>>, String>;
    /// Connects the container to the network or cuts it off, for the phase that follows.
    ///
    /// # Errors
    /// The runtime failed.
    fn set_network(&mut self, on: bool) -> Result<(), String>;
}

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The verifier wrote a reward.
    Reward,
    /// The agent ran past its limit; the verifier still ran and its reward is kept.
    AgentTimeout,
    /// `test.sh` ran past its limit: no reward.
    VerifierTimeout,
    /// No reward file, or one that does not parse: no reward.
    VerifierError,
    /// The agent made `max_turns` calls without finishing; the verifier still ran.
    MaxTurns,
    /// The agent's calls used `max_tokens_total`; the verifier still ran.
    TokenLimit,
    /// The conversation outgrew the model's context window; the verifier still ran.
    ContextExceeded,
}

impl Outcome {
    /// The name in records and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reward => "reward",
            Self::AgentTimeout => "agent_timeout",
            Self::VerifierTimeout => "verifier_timeout",
            Self::VerifierError => "verifier_error",
            Self::MaxTurns => "max_turns",
            Self::TokenLimit => "token_limit",
            Self::ContextExceeded => "context_exceeded",
        }
    }
}

/// A trial's record: what is cached as the episode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialRecord {
    /// `oracle` or `nop`.
    pub agent: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The reward (`reward` of reward.json, or its only value, or reward.txt); `None` when
    /// the verifier gave none.
    pub reward: Option<f64>,
    /// reward.json's named numbers (empty for reward.txt).
    pub rewards: BTreeMap<String, f64>,
    /// Which reward file was read (`reward.json` / `reward.txt`).
    pub reward_file: Option<String>,
    /// Why the verifier gave no reward.
    pub verifier_problem: Option<String>,
    /// The agent phase (`None` for `nop`).
    pub agent_run: Option<PhaseRun>,
    /// The verifier phase.
    pub verifier_run: PhaseRun,
    /// The image the trial ran in.
    pub image: String,
    /// Hash of every file of the task folder when it ran (for `status --explain`).
    pub files: BTreeMap<String, String>,
    /// Notes on the task (unknown task.toml fields, limits not applied).
    pub notes: Vec<String>,
    /// The agent phase of a model-driven agent (`terminal`): every turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_log: Option<super::terminal::AgentLog>,
}

/// Reads a reward file's bytes: reward.json (flat object of numbers) or reward.txt (one
/// number). Returns the headline reward and the named ones.
///
/// # Errors
/// Empty, not UTF-8, not a number, or an object with a value that is not a number.
pub fn parse_reward(file: &str, bytes: &[u8]) -> Result<(f64, BTreeMap<String, f64>), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{file} is not UTF-8"))?.trim();
    if text.is_empty() {
        return Err(format!("{file} is empty"));
    }
    if file.ends_with(".json") {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("{file} is not JSON: {e}"))?;
        let obj = v.as_object().ok_or_else(|| format!("{file} must be an object of named numbers"))?;
        let mut named = BTreeMap::new();
        for (k, x) in obj {
            let n = x.as_f64().or_else(|| x.as_bool().map(|b| f64::from(u8::from(b)))).filter(|n| n.is_finite());
            named.insert(k.clone(), n.ok_or_else(|| format!("{file}: `{k}` is not a number"))?);
        }
        let headline = match named.get("reward") {
            Some(r) => *r,
            None if named.len() == 1 => named.values().copied().next().unwrap_or(0.0),
            None if named.is_empty() => return Err(format!("{file} holds no number")),
            // Several named rewards and none called `reward`: their mean is the headline.
            None => named.values().sum::<f64>() / named.len() as f64,
        };
        return Ok((headline, named));
    }
    let n: f64 = text.parse().map_err(|_| format!("{file} is not a number: {:?}", text.chars().take(80).collect::<String>()))?;
    if !n.is_finite() {
        return Err(format!("{file} is not a finite number"));
    }
    Ok((n, BTreeMap::new()))
}

fn secs(d: f64) -> Duration {
    Duration::from_secs_f64(d.max(0.001))
}

/// Runs a trial's agent and verifier phases in `c`, a container started from the task's
/// image. Runtime failures come back as `Err` (an errored trial, never a reward).
///
/// # Errors
/// The container runtime failed during the trial.
pub fn run(c: &mut dyn TrialContainer, task: &Loaded, agent: &str, image: &str) -> Result<TrialRecord, String> {
    let cfg = &task.config;
    begin(c, task)?;
    let agent_run = match agent {
        "oracle" => {
            let start = Instant::now();
            let solution = task.dir.join("solution");
            if solution.is_dir() {
                c.copy_in(&solution, "/solution")?;
                let mut env = vec![("DEBIAN_FRONTEND".to_owned(), "noninteractive".to_owned())];
                env.extend(cfg.solution_env.iter().cloned());
                let mut run = c.exec("bash /solution/solve.sh", secs(cfg.agent_timeout_sec), &env)?;
                run.seconds = start.elapsed().as_secs_f64();
                Some(run)
            } else {
                Some(PhaseRun { output: "(the task has no solution/ folder: the oracle did nothing)".into(), ..PhaseRun::default() })
            }
        }
        _ => None,
    };
    let agent_end = if agent_run.as_ref().is_some_and(|r| r.timed_out) { Outcome::AgentTimeout } else { Outcome::Reward };
    verify(c, task, TrialRecord::new(task, agent, image, agent_run), agent_end)
}

/// Prepares `/logs` and puts the container on the agent phase's network; returns the
/// working directory (where every command starts).
///
/// # Errors
/// The runtime failed, or `/logs` could not be made.
pub fn begin(c: &mut dyn TrialContainer, task: &Loaded) -> Result<String, String> {
    let setup =
        c.exec("mkdir -p /logs/agent /logs/verifier && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json && pwd", Duration::from_secs(60), &[])?;
    if setup.exit_code != Some(0) {
        return Err(format!("could not prepare /logs in the container: {}", setup.output.trim()));
    }
    c.set_network(task.network())?;
    Ok(setup.output.lines().last().unwrap_or("/").trim().to_owned())
}

impl TrialRecord {
    /// A record before the verifier ran: no reward yet.
    #[must_use]
    pub fn new(task: &Loaded, agent: &str, image: &str, agent_run: Option<PhaseRun>) -> Self {
        Self {
            agent: agent.to_owned(),
            outcome: Outcome::Reward,
            reward: None,
            rewards: BTreeMap::new(),
            reward_file: None,
            verifier_problem: None,
            agent_run,
            verifier_run: PhaseRun::default(),
            image: image.to_owned(),
            files: task.files.clone(),
            notes: task.config.notes.clone(),
            agent_log: None,
        }
    }
}

/// The verifier phase, after the agent's: `tests/` copied in, `test.sh` run under its
/// limit, the reward read. `agent_end` is the outcome when a reward is found (how the
/// agent phase ended: `reward`, or the limit that ended it).
///
/// # Errors
/// The runtime failed.
pub fn verify(c: &mut dyn TrialContainer, task: &Loaded, mut record: TrialRecord, agent_end: Outcome) -> Result<TrialRecord, String> {
    let cfg = &task.config;
    c.set_network(task.verifier_network())?;
    let start = Instant::now();
    c.copy_in(&task.dir.join("tests"), "/tests")?;
    let mut env = vec![("TEST_DIR".to_owned(), "/tests".to_owned())];
    env.extend(cfg.verifier_env.iter().cloned());
    let mut verifier_run = c.exec("bash /tests/test.sh", secs(cfg.verifier_timeout_sec), &env)?;
    verifier_run.seconds = start.elapsed().as_secs_f64();
    record.verifier_run = verifier_run;
    if record.verifier_run.timed_out {
        record.outcome = Outcome::VerifierTimeout;
        record.verifier_problem = Some(format!("test.sh ran past [verifier].timeout_sec = {} s", cfg.verifier_timeout_sec));
        return Ok(record);
    }
    let mut found = None;
    for file in ["reward.json", "reward.txt"] {
        if let Some(bytes) = c.read_file(&format!("/logs/verifier/{file}"), REWARD_CAP)? {
            found = Some((file, bytes));
            break;
        }
    }
    match found {
        None => {
            record.outcome = Outcome::VerifierError;
            record.verifier_problem = Some("test.sh wrote neither /logs/verifier/reward.json nor /logs/verifier/reward.txt".into());
        }
        Some((file, bytes)) => {
            record.reward_file = Some(file.to_owned());
            match parse_reward(file, &bytes) {
                Ok((reward, named)) => {
                    record.reward = Some(reward);
                    record.rewards = named;
                    record.outcome = agent_end;
                }
                Err(e) => {
                    record.outcome = Outcome::VerifierError;
                    record.verifier_problem = Some(e);
                }
            }
        }
    }
    Ok(record)
}

/// The turns of a model-driven agent as text: each answer, its reasoning, each call and
/// what the command printed (escaped), and where a replay from the cache stopped.
fn agent_turns(out: &mut String, log: &super::terminal::AgentLog) {
    let esc = |s: &str| crate::text::terminal(s).into_owned();
    let block = |out: &mut String, text: &str| {
        for line in esc(text).lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    };
    out.push_str(&format!(
        "## agent: {} ({}, {} turn(s), ended: {}, {:.1} s, {} input + {} output tokens)\n\n",
        log.config.name,
        if log.config.tools { "native tool calls" } else { "text fallback" },
        log.turns.len(),
        log.end.as_str(),
        log.seconds,
        log.input_tokens,
        log.output_tokens
    ));
    match (log.replayed_turns, log.diverged_at) {
        (0, _) => {}
        (n, Some(at)) => out.push_str(&format!(
            "replay: {n} turn(s) read from the cache; turn {at} was sent to the model (its conversation differed from the cached trial's: a command's output changed, or the earlier trial had stopped there)\n\n"
        )),
        (n, None) => out.push_str(&format!("replay: all {n} turn(s) read from the cache\n\n")),
    }
    for t in &log.turns {
        out.push_str(&format!(
            "### turn {}{} ({}, {} + {} tokens)\n\n",
            t.turn,
            if t.replayed { " (replayed from the cache)" } else { "" },
            esc(&t.finish_reason),
            t.input_tokens,
            t.output_tokens
        ));
        if let Some(r) = t.reasoning.as_deref().filter(|r| !r.trim().is_empty()) {
            out.push_str("reasoning:\n");
            block(out, r);
        }
        if !t.text.trim().is_empty() {
            out.push_str("text:\n");
            block(out, &t.text);
        }
        for c in &t.calls {
            let shown = match (c.name.as_str(), c.arguments.get("command").and_then(serde_json::Value::as_str)) {
                ("bash", Some(cmd)) => format!("$ {cmd}"),
                _ => format!("{}({})", c.name, c.arguments),
            };
            out.push_str(&format!("call{}:\n", if t.native { "" } else { " (from a ```bash block)" }));
            block(out, &shown);
            out.push_str("result:\n");
            block(out, &c.reply);
        }
        if let Some(n) = &t.note {
            out.push_str(&format!("note to the model: {}\n", esc(n)));
        }
        out.push('\n');
    }
}

/// A trial record as text people read: the agent's output, the verifier's, the reward.
/// Container output is data: every control character is escaped.
#[must_use]
pub fn transcript(record: &TrialRecord) -> String {
    let esc = |s: &str| crate::text::terminal(s).into_owned();
    let mut out = format!("# Harbor trial: agent `{}` in {}\n\n", record.agent, record.image);
    let phase = |out: &mut String, title: &str, r: &PhaseRun| {
        let code = r.exit_code.map_or_else(|| "none".to_owned(), |c| c.to_string());
        out.push_str(&format!("## {title} (exit {code}{}, {:.1} s)\n\n", if r.timed_out { ", TIMED OUT" } else { "" }, r.seconds));
        if r.output.trim().is_empty() {
            out.push_str("(no output)\n");
        } else {
            out.push_str(&esc(&r.output));
            if !r.output.ends_with('\n') {
                out.push('\n');
            }
        }
        out.push('\n');
    };
    match (&record.agent_log, &record.agent_run) {
        (Some(log), _) => agent_turns(&mut out, log),
        (None, Some(r)) => phase(&mut out, "agent", r),
        (None, None) => out.push_str("## agent\n\n(nop: the agent did nothing)\n\n"),
    }
    phase(&mut out, "verifier", &record.verifier_run);
    out.push_str(&format!("## outcome: {}\n\n", record.outcome.as_str()));
    match record.reward {
        Some(r) => out.push_str(&format!("reward {r} (from {})\n", record.reward_file.as_deref().unwrap_or("?"))),
        None => out.push_str("no reward\n"),
    }
    for (k, v) in &record.rewards {
        out.push_str(&format!("  {} = {v}\n", esc(k)));
    }
    if let Some(p) = &record.verifier_problem {
        out.push_str(&format!("{}\n", esc(p)));
    }
    for n in &record.notes {
        out.push_str(&format!("note: {}\n", esc(n)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container that answers from a script: each exec's result by its command's prefix,
    /// files by path.
    #[derive(Default)]
    struct Fake {
        execs: Vec<String>,
        copies: Vec<String>,
        files: BTreeMap<String, Vec<u8>>,
        solve: PhaseRun,
        test: PhaseRun,
    }

    impl TrialContainer for Fake {
        fn exec(&mut self, script: &str, _timeout: Duration, _env: &[(String, String)]) -> Result<PhaseRun, String> {
            self.execs.push(script.to_owned());
            Ok(if script.contains("solve.sh") {
                self.solve.clone()
            } else if script.contains("test.sh") {
                self.test.clone()
            } else {
                PhaseRun { exit_code: Some(0), ..PhaseRun::default() }
            })
        }
        fn copy_in(&mut self, _host_dir: &Path, dest: &str) -> Result<(), String> {
            self.copies.push(dest.to_owned());
            Ok(())
        }
        fn read_file(&mut self, path: &str, _max: usize) -> Result<Option<Vec<u8>>, String> {
            Ok(self.files.get(path).cloned())
        }
        fn set_network(&mut self, on: bool) -> Result<(), String> {
            self.execs.push(format!("network {on}"));
            Ok(())
        }
    }

    fn loaded() -> Loaded {
        Loaded {
            dir: std::path::PathBuf::from("/nonexistent"),
            config: super::super::config::parse("").unwrap(),
            instruction: String::new(),
            parts: BTreeMap::new(),
            files: BTreeMap::new(),
            env: super::super::task::EnvSettings::default(),
            image_tag: "evalgrid-harbor:0".into(),
            reward_columns: Vec::new(),
        }
    }

    #[test]
    fn rewards_parse_like_harbor() {
        assert_eq!(parse_reward("reward.txt", b"1\n").unwrap().0, 1.0);
        assert_eq!(parse_reward("reward.txt", b" 0.25 ").unwrap().0, 0.25);
        assert!(parse_reward("reward.txt", b"").unwrap_err().contains("empty"));
        assert!(parse_reward("reward.txt", b"yes").is_err());
        let (r, named) = parse_reward("reward.json", br#"{"reward": 0.5, "tests_passed": 3}"#).unwrap();
        assert_eq!((r, named.len()), (0.5, 2));
        assert_eq!(parse_reward("reward.json", br#"{"accuracy": 0.75}"#).unwrap().0, 0.75);
        assert!(parse_reward("reward.json", br#"{"a": "high"}"#).is_err());
        assert!(parse_reward("reward.json", b"[1]").is_err());
    }

    #[test]
    fn json_first_then_txt_and_outcomes() {
        let task = loaded();
        let mut c = Fake::default();
        c.files.insert("/logs/verifier/reward.txt".into(), b"0".to_vec());
        c.files.insert("/logs/verifier/reward.json".into(), br#"{"reward": 1}"#.to_vec());
        let r = run(&mut c, &task, "nop", "img").unwrap();
        assert_eq!((r.outcome, r.reward, r.reward_file.as_deref()), (Outcome::Reward, Some(1.0), Some("reward.json")));
        assert!(!c.execs.iter().any(|e| e.contains("solve.sh")), "nop runs nothing");
        // Unsaid in task.toml: the agent phase offline, the verifier online (as Harbor).
        let nets: Vec<&String> = c.execs.iter().filter(|e| e.starts_with("network")).collect();
        assert_eq!(nets, ["network false", "network true"]);
        assert_eq!(c.copies, ["/tests"]);

        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("solution")).unwrap();
        let with_solution = Loaded { dir: tmp.path().to_path_buf(), ..loaded() };
        let mut c = Fake { solve: PhaseRun { timed_out: true, ..PhaseRun::default() }, ..Fake::default() };
        c.files.insert("/logs/verifier/reward.txt".into(), b"0".to_vec());
        let r = run(&mut c, &with_solution, "oracle", "img").unwrap();
        assert_eq!(c.copies, ["/solution", "/tests"]);
        assert_eq!((r.outcome, r.reward), (Outcome::AgentTimeout, Some(0.0)));

        let mut c = Fake { test: PhaseRun { timed_out: true, ..PhaseRun::default() }, ..Fake::default() };
        c.files.insert("/logs/verifier/reward.txt".into(), b"1".to_vec());
        let r = run(&mut c, &task, "nop", "img").unwrap();
        assert_eq!((r.outcome, r.reward), (Outcome::VerifierTimeout, None));

        let mut c = Fake::default();
        let r = run(&mut c, &task, "nop", "img").unwrap();
        assert_eq!((r.outcome, r.reward), (Outcome::VerifierError, None));
        c.files.insert("/logs/verifier/reward.txt".into(), b"pass".to_vec());
        let r = run(&mut c, &task, "nop", "img").unwrap();
        assert_eq!(r.outcome, Outcome::VerifierError);
        assert!(transcript(&r).contains("not a number"));
    }

    #[test]
    fn transcript_escapes_container_output() {
        let mut c = Fake { test: PhaseRun { output: "\u{1b}[2Jgotcha\n".into(), exit_code: Some(0), ..PhaseRun::default() }, ..Fake::default() };
        c.files.insert("/logs/verifier/reward.txt".into(), b"1".to_vec());
        let r = run(&mut c, &loaded(), "nop", "img").unwrap();
        let t = transcript(&r);
        assert!(!t.contains('\u{1b}') && t.contains("gotcha"), "{t}");
    }
}
