//! `evalgrid datasets fetch bbeh`: copy or download the pinned files into a
//! staging folder, verify every SHA-256 pin, and only then move the folder
//! into place, so a wrong byte anywhere installs nothing.

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
    /// Download from the upstream raw URLs.
    Download(&'a reqwest::Client),
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
    let staging = tempfile::Builder::new().prefix(".bbeh-staging-").tempdir_in(data_dir).map_err(io(data_dir))?;
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
            Source::Download(client) => {
                let url = manifest.raw_url(file).ok_or_else(|| InstallError::Manifest("no raw_url_template".into()))?;
                let fail = |message: String| InstallError::Download { url: url.clone(), message };
                let response = client.get(&url).send().await.map_err(|e| fail(e.to_string()))?;
                let response = response.error_for_status().map_err(|e| fail(e.to_string()))?;
                let body = response.bytes().await.map_err(|e| fail(e.to_string()))?;
                std::fs::write(&dest, &body).map_err(io(&dest))?;
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
    let staged = staging.keep();
    std::fs::rename(&staged, &target).map_err(io(&target))?;
    Ok((manifest.files.len(), bytes))
}
