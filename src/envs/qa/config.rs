//! A `qa` task entry's `params`, checked: the dataset, field mapping, template, system
//! prompt, few-shot examples, `sample`/`limit` and the scorers. Every problem is a
//! [`CatalogIssue`] at the parameter, so the user sees the pipeline's `file:line:col`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::inspect::{AnswerPattern, Location};
use super::item::FieldMap;
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, Params};

/// The largest `template_file`: a prompt template is text a person wrote, so anything bigger
/// is a wrong path.
pub const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

/// A `template_file`'s text: a regular file of at most [`MAX_TEMPLATE_BYTES`] in UTF-8 (a
/// device or FIFO is refused before it is opened).
fn read_template(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = super::dataset::open_regular(path, MAX_TEMPLATE_BYTES)?;
    let mut bytes = Vec::new();
    file.take(MAX_TEMPLATE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {}", e.kind()))?;
    if bytes.len() as u64 > MAX_TEMPLATE_BYTES {
        return Err(format!("grew past the {MAX_TEMPLATE_BYTES} bytes a template may have while it was read"));
    }
    String::from_utf8(bytes).map_err(|e| format!("is not valid UTF-8 (byte {})", e.utf8_error().valid_up_to() + 1))
}

/// Task parameters a `qa` entry accepts.
pub const PARAMS: &[&str] =
    &["dataset", "name", "fields", "template", "template_file", "system", "fewshot", "sample", "limit", "scorers", "where", "lm_eval_yaml"];

/// The parameters an entry with `lm_eval_yaml` may add: the rest comes from the task file.
const LM_EVAL_PARAMS: &[&str] = &["lm_eval_yaml", "name", "sample", "limit", "method"];

/// Scorer names, as Inspect AI names its built-ins.
pub const SCORERS: &[&str] = &["match", "includes", "exact", "f1", "pattern", "answer", "choice", "judge", "acc", "acc_norm"];

/// Names the score record uses for itself, so no scorer column may take them.
const RESERVED: &[&str] = &["n", "scorers", "items", "input_tokens", "output_tokens"];

/// One scorer and its options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScorerKind {
    /// `match`: the target at the answer's begin/end/anywhere/exactly.
    Match {
        /// Where to look.
        location: Location,
        /// Compare case-insensitively.
        ignore_case: bool,
        /// Compare numbers.
        numeric: bool,
    },
    /// `includes`: the target is a substring.
    Includes {
        /// Compare case-insensitively.
        ignore_case: bool,
    },
    /// `exact`: normalised equality.
    Exact,
    /// `f1`: token F1.
    F1 {
        /// Words left out before counting.
        stop_words: Vec<String>,
    },
    /// `pattern`: a regex's groups against the targets.
    Pattern {
        /// The regex (Rust `regex` syntax).
        pattern: String,
        /// Compare case-insensitively (and match the regex so).
        ignore_case: bool,
        /// Every group must match.
        match_all: bool,
    },
    /// `answer`: the value after `ANSWER:`.
    Answer {
        /// What to extract.
        pattern: AnswerPattern,
    },
    /// `choice`: the letters chosen.
    Choice {
        /// Shuffle choices per seed (part of each item's prompt, hence its key).
        shuffle: bool,
        /// Several letters may be right.
        multiple_correct: bool,
        /// How the pick is read: from the generated text (`ANSWER: X`, the default, left out
        /// of keys so existing ones hold) or from the next token's log-probabilities.
        #[serde(default, skip_serializing_if = "ChoiceMethod::is_generate")]
        method: ChoiceMethod,
    },
    /// `acc`: lm-evaluation-harness's accuracy: the choice (as written, not its letter) whose
    /// text is the likeliest next token is the target.
    Acc,
    /// `acc_norm`: lm-evaluation-harness's `acc_norm`: as `acc`, each log-probability divided
    /// by its choice's length in characters.
    AccNorm,
    /// `acc`/`acc_norm` with `method: loglikelihood`: lm-evaluation-harness's definitions over
    /// each choice's whole continuation (`" "` + its text), scored from the prompt's own token
    /// log-probabilities; `norm` divides by the choice's length in characters.
    AccLoglikelihood {
        /// `acc_norm`.
        norm: bool,
    },
    /// `judge`: a model grades the answer.
    Judge(Judge),
    /// lm-evaluation-harness's `exact_match` after its filters (made from an lm-eval task file
    /// only, `params.lm_eval_yaml`).
    ExactMatch(super::lm_eval::ExactMatch),
}

/// How a `choice` scorer reads which option the model picked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceMethod {
    /// The letters the model writes after `ANSWER:`.
    #[default]
    Generate,
    /// The option letter with the highest next-token log-probability after the prompt (a base
    /// model that writes no `ANSWER: X` is scored this way); needs a server that gives them.
    Logprobs,
    /// The option letter whose continuation (`" A"`, `" B"`, …) after the prompt has the
    /// highest log-likelihood, read from the prompt's own token log-probabilities (a
    /// completions endpoint with `echo`).
    Loglikelihood,
}

impl ChoiceMethod {
    /// True for the default, which keys leave out.
    #[must_use]
    pub fn is_generate(&self) -> bool {
        *self == Self::Generate
    }
}

/// The `judge` scorer's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judge {
    /// The judge's model entry, written inline (`provider`, `model`, `base_url`, `params`, …).
    pub model: Map<String, Value>,
    /// Grading instructions (Inspect's `instructions`); `None`: Inspect's default ones.
    pub rubric: Option<String>,
    /// Grades the judge may give (`C`, `P`, `I`); `P` scores 0.5.
    pub grades: Vec<String>,
    /// Inspect's `model_graded_fact` prompt (the targets as the expert answer) instead of
    /// `model_graded_qa`'s; absent from the key when false, as before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fact: bool,
}

/// A named scorer: its column in `items.csv` is `name`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scorer {
    /// Column name.
    pub name: String,
    /// What it does.
    pub kind: ScorerKind,
}

impl Scorer {
    /// Whether it reads next-token log-probabilities instead of generated text.
    #[must_use]
    pub fn uses_logprobs(&self) -> bool {
        self.uses_loglikelihood() || matches!(self.kind, ScorerKind::Choice { method: ChoiceMethod::Logprobs, .. } | ScorerKind::Acc | ScorerKind::AccNorm)
    }

    /// Whether it reads each choice's continuation log-likelihood (`method: loglikelihood`).
    #[must_use]
    pub fn uses_loglikelihood(&self) -> bool {
        matches!(self.kind, ScorerKind::Choice { method: ChoiceMethod::Loglikelihood, .. } | ScorerKind::AccLoglikelihood { .. })
    }

    /// Whether its values are 0/1 (so McNemar applies); `f1` and `judge` are not.
    #[must_use]
    pub fn binary(&self) -> bool {
        !matches!(self.kind, ScorerKind::F1 { .. } | ScorerKind::Judge(_))
    }
}

/// `sample: {n, seed}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// How many rows.
    pub n: u64,
    /// Which ones.
    pub seed: u64,
}

/// `fewshot: {from, n, seed}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fewshot {
    /// The examples' file.
    pub from: PathBuf,
    /// How many.
    pub n: u64,
    /// Which ones.
    pub seed: u64,
}

/// A checked task entry.
#[derive(Clone, Debug)]
pub struct TaskConfig {
    /// The dataset file (joined to the pipeline's folder).
    pub dataset: PathBuf,
    /// Task id.
    pub name: String,
    /// Columns of the fields.
    pub fields: FieldMap,
    /// Template source; `None`: the default for the item's kind.
    pub template: Option<String>,
    /// System template.
    pub system: Option<String>,
    /// Few-shot examples.
    pub fewshot: Option<Fewshot>,
    /// Random subset.
    pub sample: Option<Sample>,
    /// First rows only.
    pub limit: Option<u64>,
    /// Scorers, in column order.
    pub scorers: Vec<Scorer>,
    /// `where:`: the rows kept, each column's accepted values (all must hold), so one file
    /// can feed several tasks.
    pub keep: Vec<(String, Vec<Value>)>,
    /// The row mapping of an lm-eval task file (`lm_eval_yaml`), applied to each row as read.
    pub docs: Option<std::sync::Arc<super::lm_eval::Docs>>,
    /// Request parameters of the task (an lm-eval file's `generation_kwargs`), over the model's.
    pub generation: Map<String, Value>,
}

impl TaskConfig {
    /// The `choice` scorer's settings, if the task has one.
    #[must_use]
    pub fn choice(&self) -> Option<(bool, bool)> {
        self.scorers.iter().find_map(|s| match s.kind {
            ScorerKind::Choice { shuffle, multiple_correct, .. } => Some((shuffle, multiple_correct)),
            _ => None,
        })
    }

    /// Whether items are asked for the next token's log-probabilities (a `choice` scorer with
    /// `method: logprobs`, or `acc`/`acc_norm`) instead of a generated answer.
    #[must_use]
    pub fn asks_logprobs(&self) -> bool {
        self.scorers.iter().any(Scorer::uses_logprobs)
    }

    /// Whether items are scored from each choice's continuation log-likelihood (`method:
    /// loglikelihood`): one prompt-scoring call per choice instead of one call per item.
    #[must_use]
    pub fn asks_loglikelihood(&self) -> bool {
        self.scorers.iter().any(Scorer::uses_loglikelihood)
    }

    /// Whether the continuations scored are the option letters (`choice: {method:
    /// loglikelihood}`) rather than the choices' texts (`acc`/`acc_norm`).
    #[must_use]
    pub fn loglikelihood_of_letters(&self) -> bool {
        self.scorers.iter().any(|s| matches!(s.kind, ScorerKind::Choice { method: ChoiceMethod::Loglikelihood, .. }))
    }

    /// What the task's key holds besides its items: everything but paths, a judge's
    /// `batch:` (a transport knob: a batched grading is the live one) and its `price:`
    /// (what an answer costs never changes it).
    #[must_use]
    pub fn key_params(&self) -> Params {
        let mut scorers = self.scorers.clone();
        for scorer in &mut scorers {
            if let ScorerKind::Judge(judge) = &mut scorer.kind {
                judge.model.remove("batch");
                judge.model.remove("price");
            }
        }
        let mut p = Params::new();
        p.insert("fields".into(), json!(self.fields));
        p.insert("template".into(), json!(self.template));
        p.insert("system".into(), json!(self.system));
        p.insert("sample".into(), json!(self.sample));
        p.insert("limit".into(), json!(self.limit));
        p.insert("scorers".into(), json!(scorers));
        // Only for lm-eval task files, so every other task's key stays as it was.
        if let Some(docs) = &self.docs {
            p.insert("lm_eval".into(), json!(docs.as_ref()));
        }
        if !self.generation.is_empty() {
            p.insert("generation".into(), Value::Object(self.generation.clone()));
        }
        p
    }
}

fn issue(param: &str, message: impl Into<String>) -> CatalogIssue {
    CatalogIssue { site: IssueSite::Param(param.to_owned()), message: message.into(), hint: None }
}

fn uint(param: &str, v: Option<&Value>, issues: &mut Vec<CatalogIssue>) -> Option<u64> {
    match v {
        None => None,
        Some(v) => v.as_u64().or_else(|| {
            issues.push(issue(param, format!("`{param}` must be a non-negative integer")));
            None
        }),
    }
}

/// `where: {column: value}` or `{column: [value, …]}`: each column's accepted values.
fn row_filter(v: Option<&Value>, issues: &mut Vec<CatalogIssue>) -> Vec<(String, Vec<Value>)> {
    let scalar = |v: &Value| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_));
    match v {
        None => Vec::new(),
        Some(Value::Object(m)) if !m.is_empty() => {
            let mut out = Vec::new();
            for (column, wanted) in m {
                match wanted {
                    Value::Array(list) if !list.is_empty() && list.iter().all(scalar) => out.push((column.clone(), list.clone())),
                    v if scalar(v) => out.push((column.clone(), vec![v.clone()])),
                    _ => issues.push(issue("where", format!("`where.{column}` must be a value or a non-empty list of values (text, number, true/false)"))),
                }
            }
            out
        }
        Some(_) => {
            issues.push(issue("where", "`where` must map columns to the values kept, e.g. `{type: choice}` or `{type: [choice, mc]}`"));
            Vec::new()
        }
    }
}

/// Whether a row is kept by `where:` (a value matches as JSON, or as text: CSV cells are text).
#[must_use]
pub fn keeps(keep: &[(String, Vec<Value>)], fields: &Map<String, Value>) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    };
    keep.iter().all(|(column, wanted)| fields.get(column).is_some_and(|have| wanted.iter().any(|w| w == have || (text(w).is_some() && text(w) == text(have)))))
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// Checks `params` of a task entry whose pipeline lies in `base_dir`.
pub fn parse(base_dir: &Path, params: &Params) -> Result<TaskConfig, Vec<CatalogIssue>> {
    if let Some(file) = params.get("lm_eval_yaml") {
        return from_lm_eval(base_dir, params, file);
    }
    let mut issues = Vec::new();
    for name in params.keys().filter(|k| !PARAMS.contains(&k.as_str())) {
        issues.push(CatalogIssue {
            site: IssueSite::Param(name.clone()),
            message: format!("unknown qa task parameter `{name}`"),
            hint: suggestion(name, PARAMS),
        });
    }
    let Some(dataset) = text(params.get("dataset")) else {
        issues.push(CatalogIssue {
            site: if params.contains_key("dataset") { IssueSite::Param("dataset".into()) } else { IssueSite::Entry },
            message: "a qa task needs `params.dataset`: a `.jsonl`, `.csv` or `.parquet` file".into(),
            hint: Some("e.g. `params: {dataset: datasets/qa-example.jsonl}` (relative to the pipeline file)".into()),
        });
        return Err(issues);
    };
    let dataset = base_dir.join(dataset);
    let name = match params.get("name") {
        None => dataset.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        Some(Value::String(s)) if !s.is_empty() && !s.contains(['/', '\\']) && !s.bytes().all(|b| b == b'.') => s.clone(),
        Some(_) => {
            issues.push(issue("name", "`name` must be one path segment: a non-empty text without `/` or `\\`, and not `.` or `..`"));
            String::new()
        }
    };
    let mut fields = FieldMap::default();
    match params.get("fields") {
        None => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("choice_columns", Value::Array(list)) if !list.is_empty() && list.iter().all(Value::is_string) => {
                        fields.choice_columns = list.iter().filter_map(Value::as_str).map(str::to_owned).collect();
                        continue;
                    }
                    ("choice_columns", _) => {
                        issues.push(issue("fields", "`fields.choice_columns` must be a non-empty list of column names"));
                        continue;
                    }
                    ("index_target", Value::Bool(b)) => {
                        fields.index_target = *b;
                        continue;
                    }
                    ("index_target", _) => {
                        issues.push(issue("fields", "`fields.index_target` must be true or false"));
                        continue;
                    }
                    _ => {}
                }
                match v.as_str() {
                    Some(col) if fields.set(k, col.to_owned()) => {}
                    Some(_) => issues.push(CatalogIssue {
                        site: IssueSite::Param("fields".into()),
                        message: format!("unknown field `{k}`"),
                        hint: suggestion(k, &FieldMap::NAMES).or_else(|| Some(format!("fields are {}", FieldMap::NAMES.join(", ")))),
                    }),
                    None => issues.push(issue("fields", format!("`fields.{k}` must be a column name"))),
                }
            }
        }
        Some(_) => issues.push(issue("fields", "`fields` must map field names to column names, e.g. `{input: question, target: answer}`")),
    }
    let template = match (params.get("template"), params.get("template_file")) {
        (Some(_), Some(_)) => {
            issues.push(issue("template_file", "give `template` or `template_file`, not both"));
            None
        }
        (Some(Value::String(t)), None) => Some(t.clone()),
        (Some(_), None) => {
            issues.push(issue("template", "`template` must be text"));
            None
        }
        (None, Some(Value::String(f))) => match read_template(&base_dir.join(f)) {
            Ok(t) => Some(t),
            Err(e) => {
                issues.push(issue("template_file", format!("`{f}`: {e}")));
                None
            }
        },
        (None, Some(_)) => {
            issues.push(issue("template_file", "`template_file` must be a path"));
            None
        }
        (None, None) => None,
    };
    let system = match params.get("system") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            issues.push(issue("system", "`system` must be text"));
            None
        }
    };
    let fewshot = match params.get("fewshot") {
        None => None,
        Some(Value::Object(m)) => {
            for k in m.keys().filter(|k| !["from", "n", "seed"].contains(&k.as_str())) {
                issues.push(issue("fewshot", format!("unknown `fewshot` setting `{k}` (it has from, n, seed)")));
            }
            match text(m.get("from")) {
                Some(from) => Some(Fewshot {
                    from: base_dir.join(from),
                    n: uint("fewshot", m.get("n"), &mut issues).unwrap_or(3),
                    seed: uint("fewshot", m.get("seed"), &mut issues).unwrap_or(0),
                }),
                None => {
                    issues.push(issue("fewshot", "`fewshot.from` must name a dataset file"));
                    None
                }
            }
        }
        Some(_) => {
            issues.push(issue("fewshot", "`fewshot` must be `{from: FILE, n: 3, seed: 0}`"));
            None
        }
    };
    let sample = match params.get("sample") {
        None => None,
        Some(Value::Object(m)) if m.keys().all(|k| k == "n" || k == "seed") && m.contains_key("n") => {
            Some(Sample { n: uint("sample", m.get("n"), &mut issues).unwrap_or(0), seed: uint("sample", m.get("seed"), &mut issues).unwrap_or(0) })
        }
        Some(_) => {
            issues.push(issue("sample", "`sample` must be `{n: N, seed: S}`"));
            None
        }
    };
    let limit = uint("limit", params.get("limit"), &mut issues);
    let keep = row_filter(params.get("where"), &mut issues);
    // Each scorer with its place in the list: its problems point at its own entry.
    let scorers: Vec<(usize, Scorer)> = match params.get("scorers") {
        None => vec![(0, Scorer { name: "match".into(), kind: default_kind("match").unwrap_or(ScorerKind::Exact) })],
        Some(Value::Array(list)) if !list.is_empty() => {
            let mut parsed = Vec::new();
            for (i, entry) in list.iter().enumerate() {
                let before = issues.len();
                let s = scorer(entry, &mut issues);
                at_entry(&mut issues[before..], i);
                parsed.extend(s.map(|s| (i, s)));
            }
            parsed
        }
        Some(_) => {
            issues.push(issue("scorers", "`scorers` must be a non-empty list, e.g. `[match, includes]`"));
            Vec::new()
        }
    };
    for (k, (i, s)) in scorers.iter().enumerate() {
        let before = issues.len();
        if RESERVED.contains(&s.name.as_str()) || s.name.ends_with("_sum") || s.name.ends_with("_n") {
            issues.push(issue("scorers", format!("`{}` cannot name a scorer: the score record uses it (as it does names ending in `_sum` or `_n`)", s.name)));
        }
        if scorers[..k].iter().any(|(_, o)| o.name == s.name) {
            issues.push(CatalogIssue {
                site: IssueSite::Param("scorers".into()),
                message: format!("two scorers are named `{}`", s.name),
                hint: Some("give one a `name:`, e.g. `{match: {numeric: true}, name: match_numeric}`".into()),
            });
        }
        if params.contains_key("scorers") {
            at_entry(&mut issues[before..], *i);
        }
    }
    let scorers: Vec<Scorer> = scorers.into_iter().map(|(_, s)| s).collect();
    if scorers.iter().filter(|s| matches!(s.kind, ScorerKind::Choice { .. })).count() > 1 {
        issues.push(issue("scorers", "one `choice` scorer per task: it decides how choices are shown"));
    }
    if scorers.iter().any(Scorer::uses_logprobs)
        && let Some(text) = scorers.iter().find(|s| !s.uses_logprobs())
    {
        issues.push(CatalogIssue {
            site: IssueSite::Param("scorers".into()),
            message: format!(
                "scorer `{}` reads a generated answer, but this task's log-probability scorers ask each item for one token's log-probabilities only",
                text.name
            ),
            hint: Some("give the log-probability scorers (`choice: {method: logprobs}`, `acc`, `acc_norm`) a task entry of their own".into()),
        });
    }
    if scorers.iter().any(Scorer::uses_loglikelihood)
        && let Some(next) = scorers.iter().find(|s| s.uses_logprobs() && !s.uses_loglikelihood())
    {
        issues.push(issue(
            "scorers",
            format!("scorer `{}` reads the next token's log-probabilities, but this task's `method: loglikelihood` scorers score each choice's continuation: give each method a task entry of its own", next.name),
        ));
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(TaskConfig { dataset, name, fields, template, system, fewshot, sample, limit, scorers, keep, docs: None, generation: Map::new() })
}

/// An entry with `lm_eval_yaml: FILE`: the task file translated ([`super::lm_eval`]), with
/// the entry's `name`, `sample` and `limit`.
fn from_lm_eval(base_dir: &Path, params: &Params, file: &Value) -> Result<TaskConfig, Vec<CatalogIssue>> {
    let mut issues: Vec<CatalogIssue> = params
        .keys()
        .filter(|k| !LM_EVAL_PARAMS.contains(&k.as_str()))
        .map(|k| CatalogIssue {
            site: IssueSite::Param(k.clone()),
            message: format!("`{k}` cannot be given beside `lm_eval_yaml`: the lm-eval task file says it"),
            hint: Some(format!("beside `lm_eval_yaml` a qa entry takes {}", LM_EVAL_PARAMS[1..].join(", "))),
        })
        .collect();
    let Some(file) = file.as_str() else {
        issues.push(issue("lm_eval_yaml", "`lm_eval_yaml` must be the path of an lm-eval task file"));
        return Err(issues);
    };
    let translated = match super::lm_eval::translate(&base_dir.join(file)) {
        Ok(t) => t,
        Err(e) => {
            issues.push(issue("lm_eval_yaml", e.to_string()));
            return Err(issues);
        }
    };
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut rest = Params::new();
    rest.insert("dataset".into(), json!(translated.dataset.to_string_lossy()));
    rest.insert("name".into(), params.get("name").cloned().unwrap_or_else(|| json!(translated.name)));
    for k in ["sample", "limit"] {
        if let Some(v) = params.get(k) {
            rest.insert(k.into(), v.clone());
        }
    }
    let mut config = parse(base_dir, &rest)?;
    config.fields =
        FieldMap { input: super::lm_eval::INPUT.into(), target: super::lm_eval::TARGET.into(), choices: super::lm_eval::CHOICES.into(), ..FieldMap::default() };
    config.scorers = translated.scorers;
    match params.get("method").map(|m| m.as_str()) {
        None | Some(Some("logprobs")) => {}
        Some(Some("loglikelihood")) => {
            if translated.target_delimiter != " " {
                return Err(vec![issue(
                    "method",
                    format!(
                        "`method: loglikelihood` scores `\" \" + choice` (lm-eval's default `target_delimiter`); this task file sets {:?}",
                        translated.target_delimiter
                    ),
                )]);
            }
            for scorer in &mut config.scorers {
                scorer.kind = match scorer.kind {
                    ScorerKind::Acc => ScorerKind::AccLoglikelihood { norm: false },
                    ScorerKind::AccNorm => ScorerKind::AccLoglikelihood { norm: true },
                    ref other => other.clone(),
                };
            }
        }
        Some(_) => {
            return Err(vec![issue(
                "method",
                "`method` must be logprobs (the next token, the default) or loglikelihood (each choice's whole continuation, lm-eval's own scoring)",
            )]);
        }
    }
    config.docs = Some(translated.docs);
    config.generation = translated.generation;
    Ok(config)
}

/// Points `issues` found in `scorers` at its entry `i`.
fn at_entry(issues: &mut [CatalogIssue], i: usize) {
    for issue in issues {
        if matches!(&issue.site, IssueSite::Param(p) if p == "scorers") {
            issue.site = IssueSite::ParamItem("scorers".into(), i);
        }
    }
}

fn default_kind(name: &str) -> Option<ScorerKind> {
    Some(match name {
        "match" => ScorerKind::Match { location: Location::End, ignore_case: true, numeric: false },
        "includes" => ScorerKind::Includes { ignore_case: true },
        "exact" => ScorerKind::Exact,
        "f1" => ScorerKind::F1 { stop_words: Vec::new() },
        "choice" => ScorerKind::Choice { shuffle: false, multiple_correct: false, method: ChoiceMethod::Generate },
        "acc" => ScorerKind::Acc,
        "acc_norm" => ScorerKind::AccNorm,
        _ => return None,
    })
}

/// One entry of `scorers`: a name, or `{<scorer>: {options}, name: column}`.
fn scorer(entry: &Value, issues: &mut Vec<CatalogIssue>) -> Option<Scorer> {
    let unknown = |name: &str| CatalogIssue {
        site: IssueSite::Param("scorers".into()),
        message: format!("unknown scorer `{name}`"),
        hint: suggestion(name, SCORERS).or_else(|| Some(format!("scorers are {}", SCORERS.join(", ")))),
    };
    match entry {
        Value::String(name) => match default_kind(name) {
            Some(kind) => Some(Scorer { name: name.clone(), kind }),
            None if SCORERS.contains(&name.as_str()) => {
                issues.push(issue("scorers", format!("scorer `{name}` needs options, e.g. {}", example(name))));
                None
            }
            None => {
                issues.push(unknown(name));
                None
            }
        },
        Value::Object(m) => {
            let kinds: Vec<&String> = m.keys().filter(|k| *k != "name").collect();
            let [kind] = kinds.as_slice() else {
                issues.push(issue("scorers", "a scorer entry is one scorer and an optional `name:`, e.g. `{match: {numeric: true}, name: match_numeric}`"));
                return None;
            };
            if !SCORERS.contains(&kind.as_str()) {
                issues.push(unknown(kind));
                return None;
            }
            let name = match m.get("name") {
                None => (*kind).clone(),
                Some(Value::String(n)) if !n.is_empty() && !n.contains(',') => n.clone(),
                Some(_) => {
                    issues.push(issue("scorers", "a scorer's `name` must be a non-empty text without commas"));
                    return None;
                }
            };
            let empty = Map::new();
            let opts = match &m[kind.as_str()] {
                Value::Null => &empty,
                Value::Object(o) => o,
                _ => {
                    issues.push(issue("scorers", format!("`{kind}`'s options must be a mapping, e.g. {}", example(kind))));
                    return None;
                }
            };
            options(kind, opts, issues).map(|kind| Scorer { name, kind })
        }
        _ => {
            issues.push(issue("scorers", "a scorer is a name or `{<scorer>: {options}}`"));
            None
        }
    }
}

fn example(kind: &str) -> &'static str {
    match kind {
        "pattern" => "`{pattern: {pattern: \"ANSWER: (\\\\w+)\"}}`",
        "answer" => "`{answer: {pattern: letter}}` (letter, word or line)",
        "judge" => "`{judge: {model: {provider: openai, model: gpt-4.1-mini}}}`",
        _ => "`{match: {location: end, ignore_case: true, numeric: false}}`",
    }
}

fn options(kind: &str, o: &Map<String, Value>, issues: &mut Vec<CatalogIssue>) -> Option<ScorerKind> {
    let allowed: &[&str] = match kind {
        "match" => &["location", "ignore_case", "numeric"],
        "includes" => &["ignore_case"],
        "exact" => &[],
        "f1" => &["stop_words"],
        "pattern" => &["pattern", "ignore_case", "match_all"],
        "answer" => &["pattern"],
        "choice" => &["shuffle", "multiple_correct", "method"],
        "acc" | "acc_norm" => &["method"],
        _ => &["model", "rubric", "grades", "fact"],
    };
    let before = issues.len();
    for k in o.keys().filter(|k| !allowed.contains(&k.as_str())) {
        issues.push(CatalogIssue {
            site: IssueSite::Param("scorers".into()),
            message: format!("scorer `{kind}` has no option `{k}`"),
            hint: suggestion(k, allowed)
                .or_else(|| Some(format!("its options are {}", if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }))),
        });
    }
    let mut flag = |k: &str, default: bool| match o.get(k) {
        None => default,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            issues.push(issue("scorers", format!("`{kind}.{k}` must be true or false")));
            default
        }
    };
    let kind = match kind {
        "match" => {
            let (ignore_case, numeric) = (flag("ignore_case", true), flag("numeric", false));
            let location = match o.get("location").map(|v| serde_json::from_value::<Location>(v.clone())) {
                None => Location::End,
                Some(Ok(l)) => l,
                Some(Err(_)) => {
                    issues.push(issue("scorers", "`match.location` must be begin, end, any or exact"));
                    Location::End
                }
            };
            ScorerKind::Match { location, ignore_case, numeric }
        }
        "includes" => ScorerKind::Includes { ignore_case: flag("ignore_case", true) },
        "exact" => ScorerKind::Exact,
        "f1" => {
            let stop_words = match o.get("stop_words") {
                None => Vec::new(),
                Some(v) => serde_json::from_value::<Vec<String>>(v.clone()).unwrap_or_else(|_| {
                    issues.push(issue("scorers", "`f1.stop_words` must be a list of words"));
                    Vec::new()
                }),
            };
            ScorerKind::F1 { stop_words }
        }
        "pattern" => {
            let (ignore_case, match_all) = (flag("ignore_case", true), flag("match_all", false));
            let Some(pattern) = text(o.get("pattern")) else {
                issues.push(issue("scorers", format!("`pattern` needs `pattern:`, e.g. {}", example("pattern"))));
                return None;
            };
            if let Err(e) = regex::RegexBuilder::new(&pattern).case_insensitive(ignore_case).size_limit(1 << 20).build() {
                let first = e.to_string().lines().last().unwrap_or_default().trim().to_owned();
                issues.push(issue("scorers", format!("pattern `{pattern}` does not compile: {first}")));
                return None;
            }
            ScorerKind::Pattern { pattern, ignore_case, match_all }
        }
        "answer" => match o.get("pattern").map(|v| serde_json::from_value::<AnswerPattern>(v.clone())) {
            Some(Ok(pattern)) => ScorerKind::Answer { pattern },
            _ => {
                issues.push(issue("scorers", format!("`answer` needs `pattern:` letter, word or line, e.g. {}", example("answer"))));
                return None;
            }
        },
        "choice" => {
            let (shuffle, multiple_correct) = (flag("shuffle", false), flag("multiple_correct", false));
            let method = match o.get("method").map(|v| serde_json::from_value::<ChoiceMethod>(v.clone())) {
                None => ChoiceMethod::Generate,
                Some(Ok(m)) => m,
                Some(Err(_)) => {
                    issues.push(issue("scorers", "`choice.method` must be generate, logprobs or loglikelihood"));
                    ChoiceMethod::Generate
                }
            };
            if method != ChoiceMethod::Generate && multiple_correct {
                issues.push(issue("scorers", "`choice` with a log-probability `method` picks one letter, so it cannot score `multiple_correct`"));
            }
            ScorerKind::Choice { shuffle, multiple_correct, method }
        }
        "acc" | "acc_norm" => {
            let norm = kind == "acc_norm";
            match o.get("method").map(|m| m.as_str()) {
                None | Some(Some("logprobs")) => {
                    if norm {
                        ScorerKind::AccNorm
                    } else {
                        ScorerKind::Acc
                    }
                }
                Some(Some("loglikelihood")) => ScorerKind::AccLoglikelihood { norm },
                Some(_) => {
                    issues.push(issue(
                        "scorers",
                        format!("`{kind}.method` must be logprobs (the next token, the default) or loglikelihood (each choice's whole continuation)"),
                    ));
                    return None;
                }
            }
        }
        _ => {
            let fact = flag("fact", false);
            let Some(Value::Object(model)) = o.get("model") else {
                issues.push(issue("scorers", format!("`judge` needs an inline model entry, e.g. {}", example("judge"))));
                return None;
            };
            if let Err(e) = super::judge::judge_model(model) {
                issues.push(issue("scorers", format!("judge model: {e}")));
                return None;
            }
            let rubric = match o.get("rubric") {
                None => None,
                Some(Value::String(r)) => Some(r.clone()),
                Some(_) => {
                    issues.push(issue("scorers", "`judge.rubric` must be text"));
                    None
                }
            };
            let grades = match o.get("grades") {
                None => vec!["C".to_owned(), "I".to_owned()],
                Some(v) => match serde_json::from_value::<Vec<String>>(v.clone()) {
                    Ok(g) if !g.is_empty() && g.iter().all(|g| ["C", "P", "I"].contains(&g.as_str())) && g.contains(&"C".to_owned()) => g,
                    _ => {
                        issues.push(issue("scorers", "`judge.grades` must list grades among C, P and I, with C, e.g. `[C, P, I]`"));
                        Vec::new()
                    }
                },
            };
            ScorerKind::Judge(Judge { model: model.clone(), rubric, grades, fact })
        }
    };
    (issues.len() == before).then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Params {
        v.as_object().unwrap().clone().into_iter().collect()
    }

    #[test]
    fn scorers_are_named_and_checked() {
        let c = parse(
            Path::new("p"),
            &params(json!({"dataset": "d.jsonl", "scorers": ["match", {"match": {"numeric": true}, "name": "match_numeric"}, {"pattern": {"pattern": "ANSWER:\\s*(\\w+)"}}, {"answer": {"pattern": "line"}}, "choice"]})),
        )
        .unwrap();
        assert_eq!(c.name, "d");
        assert_eq!(c.dataset, Path::new("p/d.jsonl"));
        let names: Vec<&str> = c.scorers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["match", "match_numeric", "pattern", "answer", "choice"]);
        let bad = |v: Value| parse(Path::new("."), &params(v)).unwrap_err().into_iter().map(|i| i.message).collect::<Vec<_>>().join("; ");
        assert!(bad(json!({"dataset": "d.jsonl", "scorers": ["match", "match"]})).contains("two scorers are named `match`"));
        assert!(bad(json!({"dataset": "d.jsonl", "scorers": [{"pattern": {"pattern": "(unclosed"}}]})).contains("does not compile"));
        assert!(bad(json!({"dataset": "d.jsonl", "scorers": ["mach"]})).contains("unknown scorer `mach`"));
        assert!(bad(json!({"dataset": "d.jsonl", "scorers": [{"match": {"numerc": true}}]})).contains("no option `numerc`"));
        assert!(bad(json!({"scorers": ["match"]})).contains("needs `params.dataset`"));
        assert!(bad(json!({"dataset": "d.jsonl", "scorers": [{"judge": {"model": {"provider": "builtin", "model": "x"}}}]})).contains("judge model"));
    }
}
