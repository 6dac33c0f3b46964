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
