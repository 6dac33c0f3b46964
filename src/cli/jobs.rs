//! `evalgrid slurm` and `evalgrid k8s`: evalgrid runs as ordinary jobs of the cluster's
//! own engine. One job array (Slurm) or Indexed Job (Kubernetes) per resource class, each
//! task running `evalgrid run P --class C --shard i/N` with N written out (never read from
//! the array size), then one report job after all of them. The shared cache coordinates;
//! there is no evalgrid service.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use evalgrid::envs::Registry;
use evalgrid::plan::{ResourceClass, plan};
use evalgrid::spec::{Pipeline, Weights};

use super::args::{JobArgs, K8sArgs, SlurmArgs};
use super::exit::Exit;
use super::{Env, Failure, load_spec, output};

/// Seconds before the time limit a Slurm task gets SIGINT: more than one 600 s attempt or
/// submission, so a task stops cleanly and what it finished is in the cache.
const STOP_BEFORE_LIMIT_S: u32 = 900;

/// What every generated job needs: absolute paths, since jobs start elsewhere.
struct Context {
    exe: PathBuf,
    pipeline: PathBuf,
    cache: PathBuf,
    /// The shared cache (`--cache s3://…`), passed on so every task uses it.
    cache_url: Option<String>,
    data: PathBuf,
    name: String,
    classes: BTreeMap<ResourceClass, usize>,
    /// The most GPUs a served model of each class asks for (`serve.gpus`).
    served_gpus: BTreeMap<ResourceClass, u32>,
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Quotes a word for `sh` (single quotes, `'` escaped).
fn sh(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:,@%+".contains(c)) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn context(env: &Env, job: &JobArgs) -> Result<(Pipeline, Context), Failure> {
    if job.shards == 0 {
        return Err(Failure::invalid(anyhow::anyhow!("--shards must be at least 1")));
    }
    let pipeline = load_spec(env, &job.pipeline)?;
    let mut classes = BTreeMap::new();
    let mut served_gpus: BTreeMap<ResourceClass, u32> = BTreeMap::new();
    for c in plan(&pipeline, None).cells {
        let model = &pipeline.models[c.model];
        let class = Registry::resource_class(&pipeline.tasks[c.task].benchmark, model);
        if job.classes.is_empty() || job.classes.contains(&class) {
            *classes.entry(class).or_insert(0) += 1;
            if let Some(serve) = &model.serve {
                let most = served_gpus.entry(class).or_insert(0);
                *most = (*most).max(serve.gpus);
            }
        }
    }
    if classes.is_empty() {
        return Err(Failure::invalid(anyhow::anyhow!("no cells of the requested classes in {}", job.pipeline.display())));
    }
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find the evalgrid binary: {e}"))?;
    let ctx = Context {
        exe,
        // As given: Slurm starts each job in the directory `sbatch` ran in (this one), and
        // the path shows in the report's provenance, which should match a local run's.
        pipeline: job.pipeline.clone(),
        cache: absolute(&env.cache_dir),
        cache_url: env.cache_url.clone(),
        data: absolute(env.registry.data_dir()),
        name: pipeline.name.clone(),
        classes,
        served_gpus,
    };
    Ok((pipeline, ctx))
}

/// `evalgrid --cache-dir C --data-dir D <args>` with absolute paths.
fn command(ctx: &Context, args: &[&str]) -> Vec<String> {
    let mut out =
        vec![ctx.exe.display().to_string(), "--cache-dir".into(), ctx.cache.display().to_string(), "--data-dir".into(), ctx.data.display().to_string()];
    if let Some(url) = &ctx.cache_url {
        out.extend(["--cache".to_owned(), url.clone()]);
    }
    out.extend(args.iter().map(|a| (*a).to_owned()));
    out
}

fn slurm_array(ctx: &Context, a: &SlurmArgs, cpus: Option<u32>, class: ResourceClass) -> String {
    let n = a.job.shards;
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name=eg-{}-{class}", ctx.name);
    let _ = writeln!(s, "#SBATCH --array=0-{}", n - 1);
    if let Some(cpus) = cpus {
        let _ = writeln!(s, "#SBATCH --cpus-per-task={cpus}");
    }
    if class == ResourceClass::Gpu {
        // Each task starts its own servers: the GPUs the largest one names.
        let gpus = ctx.served_gpus.get(&class).copied().unwrap_or(0).max(a.gpus_per_task);
        let _ = writeln!(s, "#SBATCH --gres=gpu:{gpus}");
    }
    if let Some(p) = &a.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    if let Some(t) = &a.time {
        let _ = writeln!(s, "#SBATCH --time={t}");
        // SIGINT to the job step before the limit: evalgrid stops like on Ctrl-C (exit 130)
        // and everything answered is already in the cache.
        let _ = writeln!(s, "#SBATCH --signal=B:INT@{STOP_BEFORE_LIMIT_S}");
    }
    let _ = writeln!(s, "#SBATCH --requeue");
    let _ = writeln!(s, "#SBATCH --output=evalgrid-logs/%x-%A_%a.out");
    let _ = writeln!(s, "export EVALGRID_NO_PROGRESS=1");
    let shard = format!("${{SLURM_ARRAY_TASK_ID}}/{n}");
    let mut cmd: Vec<String> = command(ctx, &["run"]).into_iter().map(|w| sh(&w)).collect();
    cmd.extend([
        sh(&ctx.pipeline.display().to_string()),
        "--class".into(),
        class.to_string(),
        "--shard".into(),
        format!("\"{shard}\""),
        "--progress".into(),
        "plain".into(),
        "--json".into(),
    ]);
    let _ = writeln!(s, "exec {}", cmd.join(" "));
    s
}

fn slurm_report(ctx: &Context, a: &SlurmArgs, cpus: Option<u32>) -> String {
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name=eg-{}-report", ctx.name);
    if let Some(cpus) = cpus {
        let _ = writeln!(s, "#SBATCH --cpus-per-task={cpus}");
    }
    if let Some(p) = &a.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    let _ = writeln!(s, "#SBATCH --output=evalgrid-logs/%x-%j.out");
    let _ = writeln!(s, "export EVALGRID_NO_PROGRESS=1");
    let pipeline = sh(&ctx.pipeline.display().to_string());
    let report: Vec<String> = command(ctx, &["report"]).into_iter().map(|w| sh(&w)).collect();
    let status: Vec<String> = command(ctx, &["status"]).into_iter().map(|w| sh(&w)).collect();
    let _ = writeln!(s, "{} {pipeline}", report.join(" "));
    // The job passes only when every cell has a result.
    let _ = writeln!(s, "exec {} {pipeline} --check", status.join(" "));
    s
}

/// Writes (and unless `--dry-run`, submits) the arrays and the report job.
/// Where each served model's weights must be for the jobs, said before they are written:
/// found here (on a shared or a local filesystem), or not here, which evalgrid cannot check.
fn weights_notes(pipeline: &Pipeline, kubernetes: bool) {
    for model in &pipeline.models {
        let Some(serve) = &model.serve else { continue };
        let id = evalgrid::text::one_line(&model.id).into_owned();
        let note = match &serve.weights {
            Weights::Hub(name) => format!("note: model `{id}`: every shard's {} downloads `{name}` itself (keyed by the id, not hashed)", serve.engine),
            Weights::Local(path) if kubernetes => format!(
                "note: model `{id}`: cannot check from here that `{}` exists inside the pods: mount it there at that path (a volume), or bake it into the image{}",
                path.display(),
                if serve.pinned.is_some() { "; each server checks it against `serve.blake3` first" } else { "" }
            ),
            Weights::Local(path) if !path.exists() => format!(
                "note: model `{id}`: `{}` is not on this machine, so evalgrid cannot check that the nodes have it; each shard checks it against `serve.blake3` before its server starts",
                path.display()
            ),
            Weights::Local(path) if evalgrid::platform::is_local_filesystem(path.parent().unwrap_or(path)) => format!(
                "warning: model `{id}`: `{}` is on a local disk of this machine: the nodes see it only if it is on a filesystem they share; else fetch it to node-local scratch in the job and pin `serve.blake3`",
                path.display()
            ),
            Weights::Local(path) => {
                format!("note: model `{id}`: `{}` exists here, on a network filesystem: the nodes must mount it at the same path", path.display())
            }
        };
        output::note(&note);
    }
}

/// When the pipeline has container tasks (harbor), what every node must have: a runtime
/// that can run a container. Each shard checks its own node before any trial.
fn containers_note(pipeline: &Pipeline, kubernetes: bool) {
    let needed = evalgrid::exec::check::runtimes_needed(pipeline);
    if needed.is_empty() {
        return;
    }
    let tasks: Vec<String> = needed.into_values().flatten().collect();
    let node = if kubernetes {
        "every pod needs podman (a privileged container, or rootless podman with user namespaces and /dev/fuse) or a Docker daemon"
    } else {
        "every node of the partition needs podman or docker that can run a container (`evalgrid check` on a node says)"
    };
    output::note(&format!(
        "note: {} task(s) run in containers ({}{}): {node}; each shard checks its node before its first trial and fails fast (exit 1) where there is none (docs/agents.md)",
        tasks.len(),
        tasks.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
        if tasks.len() > 3 { ", …" } else { "" }
    ));
}

pub(crate) fn slurm(env: &Env, a: &SlurmArgs) -> Result<Exit, Failure> {
    let (pipeline, ctx) = context(env, &a.job)?;
    weights_notes(&pipeline, false);
    containers_note(&pipeline, false);
    let cpus = cpus_per_task(a.cpus_per_task, a.partition.as_deref(), node_cpus(a.partition.as_deref()))?;
    let dir = a.job.out.join(&ctx.name);
    let mut files = Vec::new();
    for (&class, &cells) in &ctx.classes {
        files.push((format!("{class}.sbatch"), slurm_array(&ctx, a, cpus, class), Some((class, cells))));
    }
    files.push(("report.sbatch".into(), slurm_report(&ctx, a, cpus), None));
    if a.job.dry_run {
        for (name, text, _) in &files {
            output::line(&format!("# {}\n{text}", dir.join(name).display()));
        }
        let arrays: Vec<String> = ctx.classes.keys().map(|c| format!("${}", c.to_string().to_uppercase())).collect();
        for class in ctx.classes.keys() {
            output::line(&format!("{}=$(sbatch --parsable {})", class.to_string().to_uppercase(), dir.join(format!("{class}.sbatch")).display()));
        }
        output::line(&format!("sbatch --dependency=afterany:{} {}", arrays.join(":"), dir.join("report.sbatch").display()));
        return Ok(Exit::Ok);
    }
    fs_err::create_dir_all(&dir)?;
    fs_err::create_dir_all("evalgrid-logs")?;
    for (name, text, _) in &files {
        fs_err::write(dir.join(name), text)?;
    }
    let mut ids = Vec::new();
    let mut arrays = Vec::new();
    for (name, _, class) in &files {
        let Some((class, cells)) = class else { continue };
        let id = sbatch(&[], &dir.join(name))?;
        output::note(&format!("submitted {class} array {id}: {cells} cells in {} shards", a.job.shards));
        arrays.push(serde_json::json!({"class": class.to_string(), "job": id}));
        ids.push(id);
    }
    let dependency = format!("--dependency=afterany:{}", ids.join(":"));
    let report = sbatch(&[&dependency], &dir.join("report.sbatch"))?;
    output::note(&format!("submitted report job {report}, after {}", ids.join(", ")));
    // `status` asks Slurm about these jobs, so a job that never starts is seen pending, with why.
    let submission = serde_json::json!({"slurm_submission": {"arrays": arrays, "shards": a.job.shards, "report_job": report}});
    env.store()?.put_progress(&super::run::run_id(&pipeline), SLURM_SUBMISSION, &submission)?;
    output::line(&report);
    Ok(Exit::Ok)
}

/// CPUs asked per task when `--cpus-per-task` is not given, unless the nodes have fewer.
const DEFAULT_CPUS_PER_TASK: u32 = 4;

/// The most CPUs any node of `partition` (the default one when `None`) has, as `sinfo`
/// reports them (`%c`, e.g. `2` or `4+`); `None` when `sinfo` is missing or says nothing.
fn node_cpus(partition: Option<&str>) -> Option<u32> {
    let mut cmd = std::process::Command::new("sinfo");
    cmd.args(["-h", "-o", "%c"]);
    if let Some(p) = partition {
        cmd.args(["-p", p]);
    }
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().trim_end_matches('+').parse::<u32>().ok()).max()
}

/// `--cpus-per-task` for the scripts: a request no node can satisfy pends for ever
/// (`PartitionConfig`), so it is refused here; the default fits the nodes; without `sinfo`
/// the line is left out and Slurm's own default (one CPU) applies.
fn cpus_per_task(asked: Option<u32>, partition: Option<&str>, nodes: Option<u32>) -> Result<Option<u32>, Failure> {
    match (asked, nodes) {
        (Some(n), Some(max)) if n > max => {
            let which = partition.map_or_else(|| "the default partition".to_owned(), |p| format!("partition `{p}`"));
            Err(Failure::invalid(anyhow::anyhow!(
                "--cpus-per-task {n}: no node of {which} has more than {max} CPUs (sinfo), so the jobs would pend for ever; ask for at most {max}"
            )))
        }
        (Some(n), _) => Ok(Some(n)),
        (None, Some(max)) => Ok(Some(DEFAULT_CPUS_PER_TASK.min(max.max(1)))),
        (None, None) => Ok(None),
    }
}

/// The progress part under which `evalgrid slurm` records the jobs it submitted (the last
/// submission of a pipeline wins), for `status`.
pub(crate) const SLURM_SUBMISSION: &str = "slurm-submission";

/// A Slurm job or array task as the cluster sees it now.
pub(crate) struct SlurmJob {
    /// `123` or, for an array task, `123_4`.
    pub(crate) id: String,
    /// `PENDING`, `RUNNING`, `COMPLETED`, …
    pub(crate) state: String,
    /// Why it waits (`Priority`, `Resources`, `PartitionConfig`, …); `None` when it does not.
    pub(crate) reason: String,
}

/// The jobs `ids` (arrays expanded to their tasks) with state and reason: from `squeue` while
/// the controller still holds them (finished ones too, for `MinJobAge`), else from `sacct`
/// where accounting is on. A job neither knows is left out; so is everything without Slurm.
pub(crate) fn slurm_jobs(ids: &[String]) -> Vec<SlurmJob> {
    let mut jobs = Vec::new();
    for id in ids {
        // One id per call: `squeue -j` fails as a whole when one of several ids is unknown.
        let mut found = slurm_query("squeue", &["-h", "-r", "--states=all", "-j", id, "-o", "%i|%T|%r"]);
        if found.is_empty() {
            found = slurm_query("sacct", &["-n", "-P", "-X", "-j", id, "-o", "JobID,State,Reason"]);
        }
        jobs.extend(found);
    }
    jobs
}

/// `program args` read as `id|state|reason` lines; nothing when it cannot run or fails.
fn slurm_query(program: &str, args: &[&str]) -> Vec<SlurmJob> {
    let Ok(out) = std::process::Command::new(program).args(args).output() else { return Vec::new() };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split('|').map(str::trim);
            let (id, state) = (parts.next().filter(|id| !id.is_empty())?, parts.next()?);
            Some(SlurmJob { id: id.to_owned(), state: state.to_owned(), reason: parts.next().unwrap_or_default().to_owned() })
        })
        .collect()
}

/// `sbatch --parsable [extra] script`; returns the job id.
fn sbatch(extra: &[&str], script: &Path) -> Result<String, Failure> {
    let out = std::process::Command::new("sbatch")
        .arg("--parsable")
        .args(extra)
        .arg(script)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run sbatch (is Slurm installed here?): {e}"))?;
    if !out.status.success() {
        return Err(anyhow::anyhow!("sbatch {} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    let id = String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap_or_default().to_owned();
    Ok(id)
}

/// A JSON string (YAML accepts JSON scalars), so no value can break the manifest.
fn q(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn k8s_env(a: &K8sArgs) -> String {
    let mut s = String::from("          env:\n            - {name: EVALGRID_NO_PROGRESS, value: \"1\"}\n");
    if !a.secrets.is_empty() {
        s.push_str("          envFrom:\n");
        for secret in &a.secrets {
            let _ = writeln!(s, "            - secretRef: {{name: {}}}", q(secret));
        }
    }
    s
}

fn k8s_job(ctx: &Context, a: &K8sArgs, class: ResourceClass) -> String {
    let n = a.job.shards;
    let mut args = vec!["--cache-dir", "/cache", "--data-dir", "/data", "run"].into_iter().map(q).collect::<Vec<_>>();
    args.extend([
        q(&format!("/pipelines/{}", file_name(&ctx.pipeline))),
        q("--class"),
        q(&class.to_string()),
        q("--shard"),
        q(&format!("$(JOB_COMPLETION_INDEX)/{n}")),
        q("--progress"),
        q("plain"),
        q("--json"),
    ]);
    let gpus = ctx.served_gpus.get(&class).copied().unwrap_or(0).max(1);
    let gpu = if class == ResourceClass::Gpu { format!("\n            limits: {{nvidia.com/gpu: {gpus}}}") } else { String::new() };
    let gpu_request = if class == ResourceClass::Gpu { format!(", nvidia.com/gpu: {gpus}") } else { String::new() };
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app.kubernetes.io/name: evalgrid, evalgrid/pipeline: {pipeline}, evalgrid/class: {class}}}
spec:
  completionMode: Indexed
  completions: {n}
  parallelism: {n}
  backoffLimitPerIndex: 2
  maxFailedIndexes: {n}
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: {grace}
      containers:
        - name: shard
          image: {image}
          command: [\"evalgrid\"]
          args: [{args}]
{env}          resources:
            requests: {{cpu: \"2\", memory: 4Gi{gpu_request}}}{gpu}
          volumeMounts:
            - {{name: cache, mountPath: /cache}}
            - {{name: data, mountPath: /data, readOnly: true}}
            - {{name: pipelines, mountPath: /pipelines, readOnly: true}}
      volumes:
        - {{name: cache, persistentVolumeClaim: {{claimName: evalgrid-cache}}}}
        - {{name: data, persistentVolumeClaim: {{claimName: evalgrid-data}}}}
        - {{name: pipelines, configMap: {{name: evalgrid-pipelines}}}}
",
        name = q(&format!("eg-{}-{class}", ctx.name).to_lowercase().replace('_', "-")),
        pipeline = q(&ctx.name),
        grace = STOP_BEFORE_LIMIT_S,
        image = q(&a.image),
        args = args.join(", "),
        env = k8s_env(a),
    )
}

fn k8s_report(ctx: &Context, a: &K8sArgs) -> String {
    let pipeline = q(&format!("/pipelines/{}", file_name(&ctx.pipeline)));
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app.kubernetes.io/name: evalgrid, evalgrid/pipeline: {label}, evalgrid/class: report}}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: report
          image: {image}
          command: [\"sh\", \"-c\"]
          args: [{script}]
{env}          volumeMounts:
            - {{name: cache, mountPath: /cache}}
            - {{name: data, mountPath: /data, readOnly: true}}
            - {{name: pipelines, mountPath: /pipelines, readOnly: true}}
            - {{name: reports, mountPath: /reports}}
      volumes:
        - {{name: cache, persistentVolumeClaim: {{claimName: evalgrid-cache}}}}
        - {{name: data, persistentVolumeClaim: {{claimName: evalgrid-data}}}}
        - {{name: pipelines, configMap: {{name: evalgrid-pipelines}}}}
        - {{name: reports, persistentVolumeClaim: {{claimName: evalgrid-reports}}}}
",
        name = q(&format!("eg-{}-report", ctx.name).to_lowercase().replace('_', "-")),
        label = q(&ctx.name),
        image = q(&a.image),
        script = q(&format!(
            "evalgrid --cache-dir /cache --data-dir /data report {pipeline} --reports-dir /reports && exec evalgrid --cache-dir /cache --data-dir /data status {pipeline} --check",
            pipeline = pipeline.trim_matches('"')
        )),
        env = k8s_env(a),
    )
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(|| "pipeline.yaml".to_owned(), |n| n.to_string_lossy().into_owned())
}

/// Writes one Indexed Job per class and a report Job (Kubernetes has no job dependencies:
/// start the report Job after `kubectl wait --for=condition=complete` on the others).
pub(crate) fn k8s(env: &Env, a: &K8sArgs) -> Result<Exit, Failure> {
    let (pipeline, ctx) = context(env, &a.job)?;
    weights_notes(&pipeline, true);
    containers_note(&pipeline, true);
    let dir = a.job.out.join(&ctx.name);
    let mut files: Vec<(String, String)> = ctx.classes.keys().map(|&c| (format!("{c}.yaml"), k8s_job(&ctx, a, c))).collect();
    files.push(("report.yaml".into(), k8s_report(&ctx, a)));
    let steps = format!(
        "# kubectl create configmap evalgrid-pipelines --from-file={pipeline}\n# kubectl apply -f {dir}/<class>.yaml; kubectl wait --for=condition=complete --timeout=-1s job -l evalgrid/pipeline={name}\n# kubectl apply -f {dir}/report.yaml",
        pipeline = ctx.pipeline.display(),
        dir = dir.display(),
        name = ctx.name,
    );
    if a.job.dry_run {
        for (name, text) in &files {
            output::line(&format!("# {}\n{text}", dir.join(name).display()));
        }
        output::line(&steps);
        return Ok(Exit::Ok);
    }
    fs_err::create_dir_all(&dir)?;
    for (name, text) in &files {
        fs_err::write(dir.join(name), text)?;
    }
    output::note(&format!("wrote {} manifests to {}/", files.len(), dir.display()));
    output::line(&steps);
    Ok(Exit::Ok)
}
