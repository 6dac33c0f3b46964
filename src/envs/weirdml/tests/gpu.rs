//! Slot pool: CSV parsing, discovery through a fake `nvidia-smi` on a private PATH, and six
//! concurrent sandboxed jobs on two fake GPUs that must never overlap on one GPU.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use crate::envs::weirdml::test_support::{minishapes_fixture, sandbox};
use crate::sandbox::gpu::*;
use crate::sandbox::{BackendChoice, RunSpec};

fn fake_smi(dir: &Path, body: &str) -> OsString {
    let p = dir.join("nvidia-smi");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write fake nvidia-smi");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir.as_os_str().to_os_string()
}

const TWO_GPUS: &str = "echo '0, NVIDIA Fake A, 550.54.15'\necho '1, NVIDIA Fake B, 550.54.15'";

#[test]
fn parse_csv() {
    let g = parse_gpu_csv("0, NVIDIA TITAN V, 535.1\n\n1, NVIDIA TITAN V, 535.1\n").expect("parse");
    assert_eq!(g.len(), 2);
    assert_eq!(g[1], GpuInfo { index: 1, name: "NVIDIA TITAN V".into(), driver_version: "535.1".into() });
    assert!(matches!(parse_gpu_csv("0, only two"), Err(GpuError::Parse(_))));
    assert!(matches!(parse_gpu_csv("x, a, b"), Err(GpuError::Parse(_))));
}

#[test]
fn discovery_fallbacks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = PoolConfig { path_var: Some(dir.path().as_os_str().to_os_string()), cpu_slots: 3, ..PoolConfig::default() };
    let pool = GpuPool::new(&cfg).expect("no nvidia-smi is not an error");
    assert_eq!(pool.slots().len(), 3);
    assert!(pool.slots().iter().all(|s| !s.is_gpu()));
    let env = pool.slots()[0].env();
    assert!(env.contains(&("OMP_NUM_THREADS".into(), "1".into())));
    assert!(env.contains(&("CUDA_VISIBLE_DEVICES".into(), String::new())));

    let path = fake_smi(dir.path(), "echo 'NVIDIA-SMI has failed' >&2\nexit 9");
    let cfg = PoolConfig { path_var: Some(path), ..PoolConfig::default() };
    assert!(matches!(GpuPool::new(&cfg), Err(GpuError::NvidiaSmi { .. })));
    let cfg = PoolConfig { selection: GpuSelection::Cpu, ..cfg };
    assert_eq!(GpuPool::new(&cfg).expect("cpu mode never calls nvidia-smi").slots().len(), 1);
}

#[test]
fn explicit_indices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fake_smi(dir.path(), TWO_GPUS);
    let cfg = PoolConfig { path_var: Some(path), selection: GpuSelection::Indices(vec![1]), ..PoolConfig::default() };
    let pool = GpuPool::new(&cfg).expect("pool");
    assert_eq!(pool.gpus().iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), vec!["NVIDIA Fake B"]);
    let cfg = PoolConfig { selection: GpuSelection::Indices(vec![7]), ..cfg };
    assert!(matches!(GpuPool::new(&cfg), Err(GpuError::UnknownIndex(7))));
}

#[test]
fn acquire_timeout_and_release() {
    let pool = GpuPool::from_slots(vec![Slot::Cpu { id: 0, threads: 1 }]);
    let lease = pool.acquire();
    assert!(pool.acquire_timeout(std::time::Duration::from_millis(30)).is_none());
    drop(lease);
    assert!(pool.acquire_timeout(std::time::Duration::from_millis(30)).is_some());
}

#[test]
fn six_jobs_on_two_fake_gpus_never_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = fake_smi(dir.path(), TWO_GPUS);
    let pool = GpuPool::new(&PoolConfig { path_var: Some(path), ..PoolConfig::default() }).expect("pool");
    assert_eq!(pool.gpus().len(), 2);
    let sb = sandbox(BackendChoice::Bwrap).or_else(|| sandbox(BackendChoice::RlimitsOnly));
    let fx = minishapes_fixture();
    let task = &fx.task;
    let t0 = Instant::now();
    let code = "import os, time\nprint('CVD=' + os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUDA_DEVICE_ORDER'])\ntime.sleep(0.3)\n";
    let spans: Vec<(u32, f64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let pool = pool.clone();
                s.spawn(move || {
                    let lease = pool.acquire();
                    let start = t0.elapsed().as_secs_f64();
                    let Slot::Gpu(g) = lease.slot().clone() else { panic!("expected a GPU slot") };
                    match sb {
                        Some(sb) => {
                            let spec = RunSpec {
                                code,
                                data_dir: &task.data_dir,
                                predictions_file: &task.predictions_file,
                                time_limit: std::time::Duration::from_secs(20),
                                slot: lease.slot(),
                            };
                            let r = sb.run(&spec).expect("run");
                            assert_eq!(r.output_view, format!("CVD={} PCI_BUS_ID\n", g.index));
                        }
                        None => std::thread::sleep(std::time::Duration::from_millis(300)),
                    }
                    let end = t0.elapsed().as_secs_f64();
                    drop(lease);
                    (g.index, start, end)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("job thread")).collect()
    });
    assert_eq!(spans.len(), 6);
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.0 == b.0 {
                assert!(a.2 <= b.1 || b.2 <= a.1, "overlap on gpu{}: {a:?} {b:?}", a.0);
            }
        }
    }
    for gpu in [0, 1] {
        assert!(spans.iter().any(|s| s.0 == gpu), "gpu{gpu} never used");
    }
}

#[test]
fn hanging_nvidia_smi_times_out_and_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The shell running the fake has the (unique) temp dir in its command line.
    let marker = dir.path().display().to_string();
    let path = fake_smi(dir.path(), "sleep 30");
    let cfg = PoolConfig { path_var: Some(path), discover_timeout_s: 0.5, ..PoolConfig::default() };
    let start = Instant::now();
    match GpuPool::new(&cfg) {
        Err(GpuError::NvidiaSmi { status, .. }) => assert_eq!(status, "timeout"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    let left = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker)))
        .count();
    assert_eq!(left, 0, "nvidia-smi left running");
}
