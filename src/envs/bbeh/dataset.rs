//! BBEH data loading, the BBEH Mini selection rule, and SHA-256 pin verification.
//!
//! Local layout (a mirror of upstream `bbeh/`): `<dir>/benchmark_tasks/<task>/task.json` and
//! `<dir>/mini/data.json`. Examples have no id; the stable key is `(task, zero-based index)`
//! (spec §1). Mini examples are mapped back to full-set keys via their `(input, target)` pair.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where installed BBEH data lives under the data directory (`data/bbeh/`).
#[must_use]
pub fn data_path(data_dir: &Path) -> PathBuf {
    data_dir.join("bbeh")
}

/// The 23 BBEH task directory names, in upstream (alphabetical) order; also the task ids.
pub const TASKS: [&str; 23] = [
    "bbeh_boardgame_qa",
    "bbeh_boolean_expressions",
    "bbeh_buggy_tables",
    "bbeh_causal_understanding",
    "bbeh_disambiguation_qa",
    "bbeh_dyck_languages",
    "bbeh_geometric_shapes",
    "bbeh_hyperbaton",
    "bbeh_linguini",
    "bbeh_movie_recommendation",
    "bbeh_multistep_arithmetic",
    "bbeh_nycc",
    "bbeh_object_counting",
    "bbeh_object_properties",
    "bbeh_sarc_triples",
    "bbeh_shuffled_objects",
    "bbeh_spatial_reasoning",
    "bbeh_sportqa",
    "bbeh_temporal_sequence",
    "bbeh_time_arithmetic",
    "bbeh_web_of_lies",
    "bbeh_word_sorting",
    "bbeh_zebra_puzzles",
];

/// Number of examples BBEH Mini takes from every task.
pub const MINI_PER_TASK: usize = 20;

/// One BBEH example, keyed by `(task, index)`; `input` lacks the generic suffix (see prompt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Task directory name, one of [`TASKS`].
    pub task: String,
    /// Zero-based position in the task file's `examples` array.
    pub index: usize,
    /// Full question text including the task-specific answer-format instruction.
    pub input: String,
    /// Gold answer string, scored with the official scorer.
    pub target: String,
    /// Only set in spatial reasoning (`"tree/cousin"`); kept for per-subtask breakdowns.
    pub subtask: Option<String>,
}

/// One BBEH Mini example: its position in `mini/data.json` and the full-set item it copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MiniItem {
    /// Zero-based position in the Mini file (file order is interleaved across tasks).
    pub position: usize,
    /// The identical full-set example, so Mini runs can reuse full-set responses.
    pub item: Item,
}

/// Content pins of the upstream files (deserialised by the integrator from `bbeh.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Dataset id, `bbeh`.
    pub name: String,
    /// Upstream repository and commit the pins refer to.
    pub upstream: Upstream,
    /// Download URL pattern with `{repo}`, `{commit}` and `{path}` placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_url_template: Option<String>,
    /// Every pinned file.
    pub files: Vec<ManifestFile>,
}

/// Where the pinned files come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    /// GitHub `owner/name`.
    pub repo: String,
    /// Full 40-hex commit id.
    pub commit: String,
    /// Upstream folder mirrored by the local data dir (`bbeh`): a file's local path is its
    /// upstream path with this leading folder removed. `None` means paths are used as-is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// One pinned file: upstream path, lower-case hex SHA-256 and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Path inside the upstream repository.
    pub path: String,
    /// Expected SHA-256, 64 hex digits.
    pub sha256: String,
    /// Expected size in bytes.
    pub bytes: u64,
}

impl Manifest {
    /// The download URL of `file`, from `raw_url_template` (None if the manifest has none).
    pub fn raw_url(&self, file: &ManifestFile) -> Option<String> {
        self.raw_url_template
            .as_ref()
            .map(|t| t.replace("{repo}", &self.upstream.repo).replace("{commit}", &self.upstream.commit).replace("{path}", &file.path))
    }

    /// Local path of `file` under `dir`; rejects absolute or `..` paths so a manifest cannot
    /// point outside the data folder.
    pub fn local_path(&self, dir: &Path, file: &ManifestFile) -> Result<PathBuf, DatasetError> {
        let rel = match &self.upstream.root {
            Some(root) => {
                let prefix = format!("{}/", root.trim_end_matches('/'));
                file.path.strip_prefix(&prefix).ok_or_else(|| DatasetError::UnsafePath { path: file.path.clone() })?
            }
            None => file.path.as_str(),
        };
        let rel = Path::new(rel);
        let safe = rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !safe || rel.as_os_str().is_empty() {
            return Err(DatasetError::UnsafePath { path: file.path.clone() });
        }
        Ok(dir.join(rel))
    }
}

/// Everything that can go wrong reading or verifying BBEH data; never a panic.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The task name is not one of [`TASKS`] (also guards against path injection).
    #[error("unknown BBEH task {0:?}")]
    UnknownTask(String),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid JSON of the expected shape (`{"examples": [...]}`).
    #[error("malformed BBEH json {path}: {source}")]
    Json {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A file's SHA-256 differs from its pin.
    #[error("sha256 mismatch for {path}: expected {expected}, actual {actual}")]
    ChecksumMismatch {
        /// File involved.
        path: PathBuf,
        /// Pinned hash.
        expected: String,
        /// Hash of the file on disk.
        actual: String,
    },
    /// A file's size differs from its pin.
    #[error("size mismatch for {path}: expected {expected} bytes, actual {actual} bytes")]
    SizeMismatch {
        /// File involved.
        path: PathBuf,
        /// Pinned size.
        expected: u64,
        /// Size on disk.
        actual: u64,
    },
    /// A manifest path is absolute, contains `..`, or lies outside `upstream.root`.
    #[error("manifest path {path:?} is not a safe relative path under the data root")]
    UnsafePath {
        /// Offending manifest path.
        path: String,
    },
    /// A Mini example matches no full-set example on `(input, target)`.
    #[error("mini example at position {position} matches no full-set example")]
    MiniUnmatched {
        /// Position in the Mini file.
        position: usize,
    },
    /// A Mini example matches several full-set examples and the selection rule cannot decide.
    #[error("mini example at position {position} matches {count} full-set examples")]
    MiniAmbiguous {
        /// Position in the Mini file.
        position: usize,
        /// Number of candidates left.
        count: usize,
    },
}

#[derive(Deserialize)]
struct RawFile {
    examples: Vec<RawExample>,
}

#[derive(Deserialize)]
struct RawExample {
    input: String,
    target: String,
    #[serde(default)]
    subtask: Option<String>,
}

fn read_examples(path: &Path) -> Result<Vec<RawExample>, DatasetError> {
    let bytes = std::fs::read(path).map_err(|source| DatasetError::Io { path: path.to_path_buf(), source })?;
    let file: RawFile = serde_json::from_slice(&bytes).map_err(|source| DatasetError::Json { path: path.to_path_buf(), source })?;
    Ok(file.examples)
}

/// Local path of a task file: `<dir>/benchmark_tasks/<task>/task.json`.
pub fn task_path(dir: &Path, task: &str) -> PathBuf {
    dir.join("benchmark_tasks").join(task).join("task.json")
}

/// Local path of the Mini file: `<dir>/mini/data.json`.
pub fn mini_path(dir: &Path) -> PathBuf {
    dir.join("mini").join("data.json")
}

/// Loads one task from the data folder `dir`, in file order, keyed by `(task, index)`.
pub fn load_task(dir: &Path, task: &str) -> Result<Vec<Item>, DatasetError> {
    if !TASKS.contains(&task) {
        return Err(DatasetError::UnknownTask(task.to_string()));
    }
    let raw = read_examples(&task_path(dir, task))?;
    Ok(raw.into_iter().enumerate().map(|(index, e)| Item { task: task.to_string(), index, input: e.input, target: e.target, subtask: e.subtask }).collect())
}

/// [`load_task`], parsed once per process: the cells of one task (a cell per seed and
/// model, each loading it to ask and again to score) share it. A file whose length or
/// modification time changed since is read again.
pub fn load_task_shared(dir: &Path, task: &str) -> Result<Arc<Vec<Item>>, DatasetError> {
    /// A file's length and modification time when it was parsed, with what it held.
    type Stamped = ((u64, Option<std::time::SystemTime>), Arc<Vec<Item>>);
    static LOADED: Mutex<BTreeMap<PathBuf, Stamped>> = Mutex::new(BTreeMap::new());
    let path = task_path(dir, task);
    let stamp = std::fs::metadata(&path).ok().map(|m| (m.len(), m.modified().ok()));
    let loaded = || LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(stamp) = stamp
        && let Some((seen, items)) = loaded().get(&path)
        && *seen == stamp
    {
        return Ok(Arc::clone(items));
    }
    let items = Arc::new(load_task(dir, task)?);
    if let Some(stamp) = stamp {
        loaded().insert(path, (stamp, Arc::clone(&items)));
    }
    Ok(items)
}

/// Loads all 23 tasks (4,520 items at the pinned commit) in [`TASKS`] order.
pub fn load_all(dir: &Path) -> Result<Vec<Item>, DatasetError> {
    let mut all = Vec::new();
    for task in TASKS {
        all.extend(load_task(dir, task)?);
    }
    Ok(all)
}

/// Full-set indices that BBEH Mini takes from a task with `n` examples.
///
/// Rule observed in the data (spec §1.2): the last index of each of 20 equal blocks, i.e.
/// `(k+1)·(n/20) − 1` for k in 0..20 — 9, 19, …, 199 for n = 200 and 5, 11, …, 119 for
/// DisambiguationQA's 120. It depends on `n` only (`_task` is accepted for call-site clarity);
/// for n < 20 every index is returned.
pub fn mini_indices(_task: &str, n: usize) -> Vec<usize> {
    if n < MINI_PER_TASK {
        return (0..n).collect();
    }
    let step = n / MINI_PER_TASK;
    (1..=MINI_PER_TASK).map(|k| k * step - 1).collect()
}

/// Loads `mini/data.json` and maps each example, in file order, to the identical full-set item
/// in `full` by `(input, target)`; ties (identical pairs) are broken by the Mini selection rule.
pub fn load_mini(dir: &Path, full: &[Item]) -> Result<Vec<MiniItem>, DatasetError> {
    let raw = read_examples(&mini_path(dir))?;
    let mut by_pair: HashMap<(&str, &str), Vec<&Item>> = HashMap::new();
    let mut task_sizes: HashMap<&str, usize> = HashMap::new();
    for item in full {
        by_pair.entry((item.input.as_str(), item.target.as_str())).or_default().push(item);
        *task_sizes.entry(item.task.as_str()).or_default() += 1;
    }
    let mut out = Vec::with_capacity(raw.len());
    for (position, e) in raw.iter().enumerate() {
        let candidates = by_pair.get(&(e.input.as_str(), e.target.as_str())).ok_or(DatasetError::MiniUnmatched { position })?;
        let chosen: Vec<&&Item> = if candidates.len() == 1 {
            candidates.iter().collect()
        } else {
            candidates
                .iter()
                .filter(|it| {
                    let n = task_sizes.get(it.task.as_str()).copied().unwrap_or(0);
                    mini_indices(&it.task, n).contains(&it.index)
                })
                .collect()
        };
        match chosen.as_slice() {
            [one] => out.push(MiniItem { position, item: (**one).clone() }),
            _ => {
                return Err(DatasetError::MiniAmbiguous { position, count: chosen.len() });
            }
        }
    }
    Ok(out)
}

/// Lower-case hex SHA-256 and size of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<(String, u64), DatasetError> {
    let io_err = |source| DatasetError::Io { path: path.to_path_buf(), source };
    let mut f = std::fs::File::open(path).map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total: u64 = 0;
    loop {
        let n = f.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    let hex = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>();
    Ok((hex, total))
}

/// Checks every manifest file under `dir` against its size and SHA-256 pin; the first
/// mismatch is returned as an error naming the file and both values.
pub fn verify_checksums(dir: &Path, manifest: &Manifest) -> Result<(), DatasetError> {
    for file in &manifest.files {
        let path = manifest.local_path(dir, file)?;
        let (actual, size) = sha256_file(&path)?;
        if !actual.eq_ignore_ascii_case(&file.sha256) {
            return Err(DatasetError::ChecksumMismatch { path, expected: file.sha256.clone(), actual });
        }
        if size != file.bytes {
            return Err(DatasetError::SizeMismatch { path, expected: file.bytes, actual: size });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
