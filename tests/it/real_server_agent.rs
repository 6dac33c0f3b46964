//! Issue 47 item 5: the `terminal` agent on a real model. llama.cpp's own server (the rig of
//! `real_server.py`, `--jinja`) serves SmolLM2-135M-Instruct, LiteLLM's proxy speaks Gemini in
//! front of it, and one Harbor task (hello-world) runs in a real container through the agent on
//! all four protocols with native tool calls, and on Chat Completions with the text fallback.
//! Tools are offered natively on the four lanes (each endpoint takes them); SmolLM2's chat
//! template has no tool-call format and this llama.cpp build does not constrain `tools` output
//! without one, so the 135M model answers in text and its fenced `bash` blocks are what runs
//! (the native lane reads them as the text fallback does). A 135M model's reward may be 0; what must hold is that every trial is scored (no crash, no
//! errored trial), evalgrid's request count is the server's own, every command the model asked
//! for ran in the container, and every trajectory is complete (one turn per call, in order,
//! ended by a known outcome). Skipped, with a message, where the rig's packages, podman or the
//! offline base images are missing.

use serde_json::Value;

use crate::harbor::{copy_dir, no_containers};
use crate::real_server::{Rig, Started};
use crate::support::{Workspace, repo};

/// Enough context for a few turns of the agent's conversation (system prompt, tools, outputs).
const CTX_PER_SLOT: u32 = 4096;
const CELLS: [&str; 5] = ["chat", "chat-text", "responses", "messages", "gemini"];

fn pipeline(rig: &Rig) -> String {
    let llama = format!("http://127.0.0.1:{}", rig.llama);
    let params = "params: {max_tokens: 96, temperature: 0}";
    format!(
        "name: realagent
models:
  - {{id: chat, provider: openai, api: chat, model: smollm2, base_url: \"{llama}/v1\", {params}}}
  - {{id: chat-text, provider: openai, api: chat, model: smollm2, base_url: \"{llama}/v1\", {params}, agent: {{tools: false}}}}
  - {{id: responses, provider: openai, api: responses, model: smollm2, base_url: \"{llama}/v1\", {params}}}
  - {{id: messages, provider: anthropic, model: smollm2, base_url: \"{llama}\", {params}}}
  - {{id: gemini, provider: gemini, model: smollm2, base_url: \"http://127.0.0.1:{litellm}\", {params}}}
tasks:
  - benchmark: harbor
    params: {{path: tasks, environment: {{runtime: podman, pull: never}}}}
    agent: {{name: terminal, max_turns: 3, command_timeout_s: 20, max_output_kb: 4}}
seeds: [0]
",
        litellm = rig.litellm
    )
}

#[test]
fn the_terminal_agent_on_llama_cpp_over_all_four_protocols_and_the_text_fallback() {
    if let Some(why) = no_containers() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let ws = Workspace::new();
    let rig = match Rig::start_with(ws.dir.path(), CTX_PER_SLOT, true) {
        Started::Up(rig) => rig,
        Started::Skip(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    copy_dir(&repo().join("tests/fixtures/harbor/hello-world"), &ws.path("tasks/hello-world"));
    ws.write("p.yaml", &pipeline(&rig));
    let (before, _) = rig.counts();
    let out = ws.cmd().args(["run", "p.yaml", "--json", "--jobs", "1"]).output().expect("binary runs");
    let v: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (after, _) = rig.counts();
    let mut failed: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            eprintln!("FAILED CHECK: {what}");
            failed.push(what);
        }
    };
    check(out.status.success() && v["cells_failed"] == 0 && v["cells_run"] == 5, format!("every trial is scored: {v}\n{stderr}"));
    let requests = after - before;
    check(v["calls"]["http_attempts"] == requests, format!("evalgrid's count of requests is the server's ({requests}): {}", v["calls"]));
    let mut turns_in_all = 0;
    let mut native_calls = 0;
    let mut commands_run = 0;
    for cell in CELLS {
        let shown = ws.run(&["show", "p.yaml", &format!("{cell}/harbor/hello-world/0"), "--json"]);
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap_or(Value::Null);
        let log = &shown["episode"]["agent_log"];
        let turns = log["turns"].as_array().cloned().unwrap_or_default();
        turns_in_all += turns.len();
        let end = log["end"].as_str().unwrap_or_default().to_owned();
        check(["done", "max_turns", "context_exceeded"].contains(&end.as_str()), format!("{cell}: the agent phase ended by a known outcome: {end:?}"));
        check(
            !turns.is_empty() && (end != "max_turns" || turns.len() == 3),
            format!("{cell}: one turn per call up to max_turns: {} turn(s), ended {end}", turns.len()),
        );
        for (i, t) in turns.iter().enumerate() {
            check(t["turn"] == i + 1, format!("{cell}: turn {} is numbered {}", i + 1, t["turn"]));
            for c in t["calls"].as_array().into_iter().flatten() {
                if c["name"] == "bash" && c["arguments"]["command"].as_str().is_some_and(|s| !s.trim().is_empty()) {
                    check(c["run"].is_object(), format!("{cell} turn {}: the command {} ran in the container", i + 1, c["arguments"]["command"]));
                    commands_run += usize::from(c["run"].is_object());
                }
                native_calls += usize::from(t["native"] == true);
            }
        }
        check(shown["score"]["rewarded"] == true, format!("{cell}: the verifier gave a reward (0 or 1): {}", shown["score"]));
        if cell == "chat-text" {
            check(turns.iter().all(|t| t["native"] == false), format!("{cell}: the text fallback makes no native call"));
        }
    }
    check(turns_in_all == requests, format!("one turn per request the server took: {turns_in_all} turns, {requests} requests"));
    check(commands_run > 0, "some command the model wrote ran in the container".to_owned());
    eprintln!("real-server agent: {requests} requests, {turns_in_all} turns, {commands_run} command(s) run, {native_calls} of them native call(s)");
    assert!(failed.is_empty(), "{} check(s) failed against the real server:\n- {}", failed.len(), failed.join("\n- "));
}
