//! lm-evaluation-harness task YAML, the pure part, as a `qa` task (`params: {lm_eval_yaml:
//! FILE}`): the file is translated into the same [`TaskConfig`] a `qa` entry makes, so the
//! dataset, prompt, cache and scoring machinery are `qa`'s own. Each row is mapped once at
//! load: `doc_to_text` (plus `description`) becomes its `input`, `doc_to_choice` its choices,
//! `doc_to_target` its target (a choice letter for `multiple_choice`). `output_type:
//! multiple_choice` is scored by `acc`/`acc_norm` from next-token log-probabilities;
//! `generate_until` by `exact_match` after the `filter_list`'s regex and take-first steps.
//! Python hooks (`!function`) and every field evalgrid does not support are located errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use serde_saphyr::Spanned;

use super::config::{Scorer, ScorerKind};
use super::inspect::letter;

/// The columns a mapped row gets (the row's own columns are kept beside them).
pub const INPUT: &str = "lm_eval_input";
/// The mapped target column.
pub const TARGET: &str = "lm_eval_target";
/// The mapped choices column.
pub const CHOICES: &str = "lm_eval_choices";

/// The largest task file read: task YAML is text a person wrote.
const MAX_YAML_BYTES: u64 = 1 << 20;

/// Fields of lm-eval's `TaskConfig` that evalgrid reads; the others are named in errors.
const LM_EVAL_FIELDS: &[&str] = &[
    "task",
    "task_alias",
    "tag",
    "group",
    "dataset_path",
    "dataset_name",
    "dataset_kwargs",
    "custom_dataset",
    "training_split",
    "validation_split",
    "test_split",
    "fewshot_split",
    "process_docs",
    "doc_to_text",
    "doc_to_target",
    "doc_to_image",
    "doc_to_audio",
    "unsafe_code",
    "doc_to_choice",
    "process_results",
    "use_prompt",
    "description",
    "target_delimiter",
    "fewshot_delimiter",
    "fewshot_config",
    "num_fewshot",
    "metric_list",
    "output_type",
    "generation_kwargs",
    "repeats",
    "filter_list",
    "should_decontaminate",
    "doc_to_decontamination_query",
    "gen_prefix",
    "multiple_input",
    "metadata",
];

/// One step of a `filter_list` entry, as lm-eval's `RegexFilter` and `TakeFirstFilter` do it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterStep {
    /// `regex`: Python's `re.findall`, the `group_select`-th match (negative: from the end),
    /// the first non-empty group of a match with several, stripped; else `fallback`.
    Regex {
        /// The pattern (Rust `regex` syntax, which lm-eval's patterns use).
        pattern: String,
        /// Which match.
        group_select: i64,
        /// The answer when nothing matches.
        fallback: String,
    },
    /// `take_first`: the first of the responses (evalgrid asks once, so the answer itself).
    TakeFirst,
}

/// `exact_match`'s options, as lm-eval's `exact_match_hf_evaluate` takes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExactMatch {
    /// `re.sub(r, "", …)` on both sides first, each in order.
    pub regexes_to_ignore: Vec<String>,
    /// Lower-case both sides.
    pub ignore_case: bool,
    /// Remove ASCII punctuation (`string.punctuation`).
    pub ignore_punctuation: bool,
    /// Remove the digits 0–9.
    pub ignore_numbers: bool,
    /// The filter steps applied to the answer first.
    pub filter: Vec<FilterStep>,
}

/// A translated task: what [`super::config::parse`] fills a [`super::config::TaskConfig`] with.
#[derive(Debug)]
pub struct Translated {
    /// `task:`.
    pub name: String,
    /// The split's data file.
    pub dataset: PathBuf,
    /// The row mapping.
    pub docs: Arc<Docs>,
    /// `metric_list` as scorers.
    pub scorers: Vec<Scorer>,
    /// `generation_kwargs` as request parameters (`stop`, `max_tokens`, `temperature`).
    pub generation: Map<String, Value>,
    /// `target_delimiter` (lm-eval's default `" "`): what `method: loglikelihood` puts
    /// between the context and each choice.
    pub target_delimiter: String,
}

/// Where a `doc_to_*` value comes from.
#[derive(Clone, Debug, Serialize)]
enum Source {
    /// A Jinja template (or a column's name: lm-eval reads the column when the row has it).
    Template(String),
    /// A number (`doc_to_target: 0`).
    Number(i64),
    /// A list written in the YAML (`doc_to_choice: [yes, no]`).
    List(Vec<String>),
}

/// How a row becomes an item: lm-eval's `doc_to_text`, `doc_to_target`, `doc_to_choice`.
#[derive(Serialize)]
pub struct Docs {
    text: Source,
    target: Source,
    choice: Option<Source>,
    description: String,
    multiple_choice: bool,
    #[serde(skip)]
    env: minijinja::Environment<'static>,
}

impl std::fmt::Debug for Docs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Docs").field("text", &self.text).field("target", &self.target).field("choice", &self.choice).finish_non_exhaustive()
    }
}

/// A problem in the task file at `line:col` (0: the file as a whole).
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", path.display())]
pub struct LmEvalError {
    /// The task file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, naming the field.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    task: Option<Spanned<String>>,
    /// Accepted, unused.
    #[serde(rename = "task_alias")]
    _task_alias: Option<IgnoredAny>,
    /// Accepted, unused.
    #[serde(rename = "tag")]
    _tag: Option<IgnoredAny>,
    dataset_path: Option<Spanned<String>>,
    dataset_name: Option<Spanned<Option<String>>>,
    dataset_kwargs: Option<Spanned<Map<String, Value>>>,
    /// Accepted, unused.
    #[serde(rename = "training_split")]
    _training_split: Option<IgnoredAny>,
    validation_split: Option<String>,
    test_split: Option<String>,
    /// Accepted, unused.
    #[serde(rename = "fewshot_split")]
    _fewshot_split: Option<IgnoredAny>,
    doc_to_text: Option<Spanned<Value>>,
    doc_to_target: Option<Spanned<Value>>,
    doc_to_choice: Option<Spanned<Value>>,
    description: Option<String>,
    target_delimiter: Option<String>,
    fewshot_delimiter: Option<String>,
    num_fewshot: Option<Spanned<u64>>,
    metric_list: Option<Vec<Spanned<Map<String, Value>>>>,
    output_type: Option<Spanned<String>>,
    generation_kwargs: Option<Spanned<Map<String, Value>>>,
    repeats: Option<Spanned<u64>>,
    filter_list: Option<Vec<Spanned<RawFilter>>>,
    /// Accepted, unused.
    #[serde(rename = "metadata")]
    _metadata: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilter {
    name: String,
    filter: Vec<Spanned<Map<String, Value>>>,
}

impl LmEvalError {
    fn at<T>(path: &Path, spanned: &Spanned<T>, message: impl Into<String>) -> Self {
        Self { path: path.to_owned(), line: spanned.referenced.line() as usize, column: spanned.referenced.column() as usize, message: message.into() }
    }

    fn file(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_owned(), line: 0, column: 0, message: message.into() }
    }
}

/// The first `!function` tag in `source` (outside comments and quotes), as (line, column).
fn function_hook(source: &str) -> Option<(usize, usize, String)> {
    for (n, line) in source.lines().enumerate() {
        let code = line.split(" #").next().unwrap_or(line);
        if code.trim_start().starts_with('#') {
            continue;
        }
        let mut quote: Option<char> = None;
        for (i, c) in code.char_indices() {
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '!') if code[i..].starts_with("!function") => {
                    let field = code[..i].trim().trim_start_matches("- ").trim_end_matches(':').trim().to_owned();
                    return Some((n + 1, code[..i].chars().count() + 1, field));
                }
                _ => {}
            }
        }
    }
    None
}

fn read(path: &Path) -> Result<String, LmEvalError> {
    use std::io::Read as _;
    let file = super::dataset::open_regular(path, MAX_YAML_BYTES).map_err(|e| LmEvalError::file(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_YAML_BYTES + 1).read_to_end(&mut bytes).map_err(|e| LmEvalError::file(path, format!("cannot read: {}", e.kind())))?;
    String::from_utf8(bytes).map_err(|e| LmEvalError::file(path, format!("is not valid UTF-8 (byte {})", e.utf8_error().valid_up_to() + 1)))
}

/// Reads and translates the task file at `path`.
pub fn translate(path: &Path) -> Result<Translated, LmEvalError> {
    let source = read(path)?;
    if let Some((line, column, field)) = function_hook(&source) {
        return Err(LmEvalError {
            path: path.to_owned(),
            line,
            column,
            message: format!("`{field}: !function …` is a Python hook, which evalgrid cannot run; only tasks without `!function` are supported"),
        });
    }
    let raw: Raw = serde_saphyr::from_str(&source).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        let plain = e.without_snippet().render_with_options(serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off });
        let first = plain.lines().next().unwrap_or_default();
        let first = first.rfind(" at line ").map_or(first, |i| &first[..i]).to_owned();
        let message = match first.strip_prefix("unknown field `").and_then(|r| r.split_once('`')).map(|(f, _)| f.to_owned()) {
            Some(field) if LM_EVAL_FIELDS.contains(&field.as_str()) => format!("lm-eval field `{field}` is not supported by evalgrid"),
            Some(field) => format!("`{field}` is not an lm-eval task field"),
            None => first,
        };
        LmEvalError { path: path.to_owned(), line, column, message }
    })?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    let name = raw.task.as_ref().map(|t| t.value.clone()).or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned())).unwrap_or_default();
    if name.is_empty() || name.contains(['/', '\\']) || name.bytes().all(|b| b == b'.') {
        let message = "`task` must be one path segment: a non-empty name without `/` or `\\`";
        return Err(raw.task.as_ref().map_or_else(|| LmEvalError::file(path, message), |t| LmEvalError::at(path, t, message)));
    }
    let dataset = dataset_file(path, base, &raw)?;
    let output = raw.output_type.as_ref().map_or("generate_until", |o| o.value.as_str());
    let multiple_choice = match output {
        "multiple_choice" => true,
        "generate_until" => false,
        other => {
            let site = raw.output_type.as_ref().map_or_else(|| LmEvalError::file(path, ""), |o| LmEvalError::at(path, o, ""));
            return Err(LmEvalError { message: format!("`output_type: {other}` is not supported (evalgrid runs multiple_choice and generate_until)"), ..site });
        }
    };
    if let Some(n) = raw.num_fewshot.as_ref().filter(|n| n.value > 0) {
        return Err(LmEvalError::at(path, n, "`num_fewshot` above 0 is not supported (evalgrid asks each item zero-shot from an lm-eval task file)"));
    }
    if let Some(r) = raw.repeats.as_ref().filter(|r| r.value != 1) {
        return Err(LmEvalError::at(path, r, "`repeats` other than 1 is not supported: use the pipeline's `seeds` for repeats"));
    }
    if let Some(d) = raw.target_delimiter.as_ref().filter(|d| !d.trim().is_empty()) {
        return Err(LmEvalError::file(
            path,
            format!("`target_delimiter: {d:?}` is not supported: evalgrid reads the next token whatever its leading whitespace"),
        ));
    }
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // lm-eval renders with `keep_trailing_newline=True`.
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder().keep_trailing_newline(true).build() {
        env.set_syntax(syntax);
    }
    env.set_fuel(Some(super::prompt::FUEL));
    let mut source_of = |field: &str, v: &Spanned<Value>, list_ok: bool| -> Result<Source, LmEvalError> {
        let source = match &v.value {
            Value::String(t) => Source::Template(t.clone()),
            Value::Number(n) if n.as_i64().is_some() && !list_ok => Source::Number(n.as_i64().unwrap_or_default()),
            Value::Array(items) if list_ok && items.iter().all(|i| matches!(i, Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                Source::List(items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)).collect())
            }
            _ => return Err(LmEvalError::at(path, v, format!("`{field}` must be a template{}", if list_ok { " or a list" } else { " or a number" }))),
        };
        if let Source::Template(t) = &source {
            env.add_template_owned(field.to_owned(), t.clone()).map_err(|e| LmEvalError::at(path, v, format!("`{field}` does not compile: {e}")))?;
        }
        Ok(source)
    };
    let text = match &raw.doc_to_text {
        Some(v) => source_of("doc_to_text", v, false)?,
        None => return Err(LmEvalError::file(path, "the task needs `doc_to_text`")),
    };
    let target = match &raw.doc_to_target {
        Some(v) => source_of("doc_to_target", v, false)?,
        None => return Err(LmEvalError::file(path, "the task needs `doc_to_target`")),
    };
    let choice = raw.doc_to_choice.as_ref().map(|v| source_of("doc_to_choice", v, true)).transpose()?;
    if multiple_choice && choice.is_none() {
        return Err(LmEvalError::file(path, "`output_type: multiple_choice` needs `doc_to_choice`"));
    }
    let filters = filters(path, raw.filter_list.as_deref().unwrap_or_default(), multiple_choice)?;
    let scorers = metrics(path, raw.metric_list.as_deref(), multiple_choice, &filters)?;
    let generation = if multiple_choice { Map::new() } else { generation(path, raw.generation_kwargs.as_ref(), raw.fewshot_delimiter.as_deref())? };
    let docs = Docs { text, target, choice, description: raw.description.clone().unwrap_or_default(), multiple_choice, env };
    let target_delimiter = raw.target_delimiter.clone().unwrap_or_else(|| " ".to_owned());
    Ok(Translated { name, dataset, docs: Arc::new(docs), scorers, generation, target_delimiter })
}

/// The evaluated split's data file: `dataset_path: json|csv|parquet` with
/// `dataset_kwargs.data_files` (as `datasets.load_dataset` reads local files), relative to
/// the task file; the split is `test_split`, else `validation_split`.
fn dataset_file(path: &Path, base: &Path, raw: &Raw) -> Result<PathBuf, LmEvalError> {
    let Some(dp) = &raw.dataset_path else { return Err(LmEvalError::file(path, "the task needs `dataset_path`")) };
    if let Some(n) = raw.dataset_name.as_ref().filter(|n| n.value.is_some()) {
        return Err(LmEvalError::at(path, n, "`dataset_name` (a Hub configuration) is not supported: evalgrid reads local files only"));
    }
    if !["json", "csv", "parquet"].contains(&dp.value.as_str()) {
        return Err(LmEvalError::at(
            path,
            dp,
            format!(
                "`dataset_path: {}` is not a local-file loader: evalgrid has no Hub access at run time; use `dataset_path: json` (or csv, parquet) with `dataset_kwargs: {{data_files: {{test: FILE}}}}`",
                dp.value
            ),
        ));
    }
    let split = raw
        .test_split
        .as_deref()
        .or(raw.validation_split.as_deref())
        .ok_or_else(|| LmEvalError::file(path, "the task needs `test_split` or `validation_split`"))?;
    let Some(kwargs) = &raw.dataset_kwargs else { return Err(LmEvalError::at(path, dp, "`dataset_path` needs `dataset_kwargs: {data_files: …}`")) };
    if let Some(k) = kwargs.value.keys().find(|k| *k != "data_files") {
        return Err(LmEvalError::at(path, kwargs, format!("`dataset_kwargs.{k}` is not supported (only `data_files`)")));
    }
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) if a.len() == 1 => a[0].as_str().map(str::to_owned),
        _ => None,
    };
    let file = match kwargs.value.get("data_files") {
        Some(Value::Object(m)) => m.get(split).and_then(one),
        Some(v) if split == "train" => one(v),
        _ => None,
    };
    let Some(file) = file else {
        return Err(LmEvalError::at(path, kwargs, format!("`data_files` must name one file for split `{split}`, e.g. `data_files: {{{split}: data.jsonl}}`")));
    };
    let file = base.join(file);
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or_default();
    if !["jsonl", "csv", "parquet"].contains(&ext) {
        return Err(LmEvalError::at(path, kwargs, format!("`{}`: evalgrid reads `.jsonl` (JSON Lines), `.csv` and `.parquet` data files", file.display())));
    }
    Ok(file)
}

fn filters(path: &Path, list: &[Spanned<RawFilter>], multiple_choice: bool) -> Result<Vec<(String, Vec<FilterStep>)>, LmEvalError> {
    if multiple_choice && let Some(f) = list.first() {
        return Err(LmEvalError::at(path, f, "`filter_list` applies to generated answers; a multiple_choice task has none"));
    }
    let mut out = Vec::new();
    for entry in list {
        let mut steps = Vec::new();
        for step in &entry.value.filter {
            let m = &step.value;
            let function = m.get("function").and_then(Value::as_str).unwrap_or_default();
            let allowed: &[&str] = match function {
                "regex" => &["function", "regex_pattern", "group_select", "fallback"],
                "take_first" => &["function"],
                other => return Err(LmEvalError::at(path, step, format!("filter `{other}` is not supported (evalgrid has `regex` and `take_first`)"))),
            };
            if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
                return Err(LmEvalError::at(path, step, format!("filter `{function}` option `{k}` is not supported")));
            }
            if function == "take_first" {
                steps.push(FilterStep::TakeFirst);
                continue;
            }
            let pattern = m.get("regex_pattern").and_then(Value::as_str).unwrap_or(r"#### (\-?[0-9\.\,]+)").to_owned();
            if let Err(e) = regex::RegexBuilder::new(&pattern).size_limit(1 << 20).build() {
                let first = e.to_string().lines().last().unwrap_or_default().trim().to_owned();
                return Err(LmEvalError::at(path, step, format!("`regex_pattern` `{pattern}` does not compile (Rust regex syntax: no look-around): {first}")));
            }
            let group_select = match m.get("group_select") {
                None => 0,
                Some(v) => v.as_i64().ok_or_else(|| LmEvalError::at(path, step, "`group_select` must be an integer"))?,
            };
            let fallback = match m.get("fallback") {
                None => "[invalid]".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(LmEvalError::at(path, step, "`fallback` must be text")),
            };
            steps.push(FilterStep::Regex { pattern, group_select, fallback });
        }
        out.push((entry.value.name.clone(), steps));
    }
    Ok(out)
}

fn flag(path: &Path, entry: &Spanned<Map<String, Value>>, key: &str) -> Result<bool, LmEvalError> {
    match entry.value.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(LmEvalError::at(path, entry, format!("`{key}` must be true or false"))),
    }
}

fn metrics(
    path: &Path,
    list: Option<&[Spanned<Map<String, Value>>]>,
    multiple_choice: bool,
    filters: &[(String, Vec<FilterStep>)],
) -> Result<Vec<Scorer>, LmEvalError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Err(LmEvalError::file(path, "the task needs `metric_list` (evalgrid scores acc, acc_norm and exact_match)"));
    };
    let mut out = Vec::new();
    for entry in list {
        let metric = entry.value.get("metric").and_then(Value::as_str).unwrap_or_default();
        let common = ["metric", "aggregation", "higher_is_better"];
        if entry.value.get("aggregation").is_some_and(|a| a != "mean") || entry.value.get("higher_is_better").is_some_and(|h| h != &json!(true)) {
            return Err(LmEvalError::at(path, entry, format!("`{metric}`: only `aggregation: mean` and `higher_is_better: true` are supported")));
        }
        match (metric, multiple_choice) {
            ("acc" | "acc_norm", true) => {
                if let Some(k) = entry.value.keys().find(|k| !common.contains(&k.as_str())) {
                    return Err(LmEvalError::at(path, entry, format!("metric `{metric}` option `{k}` is not supported")));
                }
                out.push(Scorer { name: metric.to_owned(), kind: if metric == "acc" { ScorerKind::Acc } else { ScorerKind::AccNorm } });
            }
            ("exact_match", false) => {
                let options = ["regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers"];
                if let Some(k) = entry.value.keys().find(|k| !common.contains(&k.as_str()) && !options.contains(&k.as_str())) {
                    return Err(LmEvalError::at(path, entry, format!("metric `exact_match` option `{k}` is not supported")));
                }
                let regexes_to_ignore = match entry.value.get("regexes_to_ignore") {
                    None => Vec::new(),
                    Some(v) => serde_json::from_value::<Vec<String>>(v.clone())
                        .map_err(|_| LmEvalError::at(path, entry, "`regexes_to_ignore` must be a list of patterns"))?,
                };
                if let Some(bad) = regexes_to_ignore.iter().find(|r| regex::Regex::new(r).is_err()) {
                    return Err(LmEvalError::at(path, entry, format!("`regexes_to_ignore` pattern `{bad}` does not compile (Rust regex syntax)")));
                }
                let base = ExactMatch {
                    regexes_to_ignore,
                    ignore_case: flag(path, entry, "ignore_case")?,
                    ignore_punctuation: flag(path, entry, "ignore_punctuation")?,
                    ignore_numbers: flag(path, entry, "ignore_numbers")?,
                    filter: Vec::new(),
                };
                if filters.is_empty() {
                    out.push(Scorer { name: "exact_match".into(), kind: ScorerKind::ExactMatch(base.clone()) });
                }
                for (name, steps) in filters {
                    let column = if filters.len() == 1 { "exact_match".to_owned() } else { format!("exact_match_{}", name.replace([',', ' '], "_")) };
                    out.push(Scorer { name: column, kind: ScorerKind::ExactMatch(ExactMatch { filter: steps.clone(), ..base.clone() }) });
                }
            }
            (other, _) => {
                let have = if multiple_choice { "acc and acc_norm for multiple_choice" } else { "exact_match for generate_until" };
                return Err(LmEvalError::at(path, entry, format!("metric `{other}` is not supported here (evalgrid scores {have})")));
            }
        }
    }
    Ok(out)
}

/// `generation_kwargs` as request parameters; `until` defaults to `fewshot_delimiter`
/// (`"\n\n"`) and `max_gen_toks` to 256, as lm-eval's.
fn generation(path: &Path, kwargs: Option<&Spanned<Map<String, Value>>>, fewshot_delimiter: Option<&str>) -> Result<Map<String, Value>, LmEvalError> {
    let mut out = Map::new();
    let empty = Map::new();
    let m = kwargs.map_or(&empty, |k| &k.value);
    let at = |message: String| kwargs.map_or_else(|| LmEvalError::file(path, message.clone()), |k| LmEvalError::at(path, k, message.clone()));
    for (k, v) in m {
        match k.as_str() {
            "until" => {
                let stops = match v {
                    Value::String(s) => vec![s.clone()],
                    v => serde_json::from_value::<Vec<String>>(v.clone()).map_err(|_| at("`until` must be a text or a list of texts".into()))?,
                };
                out.insert("stop".into(), json!(stops));
            }
            "max_gen_toks" => {
                out.insert("max_tokens".into(), json!(v.as_u64().ok_or_else(|| at("`max_gen_toks` must be a positive integer".into()))?));
            }
            "temperature" | "top_p" => {
                out.insert(k.clone(), json!(v.as_f64().ok_or_else(|| at(format!("`{k}` must be a number")))?));
            }
            "do_sample" => {
                if v == &json!(false) {
                    out.entry("temperature").or_insert(json!(0.0));
                }
            }
            other => return Err(at(format!("`generation_kwargs.{other}` is not supported (until, max_gen_toks, temperature, top_p, do_sample)"))),
        }
    }
    out.entry("stop").or_insert_with(|| json!([fewshot_delimiter.unwrap_or("\n\n")]));
    out.entry("max_tokens").or_insert(json!(256));
    if m.get("do_sample").is_none() && !m.contains_key("temperature") {
        out.insert("temperature".into(), json!(0.0));
    }
    Ok(out)
}

/// A minijinja value as JSON.
fn to_json(v: &minijinja::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl Docs {
    /// `field`'s value for a row: a column's value when the template is a column name (as
    /// lm-eval reads it), else the template's value: a lone `{{ expression }}` evaluated to
    /// its value (a list stays a list), any other template rendered to text.
    fn eval(&self, field: &str, source: &Source, row: &Map<String, Value>) -> Result<Value, String> {
        match source {
            Source::Number(n) => Ok(json!(n)),
            Source::List(l) => Ok(json!(l)),
            Source::Template(t) if row.contains_key(t) => Ok(row[t].clone()),
            Source::Template(t) => {
                let ctx = minijinja::Value::from(minijinja::value::Serde(Value::Object(row.clone())));
                let inner = t.trim().strip_prefix("{{").and_then(|r| r.strip_suffix("}}")).filter(|i| !i.contains("{{") && !i.contains("}}"));
                if let Some(expr) = inner
                    && field != "doc_to_text"
                {
                    let e = self.env.compile_expression(expr.trim()).map_err(|e| format!("`{field}`: {e}"))?;
                    return e.eval(ctx).map(|v| to_json(&v)).map_err(|e| format!("`{field}`: {e}"));
                }
                let tmpl = self.env.get_template(field).map_err(|e| format!("`{field}`: {e}"))?;
                tmpl.render(ctx).map(Value::String).map_err(|e| format!("`{field}`: {e}"))
            }
        }
    }

    /// Adds [`INPUT`], [`TARGET`] and [`CHOICES`] to a row's columns.
    pub fn map(&self, row: &mut Map<String, Value>) -> Result<(), String> {
        let text = match self.eval("doc_to_text", &self.text, row)? {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let choices: Option<Vec<String>> = match &self.choice {
            None => None,
            Some(c) => match self.eval("doc_to_choice", c, row)? {
                Value::Array(items) => Some(items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)).collect()),
                other => return Err(format!("`doc_to_choice` gave {other}, not a list")),
            },
        };
        let target = self.eval("doc_to_target", &self.target, row)?;
        // A number is an index into the choices, and so is a template's text of digits (lm-eval
        // reads it as a literal); a column's text is a choice itself (multiple_choice) or the
        // answer (generate_until), as lm-eval reads a column's value.
        let templated = matches!(&self.target, Source::Template(t) if !row.contains_key(t));
        let index = |v: &Value| -> Option<usize> {
            match v {
                Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
                Value::String(s) if templated && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
                _ => None,
            }
        };
        let golds: Vec<Value> = match target {
            Value::Array(items) => items,
            one => vec![one],
        };
        let targets: Vec<String> = if self.multiple_choice {
            let choices = choices.as_deref().unwrap_or_default();
            golds
                .iter()
                .map(|g| {
                    let i = index(g).or_else(|| g.as_str().and_then(|s| choices.iter().position(|c| c == s)));
                    match i {
                        Some(i) if i < choices.len() => Ok(letter(i)),
                        _ => Err(format!("`doc_to_target` gave {g}, which is no choice of the {} this row has", choices.len())),
                    }
                })
                .collect::<Result<_, _>>()?
        } else {
            golds
                .iter()
                .map(|g| match (&choices, index(g)) {
                    (Some(c), Some(i)) => {
                        c.get(i).cloned().ok_or_else(|| format!("`doc_to_target` gave {g}, which is no choice of the {} this row has", c.len()))
                    }
                    _ => Ok(g.as_str().map_or_else(|| g.to_string(), str::to_owned)),
                })
                .collect::<Result<_, _>>()?
        };
        row.insert(INPUT.into(), Value::String(format!("{}{text}", self.description)));
        row.insert(TARGET.into(), if targets.len() == 1 { json!(targets[0]) } else { json!(targets) });
        if let Some(c) = choices {
            row.insert(CHOICES.into(), json!(c));
        }
        Ok(())
    }
}

/// lm-eval's `RegexFilter` then `TakeFirstFilter`, over one answer.
#[must_use]
pub fn apply_filter(steps: &[FilterStep], answer: &str) -> String {
    let mut out = answer.to_owned();
    for step in steps {
        if let FilterStep::Regex { pattern, group_select, fallback } = step {
            let Ok(re) = regex::RegexBuilder::new(pattern).size_limit(1 << 20).build() else { return fallback.clone() };
            // `re.findall`: whole matches without groups, group 1 with one, all groups with more.
            let found: Vec<Vec<String>> = re
                .captures_iter(&out)
                .map(|c| {
                    if c.len() == 1 {
                        vec![c[0].to_owned()]
                    } else {
                        (1..c.len()).map(|g| c.get(g).map_or_else(String::new, |m| m.as_str().to_owned())).collect()
                    }
                })
                .collect();
            let n = i64::try_from(found.len()).unwrap_or(i64::MAX);
            let pick = if *group_select < 0 { n + group_select } else { *group_select };
            out = match usize::try_from(pick).ok().and_then(|i| found.get(i)) {
                None if found.is_empty() => fallback.clone(),
                // Python raises IndexError here; evalgrid scores the fallback instead.
                None => fallback.clone(),
                Some(groups) if groups.len() == 1 => groups[0].trim().to_owned(),
                Some(groups) => groups.iter().find(|g| !g.is_empty()).map_or_else(|| fallback.clone(), |g| g.trim().to_owned()),
            };
        }
    }
    out
}

/// lm-eval's `exact_match_hf_evaluate` for one prediction and one reference.
#[must_use]
pub fn exact_match(options: &ExactMatch, prediction: &str, reference: &str) -> bool {
    let norm = |text: &str| {
        let mut t = text.to_owned();
        for r in &options.regexes_to_ignore {
            if let Ok(re) = regex::Regex::new(r) {
                t = re.replace_all(&t, "").into_owned();
            }
        }
        if options.ignore_case {
            t = t.to_lowercase();
        }
        if options.ignore_punctuation {
            t.retain(|c| !c.is_ascii_punctuation());
        }
        if options.ignore_numbers {
            t.retain(|c| !c.is_ascii_digit());
        }
        t
    };
    norm(prediction) == norm(reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_filter_is_findall_then_group_select() {
        let step = |p: &str, g: i64| vec![FilterStep::Regex { pattern: p.into(), group_select: g, fallback: "[invalid]".into() }, FilterStep::TakeFirst];
        assert_eq!(apply_filter(&step(r"#### (\-?[0-9\.\,]+)", 0), "so\n#### 42\n"), "42");
        assert_eq!(apply_filter(&step(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1), "3 apples and 17 pears"), "17");
        assert_eq!(apply_filter(&step(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", 0), "3 apples and 17 pears"), "3");
        assert_eq!(apply_filter(&step(r"answer is (\w+)", 0), "no idea"), "[invalid]");
        assert_eq!(apply_filter(&step(r"\d+", 0), "x 12 y"), "12");
    }

    #[test]
    fn exact_match_options_are_lm_evals() {
        let o = ExactMatch { ignore_case: true, ignore_punctuation: true, regexes_to_ignore: vec![",".into(), r"\$".into()], ..ExactMatch::default() };
        assert!(exact_match(&o, "$1,000.", "1000"));
        assert!(exact_match(&o, "Paris!", "paris"));
        assert!(!exact_match(&ExactMatch::default(), "Paris", "paris"));
    }

    /// A row mapped as lm-eval's `doc_to_*` read it: a column's text is a choice (even of
    /// digits), a template's digits an index, a lone expression's list the choices.
    #[test]
    fn rows_map_to_input_choices_and_letter_targets() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = "task: t\ndataset_path: json\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\noutput_type: multiple_choice\ndescription: \"Quiz.\\n\"\ndoc_to_text: \"Q: {{ q }}\"\ndoc_to_choice: \"{{ opts }}\"\ndoc_to_target: TARGET\nmetric_list: [{metric: acc}]\n";
        let map = |target: &str, row: Value| {
            std::fs::write(dir.path().join("t.yaml"), yaml.replace("TARGET", target)).unwrap();
            let t = translate(&dir.path().join("t.yaml")).unwrap();
            let mut row = row.as_object().unwrap().clone();
            t.docs.map(&mut row).map(|()| (row[INPUT].clone(), row[TARGET].clone(), row[CHOICES].clone()))
        };
        let row = json!({"q": "1+3?", "opts": ["3", "4"], "label": "4", "idx": 1});
        assert_eq!(map("label", row.clone()).unwrap(), (json!("Quiz.\nQ: 1+3?"), json!("B"), json!(["3", "4"])));
        assert_eq!(map("idx", row.clone()).unwrap().1, json!("B"));
        assert_eq!(map("\"{{ label }}\"", row.clone()).unwrap_err(), "`doc_to_target` gave \"4\", which is no choice of the 2 this row has");
        assert_eq!(map("\"{{ idx }}\"", row.clone()).unwrap().1, json!("B"));
        assert_eq!(map("0", row).unwrap().1, json!("A"));
    }

    #[test]
    fn function_hooks_are_found_with_their_place() {
        assert_eq!(function_hook("task: x\nprocess_docs: !function utils.process_docs\n"), Some((2, 15, "process_docs".into())));
        assert_eq!(function_hook("# doc_to_text: !function a.b\ndoc_to_text: \"!function\"\n"), None);
    }
}
