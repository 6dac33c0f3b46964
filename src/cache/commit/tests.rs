use super::*;

#[test]
fn many_writes_share_few_batches_and_flush_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let commit = Arc::new(GroupCommit::start(dir.path()).unwrap());
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let commit = Arc::clone(&commit);
            std::thread::spawn(move || (0..250).for_each(|_| commit.note()))
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
    commit.note();
    let shared = Arc::clone(&commit.shared);
    drop(commit);
    let c = shared.counters.lock().unwrap();
    assert_eq!((c.synced, c.batches), (1, 1), "dropping the committer syncs the last batch");
}
