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

/// Task parameters a `qa` entry accepts.
pub const PARAMS: &[&str] = &["dataset", "name", "fields", "template", "template_file", "system", "fewshot", "sample", "limit", "scorers"];

/// Scorer names, as Inspect AI names its built-ins.
pub const SCORERS: &[&str] = &["match", "includes", "exact", "f1", "pattern", "answer", "choice", "judge"];

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
    },
    /// `judge`: a model grades the answer.
    Judge(Judge),
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
}

impl TaskConfig {
    /// The `choice` scorer's settings, if the task has one.
    #[must_use]
    pub fn choice(&self) -> Option<(bool, bool)> {
        self.scorers.iter().find_map(|s| match s.kind {
            ScorerKind::Choice { shuffle, multiple_correct } => Some((shuffle, multiple_correct)),
            _ => None,
        })
    }

    /// What the task's key holds besides its items: everything but paths and a judge's
    /// `batch:` (a transport knob: a batched grading is the live one).
    #[must_use]
    pub fn key_params(&self) -> Params {
        let mut scorers = self.scorers.clone();
        for scorer in &mut scorers {
            if let ScorerKind::Judge(judge) = &mut scorer.kind {
                judge.model.remove("batch");
            }
        }
        let mut p = Params::new();
        p.insert("fields".into(), json!(self.fields));
        p.insert("template".into(), json!(self.template));
        p.insert("system".into(), json!(self.system));
        p.insert("sample".into(), json!(self.sample));
        p.insert("limit".into(), json!(self.limit));
        p.insert("scorers".into(), json!(scorers));
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

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// Checks `params` of a task entry whose pipeline lies in `base_dir`.
pub fn parse(base_dir: &Path, params: &Params) -> Result<TaskConfig, Vec<CatalogIssue>> {
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
        Some(Value::String(s)) if !s.is_empty() && !s.contains('/') => s.clone(),
        Some(_) => {
            issues.push(issue("name", "`name` must be a non-empty text without `/`"));
            String::new()
        }
    };
    let mut fields = FieldMap::default();
    match params.get("fields") {
        None => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
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
        (None, Some(Value::String(f))) => match fs_err::read_to_string(base_dir.join(f)) {
            Ok(t) => Some(t),
            Err(e) => {
                issues.push(issue("template_file", format!("cannot read `{f}`: {}", e.kind())));
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
    let scorers = match params.get("scorers") {
        None => vec![Scorer { name: "match".into(), kind: default_kind("match").unwrap_or(ScorerKind::Exact) }],
        Some(Value::Array(list)) if !list.is_empty() => list.iter().filter_map(|s| scorer(s, &mut issues)).collect(),
        Some(_) => {
            issues.push(issue("scorers", "`scorers` must be a non-empty list, e.g. `[match, includes]`"));
            Vec::new()
        }
    };
    for (i, s) in scorers.iter().enumerate() {
        if RESERVED.contains(&s.name.as_str()) || s.name.ends_with("_sum") || s.name.ends_with("_n") {
            issues.push(issue("scorers", format!("`{}` cannot name a scorer: the score record uses it (as it does names ending in `_sum` or `_n`)", s.name)));
        }
        if scorers[..i].iter().any(|o| o.name == s.name) {
            issues.push(CatalogIssue {
                site: IssueSite::Param("scorers".into()),
                message: format!("two scorers are named `{}`", s.name),
                hint: Some("give one a `name:`, e.g. `{match: {numeric: true}, name: match_numeric}`".into()),
            });
        }
    }
    if scorers.iter().filter(|s| matches!(s.kind, ScorerKind::Choice { .. })).count() > 1 {
        issues.push(issue("scorers", "one `choice` scorer per task: it decides how choices are shown"));
    }
    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(TaskConfig { dataset, name, fields, template, system, fewshot, sample, limit, scorers })
}

fn default_kind(name: &str) -> Option<ScorerKind> {
    Some(match name {
        "match" => ScorerKind::Match { location: Location::End, ignore_case: true, numeric: false },
        "includes" => ScorerKind::Includes { ignore_case: true },
        "exact" => ScorerKind::Exact,
        "f1" => ScorerKind::F1 { stop_words: Vec::new() },
        "choice" => ScorerKind::Choice { shuffle: false, multiple_correct: false },
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
        "choice" => &["shuffle", "multiple_correct"],
        _ => &["model", "rubric", "grades"],
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
        "choice" => ScorerKind::Choice { shuffle: flag("shuffle", false), multiple_correct: flag("multiple_correct", false) },
        _ => {
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
            ScorerKind::Judge(Judge { model: model.clone(), rubric, grades })
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
