//! `serve:` validation and keys.

use std::path::Path;

use crate::spec::{Catalog, CatalogIssue, Params, Provider, Selection, SpecError, TaskInstance, load_str};

struct Tiny;
impl Catalog for Tiny {
    fn benchmarks(&self) -> Vec<&'static str> {
        vec!["bench"]
    }
    fn metrics(&self, _: &str) -> Vec<String> {
        vec!["m".to_owned()]
    }
    fn providers(&self) -> Vec<Provider> {
        vec![Provider::Builtin, Provider::OpenAi, Provider::Anthropic]
    }
    fn resolve_tasks(&self, benchmark: &str, _: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
        Ok(vec![TaskInstance {
            benchmark: benchmark.into(),
            task: "a".into(),
            content_hash: "h".into(),
            params: params.clone(),
            episode_version: 1,
            score_version: 1,
            suite: benchmark.into(),
        }])
    }
    fn resolve_builtin(&self, _: &str, params: &Params, _: &[String]) -> Result<Params, Vec<CatalogIssue>> {
        Ok(params.clone())
    }
}

fn load(dir: &Path, model: &str) -> Result<crate::spec::Pipeline, SpecError> {
    let text = format!("name: p\nmodels:\n  - {model}\ntasks:\n  - benchmark: bench\nseeds: [0]\n");
    load_str(&text, &dir.join("p.yaml"), &Tiny)
}

fn messages(error: SpecError) -> Vec<String> {
    let SpecError::Invalid(report) = error else { panic!("{error}") };
    report.diagnostics.iter().map(|d| format!("{}:{}: {}", d.position.line, d.position.column, d.message)).collect()
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ckpt")).unwrap();
    std::fs::write(dir.path().join("ckpt/m.gguf"), b"GGUF").unwrap();
    std::fs::write(dir.path().join("template.jinja"), b"{{ messages }}").unwrap();
    dir
}

#[test]
fn a_served_model_resolves_with_defaults_and_paths_next_to_the_pipeline() {
    let dir = fixture();
    let p = load(dir.path(), "{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf}}").unwrap();
    let serve = p.models[0].serve.as_ref().unwrap();
    assert_eq!(serve.engine, crate::spec::Engine::LlamaCpp);
    assert_eq!(serve.weights, crate::spec::Weights::Local(std::fs::canonicalize(dir.path().join("ckpt/m.gguf")).unwrap()));
    assert_eq!((serve.slots, serve.context, serve.gpus), (1, Some(4096), 0));
    let vllm = load(dir.path(), "{id: m, provider: openai, model: ft, serve: {engine: vllm, model: Qwen/Qwen3-8B}}").unwrap();
    let serve = vllm.models[0].serve.as_ref().unwrap();
    assert_eq!(serve.weights, crate::spec::Weights::Hub("Qwen/Qwen3-8B".into()));
    assert_eq!((serve.slots, serve.context, serve.gpus), (16, None, 1));
}

#[test]
fn mistakes_are_located() {
    let dir = fixture();
    let cases = [
        ("{id: m, provider: openai, model: ft, serve: {engine: llama, model: ckpt/m.gguf}}", "unknown `serve.engine: llama`"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/missing.gguf}}", "`serve.model`: cannot read"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf, slots: 0}}", "`serve.slots` must be at least 1"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf, args: [--port, '9']}}", "`--port` is set by evalgrid"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf, args: ['-c=9']}}", "`-c` is set by `serve.context`"),
        ("{id: m, provider: builtin, model: random, serve: {engine: llama.cpp, model: ckpt/m.gguf}}", "`serve` needs `provider: openai`"),
        ("{id: m, provider: openai, model: ft, base_url: 'http://x', serve: {engine: llama.cpp, model: ckpt/m.gguf}}", "takes no `base_url`"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf, blake3: abc}}", "64 hex digits"),
        ("{id: m, provider: openai, model: ft, serve: {engine: llama.cpp, model: ckpt/m.gguf, sloots: 2}}", "unknown field `sloots`"),
    ];
    for (model, expected) in cases {
        let found = messages(load(dir.path(), model).unwrap_err());
        assert!(found.iter().any(|m| m.starts_with("3:") && m.contains(expected)), "{model}: {found:?}");
    }
}

#[test]
fn a_pinned_file_may_be_absent_here() {
    let dir = fixture();
    let pin = "ab".repeat(32);
    let p = load(dir.path(), &format!("{{id: m, provider: openai, model: ft, serve: {{engine: llama.cpp, model: /scratch/m.gguf, blake3: {pin}}}}}")).unwrap();
    assert_eq!(p.models[0].serve.as_ref().unwrap().key_value()["weights"], serde_json::json!(pin));
}

/// The key holds what can change an answer (weights, engine version, context, sampling and
/// template arguments, a template file's content) and nothing that cannot (path, slots,
/// GPUs, threads, the start timeout).
#[test]
fn keys_hold_the_weights_and_settings_not_the_placement() {
    let dir = fixture();
    let entry =
        |serve: &str| load(dir.path(), &format!("{{id: m, provider: openai, model: ft, serve: {{engine: llama.cpp, model: ckpt/m.gguf{serve}}}}}")).unwrap();
    let identity = |weights: &str| crate::spec::ServedIdentity { engine_version: "v1".into(), weights: Some(weights.into()), arg_files: vec![None; 8] };
    let key = |p: &crate::spec::Pipeline, weights: &str| {
        let mut model = p.models[0].clone();
        let serve = model.serve.as_mut().unwrap();
        let mut id = identity(weights);
        id.arg_files = serve.args.iter().map(|a| a.file.as_ref().map(|_| "f".repeat(64))).collect();
        serve.identity = Some(id);
        model.key_value()
    };
    let base = key(&entry(""), "w1");
    assert_eq!(base["base_url"], serde_json::Value::Null);
    assert_eq!(base["serve"]["weights"], "w1");
    for same in [", slots: 4", ", gpus: 2", ", args: [-t, '8']", ", args: ['--threads=8', --no-warmup]", ", start_timeout_s: 9"] {
        assert_eq!(key(&entry(same), "w1"), base, "{same}");
    }
    assert_ne!(key(&entry(""), "w2"), base, "weights");
    for other in [", context: 8192", ", args: [--temp, '0.2']", ", args: [--chat-template-file, template.jinja]"] {
        assert_ne!(key(&entry(other), "w1"), base, "{other}");
    }
    let template = key(&entry(", args: [--chat-template-file, template.jinja]"), "w1");
    assert_eq!(template["serve"]["args"], serde_json::json!(["--chat-template-file", format!("blake3:{}", "f".repeat(64))]));
    // The `=` spelling is the same key, the file keyed by its content, not its path.
    let joined = entry(", args: ['--chat-template-file=template.jinja']");
    assert_eq!(key(&joined, "w1"), template, "`--flag=FILE` is `--flag FILE`");
    let args = &joined.models[0].serve.as_ref().unwrap().args;
    assert_eq!((args.len(), args[1].file.as_deref()), (2, Some(std::path::absolute(dir.path().join("template.jinja")).unwrap().as_path())));
    assert_eq!(joined.models[0].serve.as_ref().unwrap().engine_args()[0], "--chat-template-file");
    // A value that names no file stays one word, keyed as written.
    let plain = key(&entry(", args: ['--temp=0.2']"), "w1");
    assert_eq!(plain["serve"]["args"], serde_json::json!(["--temp=0.2"]));
}
