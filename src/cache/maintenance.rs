//! `cache stats`, `cache verify` and `cache gc`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::store::{CacheError, Store};
use crate::plan::StepKey;

/// Counts and sizes per step kind.
#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Entries per kind (`episode`, `score`, ...); `corrupt` for bad files.
    pub entries: BTreeMap<String, u64>,
    /// Bytes of entry files.
    pub entry_bytes: u64,
    /// Number of blobs.
    pub blobs: u64,
    /// Bytes of blobs.
    pub blob_bytes: u64,
}

/// Result of `cache verify`.
#[derive(Debug, Default, Serialize)]
pub struct Verification {
    /// Entries read and checked.
    pub checked: u64,
    /// Bad entries with the reason.
    pub bad: Vec<(PathBuf, String)>,
}

/// Result of `cache gc`.
#[derive(Debug, Default, Serialize)]
pub struct Collection {
    /// Files removed.
    pub removed: u64,
    /// Bytes freed.
    pub bytes: u64,
}

/// Counts entries and blobs.
pub fn stats(store: &Store) -> Result<Stats, CacheError> {
    let mut s = Stats::default();
    for path in store.entry_files()? {
        s.entry_bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let kind = Store::check_file(&path).map_or_else(|_| "corrupt".to_owned(), |e| e.kind.as_str().to_owned());
        *s.entries.entry(kind).or_default() += 1;
    }
    for path in files_under(&store.root().join("blobs")) {
        s.blobs += 1;
        s.blob_bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    }
    Ok(s)
}

/// Reads every entry and checks header, checksum and key; also checks blobs.
pub fn verify(store: &Store) -> Result<Verification, CacheError> {
    let mut v = Verification::default();
    for path in store.entry_files()? {
        v.checked += 1;
        if let Err(reason) = Store::check_file(&path) {
            v.bad.push((path, reason));
        }
    }
    for path in files_under(&store.root().join("blobs")) {
        v.checked += 1;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if let Some(reason) = blob_problem(&path, &name) {
            v.bad.push((path, reason));
        }
    }
    Ok(v)
}

/// Why the blob at `path` is damaged, if it is (its content must hash to its name).
fn blob_problem(path: &std::path::Path, name: &str) -> Option<String> {
    match std::fs::read(path) {
        Ok(bytes) if blake3::hash(&bytes).to_hex().as_str() == name => None,
        Ok(_) => Some("blob content does not match its hash".into()),
        Err(e) => Some(e.to_string()),
    }
}

/// Removes temp files, free lock files, damaged entries (whatever is in their place: a torn
/// file, a directory) and damaged blobs; when `keep` is given, also removes entries whose
/// key is not in it, sub-step indexes of episodes not in it, and blobs no kept entry refers to.
pub fn gc(store: &Store, keep: Option<&HashSet<StepKey>>) -> Result<Collection, CacheError> {
    let mut c = Collection::default();
    let remove = |path: &std::path::Path, c: &mut Collection| {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if super::store::remove_any(path).is_ok() {
            c.removed += 1;
            c.bytes += len;
        }
    };
    for path in files_under(&store.root().join("tmp")) {
        remove(&path, &mut c);
    }
    for path in files_under(&store.root().join("locks")) {
        // The claim files (a few, reused by every run) hold byte-range locks a whole-file lock
        // does not see: removing one under a running process would let the next process
        // claim its calls in a new file and pay them again.
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(super::claims::FILE_PREFIX)) {
            continue;
        }
        if let Ok(Some(lock)) = super::lock::KeyLock::try_acquire(&path) {
            remove(&path, &mut c);
            drop(lock);
        }
    }
    let mut referenced = HashSet::new();
    for path in store.entry_files()? {
        match Store::check_file(&path) {
            Err(_) => remove(&path, &mut c),
            Ok(entry) if keep.is_some_and(|k| !k.contains(&entry.key)) => remove(&path, &mut c),
            Ok(entry) => collect_hashes(&entry.output, &mut referenced),
        }
    }
    if let Some(keep) = keep {
        for (episode, path) in store.substep_indexes()? {
            if !keep.contains(&episode) {
                remove(&path, &mut c);
            }
        }
    }
    for path in files_under(&store.root().join("blobs")) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let unreferenced = keep.is_some() && !referenced.contains(&name);
        if unreferenced || blob_problem(&path, &name).is_some() {
            remove(&path, &mut c);
        }
    }
    Ok(c)
}

fn collect_hashes(v: &Value, out: &mut HashSet<String>) {
    match v {
        Value::String(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| collect_hashes(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_hashes(x, out)),
        _ => {}
    }
}

fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Entry;
    use crate::plan::StepKind;
    use serde_json::json;

    fn put(store: &Store, n: i64, kind: StepKind) -> StepKey {
        let components = json!({"n": n});
        let key = StepKey::compute(&components);
        store.put(&Entry { key, kind, components, output: json!(n), duration_ms: 0, writer: String::new() }).unwrap();
        key
    }

    #[test]
    fn gc_leaves_the_claim_files_of_a_running_process_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let key = StepKey::compute(&json!("call"));
        let claim = store.try_claim(key).unwrap().expect("free");
        let inodes =
            || files_under(&store.root().join("locks")).iter().map(|p| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap())).collect::<Vec<_>>();
        let before = inodes();
        assert_eq!(before.len(), 1);
        gc(&store, None).unwrap();
        assert_eq!(inodes(), before, "the claim file is kept: a process claiming next meets the running one's lock");
        drop(claim);
    }

    #[test]
    fn gc_keeps_listed_keys_and_drops_indexes_of_episodes_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (kept_episode, other_episode) = (StepKey::compute(&json!("kept")), StepKey::compute(&json!("other")));
        let (call, other_call) = (put(&store, 1, StepKind::Call), put(&store, 2, StepKind::Call));
        store.record_substep(kept_episode, call, false).unwrap();
        store.record_substep(other_episode, other_call, false).unwrap();
        let keep: HashSet<StepKey> = [kept_episode, call].into();
        gc(&store, Some(&keep)).unwrap();
        assert!(store.contains(call) && !store.contains(other_call));
        assert_eq!(store.substeps(kept_episode).unwrap(), vec![call]);
        assert!(store.substeps(other_episode).unwrap().is_empty());
        // Without --keep nothing sound is removed.
        gc(&store, None).unwrap();
        assert!(store.contains(call));
        assert_eq!(store.substeps(kept_episode).unwrap(), vec![call]);
    }
}
