//! Execution slots: one submission per GPU at a time (`CUDA_VISIBLE_DEVICES` with
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so indices match `nvidia-smi`), or, without GPUs, a
//! configurable number of CPU slots with `OMP_NUM_THREADS=1` (spec §3 "CPU test mode").
//! GPUs come from `nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader`
//! (configurable path/PATH, so tests can fake it) or from an explicit index list.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::process::{Killer, run_probe, which};

/// One GPU as `nvidia-smi` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// `nvidia-smi` index (PCI bus order).
    pub index: u32,
    /// Product name, e.g. `NVIDIA TITAN V`.
    pub name: String,
    /// Driver version string.
    pub driver_version: String,
}

/// GPU discovery failures.
#[derive(Debug, Error)]
pub enum GpuError {
    /// `nvidia-smi` ran but failed or timed out.
    #[error("nvidia-smi failed ({status}): {output}")]
    NvidiaSmi {
        /// Exit status text or "timeout".
        status: String,
        /// Its (truncated) output.
        output: String,
    },
    /// A CSV line did not have the three expected fields.
    #[error("cannot parse nvidia-smi line {0:?}")]
    Parse(String),
    /// A configured GPU index is not among the discovered GPUs.
    #[error("configured GPU index {0} not reported by nvidia-smi")]
    UnknownIndex(u32),
    /// Spawning `nvidia-smi` failed.
    #[error("running nvidia-smi: {0}")]
    Io(#[from] std::io::Error),
}

/// Parses `index, name, driver_version` lines (blank lines ignored).
pub fn parse_gpu_csv(text: &str) -> Result<Vec<GpuInfo>, GpuError> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [index, name, driver] = fields.as_slice() else {
            return Err(GpuError::Parse(line.to_string()));
        };
        let index = index.parse().map_err(|_| GpuError::Parse(line.to_string()))?;
        out.push(GpuInfo { index, name: (*name).to_string(), driver_version: (*driver).to_string() });
    }
    Ok(out)
}

/// Which GPUs to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GpuSelection {
    /// Every GPU `nvidia-smi` lists; CPU slots when there is none (or no `nvidia-smi`).
    #[default]
    Auto,
    /// Never use GPUs (CPU test mode).
    Cpu,
    /// Exactly these indices (names filled in from `nvidia-smi` when it is available).
    Indices(Vec<u32>),
}

/// Pool configuration (part of the executor config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// `nvidia-smi` name or path.
    pub nvidia_smi: PathBuf,
    /// PATH used to resolve `nvidia-smi` (default: this process's PATH); not serialised.
    #[serde(skip)]
    pub path_var: Option<OsString>,
    /// GPU selection.
    pub selection: GpuSelection,
    /// Number of concurrent CPU slots when no GPU is used.
    pub cpu_slots: usize,
    /// `OMP_NUM_THREADS` (and MKL/OpenBLAS) for CPU slots.
    pub cpu_threads: usize,
    /// Deadline for the `nvidia-smi` call.
    pub discover_timeout_s: f64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self { nvidia_smi: PathBuf::from("nvidia-smi"), path_var: None, selection: GpuSelection::Auto, cpu_slots: 1, cpu_threads: 1, discover_timeout_s: 20.0 }
    }
}

/// Lists GPUs via `nvidia-smi`; `Ok(empty)` when the binary is not found.
pub fn discover(cfg: &PoolConfig) -> Result<Vec<GpuInfo>, GpuError> {
    let Some(smi) = which(&cfg.nvidia_smi, cfg.path_var.as_deref()) else {
        return Ok(Vec::new());
    };
    let mut cmd = Command::new(smi);
    cmd.args(["--query-gpu=index,name,driver_version", "--format=csv,noheader"]);
    let timeout = Duration::try_from_secs_f64(cfg.discover_timeout_s).unwrap_or(Duration::from_secs(20));
    // `kill` from the normal PATH: `path_var` only redirects the nvidia-smi lookup.
    let killer = Killer::new("kill".as_ref(), None);
    let (status, text, timed_out) = run_probe(cmd, timeout, &killer)?;
    if timed_out || !status.success() {
        let status = if timed_out { "timeout".to_string() } else { status.to_string() };
        return Err(GpuError::NvidiaSmi { status, output: text.chars().take(2000).collect() });
    }
    parse_gpu_csv(&text)
}

/// The GPUs this process was given: under Slurm (`--gres=gpu:k`) or any scheduler that
/// sets `CUDA_VISIBLE_DEVICES`, only those indices; set but empty means none. Without the
/// variable, or with entries that are not indices (UUIDs), every GPU found.
#[must_use]
pub fn visible(gpus: Vec<GpuInfo>, cuda_visible_devices: Option<&str>) -> Vec<GpuInfo> {
    let Some(list) = cuda_visible_devices.map(str::trim) else { return gpus };
    if list.is_empty() {
        return Vec::new();
    }
    let Ok(indices) = list.split(',').map(|i| i.trim().parse::<u32>()).collect::<Result<Vec<u32>, _>>() else { return gpus };
    gpus.into_iter().filter(|g| indices.contains(&g.index)).collect()
}

/// An execution slot: one GPU, or one CPU share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Slot {
    /// A whole GPU.
    Gpu(GpuInfo),
    /// A CPU slot.
    Cpu {
        /// Slot number.
        id: usize,
        /// Thread count exported to OpenMP/BLAS.
        threads: usize,
    },
}

impl Slot {
    /// Environment the submission gets for this slot.
    pub fn env(&self) -> Vec<(String, String)> {
        match self {
            Slot::Gpu(g) => vec![("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()), ("CUDA_VISIBLE_DEVICES".into(), g.index.to_string())],
            Slot::Cpu { threads, .. } => {
                let t = threads.max(&1).to_string();
                vec![
                    ("CUDA_VISIBLE_DEVICES".into(), String::new()),
                    ("OMP_NUM_THREADS".into(), t.clone()),
                    ("MKL_NUM_THREADS".into(), t.clone()),
                    ("OPENBLAS_NUM_THREADS".into(), t),
                ]
            }
        }
    }

    /// Whether this is a GPU slot (device nodes are bound; address-space limit skipped).
    pub fn is_gpu(&self) -> bool {
        matches!(self, Slot::Gpu(_))
    }

    /// Short label for records, e.g. `gpu0 (NVIDIA TITAN V)` or `cpu1`.
    pub fn label(&self) -> String {
        match self {
            Slot::Gpu(g) => format!("gpu{} ({})", g.index, g.name),
            Slot::Cpu { id, .. } => format!("cpu{id}"),
        }
    }
}

#[derive(Debug)]
struct Inner {
    slots: Vec<Slot>,
    busy: Mutex<Vec<bool>>,
    freed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Vec<bool>> {
        self.busy.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Blocking slot pool; clones share the same slots.
#[derive(Debug, Clone)]
pub struct GpuPool {
    inner: Arc<Inner>,
}

/// Exclusive use of one slot until dropped.
#[derive(Debug)]
pub struct Lease {
    inner: Arc<Inner>,
    index: usize,
}

impl GpuPool {
    /// Builds the pool from config: discovered/selected GPUs, else `cpu_slots` CPU slots.
    pub fn new(cfg: &PoolConfig) -> Result<Self, GpuError> {
        let gpus = match &cfg.selection {
            GpuSelection::Cpu => Vec::new(),
            GpuSelection::Auto => visible(discover(cfg)?, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
            GpuSelection::Indices(ix) => {
                let found = discover(cfg).unwrap_or_default();
                let mut out = Vec::new();
                for &i in ix {
                    match found.iter().find(|g| g.index == i) {
                        Some(g) => out.push(g.clone()),
                        None if found.is_empty() => out.push(GpuInfo { index: i, name: "unknown".into(), driver_version: "unknown".into() }),
                        None => return Err(GpuError::UnknownIndex(i)),
                    }
                }
                out
            }
        };
        let slots = if gpus.is_empty() {
            (0..cfg.cpu_slots.max(1)).map(|id| Slot::Cpu { id, threads: cfg.cpu_threads.max(1) }).collect()
        } else {
            gpus.into_iter().map(Slot::Gpu).collect()
        };
        Ok(Self::from_slots(slots))
    }

    /// Pool over explicit slots (tests, custom setups); an empty list gets one CPU slot.
    pub fn from_slots(mut slots: Vec<Slot>) -> Self {
        if slots.is_empty() {
            slots.push(Slot::Cpu { id: 0, threads: 1 });
        }
        let busy = Mutex::new(vec![false; slots.len()]);
        Self { inner: Arc::new(Inner { slots, busy, freed: Condvar::new() }) }
    }

    /// All slots.
    pub fn slots(&self) -> &[Slot] {
        &self.inner.slots
    }

    /// The GPUs in the pool (provenance).
    pub fn gpus(&self) -> Vec<GpuInfo> {
        let gpus = self.inner.slots.iter().filter_map(|s| match s {
            Slot::Gpu(g) => Some(g.clone()),
            Slot::Cpu { .. } => None,
        });
        gpus.collect()
    }

    /// Blocks until a slot is free and leases it.
    pub fn acquire(&self) -> Lease {
        let mut busy = self.inner.lock();
        loop {
            if let Some(i) = busy.iter().position(|b| !b) {
                busy[i] = true;
                return Lease { inner: Arc::clone(&self.inner), index: i };
            }
            busy = self.inner.freed.wait(busy).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Like [`GpuPool::acquire`] but gives up after `timeout`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<Lease> {
        let deadline = Instant::now() + timeout;
        let mut busy = self.inner.lock();
        loop {
            if let Some(i) = busy.iter().position(|b| !b) {
                busy[i] = true;
                return Some(Lease { inner: Arc::clone(&self.inner), index: i });
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            busy = match self.inner.freed.wait_timeout(busy, left) {
                Ok((b, _)) => b,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

impl Lease {
    /// The leased slot.
    pub fn slot(&self) -> &Slot {
        &self.inner.slots[self.index]
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut busy = self.inner.lock();
        busy[self.index] = false;
        drop(busy);
        self.inner.freed.notify_one();
    }
}

#[cfg(test)]
mod visible_tests {
    use super::*;

    #[test]
    fn only_the_gpus_the_scheduler_gave_are_used() {
        let gpus: Vec<GpuInfo> = (0..4).map(|index| GpuInfo { index, name: format!("g{index}"), driver_version: "1".into() }).collect();
        let ids = |v: Vec<GpuInfo>| v.into_iter().map(|g| g.index).collect::<Vec<_>>();
        assert_eq!(ids(visible(gpus.clone(), None)), vec![0, 1, 2, 3]);
        assert_eq!(ids(visible(gpus.clone(), Some("2,3"))), vec![2, 3], "Slurm gave two of the node's GPUs");
        assert_eq!(ids(visible(gpus.clone(), Some(""))), Vec::<u32>::new(), "set but empty: none");
        assert_eq!(ids(visible(gpus.clone(), Some("GPU-1234abcd"))), vec![0, 1, 2, 3], "UUIDs are not filtered here");
    }
}
