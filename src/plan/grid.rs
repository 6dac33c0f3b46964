//! Grid expansion: models × tasks × seeds → cells, each a chain of steps.
//!
//! Only keys are kept per cell; components are rebuilt on demand so a
//! 100,000-cell plan stays small in memory.

use serde_json::{Map, Value, json};

use rayon::prelude::*;

use super::key::{StepKey, StepKind, key_components};
use super::template::KeyTemplate;
use crate::spec::{CellFilter, Pipeline};

/// Version of the metrics stage code (bump when its output changes).
pub const METRICS_VERSION: u32 = 12;
/// Version of the report rendering code (bump when its output changes).
pub const REPORT_VERSION: u32 = 7;

/// One model × task × seed combination and the keys of its steps.
#[derive(Clone, Debug)]
pub struct Cell {
    /// `model/benchmark/task/seed`, what users type to name a cell.
    pub id: String,
    /// Index into [`Pipeline::models`].
    pub model: usize,
    /// Index into [`Pipeline::tasks`].
    pub task: usize,
    /// Seed (for Eleusis: the repetition index of the round).
    pub seed: u64,
    /// Key of the episode step.
    pub episode_key: StepKey,
    /// Key of the score step (depends on the episode key).
    pub score_key: StepKey,
}

/// The expanded grid plus the two pipeline-level steps.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Cells in grid order (model, task, seed).
    pub cells: Vec<Cell>,
    /// Whether a `--filter` narrowed the grid (no report is built then).
    pub filtered: bool,
    /// Key of the metrics step over all cells.
    pub metrics_key: StepKey,
    /// Key of the report step.
    pub report_key: StepKey,
}

/// Expands `pipeline` into a plan; `filter` (from `--filter`) narrows it. Each model ×
/// task encodes its components once ([`KeyTemplate`]) and its cells' keys are hashed on all
/// cores: a million-cell `status` spent most of its time here (issue 35).
#[must_use]
pub fn plan(pipeline: &Pipeline, filter: Option<&CellFilter>) -> Plan {
    let kept = |model: &str, qualified: &str, seed: u64| {
        (pipeline.include.is_empty() || pipeline.include.iter().any(|f| f.matches(model, qualified, seed)))
            && !pipeline.exclude.iter().any(|f| f.matches(model, qualified, seed))
            && filter.is_none_or(|f| f.matches(model, qualified, seed))
    };
    let qualified: Vec<String> = pipeline.tasks.iter().map(crate::spec::TaskInstance::qualified).collect();
    let total = pipeline
        .models
        .iter()
        .flat_map(|m| qualified.iter().map(move |q| (m, q)))
        .map(|(m, q)| pipeline.seeds.iter().filter(|&&s| kept(&m.id, q, s)).count())
        .sum();
    let mut cells = Vec::with_capacity(total);
    for (mi, model) in pipeline.models.iter().enumerate() {
        let model_value = model.key_value();
        for (ti, qualified) in qualified.iter().enumerate() {
            let seeds: Vec<u64> = pipeline.seeds.iter().copied().filter(|&s| kept(&model.id, qualified, s)).collect();
            let keys = CellKeys::new(pipeline, &model_value, ti);
            cells.par_extend(seeds.par_iter().map(|&seed| {
                let (episode_key, score_key) = keys.of(seed);
                Cell { id: cell_id(&model.id, qualified, seed), model: mi, task: ti, seed, episode_key, score_key }
            }));
        }
    }
    let metrics_key = StepKey::compute(&metrics_components(pipeline, &cells, &cells));
    let report_key = StepKey::compute(&report_components(pipeline, metrics_key));
    Plan { cells, filtered: filter.is_some(), metrics_key, report_key }
}

/// `model/benchmark/task/seed`, sized once (a million-cell plan makes a million).
fn cell_id(model: &str, qualified: &str, seed: u64) -> String {
    use std::fmt::Write as _;
    let mut id = String::with_capacity(model.len() + qualified.len() + 22);
    id.push_str(model);
    id.push('/');
    id.push_str(qualified);
    id.push('/');
    let _ = write!(id, "{seed}");
    id
}

/// How the cells of one model × task get their keys: from templates, or whole where the
/// components give none.
struct CellKeys<'a> {
    pipeline: &'a Pipeline,
    model: &'a Value,
    task: usize,
    episode: Option<KeyTemplate>,
    score: Option<KeyTemplate>,
}

impl<'a> CellKeys<'a> {
    fn new(pipeline: &'a Pipeline, model: &'a Value, task: usize) -> Self {
        let episode = KeyTemplate::new(|seed| episode_components_with(model, pipeline, task, seed));
        let score = KeyTemplate::new(|episode| score_components_with(pipeline, task, episode));
        Self { pipeline, model, task, episode, score }
    }

    /// The episode and score keys of the cell with `seed`.
    fn of(&self, seed: u64) -> (StepKey, StepKey) {
        let episode_key = match &self.episode {
            Some(template) => template.key(&Value::from(seed)),
            None => StepKey::compute(&episode_components_with(self.model, self.pipeline, self.task, Value::from(seed))),
        };
        let score_key = match &self.score {
            Some(template) => template.key_of_step(episode_key),
            None => StepKey::compute(&score_components(self.pipeline, self.task, episode_key)),
        };
        (episode_key, score_key)
    }
}

/// Key components of a cell's episode step: the model as it answers, the
/// task and its content, the seed, and the benchmark code version.
#[must_use]
pub fn episode_components(pipeline: &Pipeline, cell: &Cell) -> Value {
    episode_components_with(&pipeline.models[cell.model].key_value(), pipeline, cell.task, Value::from(cell.seed))
}

fn episode_components_with(model: &Value, pipeline: &Pipeline, task: usize, seed: Value) -> Value {
    let t = &pipeline.tasks[task];
    let mut fields = Map::new();
    fields.insert("model".into(), model.clone());
    fields.insert("task".into(), json!({"benchmark": t.benchmark, "id": t.task, "content": t.content_hash, "params": t.params}));
    fields.insert("seed".into(), seed);
    key_components(StepKind::Episode, &t.benchmark, t.episode_version, fields)
}

/// Key components of a cell's score step: scorer version and episode key.
#[must_use]
pub fn score_components(pipeline: &Pipeline, task: usize, episode_key: StepKey) -> Value {
    score_components_with(pipeline, task, json!(episode_key))
}

fn score_components_with(pipeline: &Pipeline, task: usize, episode: Value) -> Value {
    let t = &pipeline.tasks[task];
    let mut fields = Map::new();
    fields.insert("episode".into(), episode);
    key_components(StepKind::Score, &format!("{}.score", t.benchmark), t.score_version, fields)
}

/// Key components of the metrics step: its config, the planned cells (a model or task
/// with cells missing gets no aggregate) and a digest of every scored (cell id, score
/// key) pair, so any cell change or relabel re-aggregates.
#[must_use]
pub fn metrics_components(pipeline: &Pipeline, planned: &[Cell], cells: &[Cell]) -> Value {
    let mut plan_digest = Digest::default();
    for c in planned {
        plan_digest.update(&[c.id.as_bytes(), b"\n"]);
    }
    let mut digest = Digest::default();
    for c in cells {
        digest.update(&[c.id.as_bytes(), b"\0", blake3::Hash::from_bytes(*c.score_key.as_bytes()).to_hex().as_bytes(), b"\n"]);
    }
    let (plan_digest, digest) = (plan_digest.finalize(), digest.finalize());
    let mut fields = Map::new();
    fields.insert("config".into(), json!(pipeline.metrics));
    fields.insert("cells".into(), json!(cells.len()));
    fields.insert("planned".into(), json!(plan_digest.to_hex().to_string()));
    fields.insert("digest".into(), json!(digest.to_hex().to_string()));
    if let Some(horizons) = &pipeline.report.weirdml {
        // WeirdML's horizon tables are computed with the metrics: its input files, by hash.
        fields.insert("report_inputs".into(), json!(horizons));
    }
    key_components(StepKind::Metrics, "metrics", METRICS_VERSION, fields)
}

/// A blake3 hash of many small pieces, fed to the hasher 64 KiB at a time: blake3 hashes
/// a long input several chunks at once, a few bytes at a time one block at once (the same
/// hash either way; a million-cell plan digests 140 MB).
#[derive(Default)]
struct Digest {
    hasher: blake3::Hasher,
    pending: Vec<u8>,
}

impl Digest {
    fn update(&mut self, pieces: &[&[u8]]) {
        for piece in pieces {
            self.pending.extend_from_slice(piece);
        }
        if self.pending.len() >= 1 << 16 {
            self.hasher.update(&self.pending);
            self.pending.clear();
        }
    }

    fn finalize(mut self) -> blake3::Hash {
        self.hasher.update(&self.pending);
        self.hasher.finalize()
    }
}

/// Key components of the report step: presentation config and metrics key.
#[must_use]
pub fn report_components(pipeline: &Pipeline, metrics_key: StepKey) -> Value {
    let mut fields = Map::new();
    fields.insert("config".into(), json!(pipeline.report));
    fields.insert("pipeline".into(), Value::from(pipeline.name.clone()));
    let prices: Map<String, Value> = pipeline.models.iter().filter_map(|m| m.price.map(|p| (m.id.clone(), json!(p)))).collect();
    fields.insert("prices".into(), Value::Object(prices));
    if pipeline.sandbox == crate::spec::SandboxMode::None {
        // Only the opt-out is recorded, so existing report keys stay as they were.
        fields.insert("sandbox".into(), json!(pipeline.sandbox));
    }
    fields.insert("metrics".into(), json!(metrics_key));
    key_components(StepKind::Report, "report", REPORT_VERSION, fields)
}

/// The one-model, one-task, two-seed pipeline behind the golden keys (tests only).
#[cfg(test)]
pub(crate) fn fixture_pipeline() -> Pipeline {
    use crate::spec::{MetricsConfig, ModelConfig, ReportConfig, TaskInstance};
    Pipeline {
        name: "golden".into(),
        source_path: "p.yaml".into(),
        source_hash: "ignored".into(),
        budget_usd: None,
        models: vec![ModelConfig {
            accept_other_model: false,
            headers: std::collections::BTreeMap::new(),
            api: crate::providers::OpenAiApi::Auto,
            background: crate::providers::Background::Auto,
            stream: crate::providers::StreamMode::Auto,
            batch: None,
            serve: None,
            agent: None,
            id: "m".into(),
            provider: crate::spec::Provider::Builtin,
            model: "random".into(),
            base_url: None,
            api_key_env: Some("IGNORED_KEY_VAR".into()),
            params: [("salt".to_owned(), json!(0))].into(),
            price: None,
        }],
        tasks: vec![TaskInstance {
            benchmark: "eleusis".into(),
            task: "even_ranks_only".into(),
            content_hash: "c0ffee".into(),
            params: [("max_turns".to_owned(), json!(30))].into(),
            episode_version: 1,
            score_version: 1,
            suite: "eleusis".into(),
        }],
        seeds: vec![0, 1],
        include: vec![],
        exclude: vec![],
        metrics: MetricsConfig::default(),
        report: ReportConfig { title: "t".into(), decimals: 3, prices: std::collections::BTreeMap::new(), weirdml: None },
        transport: crate::spec::TransportConfig::default(),
        sandbox: crate::spec::SandboxMode::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::fixture_pipeline as pipeline;
    use super::*;

    /// Golden keys: if one of these changes, every cache entry of that kind
    /// is invalidated for every user. Change them only together with
    /// `KEY_SCHEMA_VERSION` or a component version, on purpose.
    #[test]
    fn golden_keys_are_pinned() {
        let p = plan(&pipeline(), None);
        let keys: Vec<String> = p.cells.iter().flat_map(|c| [c.episode_key.to_hex(), c.score_key.to_hex()]).collect();
        assert_eq!(
            keys,
            [
                "fcb7b377ed9b589df2107e6f049b2bdec7523261b0c788a12b0d04c176610317",
                "f28b237d9524ed8c02a268697c2498f3033b771785deb7e2e7078597f8655c9b",
                "f9f4ea929abefc83d3800a2f035e35dfabb19258d97745a0f4d1d36c7deadbbf",
                "2c10ca045930db4463e52a794ade3a97edaf87b93f467da952e06d289d67e80a",
            ]
        );
        assert_eq!(p.metrics_key.to_hex(), "3d33caf3ca9a1f6a4c8ca47f24fcde9fa01c66c836baab2c2e2de06b212fbb28");
        assert_eq!(p.report_key.to_hex(), "95570c9381130e167ba12a809b1d86a5726afa2469576025f94de778f1ac4f22");
    }

    #[test]
    fn transport_and_labels_stay_out_of_episode_keys() {
        let base = plan(&pipeline(), None);
        let mut p = pipeline();
        p.models[0].id = "renamed".into();
        p.models[0].api_key_env = Some("OTHER".into());
        p.source_path = "elsewhere.yaml".into();
        p.source_hash = "different".into();
        p.report.decimals = 5;
        p.transport.max_attempts = 1;
        p.transport.max_response_bytes = 1024;
        p.transport.first_byte_timeout_s = 5;
        p.transport.server_slots = crate::providers::ServerSlots::Off;
        p.models[0].price = Some(crate::spec::Price { input_per_mtok: 1.0, output_per_mtok: 2.0, cached_input_per_mtok: None, batch_factor: None });
        let other = plan(&p, None);
        assert_eq!(base.cells[0].episode_key, other.cells[0].episode_key);
        assert_eq!(base.cells[0].score_key, other.cells[0].score_key);
        assert_ne!(base.report_key, other.report_key, "report options are part of the report key");
    }

    #[test]
    fn everything_that_can_change_an_answer_changes_the_key() {
        let base = plan(&pipeline(), None).cells[0].episode_key;
        type Edit = Box<dyn Fn(&mut Pipeline)>;
        let edits: Vec<Edit> = vec![
            Box::new(|p| p.models[0].provider = crate::spec::Provider::OpenAi),
            Box::new(|p| p.models[0].model = "oracle".into()),
            Box::new(|p| p.models[0].base_url = Some("http://127.0.0.1:1".into())),
            Box::new(|p| {
                p.models[0].params.insert("salt".into(), json!(1));
            }),
            Box::new(|p| p.tasks[0].task = "only_aces".into()),
            Box::new(|p| p.tasks[0].content_hash = "decaf".into()),
            Box::new(|p| {
                p.tasks[0].params.insert("max_turns".into(), json!(29));
            }),
            Box::new(|p| p.tasks[0].episode_version = 2),
            Box::new(|p| p.seeds = vec![5, 6]),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut p = pipeline();
            edit(&mut p);
            assert_ne!(plan(&p, None).cells[0].episode_key, base, "edit {i} did not change the key");
        }
        let mut p = pipeline();
        p.tasks[0].score_version = 2;
        let changed = plan(&p, None);
        assert_eq!(changed.cells[0].episode_key, base);
        assert_ne!(changed.cells[0].score_key, plan(&pipeline(), None).cells[0].score_key);
    }

    /// The keys a plan hashes from templates are those of the components built whole.
    #[test]
    fn template_keys_are_the_whole_components_keys() {
        let mut p = pipeline();
        p.seeds = vec![0, 9, 10, 123_456_789_012, u64::MAX];
        for cell in plan(&p, None).cells {
            assert_eq!(cell.episode_key, StepKey::compute(&episode_components(&p, &cell)), "{}", cell.id);
            assert_eq!(cell.score_key, StepKey::compute(&score_components(&p, cell.task, cell.episode_key)), "{}", cell.id);
        }
    }

    #[test]
    fn seeds_are_separate_cells_with_separate_keys() {
        let p = plan(&pipeline(), None);
        assert_eq!(p.cells.len(), 2);
        assert_ne!(p.cells[0].episode_key, p.cells[1].episode_key);
        assert_eq!(p.cells[1].id, "m/eleusis/even_ranks_only/1");
    }
}
