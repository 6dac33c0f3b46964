//! Rate limits against an independent server: nginx `limit_req` (40 requests/s, no burst,
//! 429 with `Retry-After: 1` above that) in front of the mock at 50 ms latency. Counts come
//! from nginx's own access log, not from evalgrid. Skipped (with a message) without nginx.

use std::time::Duration;

use evalgrid::providers::RateLimitedProxy;
use evalgrid::providers::mock::{MockConfig, MockServer};

use crate::providers::{cached_call_bodies, data_dir};
use crate::support::Workspace;

/// One `evalgrid run` of BBEH's linguini and boardgame_qa (400 items, 6 of them repeating
/// an earlier prompt; the opening burst alone draws about 19 429s) against 40 requests/s: every item answered in one run, at most 10 % of the
/// requests answered 429, and each distinct prompt requested once (single-flight).
#[test]
fn one_run_finishes_under_a_rate_limit_with_few_429s_and_no_duplicate_requests() {
    if !RateLimitedProxy::nginx_available() {
        println!("SKIPPED: nginx is not installed (apt-get install -y nginx); the rate-limit test needs it");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mock = runtime.block_on(MockServer::start(MockConfig { latency: Duration::from_millis(50), ..MockConfig::default() })).unwrap();
    let upstream = mock.base_url().trim_end_matches('/').trim_start_matches("http://").to_owned();
    let proxy = RateLimitedProxy::start(&upstream, 40).unwrap();
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: rate-limited\nmodels:\n  - {{id: limited, provider: openai, model: mock-limited, base_url: \"{}/v1\"}}\ntasks:\n  - {{benchmark: bbeh, select: [linguini, boardgame_qa]}}\nseeds: [0]\n",
            proxy.base_url()
        ),
    );
    let (code, v) = ws.run_json(&["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]);
    let statuses = proxy.status_counts();
    drop(proxy);
    runtime.block_on(mock.shutdown());
    assert_eq!(code, 0, "one run finishes: {v}");
    assert_eq!((v["cells_run"].as_u64(), v["cells_failed"].as_u64()), (Some(2), Some(0)), "{v}");
    let answered = statuses.get(&200).copied().unwrap_or(0);
    let limited = statuses.get(&429).copied().unwrap_or(0);
    let requests: u64 = statuses.values().sum();
    assert_eq!(requests, answered + limited, "only 200s and 429s: {statuses:?}");
    assert!(limited * 10 <= requests, "{limited} of {requests} requests were answered 429 (goal ≤ 10 %)");
    assert_eq!(v["calls"]["rate_limited"].as_u64(), Some(limited), "evalgrid counts the 429s nginx sent");
    // 400 items, 394 distinct prompts: each distinct prompt was requested once; the 6
    // repeats waited for the first and read its cache entry.
    let distinct = cached_call_bodies(&ws.path("cache")).len() as u64;
    assert_eq!(distinct, 394, "linguini has 6 repeated prompts");
    assert_eq!(answered, distinct, "identical calls in flight made one request each: {statuses:?}");
    assert_eq!(v["calls"]["live"].as_u64(), Some(394), "{v}");
    assert_eq!(v["calls"]["cached"].as_u64().unwrap() + v["calls"]["shared"].as_u64().unwrap(), 6, "{v}");
}
