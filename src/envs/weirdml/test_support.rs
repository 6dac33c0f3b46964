//! Shared test fixtures: the interpreter under test (`EVALGRID_TEST_PYTHON`, default
//! `python3`), numpy detection with a clear skip message, probed-once sandboxes per backend
//! with small limits, and the seed-42 mini-shapes task written once per test binary.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use super::gpu::Slot;
use super::minishapes::MiniShapes;
use super::sandbox::{BackendChoice, Limits, RunResult, RunSpec, Sandbox, SandboxConfig};
use super::task::TaskManifest;

/// Interpreter the tests use.
pub(crate) fn python() -> PathBuf {
    std::env::var_os("EVALGRID_TEST_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// Whether numpy imports in the test interpreter (checked once).
pub(crate) fn has_numpy() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        std::process::Command::new(python())
            .args(["-c", "import numpy"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Prints the skip message and returns true when numpy is missing.
pub(crate) fn skip_without_numpy(test: &str) -> bool {
    if has_numpy() {
        return false;
    }
    eprintln!("SKIP {test}: numpy is not importable by {} (pip install numpy, or set EVALGRID_TEST_PYTHON)", python().display());
    true
}

/// Small limits so hostile tests stay fast and contained.
pub(crate) fn small_config(backend: BackendChoice) -> SandboxConfig {
    SandboxConfig {
        python: python(),
        backend,
        limits: Limits {
            cpu_time_s: None,
            address_space_bytes: Some(4 << 30),
            processes: Some(64),
            file_size_bytes: Some(64 << 20),
            open_files: Some(1024),
            tmpfs_bytes: 64 << 20,
            workspace_bytes: 64 << 20,
        },
        kill_grace_ms: 3000,
        probe_timeout_s: 20,
        ..SandboxConfig::default()
    }
}

/// Sandbox with the given backend, built once; `None` (with a message) if unavailable.
pub(crate) fn sandbox(backend: BackendChoice) -> Option<&'static Sandbox> {
    static BWRAP: OnceLock<Option<Sandbox>> = OnceLock::new();
    static RLIMITS: OnceLock<Option<Sandbox>> = OnceLock::new();
    let cell = match backend {
        BackendChoice::Bwrap => &BWRAP,
        _ => &RLIMITS,
    };
    let backend = if backend == BackendChoice::Auto { BackendChoice::RlimitsOnly } else { backend };
    cell.get_or_init(|| match Sandbox::new(small_config(backend)) {
        Ok(sb) => {
            eprintln!("sandbox {backend:?}: {:?}", sb.report());
            Some(sb)
        }
        Err(e) => {
            // CI on hosts where bwrap must work sets EVALGRID_REQUIRE_BWRAP=1 so a broken
            // backend fails loudly instead of being skipped.
            let required = std::env::var_os("EVALGRID_REQUIRE_BWRAP").is_some_and(|v| v == "1");
            assert!(!(required && backend == BackendChoice::Bwrap), "bwrap required but unavailable: {e}");
            eprintln!("SKIP sandbox backend {backend:?}: {e}");
            None
        }
    })
    .as_ref()
}

/// Every available backend (bwrap first).
pub(crate) fn backends() -> Vec<&'static Sandbox> {
    [BackendChoice::Bwrap, BackendChoice::RlimitsOnly].into_iter().filter_map(sandbox).collect()
}

/// A freshly written seed-42 mini-shapes task, removed when dropped.
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    /// The task (absolute paths into the temp dir).
    pub(crate) task: TaskManifest,
}

/// Writes the seed-42 mini-shapes task into a new temp dir (a few milliseconds).
pub(crate) fn minishapes_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir for mini-shapes");
    let task = MiniShapes::default().write(dir.path()).expect("writing mini-shapes test data");
    Fixture { _dir: dir, task }
}

/// Runs `code` on fresh mini-shapes data in a CPU slot.
pub(crate) fn run(sb: &Sandbox, code: &str, limit: Duration) -> RunResult {
    run_on(sb, &minishapes_fixture().task, code, limit)
}

/// Runs `code` on `task`'s data in a CPU slot.
pub(crate) fn run_on(sb: &Sandbox, task: &TaskManifest, code: &str, limit: Duration) -> RunResult {
    let slot = Slot::Cpu { id: 0, threads: 1 };
    let spec = RunSpec { code, data_dir: &task.data_dir, predictions_file: &task.predictions_file, time_limit: limit, slot: &slot };
    sb.run(&spec).expect("sandbox infrastructure")
}
