//! Pure parts, then the real runtime (podman or docker; SKIPPED when none can run a
//! container or the base image is missing).

use super::*;

#[test]
fn versions_are_read_from_both_runtimes() {
    assert_eq!(parse_version("podman version 4.3.1\n"), "4.3.1");
    assert_eq!(parse_version("Docker version 28.2.2, build e6534b4"), "28.2.2");
}

#[test]
fn choices_read_from_yaml_in_kebab_case() {
    let c: RuntimeChoice = serde_json::from_str("\"podman\"").expect("choice");
    assert_eq!(c, RuntimeChoice::Podman);
    let p: PullPolicy = serde_json::from_str("\"missing\"").expect("policy");
    assert_eq!(p, PullPolicy::Missing);
    assert!(serde_json::from_str::<RuntimeChoice>("\"lxc\"").is_err());
}

#[test]
fn this_process_owns_its_label_and_a_dead_or_rebooted_one_does_not() {
    let me = owner_of(std::process::id()).expect("own owner label");
    assert!(owner_alive(&me));
    let parts: Vec<&str> = me.rsplitn(4, ':').collect();
    let (start, pid, boot, host) = (parts[0], parts[1], parts[2], parts[3]);
    assert!(!owner_alive(&format!("{host}:{boot}:{pid}:{}", start.parse::<u64>().unwrap_or(0) + 1)), "pid reused by a later process");
    assert!(!owner_alive(&format!("{host}:not-this-boot:{pid}:{start}")));
    assert!(!owner_alive(""), "a container without the label is nobody's");
    assert!(owner_alive(&format!("another-host:{boot}:{pid}:{start}")), "another machine's containers are left alone");
    // Without /proc start times (macOS) the pid alone decides.
    assert!(owner_alive(&format!("{host}:-:{}:-", std::process::id())));
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("wait");
    assert!(!owner_alive(&format!("{host}:-:{}:-", gone.id())));
}

#[test]
fn only_evalgrid_images_are_candidates_for_pruning() {
    assert_eq!(short_image_name("localhost/evalgrid-harbor:ab12"), "evalgrid-harbor:ab12");
    assert_eq!(short_image_name("docker.io/library/evalgrid-harbor:ab12"), "evalgrid-harbor:ab12");
    assert_eq!(short_image_name("debian:bookworm-slim"), "debian:bookworm-slim");
}

#[test]
fn last_lines_skips_blank_lines() {
    assert_eq!(last_lines("a\n\nb\nc\n\n", 2), "b\nc");
}

/// The base image the tests start from (`scripts/harbor-base-image.sh` makes it offline).
const BASE: &str = "debian:bookworm-slim";

/// The runtime and base image, or `None` after printing why the test is skipped.
fn ready(test: &str) -> Option<RuntimeInfo> {
    let rt = match detect(RuntimeChoice::Auto) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            return None;
        }
    };
    match image_exists(&rt, BASE) {
        Ok(true) => Some(rt),
        _ => {
            eprintln!("SKIPPED {test}: no `{BASE}` image here (scripts/harbor-base-image.sh makes one offline)");
            None
        }
    }
}

fn spec(labels: Vec<(String, String)>) -> ContainerSpec {
    ContainerSpec { image: BASE.into(), labels, ..ContainerSpec::default() }
}

/// What `inspect --format` says about a container; empty when it does not exist.
fn inspect(rt: &RuntimeInfo, id: &str, format: &str) -> String {
    let out = Command::new(&rt.binary).args(["inspect", "--format", format, id]).output().expect("inspect runs");
    if out.status.success() { String::from_utf8_lossy(&out.stdout).trim().to_string() } else { String::new() }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), EXEC_COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[test]
fn a_container_runs_commands_with_its_limits_labels_and_no_network_and_is_removed_on_drop() {
    let Some(rt) = ready("container lifecycle") else { return };
    let run = unique("run");
    let s = ContainerSpec {
        cpus: Some(1.5),
        memory_mb: Some(512),
        pids_limit: Some(300),
        workdir: Some("/tmp".into()),
        env: vec![("TEST_DIR".into(), "/tests".into())],
        ..spec(labels(&run, "unit-cache"))
    };
    let c = Container::start(&rt, &s).expect("container starts");
    let id = c.id().to_string();
    let o = c
        .exec(
            "echo out; echo err >&2; pwd; echo $TEST_DIR $EXTRA; ls /sys/class/net; exit 7",
            Duration::from_secs(60),
            1 << 16,
            &[("EXTRA".into(), "x y".into())],
        )
        .expect("exec");
    assert_eq!(o.exit_code, Some(7));
    assert!(!o.timed_out);
    let text = o.text();
    assert!(text.contains("out\nerr\n/tmp\n/tests x y\nlo\n"), "{text:?}");
    assert!(!text.contains("eth0"), "the network is off: {text}");
    let host = inspect(&rt, &id, "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}");
    assert_eq!(host, format!("{} 1500000000 300", 512u64 << 20));
    let labels = inspect(&rt, &id, &format!("{{{{index .Config.Labels \"{}\"}}}} {{{{index .Config.Labels \"{}\"}}}}", label::RUN, label::CACHE));
    assert_eq!(labels, format!("{run} unit-cache"));
    assert!(owner_alive(&inspect(&rt, &id, &format!("{{{{index .Config.Labels \"{}\"}}}}", label::OWNER))));
    // Nothing of evalgrid's own environment is inside.
    let env = c.exec("env", Duration::from_secs(60), 1 << 16, &[]).expect("env").text();
    assert!(!env.contains("CARGO") && !env.contains("RUST"), "{env}");
    drop(c);
    assert_eq!(inspect(&rt, &id, "{{.Id}}"), "", "dropping the container removes it");
}

#[test]
fn a_command_past_its_deadline_is_killed_with_everything_it_started() {
    let Some(rt) = ready("exec deadline") else { return };
    let c = Container::start(&rt, &spec(labels(&unique("run"), "unit-cache"))).expect("container starts");
    let o = c.exec("(sleep 1001 &) ; sleep 1002 & echo started; wait", Duration::from_secs(2), 4096, &[]).expect("exec");
    assert!(o.timed_out);
    assert_eq!(o.exit_code, None);
    assert!(o.text().contains("started"), "{}", o.text());
    let left = c.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '", Duration::from_secs(60), 1 << 16, &[]).expect("ps").text();
    assert!(!left.contains("sleep 100"), "processes of the timed-out command survived: {left}");
    assert!(left.contains("sleep infinity"), "the container itself lives on: {left}");
}

#[test]
fn a_flood_of_output_is_capped_at_head_and_tail() {
    let Some(rt) = ready("output cap") else { return };
    let c = Container::start(&rt, &spec(labels(&unique("run"), "unit-cache"))).expect("container starts");
    let o = c.exec("echo first; head -c 50000000 /dev/zero | tr '\\0' a; echo; echo last", Duration::from_secs(120), 64 << 10, &[]).expect("exec");
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(o.output.total_bytes, 50_000_000 + 12);
    assert!(o.output.head.len() + o.output.tail.len() <= 64 << 10);
    let text = o.text();
    assert!(text.starts_with("first\n") && text.ends_with("\nlast\n") && text.contains("bytes omitted"));
}

#[test]
fn folders_are_copied_in_with_their_modes_and_files_read_back() {
    let Some(rt) = ready("copy and read") else { return };
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(dir.path().join("sub")).expect("sub");
    std::fs::write(dir.path().join("run.sh"), "#!/bin/bash\necho ran > /logs/verifier/reward.txt\n").expect("script");
    std::fs::set_permissions(dir.path().join("run.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(dir.path().join("sub/data"), [0u8, 159, 146, 150]).expect("data");
    let c = Container::start(&rt, &spec(labels(&unique("run"), "unit-cache"))).expect("container starts");
    c.copy_in(dir.path(), "/tests").expect("copy in");
    let o = c.exec("mkdir -p /logs/verifier && /tests/run.sh", Duration::from_secs(60), 4096, &[]).expect("exec");
    assert_eq!(o.exit_code, Some(0), "{}", o.text());
    assert_eq!(c.read_file("/logs/verifier/reward.txt", 100).expect("read"), Some(b"ran\n".to_vec()));
    assert_eq!(c.read_file("/tests/sub/data", 100).expect("read"), Some(vec![0u8, 159, 146, 150]), "bytes, not text");
    assert_eq!(c.read_file("/tests/sub/data", 2).expect("read"), Some(vec![0u8, 159]), "cut at max");
    assert_eq!(c.read_file("/logs/verifier/reward.json", 100).expect("read"), None);
    assert_eq!(c.read_file("/tests/sub", 100).expect("read"), None, "a folder is no file");
}

#[test]
fn an_image_is_built_once_per_tag_reused_then_pruned_and_a_failed_build_shows_its_log() {
    let Some(rt) = ready("image build") else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = dir.path().join("environment");
    std::fs::create_dir_all(&ctx).expect("ctx");
    let marker = unique("m");
    std::fs::write(ctx.join("Dockerfile"), format!("FROM {BASE}\nWORKDIR /app\nCOPY hello.txt /app/\nRUN echo {marker} > /app/built\n")).expect("Dockerfile");
    std::fs::write(ctx.join("hello.txt"), "hi\n").expect("file");
    let tag = format!("{IMAGE_REPO}:{}", unique("unit"));
    let spec_for = |tag: &str| ImageSpec {
        context_dir: ctx.clone(),
        dockerfile: ctx.join("Dockerfile"),
        tag: tag.to_string(),
        prebuilt: None,
        pull: PullPolicy::Never,
        build_timeout: Duration::from_secs(300),
    };
    let log = dir.path().join("logs/build.log");
    // Two trials of the same environment at once: one build.
    let images: Vec<Image> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2).map(|_| sc.spawn(|| ensure_image(&rt, &spec_for(&tag), &log).expect("image"))).collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(images.iter().filter(|i| i.built_now).count(), 1, "{images:?}");
    assert!(std::fs::read_to_string(&log).expect("build log kept").contains(&marker));
    let again = ensure_image(&rt, &spec_for(&tag), &log).expect("image again");
    assert!(!again.built_now, "a present image is never rebuilt");
    let other_process = ensure_image_uncached(&rt, &spec_for(&tag), &log).expect("image found");
    assert!(!other_process.built_now, "another process finds it present too");
    let c = Container::start(&rt, &ContainerSpec { image: again.reference.clone(), ..spec(labels(&unique("run"), "unit-cache")) }).expect("start");
    let o = c.exec("pwd; cat hello.txt built", Duration::from_secs(60), 4096, &[]).expect("exec");
    assert_eq!(o.text(), format!("/app\nhi\n{marker}\n"), "the image's WORKDIR is the working directory");
    drop(c);

    // A broken build: an error with the runtime's last lines, never an image.
    std::fs::write(ctx.join("Dockerfile"), format!("FROM {BASE}\nRUN echo about-to-fail-{marker} && exit 3\n")).expect("Dockerfile");
    let bad_tag = format!("{IMAGE_REPO}:{}", unique("bad"));
    let err = ensure_image(&rt, &spec_for(&bad_tag), &dir.path().join("logs/bad.log")).expect_err("the build fails");
    match &err {
        ContainerError::Build { timed_out: false, tail, .. } => assert!(tail.contains(&format!("about-to-fail-{marker}")), "{tail}"),
        other => panic!("{other:?}"),
    }
    // A base that is not here is not pulled under `pull: never`.
    std::fs::write(ctx.join("Dockerfile"), "FROM evalgrid-no-such-base:0\nRUN true\n").expect("Dockerfile");
    let err = ensure_image(&rt, &spec_for(&bad_tag), &dir.path().join("logs/nobase.log")).expect_err("no base");
    assert!(matches!(err, ContainerError::Build { .. }), "{err:?}");

    // Pruning keeps every other evalgrid image (other tests may be using theirs).
    let listed = Command::new(&rt.binary).args(["images", "--format", "{{.Repository}}:{{.Tag}}"]).output().expect("images");
    let keep: BTreeSet<String> =
        String::from_utf8_lossy(&listed.stdout).lines().map(|l| short_image_name(l.trim()).to_string()).filter(|l| *l != tag).collect();
    assert_eq!(prune_images(&rt, &keep).expect("prune"), 1);
    assert!(!image_exists(&rt, &tag).expect("inspect"));
}

#[test]
fn containers_of_a_dead_run_are_reaped_and_a_live_runs_stay() {
    let Some(rt) = ready("reap orphans") else { return };
    let cache = unique("cache");
    // A process that has exited: its owner label names nobody alive.
    let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
    let dead_owner = owner_of(child.id()).expect("owner of a live child");
    child.kill().expect("kill");
    child.wait().expect("wait");
    let mut args = vec![s("run"), s("-d"), s("--stop-signal"), s("KILL"), s("--network"), s("none")];
    for (k, v) in labels("killed-run", &cache) {
        args.extend([s("--label"), format!("{k}={v}")]);
    }
    args.extend([s("--label"), format!("{}={dead_owner}", label::OWNER), s(BASE), s("sleep"), s("infinity")]);
    let out = Command::new(&rt.binary).args(&args).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let orphan = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let live = Container::start(&rt, &spec(labels("live-run", &cache))).expect("start");
    let other_cache = Container::start(&rt, &spec(labels("live-run", &unique("other")))).expect("start");
    assert_eq!(reap_orphans(&rt, &cache).expect("reap"), 1);
    assert_eq!(inspect(&rt, &orphan, "{{.Id}}"), "", "the dead run's container is gone");
    assert_eq!(inspect(&rt, live.id(), "{{.State.Status}}"), "running");
    assert_eq!(reap_orphans(&rt, &cache).expect("reap again"), 0);
    drop((live, other_cache));
}

#[test]
fn auto_takes_a_runtime_that_can_run_a_container() {
    let Some(rt) = ready("runtime detection") else { return };
    probe_can_run(&rt, Some(BASE)).expect("the base image runs");
    assert!(probe_can_run(&rt, Some("evalgrid-no-such-image:0")).is_err());
    if rt.runtime == Runtime::Podman && which(Path::new("docker"), None).is_some() {
        // This machine's docker client has no daemon: `docker` is found but cannot run.
        if let Err(e) = detect(RuntimeChoice::Docker) {
            assert!(e.to_string().contains("docker"), "{e}");
        }
    }
    assert!(!rt.version.is_empty());
}
