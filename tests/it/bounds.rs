//! Bounds on what a pipeline author can write (issue 45, items 7 and 9): a runaway template
//! ends in a located error, a template file or dataset must be a regular file of bounded size
//! (no hang on a FIFO, no endless read of the zero device), Parquet binary cells are text or
//! refused, a pipeline name is one folder name, a BOM or CR-only lines are read, and the
//! files written follow the user's umask.

use std::path::Path;
use std::process::Output;

use crate::support::Workspace;

const OK: &str = "{\"input\": \"4\", \"target\": \"4\"}\n{\"input\": \"5\", \"target\": \"5\"}\n";

/// A one-task `qa` pipeline `p.yaml` over `dataset` with an `echo` model (it answers the
/// question), plus `extra` lines of params.
fn pipeline(ws: &Workspace, name: &str, dataset: &str, extra: &str) {
    ws.write(
        "p.yaml",
        &format!(
            "name: {name}\nmodels:\n  - {{id: e, provider: builtin, model: echo}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: {dataset}\n      scorers: [match]\n{extra}seeds: [0]\n"
        ),
    );
}

/// Runs `validate` and `run` on `p.yaml`: each must exit 2 with `want` in its error.
fn refused(ws: &Workspace, want: &[&str]) {
    for cmd in ["validate", "run"] {
        let out = ws.run(&[cmd, "p.yaml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        for w in want {
            assert!(err.contains(w), "{cmd}: want `{w}` in:\n{err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_runaway_template_ends_in_an_error_at_the_template() {
    let ws = Workspace::new();
    ws.write("d.jsonl", OK);
    // A loop of 1e10 steps: before fuel, it ran for minutes.
    pipeline(&ws, "t", "d.jsonl", "      template: \"{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}\"\n");
    refused(&ws, &["p.yaml:9:17", "template: the template ran out of fuel", "d.jsonl:1"]);
    // Ten 100 MB strings: before, the process aborted out of memory.
    pipeline(&ws, "t", "d.jsonl", "      template: \"{% for i in range(10) %}{{ input * 100000000 }}{% endfor %}\"\n");
    refused(&ws, &["p.yaml:9:17", "ran out of fuel"]);
    // The same from a system prompt, shown at `system`.
    pipeline(&ws, "t", "d.jsonl", "      system: \"{% set s = 'x' * 1000000000 %}{{ s }}\"\n");
    refused(&ws, &["p.yaml:9:15", "system: the template ran out of fuel"]);
    // And from a template file, shown at `template_file`.
    ws.write("t.j2", "{% for i in range(100000) %}{% for j in range(100000) %}.{% endfor %}{% endfor %}");
    pipeline(&ws, "t", "d.jsonl", "      template_file: t.j2\n");
    refused(&ws, &["p.yaml:9:22", "ran out of fuel"]);
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn template_files_and_datasets_must_be_regular_files_of_bounded_size() {
    let ws = Workspace::new();
    ws.write("d.jsonl", OK);
    // The zero device: before, memory grew at 150 MB/s.
    pipeline(&ws, "t", "d.jsonl", "      template_file: /dev/zero\n");
    refused(&ws, &["p.yaml:9:22", "`/dev/zero`: is not a regular file"]);
    // A FIFO no one writes to: before, `validate` blocked for ever.
    mkfifo(&ws.path("t.fifo"));
    pipeline(&ws, "t", "d.jsonl", "      template_file: t.fifo\n");
    refused(&ws, &["p.yaml:9:22", "`t.fifo`: is not a regular file"]);
    std::fs::create_dir(ws.path("tdir")).unwrap();
    pipeline(&ws, "t", "d.jsonl", "      template_file: tdir\n");
    refused(&ws, &["`tdir`: is a folder"]);
    ws.write("big.j2", &"x".repeat((1 << 20) + 1));
    pipeline(&ws, "t", "d.jsonl", "      template_file: big.j2\n");
    refused(&ws, &["`big.j2`: is 1048577 bytes, more than the 1048576 bytes"]);

    // Datasets: a `.jsonl` name on the zero device, a FIFO, a folder.
    std::os::unix::fs::symlink("/dev/zero", ws.path("zero.jsonl")).unwrap();
    pipeline(&ws, "t", "zero.jsonl", "");
    refused(&ws, &["p.yaml:7:16", "zero.jsonl: is not a regular file"]);
    mkfifo(&ws.path("fifo.csv"));
    pipeline(&ws, "t", "fifo.csv", "");
    refused(&ws, &["fifo.csv: is not a regular file"]);
    std::fs::create_dir(ws.path("dir.parquet")).unwrap();
    pipeline(&ws, "t", "dir.parquet", "");
    refused(&ws, &["dir.parquet: is a folder"]);
    // Few-shot examples are datasets too.
    pipeline(&ws, "t", "d.jsonl", "      fewshot: {from: fifo.csv, n: 1}\n");
    refused(&ws, &["fifo.csv: is not a regular file"]);
}

fn write_parquet(path: &Path, inputs: &[&[u8]]) {
    use polars::prelude::{Column, DataFrame, ParquetWriter};
    let targets: Vec<String> = inputs.iter().map(|i| String::from_utf8_lossy(i).into_owned()).collect();
    let mut frame = DataFrame::new_infer_height(vec![Column::new("input".into(), inputs), Column::new("target".into(), targets)]).unwrap();
    ParquetWriter::new(std::fs::File::create(path).unwrap()).finish(&mut frame).unwrap();
}

#[test]
fn parquet_binary_cells_are_their_text_or_a_located_error() {
    let ws = Workspace::new();
    // Valid UTF-8 in a binary column: the model sees the text (the echo model answers it, so
    // it matches the target), never `b"4"`.
    write_parquet(&ws.path("text.parquet"), &[b"4", "caf\u{e9}".as_bytes()]);
    pipeline(&ws, "bin", "text.parquet", "");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/bin/items.csv")).unwrap();
    assert_eq!(items.lines().filter(|l| l.ends_with(",1.0")).count(), 2, "{items}");
    // Bytes that are not text: refused at their row and column.
    write_parquet(&ws.path("bytes.parquet"), &[b"4", b"\xff\xfe"]);
    pipeline(&ws, "bin", "bytes.parquet", "");
    refused(&ws, &["bytes.parquet:row 1: column `input`: a binary value that is not UTF-8 text"]);
}

#[test]
fn a_pipeline_name_must_be_one_folder_name() {
    let ws = Workspace::new();
    ws.write("d.jsonl", OK);
    for name in ["..", "."] {
        pipeline(&ws, name, "d.jsonl", "");
        refused(&ws, &["p.yaml:1:7", &format!("pipeline name `{name}` is not a folder name")]);
    }
    assert!(!ws.path("summary.csv").exists() && !ws.path("reports/summary.csv").exists(), "no report outside its folder");
    pipeline(&ws, "ok", "d.jsonl", "      name: ..\n");
    refused(&ws, &["p.yaml:9:13", "`name` must be one path segment"]);
}

#[test]
fn a_bom_and_cr_only_lines_are_read() {
    let ws = Workspace::new();
    std::fs::write(ws.path("bom.jsonl"), format!("\u{feff}{OK}")).unwrap();
    pipeline(&ws, "bom", "bom.jsonl", "");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/bom/items.csv")).unwrap();
    assert_eq!(items.lines().filter(|l| l.ends_with(",1.0")).count(), 2, "{items}");
    // A CSV from an old spreadsheet: lines end in a lone CR, and a BOM before the header.
    std::fs::write(ws.path("cr.csv"), "\u{feff}input,target\r4,4\r5,5\r6,6\r").unwrap();
    pipeline(&ws, "cr", "cr.csv", "");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/cr/items.csv")).unwrap();
    assert_eq!(items.lines().filter(|l| l.ends_with(",1.0")).count(), 3, "{items}");
}

/// `evalgrid <args>` under `umask`, in the workspace.
#[cfg(unix)]
fn run_with_umask(ws: &Workspace, umask: &str, args: &[&str]) -> Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(assert_cmd::cargo::cargo_bin("evalgrid"))
        .args(args)
        .current_dir(ws.dir.path())
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .output()
        .unwrap()
}

/// Every file under `dir`, with its permission bits.
#[cfg(unix)]
fn modes(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            out.extend(modes(&entry.path()));
        } else {
            out.push((entry.path().display().to_string(), meta.permissions().mode() & 0o777));
        }
    }
    out
}

#[cfg(unix)]
#[test]
fn report_and_export_files_follow_the_umask() {
    let ws = Workspace::new();
    ws.write("d.jsonl", OK);
    for (umask, want) in [("022", 0o644), ("027", 0o640)] {
        pipeline(&ws, &format!("m{umask}"), "d.jsonl", "");
        let out = run_with_umask(&ws, umask, &["run", "p.yaml"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = run_with_umask(&ws, umask, &["export", "p.yaml", "--format", "inspect", "--out", &format!("x{umask}")]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for dir in [format!("reports/m{umask}"), format!("x{umask}")] {
            let files = modes(&ws.path(&dir));
            assert!(!files.is_empty(), "{dir}");
            assert!(files.iter().all(|(_, mode)| *mode == want), "umask {umask}: want {want:o} for every file: {files:?}");
        }
    }
}
