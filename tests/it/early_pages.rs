//! Transcript pages written while the run goes on (issue 35: the report at the end of a run
//! renders only the last cells' pages): a run against a slow mock, one cell at a time, writes
//! pages before its end, and every page is the bytes `evalgrid report` writes from the cache.

use std::process::Command;
use std::time::Duration;

use evalgrid::providers::mock::MockConfig;

use crate::providers::{Mock, data_dir};
use crate::support::{Workspace, snapshot_dir};

#[test]
fn pages_written_during_the_run_are_the_reports_own_bytes() {
    let mock = Mock::start(MockConfig { latency: Duration::from_millis(30), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: early\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages]\n    params: {{subset: mini}}\nseeds: [0, 1, 2, 3, 4]\ntransport: {{max_concurrency: 4}}\n",
            mock.url()
        ),
    );
    let out = Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env_remove("EVALGRID_CACHE")
        .env("EVALGRID_NO_PROGRESS", "1")
        .env("EVALGRID_LOG", "warn,evalgrid=debug")
        .args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "-j", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let early: usize = stderr
        .lines()
        .find_map(|l| l.split(" transcript page(s) written while the run went on").next().filter(|_| l.contains("written while the run")))
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the run says how many pages it wrote early:\n{stderr}"));
    let pages = ws.path("reports/early/transcripts");
    let during = snapshot_dir(&pages);
    assert_eq!(during.len(), 10, "one page a cell");
    // Ten cells one after another, each waiting on its calls: the idle CPU between them
    // writes pages long before the last cell is done.
    assert!(early >= 1, "pages were written while the run went on: {early}");
    // From the cache alone, every page is rendered again: the same bytes.
    std::fs::remove_dir_all(ws.path("reports")).unwrap();
    let out = ws.run(&["--data-dir", data_dir().to_str().unwrap(), "report", "p.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(snapshot_dir(&pages), during, "the report's own pages are the ones written during the run");
}
