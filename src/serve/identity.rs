//! A served model's identity before anything is keyed: the engine's version on this
//! machine, the blake3 of the weights (a folder: of its files, names included) and of every
//! file an argument names, remembered by (path, size, mtime) so an unchanged file is not read
//! again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ServeError;
use super::engine::{self, Found};
use crate::cache::HashMemo;
use crate::spec::{Engine, Pipeline, ServeConfig, ServedIdentity, Weights};

/// Fills in the identity of every served model of `pipeline`, so its keys can be computed;
/// returns the engines found (for starting them later) and a note per engine whose version
/// was read from the cache instead of probed.
///
/// With `probe` (a run that may start a server, `check`), each engine is probed here and
/// its version recorded in the cache ([`HashMemo::record_engine_version`]). Without (commands
/// that only read results), the version recorded by the last probe is used, so results can
/// be read on a machine where the engine is not installed; an engine never probed on this
/// cache is probed.
///
/// # Errors
/// An engine that is not installed (and, without `probe`, never recorded), weights or an
/// argument's file that cannot be read, or weights whose hash is not the pinned `serve.blake3`.
pub fn identify(pipeline: &mut Pipeline, memo: &HashMemo, probe: bool) -> Result<(BTreeMap<Engine, Found>, Vec<String>), ServeError> {
    let mut engines: BTreeMap<Engine, Found> = BTreeMap::new();
    let mut recorded: BTreeMap<Engine, String> = BTreeMap::new();
    let mut notes = Vec::new();
    for model in &mut pipeline.models {
        let Some(serve) = &mut model.serve else { continue };
        let version = match (engines.get(&serve.engine), recorded.get(&serve.engine)) {
            (Some(found), _) => found.version.clone(),
            (None, Some(version)) => version.clone(),
            (None, None) => match memo.engine_version(serve.engine.as_str()).filter(|_| !probe) {
                Some(version) => {
                    notes.push(format!(
                        "served models of engine {} are keyed with its version recorded in the cache ({version}), not probed: this command only reads results",
                        serve.engine
                    ));
                    recorded.insert(serve.engine, version.clone());
                    version
                }
                None => {
                    let found =
                        engine::find(serve.engine).map_err(|tried| ServeError::EngineMissing { model: model.id.clone(), engine: serve.engine, tried })?;
                    memo.record_engine_version(serve.engine.as_str(), &found.version);
                    engines.insert(serve.engine, found.clone());
                    found.version
                }
            },
        };
        let weights = weights_hash(serve, memo).map_err(|(path, source)| ServeError::Unreadable { model: model.id.clone(), path, source })?;
        if let (Some(pin), Some(found)) = (&serve.pinned, &weights)
            && pin != found
        {
            return Err(ServeError::PinMismatch { model: model.id.clone(), path: serve.written.clone(), pinned: pin.clone(), found: found.clone() });
        }
        let mut arg_files = Vec::new();
        for arg in &serve.args {
            arg_files.push(match &arg.file {
                Some(path) => Some(memo.file_hash(path).map_err(|e| ServeError::Unreadable { model: model.id.clone(), path: e.path, source: e.source })?.0),
                None => None,
            });
        }
        serve.identity = Some(ServedIdentity { engine_version: version, weights: weights.or_else(|| serve.pinned.clone()), arg_files });
    }
    Ok((engines, notes))
}

/// The weights' blake3: a file's own; a folder's over its files' relative paths and hashes
/// (hidden folders such as a download tool's `.cache/` left out); `None` for a hub id or a
/// pinned file that is not on this machine.
fn weights_hash(serve: &ServeConfig, memo: &HashMemo) -> Result<Option<String>, (PathBuf, std::io::Error)> {
    let Weights::Local(path) = &serve.weights else { return Ok(None) };
    if serve.pinned.is_some() && !path.exists() {
        return Ok(None);
    }
    let meta = std::fs::metadata(path).map_err(|e| (path.clone(), e))?;
    if meta.is_file() {
        return memo.file_hash(path).map(|(hash, _)| Some(hash)).map_err(|e| (e.path, e.source));
    }
    let mut files = Vec::new();
    collect(path, path, &mut files).map_err(|e| (path.clone(), e))?;
    files.sort();
    let mut folder = blake3::Hasher::new();
    for relative in files {
        let (hash, _) = memo.file_hash(&path.join(&relative)).map_err(|e| (e.path, e.source))?;
        folder.update(relative.as_bytes());
        folder.update(b"\0");
        folder.update(hash.as_bytes());
        folder.update(b"\n");
    }
    Ok(Some(folder.finalize().to_hex().to_string()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = std::fs::metadata(&path)?;
        if kind.is_dir() {
            collect(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_hashed_by_its_files_names_and_contents() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model");
        std::fs::create_dir_all(model.join(".cache")).unwrap();
        std::fs::write(model.join("config.json"), b"{}").unwrap();
        std::fs::write(model.join("model.safetensors"), b"weights").unwrap();
        std::fs::write(model.join(".cache/lock"), b"ignored").unwrap();
        let memo = HashMemo::new(&dir.path().join("cache"));
        let serve = |path: &Path| ServeConfig {
            engine: Engine::Vllm,
            weights: Weights::Local(path.to_owned()),
            written: String::new(),
            position: crate::spec::Position::default(),
            slots: 1,
            context: None,
            gpus: 1,
            args: Vec::new(),
            pinned: None,
            start_timeout_s: 1,
            identity: None,
        };
        let first = weights_hash(&serve(&model), &memo).unwrap().unwrap();
        std::fs::write(model.join(".cache/lock"), b"changed").unwrap();
        assert_eq!(weights_hash(&serve(&model), &memo).unwrap().unwrap(), first, "hidden folders are not weights");
        std::fs::rename(model.join("config.json"), model.join("config2.json")).unwrap();
        assert_ne!(weights_hash(&serve(&model), &memo).unwrap().unwrap(), first, "a renamed file is another model");
    }
}
