//! Harbor task folders as grid items: `params.path` names one task folder or a folder of
//! them, `include`/`exclude` glob over task names, and each task's content is hashed per part
//! (`task.toml`, `instruction.md`, `environment/`, `tests/`, `solution/`) over every file's
//! relative path, bytes and exec bit, so a key changes exactly when a file that can change a
//! trial does, and `status --explain` can name the part and the file.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Value, json};

use super::config::{self, NetworkMode, TaskToml};
use crate::exec::StepError;
use crate::spec::{CatalogIssue, IssueSite, Params, Selection, TaskInstance, glob_match};

/// Name in pipelines.
pub const NAME: &str = "harbor";
/// Bumped when the trial's behaviour changes (part of every episode key).
pub const EPISODE_VERSION: u32 = 2;
/// Bumped when the scorer changes.
pub const SCORE_VERSION: u32 = 1;
/// The parts of a task folder, in the order they are reported.
pub const PARTS: [&str; 6] = ["task.toml", "instruction.md", "environment/", "tests/", "solution/", "other"];
/// Image tag prefix: one image per distinct `environment/` content.
pub const IMAGE_REPO: &str = "evalgrid-harbor";

/// Which container runtime to use (`auto`: whichever can run a container).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeName {
    /// The first of podman, docker that can run a container.
    #[default]
    Auto,
    /// podman only.
    Podman,
    /// docker only.
    Docker,
}

/// Whether a task's prebuilt `docker_image` may be pulled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pull {
    /// Never reach a registry: use the image if present, else build from `environment/`.
    #[default]
    Never,
    /// Pull a missing prebuilt image, else build.
    Missing,
}

/// The entry's `environment:` settings. Runtime and pull cannot change a trial's result,
/// so they stay out of keys; the network can, so `network: off` is in the task's params.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EnvSettings {
    /// Which runtime.
    pub runtime: RuntimeName,
    /// Pull policy for prebuilt images.
    pub pull: Pull,
    /// `false` (`network: off`): no network even where the task allows it.
    pub network_allowed: bool,
}

impl Default for EnvSettings {
    /// `auto`, `never`, the network as the task says.
    fn default() -> Self {
        Self { runtime: RuntimeName::Auto, pull: Pull::Never, network_allowed: true }
    }
}

/// One loaded task folder: what a trial needs that is not in the key.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The task folder (absolute).
    pub dir: PathBuf,
    /// Its `task.toml`.
    pub config: TaskToml,
    /// `instruction.md`, verbatim.
    pub instruction: String,
    /// Hash per part (`PARTS`), hex.
    pub parts: BTreeMap<String, String>,
    /// Hash per file, by path relative to the folder (`tests/test.sh`).
    pub files: BTreeMap<String, String>,
    /// The entry's environment settings.
    pub env: EnvSettings,
    /// The image tag this task's `environment/` builds to.
    pub image_tag: String,
    /// Named rewards (of `reward.json`) the entry wants as `items.csv` columns
    /// (`params.rewards`; presentation only, so out of every key).
    pub reward_columns: Vec<String>,
}

impl Loaded {
    /// Whether the agent phase may use the network.
    #[must_use]
    pub fn network(&self) -> bool {
        self.env.network_allowed && self.config.network == NetworkMode::Public
    }

    /// Whether the verifier phase may use the network.
    #[must_use]
    pub fn verifier_network(&self) -> bool {
        self.env.network_allowed && self.config.verifier_network == NetworkMode::Public
    }
}

static LOADED: LazyLock<Mutex<HashMap<String, Arc<Loaded>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The loaded task behind `task` (loaded when the pipeline was validated).
///
/// # Errors
/// A task not loaded in this process.
pub fn get(task: &TaskInstance) -> Result<Arc<Loaded>, StepError> {
    LOADED
        .lock()
        .ok()
        .and_then(|m| m.get(&task.content_hash).cloned())
        .ok_or_else(|| StepError::Unsupported(format!("harbor task `{}` was not loaded from its folder in this process", task.task)))
}

/// Image tags of every task loaded in this process (what `cache gc` must keep).
#[must_use]
pub fn image_tags() -> Vec<String> {
    let mut tags: Vec<String> = LOADED.lock().map(|m| m.values().map(|t| t.image_tag.clone()).collect()).unwrap_or_default();
    tags.sort();
    tags.dedup();
    tags
}

fn issue(site: IssueSite, message: impl Into<String>, hint: Option<&str>) -> CatalogIssue {
    CatalogIssue { site, message: message.into(), hint: hint.map(str::to_owned) }
}

/// A list of strings from a parameter that may be one string or a list.
fn globs(params: &Params, key: &str) -> Result<Vec<String>, Vec<CatalogIssue>> {
    match params.get(key) {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(a.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        Some(_) => Err(vec![issue(IssueSite::Param(key.into()), format!("`{key}` must be a name or a list of names"), None)]),
    }
}

/// The entry's `params.environment`.
fn env_settings(params: &Params) -> Result<EnvSettings, Vec<CatalogIssue>> {
    let site = || IssueSite::Param("environment".into());
    let mut out = EnvSettings::default();
    let Some(v) = params.get("environment") else { return Ok(out) };
    let Some(map) = v.as_object() else {
        return Err(vec![issue(site(), "`environment` must be a mapping like {runtime: auto, pull: never, network: task}", None)]);
    };
    for (k, v) in map {
        let s = v.as_str().unwrap_or_default();
        match k.as_str() {
            "runtime" => {
                out.runtime = serde_json::from_value(v.clone())
                    .map_err(|_| vec![issue(site(), format!("`environment.runtime` must be auto, podman or docker, not {v}"), None)])?;
            }
            "pull" => {
                out.pull =
                    serde_json::from_value(v.clone()).map_err(|_| vec![issue(site(), format!("`environment.pull` must be never or missing, not {v}"), None)])?
            }
            "network" => {
                // YAML reads a bare `off` as false.
                out.network_allowed = match (s, v.as_bool()) {
                    ("task", _) | (_, Some(true)) => true,
                    ("off" | "none", _) | (_, Some(false)) => false,
                    _ => return Err(vec![issue(site(), format!("`environment.network` must be `task` (as task.toml says) or `off`, not {v}"), None)]),
                }
            }
            _ => return Err(vec![issue(site(), format!("`environment` has no setting `{k}`"), Some("known: runtime, pull, network"))]),
        }
    }
    Ok(out)
}

/// Hashes of a folder's files: per file and per part.
type Hashes = (BTreeMap<String, String>, BTreeMap<String, String>);

/// The part a relative path belongs to.
fn part_of(rel: &str) -> &'static str {
    match rel.split('/').next().unwrap_or_default() {
        "task.toml" if !rel.contains('/') => "task.toml",
        "instruction.md" if !rel.contains('/') => "instruction.md",
        "environment" => "environment/",
        "tests" => "tests/",
        "solution" => "solution/",
        _ => "other",
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf, std::fs::Metadata)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let meta = std::fs::symlink_metadata(&path)?;
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else {
            out.push((rel, path, meta));
        }
    }
    Ok(())
}

/// Every file's hash (relative path, bytes, exec bit; a link by its target) and each part's
/// hash over its files.
///
/// # Errors
/// A file that cannot be read.
pub fn hash_folder(dir: &Path) -> std::io::Result<Hashes> {
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    let mut per_file = BTreeMap::new();
    let mut per_part: BTreeMap<&str, blake3::Hasher> = PARTS.iter().map(|p| (*p, blake3::Hasher::new())).collect();
    for (rel, path, meta) in files {
        let mut h = blake3::Hasher::new();
        if meta.file_type().is_symlink() {
            h.update(b"link\0");
            h.update(std::fs::read_link(&path)?.to_string_lossy().as_bytes());
        } else {
            h.update(if meta.permissions().mode() & 0o111 != 0 { b"exec\0" } else { b"file\0" });
            h.update(&std::fs::read(&path)?);
        }
        let file_hash = h.finalize().to_hex().to_string();
        if let Some(p) = per_part.get_mut(part_of(&rel)) {
            p.update(rel.as_bytes());
            p.update(b"\0");
            p.update(file_hash.as_bytes());
            p.update(b"\n");
        }
        per_file.insert(rel, file_hash);
    }
    Ok((per_file, per_part.into_iter().map(|(k, h)| (k.to_owned(), h.finalize().to_hex().to_string())).collect()))
}

/// Loads one task folder.
///
/// # Errors
/// A missing required file, a `task.toml` problem (located), an unreadable file.
pub fn load_one(dir: &Path, env: EnvSettings) -> Result<Loaded, String> {
    let shown = dir.display();
    let toml_path = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml_path).map_err(|e| format!("{}: {e}", toml_path.display()))?;
    let config = config::parse(&text).map_err(|e| format!("{}:{}:{}: {}", toml_path.display(), e.line, e.col, e.message))?;
    let instruction =
        std::fs::read_to_string(dir.join("instruction.md")).map_err(|e| format!("{shown}/instruction.md: {e} (the agent's prompt is required)"))?;
    if !dir.join("tests/test.sh").is_file() {
        return Err(format!("{shown}/tests/test.sh: missing (the verifier script is required)"));
    }
    if config.docker_image.is_none() && !dir.join("environment/Dockerfile").is_file() {
        return Err(format!("{shown}/environment/Dockerfile: missing, and task.toml names no `[environment].docker_image`"));
    }
    let (files, parts) = hash_folder(dir).map_err(|e| format!("{shown}: {e}"))?;
    let env_hash = &parts["environment/"];
    let image_tag = format!("{IMAGE_REPO}:{}", &env_hash[..16]);
    Ok(Loaded { dir: dir.to_path_buf(), config, instruction, parts, files, env, image_tag, reward_columns: Vec::new() })
}

/// The task folders `path` names: itself when it holds a `task.toml`, else its
/// sub-folders that do, sorted by name.
fn task_dirs(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.join("task.toml").is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(path)?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join("task.toml").is_file()).collect();
    dirs.sort();
    Ok(dirs)
}

/// The content hash of a task: its parts' hashes, in order.
fn content_hash(parts: &BTreeMap<String, String>) -> String {
    let mut h = blake3::Hasher::new();
    for p in PARTS {
        h.update(p.as_bytes());
        h.update(b"\0");
        h.update(parts.get(p).map_or(&b""[..], |s| s.as_bytes()));
        h.update(b"\n");
    }
    h.finalize().to_hex().to_string()
}

/// Resolves a `harbor` task entry of a pipeline in `base_dir` into its tasks.
///
/// # Errors
/// Bad parameters, a path that is not there, task folders that do not load, globs or
/// `select:` names that match nothing.
pub fn resolve(base_dir: &Path, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
    const KNOWN: &[&str] = &["path", "include", "exclude", "environment", "rewards", "agent"];
    if let Some(k) = params.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(vec![issue(
            IssueSite::Param(k.clone()),
            format!("unknown parameter `{k}`"),
            Some("harbor entries take path, include, exclude, environment, rewards and agent"),
        )]);
    }
    let agent = match params.get("agent") {
        None => None,
        Some(v) => Some(crate::spec::agent::check_overrides(v).map_err(|m| vec![issue(IssueSite::Param("agent".into()), m, None)])?),
    };
    let Some(rel) = params.get("path").and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return Err(vec![issue(IssueSite::Entry, "a harbor entry needs `params.path`: a task folder or a folder of task folders", None)]);
    };
    let (include, exclude) = (globs(params, "include")?, globs(params, "exclude")?);
    let env = env_settings(params)?;
    let reward_columns = globs(params, "rewards")?;
    let root = base_dir.join(rel);
    let path_issue = |m: String| vec![issue(IssueSite::Param("path".into()), m, None)];
    let dirs = task_dirs(&root).map_err(|e| path_issue(format!("{}: {e}", root.display())))?;
    if dirs.is_empty() {
        return Err(path_issue(format!("{}: no task folder (a folder with a task.toml) here or one level down", root.display())));
    }
    let name_of = |d: &Path| d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let names: Vec<String> = dirs.iter().map(|d| name_of(d)).collect();
    if let Selection::Names(wanted) = select {
        for (i, n) in wanted.iter().enumerate() {
            if !names.contains(n) {
                return Err(vec![issue(IssueSite::Selected(i), format!("no task `{n}` under {}", root.display()), None)]);
            }
        }
    }
    let mut chosen: Vec<&PathBuf> = dirs
        .iter()
        .filter(|d| {
            let n = name_of(d);
            let selected = match select {
                Selection::All => true,
                Selection::Names(w) => w.contains(&n),
            };
            selected && (include.is_empty() || include.iter().any(|g| glob_match(g, &n))) && !exclude.iter().any(|g| glob_match(g, &n))
        })
        .collect();
    chosen.dedup();
    if chosen.is_empty() {
        return Err(vec![issue(
            IssueSite::Param(if include.is_empty() { "exclude" } else { "include" }.into()),
            "no task is left after include/exclude",
            None,
        )]);
    }
    let mut out = Vec::new();
    let mut issues = Vec::new();
    let mut loaded = Vec::new();
    for d in chosen {
        let dir = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
        match load_one(&dir, env) {
            Ok(mut t) => {
                t.reward_columns.clone_from(&reward_columns);
                for note in &t.config.notes {
                    // Said once per process and task (validate, run), never an error.
                    tracing::warn!("{}: {}", dir.display(), note);
                }
                let hash = content_hash(&t.parts);
                let mut task_params = Params::new();
                if !env.network_allowed {
                    task_params.insert("network".into(), json!("off"));
                }
                // The agent API models play: it changes their trials, so it is keyed.
                if let Some(agent) = &agent {
                    task_params.insert("agent".into(), Value::Object(agent.clone()));
                }
                out.push(TaskInstance {
                    benchmark: NAME.into(),
                    task: name_of(d),
                    content_hash: hash.clone(),
                    params: task_params,
                    episode_version: EPISODE_VERSION,
                    score_version: SCORE_VERSION,
                    suite: NAME.into(),
                });
                loaded.push((hash, Arc::new(t)));
            }
            Err(m) => issues.push(issue(IssueSite::Param("path".into()), m, None)),
        }
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    if let Ok(mut m) = LOADED.lock() {
        m.extend(loaded);
    }
    Ok(out)
}

/// What changed in a task since `previous` (an earlier trial record's `files`), in the
/// user's terms: the part, then each file edited, added or removed.
#[must_use]
pub fn changes(now: &Loaded, previous: &Value) -> Vec<String> {
    let Some(before) = previous.get("files").and_then(Value::as_object) else { return Vec::new() };
    let mut by_part: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (rel, hash) in &now.files {
        match before.get(rel).and_then(Value::as_str) {
            Some(h) if h == hash => {}
            Some(_) => by_part.entry(part_of(rel)).or_default().push(format!("{rel} changed")),
            None => by_part.entry(part_of(rel)).or_default().push(format!("{rel} added")),
        }
    }
    for rel in before.keys().filter(|r| !now.files.contains_key(*r)) {
        by_part.entry(part_of(rel)).or_default().push(format!("{rel} removed"));
    }
    PARTS
        .iter()
        .filter_map(|p| by_part.get(p).map(|files| if p.ends_with('/') { format!("{p} changed: {}", files.join(", ")) } else { files.join(", ") }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn task(dir: &Path) {
        write(dir, "task.toml", "version = \"1.0\"\n[agent]\ntimeout_sec = 60\n");
        write(dir, "instruction.md", "Say hello.\n");
        write(dir, "environment/Dockerfile", "FROM debian:bookworm-slim\n");
        write(dir, "tests/test.sh", "echo 1 > /logs/verifier/reward.txt\n");
        write(dir, "solution/solve.sh", "echo hello > /app/hello.txt\n");
    }

    #[test]
    fn parts_change_alone_and_exec_bit_counts() {
        let tmp = tempfile::tempdir().unwrap();
        task(tmp.path());
        let (files, parts) = hash_folder(tmp.path()).unwrap();
        assert_eq!(files.len(), 5);
        write(tmp.path(), "tests/test.sh", "echo 0 > /logs/verifier/reward.txt\n");
        let (_, after) = hash_folder(tmp.path()).unwrap();
        let changed: Vec<&String> = parts.keys().filter(|k| parts[*k] != after[*k]).collect();
        assert_eq!(changed, ["tests/"]);
        let p = tmp.path().join("solution/solve.sh");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (_, exec) = hash_folder(tmp.path()).unwrap();
        assert_ne!(exec["solution/"], after["solution/"]);
        assert_eq!(exec["environment/"], parts["environment/"]);
    }

    /// Each file of each part moves exactly its part's hash and the task's content hash (the
    /// trial's key input); the task folder's own path is in neither.
    #[test]
    fn every_part_reaches_the_content_hash_and_the_path_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        task(tmp.path());
        let (_, base) = hash_folder(tmp.path()).unwrap();
        let edits = [
            ("task.toml", "task.toml"),
            ("instruction.md", "instruction.md"),
            ("environment/Dockerfile", "environment/"),
            ("tests/test.sh", "tests/"),
            ("solution/solve.sh", "solution/"),
        ];
        for (file, part) in edits {
            let moved = tempfile::tempdir().unwrap();
            task(moved.path());
            let (_, same) = hash_folder(moved.path()).unwrap();
            assert_eq!(content_hash(&same), content_hash(&base), "another folder, same content");
            let p = moved.path().join(file);
            let mut bytes = std::fs::read(&p).unwrap();
            bytes.extend_from_slice(b"# edit\n");
            std::fs::write(&p, bytes).unwrap();
            let (_, after) = hash_folder(moved.path()).unwrap();
            let changed: Vec<&String> = base.keys().filter(|k| base[*k] != after[*k]).collect();
            assert_eq!(changed, [part], "editing {file}");
            assert_ne!(content_hash(&after), content_hash(&base), "editing {file} changes the task's key");
        }
    }

    #[test]
    fn a_dataset_with_globs_and_changes_named() {
        let tmp = tempfile::tempdir().unwrap();
        for n in ["alpha", "beta", "gamma"] {
            task(&tmp.path().join("set").join(n));
        }
        let params: Params = [("path".to_owned(), json!("set")), ("exclude".to_owned(), json!("g*"))].into();
        let tasks = resolve(tmp.path(), &Selection::All, &params).unwrap();
        assert_eq!(tasks.iter().map(|t| t.task.as_str()).collect::<Vec<_>>(), ["alpha", "beta"]);
        // Same content, same hash: the name is not in it, so two identical tasks share it.
        assert_eq!(tasks[0].content_hash, tasks[1].content_hash);
        let before = get(&tasks[0]).unwrap();
        let record = json!({"files": before.files});
        write(&tmp.path().join("set/alpha"), "environment/Dockerfile", "FROM python:3.13-slim-bookworm\n");
        let now = load_one(&tmp.path().join("set/alpha"), EnvSettings::default()).unwrap();
        assert_eq!(changes(&now, &record), ["environment/ changed: environment/Dockerfile changed"]);
        let bad: Params = [("path".to_owned(), json!("set")), ("include".to_owned(), json!(["zeta*"]))].into();
        assert!(resolve(tmp.path(), &Selection::All, &bad).is_err());
    }

    #[test]
    fn located_errors_name_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        task(tmp.path());
        write(tmp.path(), "task.toml", "[agent]\ntimeout_sec = \"x\"\n");
        let params: Params = [("path".to_owned(), json!("."))].into();
        let e = resolve(tmp.path(), &Selection::All, &params).unwrap_err();
        assert!(e[0].message.contains("task.toml:2:15:"), "{}", e[0].message);
    }
}
