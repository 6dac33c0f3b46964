//! A trial played by a model-driven agent: the container side of part 1 (image, labelled
//! container, verifier), with the `terminal` loop in between. Container commands run on
//! blocking threads; model calls stay on the async runtime, so a trial's container never
//! holds a runtime worker while a model thinks.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use super::backend::{self, Live};
use super::task::Loaded;
use super::terminal::{self, AgentChat, AgentEnd, Brief, Shell};
use super::trial::{self, Outcome, PhaseRun, TrialRecord};
use crate::exec::{BoxFuture, StepError};
use crate::spec::agent::AgentConfig;

/// The trial's container, shared between the loop's commands and the verifier.
type Shared = Arc<Mutex<Live>>;

/// Runs `f` on the container on a blocking thread.
async fn blocking<T: Send + 'static>(live: &Shared, f: impl FnOnce(&mut Live) -> Result<T, String> + Send + 'static) -> Result<T, StepError> {
    let live = Arc::clone(live);
    tokio::task::spawn_blocking(move || {
        let mut guard = live.lock().map_err(|_| "the trial's container lock was poisoned".to_owned())?;
        f(&mut guard)
    })
    .await
    .map_err(StepError::worker)?
    .map_err(backend::failed)
}

/// The loop's shell: each command through `exec`, on a blocking thread.
struct ContainerShell(Shared);

impl Shell for ContainerShell {
    fn run<'a>(&'a mut self, command: &'a str, timeout: Duration, cap: usize) -> BoxFuture<'a, Result<PhaseRun, String>> {
        let live = Arc::clone(&self.0);
        let command = command.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let guard = live.lock().map_err(|_| "the trial's container lock was poisoned".to_owned())?;
                guard.exec_capped(&command, timeout, cap, &[("DEBIAN_FRONTEND".to_owned(), "noninteractive".to_owned())])
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }
}

/// The outcome a reward is filed under, from how the agent phase ended.
fn outcome_of(end: AgentEnd) -> Outcome {
    match end {
        AgentEnd::Done => Outcome::Reward,
        AgentEnd::MaxTurns => Outcome::MaxTurns,
        AgentEnd::AgentTimeout => Outcome::AgentTimeout,
        AgentEnd::TokenLimit => Outcome::TokenLimit,
        AgentEnd::ContextExceeded => Outcome::ContextExceeded,
    }
}

/// Runs one trial of `config`'s agent, driven by `chat`, on `task`; the container is removed
/// when the trial ends, however it ends.
///
/// # Errors
/// `environment_error` (no runtime, image or container), a failed model call, a budget halt.
pub async fn run(
    task: Arc<Loaded>,
    chat: &mut dyn AgentChat,
    config: &AgentConfig,
    params: &Map<String, Value>,
    cache_root: PathBuf,
) -> Result<TrialRecord, StepError> {
    let starting = Arc::clone(&task);
    let (live, image) = tokio::task::spawn_blocking(move || backend::start(&starting, &cache_root)).await.map_err(StepError::worker)??;
    let live: Shared = Arc::new(Mutex::new(live));
    let result = drive(&task, chat, config, params, &live, &image).await;
    // The last handle removes the container: off the async threads.
    let _ = tokio::task::spawn_blocking(move || drop(live)).await;
    result
}

async fn drive(
    task: &Arc<Loaded>,
    chat: &mut dyn AgentChat,
    config: &AgentConfig,
    params: &Map<String, Value>,
    live: &Shared,
    image: &str,
) -> Result<TrialRecord, StepError> {
    let t = Arc::clone(task);
    let workdir = blocking(live, move |c| trial::begin(c, &t)).await?;
    let mut shell = ContainerShell(Arc::clone(live));
    let brief = Brief { instruction: &task.instruction, workdir: &workdir, agent_timeout_s: task.config.agent_timeout_sec };
    let log = terminal::play(chat, &mut shell, config, &brief, params).await?;
    drop(shell);
    let outcome = outcome_of(log.end);
    let mut record = TrialRecord::new(task, &config.name, image, None);
    record.agent_log = Some(log);
    let t = Arc::clone(task);
    blocking(live, move |c| trial::verify(c, &t, record, outcome)).await
}
