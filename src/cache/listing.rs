//! One cache bucket's keys: which entries are there, from one directory read, remembered
//! in `v1/listings/<bucket>` while the directory is unchanged (issue 35: a million-cell
//! `status` spent most of its system time reading 2M names through ext4's hashed index).
//!
//! The memo is a convenience, never a source of answers (like [`super::memo`]): it is used
//! only while the directory's device, inode, modification and change times are those it
//! was read at, and adding, removing or renaming an entry changes them. It is written only
//! when the directory did not change while it was read, its modification time was at least
//! [`SETTLED`] old (a change in the same clock tick could keep the time), and every entry
//! was a plain file or directory (a symbolic link can change its target without touching
//! the directory). A torn or foreign memo fails its checksum and the directory is read.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::plan::StepKey;

/// How old a directory's modification time must be before its listing is remembered: more
/// than any filesystem's timestamp step (FAT's is 2 s).
const SETTLED: Duration = Duration::from_secs(3);

/// What a memo file starts with.
const MAGIC: &[u8; 20] = b"evalgrid listing v1\n";

/// A set of one bucket's keys, hashed by their bytes after the first (which the bucket
/// shares): keys are blake3 hashes, so eight of their bytes are already a good hash.
pub(super) type KeySet = HashSet<StepKey, BuildHasherDefault<KeyBytesHasher>>;

/// Takes a key's bytes 1..9 as its hash (see [`KeySet`]).
#[derive(Default)]
pub(super) struct KeyBytesHasher(u64);

impl Hasher for KeyBytesHasher {
    fn write(&mut self, bytes: &[u8]) {
        if let Some(word) = bytes.get(1..9).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            self.0 ^= u64::from_le_bytes(word);
        }
    }

    // The array's length, written before its bytes: the same for every key.
    fn write_usize(&mut self, _: usize) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

/// What identifies a directory's contents without reading them.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp([i64; 6]);

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[allow(clippy::cast_possible_wrap)] // device and inode numbers: compared, never used as numbers
        Self([meta.dev() as i64, meta.ino() as i64, meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec()])
    }

    fn bytes(self) -> [u8; 48] {
        let mut out = [0u8; 48];
        for (chunk, value) in out.chunks_exact_mut(8).zip(self.0) {
            chunk.copy_from_slice(&value.to_le_bytes());
        }
        out
    }
}

/// The keys of bucket `bucket` (`root/steps/<bb>`) whose entry is a file, as
/// [`super::Store::contains`] would say for each; `None` when asking `wanted` keys one by
/// one is cheaper than reading the directory, or it cannot be read to the end.
pub(super) fn bucket_keys(root: &Path, bucket: usize, wanted: usize, bytes_per_key: u64) -> Option<KeySet> {
    let dir = root.join("steps").join(format!("{bucket:02x}"));
    let meta = match std::fs::metadata(&dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(KeySet::default()),
        Err(_) => return None,
    };
    let stamp = Stamp::of(&meta);
    let memo = root.join("listings").join(format!("{bucket:02x}"));
    if let Some(keys) = recall(&memo, stamp) {
        return Some(keys);
    }
    if meta.len() > wanted as u64 * bytes_per_key {
        return None;
    }
    let (keys, plain) = read(&dir)?;
    let unchanged = std::fs::metadata(&dir).is_ok_and(|after| Stamp::of(&after) == stamp);
    let settled = meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age >= SETTLED);
    if plain && unchanged && settled {
        remember(root, &memo, stamp, &keys);
    }
    Some(keys)
}

/// Reads `dir`: its keys whose entry is a file (through a symbolic link too), and whether
/// every key's entry was a plain file or directory.
fn read(dir: &Path) -> Option<(KeySet, bool)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some((KeySet::default(), true)),
        Err(_) => return None,
    };
    let (mut keys, mut plain) = (KeySet::default(), true);
    for entry in entries {
        let entry = entry.ok()?;
        let name = entry.file_name();
        // Only the name `contains` would look up: 64 lower-case hex digits and `.json`.
        let Some(key) = name.as_encoded_bytes().strip_suffix(b".json").and_then(StepKey::from_lower_hex) else { continue };
        let is_file = match entry.file_type() {
            Ok(t) if t.is_file() => true,
            Ok(t) if t.is_dir() => false,
            _ => {
                plain = false;
                entry.path().is_file()
            }
        };
        if is_file {
            keys.insert(key);
        }
    }
    Some((keys, plain))
}

/// The memo's keys if it is whole and was read from the directory as it is now.
fn recall(memo: &Path, stamp: Stamp) -> Option<KeySet> {
    let bytes = std::fs::read(memo).ok()?;
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if blake3::hash(body).as_bytes() != sum {
        return None;
    }
    let rest = body.strip_prefix(MAGIC.as_slice())?.strip_prefix(stamp.bytes().as_slice())?;
    let (keys, tail) = rest.as_chunks::<32>();
    tail.is_empty().then(|| keys.iter().map(|k| StepKey::from_bytes(*k)).collect())
}

/// Writes the memo whole under a temporary name, then renames it into place; a cache that
/// cannot be written (read-only, full) just goes without.
fn remember(root: &Path, memo: &Path, stamp: Stamp, keys: &KeySet) {
    let mut body = Vec::with_capacity(MAGIC.len() + 48 + keys.len() * 32 + 32);
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&stamp.bytes());
    for key in keys {
        body.extend_from_slice(key.as_bytes());
    }
    let sum = blake3::hash(&body);
    body.extend_from_slice(sum.as_bytes());
    let write = || -> std::io::Result<()> {
        let dir = root.join("listings");
        std::fs::create_dir_all(&dir)?;
        let mut temp = tempfile::NamedTempFile::new_in(&dir)?;
        temp.write_all(&body)?;
        temp.persist(memo).map_err(|e| e.error)?;
        Ok(())
    };
    if let Err(error) = write() {
        tracing::debug!("cannot remember the listing of a cache bucket: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, key: StepKey) {
        let dir = root.join("steps").join(&key.to_hex()[..2]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{}.json", key.to_hex())), "{}").unwrap();
    }

    fn keys_in_bucket(bucket: u8, n: usize) -> Vec<StepKey> {
        (0..).map(|i: u64| StepKey::compute(&serde_json::json!(i))).filter(|k| k.as_bytes()[0] == bucket).take(n).collect()
    }

    fn age(dir: &Path, seconds: u64) {
        let then = std::time::SystemTime::now() - Duration::from_secs(seconds);
        std::fs::File::open(dir).unwrap().set_modified(then).unwrap();
    }

    /// A settled bucket is remembered and answered from the memo; removing or adding an entry
    /// behind its back is seen at once; a torn memo is read past.
    #[test]
    fn a_remembered_listing_is_used_only_while_the_directory_is_unchanged() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let keys = keys_in_bucket(7, 6);
        for key in &keys[..5] {
            put(root, *key);
        }
        let dir = root.join("steps").join("07");
        let memo = root.join("listings").join("07");
        assert_eq!(bucket_keys(root, 7, 5, 1 << 20).unwrap().len(), 5);
        assert!(!memo.exists(), "a directory changed in the last seconds is not remembered");
        age(&dir, 10);
        assert_eq!(bucket_keys(root, 7, 5, 1 << 20).unwrap().len(), 5);
        assert!(memo.exists());
        // Answered from the memo: a memo with a key that is not there would say so.
        assert_eq!(bucket_keys(root, 7, 0, 0).unwrap().len(), 5, "no read of the directory needed");
        std::fs::remove_file(dir.join(format!("{}.json", keys[0].to_hex()))).unwrap();
        let now = bucket_keys(root, 7, 5, 1 << 20).unwrap();
        assert!(!now.contains(&keys[0]) && now.len() == 4, "a removed entry is missing at once");
        put(root, keys[5]);
        assert!(bucket_keys(root, 7, 5, 1 << 20).unwrap().contains(&keys[5]), "an added entry is there at once");
        age(&dir, 10);
        bucket_keys(root, 7, 5, 1 << 20).unwrap();
        let mut torn = std::fs::read(&memo).unwrap();
        torn.truncate(torn.len() - 40);
        std::fs::write(&memo, torn).unwrap();
        assert_eq!(bucket_keys(root, 7, 5, 1 << 20).unwrap().len(), 5, "a torn memo is read past");
    }

    /// A bucket holding a symbolic link is never remembered: its target can change alone.
    #[test]
    fn a_bucket_with_a_link_is_read_every_time() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let keys = keys_in_bucket(9, 2);
        put(root, keys[0]);
        let dir = root.join("steps").join("09");
        let target = root.join("target.json");
        std::fs::write(&target, "{}").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(format!("{}.json", keys[1].to_hex()))).unwrap();
        age(&dir, 10);
        assert_eq!(bucket_keys(root, 9, 2, 1 << 20).unwrap().len(), 2);
        assert!(!root.join("listings").join("09").exists());
        std::fs::remove_file(&target).unwrap();
        assert_eq!(bucket_keys(root, 9, 2, 1 << 20).unwrap().len(), 1, "a dangling link is no entry");
    }
}
