//! Integration tests: drive the `evalgrid` binary the way a user does.

// Helpers: temp workspaces and running the binary.
mod support;
// The quickstart grid: run, cached rerun, edits, status reasons.
mod quickstart;
// `status` reading cache buckets whole still sees entries removed or added behind its back.
mod status_listing;
// Crash safety: kill -9 mid-run, then resume.
mod crash;
// Malformed pipelines: exit 2 with file:line:col, never a panic.
mod spec_errors;
// Cache maintenance commands.
mod cache_cmd;
// Containers (podman/docker) through the binary: images cache gc drops (skipped without podman).
mod containers;
// Model providers against the mock server: faults, kills, keys.
mod providers;
// BBEH: dataset pins, random baseline, rescoring.
mod bbeh;
// Benchmark tools: Eleusis import, BBQ-Bench calls and baselines.
mod tools;
// WeirdML: scripted episodes in the sandbox.
mod weirdml;
// WeirdML time horizons of the pipeline's own runs in its report (`report.weirdml`).
mod weirdml_horizon;
// Eleusis with an API player and rule compiler against the mock.
mod eleusis_llm;
// BBQ-Bench with a scripted API model against the mock: the exact record.
mod bbq_llm;
// The HTML report in headless Chromium (skipped without `chromium`).
mod html_report;
// Hostile model-written code against the sandbox; the sandbox opt-out.
mod hostile;
// Hostile WeirdML submissions and BBQ-Bench execute_python runs through the binary.
mod hostile_submissions;
// Model outcomes (truncated, empty, filtered, refused) are scored; incomplete aggregates.
mod outcomes;
// Ctrl-C against a stalled provider; resume pays only the unanswered calls.
mod interrupt;
// Batch mode against a Python mock of the OpenAI Batch API: paid once, kills, expiry (issue 33).
mod batch;
// The batch ledger under kill -9 during create, damaged records, 404s, duplicate lines (issue 45).
mod batch_ledger;
mod batch_providers;
// Ctrl-C during background-mode calls; the rerun polls the responses instead of POSTing again.
mod background_resume;
// Rate limits against nginx limit_req: pacing, 429 share, single-flight (skipped without nginx).
mod rate_limits;
// The toy benchmark (docs/adding-a-benchmark.md) end to end.
mod guess;
// Harbor task folders in real containers, oracle and nop (skipped without podman).
mod harbor;
// Tasks declared in files (`qa`): example pipeline, item-precise reruns, located bad input.
mod datasets_fetch;
// Bounds on what a pipeline author writes: fuel, regular files, Parquet binary, names, BOM, umask.
mod bounds;
mod evalyaml;
mod qa;
// An answer that forges the judge prompt's structure is not graded correct (issue 45 item 4).
mod judge_injection;
// The `qa` scorers against Inspect AI's own, item by item (skipped without inspect_ai).
mod qa_images;
mod qa_inspect;
// `choice: {method: logprobs}`, `acc`, `acc_norm` against recorded logprobs shapes; refusals.
mod qa_logprobs;
// lm-eval task files as qa tasks, against lm-eval's own ConfigurableTask (skipped without it).
mod qa_lm_eval;
mod qa_loglikelihood;
// Issue 48's smaller `qa` surprises: diff rows, show as sent, empty filters, every bad row.
mod qa_surprises;
// Shards and resource classes: disjoint parts, one report from the shared cache.
mod shards;
// Slurm job arrays and Kubernetes Indexed Jobs per resource class.
mod jobs;
// One cache on S3-compatible storage (moto; skipped without it), and the start-up probe.
mod s3_cache;
// Provider conformance: endpoints as given, headers, recorded response shapes.
mod provider_conformance;
// Real single-node Slurm (skipped without one): arrays, report job, equal report.
mod slurm;
// The OpenAI Responses API: a BBQ-Bench episode over it reaches the Chat Completions record.
mod responses_api;
// Streaming through the binary: a stalled stream retried and logged; keys shared with unstreamed calls.
mod streaming;

// Damaged cache entries, blobs and failure records are misses, never a stop (issue 21).
mod damaged_cache;
// Two processes on one cache, and a full cache disk (issue 21).
mod cache_pressure;
// Terminal output: outside text escaped, `--json` always one object, log lines on request.
mod terminal;
// Scratch folders: none left by a clean run; a killed run's removed by the next (issue 21).
mod scratch;
// Where bubblewrap cannot run: API and built-in benchmarks run, model code stops first (issue 26).
mod platform;
// Statistics (issue 24): items.csv, clustered SEs, paired comparisons, checked by scipy/statsmodels.
mod statistics;
// `evalgrid show` of a benchmark without its own transcript reads as an outline.
mod show_readable;
// WeirdML's published results and time horizons imported and reproduced.
mod weirdml_import;
// A prompt longer than the model's context: scored as `context_exceeded`, asked again on request.
mod context_exceeded;
// A failure every call would hit stops that model early; a local server's model file is that model.
mod fail_fast;
// `evalgrid check`: one small request per model endpoint.
mod check;
// A real inference server (llama.cpp + SmolLM2, LiteLLM for Gemini): every benchmark, four protocols (issue 23).
mod real_server;
mod real_server_agent;
// `serve:` model entries: llama.cpp started, keyed by its weights, stopped (skipped without xllamacpp).
mod serve;
// Stale weights or templates never answer: a fake llama-server, replaced bytes, `cache verify --weights` (issue 45 item 5).
mod stale_weights;
// Progress without a terminal: plain lines at each 10 % of cells and on a timer (issue 34).
mod early_pages;
mod progress_log;
// Item pages driven in headless Chromium (issue 34.1).
mod items_pages;
// `evalgrid diff` against the previous run or another cache (issue 34.2).
mod diff;
// `evalgrid export --format inspect|eee`, read back by Inspect AI and the EEE schemas (issue 34).
mod export;
// A hard budget (issue 33 item 4): calls stop before the spend passes it, cells left missing, exit 3.
mod budget;
// `run --dry-run` estimates each model's cost, measured on a pilot's cached answers (issue 33 item 5).
mod estimate;
// A server's slots (`/props`) cap its lane; a stream's first byte is not a stall (issue 35).
mod slots;
// The slot cap against the real llama.cpp server (ignored: minutes; run with --ignored).
mod harbor_agent;
mod real_server_slots;
