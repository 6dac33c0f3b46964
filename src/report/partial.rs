//! Report files written whole or not at all, and no half-written file left behind by a run
//! killed mid-write: each file is written to a locked `.evalgrid-*.partial` file beside it
//! and renamed over it; the lock dies with the writer, so the next report (or export) into
//! the folder removes the partial files no live writer holds, while another process writing
//! the same folder at that moment keeps its own.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name every partial file starts with; with [`SUFFIX`], what [`sweep`] looks for.
const PREFIX: &str = ".evalgrid-";
/// The name every partial file ends with.
const SUFFIX: &str = ".partial";

/// Writes `bytes` to `path` atomically, unless the file holds them already; on failure, the
/// path that could not be written.
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    let at = |path: &Path| {
        let path = path.to_owned();
        move |source| (path, source)
    };
    std::fs::create_dir_all(parent).map_err(at(parent))?;
    let mut tmp = locked_partial(parent).map_err(at(parent))?;
    tmp.write_all(bytes).map_err(at(path))?;
    tmp.persist(path).map_err(|e| (path.to_owned(), e.error))?;
    Ok(())
}

/// A new partial file in `dir`, locked for as long as it is open. A sweeper that took it
/// between its creation and the lock removed it while holding the lock, so a partial file
/// whose name is gone once the lock is held is dropped and another one made. It is created
/// with the mode any new file gets under the user's umask (`0666 & !umask`), not tempfile's
/// private `0600`, since it becomes the user's report, export or dataset when renamed.
pub fn locked_partial(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    loop {
        let mut builder = tempfile::Builder::new();
        builder.prefix(PREFIX).suffix(SUFFIX);
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let tmp = builder.tempfile_in(dir)?;
        tmp.as_file().lock()?;
        if std::fs::symlink_metadata(tmp.path()).is_ok() {
            return Ok(tmp);
        }
    }
}

/// Removes the partial files that no live writer holds (what a run killed mid-write left)
/// from `root` and the folders of the files `names` (relative to `root`), never walking
/// further, since an export may go to any folder. Returns how many it removed; a file it
/// cannot open or remove is left, since the files written are complete without this.
pub fn sweep<'a>(root: &Path, names: impl IntoIterator<Item = &'a str>) -> usize {
    let mut folders: BTreeSet<PathBuf> = names.into_iter().filter_map(|name| root.join(name).parent().map(Path::to_owned)).collect();
    folders.insert(root.to_owned());
    let mut removed = 0;
    for folder in &folders {
        let Ok(entries) = std::fs::read_dir(folder) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(PREFIX) && name.ends_with(SUFFIX) && entry.file_type().is_ok_and(|t| t.is_file()) && remove_if_orphaned(&entry.path()) {
                removed += 1;
            }
        }
    }
    if removed > 0 {
        tracing::debug!("removed {removed} partial file(s) a stopped writer left under {}", root.display());
    }
    removed
}

/// Removes `path` when its lock can be taken (its writer is gone), holding the lock while
/// it removes it so a writer that locks it later sees it gone.
fn remove_if_orphaned(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    if file.try_lock().is_err() {
        return false;
    }
    let removed = std::fs::remove_file(path).is_ok();
    drop(file);
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partials(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_partial_file_whose_writer_is_gone_is_swept_and_one_still_held_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("transcripts");
        std::fs::create_dir(&sub).unwrap();
        // What a killed writer leaves: a partial file no one holds, one folder down.
        let orphan = locked_partial(&sub).unwrap();
        let (file, orphan_path) = orphan.keep().unwrap();
        drop(file);
        // A writer still at work, in this process: its lock is on another open file, so it
        // holds even against this process's own sweep.
        let mut live = locked_partial(dir.path()).unwrap();
        // A user's own dotfile is never touched, nor a folder no file was written to.
        std::fs::write(dir.path().join(".notes"), "mine").unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let (file, untouched) = locked_partial(&elsewhere).unwrap().keep().unwrap();
        drop(file);
        assert_eq!(sweep(dir.path(), ["transcripts/a.html", "summary.md"]), 1);
        assert!(!orphan_path.exists(), "the orphaned partial file is gone");
        assert_eq!(partials(dir.path()).len(), 1, "the held one is kept");
        assert!(dir.path().join(".notes").exists());
        assert!(untouched.exists(), "only the folders written to are swept");
        // The live writer finishes undisturbed.
        live.write_all(b"page").unwrap();
        live.persist(dir.path().join("page.html")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("page.html")).unwrap(), b"page");
        assert!(partials(dir.path()).is_empty());
        assert_eq!(sweep(dir.path(), ["transcripts/a.html"]), 0);
    }

    #[test]
    fn a_write_leaves_only_the_file_and_skips_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b.html");
        write_if_changed(&path, b"one").unwrap();
        let first = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_if_changed(&path, b"one").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), first, "the same bytes are not written again");
        write_if_changed(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert!(partials(&dir.path().join("a")).is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_written_file_has_the_mode_the_umask_gives_not_0600() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        write_if_changed(&path, b"x").unwrap();
        // This process's umask, read without changing it (other tests create files).
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let umask = status.lines().find_map(|l| l.strip_prefix("Umask:")).map(|m| u32::from_str_radix(m.trim(), 8).unwrap()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o666 & !umask);
    }
}
