use super::portable::{Synced, is_local_type_name, sync_files};
use super::*;

/// Outside `src/platform/`, no code (tests included) calls `rustix` or `libc` (issue 26):
/// each OS-specific call lives here, beside its portable fallback, so a macOS build breaks
/// only here and the fallback is what CI tests with `portable-platform`.
#[test]
fn no_os_specific_call_outside_the_platform_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    for (dir, skip) in [("src", &["platform"][..]), ("tests", &[][..])] {
        for line in crate::guard::all_lines(&root.join(dir), skip) {
            if ["rustix::", "libc::", "use rustix", "use libc", "extern crate libc"].iter().any(|call| line.text.contains(call)) {
                offenders.push(format!("{dir}/{line}"));
            }
        }
    }
    assert!(offenders.is_empty(), "OS-specific calls outside src/platform (move them into platform/):\n{}", offenders.join("\n"));
}

/// The fallback syncs exactly the batch's files and the directories leading to them from
/// the cache root (each once), and skips a file removed since it was written.
#[test]
fn the_portable_batch_syncs_its_files_and_their_directories_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("v1");
    for shard in ["steps/ab", "steps/cd", "blobs/ab"] {
        std::fs::create_dir_all(root.join(shard)).unwrap();
    }
    let files: Vec<PathBuf> = ["steps/ab/1", "steps/ab/2", "steps/cd/3", "blobs/ab/4"].iter().map(|f| root.join(f)).collect();
    for f in &files {
        std::fs::write(f, b"x").unwrap();
    }
    std::fs::remove_file(&files[1]).unwrap();
    let synced = sync_files(&root, &files).unwrap();
    // v1, v1/steps, v1/steps/ab, v1/steps/cd, v1/blobs, v1/blobs/ab; never the root's parent.
    assert_eq!(synced, Synced { files: 3, dirs: 6 });
    assert_eq!(sync_files(&root, &[]).unwrap(), Synced::default());
}

/// A file whose folder became a file since it was written is gone, not a failed batch (a
/// batch that always failed would fail every later `flush`).
#[test]
fn the_portable_batch_skips_a_file_whose_folder_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    assert_eq!(sync_files(dir.path(), &[not_a_dir.join("below")]).unwrap(), Synced { files: 0, dirs: 2 });
}

#[test]
fn apfs_and_hfs_are_local_and_network_or_unknown_types_are_not() {
    for local in [&b"apfs\0\0\0\0\0\0\0\0\0\0\0\0"[..], b"hfs\0\0\0\0\0\0\0\0\0\0\0\0\0", b"apfs"] {
        assert!(is_local_type_name(local), "{local:?}");
    }
    for other in [&b"smbfs\0\0\0\0\0\0\0\0\0\0\0"[..], b"nfs\0", b"webdav", b"macfuse", b"osxfuse", b"apfsx", b"", b"\0apfs"] {
        assert!(!is_local_type_name(other), "{other:?}");
    }
}

/// The calls the rest of evalgrid makes work on this machine whichever path is active.
#[test]
fn the_active_path_syncs_and_protects() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    sync_batch(&File::open(dir.path()).unwrap(), dir.path(), &[file]).unwrap();
    sync_filesystem_of(dir.path()).unwrap();
    protect_secrets();
    assert_eq!(DURABILITY == "fsync", TRACKS_FILES);
    assert_eq!(TRACKS_FILES, cfg!(any(not(target_os = "linux"), feature = "portable-platform")));
}

/// Only the thread that asks gets the lowest priority: the model calls keep theirs.
#[cfg(target_os = "linux")]
#[test]
fn the_lowest_priority_is_the_calling_threads_alone() {
    let before = linux::thread_priority().unwrap();
    let inside = std::thread::spawn(|| {
        assert!(lowest_thread_priority());
        linux::thread_priority().unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(inside, 19);
    assert_eq!(linux::thread_priority().unwrap(), before);
}
