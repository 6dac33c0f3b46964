use super::*;

#[test]
fn many_writes_share_few_batches_and_flush_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let commit = Arc::new(GroupCommit::start(dir.path()).unwrap());
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let commit = Arc::clone(&commit);
            std::thread::spawn(move || (0..250).for_each(|_| commit.note(Path::new("gone"))))
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    commit.flush().unwrap();
    let c = commit.shared.counters.lock().unwrap();
    assert_eq!((c.written, c.synced), (2000, 2000), "flush returns once every noted write is synced");
    assert!((1..=200).contains(&c.batches), "2,000 writes took {} batches; one sync each would be 2,000", c.batches);
}

#[test]
fn flush_without_writes_returns_at_once_and_drop_syncs_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let commit = GroupCommit::start(dir.path()).unwrap();
    commit.flush().unwrap();
    assert_eq!(commit.batches(), 0);
    commit.note(&dir.path().join("f"));
    let shared = Arc::clone(&commit.shared);
    drop(commit);
    let c = shared.counters.lock().unwrap();
    assert_eq!((c.synced, c.batches), (1, 1), "dropping the committer syncs the last batch");
}

/// Where there is no `syncfs` the batch names its files, each once however often it was
/// written (issue 26); with `syncfs` nothing is tracked (no cost on Linux).
#[test]
fn a_batch_names_each_file_written_once_where_the_platform_syncs_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let commit = GroupCommit::start(dir.path()).unwrap();
    let files: Vec<_> = ["a", "b", "c"].iter().map(|f| dir.path().join(f)).collect();
    for f in &files {
        std::fs::write(f, b"x").unwrap();
        commit.note(f);
    }
    commit.note(&files[0]);
    commit.flush().unwrap();
    let c = commit.shared.counters.lock().unwrap();
    assert!(c.pending.is_empty(), "a synced batch leaves nothing pending");
    if crate::platform::TRACKS_FILES {
        // Three files; the repeat of `a` is deduplicated unless it fell into a later batch.
        assert!((3..=4).contains(&c.files_synced), "{} files synced for 3 written", c.files_synced);
    } else {
        assert_eq!(c.files_synced, 0, "syncfs needs no file list");
    }
}

/// Flushes one after another (each cutting the batch window short) each see their write
/// synced, one batch each, and leave no flusher counted.
#[test]
fn flushes_one_after_another_each_get_their_batch() {
    let dir = tempfile::tempdir().unwrap();
    let commit = GroupCommit::start(dir.path()).unwrap();
    for _ in 0..50 {
        commit.note(&dir.path().join("f"));
        commit.flush().unwrap();
    }
    let c = commit.shared.counters.lock().unwrap();
    assert_eq!((c.written, c.synced, c.batches, c.flushing), (50, 50, 50, 0));
}
