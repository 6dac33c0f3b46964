//! A `qa` task loaded and checked: rows read and mapped, ids unique, choices and targets
//! consistent, the template rendered for every item, `limit`/`sample` applied, few-shot
//! examples rendered, and the task's hash computed from its items' hashes. Loaded tasks are
//! kept for the process by content hash, so the episode reads them without a path in any key.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Value, json};

use super::config::{Judge, ScorerKind, TaskConfig};
use super::dataset::{DatasetError, Place, RawRow, read_raw_rows_with};
use super::inspect::{letter, target_positions};
use super::item::{FieldMap, Item, item};
use super::prompt::{CHOICE_TEMPLATE, DEFAULT_TEMPLATE, LOGPROBS_TEMPLATE, MULTIPLE_CHOICE_TEMPLATE, Prompt};
use crate::envs::splitmix::SplitMix64;
use crate::exec::StepError;
use crate::spec::diagnostic::suggestion;
use crate::spec::{CatalogIssue, IssueSite, ModelConfig, Params, Provider, TaskInstance};
use rayon::prelude::*;

/// Benchmark name in pipelines.
pub const NAME: &str = "qa";
/// Bump when the episode (prompting, calls, record) changes.
pub const EPISODE_VERSION: u32 = 1;
/// Bump when scoring changes.
pub const SCORE_VERSION: u32 = 2;

/// A loaded task.
pub struct Task {
    /// Its settings.
    pub config: TaskConfig,
    /// Its items, in file order.
    pub items: Vec<Item>,
    /// Its compiled templates.
    pub prompt: Prompt,
    /// Few-shot turns (user message, assistant answer), sent before each question.
    pub fewshot: Vec<(String, String)>,
    /// The `judge` scorers: column name, judge model, settings.
    pub judges: Vec<(String, ModelConfig, Judge)>,
}

static LOADED: LazyLock<Mutex<HashMap<String, Arc<Task>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The loaded task behind `task` (loaded when the pipeline was validated).
pub fn get(task: &TaskInstance) -> Result<Arc<Task>, StepError> {
    LOADED
        .lock()
        .ok()
        .and_then(|m| m.get(&loaded_key(task)).cloned())
        .ok_or_else(|| StepError::Unsupported(format!("qa task `{}` was not loaded from its dataset in this process", task.task)))
}

fn dataset_issue(e: &DatasetError) -> CatalogIssue {
    CatalogIssue { site: IssueSite::Param("dataset".into()), message: e.to_string(), hint: None }
}

/// Where a loaded task is found again: its items and everything else its key holds (name,
/// scorers, prompt settings), so two entries over one dataset never share a loaded task.
fn loaded_key(task: &TaskInstance) -> String {
    let params = serde_json::to_string(&task.params).unwrap_or_default();
    format!("{}:{}:{}", task.content_hash, task.task, blake3::hash(params.as_bytes()).to_hex())
}

/// The order the model sees choices in: file order, or (shuffled) a permutation drawn
/// from the seed and the item, so each seed is a different, reproducible shuffle.
#[must_use]
pub fn choice_order(item: &Item, seed: u64, shuffle: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..item.choices.len()).collect();
    if shuffle {
        let mut h = blake3::Hasher::new_derive_key("evalgrid qa choice-shuffle v1");
        h.update(&seed.to_le_bytes());
        h.update(item.label().as_bytes());
        let mut rng = SplitMix64::new(u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap_or_default()));
        for i in (1..order.len()).rev() {
            order.swap(i, rng.index(i + 1));
        }
    }
    order
}

/// Rows parsed and mapped together on all cores while the file is read on.
const BATCH_ROWS: usize = 4096;

/// Most problems of one dataset reported in one pass (`validate` lists them all at once).
const MAX_PROBLEMS: usize = 20;

/// A dataset's problems in file order: the first [`MAX_PROBLEMS`] kept, the rest counted.
#[derive(Default)]
struct Problems {
    kept: Vec<DatasetError>,
    more: usize,
}

impl Problems {
    fn push(&mut self, e: DatasetError) {
        if self.kept.len() < MAX_PROBLEMS {
            self.kept.push(e);
        } else {
            self.more += 1;
        }
    }

    /// The problems as issues at `site` (the `dataset` or `fewshot` parameter), the count of
    /// those left out last.
    fn issues(self, path: &Path, site: &str) -> Vec<CatalogIssue> {
        let at = |message: String| CatalogIssue { site: IssueSite::Param(site.into()), message, hint: None };
        let mut out: Vec<CatalogIssue> = self.kept.iter().map(|e| at(e.to_string())).collect();
        if self.more > 0 {
            out.push(at(format!("{}: … and {} more problems in this dataset (the first {MAX_PROBLEMS} are shown)", path.display(), self.more)));
        }
        out
    }
}

/// The rows a task keeps (`where:`), and the columns seen in the file (to name a column
/// `where:` asks for that no row has).
struct Keep<'a> {
    rules: &'a [(String, Vec<Value>)],
    columns: std::collections::BTreeSet<String>,
}

/// Reads `path`'s rows as items (the first `limit` rows `keep` keeps), refusing duplicate
/// ids. Lines are parsed and mapped in batches on all cores; every problem is collected in
/// file order (a file that cannot be read on stops the reading there). An item's index is its
/// row's position in the file, kept or not, so a row filtered out never renumbers another.
fn read_items(
    path: &Path,
    (fields, docs): (&FieldMap, Option<&super::lm_eval::Docs>),
    limit: Option<u64>,
    rules: &[(String, Vec<Value>)],
) -> Result<(Vec<Item>, Vec<String>), Problems> {
    let mut items = Vec::new();
    let mut ids: HashMap<String, Place> = HashMap::new();
    let mut batch = Vec::with_capacity(BATCH_ROWS);
    let mut problems = Problems::default();
    let mut keep = Keep { rules, columns: std::collections::BTreeSet::new() };
    let (mut read, mut first) = (0u64, 0u64);
    let reading = read_raw_rows_with(path, fields.input_image.as_deref(), |raw| {
        // With `where:`, `limit` counts kept rows, so every row is read.
        if rules.is_empty() && limit.is_some_and(|l| read >= l) {
            return Ok(());
        }
        read += 1;
        batch.push(raw);
        if batch.len() == BATCH_ROWS {
            let n = batch.len() as u64;
            map_batch(path, (fields, docs), (&mut batch, first), &mut keep, (&mut items, &mut ids), &mut problems);
            first += n;
        }
        Ok(())
    });
    map_batch(path, (fields, docs), (&mut batch, first), &mut keep, (&mut items, &mut ids), &mut problems);
    if let Err(e) = reading {
        problems.push(e);
    }
    if let Some(l) = limit.filter(|_| !rules.is_empty()) {
        items.truncate(usize::try_from(l).unwrap_or(usize::MAX));
    }
    // A row without an id is named by its index: an id equal to one would give two rows one
    // name in `items.csv`, and `diff` would compare one of them silently.
    if !ids.is_empty() {
        for (unnamed, place) in items.iter().filter(|it| it.id.is_none()).filter_map(|it| ids.get(&it.index.to_string()).map(|p| (it, *p))) {
            problems.push(DatasetError::at(
                path,
                place,
                format!(
                    "id `{}` is also the name of the row without an id at {} (rows without an `id` are named by their 0-based index); give that row an id or this one another",
                    unnamed.index,
                    where_is(unnamed.place)
                ),
            ));
        }
    }
    if problems.kept.is_empty() { Ok((items, keep.columns.into_iter().collect())) } else { Err(problems) }
}

fn where_is(place: Place) -> String {
    match place {
        Place::Line(n) => format!("line {n}"),
        Place::Row(r) => format!("row {r}"),
    }
}

/// Parses `batch` (its first row at file position `first`), keeps the rows `keep` keeps and
/// maps them into `items`, in order; a row with a problem is left out and its problem kept.
fn map_batch(
    path: &Path,
    (fields, docs): (&FieldMap, Option<&super::lm_eval::Docs>),
    (batch, first): (&mut Vec<RawRow>, u64),
    keep: &mut Keep<'_>,
    (items, ids): (&mut Vec<Item>, &mut HashMap<String, Place>),
    problems: &mut Problems,
) {
    let rules = keep.rules;
    /// A row mapped (`None`: left out by `where:`), with its columns.
    type Mapped = Result<(Option<Item>, Vec<String>), DatasetError>;
    let mapped: Vec<Mapped> = std::mem::take(batch)
        .into_par_iter()
        .enumerate()
        .map(|(k, raw)| {
            let mut row = raw.parse(path)?;
            let seen: Vec<String> = if rules.is_empty() { Vec::new() } else { row.fields.keys().cloned().collect() };
            if !super::config::keeps(rules, &row.fields) {
                return Ok((None, seen));
            }
            let place = row.place;
            if let Some(docs) = docs {
                docs.map(&mut row.fields).map_err(|e| DatasetError::at(path, place, e))?;
            }
            let mut it = item(row, first + k as u64, fields).map_err(|e| DatasetError::at(path, place, e.message))?;
            it.load_image(path, fields).map_err(|e| DatasetError::at(path, place, e.message))?;
            Ok((Some(it), seen))
        })
        .collect();
    for it in mapped {
        let (it, seen) = match it {
            Ok(it) => it,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        keep.columns.extend(seen);
        let Some(it) = it else { continue };
        if let Some(id) = &it.id
            && let Some(earlier) = ids.get(id)
        {
            problems.push(DatasetError::at(path, it.place, format!("duplicate id `{id}` (first at {})", where_is(*earlier))));
            continue;
        }
        if let Some(id) = &it.id {
            ids.insert(id.clone(), it.place);
        }
        items.push(it);
    }
}

/// Keeps `n` items chosen by `seed` (by each item's label, so editing a row never changes
/// which rows are sampled), in file order.
fn sample(items: Vec<Item>, n: u64, seed: u64) -> Vec<Item> {
    if items.len() as u64 <= n {
        return items;
    }
    let rank = |it: &Item| {
        let mut h = blake3::Hasher::new_derive_key("evalgrid qa sample v1");
        h.update(&seed.to_le_bytes());
        h.update(it.label().as_bytes());
        *h.finalize().as_bytes()
    };
    let mut ranked: Vec<([u8; 32], usize)> = items.iter().enumerate().map(|(i, it)| (rank(it), i)).collect();
    ranked.sort_unstable();
    let mut keep = vec![false; items.len()];
    for (_, i) in ranked.into_iter().take(usize::try_from(n).unwrap_or(usize::MAX)) {
        keep[i] = true;
    }
    items.into_iter().zip(keep).filter_map(|(it, k)| k.then_some(it)).collect()
}

fn template_for(config: &TaskConfig) -> String {
    match (&config.template, config.choice()) {
        (Some(t), _) => t.clone(),
        (None, Some(_)) if config.asks_logprobs() => LOGPROBS_TEMPLATE.to_owned(),
        (None, Some((_, true))) => MULTIPLE_CHOICE_TEMPLATE.to_owned(),
        (None, Some(_)) => CHOICE_TEMPLATE.to_owned(),
        (None, None) => DEFAULT_TEMPLATE.to_owned(),
    }
}

/// What an oracle (and a few-shot example) answers: `ANSWER: <letters>` for choice tasks,
/// else the first target.
#[must_use]
pub fn ideal_answer(config: &TaskConfig, item: &Item, order: &[usize]) -> String {
    if config.choice().is_some() {
        let positions = target_positions(&item.targets).unwrap_or_default();
        let mut letters: Vec<String> = positions.iter().filter_map(|p| order.iter().position(|o| o == p)).map(letter).collect();
        letters.sort();
        letters.dedup();
        return format!("ANSWER: {}", letters.join(","));
    }
    let answer = item.targets.first().cloned().unwrap_or_default();
    if config.scorers.iter().any(|s| matches!(s.kind, ScorerKind::Answer { .. })) { format!("ANSWER: {answer}") } else { answer }
}

/// Checks one item against the task: choices present and targets naming them.
fn check_item(config: &TaskConfig, it: &Item) -> Result<(), String> {
    if config.choice().is_none() && !config.asks_logprobs() {
        return Ok(());
    }
    if it.choices.is_empty() {
        let scorer = if config.choice().is_some() { "`choice`" } else { "`acc`/`acc_norm`" };
        return Err(format!("the {scorer} scorer needs `{}` on every row", config.fields.choices));
    }
    let positions = target_positions(&it.targets).map_err(|t| format!("target `{t}` is not a choice letter"))?;
    if let Some(p) = positions.iter().find(|p| **p >= it.choices.len()) {
        return Err(format!("target names choice {} but the row has {} choices", letter(*p), it.choices.len()));
    }
    if positions.is_empty() {
        return Err("the target names no choice".into());
    }
    Ok(())
}

/// Loads and checks the task an entry declares (its pipeline lies in `base_dir`): its own
/// `qa` parameters, or those its `eval_yaml` amounts to (problems then shown in that file).
pub fn load(base_dir: &Path, params: &Params) -> Result<TaskInstance, Vec<CatalogIssue>> {
    if params.contains_key("eval_yaml") {
        let (translated, origins) = super::evalyaml::translate(base_dir, params)?;
        return load_params(base_dir, &translated).map_err(|issues| origins.relocate(issues));
    }
    load_params(base_dir, params)
}

fn load_params(base_dir: &Path, params: &Params) -> Result<TaskInstance, Vec<CatalogIssue>> {
    let mut config = super::config::parse(base_dir, params)?;
    let (mut items, columns) =
        read_items(&config.dataset, (&config.fields, config.docs.as_deref()), config.limit, &config.keep).map_err(|p| p.issues(&config.dataset, "dataset"))?;
    if let Some((column, _)) = config.keep.iter().find(|(c, _)| !columns.contains(c)) {
        return Err(vec![CatalogIssue {
            site: IssueSite::Param("where".into()),
            message: format!("`where` names column `{column}`, which no row of {} has", config.dataset.display()),
            hint: suggestion(column, &columns.iter().map(String::as_str).collect::<Vec<_>>())
                .or_else(|| Some(format!("its columns are {}", columns.join(", ")))),
        }]);
    }
    if let Some(s) = config.sample {
        items = sample(items, s.n, s.seed);
    }
    if items.is_empty() && !config.keep.is_empty() {
        return Err(vec![CatalogIssue {
            site: IssueSite::Param("where".into()),
            message: format!("no row of {} matches `where`", config.dataset.display()),
            hint: None,
        }]);
    }
    if items.is_empty() {
        return Err(vec![dataset_issue(&DatasetError::file(&config.dataset, "the dataset has no rows"))]);
    }
    let prompt = Prompt::new(&template_for(&config), config.system.as_deref()).map_err(|e| {
        vec![CatalogIssue { site: IssueSite::Param(if config.template.is_some() { "template" } else { "system" }.into()), message: e.to_string(), hint: None }]
    })?;
    // Every item rendered once, on all cores; every problem is reported, in file order.
    let problems: Vec<_> = items
        .par_iter()
        .filter_map(|it| {
            let order: Vec<usize> = (0..it.choices.len()).collect();
            let problem = match check_item(&config, it) {
                Err(p) => Some((p, None)),
                Ok(()) => prompt.render(it, &order).err().map(|e| (e.to_string(), e.over_bounds.then_some(e.part))),
            };
            problem.map(|p| (it.place, p))
        })
        .collect();
    if let Some((place, (problem, over_bounds))) = problems.first().cloned() {
        let located = DatasetError::at(&config.dataset, place, problem);
        // A template past its bounds is the template's fault: shown at the template.
        if let Some(part) = over_bounds {
            let param = if part == "system" {
                "system"
            } else if params.contains_key("template_file") {
                "template_file"
            } else {
                "template"
            };
            return Err(vec![CatalogIssue { site: IssueSite::Param(param.into()), message: format!("rendering {located}"), hint: None }]);
        }
        let mut all = Problems::default();
        for (place, (problem, _)) in problems {
            all.push(DatasetError::at(&config.dataset, place, problem));
        }
        return Err(all.issues(&config.dataset, "dataset"));
    }
    let fewshot = match &config.fewshot {
        None => Vec::new(),
        Some(f) => {
            let (examples, _) = read_items(&f.from, (&config.fields, None), None, &[]).map_err(|p| p.issues(&f.from, "fewshot"))?;
            let mut turns = Vec::new();
            for it in sample(examples, f.n, f.seed) {
                let order: Vec<usize> = (0..it.choices.len()).collect();
                let located = |m: String| {
                    vec![CatalogIssue { site: IssueSite::Param("fewshot".into()), message: DatasetError::at(&f.from, it.place, m).to_string(), hint: None }]
                };
                check_item(&config, &it).map_err(located)?;
                let (_, user) = prompt.render(&it, &order).map_err(|e| located(e.to_string()))?;
                turns.push((user, ideal_answer(&config, &it, &order)));
            }
            turns
        }
    };
    let mut judges = Vec::new();
    for s in &mut config.scorers {
        if let ScorerKind::Judge(j) = &mut s.kind {
            resolve_scripted_judge(base_dir, j).map_err(|m| vec![CatalogIssue { site: IssueSite::Param("scorers".into()), message: m, hint: None }])?;
            let model =
                super::judge::judge_model(&j.model).map_err(|m| vec![CatalogIssue { site: IssueSite::Param("scorers".into()), message: m, hint: None }])?;
            judges.push((s.name.clone(), model, j.clone()));
        }
    }
    let mut h = blake3::Hasher::new_derive_key("evalgrid qa task-content v1");
    for it in &items {
        let label = it.label();
        h.update(&(label.len() as u64).to_le_bytes());
        h.update(label.as_bytes());
        h.update(&it.ask_hash);
        h.update(&it.target_hash);
    }
    for (user, answer) in &fewshot {
        for text in [user, answer] {
            h.update(&(text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        }
    }
    let content_hash = h.finalize().to_hex().to_string();
    let mut params = config.key_params();
    params.insert("items".into(), json!(items.len()));
    if let Some(f) = &config.fewshot {
        params.insert("fewshot".into(), json!({"n": f.n, "seed": f.seed}));
    }
    // The grading prompt's defence changes every judge's prompt: judged tasks grade again.
    if !judges.is_empty() {
        params.insert("judge_prompt".into(), json!(super::judge::PROMPT_DEFENCE));
    }
    let instance = TaskInstance {
        benchmark: NAME.into(),
        task: config.name.clone(),
        content_hash,
        params,
        episode_version: EPISODE_VERSION,
        score_version: SCORE_VERSION,
        suite: NAME.into(),
    };
    let task = Arc::new(Task { config, items, prompt, fewshot, judges });
    if let Ok(mut m) = LOADED.lock() {
        m.insert(loaded_key(&instance), task);
    }
    Ok(instance)
}

/// A `scripted` judge names its replies file relative to the pipeline, as a scripted model
/// does: the path is made absolute and the file's hash joins the judge's params.
fn resolve_scripted_judge(base_dir: &Path, j: &mut Judge) -> Result<(), String> {
    if j.model.get("provider").and_then(Value::as_str).and_then(Provider::parse) != Some(Provider::Scripted) {
        return Ok(());
    }
    let params = j.model.entry("params").or_insert_with(|| json!({}));
    let Some(file) = params.get("file").and_then(Value::as_str).map(str::to_owned) else {
        return Err("a `scripted` judge needs `params.file`: a JSON replies file".into());
    };
    let path = base_dir.join(&file);
    let bytes = fs_err::read(&path).map_err(|e| format!("cannot read the judge's replies file `{}`: {}", path.display(), e.kind()))?;
    if let Some(p) = params.as_object_mut() {
        p.insert("file".into(), json!(path.display().to_string()));
        p.insert("file_blake3".into(), json!(blake3::hash(&bytes).to_hex().to_string()));
    }
    Ok(())
}

/// The rows that differ between a previous episode record and the task as it is now: each
/// named by id (or index) and place, with what changed (question, target, added, removed).
#[must_use]
pub fn changed_rows(task: &Task, previous: &Value) -> Vec<String> {
    const SHOWN: usize = 20;
    let mut before: HashMap<String, (String, String)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for a in previous.get("answers").and_then(Value::as_array).into_iter().flatten() {
        let label = a.get("id").and_then(Value::as_str).map_or_else(|| a.get("index").map(ToString::to_string).unwrap_or_default(), str::to_owned);
        let hash = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        order.push(label.clone());
        before.insert(label, (hash("ask"), hash("target")));
    }
    let mut out = Vec::new();
    let file = task.config.dataset.display();
    for it in &task.items {
        let label = it.label();
        let place = match it.place {
            Place::Line(n) => format!("{file}:{n}"),
            Place::Row(r) => format!("{file}: row {r}"),
        };
        match before.remove(&label) {
            None => out.push(format!("row `{label}` ({place}): added")),
            Some((ask, target)) => {
                let mut what = Vec::new();
                if ask != Item::short(&it.ask_hash) {
                    what.push("question");
                }
                if target != Item::short(&it.target_hash) {
                    what.push("target");
                }
                if !what.is_empty() {
                    out.push(format!("row `{label}` ({place}): {} changed", what.join(" and ")));
                }
            }
        }
    }
    for label in order.into_iter().filter(|l| before.contains_key(l)) {
        out.push(format!("row `{label}`: removed"));
    }
    if out.len() > SHOWN {
        let more = out.len() - SHOWN;
        out.truncate(SHOWN);
        out.push(format!("… and {more} more rows"));
    }
    out
}
