//! `params: {eval_yaml: FILE}`: a Hugging Face Hub / Inspect AI `eval.yaml` read as a `qa`
//! task. The file's task (its `field_spec`, `solvers` and `scorers`, as Inspect's `hf.py`
//! loader reads them) is translated into the same `qa` parameters a pipeline could write by
//! hand, so the task is an ordinary `qa` task: same items, same per-item keys, same scorers.
//! Anything the translation cannot carry over exactly is an error at its `file:line:col`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use serde_saphyr::{Location, Spanned};

use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, Params};

/// The pipeline parameters a `qa` entry with `eval_yaml` may also have: everything else
/// (fields, templates, scorers) comes from the file.
pub const PARAMS: &[&str] = &["eval_yaml", "task", "name", "dataset", "sample", "limit", "where", "judge"];

/// The largest `eval.yaml` read: a task declaration, never data.
const MAX_EVAL_YAML_BYTES: u64 = 1 << 20;

/// Inspect's `chain_of_thought` default template (`DEFAULT_COT_TEMPLATE`).
const COT_TEMPLATE: &str = "\n{prompt}\n\nBefore answering, reason in a step-by-step manner as to get the right answer. Provide your answer at the end on its own line in the form \"ANSWER: $ANSWER\" (without quotes) where $ANSWER is the answer to the question.\n";

/// Inspect's `multiple_choice` templates (`SINGLE_ANSWER_TEMPLATE` and the rest).
const SINGLE_ANSWER: &str = "Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}.\n\n{question}\n\n{choices}";
const SINGLE_ANSWER_COT: &str = "Answer the following multiple choice question. The last line of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}. Think step by step before answering.\n\n{question}\n\n{choices}";
const MULTIPLE_ANSWER: &str = "Answer the following multiple choice question where multiple answers may be correct. The entire content of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of {letters}.\n\n{question}\n\n{choices}";
const MULTIPLE_ANSWER_COT: &str = "Answer the following multiple choice question where multiple answers may be correct. The last line of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of {letters}. Think step by step before answering.\n\n{question}\n\n{choices}";

/// The file as the Hub specifies it (`name`, `description`, `evaluation_framework`, `tasks`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalYaml {
    #[serde(default)]
    #[expect(dead_code, reason = "part of the format; shown on the Hub, not used here")]
    name: Option<String>,
    #[serde(default)]
    #[expect(dead_code, reason = "part of the format; shown on the Hub, not used here")]
    description: Option<String>,
    #[serde(default)]
    evaluation_framework: Option<Spanned<String>>,
    tasks: Spanned<Vec<Spanned<HfTask>>>,
}

/// One `tasks[]` entry: Inspect's `HFTask` (its fields, and no others).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HfTask {
    #[serde(default)]
    id: Option<Spanned<String>>,
    #[serde(default)]
    config: Option<Spanned<String>>,
    #[serde(default)]
    split: Option<Spanned<String>>,
    field_spec: Spanned<FieldSpec>,
    #[serde(default)]
    shuffle_choices: Option<Spanned<bool>>,
    #[serde(default)]
    epochs: Option<Spanned<u64>>,
    #[serde(default)]
    epoch_reducer: Option<Spanned<String>>,
    solvers: Spanned<Vec<Spanned<Step>>>,
    scorers: Spanned<Vec<Spanned<Step>>>,
}

/// Inspect's `HFFieldSpec`: which column is which.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldSpec {
    #[serde(default)]
    input: Option<Spanned<String>>,
    #[serde(default)]
    target: Option<Spanned<String>>,
    /// One column holding a list, or a list of columns, one per choice.
    #[serde(default)]
    choices: Option<Spanned<Value>>,
    #[serde(default)]
    id: Option<Spanned<String>>,
    #[serde(default)]
    metadata: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    input_image: Option<Spanned<String>>,
}

/// A solver or scorer: `{name, args}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    name: Spanned<String>,
    #[serde(default)]
    args: BTreeMap<String, Spanned<Value>>,
}

/// Where each translated parameter came from in the file, so a problem the `qa` checks find
/// in it is shown at the file's line.
#[derive(Debug, Default)]
pub struct Origins {
    file: PathBuf,
    params: BTreeMap<String, Location>,
    scorers: Vec<Location>,
    given: Vec<String>,
}

impl Origins {
    fn at(&self, loc: Location) -> String {
        format!("{}:{}:{}", self.file.display(), loc.line(), loc.column())
    }

    /// Re-points issues about translated parameters at the `eval_yaml` parameter, each
    /// message starting with the place in the file it came from.
    #[must_use]
    pub fn relocate(&self, issues: Vec<CatalogIssue>) -> Vec<CatalogIssue> {
        issues
            .into_iter()
            .map(|mut i| {
                let (name, item) = match &i.site {
                    IssueSite::Param(p) => (p.clone(), None),
                    IssueSite::ParamItem(p, n) => (p.clone(), Some(*n)),
                    _ => return i,
                };
                if self.given.contains(&name) {
                    return i;
                }
                let loc = match item {
                    Some(n) if name == "scorers" => self.scorers.get(n).copied(),
                    _ => self.params.get(&name).copied(),
                };
                // A dataset's problems already name the dataset's file and line.
                if name != "dataset" {
                    let place = loc.map_or_else(|| self.file.display().to_string(), |l| self.at(l));
                    i.message = format!("{place}: {}", i.message);
                }
                i.site = IssueSite::Param("eval_yaml".into());
                i
            })
            .collect()
    }
}

/// A problem in the file, at its place.
struct Problems<'a> {
    file: &'a Path,
    issues: Vec<CatalogIssue>,
}

impl Problems<'_> {
    fn at(&mut self, loc: Location, message: impl Into<String>) {
        self.hint(loc, message, None);
    }

    fn hint(&mut self, loc: Location, message: impl Into<String>, hint: Option<String>) {
        self.issues.push(CatalogIssue {
            site: IssueSite::Param("eval_yaml".into()),
            message: format!("{}:{}:{}: {}", self.file.display(), loc.line(), loc.column(), message.into()),
            hint,
        });
    }
}

fn pipeline_issue(param: &str, message: impl Into<String>, hint: Option<String>) -> CatalogIssue {
    CatalogIssue { site: IssueSite::Param(param.into()), message: message.into(), hint }
}

/// Reads the `eval_yaml` named in `params` (relative to `base_dir`) and returns the `qa`
/// parameters it amounts to, with the pipeline's own `sample`, `limit`, `where` and `name`.
pub fn translate(base_dir: &Path, params: &Params) -> Result<(Params, Origins), Vec<CatalogIssue>> {
    let mut issues = Vec::new();
    for name in params.keys().filter(|k| !PARAMS.contains(&k.as_str())) {
        let from_file = super::config::PARAMS.contains(&name.as_str());
        issues.push(pipeline_issue(
            name,
            if from_file {
                format!("`{name}` comes from the eval.yaml: a qa entry with `eval_yaml` cannot also set it")
            } else {
                format!("unknown parameter `{name}` of a qa entry with `eval_yaml`")
            },
            suggestion(name, PARAMS).or_else(|| Some(format!("with `eval_yaml` the parameters are {}", PARAMS.join(", ")))),
        ));
    }
    let Some(rel) = params.get("eval_yaml").and_then(Value::as_str) else {
        issues.push(pipeline_issue("eval_yaml", "`eval_yaml` must be the path of an eval.yaml file", None));
        return Err(issues);
    };
    if !issues.is_empty() {
        return Err(issues);
    }
    let rel = PathBuf::from(rel);
    let file = base_dir.join(&rel);
    let source = read(&file).map_err(|m| vec![pipeline_issue("eval_yaml", format!("`{}`: {m}", rel.display()), None)])?;
    let doc: EvalYaml = crate::spec::yaml::parse(&source).map_err(|d| {
        vec![CatalogIssue {
            site: IssueSite::Param("eval_yaml".into()),
            message: format!("{}:{}:{}: {}", file.display(), d.position.line, d.position.column, d.message),
            hint: d.hint,
        }]
    })?;
    let mut p = Problems { file: &file, issues: Vec::new() };
    if let Some(f) = &doc.evaluation_framework
        && f.value != "inspect-ai"
    {
        p.at(f.referenced, format!("evaluation_framework `{}`: evalgrid reads `inspect-ai` tasks only", f.value));
    }
    let task = pick_task(&doc, params.get("task"), &mut p).ok_or_else(|| std::mem::take(&mut p.issues))?;
    let mut origins = Origins { file: file.clone(), given: params.keys().cloned().collect(), ..Origins::default() };
    let mut out = Params::new();
    // The dataset: the pipeline's own (a file, or a folder in the Hub's layout), else the
    // eval.yaml's folder in the Hub's layout.
    let folder = rel.parent().map(Path::to_path_buf).unwrap_or_default();
    let dataset = match params.get("dataset") {
        Some(Value::String(d)) if base_dir.join(d).is_file() => Some(PathBuf::from(d)),
        Some(Value::String(d)) => split_file(base_dir, Path::new(d), task, &mut p),
        Some(_) => {
            p.issues.push(pipeline_issue("dataset", "`dataset` must be a file, or a folder in the Hub's layout", None));
            None
        }
        None => split_file(base_dir, &folder, task, &mut p),
    };
    if let Some(d) = dataset {
        out.insert("dataset".into(), json!(d.display().to_string()));
    }
    let name = match params.get("name") {
        Some(n) => n.clone(),
        None => {
            // The task's id, else the folder's name (the Hub repository's): one path segment.
            let folder_name = folder.file_name().or_else(|| file.parent().and_then(Path::file_name)).map(|s| s.to_string_lossy().into_owned());
            let id = task.id.as_ref().map(|i| i.value.clone()).or(folder_name).unwrap_or_default();
            let id = id.replace(['/', '\\'], "-");
            json!(if id.is_empty() || id.bytes().all(|b| b == b'.') { "eval".to_owned() } else { id })
        }
    };
    out.insert("name".into(), name);
    for k in ["sample", "limit", "where"] {
        if let Some(v) = params.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    let metadata: Vec<String> = task.field_spec.value.metadata.as_ref().map(|m| m.value.clone()).unwrap_or_default();
    out.insert("fields".into(), fields(&task.field_spec, &mut p));
    origins.params.insert("fields".into(), task.field_spec.referenced);
    // Repeats are the pipeline's seeds: the file's epochs are its advice, said aloud.
    if let Some(e) = &task.epochs
        && e.value != 1
    {
        tracing::warn!(
            "{}: `epochs: {}`: evalgrid's repeats are the pipeline's `seeds` (give it {} seeds to match)",
            origins.at(e.referenced),
            e.value,
            e.value
        );
    }
    if let Some(r) = &task.epoch_reducer {
        let reported = r.value == "mean" || r.value == "max" || r.value == "mode" || r.value.strip_prefix("pass_at_").is_some_and(|k| k.parse::<u32>().is_ok());
        if reported {
            tracing::warn!(
                "{}: `epoch_reducer: {}`: over seeds, in the report's *Repeats per item* table (mean, pass@k, max@k, maj@k)",
                origins.at(r.referenced),
                r.value
            );
        } else {
            p.hint(
                r.referenced,
                format!("`epoch_reducer: {}` is not supported", r.value),
                Some("the report's *Repeats per item* table gives mean, pass@k, max@k and maj@k over seeds".into()),
            );
        }
    }
    let solved = solvers(task, &metadata, &mut p);
    if let Some(s) = &solved {
        if let Some(system) = &s.system {
            out.insert("system".into(), json!(system));
            origins.params.insert("system".into(), s.system_at);
        }
        out.insert("template".into(), json!(s.user));
        origins.params.insert("template".into(), s.user_at);
    }
    let shuffle = task.shuffle_choices.as_ref().is_some_and(|s| s.value);
    let (list, at) = scorers(task, solved.as_ref(), shuffle, params.get("judge"), &mut p);
    if shuffle
        && !list.iter().any(|s| s.get("choice").is_some())
        && let Some(s) = &task.shuffle_choices
    {
        p.at(s.referenced, "`shuffle_choices` needs the `choice` scorer (with it, each seed shows its own order)");
    }
    if params.contains_key("judge") && !list.iter().any(|s| s.get("judge").is_some()) {
        p.issues.push(pipeline_issue("judge", "`judge` is set, but the task has no `model_graded_qa` or `model_graded_fact` scorer to use it", None));
    }
    out.insert("scorers".into(), Value::Array(list));
    origins.scorers = at;
    origins.params.insert("scorers".into(), task.scorers.referenced);
    if !p.issues.is_empty() {
        return Err(p.issues);
    }
    Ok((out, origins))
}

fn read(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = super::dataset::open_regular(path, MAX_EVAL_YAML_BYTES)?;
    let mut bytes = Vec::new();
    file.take(MAX_EVAL_YAML_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {}", e.kind()))?;
    String::from_utf8(bytes).map_err(|e| format!("is not valid UTF-8 (byte {})", e.utf8_error().valid_up_to() + 1))
}

/// The task the entry names with `params.task` (required when the file has several).
fn pick_task<'a>(doc: &'a EvalYaml, wanted: Option<&Value>, p: &mut Problems<'_>) -> Option<&'a HfTask> {
    let tasks = &doc.tasks.value;
    let ids: Vec<&str> = tasks.iter().filter_map(|t| t.value.id.as_ref().map(|i| i.value.as_str())).collect();
    match wanted {
        None if tasks.len() == 1 => Some(&tasks[0].value),
        None if tasks.is_empty() => {
            p.at(doc.tasks.referenced, "`tasks` is empty");
            None
        }
        None => {
            p.issues.push(pipeline_issue(
                "eval_yaml",
                format!(
                    "{}:{}:{}: the file declares {} tasks: name one with `params.task`",
                    p.file.display(),
                    doc.tasks.referenced.line(),
                    doc.tasks.referenced.column(),
                    tasks.len()
                ),
                Some(format!("its task ids are {}", ids.join(", "))),
            ));
            None
        }
        Some(Value::String(w)) => {
            let found = tasks.iter().find(|t| t.value.id.as_ref().is_some_and(|i| i.value == *w)).map(|t| &t.value);
            if found.is_none() {
                p.issues.push(pipeline_issue(
                    "task",
                    format!("{} has no task `{w}`", p.file.display()),
                    suggestion(w, &ids).or_else(|| Some(format!("its task ids are {}", ids.join(", ")))),
                ));
            }
            found
        }
        Some(_) => {
            p.issues.push(pipeline_issue("task", "`task` must be a task id of the eval.yaml", None));
            None
        }
    }
}

/// The one file of the task's split in a folder in the Hub's layout: `data/` for the default
/// config, `<config>/` for another; a file named `<split>.<ext>` or `<split>-….<ext>`.
fn split_file(base_dir: &Path, folder: &Path, task: &HfTask, p: &mut Problems<'_>) -> Option<PathBuf> {
    let config = task.config.as_ref().map_or("default", |c| c.value.as_str());
    let split = task.split.as_ref().map_or("test", |s| s.value.as_str());
    let at = task.split.as_ref().or(task.config.as_ref()).map_or(task.field_spec.referenced, |s| s.referenced);
    // The dataset card's `configs:` first, as the Hub and `datasets.load_dataset` read it.
    match card_files(&base_dir.join(folder), config, split) {
        Some(Ok(files)) => match files.as_slice() {
            [one] => return Some(folder.join(one)),
            [] => {
                p.hint(at, format!("the dataset card (README.md) names no file for split `{split}` of config `{config}` that exists"), None);
                return None;
            }
            many => {
                p.hint(
                    at,
                    format!(
                        "split `{split}` of config `{config}` has {} files by the dataset card (README.md): {}; evalgrid reads one file per split",
                        many.len(),
                        many.join(", ")
                    ),
                    Some("join the shards into one file, or name one with the entry's `params.dataset`".into()),
                );
                return None;
            }
        },
        Some(Err(message)) => {
            p.hint(at, format!("the dataset card (README.md) of {}: {message}", folder.display()), None);
            return None;
        }
        None => {}
    }
    let dirs: Vec<PathBuf> =
        if config == "default" { vec![folder.join("data"), folder.to_path_buf()] } else { vec![folder.join(config), folder.join("data").join(config)] };
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(base_dir.join(dir)) else { continue };
        let mut found: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| {
                let path = Path::new(n);
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
                super::dataset::Format::of(path).is_ok() && (stem == split || stem.starts_with(&format!("{split}-")))
            })
            .collect();
        found.sort();
        match found.as_slice() {
            [] => {}
            [one] => return Some(dir.join(one)),
            many => {
                p.hint(
                    at,
                    format!("split `{split}` has {} files in {}: {}; evalgrid reads one file per split", many.len(), dir.display(), many.join(", ")),
                    Some("join the shards into one file, or name one with the entry's `params.dataset`".into()),
                );
                return None;
            }
        }
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    p.hint(
        at,
        format!("no file of split `{split}` (config `{config}`) in {}", looked.join(" or ")),
        Some(format!("the Hub's layout is `data/{split}-00000-of-00001.parquet` (or `{split}.jsonl`, `.csv`); or name a file with `params.dataset`")),
    );
    None
}

/// The files of `split` of `config` as the dataset card in `dir` (`README.md`, its YAML front
/// matter) declares them under `configs:` (`config_name`, `data_files`: a path or glob, a
/// list of them, a list of `{split, path}`, or a `{split: path}` mapping; a bare path or list
/// is the `train` split, as `datasets` reads it), sorted, relative to `dir`. `None` when there
/// is no card, no `configs:`, or no entry for `config` (the folder layout decides then).
fn card_files(dir: &Path, config: &str, split: &str) -> Option<Result<Vec<String>, String>> {
    let text = std::fs::read_to_string(dir.join("README.md")).ok()?;
    let body = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    let end = body.find("\n---")?;
    let front: Value = match serde_saphyr::from_str(&body[..end]) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("its YAML front matter does not parse: {}", e.to_string().lines().next().unwrap_or_default()))),
    };
    let entry = front.get("configs")?.as_array()?.iter().find(|c| c.get("config_name").and_then(Value::as_str).unwrap_or("default") == config)?;
    let strings = |v: &Value| -> Option<Vec<String>> {
        match v {
            Value::String(s) => Some(vec![s.clone()]),
            Value::Array(list) => list.iter().map(|x| x.as_str().map(str::to_owned)).collect(),
            _ => None,
        }
    };
    let patterns = match entry.get("data_files") {
        None => return Some(Err(format!("config `{config}` has no `data_files`"))),
        Some(Value::Object(by_split)) => by_split.get(split).and_then(strings),
        Some(Value::Array(list)) if list.iter().all(Value::is_object) => {
            list.iter().find(|f| f.get("split").and_then(Value::as_str) == Some(split)).and_then(|f| f.get("path")).and_then(strings)
        }
        Some(other) => (split == "train").then(|| strings(other)).flatten(),
    };
    let Some(patterns) = patterns else {
        return Some(Err(format!("config `{config}` declares no `data_files` for split `{split}`")));
    };
    let mut files = Vec::new();
    for pattern in &patterns {
        if pattern.contains("://") || pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
            return Some(Err(format!("`{pattern}` is not a path inside the dataset's folder")));
        }
        files.extend(glob_files(dir, pattern));
    }
    files.sort();
    files.dedup();
    Some(Ok(files))
}

/// The files under `dir` whose path relative to it matches `pattern` (`*` and `?` within one
/// path part, `**` for any folders), read one folder level per pattern part.
fn glob_files(dir: &Path, pattern: &str) -> Vec<String> {
    let mut found = vec![String::new()];
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for prefix in &found {
            let here = dir.join(prefix);
            let join = |name: &str| if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") };
            if *part == "**" {
                // Zero or more folders: this one and every folder below it.
                let mut stack = vec![prefix.clone()];
                while let Some(at) = stack.pop() {
                    next.push(at.clone());
                    for entry in std::fs::read_dir(dir.join(&at)).into_iter().flatten().flatten() {
                        if entry.file_type().is_ok_and(|t| t.is_dir())
                            && let Some(name) = entry.file_name().to_str()
                        {
                            stack.push(if at.is_empty() { name.to_owned() } else { format!("{at}/{name}") });
                        }
                    }
                }
                continue;
            }
            for entry in std::fs::read_dir(&here).into_iter().flatten().flatten() {
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
                let Ok(kind) = entry.file_type() else { continue };
                if crate::spec::glob_match(part, &name) && (if last { kind.is_file() } else { kind.is_dir() }) {
                    next.push(join(&name));
                }
            }
        }
        found = next;
    }
    found.retain(|f| !f.is_empty() && dir.join(f).is_file());
    found
}

/// `field_spec` as the qa entry's `fields` (with Inspect's defaults: `input`, `target`, …).
fn fields(spec: &Spanned<FieldSpec>, p: &mut Problems<'_>) -> Value {
    let s = &spec.value;
    let mut m = Map::new();
    let col = |f: &Option<Spanned<String>>, default: &str| f.as_ref().map_or(default.to_owned(), |c| c.value.clone());
    m.insert("input".into(), json!(col(&s.input, "input")));
    m.insert("target".into(), json!(col(&s.target, "target")));
    m.insert("id".into(), json!(col(&s.id, "id")));
    match &s.choices {
        None => {}
        Some(Spanned { value: Value::String(c), .. }) => {
            m.insert("choices".into(), json!(c));
        }
        Some(Spanned { value: Value::Array(list), .. }) if !list.is_empty() && list.iter().all(Value::is_string) => {
            m.insert("choice_columns".into(), Value::Array(list.clone()));
        }
        Some(c) => p.at(c.referenced, "`field_spec.choices` must be a column name or a list of column names"),
    }
    // Inspect's Hub loader turns an integer target into a choice letter when the task has choices.
    if s.choices.is_some() {
        m.insert("index_target".into(), json!(true));
    }
    if let Some(img) = &s.input_image {
        m.insert("input_image".into(), json!(img.value));
    }
    Value::Object(m)
}

/// The solvers as templates: the system prompt and the user message (minijinja), where they are.
struct Solved {
    system: Option<String>,
    system_at: Location,
    user: String,
    user_at: Location,
    multiple_choice: bool,
    multiple_correct: bool,
}

fn arg_bool(step: &Step, name: &str, p: &mut Problems<'_>) -> bool {
    match step.args.get(name) {
        None => false,
        Some(Spanned { value: Value::Bool(b), .. }) => *b,
        Some(v) => {
            p.at(v.referenced, format!("`{name}` must be true or false"));
            false
        }
    }
}

fn arg_text(step: &Step, name: &str, p: &mut Problems<'_>) -> Option<(String, Location)> {
    match step.args.get(name) {
        None => None,
        Some(Spanned { value: Value::String(s), referenced, .. }) => Some((s.clone(), *referenced)),
        Some(v) => {
            p.at(v.referenced, format!("`{name}` must be text"));
            None
        }
    }
}

/// Refuses the args of `step` not in `allowed` (naming each at its place).
fn only_args(step: &Step, allowed: &[&str], p: &mut Problems<'_>) {
    for (k, v) in &step.args {
        if !allowed.contains(&k.as_str()) {
            p.hint(
                v.referenced,
                format!("`{}` argument `{k}` is not supported", step.name.value),
                suggestion(k, allowed)
                    .or_else(|| Some(format!("its supported arguments are {}", if allowed.is_empty() { "none".into() } else { allowed.join(", ") }))),
            );
        }
    }
}

/// The solver chain, played on templates: `prompt_template` and `chain_of_thought` wrap the
/// user message, `system_message` sets the system prompt, `multiple_choice` or `generate`
/// asks the model (and must come last).
fn solvers(task: &HfTask, metadata: &[String], p: &mut Problems<'_>) -> Option<Solved> {
    const SOLVERS: &[&str] = &["system_message", "prompt_template", "chain_of_thought", "multiple_choice", "generate"];
    let before = p.issues.len();
    let mut s = Solved {
        system: None,
        system_at: task.solvers.referenced,
        user: "{{ input }}".into(),
        user_at: task.solvers.referenced,
        multiple_choice: false,
        multiple_correct: false,
    };
    let mut asked: Option<Location> = None;
    for step in &task.solvers.value {
        let (name, at) = (step.value.name.value.as_str(), step.referenced);
        if let Some(first) = asked {
            p.at(at, format!("solver `{name}` comes after the model was asked (line {}): evalgrid asks once, by the last solver", first.line()));
            continue;
        }
        let step = &step.value;
        match name {
            "system_message" => {
                if s.system.is_some() {
                    p.at(at, "a second `system_message`: evalgrid sends one system prompt");
                }
                if let Some((t, t_at)) = required_text(step, "template", at, p) {
                    let vars = Vars { prompt: None, metadata, params: constants(step, &["template"], p), strict: false };
                    s.system = translate_template(&t, &vars, t_at, p);
                    s.system_at = t_at;
                }
            }
            "prompt_template" => {
                if let Some((t, t_at)) = required_text(step, "template", at, p) {
                    let vars = Vars { prompt: Some(&s.user), metadata, params: constants(step, &["template"], p), strict: false };
                    if let Some(u) = translate_template(&t, &vars, t_at, p) {
                        s.user = u;
                        s.user_at = t_at;
                    }
                }
            }
            "chain_of_thought" => {
                only_args(step, &["template"], p);
                let (t, t_at) = arg_text(step, "template", p).unwrap_or_else(|| (COT_TEMPLATE.to_owned(), at));
                let vars = Vars { prompt: Some(&s.user), metadata: &[], params: BTreeMap::new(), strict: false };
                if let Some(u) = translate_template(&t, &vars, t_at, p) {
                    s.user = u;
                    s.user_at = t_at;
                }
            }
            "multiple_choice" => {
                only_args(step, &["template", "cot", "multiple_correct"], p);
                let (cot, multiple) = (arg_bool(step, "cot", p), arg_bool(step, "multiple_correct", p));
                let (t, t_at) = arg_text(step, "template", p).unwrap_or_else(|| {
                    let t = match (multiple, cot) {
                        (false, false) => SINGLE_ANSWER,
                        (false, true) => SINGLE_ANSWER_COT,
                        (true, false) => MULTIPLE_ANSWER,
                        (true, true) => MULTIPLE_ANSWER_COT,
                    };
                    (t.to_owned(), at)
                });
                if !(t.contains("{question}") && t.contains("{choices}")) {
                    p.at(t_at, "a `multiple_choice` template must contain `{question}` and `{choices}`");
                }
                let mut params = BTreeMap::new();
                params.insert("choices".to_owned(), Piece::Source("{{ choices }}".into()));
                params.insert("letters".to_owned(), Piece::Source("{{ letters }}".into()));
                params.insert("question".to_owned(), Piece::Source(s.user.clone()));
                let vars = Vars { prompt: None, metadata: &[], params, strict: true };
                if let Some(u) = translate_template(&t, &vars, t_at, p) {
                    s.user = u;
                    s.user_at = t_at;
                }
                s.multiple_choice = true;
                s.multiple_correct = multiple;
                asked = Some(at);
            }
            "generate" => {
                only_args(step, &[], p);
                asked = Some(at);
            }
            other => p.hint(
                step.name.referenced,
                format!("solver `{other}` is not supported"),
                suggestion(other, SOLVERS).or_else(|| Some(format!("evalgrid plays the solvers {}", SOLVERS.join(", ")))),
            ),
        }
    }
    if asked.is_none() && p.issues.len() == before {
        p.at(task.solvers.referenced, "the solvers never ask the model: end them with `generate` or `multiple_choice`");
    }
    (p.issues.len() == before).then_some(s)
}

fn required_text(step: &Step, name: &str, at: Location, p: &mut Problems<'_>) -> Option<(String, Location)> {
    let got = arg_text(step, name, p);
    if got.is_none() && !step.args.contains_key(name) {
        p.at(at, format!("`{}` needs `args.{name}`", step.name.value));
    }
    got
}

/// A solver's extra arguments as text constants (`prompt_template` and `system_message`
/// take any other argument as a template parameter) for its template (`**params`).
fn constants(step: &Step, skip: &[&str], p: &mut Problems<'_>) -> BTreeMap<String, Piece> {
    let mut out = BTreeMap::new();
    for (k, v) in step.args.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
        match &v.value {
            Value::String(s) => {
                out.insert(k.clone(), Piece::Text(s.clone()));
            }
            Value::Number(n) => {
                out.insert(k.clone(), Piece::Text(n.to_string()));
            }
            Value::Bool(b) => {
                out.insert(k.clone(), Piece::Text(if *b { "True" } else { "False" }.into()));
            }
            _ => p.at(v.referenced, format!("template parameter `{k}` must be text, a number or true/false")),
        }
    }
    out
}

/// What a template placeholder becomes: literal text, or minijinja source.
#[derive(Clone, Debug)]
enum Piece {
    Text(String),
    Source(String),
}

/// The variables a Python template sees: `{prompt}` (the user message so far), the sample's
/// metadata columns, the solver's parameters. `strict`: an unknown placeholder is an error
/// (`str.format`), else it stays as written (Inspect's `format_template`).
struct Vars<'a> {
    prompt: Option<&'a str>,
    metadata: &'a [String],
    params: BTreeMap<String, Piece>,
    strict: bool,
}

/// Names the qa templates give their own meaning: a metadata column by such a name cannot be
/// reached by its name.
const RESERVED_VARS: &[&str] = &["input", "target", "targets", "id", "choices", "letters"];

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Literal text as minijinja source: verbatim inside a raw block (which also keeps a final
/// newline, which minijinja would otherwise drop from the end of a template).
fn literal(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some(String::new());
    }
    (!text.contains("{% endraw") && !text.contains("{%- endraw")).then(|| format!("{{% raw %}}{text}{{% endraw %}}"))
}

/// A Python `str.format` template (as Inspect's solvers fill them) as minijinja source.
fn translate_template(template: &str, vars: &Vars<'_>, at: Location, p: &mut Problems<'_>) -> Option<String> {
    let mut out = String::new();
    let mut text = String::new();
    let mut chars = template.chars().peekable();
    let before = p.issues.len();
    let flush = |text: &mut String, out: &mut String, p: &mut Problems<'_>| {
        match literal(text) {
            Some(l) => out.push_str(&l),
            None => p.at(at, "the template contains `{% endraw %}`, which evalgrid cannot carry over"),
        }
        text.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => {
                p.at(at, "a single `}` in the template (write `}}` for a literal brace)");
                break;
            }
            '{' => {
                let mut field = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    if c == '{' {
                        break;
                    }
                    field.push(c);
                }
                if !closed {
                    p.at(at, format!("the placeholder `{{{field}` is not closed (write `{{{{` for a literal brace)"));
                    break;
                }
                if field.contains(['!', ':', '.', '[']) {
                    p.at(at, format!("the placeholder `{{{field}}}` has a format spec, conversion, attribute or index, which evalgrid does not support"));
                    break;
                }
                if let Some(piece) = vars.params.get(&field) {
                    match piece {
                        Piece::Text(t) => text.push_str(t),
                        Piece::Source(s) => {
                            flush(&mut text, &mut out, p);
                            out.push_str(s);
                        }
                    }
                } else if field == "prompt"
                    && let Some(prompt) = vars.prompt
                {
                    flush(&mut text, &mut out, p);
                    out.push_str(prompt);
                } else if vars.metadata.contains(&field) {
                    if !is_identifier(&field) || RESERVED_VARS.contains(&field.as_str()) {
                        p.at(at, format!("metadata column `{field}` cannot be a template variable (not a plain name, or one the qa templates use)"));
                        break;
                    }
                    flush(&mut text, &mut out, p);
                    out.push_str(&format!("{{{{ {field} }}}}"));
                } else if vars.strict {
                    p.at(at, format!("the template uses `{{{field}}}`, which this solver does not fill"));
                    break;
                } else {
                    text.push('{');
                    text.push_str(&field);
                    text.push('}');
                }
            }
            c => text.push(c),
        }
    }
    flush(&mut text, &mut out, p);
    (p.issues.len() == before).then_some(out)
}

/// The scorers as `qa` scorer entries, with each one's place in the file.
fn scorers(task: &HfTask, solved: Option<&Solved>, shuffle: bool, judge: Option<&Value>, p: &mut Problems<'_>) -> (Vec<Value>, Vec<Location>) {
    const SCORERS: &[&str] = &["match", "includes", "exact", "f1", "pattern", "answer", "choice", "model_graded_qa", "model_graded_fact"];
    let mut out = Vec::new();
    let mut at = Vec::new();
    for step in &task.scorers.value {
        let s = &step.value;
        let name = s.name.value.as_str();
        let opts = |keys: &[&str]| -> Map<String, Value> {
            s.args.iter().filter(|(k, _)| keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.value.clone())).collect()
        };
        let entry = match name {
            "match" => {
                only_args(s, &["location", "ignore_case", "numeric"], p);
                json!({"match": opts(&["location", "ignore_case", "numeric"])})
            }
            "includes" => {
                only_args(s, &["ignore_case"], p);
                json!({"includes": opts(&["ignore_case"])})
            }
            "exact" => {
                only_args(s, &[], p);
                json!("exact")
            }
            "f1" => {
                only_args(s, &["stop_words"], p);
                json!({"f1": opts(&["stop_words"])})
            }
            "pattern" => {
                only_args(s, &["pattern", "ignore_case", "match_all"], p);
                json!({"pattern": opts(&["pattern", "ignore_case", "match_all"])})
            }
            "answer" => {
                only_args(s, &["pattern"], p);
                json!({"answer": opts(&["pattern"])})
            }
            "choice" => {
                only_args(s, &[], p);
                if solved.is_some_and(|s| !s.multiple_choice) {
                    p.at(step.referenced, "the `choice` scorer reads the `multiple_choice` solver's answer: add that solver");
                }
                json!({"choice": {"shuffle": shuffle, "multiple_correct": solved.is_some_and(|s| s.multiple_correct)}})
            }
            "model_graded_qa" | "model_graded_fact" => {
                only_args(s, &["instructions", "partial_credit", "model"], p);
                let mut o = Map::new();
                if name == "model_graded_fact" {
                    o.insert("fact".into(), json!(true));
                }
                if let Some((i, _)) = arg_text(s, "instructions", p) {
                    o.insert("rubric".into(), json!(i));
                }
                if arg_bool(s, "partial_credit", p) {
                    o.insert("grades".into(), json!(["C", "P", "I"]));
                }
                let model = match (judge, s.args.get("model")) {
                    (Some(Value::Object(m)), _) => Some(Value::Object(m.clone())),
                    (Some(_), _) => {
                        p.issues.push(pipeline_issue("judge", "`judge` must be a model entry, e.g. `{provider: openai, model: gpt-4.1-mini}`", None));
                        None
                    }
                    (None, Some(Spanned { value: Value::String(m), referenced, .. })) => match m.split_once('/') {
                        Some((provider, model)) if crate::spec::Provider::parse(provider).is_some() => Some(json!({"provider": provider, "model": model})),
                        _ => {
                            p.hint(
                                *referenced,
                                format!("judge model `{m}` is not `<provider>/<model>` with an evalgrid provider"),
                                Some("give the entry `params.judge: {provider: …, model: …}`".into()),
                            );
                            None
                        }
                    },
                    (None, Some(v)) => {
                        p.at(v.referenced, "`model` must be one `<provider>/<model>` name");
                        None
                    }
                    (None, None) => {
                        p.hint(
                            step.referenced,
                            format!("`{name}` without `model` grades with the model under test"),
                            Some("name the judge with the entry's `params.judge: {provider: …, model: …}`".into()),
                        );
                        None
                    }
                };
                if let Some(m) = model {
                    o.insert("model".into(), m);
                }
                json!({"judge": o, "name": name})
            }
            other => {
                p.hint(
                    s.name.referenced,
                    format!("scorer `{other}` is not supported"),
                    suggestion(other, SCORERS).or_else(|| Some(format!("evalgrid scores with {}", SCORERS.join(", ")))),
                );
                continue;
            }
        };
        // Two scorers of one name get Inspect's suffixes (`match`, `match1`) as columns.
        let base = entry.as_object().and_then(|m| m.keys().find(|k| *k != "name").cloned()).unwrap_or_else(|| name.to_owned());
        let column = if name.starts_with("model_graded_") { name.to_owned() } else { base };
        let taken =
            out.iter().filter(|e: &&Value| column_of(e) == column || column_of(e).strip_prefix(&column).is_some_and(|r| r.parse::<u32>().is_ok())).count();
        let mut entry = entry;
        if taken > 0 {
            entry = match entry {
                Value::String(s) => json!({s: null, "name": format!("{column}{taken}")}),
                Value::Object(mut m) => {
                    m.insert("name".into(), json!(format!("{column}{taken}")));
                    Value::Object(m)
                }
                other => other,
            };
        }
        out.push(entry);
        at.push(step.referenced);
    }
    if out.is_empty() && !task.scorers.value.is_empty() && p.issues.is_empty() {
        p.at(task.scorers.referenced, "no scorer");
    }
    if task.scorers.value.is_empty() {
        p.at(task.scorers.referenced, "`scorers` is empty");
    }
    (out, at)
}

fn column_of(entry: &Value) -> String {
    match entry {
        Value::String(s) => s.clone(),
        Value::Object(m) => m.get("name").and_then(Value::as_str).map(str::to_owned).or_else(|| m.keys().find(|k| *k != "name").cloned()).unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translate_text(template: &str, prompt: Option<&str>, metadata: &[String]) -> Result<String, String> {
        let file = PathBuf::from("eval.yaml");
        let mut p = Problems { file: &file, issues: Vec::new() };
        let vars = Vars { prompt, metadata, params: BTreeMap::new(), strict: false };
        translate_template(template, &vars, Location::UNKNOWN, &mut p).ok_or_else(|| p.issues.iter().map(|i| i.message.clone()).collect::<Vec<_>>().join("; "))
    }

    fn render(source: &str, input: &str) -> String {
        let mut env = minijinja::Environment::new();
        env.add_template("t", source).unwrap();
        env.get_template("t").unwrap().render(minijinja::context! {input => input, subject => "maths"}).unwrap()
    }

    #[test]
    fn python_templates_become_minijinja_that_renders_as_inspect_fills_them() {
        let t = translate_text("Q: {prompt}\n{{literal}} {unknown thing} {subject}\n", Some("{{ input }}"), &["subject".into()]).unwrap();
        assert_eq!(render(&t, "2+2? {x}"), "Q: 2+2? {x}\n{literal} {unknown thing} maths\n");
        let cot = translate_text(COT_TEMPLATE, Some("{{ input }}"), &[]).unwrap();
        assert!(render(&cot, "q").starts_with("\nq\n\nBefore answering") && render(&cot, "q").ends_with("question.\n"));
        assert!(translate_text("{prompt:>10}", Some("{{ input }}"), &[]).unwrap_err().contains("format spec"));
        assert!(translate_text("a } b", None, &[]).unwrap_err().contains("single `}`"));
        assert!(translate_text("{prompt", Some("x"), &[]).unwrap_err().contains("not closed"));
    }
}
