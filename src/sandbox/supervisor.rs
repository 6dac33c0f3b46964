//! The shell supervisor of a bubblewrap run: `sh` runs `prlimit` (the rlimits), `setpriv`
//! (no_new_privs, the per-run uid) and the submission, then hands the result file back
//! through `dd`, as the submission's uid. It does what the Python launcher does without
//! starting a second interpreter (issue 35): one interpreter per submission, the same jail.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::isolate::LaunchPlan;
use super::process::which;

/// The supervisor (`sh -c SUPERVISE …`): runs the command, then the hand-back.
const SUPERVISE: &str = include_str!("sh/supervise.sh");

/// The hand-back (`sh -c COLLECT …`): one header line, then the result file's bytes.
const COLLECT: &str = include_str!("sh/collect.sh");

/// The system tools the supervisor runs; all under `/usr`, which every sandbox binds
/// read-only at the same place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tools {
    sh: PathBuf,
    prlimit: PathBuf,
    setpriv: PathBuf,
    dd: PathBuf,
}

impl Tools {
    /// The tools on `path_var` (default: this process's `PATH`); `None` when one is missing
    /// or lives outside `/usr` (then the Python launcher does the job).
    pub(super) fn find(path_var: Option<&OsStr>) -> Option<Self> {
        let find = |name: &str| which(Path::new(name), path_var).and_then(|p| p.canonicalize().ok()).filter(|p| p.starts_with("/usr/"));
        Some(Self { sh: find("sh")?, prlimit: find("prlimit")?, setpriv: find("setpriv")?, dd: find("dd")? })
    }

    /// The command that carries out `plan` inside bubblewrap; `None` when the plan needs
    /// what only the launcher does (no result to collect, `setsid`, an emptied bounding set,
    /// a limit `prlimit` does not know). The environment is bubblewrap's to set.
    pub(super) fn command_tail(&self, plan: &LaunchPlan) -> Option<Vec<String>> {
        let collect = plan.collect.as_ref()?;
        if plan.setsid || plan.clear_bounding_set {
            return None;
        }
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut t = vec![s(&self.sh), "-c".into(), SUPERVISE.into(), "evalgrid-supervise".into(), s(&self.sh), s(&self.setpriv)];
        match plan.drop {
            Some(d) => t.extend([d.uid.to_string(), d.gid.to_string()]),
            None => t.extend([String::new(), String::new()]),
        }
        t.extend([COLLECT.into(), s(&self.dd), collect.path.clone(), collect.cap.to_string(), s(&self.prlimit)]);
        for (name, soft, hard) in &plan.rlimits {
            t.push(format!("{}={}", prlimit_flag(name)?, bounds(name, *soft, *hard)));
        }
        t.extend(["--".into(), s(&self.setpriv)]);
        if let Some(d) = plan.drop {
            t.extend([format!("--reuid={}", d.uid), format!("--regid={}", d.gid), "--clear-groups".into()]);
        }
        if plan.no_new_privs {
            t.push("--no-new-privs".into());
        }
        t.push("--".into());
        t.extend(plan.argv.iter().cloned());
        Some(t)
    }
}

/// `prlimit`'s option for an rlimit's name.
fn prlimit_flag(name: &str) -> Option<&'static str> {
    Some(match name {
        "RLIMIT_CPU" => "--cpu",
        "RLIMIT_CORE" => "--core",
        "RLIMIT_AS" => "--as",
        "RLIMIT_NPROC" => "--nproc",
        "RLIMIT_FSIZE" => "--fsize",
        "RLIMIT_NOFILE" => "--nofile",
        _ => return None,
    })
}

/// `soft:hard` for `prlimit` (-1 = unlimited), never above this process's hard limit, which
/// bubblewrap passes on and only a privileged process could raise.
fn bounds(name: &str, soft: i64, hard: i64) -> String {
    let (mut soft, mut hard) = (u64::try_from(soft).ok(), u64::try_from(hard).ok());
    if let Some(ceiling) = crate::platform::hard_rlimit(name) {
        let h = hard.map_or(ceiling, |h| h.min(ceiling));
        soft = Some(soft.map_or(h, |s| s.min(h)));
        hard = Some(h);
    }
    let show = |v: Option<u64>| v.map_or_else(|| "unlimited".to_string(), |v| v.to_string());
    format!("{}:{}", show(soft), show(hard))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::isolate::{Collect, DropTo};
    use super::*;

    fn plan() -> LaunchPlan {
        LaunchPlan {
            setsid: false,
            rlimits: vec![("RLIMIT_CPU".into(), 10, 15), ("RLIMIT_CORE".into(), 0, 0), ("RLIMIT_AS".into(), -1, -1)],
            no_new_privs: true,
            clear_bounding_set: false,
            drop: Some(DropTo { uid: 1_900_000_001, gid: 1_900_000_002 }),
            argv: vec!["/py".into(), "-u".into(), "-B".into(), "/code/submission.py".into()],
            env: BTreeMap::new(),
            collect: Some(Collect { path: "results/p.txt".into(), cap: 100 }),
        }
    }

    fn tools() -> Tools {
        let p = |s: &str| PathBuf::from(format!("/usr/bin/{s}"));
        Tools { sh: p("dash"), prlimit: p("prlimit"), setpriv: p("setpriv"), dd: p("dd") }
    }

    #[test]
    fn the_supervisor_sets_the_limits_drops_the_uid_and_then_runs_the_submission() {
        let t = tools().command_tail(&plan()).expect("a plan the supervisor can carry out");
        let at = t.iter().position(|a| a == "/usr/bin/prlimit").expect("prlimit");
        assert_eq!(&t[..2], ["/usr/bin/dash", "-c"]);
        assert_eq!(&t[4..8], ["/usr/bin/dash", "/usr/bin/setpriv", "1900000001", "1900000002"]);
        assert_eq!(&t[9..12], ["/usr/bin/dd", "results/p.txt", "100"]);
        let (cpu, core) = (&t[at + 1], &t[at + 2]);
        assert!(cpu.starts_with("--cpu=") && core == "--core=0:0", "{t:?}");
        let rest = &t[at + 4..];
        assert_eq!(rest[..2], ["--", "/usr/bin/setpriv"]);
        assert_eq!(rest[2..], ["--reuid=1900000001", "--regid=1900000002", "--clear-groups", "--no-new-privs", "--", "/py", "-u", "-B", "/code/submission.py"]);
    }

    #[test]
    fn plans_only_the_launcher_can_carry_out_are_left_to_it() {
        let tools = tools();
        assert!(tools.command_tail(&LaunchPlan { collect: None, ..plan() }).is_none());
        assert!(tools.command_tail(&LaunchPlan { setsid: true, ..plan() }).is_none());
        assert!(tools.command_tail(&LaunchPlan { rlimits: vec![("RLIMIT_MEMLOCK".into(), 1, 1)], ..plan() }).is_none());
        let t = tools.command_tail(&LaunchPlan { drop: None, ..plan() }).expect("no uid drop");
        assert_eq!(&t[6..8], ["", ""]);
        assert!(!t.iter().any(|a| a.starts_with("--reuid")));
    }

    #[test]
    fn limits_stay_under_this_process_hard_limits() {
        // RLIMIT_CORE's hard limit may be finite here; unlimited is never asked above it.
        let b = bounds("RLIMIT_CORE", -1, -1);
        match crate::platform::hard_rlimit("RLIMIT_CORE") {
            Some(h) => assert_eq!(b, format!("{h}:{h}")),
            None => assert_eq!(b, "unlimited:unlimited"),
        }
        assert_eq!(bounds("RLIMIT_BOGUS", 5, -1), "5:unlimited");
    }
}
