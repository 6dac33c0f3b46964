//! Pipeline specification: YAML file → validated [`Pipeline`].
//!
//! `load` reads the file, parses it through [`yaml`] (the single module that
//! knows the YAML crate), and resolves it against a [`Catalog`] of benchmarks,
//! reporting every problem as `file:line:col: message` with a hint.

pub mod agent;
pub mod batch;
pub mod catalog;
pub mod diagnostic;
pub mod pipeline;
pub mod provider;
pub mod raw;
pub mod resolve;
pub mod serve;
pub mod yaml;

use std::path::{Path, PathBuf};

pub use batch::BatchMode;
pub use catalog::{Catalog, CatalogIssue, Helper, IssueSite, Selection};
pub use diagnostic::{Diagnostic, Position, Report};
pub use pipeline::{
    CREDENTIAL_HEADERS, CellFilter, HeaderSource, MetricsConfig, ModelConfig, Params, Pipeline, Price, ReportConfig, ReportFile, SandboxMode, TaskInstance,
    TransportConfig, WeirdMlReport, glob_match,
};
pub use provider::Provider;
pub use serve::{Engine, ServeArg, ServeConfig, ServedIdentity, Weights};

/// Why a pipeline could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read pipeline `{path}`")]
    Read {
        /// File named by the user.
        path: PathBuf,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is invalid; the report lists every problem.
    #[error("{0}")]
    Invalid(Box<Report>),
}

/// Reads and validates the pipeline at `path`.
pub fn load(path: &Path, catalog: &dyn Catalog) -> Result<Pipeline, SpecError> {
    let bytes = fs_err::read(path).map_err(|source| SpecError::Read { path: path.to_owned(), source })?;
    let source = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = u32::try_from(valid.iter().filter(|b| **b == b'\n').count() + 1).unwrap_or(u32::MAX);
            return Err(SpecError::Invalid(Box::new(Report {
                path: path.to_owned(),
                source: String::new(),
                diagnostics: vec![Diagnostic::new(Position { line, column: 1 }, "file is not valid UTF-8")],
            })));
        }
    };
    load_str(&source, path, catalog)
}

/// Validates pipeline text; `path` is only used in messages and provenance.
pub fn load_str(source: &str, path: &Path, catalog: &dyn Catalog) -> Result<Pipeline, SpecError> {
    let invalid = |diagnostics| SpecError::Invalid(Box::new(Report { path: path.to_owned(), source: source.to_owned(), diagnostics }));
    let raw: raw::RawPipeline = yaml::parse(source).map_err(|d| invalid(vec![d]))?;
    let hash = blake3::hash(source.as_bytes()).to_hex().to_string();
    resolve::resolve(raw, catalog, path.to_owned(), hash).map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::StreamMode;
    use proptest::prelude::*;

    /// A catalog with one benchmark, enough to exercise every resolver path.
    struct Tiny;
    impl Catalog for Tiny {
        fn benchmarks(&self) -> Vec<&'static str> {
            vec!["bench"]
        }
        fn metrics(&self, _: &str) -> Vec<String> {
            vec!["mean_x".to_owned()]
        }
        fn providers(&self) -> Vec<Provider> {
            vec![Provider::Builtin, Provider::OpenAi]
        }
        fn resolve_tasks(&self, benchmark: &str, select: &Selection, params: &Params) -> Result<Vec<TaskInstance>, Vec<CatalogIssue>> {
            let names = match select {
                Selection::All => vec!["a".to_owned(), "b".to_owned()],
                Selection::Names(n) => n.clone(),
            };
            Ok(names
                .into_iter()
                .map(|task| TaskInstance {
                    benchmark: benchmark.into(),
                    task,
                    content_hash: "h".into(),
                    params: params.clone(),
                    episode_version: 1,
                    score_version: 1,
                    suite: benchmark.into(),
                })
                .collect())
        }
        fn resolve_builtin(&self, _: &str, params: &Params, _: &[String]) -> Result<Params, Vec<CatalogIssue>> {
            Ok(params.clone())
        }
    }

    const VALID: &str = "name: p\nmodels:\n  - id: m\n    provider: builtin\n    model: random\n    params: {salt: 1}\ntasks:\n  - benchmark: bench\n    select: [a, b]\nseeds: {from: 0, to: 2}\ninclude:\n  - {model: m}\nmetrics: {select: [mean_x]}\nreport: {title: t, decimals: 2}\n";

    #[test]
    fn valid_pipeline_loads() {
        let p = load_str(VALID, Path::new("p.yaml"), &Tiny).unwrap();
        assert_eq!(p.seeds, vec![0, 1, 2]);
        assert_eq!(p.tasks.len(), 2);
        assert_eq!(p.report.decimals, 2);
    }

    fn with_model(model: &str, transport: &str) -> Result<Pipeline, SpecError> {
        let text = format!("name: p\nmodels:\n  - {model}\ntasks:\n  - benchmark: bench\nseeds: [0]\n{transport}");
        load_str(&text, Path::new("p.yaml"), &Tiny)
    }

    fn messages(error: SpecError) -> Vec<String> {
        let SpecError::Invalid(report) = error else { panic!("{error}") };
        report.diagnostics.iter().map(|d| format!("{}:{}: {}", d.position.line, d.position.column, d.message)).collect()
    }

    /// Issue 13 item 6: `stream:` is read per model and is transport, so no key sees it.
    #[test]
    fn stream_is_a_model_setting_outside_every_key() {
        let model = |stream: &str| format!("{{id: m, provider: openai, model: gpt-x, params: {{max_tokens: 64}}{stream}}}");
        let auto = with_model(&model(""), "").unwrap();
        assert_eq!(auto.models[0].stream, crate::providers::StreamMode::Auto);
        for (text, mode) in [(", stream: true", StreamMode::On), (", stream: false", StreamMode::Off), (", stream: auto", StreamMode::Auto)] {
            let p = with_model(&model(text), "").unwrap();
            assert_eq!(p.models[0].stream, mode, "{text}");
            assert_eq!(p.models[0].key_value(), auto.models[0].key_value(), "{text}");
        }
        let t = with_model(&model(""), "transport: {stream_idle_timeout_s: 7, stream_total_timeout_s: 3600}\n").unwrap().transport;
        assert_eq!((t.stream_idle_timeout_s, t.stream_total_timeout_s), (7, 3600));
        let d = auto.transport;
        assert_eq!((d.stream_idle_timeout_s, d.stream_total_timeout_s), (300, 4 * 3600));

        let bad = messages(with_model(&model(", stream: always"), "").unwrap_err());
        assert!(bad[0].starts_with("3:") && bad[0].contains("unknown `stream: \"always\"`"), "{bad:?}");
        let builtin = messages(with_model("{id: r, provider: builtin, model: random, stream: true}", "").unwrap_err());
        assert!(builtin[0].contains("`stream` applies to models called over HTTP"), "{builtin:?}");
        let param = messages(with_model("{id: m, provider: openai, model: gpt-x, params: {stream: true}}", "").unwrap_err());
        assert!(param[0].contains("`params.stream` is not a generation parameter"), "{param:?}");
        let zero = messages(with_model(&model(""), "transport: {stream_idle_timeout_s: 0}\n").unwrap_err());
        assert!(zero[0].contains("`transport.stream_idle_timeout_s` must be at least 1"), "{zero:?}");
    }

    /// Issue 35 item 0: the first-byte timeout and the slot setting are transport, read and
    /// checked with their positions.
    #[test]
    fn first_byte_timeout_and_server_slots_are_checked_where_they_are_written() {
        use crate::providers::ServerSlots;
        let model = "{id: m, provider: openai, model: gpt-x}";
        let d = with_model(model, "").unwrap().transport;
        assert_eq!((d.first_byte_timeout_s, d.server_slots), (600, ServerSlots::Auto));
        let t = with_model(model, "transport: {first_byte_timeout_s: 90, server_slots: props}\n").unwrap().transport;
        assert_eq!((t.first_byte_timeout_s, t.server_slots), (90, ServerSlots::Props));
        assert_eq!(with_model(model, "transport: {server_slots: off}\n").unwrap().transport.server_slots, ServerSlots::Off);
        let zero = messages(with_model(model, "transport: {first_byte_timeout_s: 0}\n").unwrap_err());
        assert!(zero[0].contains("`transport.first_byte_timeout_s` must be at least 1"), "{zero:?}");
        assert!(zero[0].starts_with("7:"), "located at its line: {zero:?}");
        let bad = messages(with_model(model, "transport: {server_slots: always}\n").unwrap_err());
        assert!(bad[0].contains("`transport.server_slots` must be one of `auto`, `props`, `off`, not `always`"), "{bad:?}");
    }

    /// Issue 22 item 1: `provider:` is an enum, yet an unknown (or uncatalogued) name is still a
    /// located error with a hint, and the key holds the same lowercase string as before.
    #[test]
    fn provider_is_parsed_once_and_keys_as_the_same_string() {
        let p = with_model("{id: m, provider: openai, model: gpt-x}", "").unwrap();
        assert_eq!(p.models[0].provider, Provider::OpenAi);
        assert_eq!(p.models[0].key_value()["provider"], serde_json::json!("openai"));
        let typo = messages(with_model("{id: m, provider: opnai, model: gpt-x}", "").unwrap_err());
        assert_eq!(typo, ["3:23: unknown provider `opnai`"]);
        let SpecError::Invalid(report) = with_model("{id: m, provider: opnai, model: gpt-x}", "").unwrap_err() else { panic!() };
        assert_eq!(report.diagnostics[0].hint.as_deref(), Some("did you mean `openai`?"));
        let absent = messages(with_model("{id: m, provider: gemini, model: g}", "").unwrap_err());
        assert_eq!(absent, ["3:23: unknown provider `gemini`"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Arbitrary text never panics the loader.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
            let _ = load_str(&text, Path::new("f.yaml"), &Tiny);
        }

        /// Valid pipelines with one byte replaced, deleted or duplicated never
        /// panic, and every error points inside the file.
        #[test]
        fn mutated_pipelines_fail_cleanly(pos in 0usize..VALID.len(), byte in any::<u8>(), op in 0u8..3) {
            let mut bytes = VALID.as_bytes().to_vec();
            match op {
                0 => bytes[pos] = byte,
                1 => { bytes.remove(pos); }
                _ => bytes.insert(pos, bytes[pos]),
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if let Err(SpecError::Invalid(report)) = load_str(&text, Path::new("f.yaml"), &Tiny) {
                let lines = u32::try_from(text.lines().count()).unwrap() + 1;
                for d in &report.diagnostics {
                    prop_assert!(d.position.line <= lines, "{d:?} outside {lines} lines");
                }
                let _ = report.to_string();
            }
        }
    }
}
