//! The container side of a trial, through the one container module
//! ([`crate::sandbox::container`]): the task's image (one per distinct `environment/`
//! content, tagged `evalgrid-harbor:<hash16>`), a labelled container with the task's cpus,
//! memory and network, torn down whatever happens. A missing runtime, a failed build or a
//! container that dies is an errored trial (`environment_error`), never a reward, and so
//! never cached as an answer.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::task::{Loaded, Pull, RuntimeName};
use super::trial::{self, OUTPUT_CAP, PhaseRun, TrialContainer, TrialRecord};
use crate::exec::StepError;
use crate::sandbox::container::{self as ct, Container, ContainerError, ContainerSpec, ImageSpec, PullPolicy, RuntimeChoice, RuntimeInfo};

/// The message every errored trial's failure starts with (counted apart from rewards).
pub const ENVIRONMENT_ERROR: &str = "environment_error";

/// A trial's environment failure, as the cell's error.
fn env_error(e: impl std::error::Error + Send + Sync + 'static) -> StepError {
    StepError::episode_in(ENVIRONMENT_ERROR, e)
}

/// The container module's name for an entry's `runtime`.
#[must_use]
pub fn choice(r: RuntimeName) -> RuntimeChoice {
    match r {
        RuntimeName::Auto => RuntimeChoice::Auto,
        RuntimeName::Podman => RuntimeChoice::Podman,
        RuntimeName::Docker => RuntimeChoice::Docker,
    }
}

/// The runtime for `r` (found once per process and choice).
fn runtime(r: RuntimeName) -> Result<RuntimeInfo, StepError> {
    static FOUND: OnceLock<Mutex<Vec<(RuntimeName, RuntimeInfo)>>> = OnceLock::new();
    let found = FOUND.get_or_init(Mutex::default);
    if let Some((_, rt)) = found.lock().ok().and_then(|m| m.iter().find(|(k, _)| *k == r).cloned()) {
        return Ok(rt);
    }
    let rt = ct::detect(choice(r)).map_err(env_error)?;
    if let Ok(mut m) = found.lock() {
        m.push((r, rt.clone()));
    }
    Ok(rt)
}

/// Removes, once per process and cache, the containers a killed run left behind.
fn reap_once(rt: &RuntimeInfo, cache_label: &str) {
    static DONE: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let done = DONE.get_or_init(Mutex::default);
    let Ok(mut d) = done.lock() else { return };
    if d.iter().any(|l| l == cache_label) {
        return;
    }
    d.push(cache_label.to_owned());
    match ct::reap_orphans(rt, cache_label) {
        Ok(0) => {}
        Ok(n) => tracing::info!("removed {n} container(s) left by a run that is gone"),
        Err(e) => tracing::warn!("could not look for containers left by earlier runs: {e}"),
    }
}

/// A started container and whether it is on the runtime's default network now.
pub struct Live {
    c: Container,
    rt: RuntimeInfo,
    connected: bool,
}

impl Live {
    /// Runs `script` with its merged output cut to `cap` bytes (head and tail).
    ///
    /// # Errors
    /// The runtime failed.
    pub fn exec_capped(&self, script: &str, timeout: Duration, cap: usize, env: &[(String, String)]) -> Result<PhaseRun, String> {
        let o = self.c.exec(script, timeout, cap, env).map_err(|e| e.to_string())?;
        Ok(PhaseRun { output: o.text(), exit_code: o.exit_code, timed_out: o.timed_out, seconds: o.wall_s })
    }
}

impl TrialContainer for Live {
    fn exec(&mut self, script: &str, timeout: Duration, env: &[(String, String)]) -> Result<PhaseRun, String> {
        self.exec_capped(script, timeout, OUTPUT_CAP, env)
    }
    fn copy_in(&mut self, host_dir: &Path, dest: &str) -> Result<(), String> {
        self.c.copy_in(host_dir, dest).map_err(|e| e.to_string())
    }
    fn read_file(&mut self, path: &str, max: usize) -> Result<Option<Vec<u8>>, String> {
        self.c.read_file(path, max).map_err(|e| e.to_string())
    }
    /// `network disconnect` / `connect` on the runtime's default bridge (`podman` / `bridge`).
    fn set_network(&mut self, on: bool) -> Result<(), String> {
        if on == self.connected {
            return Ok(());
        }
        let bridge = if self.rt.runtime == ct::Runtime::Podman { "podman" } else { "bridge" };
        let verb = if on { "connect" } else { "disconnect" };
        let out = std::process::Command::new(&self.rt.binary)
            .args(["network", verb, bridge, self.c.id()])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("running {} network {verb}: {e}", self.rt.runtime))?;
        if !out.status.success() {
            return Err(format!("{} network {verb} {bridge}: {}", self.rt.runtime, String::from_utf8_lossy(&out.stderr).trim()));
        }
        self.connected = on;
        Ok(())
    }
}

/// Where build logs of a cache are kept (beside its entries, never inside a container).
#[must_use]
pub fn build_log(cache_root: &Path, tag: &str) -> PathBuf {
    cache_root.join("harbor-builds").join(format!("{}.log", tag.replace([':', '/'], "_")))
}

/// The image a task's trials start from: its tag if present, else its prebuilt
/// `docker_image` (pulled only under `pull: missing`), else a build of `environment/`.
///
/// # Errors
/// `environment_error`: no runtime, or the image could not be had.
pub fn image(rt: &RuntimeInfo, task: &Loaded, cache_root: &Path) -> Result<ct::Image, StepError> {
    let spec = ImageSpec {
        context_dir: task.dir.join("environment"),
        dockerfile: task.dir.join("environment/Dockerfile"),
        tag: task.image_tag.clone(),
        prebuilt: task.config.docker_image.clone(),
        pull: if task.env.pull == Pull::Missing { PullPolicy::Missing } else { PullPolicy::Never },
        build_timeout: Duration::from_secs_f64(task.config.build_timeout_sec),
    };
    if task.config.docker_image.is_some() && !spec.dockerfile.is_file() {
        // Prebuilt only: nothing to build from.
        if !ct::image_exists(rt, spec.prebuilt.as_deref().unwrap_or_default()).map_err(env_error)? && spec.pull == PullPolicy::Never {
            return Err(env_error(ContainerError::Command {
                what: format!("finding image {}", spec.prebuilt.as_deref().unwrap_or_default()),
                detail: "it is not present, the task has no environment/Dockerfile, and `pull: never` forbids a pull".into(),
            }));
        }
    }
    ct::ensure_image(rt, &spec, &build_log(cache_root, &task.image_tag)).map_err(env_error)
}

/// Runs one trial of `agent` on `task` in a fresh container labelled for this run and
/// cache; the container is removed when the trial ends, however it ends.
///
/// # Errors
/// `environment_error`: no runtime, no image, a container that would not start or died.
pub fn run_trial(task: &Loaded, agent: &str, cache_root: &Path) -> Result<TrialRecord, StepError> {
    let (mut live, image) = start(task, cache_root)?;
    let result = trial::run(&mut live, task, agent, &image);
    drop(live);
    result.map_err(|e| env_error(std::io::Error::other(e)))
}

/// A labelled container from the task's image, with its cpus, memory and network, and the
/// image's reference; removed when the [`Live`] is dropped.
///
/// # Errors
/// `environment_error`: no runtime, no image, a container that would not start.
pub fn start(task: &Loaded, cache_root: &Path) -> Result<(Live, String), StepError> {
    let rt = runtime(task.env.runtime)?;
    let cache_label = ct::cache_label_for(cache_root);
    reap_once(&rt, &cache_label);
    let image = image(&rt, task, cache_root)?;
    let spec = ContainerSpec {
        image: image.reference.clone(),
        labels: ct::labels(&format!("pid{}", std::process::id()), &cache_label),
        cpus: Some(task.config.cpus),
        memory_mb: Some(task.config.memory_mb),
        // On the bridge when either phase may use the network; each phase then connects or
        // disconnects (a container started with `--network none` can never be connected).
        network: task.network() || task.verifier_network(),
        workdir: task.config.workdir.clone(),
        ..ContainerSpec::default()
    };
    let c = Container::start(&rt, &spec).map_err(env_error)?;
    Ok((Live { c, rt, connected: spec.network }, image.reference))
}

/// A container error as the trial's (errored, never a reward).
#[must_use]
pub fn failed(e: String) -> StepError {
    env_error(std::io::Error::other(e))
}
