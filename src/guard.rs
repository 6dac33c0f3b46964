//! Source guards' one walker: the layering tests (no benchmark named outside `envs/` and
//! `cli/`, no provider kind matched outside `providers/registry.rs`, no OS call outside
//! `platform/`) read the tree the same way, so they cannot drift apart.

use std::path::Path;

/// One line of source, for a guard's report.
#[derive(Debug, Clone)]
pub(crate) struct SourceLine {
    /// Path relative to the folder walked (`providers/client.rs`).
    pub file: String,
    /// 1-based line number.
    pub number: usize,
    /// The line, leading whitespace removed.
    pub text: String,
}

impl std::fmt::Display for SourceLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.number, self.text)
    }
}

/// Every production line of the `.rs` files under `dir`: comment lines, test files
/// (`tests.rs`, `tests/` folders) and everything after a file's first `#[cfg(test)]` are left
/// out, as are the folders (relative to `dir`) in `skip`.
pub(crate) fn production_lines(dir: &Path, skip: &[&str]) -> Vec<SourceLine> {
    walk(dir, skip, false)
}

/// Every non-comment line of the `.rs` files under `dir`, test code included.
pub(crate) fn all_lines(dir: &Path, skip: &[&str]) -> Vec<SourceLine> {
    walk(dir, skip, true)
}

fn walk(dir: &Path, skip: &[&str], tests: bool) -> Vec<SourceLine> {
    let mut lines = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().map(|entry| entry.path()).collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
            if path.is_dir() {
                if !skip.contains(&rel.as_str()) && (tests || path.file_name().is_some_and(|n| n != "tests")) {
                    stack.push(path);
                }
                continue;
            }
            if !rel.ends_with(".rs") || (!tests && rel.ends_with("tests.rs")) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = if tests { text.as_str() } else { text.split("#[cfg(test)]").next().unwrap_or_default() };
            for (n, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if !line.starts_with("//") {
                    lines.push(SourceLine { file: rel.clone(), number: n + 1, text: line.to_owned() });
                }
            }
        }
    }
    lines
}
