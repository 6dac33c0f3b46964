//! Serde mirror of the pipeline YAML, before any semantic validation.
//!
//! Every struct denies unknown fields and wraps the values later checks need
//! to point at in [`Spanned`], so semantic errors carry `line:col` too. No
//! `flatten` and no `untagged`: they lose locations and give vague errors.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

/// Top level of a pipeline file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub models: Spanned<Vec<RawModel>>,
    pub tasks: Spanned<Vec<RawTask>>,
    pub seeds: Spanned<RawSeeds>,
    #[serde(default)]
    pub include: Vec<Spanned<RawFilter>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<RawFilter>>,
    #[serde(default)]
    pub metrics: Option<RawMetrics>,
    #[serde(default)]
    pub report: Option<RawReport>,
    #[serde(default)]
    pub transport: Option<RawTransport>,
    #[serde(default)]
    pub sandbox: Option<super::pipeline::SandboxMode>,
    #[serde(default)]
    pub budget: Option<RawBudget>,
}

/// `budget:` section: the most the grid's model calls may cost (in no key).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    pub usd: Spanned<f64>,
}

/// `transport:` section: how calls are made, never what they answer.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTransport {
    #[serde(default)]
    pub max_attempts: Option<Spanned<u32>>,
    #[serde(default)]
    pub retry_base_ms: Option<u64>,
    #[serde(default)]
    pub retry_max_ms: Option<u64>,
    #[serde(default)]
    pub call_timeout_s: Option<u64>,
    #[serde(default)]
    pub request_timeout_s: Option<u64>,
    #[serde(default)]
    pub connect_timeout_s: Option<u64>,
    #[serde(default)]
    pub max_concurrency: Option<Spanned<usize>>,
    #[serde(default)]
    pub concurrency_cap: Option<Spanned<usize>>,
    #[serde(default)]
    pub max_response_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    pub per_shard_concurrency: Option<Spanned<usize>>,
    #[serde(default)]
    pub background_poll_ms: Option<u64>,
    #[serde(default)]
    pub background_poll_max_ms: Option<u64>,
    pub stream_idle_timeout_s: Option<Spanned<u64>>,
    #[serde(default)]
    pub stream_total_timeout_s: Option<Spanned<u64>>,
    #[serde(default)]
    pub first_byte_timeout_s: Option<Spanned<u64>>,
    #[serde(default)]
    pub server_slots: Option<Spanned<String>>,
}

/// Per-model prices in US dollars per million tokens (for cost columns).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    pub input_per_mtok: Spanned<f64>,
    pub output_per_mtok: Spanned<f64>,
    #[serde(default)]
    pub cached_input_per_mtok: Option<Spanned<f64>>,
    #[serde(default)]
    pub batch_factor: Option<Spanned<f64>>,
}

/// One entry of `models:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub id: Spanned<String>,
    pub provider: Spanned<String>,
    pub model: Spanned<String>,
    #[serde(default)]
    pub base_url: Option<Spanned<String>>,
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<serde_json::Value>>,
    #[serde(default)]
    pub price: Option<RawPrice>,
    #[serde(default)]
    pub accept_other_model: Option<Spanned<bool>>,
    /// Extra HTTP headers: a string, or `{env: VAR}` for a value read at call time.
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<serde_json::Value>>,
    /// OpenAI API: `chat`, `responses` or `auto` (`provider: openai` only).
    #[serde(default)]
    pub api: Option<Spanned<String>>,
    /// Responses API background mode: `auto`, `true` or `false` (`provider: openai` only).
    #[serde(default)]
    pub background: Option<Spanned<serde_json::Value>>,
    /// Batch API: `true`, `false` or `{max_requests, poll_ms, window_ms, lookup_ms}` (OpenAI, Anthropic, Gemini).
    #[serde(default)]
    pub batch: Option<Spanned<serde_json::Value>>,
    /// Streaming: `auto`, `true` or `false` (models called over HTTP only).
    #[serde(default)]
    pub stream: Option<Spanned<serde_json::Value>>,
    /// An inference server evalgrid starts for this entry (llama.cpp or vLLM).
    #[serde(default)]
    pub serve: Option<Spanned<RawServe>>,
    /// Agent settings this contestant plays harbor tasks with, over the task entry's.
    #[serde(default)]
    pub agent: Option<Spanned<serde_json::Value>>,
}

/// `serve:` of a model entry: the engine, the weights and how to run them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServe {
    pub engine: Spanned<String>,
    pub model: Spanned<String>,
    #[serde(default)]
    pub slots: Option<Spanned<usize>>,
    #[serde(default)]
    pub context: Option<Spanned<u64>>,
    #[serde(default)]
    pub gpus: Option<Spanned<u32>>,
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    #[serde(default)]
    pub blake3: Option<Spanned<String>>,
    #[serde(default)]
    pub start_timeout_s: Option<Spanned<u64>>,
}

/// One entry of `tasks:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    pub benchmark: Spanned<String>,
    #[serde(default)]
    pub select: Option<Spanned<RawSelect>>,
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<RawParam>>,
    /// The agent API models play (`harbor`); the same as `params.agent`.
    #[serde(default)]
    pub agent: Option<Spanned<RawParam>>,
}

/// A task parameter's value, and where each element of a list value starts, so an error in
/// one entry of a list (a scorer) points at that entry, not at the list's first.
#[derive(Debug)]
pub struct RawParam {
    pub value: serde_json::Value,
    pub items: Vec<super::diagnostic::Position>,
}

impl<'de> Deserialize<'de> for RawParam {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawParam;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a parameter value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawParam, A::Error> {
                let (mut values, mut items) = (Vec::new(), Vec::new());
                while let Some(element) = seq.next_element::<Spanned<serde_json::Value>>()? {
                    items.push(super::yaml::position_of(&element));
                    values.push(element.value);
                }
                Ok(RawParam { value: serde_json::Value::Array(values), items })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawParam, A::Error> {
                plain(serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawParam, E> {
                plain(v.into())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawParam, E> {
                plain(v.into())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawParam, E> {
                plain(v.into())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawParam, E> {
                plain(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawParam, E> {
                plain(v.into())
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<RawParam, E> {
                plain(v.into())
            }
            fn visit_unit<E: de::Error>(self) -> Result<RawParam, E> {
                plain(serde_json::Value::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<RawParam, E> {
                plain(serde_json::Value::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<RawParam, D2::Error> {
                RawParam::deserialize(d)
            }
        }
        fn plain<E>(value: serde_json::Value) -> Result<RawParam, E> {
            Ok(RawParam { value, items: Vec::new() })
        }
        deserializer.deserialize_any(V)
    }
}

/// `select: all` or a list of task names.
#[derive(Debug)]
pub enum RawSelect {
    All,
    Names(Vec<Spanned<String>>),
}

/// `seeds: [0, 1, 2]` or `seeds: {from: 0, to: 2}` (inclusive).
#[derive(Debug)]
pub enum RawSeeds {
    List(Vec<u64>),
    Range { from: u64, to: u64 },
}

/// A grid filter: every present field must match (globs for names).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFilter {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub task: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
}

/// `metrics:` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    #[serde(default)]
    pub select: Option<Vec<Spanned<String>>>,
}

/// `report:` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReport {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub decimals: Option<Spanned<u32>>,
    #[serde(default)]
    pub prices: BTreeMap<String, RawPrice>,
    #[serde(default)]
    pub weirdml: Option<RawWeirdMlReport>,
}

/// `report.weirdml:` time horizons of the pipeline's WeirdML runs on the published timeline.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeirdMlReport {
    pub estimates: Spanned<String>,
    #[serde(default)]
    pub published: Option<Spanned<String>>,
    #[serde(default)]
    pub published_models: Vec<Spanned<String>>,
    #[serde(default)]
    pub release_dates: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub resamples: Option<Spanned<usize>>,
}

impl<'de> Deserialize<'de> for RawSelect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SelectVisitor;
        impl<'de> Visitor<'de> for SelectVisitor {
            type Value = RawSelect;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`all` or a list of task names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawSelect, E> {
                if v == "all" { Ok(RawSelect::All) } else { Err(E::custom(format!("expected `all` or a list of task names, found `{v}`"))) }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawSelect, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<Spanned<String>>()? {
                    names.push(name);
                }
                Ok(RawSelect::Names(names))
            }
        }
        d.deserialize_any(SelectVisitor)
    }
}

impl<'de> Deserialize<'de> for RawSeeds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SeedsVisitor;
        impl<'de> Visitor<'de> for SeedsVisitor {
            type Value = RawSeeds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of non-negative integers or `{from: N, to: M}`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawSeeds, A::Error> {
                let mut seeds = Vec::new();
                while let Some(seed) = seq.next_element::<u64>()? {
                    seeds.push(seed);
                }
                Ok(RawSeeds::List(seeds))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawSeeds, A::Error> {
                let (mut from, mut to) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "from" if from.is_none() => from = Some(map.next_value::<u64>()?),
                        "to" if to.is_none() => to = Some(map.next_value::<u64>()?),
                        "from" | "to" => return Err(de::Error::duplicate_field("from/to")),
                        other => return Err(de::Error::unknown_field(other, &["from", "to"])),
                    }
                }
                match (from, to) {
                    (Some(from), Some(to)) => Ok(RawSeeds::Range { from, to }),
                    (None, _) => Err(de::Error::missing_field("from")),
                    (_, None) => Err(de::Error::missing_field("to")),
                }
            }
        }
        d.deserialize_any(SeedsVisitor)
    }
}
