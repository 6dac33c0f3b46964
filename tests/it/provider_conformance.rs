//! Provider conformance (issue 13): requests reach exactly `base_url` + the protocol path
//! with the model entry's headers, whose secret values reach no artifact.

use evalgrid::providers::mock::MockConfig;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

const SECRET: &str = "hdr-value-SECRET-7731";

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes())) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn base_url_is_used_as_given_and_secret_headers_reach_no_artifact() {
    let mock = Mock::start(MockConfig { path_prefix: Some("/api/paas/v4".into()), ..MockConfig::default() });
    let base = format!("{}/api/paas/v4", mock.server().base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: endpoints\nmodels:\n  - id: glm\n    provider: openai\n    model: glm-4.7\n    base_url: \"{base}\"\n    headers:\n      X-Tenant: team-a\n      api-key: {{env: EVALGRID_TEST_HEADER}}\n    params: {{temperature: 0, max_tokens: 256}}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 2, retry_base_ms: 5, retry_max_ms: 20, request_timeout_s: 5}}\n"
        ),
    );
    let data = data_dir().to_str().unwrap().to_owned();
    let out = ws.cmd().env("EVALGRID_TEST_HEADER", SECRET).args(["--data-dir", &data, "run", "p.yaml", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let log = mock.server().request_log();
    assert!(!log.is_empty());
    for request in &log {
        assert_eq!(request.path, "/api/paas/v4/chat/completions");
        assert_eq!(request.headers.get("x-tenant").map(String::as_str), Some("team-a"));
        assert_eq!(request.headers.get("api-key").map(String::as_str), Some(SECRET));
        // Z.ai documents only `max_tokens`.
        assert_eq!(request.body["max_tokens"], 256);
        assert!(request.body.get("max_completion_tokens").is_none());
    }
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    let leaked = files_containing(ws.path(".").as_path(), SECRET);
    assert!(leaked.is_empty(), "secret header value stored in {leaked:?}");
    assert!(!files_containing(ws.path(".").as_path(), "team-a").is_empty(), "the literal header is keyed (stored in key components)");

    // A missing variable fails the calls with a clear message, never sends without it.
    let before = mock.server().calls();
    let ws2 = Workspace::new();
    ws2.write("p.yaml", &std::fs::read_to_string(ws.path("p.yaml")).unwrap());
    let out = ws2.cmd().env_remove("EVALGRID_TEST_HEADER").args(["--data-dir", &data, "run", "p.yaml", "--json"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("EVALGRID_TEST_HEADER"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(mock.server().calls(), before);
}

#[test]
fn a_credential_header_written_in_the_file_is_refused() {
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        "name: endpoints\nmodels:\n  - id: az\n    provider: openai\n    model: gpt-4.1\n    headers: {api-key: sk-literal-123}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {subset: mini}\nseeds: [0]\n",
    );
    let out = ws.cmd().args(["run", "p.yaml", "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("carries a credential") && stderr.contains("{env: VARIABLE}"), "{stderr}");
}

/// What one recorded body must parse to.
struct Expect {
    file: &'static str,
    kind: evalgrid::providers::ProviderKind,
    base: &'static str,
    text: &'static str,
    reasoning: Option<&'static str>,
    tools: &'static [&'static str],
    finish: &'static str,
    /// input, output (reasoning included), reasoning.
    usage: (u64, u64, u64),
}

#[test]
fn recorded_bodies_in_each_providers_documented_shape_parse_to_the_right_outcome() {
    use evalgrid::providers::mock::{MockOutcome, Script};
    use evalgrid::providers::{
        ClientConfig, Endpoint, ProviderClient,
        ProviderKind::{Anthropic, Gemini, OpenAi, OpenAiResponses},
        StreamMode,
    };
    let cases = [
        Expect {
            file: "openai_normal",
            kind: OpenAi,
            base: "",
            text: "Hello! How can I assist you today?",
            reasoning: None,
            tools: &[],
            finish: "stop",
            usage: (19, 10, 0),
        },
        Expect { file: "openai_reasoning", kind: OpenAi, base: "", text: "4", reasoning: None, tools: &[], finish: "stop", usage: (12, 210, 192) },
        Expect {
            file: "openai_tool_call",
            kind: OpenAi,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_current_weather"],
            finish: "tool_calls",
            usage: (82, 17, 0),
        },
        Expect { file: "openai_truncated", kind: OpenAi, base: "", text: "", reasoning: None, tools: &[], finish: "length", usage: (40, 64, 64) },
        Expect { file: "openai_refused", kind: OpenAi, base: "", text: "", reasoning: None, tools: &[], finish: "refusal", usage: (30, 10, 0) },
        Expect {
            file: "vllm_think_inline",
            kind: OpenAi,
            base: "/vllm/v1",
            text: "4",
            reasoning: Some("The user asks 2+2. I might write <TOOL>{\"name\":\"execute_python\"}</TOOL> but no need."),
            tools: &[],
            finish: "stop",
            usage: (14, 46, 0),
        },
        Expect {
            file: "vllm_reasoning_parser",
            kind: OpenAi,
            base: "/vllm/v1",
            text: "4",
            reasoning: Some("Simple arithmetic."),
            tools: &[],
            finish: "stop",
            usage: (70, 20, 0),
        },
        Expect {
            file: "llamacpp_think_cut",
            kind: OpenAi,
            base: "/llama/v1",
            text: "",
            reasoning: Some("Let me count the brackets one by one: ( [ {"),
            tools: &[],
            finish: "length",
            usage: (20, 32, 0),
        },
        Expect {
            file: "ollama_normal",
            kind: OpenAi,
            base: "/ollama/v1",
            text: "4",
            reasoning: Some("2 plus 2."),
            tools: &[],
            finish: "stop",
            usage: (15, 9, 0),
        },
        Expect {
            file: "deepseek_reasoner",
            kind: OpenAi,
            base: "/deepseek",
            text: "4",
            reasoning: Some("The user wants 2+2, which is 4."),
            tools: &[],
            finish: "stop",
            usage: (13, 30, 22),
        },
        Expect {
            file: "xai_reasoning",
            kind: OpenAi,
            base: "/xai/v1",
            text: "4",
            reasoning: Some("Adding two and two."),
            tools: &[],
            finish: "stop",
            usage: (32, 1499 + 2809, 2809),
        },
        Expect {
            file: "openrouter_cost",
            kind: OpenAi,
            base: "/api/v1",
            text: "4",
            reasoning: Some("Add the numbers."),
            tools: &[],
            finish: "stop",
            usage: (14, 75, 64),
        },
        Expect {
            file: "anthropic_thinking",
            kind: Anthropic,
            base: "",
            text: "4",
            reasoning: Some("2 and 2 make 4."),
            tools: &[],
            finish: "stop",
            usage: (20, 40, 0),
        },
        Expect {
            file: "anthropic_tool_use",
            kind: Anthropic,
            base: "",
            text: "I'll check the weather.",
            reasoning: None,
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (384, 86, 0),
        },
        Expect {
            file: "anthropic_truncated",
            kind: Anthropic,
            base: "",
            text: "",
            reasoning: Some("Long reasoning that ran out"),
            tools: &[],
            finish: "length",
            usage: (1050, 64000, 0),
        },
        Expect {
            file: "anthropic_context_exceeded",
            kind: Anthropic,
            base: "",
            text: "The partial ans",
            reasoning: None,
            tools: &[],
            finish: "length",
            usage: (199_000, 1000, 0),
        },
        Expect { file: "anthropic_refused", kind: Anthropic, base: "", text: "", reasoning: None, tools: &[], finish: "refusal", usage: (25, 0, 0) },
        Expect {
            file: "anthropic_thinking_tool_use",
            kind: Anthropic,
            base: "",
            text: "I can help you get the current weather information for Paris. Let me check that for you",
            reasoning: Some(
                "The user wants to know the current weather in Paris. I have access to a function `get_weather` that can provide this information. I'll call it with the location.",
            ),
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (402, 131, 58),
        },
        Expect {
            file: "anthropic_redacted_thinking",
            kind: Anthropic,
            base: "",
            text: "Based on my analysis...",
            reasoning: Some("Let me analyze this step by step..."),
            tools: &[],
            finish: "stop",
            usage: (96, 411, 0),
        },
        Expect {
            file: "gemini_thinking",
            kind: Gemini,
            base: "",
            text: "4",
            reasoning: Some("**Adding** two and two."),
            tools: &[],
            finish: "stop",
            usage: (10, 30, 29),
        },
        Expect {
            file: "gemini_function_call",
            kind: Gemini,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (50, 8, 0),
        },
        Expect {
            file: "gemini_truncated",
            kind: Gemini,
            base: "",
            text: "The list is: 1, 2,",
            reasoning: None,
            tools: &[],
            finish: "length",
            usage: (12, 106, 100),
        },
        Expect {
            file: "gemini_signed_parallel_calls",
            kind: Gemini,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_current_temperature", "get_current_temperature"],
            finish: "tool_calls",
            usage: (72, 142, 112),
        },
        Expect {
            file: "gemini_signed_text",
            kind: Gemini,
            base: "",
            text: "It is 18°C in Paris and 14°C in London, so Paris is warmer.",
            reasoning: Some("**Comparing temperatures** Paris is warmer."),
            tools: &[],
            finish: "stop",
            usage: (140, 61, 40),
        },
        Expect { file: "gemini_safety", kind: Gemini, base: "", text: "", reasoning: None, tools: &[], finish: "content_filter", usage: (20, 0, 0) },
        Expect { file: "gemini_malformed_call", kind: Gemini, base: "", text: "", reasoning: None, tools: &[], finish: "malformed", usage: (900, 0, 0) },
        // Streamed bodies (`.sse`: server-sent events as each API's streaming docs show them),
        // fetched with `stream: true`: they must parse exactly as their unstreamed twins.
        Expect {
            file: "openai_stream_normal",
            kind: OpenAi,
            base: "",
            text: "Hello! How can I assist you today?",
            reasoning: None,
            tools: &[],
            finish: "stop",
            usage: (19, 10, 0),
        },
        Expect {
            file: "openai_stream_tool_call",
            kind: OpenAi,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_current_weather"],
            finish: "tool_calls",
            usage: (82, 17, 0),
        },
        Expect {
            file: "openai_stream_truncated",
            kind: OpenAi,
            base: "",
            text: "The list: 1, 2,",
            reasoning: None,
            tools: &[],
            finish: "length",
            usage: (40, 64, 48),
        },
        Expect {
            file: "deepseek_stream_reasoner",
            kind: OpenAi,
            base: "/deepseek",
            text: "4",
            reasoning: Some("The user wants 2+2, which is 4."),
            tools: &[],
            finish: "stop",
            usage: (13, 30, 22),
        },
        Expect {
            file: "vllm_stream_reasoning",
            kind: OpenAi,
            base: "/vllm/v1",
            text: "4",
            reasoning: Some("Simple arithmetic."),
            tools: &[],
            finish: "stop",
            usage: (70, 20, 0),
        },
        Expect {
            file: "responses_stream_reasoning",
            kind: OpenAiResponses,
            base: "",
            text: "Paris.",
            reasoning: Some("France's capital is Paris."),
            tools: &[],
            finish: "stop",
            usage: (36, 87, 64),
        },
        Expect {
            file: "responses_stream_function_call",
            kind: OpenAiResponses,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (50, 30, 16),
        },
        Expect {
            file: "responses_stream_truncated",
            kind: OpenAiResponses,
            base: "",
            text: "",
            reasoning: None,
            tools: &[],
            finish: "length",
            usage: (40, 64, 64),
        },
        Expect { file: "anthropic_stream_normal", kind: Anthropic, base: "", text: "Hello!", reasoning: None, tools: &[], finish: "stop", usage: (25, 15, 0) },
        Expect {
            file: "anthropic_stream_thinking",
            kind: Anthropic,
            base: "",
            text: "4",
            reasoning: Some("2 and 2 make 4."),
            tools: &[],
            finish: "stop",
            usage: (20, 40, 0),
        },
        Expect {
            file: "anthropic_stream_tool_use",
            kind: Anthropic,
            base: "",
            text: "Okay, let's check the weather for San Francisco, CA:",
            reasoning: None,
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (472, 89, 0),
        },
        Expect {
            file: "anthropic_stream_truncated",
            kind: Anthropic,
            base: "",
            text: "",
            reasoning: Some("Long reasoning that ran out"),
            tools: &[],
            finish: "length",
            usage: (1050, 64000, 0),
        },
        Expect {
            file: "gemini_stream_thinking",
            kind: Gemini,
            base: "",
            text: "4",
            reasoning: Some("**Adding** two and two."),
            tools: &[],
            finish: "stop",
            usage: (10, 30, 29),
        },
        Expect {
            file: "gemini_stream_function_call",
            kind: Gemini,
            base: "",
            text: "",
            reasoning: None,
            tools: &["get_weather"],
            finish: "tool_calls",
            usage: (50, 8, 0),
        },
        Expect {
            file: "gemini_stream_truncated",
            kind: Gemini,
            base: "",
            text: "The list is: 1, 2,",
            reasoning: None,
            tools: &[],
            finish: "length",
            usage: (12, 106, 100),
        },
    ];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = ProviderClient::new(ClientConfig { use_system_proxy: false, ..ClientConfig::default() }).unwrap();
        let dir = crate::support::repo().join("tests/fixtures/providers");
        let recorded =
            std::fs::read_dir(&dir).unwrap().filter(|entry| entry.as_ref().unwrap().path().extension().is_some_and(|e| e == "json" || e == "sse")).count();
        assert_eq!(recorded, cases.len(), "every recorded body has its expectation");
        for case in &cases {
            let streamed = dir.join(format!("{}.sse", case.file)).exists();
            let body = std::fs::read_to_string(dir.join(format!("{}.{}", case.file, if streamed { "sse" } else { "json" }))).unwrap();
            let prefix = match (case.base, case.kind) {
                ("", Gemini) => "/v1beta".to_owned(),
                ("", _) => "/v1".to_owned(),
                (base, _) => base.to_owned(),
            };
            let outcome = if streamed { MockOutcome::RecordedStream { body } } else { MockOutcome::Recorded { status: 200, body } };
            let script = Script::Sequence(vec![outcome]);
            let server =
                evalgrid::providers::mock::MockServer::start(MockConfig { script, path_prefix: Some(prefix.clone()), ..MockConfig::default() }).await.unwrap();
            // xAI is recognised by host; the mock stands in for it on 127.0.0.1 through the
            // documented total_tokens arithmetic.
            let endpoint = Endpoint::new(case.kind, "m")
                .with_base_url(format!("{}{prefix}", server.base_url().trim_end_matches('/')))
                .with_stream(if streamed { StreamMode::On } else { StreamMode::Off });
            let request = evalgrid::providers::ChatRequest { messages: vec![evalgrid::providers::Message::user("What is 2+2?")], ..Default::default() };
            let response = client.call(&endpoint, &request).await.unwrap_or_else(|e| panic!("{}: {e}", case.file)).response;
            let name = case.file;
            assert_eq!(response.text, case.text, "{name}");
            assert_eq!(response.reasoning.as_deref(), case.reasoning, "{name}");
            assert_eq!(response.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), case.tools, "{name}");
            assert_eq!(response.finish_reason.class(), case.finish, "{name}");
            assert_eq!((response.usage.input, response.usage.output, response.usage.reasoning), case.usage, "{name}");
            assert_eq!(response.usage.cost, (name == "openrouter_cost").then_some(0.00076), "{name}");
            if streamed {
                assert_eq!(server.request_log()[0].body.get("stream").is_some(), case.kind != Gemini, "{name}: asked for a stream");
            }
            server.shutdown().await;
        }
    });
}

/// Signatures and opaque reasoning (Anthropic `signature` and `redacted_thinking`, Gemini
/// `thoughtSignature`, Responses `encrypted_content`) survive the folding of every recorded
/// stream, so a tool round can carry them back as it would after an unstreamed call.
#[test]
fn recorded_streams_keep_every_signature() {
    use evalgrid::providers::ProviderKind;
    use evalgrid::providers::stream::{assemble, events};
    fn opaque(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    let redacted = key == "data" && map.get("type").and_then(serde_json::Value::as_str) == Some("redacted_thinking");
                    match item.as_str() {
                        Some(text) if !text.is_empty() && (["signature", "thoughtSignature", "encrypted_content"].contains(&key.as_str()) || redacted) => {
                            out.push(text.to_owned());
                        }
                        _ => opaque(item, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| opaque(item, out)),
            _ => {}
        }
    }
    let dir = crate::support::repo().join("tests/fixtures/providers");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sse") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let kind = match name.split('_').next() {
            Some("anthropic") => ProviderKind::Anthropic,
            Some("gemini") => ProviderKind::Gemini,
            Some("responses") => ProviderKind::OpenAiResponses,
            _ => ProviderKind::OpenAi,
        };
        let bytes = std::fs::read(&path).unwrap();
        let mut sent = Vec::new();
        for event in events(&bytes).unwrap() {
            if let Ok(json) = serde_json::from_str(&event.data) {
                opaque(&json, &mut sent);
            }
        }
        let body = assemble(kind, &bytes).unwrap_or_else(|e| panic!("{name}: {e}")).to_string();
        for signature in &sent {
            assert!(body.contains(signature.as_str()), "{name}: `{signature}` lost");
        }
        checked += sent.len();
    }
    assert!(checked >= 6, "the fixtures carry signatures to check: {checked}");
}
