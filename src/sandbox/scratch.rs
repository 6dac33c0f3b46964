//! The sandbox's scratch folders (a submission's run folder, a worker's folder, an empty
//! data folder): named after the process that made them, so that the next run removes the
//! ones a killed process (kill -9, OOM, a node that rebooted) could not.

use std::path::Path;

/// Kinds of scratch folder (a submission's run, a worker, an empty data folder); each is
/// `evalgrid-<kind>-<pid>-<random>` in the temp folder.
const KINDS: &[&str] = &["run", "worker", "empty"];

/// A new scratch folder of `kind` in `dir` (the system temp folder when `None`), named
/// after this process; removed when the returned handle drops.
pub(crate) fn folder(kind: &str, dir: Option<&Path>) -> std::io::Result<tempfile::TempDir> {
    let prefix = format!("evalgrid-{kind}-{}-", std::process::id());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    match dir {
        Some(d) => builder.tempdir_in(d),
        None => builder.tempdir(),
    }
}

/// Removes the scratch folders in `dir` (the system temp folder when `None`) whose process
/// is gone; returns how many. Folders of live processes, and anything not ours, are left.
pub(crate) fn sweep(dir: Option<&Path>) -> usize {
    let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner) else { continue };
        if pid != std::process::id() && !alive(pid) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The process id in a scratch folder's name, if the name is one of ours.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("evalgrid-")?;
    let rest = KINDS.iter().find_map(|kind| rest.strip_prefix(kind)?.strip_prefix('-'))?;
    let (pid, random) = rest.split_once('-')?;
    (!random.is_empty()).then_some(())?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    crate::platform::process_exists(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_of_dead_processes_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum (4,194,304) can never be running.
        let dead = tmp.path().join("evalgrid-run-4194999-abc123");
        let mine = folder("worker", Some(tmp.path())).unwrap();
        let parent = tmp.path().join(format!("evalgrid-empty-{}-xyz", std::os::unix::process::parent_id()));
        let foreign = tmp.path().join("evalgrid-cache-4194999-abc");
        for d in [&dead, &parent, &foreign] {
            std::fs::create_dir_all(d.join("work")).unwrap();
        }
        assert_eq!(sweep(Some(tmp.path())), 1);
        assert!(!dead.exists(), "a dead process's run folder is removed");
        assert!(mine.path().exists() && parent.exists(), "live processes' folders stay");
        assert!(foreign.exists(), "names that are not scratch folders stay");
        assert_eq!(owner("evalgrid-run-12-"), None);
        assert_eq!(owner("evalgrid-empty-77-q"), Some(77));
    }
}
