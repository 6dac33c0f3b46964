//! A throwaway workspace with its own cache and reports, and a runner for
//! the real binary.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// A temp folder holding `cache/`, `reports/` and pipeline files.
pub(crate) struct Workspace {
    pub(crate) dir: tempfile::TempDir,
}

impl Workspace {
    pub(crate) fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("temp dir") }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a file relative to the workspace and returns its path.
    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::write(&p, text).expect("write file");
        p
    }

    /// Copies the repository's quickstart pipeline into the workspace.
    pub(crate) fn quickstart(&self) -> PathBuf {
        let text = std::fs::read_to_string(repo().join("pipelines/quickstart.yaml")).expect("quickstart exists");
        self.write("quickstart.yaml", &text)
    }

    /// `evalgrid <args>` run inside the workspace.
    pub(crate) fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("evalgrid").expect("binary built");
        c.current_dir(self.dir.path()).env_remove("EVALGRID_CACHE").env("EVALGRID_NO_PROGRESS", "1");
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("binary runs")
    }

    /// Runs and parses the single JSON object printed on stdout.
    pub(crate) fn run_json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let out = self.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap_or(-1), v)
    }
}

/// The rows of `reports/<report>/items.csv` (a simple CSV: no quoted commas), by column.
pub(crate) fn items_csv(ws: &Workspace, report: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(ws.path(&format!("reports/{report}/items.csv"))).unwrap();
    let header: Vec<String> = text.lines().next().unwrap().split(',').map(str::to_owned).collect();
    text.lines().skip(1).map(|l| header.iter().cloned().zip(l.split(',').map(str::to_owned)).collect()).collect()
}

/// Repository root.
pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` with its bytes, sorted by path.
pub(crate) fn snapshot_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readable dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("under dir").display().to_string();
                out.push((rel, std::fs::read(&p).expect("readable file")));
            }
        }
    }
    out.sort();
    out
}

/// Asserts two folders hold the same files with the same bytes, naming the paths that differ.
pub(crate) fn assert_same_files(got: &Path, want: &Path) {
    let (got, want) = (snapshot_dir(got), snapshot_dir(want));
    if got == want {
        return;
    }
    let names = |files: &[(String, Vec<u8>)]| files.iter().map(|(n, _)| n.clone()).collect::<std::collections::BTreeSet<_>>();
    let (got_names, want_names) = (names(&got), names(&want));
    let want_bytes: std::collections::BTreeMap<_, _> = want.iter().cloned().collect();
    let differing: Vec<&String> = got.iter().filter(|(n, b)| want_bytes.get(n).is_some_and(|w| w != b)).map(|(n, _)| n).collect();
    panic!(
        "the folders differ: only in the first {:?}; only in the second {:?}; different bytes {differing:?}",
        got_names.difference(&want_names).collect::<Vec<_>>(),
        want_names.difference(&got_names).collect::<Vec<_>>(),
    );
}
