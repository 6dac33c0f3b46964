//! The container runtime layer through the binary: `evalgrid check` names the runtime Harbor
//! tasks get and whether it runs a container; `cache gc --keep` drops evalgrid's images no
//! kept pipeline uses and leaves every other image (real podman on a private image store;
//! SKIPPED without podman).

use std::path::Path;
use std::process::Command;

use crate::support::Workspace;

/// A private podman image store under `dir` (vfs: no overlay needed, nothing shared with
/// other tests' images), or `None` after printing why the test is skipped.
fn private_store(dir: &Path, test: &str) -> Option<std::path::PathBuf> {
    let conf = dir.join("storage.conf");
    let text = format!("[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/root\"\nrunroot = \"{0}/run\"\n", dir.display());
    std::fs::write(&conf, text).expect("storage.conf");
    let ok = Command::new("podman").env("CONTAINERS_STORAGE_CONF", &conf).args(["images", "-q"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED {test}: podman is not installed or cannot use a private image store here");
        return None;
    }
    Some(conf)
}

fn podman(conf: &Path, args: &[&str]) -> String {
    let out = Command::new("podman").env("CONTAINERS_STORAGE_CONF", conf).args(args).output().expect("podman runs");
    assert!(out.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cache_gc_drops_evalgrid_images_no_kept_pipeline_uses_and_no_other_image() {
    let ws = Workspace::new();
    let store = ws.path("store");
    std::fs::create_dir_all(&store).expect("store dir");
    let Some(conf) = private_store(&store, "cache gc images") else { return };
    // Images need no content to be listed and removed: an empty layer each.
    let tar = ws.path("empty.tar");
    let st = Command::new("tar").args(["-cf"]).arg(&tar).args(["-T", "/dev/null"]).status().expect("tar");
    assert!(st.success());
    let tar = tar.to_string_lossy().into_owned();
    podman(&conf, &["import", &tar, "evalgrid-harbor:0123456789abcdef"]);
    podman(&conf, &["tag", "evalgrid-harbor:0123456789abcdef", "debian:bookworm-slim"]);
    let p = ws.quickstart();
    let p = p.to_str().expect("path");
    // Without --keep, gc does not know which images are used: it removes none.
    let out = ws.cmd().env("CONTAINERS_STORAGE_CONF", &conf).args(["cache", "gc"]).output().expect("gc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(podman(&conf, &["images", "--format", "{{.Repository}}:{{.Tag}}"]).contains("evalgrid-harbor:0123456789abcdef"));
    // The quickstart uses no container: evalgrid's image goes, the base image stays.
    let out = ws.cmd().env("CONTAINERS_STORAGE_CONF", &conf).args(["cache", "gc", "--keep", p]).output().expect("gc");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("removed 1 container image(s) of podman"), "{stdout}");
    let left = podman(&conf, &["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    assert!(!left.contains("evalgrid-harbor"), "{left}");
    assert!(left.contains("debian:bookworm-slim"), "{left}");
}

/// A pipeline with one Harbor task (the hello-world fixture) played by `oracle`.
fn harbor_pipeline(ws: &Workspace) -> std::path::PathBuf {
    let task = crate::support::repo().join("tests/fixtures/harbor/hello-world");
    ws.write(
        "harbor.yaml",
        &format!(
            "name: t\nmodels:\n  - {{id: oracle, provider: builtin, model: oracle}}\ntasks:\n  - benchmark: harbor\n    params:\n      path: {}\nseeds: [0]\n",
            task.display()
        ),
    )
}

#[test]
fn check_says_when_the_only_runtime_cannot_run_a_container() {
    // A docker client whose daemon is not there: found, its version read, unusable.
    let ws = Workspace::new();
    let bin = ws.path("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let fake = bin.join("docker");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Docker version 99.1.0, build fake'; exit 0; fi\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n",
    )
    .expect("fake docker");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let p = harbor_pipeline(&ws);
    let out = ws.cmd().env("PATH", &bin).args(["check"]).arg(&p).output().expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("container runtime (runtime: auto, 1 task(s)): docker 99.1.0"), "{stdout}");
    assert!(stdout.contains("can run a container: NO"), "{stdout}");
    assert!(stdout.contains("Cannot connect to the Docker daemon"), "the runtime's own words: {stdout}");
    assert!(stdout.contains("`podman` is not on the PATH"), "{stdout}");
    let (code, v) = {
        let out = ws.cmd().env("PATH", &bin).args(["check", "--json"]).arg(&p).output().expect("check");
        (out.status.code(), serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("one JSON object"))
    };
    assert_eq!(code, Some(1));
    assert_eq!(v["runtimes"][0]["runtime"], "docker", "{v}");
    assert_eq!(v["runtimes"][0]["can_run"], false, "{v}");
    assert_eq!(v["ok"], false);
}

#[test]
fn check_names_the_runtime_its_version_and_that_it_runs_a_container() {
    let ws = Workspace::new();
    let p = harbor_pipeline(&ws);
    let probe = Command::new("podman").args(["run", "--rm", "--network", "none", "--rootfs", "/:O", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED check with a runtime: podman cannot run a container here");
        return;
    }
    let out = ws.cmd().args(["check"]).arg(&p).output().expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let version = String::from_utf8_lossy(&Command::new("podman").arg("--version").output().expect("version").stdout)
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(stdout.contains(&format!("container runtime (runtime: auto, 1 task(s)): podman {version} (")), "{stdout}");
    assert!(stdout.contains("can run a container: yes"), "{stdout}");
}
