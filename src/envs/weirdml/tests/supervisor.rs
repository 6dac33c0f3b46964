//! The shell supervisor of bubblewrap runs (sh + prlimit + setpriv, no second interpreter):
//! the submission is the only interpreter in its pid namespace and still gets exactly its
//! environment, limits, uid and no groups; the hand-back reads as its uid and caps the size.

use std::time::Duration;

use crate::envs::weirdml::test_support::{run, small_config};
use crate::sandbox::{BackendChoice, Predictions, Sandbox};

const PROBE: &str = r"import os, resource, sys
comms = []
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            comms.append(open('/proc/%s/comm' % p).read().strip())
        except OSError:
            pass
print('interpreters', sum(c.startswith('python') for c in comms))
print('parent', open('/proc/%d/comm' % os.getppid()).read().strip())
print('env', ' '.join(sorted(os.environ)))
for name in ['CPU', 'CORE', 'AS', 'NPROC', 'FSIZE', 'NOFILE']:
    print(name, *resource.getrlimit(getattr(resource, 'RLIMIT_' + name)))
print('ids', len(set(os.getresuid())), len(set(os.getresgid())), os.getuid() != 0, os.getgroups())
print('flags', sys.flags.isolated, sys.flags.no_site, sys.flags.dont_write_bytecode)
print('fds', len(os.listdir('/proc/self/fd')))
fd = os.open('results/test_preds.txt', os.O_CREAT | os.O_WRONLY, 0o600)
os.write(fd, b'1\n0\n')
";

/// Descriptors above stderr that this process holds without close-on-exec (from its parent).
fn inherited_fds() -> usize {
    let fds = std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd");
    let fd_numbers: Vec<u32> = fds.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|&fd| fd > 2).collect();
    let keeps = |fd: &u32| {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
        flags.is_some_and(|f| f & 0o2_000_000 == 0)
    };
    fd_numbers.iter().filter(|fd| keeps(fd)).count()
}

fn bwrap(cfg: crate::sandbox::SandboxConfig) -> Option<Sandbox> {
    Sandbox::new(cfg).map_err(|e| eprintln!("SKIP supervisor test without bubblewrap: {e}")).ok()
}

#[test]
fn a_supervised_submission_is_the_only_interpreter_and_keeps_its_jail() {
    let cfg = small_config(BackendChoice::Bwrap);
    let Some(sb) = bwrap(cfg.clone()) else { return };
    let r = run(&sb, PROBE, Duration::from_secs(20));
    assert!(r.exit.success(), "{}", r.output_view);
    let out = &r.output_view;
    let line = |key: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{key} "))).unwrap_or_else(|| panic!("no {key}: {out}")).to_string();
    // One interpreter: the supervisor is a shell, not a Python launcher.
    assert_eq!(line("interpreters"), "1", "{out}");
    assert!(["sh", "dash", "bash"].contains(&line("parent").as_str()), "{out}");
    // Exactly the submission's environment: nothing of evalgrid's, nothing the shell adds.
    let allowed = [
        "CUDA_VISIBLE_DEVICES",
        "EVALGRID_SANDBOX_TOKEN",
        "HOME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "MKL_NUM_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "TMPDIR",
    ];
    let env = line("env");
    let stray: Vec<&str> = env.split(' ').filter(|k| !allowed.contains(k)).collect();
    assert!(stray.is_empty(), "unexpected variables {stray:?} in {env}");
    // The configured limits, set before the uid drop (so the hard limits bind too).
    let l = &cfg.limits;
    let both = |v: u64| format!("{v} {v}");
    assert_eq!(line("CORE"), "0 0");
    assert_eq!(line("AS"), both(l.address_space_bytes.unwrap_or_default()));
    assert_eq!(line("FSIZE"), both(l.file_size_bytes.unwrap_or_default()));
    assert_eq!(line("NOFILE"), both(l.open_files.unwrap_or_default()));
    assert!(!line("CPU").starts_with("-1"), "{out}");
    if sb.report().per_run_uid {
        // Without a uid of its own the limit is raised by the caller's task count.
        assert_eq!(line("NPROC"), both(l.processes.unwrap_or_default()));
        assert_eq!(line("ids"), "1 1 True []", "{out}");
    }
    // A normal interpreter (site-packages importable), not the launcher's -I -S one.
    assert_eq!(line("flags"), "0 0 1");
    // stdin, the merged stdout + stderr, listdir's own, and whatever this test process was
    // given without close-on-exec (passed through by every launcher): not the hand-back pipe.
    assert_eq!(line("fds"), (4 + inherited_fds()).to_string(), "{out}");
    // A 0600 file is read as its owner's uid (the supervisor holds no file capability).
    assert_eq!(r.predictions, Predictions::Present(b"1\n0\n".to_vec()));
}

#[test]
fn a_signal_is_reported_as_before_without_the_shell_saying_so() {
    let Some(sb) = bwrap(small_config(BackendChoice::Bwrap)) else { return };
    let r = run(&sb, "import os\nprint('before')\nos.kill(os.getpid(), 11)\n", Duration::from_secs(20));
    assert_eq!((r.exit.code, r.exit.signal), (Some(139), Some(11)), "{r:?}");
    assert_eq!(r.output_view, "before\n", "the supervisor adds nothing to the log");
}

#[test]
fn a_result_over_the_cap_is_rejected() {
    let mut cfg = small_config(BackendChoice::Bwrap);
    cfg.max_predictions_bytes = 8;
    let Some(sb) = bwrap(cfg) else { return };
    let r = run(&sb, "open('results/test_preds.txt', 'w').write('0123456789')\n", Duration::from_secs(20));
    assert!(r.exit.success(), "{}", r.output_view);
    assert_eq!(r.predictions, Predictions::Invalid("results/test_preds.txt is larger than 8 bytes".into()));
    let r = run(&sb, "open('results/test_preds.txt', 'w').write('01234567')\n", Duration::from_secs(20));
    assert_eq!(r.predictions, Predictions::Present(b"01234567".to_vec()));
}
