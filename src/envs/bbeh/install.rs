//! `evalgrid datasets fetch bbeh`: copy or download the pinned files into a
//! staging folder, verify every SHA-256 pin, and only then move the folder
//! into place, so a wrong byte anywhere installs nothing. The staging folder is
//! locked while it is filled, so the next fetch removes what a killed one left
//! (and only that).

use std::path::{Path, PathBuf};

use super::dataset::data_path;
use super::dataset::{DatasetError, Manifest, sha256_file};

/// The manifest shipped with evalgrid (`datasets/bbeh.yaml`).
pub const MANIFEST_YAML: &str = include_str!("../../../datasets/bbeh.yaml");

/// Where the files come from.
#[derive(Debug)]
pub enum Source<'a> {
    /// A local copy laid out like upstream (minus the `bbeh/` root).
    Local(&'a Path),
    /// Download from the upstream raw URLs, each file read up to its pinned size at most.
    Download(&'a reqwest::Client, crate::envs::fetch::Limits),
}

/// The name every staging folder starts with.
const STAGING_PREFIX: &str = ".bbeh-staging-";
/// The file in a staging folder whose lock says its fetch is still at work.
const STAGING_LOCK: &str = ".evalgrid-lock";

/// Removes the staging folders whose fetch is gone (killed while downloading): those whose
/// lock file can be locked, holding the lock while removing. A folder without a lock file
/// (a fetch killed in the instant after making it, or one about to be moved into place) is
/// left alone. Returns how many it removed.
fn sweep_staging(data_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(data_dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_name().to_string_lossy().starts_with(STAGING_PREFIX) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(lock) = std::fs::File::open(dir.join(STAGING_LOCK)) else { continue };
        if lock.try_lock().is_ok() && std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Why installing failed; nothing was installed in any case.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The shipped manifest does not parse (a build defect).
    #[error("the shipped manifest `datasets/bbeh.yaml` is invalid: {0}")]
    Manifest(String),
    /// A file is missing, unreadable, or fails its pin.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A download failed.
    #[error("download of `{url}` failed: {message}")]
    Download {
        /// URL.
        url: String,
        /// Cause.
        message: String,
    },
    /// Filesystem failure while staging or moving into place.
    #[error("cannot write `{path}`: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// Parses the shipped manifest.
pub fn manifest() -> Result<Manifest, InstallError> {
    crate::spec::yaml::parse::<Manifest>(MANIFEST_YAML).map_err(|d| InstallError::Manifest(d.message))
}

/// Installs every file of `manifest` under `data_dir/bbeh`; returns the
/// number of files and bytes installed.
pub async fn install(manifest: &Manifest, data_dir: &Path, source: Source<'_>) -> Result<(usize, u64), InstallError> {
    let target = data_path(data_dir);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallError::Io { path, source }
    };
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    if sweep_staging(data_dir) > 0 {
        tracing::info!("removed what an interrupted `datasets fetch bbeh` left under {}", data_dir.display());
    }
    let mut builder = tempfile::Builder::new();
    builder.prefix(STAGING_PREFIX);
    // The folder becomes `bbeh/`: the mode a new folder gets under the umask, not `0700`.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777));
    let staging = builder.tempdir_in(data_dir).map_err(io(data_dir))?;
    let lock_path = staging.path().join(STAGING_LOCK);
    let lock = std::fs::File::create(&lock_path).map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    let mut bytes = 0;
    for file in &manifest.files {
        let dest = manifest.local_path(staging.path(), file)?;
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        match &source {
            Source::Local(dir) => {
                let from = manifest.local_path(dir, file)?;
                std::fs::copy(&from, &dest).map_err(|e| DatasetError::Io { path: from.clone(), source: e })?;
            }
            Source::Download(client, limits) => {
                use std::io::Write as _;
                let url = manifest.raw_url(file).ok_or_else(|| InstallError::Manifest("no raw_url_template".into()))?;
                let mut out = std::fs::File::create(&dest).map_err(io(&dest))?;
                let limits = crate::envs::fetch::Limits { max_bytes: file.bytes.min(limits.max_bytes), ..*limits };
                crate::envs::fetch::download(client, &url, limits, |chunk| out.write_all(chunk))
                    .await
                    .map_err(|e| InstallError::Download { url: e.url, message: e.message })?;
            }
        }
        let (actual, size) = sha256_file(&dest)?;
        if !actual.eq_ignore_ascii_case(&file.sha256) {
            return Err(DatasetError::ChecksumMismatch { path: PathBuf::from(&file.path), expected: file.sha256.clone(), actual }.into());
        }
        bytes += size;
    }
    let notice = staging.path().join("MANIFEST.yaml");
    std::fs::write(&notice, MANIFEST_YAML).map_err(io(&notice))?;
    if target.exists() {
        let old = data_dir.join(".bbeh-old");
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(&target, &old).map_err(io(&target))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    // The lock file stays out of the installed folder; the lock, on the open file, is held
    // until the folder is in place.
    std::fs::remove_file(&lock_path).map_err(io(&lock_path))?;
    let staged = staging.keep();
    std::fs::rename(&staged, &target).map_err(io(&target))?;
    drop(lock);
    Ok((manifest.files.len(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_staging_folders_no_live_fetch_holds_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let staging = |name: &str, lock: bool| {
            let d = dir.path().join(format!("{STAGING_PREFIX}{name}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("task.json"), "{}").unwrap();
            if lock {
                std::fs::write(d.join(STAGING_LOCK), "").unwrap();
            }
            d
        };
        let dead = staging("dead", true);
        let live = staging("live", true);
        let held = std::fs::File::open(live.join(STAGING_LOCK)).unwrap();
        held.lock().unwrap();
        let bare = staging("bare", false);
        std::fs::create_dir(dir.path().join("bbeh")).unwrap();
        assert_eq!(sweep_staging(dir.path()), 1);
        assert!(!dead.exists() && live.exists() && bare.exists() && dir.path().join("bbeh").exists());
        drop(held);
        assert_eq!(sweep_staging(dir.path()), 1);
        assert!(!live.exists());
    }
}
