//! Which of many keys have a local entry: one directory read per bucket instead of one
//! `stat` per key, which is what a no-op `status` on a large grid asks (issue 35); a
//! bucket that has not changed since it was last read is answered from its remembered
//! listing ([`super::listing`]).
//!
//! Every answer is what `stat`s at that moment would have said: an entry removed behind a
//! run's back (`cache gc`, `rm`) is missing, and one another process added is there.

use rayon::prelude::*;

use super::Store;
use super::listing::bucket_keys;
use crate::plan::StepKey;

/// Directory bytes per key to find up to which a bucket is read whole, else each key is
/// asked: about eight entries per key on ext4 (a `stat` costs several entries' share of a
/// read), so a small grid on a large cache still asks key by key.
const READ_BYTES_PER_KEY: u64 = 640;

impl Store {
    /// Whether each of `count` keys (`key(i)`) has an entry, as [`Store::contains`] says
    /// for each; a bucket directory that holds many of them is read once instead. With a
    /// shared remote each key is asked as `contains` does.
    #[must_use]
    pub fn contains_each(&self, count: usize, key: impl Fn(usize) -> StepKey + Sync) -> Vec<bool> {
        if self.remote().is_some() || u32::try_from(count).is_err() {
            return (0..count).into_par_iter().map(|i| self.contains(key(i))).collect();
        }
        // Buckets are taken a group at a time, so that the keys waiting for their bucket's
        // listing take a few MB whatever the grid's size (`status`'s memory goal).
        self.contains_in_passes(count, &key, 256 / (count >> 18).clamp(1, 16).next_power_of_two())
    }

    /// [`Store::contains_each`] over `per_pass` buckets (a power of two) at a time.
    fn contains_in_passes(&self, count: usize, key: &(impl Fn(usize) -> StepKey + Sync), per_pass: usize) -> Vec<bool> {
        let mut out = vec![false; count];
        // Each key's bucket, read once: a pass scans these bytes, not the keys' holders.
        let bucket_of: Vec<u8> = (0..count).into_par_iter().map(|i| key(i).as_bytes()[0]).collect();
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); per_pass];
        for first in (0..256).step_by(per_pass) {
            buckets.iter_mut().for_each(Vec::clear);
            for (i, &bucket) in (0..count as u32).zip(&bucket_of) {
                if let Some(keys) = usize::from(bucket).checked_sub(first).and_then(|at| buckets.get_mut(at)) {
                    keys.push(i);
                }
            }
            let found: Vec<Vec<bool>> = buckets.par_iter().enumerate().map(|(at, indices)| self.bucket_has(first + at, indices, key)).collect();
            for (indices, has) in buckets.iter().zip(found) {
                for (&i, has) in indices.iter().zip(has) {
                    out[i as usize] = has;
                }
            }
        }
        out
    }

    fn bucket_has(&self, bucket: usize, indices: &[u32], key: &(impl Fn(usize) -> StepKey + Sync)) -> Vec<bool> {
        if indices.is_empty() {
            return Vec::new();
        }
        match bucket_keys(self.root(), bucket, indices.len(), READ_BYTES_PER_KEY) {
            Some(present) => indices.iter().map(|&i| present.contains(&key(i as usize))).collect(),
            None => indices.iter().map(|&i| self.contains(key(i as usize))).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Entry;
    use crate::plan::StepKind;
    use serde_json::json;

    fn key(n: usize) -> StepKey {
        StepKey::compute(&json!({ "n": n }))
    }

    fn put(store: &Store, n: usize) {
        let entry = Entry { key: key(n), kind: StepKind::Call, components: json!({}), output: json!(n), duration_ms: 0, writer: String::new() };
        store.put(&entry).unwrap();
    }

    /// Enough keys that every bucket is read whole, and a few left to `stat`s: both
    /// answer what `contains` answers, for files, a gap, a directory and links.
    #[test]
    fn says_what_contains_says_for_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let count = 256 * 64;
        for n in (0..count).filter(|n| n % 3 != 0) {
            put(&store, n);
        }
        std::fs::remove_file(store.entry_path(key(1))).unwrap();
        std::fs::remove_file(store.entry_path(key(2))).unwrap();
        std::fs::create_dir(store.entry_path(key(2))).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(store.entry_path(key(4)), store.entry_path(key(3))).unwrap();
            std::os::unix::fs::symlink(dir.path().join("nowhere"), store.entry_path(key(6))).unwrap();
        }
        let each = store.contains_each(count, key);
        let expected: Vec<bool> = (0..count).map(|n| store.contains(key(n))).collect();
        assert_eq!(each, expected);
        assert!(!each[0] && !each[1] && !each[2] && each[4] && each[5]);
        assert_eq!(each[3], cfg!(unix));
        assert_eq!(store.contains_each(5, key), expected[..5], "a few keys");
        assert_eq!(store.contains_in_passes(count, &key, 16), expected, "buckets taken 16 at a time");
    }
}
