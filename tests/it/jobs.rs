//! `evalgrid slurm` and `evalgrid k8s`: one array / Indexed Job per resource class with the
//! shard count written out, GPUs only for the GPU class, a clean stop before the time limit,
//! and a report job after all of them. The Kubernetes manifests are parsed back as YAML
//! (no cluster here); Slurm submission is checked against a recording `sbatch`.

use serde_json::Value;

use crate::support::Workspace;

/// Cells of each class: a scripted model on Eleusis (cpu), an API model on Eleusis (api),
/// WeirdML (gpu).
const MIXED: &str = "name: mixed\nmodels:\n  - {id: s, provider: scripted, model: s, params: {file: replies.json}}\n  - {id: api, provider: openai, model: m, base_url: \"http://127.0.0.1:9/v1\"}\ntasks:\n  - {benchmark: eleusis, select: [only_aces], params: {compiler: {provider: openai, model: c, base_url: \"http://127.0.0.1:9/v1\"}}}\n  - {benchmark: weirdml, select: [mini-shapes], params: {iterations: 1}}\nseeds: [0]\n";

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("p.yaml", MIXED);
    ws.write("replies.json", "{\"default\": \"pass\"}");
    ws
}

#[test]
fn slurm_writes_one_array_per_class_and_a_dependent_report() {
    let ws = workspace();
    let out = ws.run(&["slurm", "p.yaml", "--shards", "4", "--time", "02:00:00", "--partition", "short", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let script = |class: &str| -> String {
        let start = text.find(&format!("/{class}.sbatch\n")).unwrap_or_else(|| panic!("no {class} script:\n{text}"));
        text[start..].split("\n\n").next().unwrap().to_owned()
    };
    for class in ["cpu", "api", "gpu"] {
        let s = script(class);
        assert!(s.contains("#SBATCH --array=0-3\n") && s.contains("#SBATCH --requeue") && s.contains("#SBATCH --partition=short"), "{s}");
        assert!(s.contains("#SBATCH --time=02:00:00") && s.contains("#SBATCH --signal=B:INT@900"), "{s}");
        assert!(s.contains(&format!("--class {class} --shard \"${{SLURM_ARRAY_TASK_ID}}/4\"")), "N is written out: {s}");
        assert!(s.contains(" --progress plain "), "the job log shows plain progress lines: {s}");
        assert_eq!(s.contains("--gres=gpu:1"), class == "gpu", "only the GPU class asks for a GPU: {s}");
    }
    let report = script("report");
    assert!(report.contains(" report ") && report.contains(" status ") && report.contains("--check"), "{report}");
    assert!(text.contains("sbatch --dependency=afterany:$CPU:$API:$GPU "), "the report waits for all three arrays: {text}");
}

#[test]
fn slurm_submits_the_arrays_then_the_report_after_all_of_them() {
    let ws = workspace();
    let bin = ws.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A recording sbatch: logs its arguments, answers a job id like `--parsable` does.
    let log = ws.path("sbatch.log");
    let fake = format!("#!/bin/sh\necho \"$*\" >> {}\nn=$(wc -l < {})\necho \"$((100 + n));cluster\"\n", log.display(), log.display());
    std::fs::write(bin.join("sbatch"), fake).unwrap();
    std::fs::set_permissions(bin.join("sbatch"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = ws.cmd().env("PATH", path).args(["slurm", "p.yaml", "--shards", "2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let calls: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(calls.len(), 4, "three arrays and the report: {calls:?}");
    assert!(calls[..3].iter().all(|c| c.starts_with("--parsable ") && c.ends_with(".sbatch")), "{calls:?}");
    assert!(calls[3].contains("--dependency=afterany:101:102:103") && calls[3].ends_with("report.sbatch"), "{calls:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "104", "prints the report job id");
    assert!(ws.path("evalgrid-jobs/mixed/gpu.sbatch").exists());
}

#[test]
fn k8s_writes_indexed_jobs_that_parse_and_ask_for_gpus_only_where_needed() {
    let ws = workspace();
    let out = ws.run(&["k8s", "p.yaml", "--shards", "3", "--image", "ghcr.io/example/evalgrid:0.1", "--secret", "model-keys"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for class in ["cpu", "api", "gpu"] {
        let text = std::fs::read_to_string(ws.path(&format!("evalgrid-jobs/mixed/{class}.yaml"))).unwrap();
        let job: Value = evalgrid::spec::yaml::parse(&text).unwrap_or_else(|e| panic!("{class}.yaml is not YAML: {e:?}\n{text}"));
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!(job["spec"]["completions"], 3);
        let container = &job["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "ghcr.io/example/evalgrid:0.1");
        let args: Vec<&str> = container["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(args.windows(2).any(|w| w == ["--shard", "$(JOB_COMPLETION_INDEX)/3"]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--class", class]), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--progress", "plain"]), "the pod log shows plain progress lines: {args:?}");
        assert_eq!(container["envFrom"][0]["secretRef"]["name"], "model-keys");
        let gpu = &container["resources"]["limits"]["nvidia.com/gpu"];
        assert_eq!(gpu.is_null(), class != "gpu", "{class}: {}", container["resources"]);
    }
    let report: Value = evalgrid::spec::yaml::parse(&std::fs::read_to_string(ws.path("evalgrid-jobs/mixed/report.yaml")).unwrap()).unwrap();
    let script = report["spec"]["template"]["spec"]["containers"][0]["args"][0].as_str().unwrap().to_owned();
    assert!(script.contains(" report ") && script.contains("status") && script.contains("--check"), "{script}");
}
