//! `evalgrid check`: each distinct model endpoint of a pipeline answers one small request
//! (never cached), printed as a table; exit 1 when any endpoint has a problem.

use std::sync::Arc;

use evalgrid::exec::check::{EndpointCheck, check_endpoint};
use evalgrid::providers::{ProviderClient, RetryPolicy, install_crypto_provider};
use evalgrid::spec::ModelConfig;
use serde_json::json;

use super::args::CheckArgs;
use super::exit::Exit;
use super::run::client_config;
use super::run::serve_log_dir;
use super::{Env, Failure, load_served, output, serve_failure};
use evalgrid::spec::Weights;
use std::collections::BTreeSet;

pub(crate) fn check(env: &Env, args: &CheckArgs) -> Result<Exit, Failure> {
    let (mut pipeline, engines) = load_served(env, &args.pipeline)?;
    // A check of a served model starts its server: what a run would do, arguments included.
    let all: BTreeSet<usize> = (0..pipeline.models.len()).collect();
    let mut note = |s: &evalgrid::serve::Starting| output::note(&format!("starting {} for model {}", s.engine, s.models.join(", ")));
    let mut servers = evalgrid::serve::start(&mut pipeline, &all, &engines, &serve_log_dir(env), &mut note).map_err(|e| serve_failure(&pipeline, e))?;
    let served = served_lines(&pipeline);
    if !args.json {
        for (line, _) in &served {
            output::line(line);
        }
    }
    let served: Vec<serde_json::Value> = served.into_iter().map(|(_, v)| v).collect();
    let models = endpoints(&pipeline);
    if models.is_empty() {
        if args.json {
            output::json(&json!({"endpoints": [], "served": served, "ok": true}));
        } else {
            output::line("no model of this pipeline calls an API (built-in agents only): nothing to check");
        }
        return Ok(Exit::Ok);
    }
    let mut config = client_config(&pipeline.transport, None);
    config.served_lanes = servers.lanes.clone();
    // One request each, answered or not: a check that retries for minutes checks nothing.
    config.retry = RetryPolicy::no_retries();
    install_crypto_provider();
    let client = Arc::new(ProviderClient::new(config).map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let checks: Vec<EndpointCheck> = runtime.block_on(async {
        let tasks: Vec<_> = models
            .into_iter()
            .map(|model| {
                let client = Arc::clone(&client);
                tokio::spawn(async move { check_endpoint(&client, &model).await })
            })
            .collect();
        let mut out = Vec::new();
        for task in tasks {
            if let Ok(check) = task.await {
                out.push(check);
            }
        }
        out
    });
    runtime.shutdown_background();
    servers.stop();
    let ok = checks.iter().all(EndpointCheck::ok);
    if args.json {
        output::json(&json!({"endpoints": checks, "served": served, "ok": ok}));
    } else {
        print_table(&checks);
    }
    Ok(Exit::failed_if(!ok))
}

/// One line (and a record) per served model: engine and version, weights hash, slots,
/// context per slot, GPUs and the server's URL for this check.
fn served_lines(pipeline: &evalgrid::spec::Pipeline) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for model in &pipeline.models {
        let Some(serve) = &model.serve else { continue };
        let identity = serve.identity.as_ref();
        let version = identity.map_or("unknown", |i| i.engine_version.as_str());
        let weights = match &serve.weights {
            Weights::Local(_) => identity.and_then(|i| i.weights.clone()).unwrap_or_else(|| "not hashed".to_owned()),
            Weights::Hub(id) => format!("hub id `{id}` (not hashed: the engine downloads it)"),
        };
        let context = serve.context.map_or_else(|| "engine default".to_owned(), |c| format!("{c} tokens"));
        let line = format!(
            "served model `{}`: {} ({version}), weights {} blake3 {weights}, {} slot(s), context {context} per slot, {} GPU(s), at {}",
            evalgrid::text::one_line(&model.id),
            serve.engine,
            evalgrid::text::one_line(&serve.written),
            serve.slots,
            serve.gpus,
            model.base_url.as_deref().unwrap_or("–"),
        );
        let record = json!({
            "model": model.id, "engine": serve.engine, "engine_version": version, "weights": serve.written,
            "weights_blake3": identity.and_then(|i| i.weights.clone()), "slots": serve.slots, "context": serve.context,
            "gpus": serve.gpus, "url": model.base_url,
        });
        out.push((line, record));
    }
    out
}

/// The pipeline's API models and the task-level models they need (Eleusis' rule compiler),
/// one per distinct (provider, model, base URL, key, api).
fn endpoints(pipeline: &evalgrid::spec::Pipeline) -> Vec<ModelConfig> {
    let mut out: Vec<ModelConfig> = Vec::new();
    let compilers = pipeline
        .tasks
        .iter()
        .filter(|t| t.params.contains_key("compiler"))
        .filter_map(|t| evalgrid::envs::eleusis::play::llm_episode::compiler_model(&t.params).ok());
    for model in pipeline.models.iter().cloned().chain(compilers) {
        if model.provider.api_kind().is_none() {
            continue;
        }
        let same = |m: &ModelConfig| {
            (&m.provider, &m.model, &m.base_url, &m.api_key_env, m.api) == (&model.provider, &model.model, &model.base_url, &model.api_key_env, model.api)
        };
        if !out.iter().any(same) {
            out.push(model);
        }
    }
    out
}

fn print_table(checks: &[EndpointCheck]) {
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "–",
    };
    output::line("model | protocol | reachable | key | answered as | context | streaming | tools | url");
    for c in checks {
        let answered = match (&c.answered_model, &c.answered_as) {
            (Some(id), Some(class)) => format!("{} ({class})", evalgrid::text::one_line(id)),
            (None, Some(class)) => format!("– ({class})"),
            _ => "–".to_owned(),
        };
        output::line(&format!(
            "{} | {} | {} | {} | {answered} | {} | {} | {} | {}",
            evalgrid::text::one_line(&c.model),
            c.protocol,
            if c.reachable { "yes" } else { "NO" },
            yes_no(c.key_accepted),
            c.context_window.map_or_else(|| "–".to_owned(), |n| format!("{n} tokens")),
            yes_no(c.streaming),
            c.tools.as_deref().unwrap_or("–"),
            evalgrid::text::one_line(&c.url),
        ));
    }
    for c in checks {
        for problem in &c.problems {
            output::line(&format!("problem: model `{}`: {}", evalgrid::text::one_line(&c.model), evalgrid::text::one_line(problem)));
        }
    }
    let bad = checks.iter().filter(|c| !c.ok()).count();
    output::line(&if bad == 0 {
        format!("{} endpoint(s) checked: all usable", checks.len())
    } else {
        format!("{} endpoint(s) checked: {bad} with a problem", checks.len())
    });
}
