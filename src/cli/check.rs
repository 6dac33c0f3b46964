//! `evalgrid check`: each distinct model endpoint of a pipeline answers one small request
//! (never cached), printed as a table; exit 1 when any endpoint has a problem.

use std::sync::Arc;

use evalgrid::exec::check::{EndpointCheck, LogprobProbe, RuntimeCheck, check_endpoint, check_runtime, runtimes_needed};
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
    let (mut pipeline, engines) = load_served(env, &args.pipeline, true)?;
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
    let runtimes = runtime_checks(&pipeline, args.json);
    let runtimes_ok = runtimes.iter().all(RuntimeCheck::ok);
    let models = endpoints(&pipeline);
    // Entries playing a task that reads next-token log-probabilities are probed for them.
    let reads_logprobs =
        pipeline.tasks.iter().any(|t| evalgrid::envs::qa::task::get(t).is_ok_and(|t| t.config.asks_logprobs() && !t.config.asks_loglikelihood()));
    let reads_loglikelihoods = pipeline.tasks.iter().any(|t| evalgrid::envs::qa::task::get(t).is_ok_and(|t| t.config.asks_loglikelihood()));
    let only_loglikelihoods = pipeline.tasks.iter().all(|t| evalgrid::envs::qa::task::get(t).is_ok_and(|t| t.config.asks_loglikelihood()));
    let players: BTreeSet<String> = pipeline.models.iter().map(|m| m.id.clone()).collect();
    if models.is_empty() {
        if args.json {
            output::json(&json!({"endpoints": [], "served": served, "runtimes": runtimes, "ok": runtimes_ok}));
        } else {
            output::line("no model of this pipeline calls an API (built-in agents only): nothing to check");
        }
        return Ok(Exit::failed_if(!runtimes_ok));
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
                let probe = match (players.contains(&model.id), reads_loglikelihoods, reads_logprobs) {
                    (true, true, _) if only_loglikelihoods => LogprobProbe::LoglikelihoodOnly,
                    (true, true, _) => LogprobProbe::Loglikelihood,
                    (true, false, true) => LogprobProbe::NextToken,
                    _ => LogprobProbe::None,
                };
                tokio::spawn(async move { check_endpoint(&client, &model, probe).await })
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
    let ok = checks.iter().all(EndpointCheck::ok) && runtimes_ok;
    if args.json {
        output::json(&json!({"endpoints": checks, "served": served, "runtimes": runtimes, "ok": ok}));
    } else {
        print_table(&checks);
    }
    Ok(Exit::failed_if(!ok))
}

/// The container runtime each group of container tasks needs: found, its version, and
/// whether it started a container (printed unless `json`).
fn runtime_checks(pipeline: &evalgrid::spec::Pipeline, json: bool) -> Vec<RuntimeCheck> {
    let checks: Vec<RuntimeCheck> = runtimes_needed(pipeline).into_iter().map(|(choice, tasks)| check_runtime(choice, tasks)).collect();
    if !json {
        for c in &checks {
            let found = match (&c.runtime, &c.version) {
                (Some(rt), Some(v)) => format!("{rt} {v} ({})", c.binary.as_deref().unwrap_or("?")),
                _ => "none found".to_owned(),
            };
            let n = c.tasks.len();
            let can = if c.can_run { "yes" } else { "NO" };
            output::line(&format!("container runtime (runtime: {}, {n} task(s)): {found}; can run a container: {can}", c.asked));
            for problem in &c.problems {
                output::line(&format!("problem: container runtime: {}", evalgrid::text::one_line(problem)));
            }
        }
    }
    checks
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

/// The pipeline's API models and the helper models its tasks call (a `qa` judge, the
/// Eleusis rule compiler), one per distinct (provider, model, base URL, key, api).
fn endpoints(pipeline: &evalgrid::spec::Pipeline) -> Vec<ModelConfig> {
    let mut out: Vec<ModelConfig> = Vec::new();
    let helpers =
        pipeline.tasks.iter().flat_map(|t| evalgrid::envs::registry::get(&t.benchmark).map(|b| b.helpers(&t.params)).unwrap_or_default()).map(|h| h.model);
    for model in pipeline.models.iter().cloned().chain(helpers) {
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
    output::line("model | protocol | reachable | key | answered as | context | streaming | tools | logprobs | url");
    for c in checks {
        let answered = match (&c.answered_model, &c.answered_as) {
            (Some(id), Some(class)) => format!("{} ({class})", evalgrid::text::one_line(id)),
            (None, Some(class)) => format!("– ({class})"),
            _ => "–".to_owned(),
        };
        output::line(&format!(
            "{} | {} | {} | {} | {answered} | {} | {} | {} | {} | {}",
            evalgrid::text::one_line(&c.model),
            c.protocol,
            if c.reachable { "yes" } else { "NO" },
            yes_no(c.key_accepted),
            c.context_window.map_or_else(|| "–".to_owned(), |n| format!("{n} tokens")),
            yes_no(c.streaming),
            c.tools.as_deref().unwrap_or("–"),
            if c.logprobs.is_empty() { "–" } else { c.logprobs.as_str() },
            evalgrid::text::one_line(&c.url),
        ));
    }
    for c in checks {
        for problem in &c.problems {
            output::line(&format!("problem: model `{}`: {}", evalgrid::text::one_line(&c.model), evalgrid::text::one_line(problem)));
        }
    }
    output::line(
        "logprobs: `next-token` serves `choice: {method: logprobs}`, `acc` and `acc_norm` (Chat Completions servers: OpenAI, vLLM, llama.cpp's llama-server; Gemini on some models); \
         Anthropic gives none, and evalgrid reads none from the Responses API; \
         `loglikelihood` (`method: loglikelihood`: each choice's whole continuation, lm-eval's scoring) needs an OpenAI-compatible `/v1/completions` that echoes the prompt's log-probabilities (vLLM; not llama-server: ggml-org/llama.cpp#27174)",
    );
    let bad = checks.iter().filter(|c| !c.ok()).count();
    output::line(&if bad == 0 {
        format!("{} endpoint(s) checked: all usable", checks.len())
    } else {
        format!("{} endpoint(s) checked: {bad} with a problem", checks.len())
    });
}
