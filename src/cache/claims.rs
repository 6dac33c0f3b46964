//! Claims on model calls, so two evalgrid processes on one cache pay each call once.
//!
//! A claim is an exclusive lock on one byte of `locks/claims-<s>.lock`, at an offset taken from
//! the call's key (62 bits of it: two keys share a byte about once in 10^18 pairs, and then
//! one of them only waits for the other). The byte-range lock (`fcntl`, through `file-guard`)
//! costs two system calls and touches no directory, where a lock file per call cost a create,
//! a lock, two stats and an unlink. The kernel drops a dead process's locks with its
//! descriptors, also on `kill -9`. Each file is opened once per process (by one thread, even
//! when many claim at once) and never closed while claims are held: POSIX record locks belong
//! to the process and go away when any descriptor of the file is closed, so nothing else
//! opens it.
//!
//! The claims are spread over [`SHARDS`] files by another byte of the key: the kernel keeps one
//! list of record locks per file and walks it on every lock and unlock, so 256 calls in flight
//! on one file made each claim walk 256 entries (3 % of a busy run's CPU); 64 files keep the
//! lists about 4 long.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use file_guard::{FileGuard, Lock};

use crate::plan::StepKey;

/// Offsets stay below 2^62, inside every platform's signed file offset.
const OFFSET_MASK: u64 = (1 << 62) - 1;

/// How every claim file's name starts (`cache gc` leaves them alone).
pub const FILE_PREFIX: &str = "claims-";

/// How many claim files a cache has (a power of two).
pub const SHARDS: usize = 64;

/// The claim files of one cache, each opened on first use.
#[derive(Debug)]
pub struct Claims {
    dir: PathBuf,
    files: [OnceLock<Arc<File>>; SHARDS],
    /// Held while a claim file is opened, so each is opened once.
    opening: Mutex<()>,
}

/// A held claim on one call; released on drop.
pub struct Claim {
    _guard: FileGuard<Arc<File>>,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Claim")
    }
}

impl Claims {
    /// The claims kept in `locks_dir/claims-<s>.lock`.
    #[must_use]
    pub fn new(locks_dir: &Path) -> Self {
        Self { dir: locks_dir.to_path_buf(), files: std::array::from_fn(|_| OnceLock::new()), opening: Mutex::new(()) }
    }

    /// The path of the claim file that holds `key`'s claim (for error messages).
    #[must_use]
    pub fn path(&self, key: StepKey) -> PathBuf {
        self.dir.join(format!("{FILE_PREFIX}{:02x}.lock", shard(key)))
    }

    /// Claims `key` without waiting: `Ok(None)` when another process holds it.
    pub fn try_claim(&self, key: StepKey) -> std::io::Result<Option<Claim>> {
        let file = self.file(key)?;
        match file_guard::try_lock(file, Lock::Exclusive, offset(key), 1) {
            Ok(guard) => Ok(Some(Claim { _guard: guard })),
            Err(error) if error.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn file(&self, key: StepKey) -> std::io::Result<Arc<File>> {
        let slot = &self.files[shard(key)];
        if let Some(file) = slot.get() {
            return Ok(Arc::clone(file));
        }
        // Opened by one thread only: closing a second descriptor of the file, even one that
        // never held a lock, would drop every claim this process holds in it.
        let _opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(file) = slot.get() {
            return Ok(Arc::clone(file));
        }
        let opened = Arc::new(OpenOptions::new().read(true).write(true).create(true).truncate(false).open(self.path(key))?);
        Ok(Arc::clone(slot.get_or_init(|| opened)))
    }
}

/// The claim file of `key`: a key byte the offset does not use.
fn shard(key: StepKey) -> usize {
    usize::from(key.as_bytes()[8]) % SHARDS
}

/// The byte claimed for `key`.
fn offset(key: StepKey) -> usize {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&key.as_bytes()[..8]);
    usize::try_from(u64::from_le_bytes(bytes) & OFFSET_MASK).unwrap_or(usize::MAX >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> StepKey {
        format!("{n:02x}").repeat(32).parse().unwrap()
    }

    /// Whether another process (Python's `fcntl.lockf`, an independent implementation of the
    /// same POSIX record locks) can take the byte of `key` right now.
    fn free_for_another_process(claims: &Claims, key: StepKey) -> bool {
        free_of(claims, &[key]) == [key]
    }

    #[test]
    fn a_claim_keeps_other_processes_out_until_dropped_and_leaves_a_few_files() {
        let dir = tempfile::tempdir().unwrap();
        let claims = Claims::new(dir.path());
        // Keys 0x01.., 0x41.. and 0x81.. share a claim file; 0x02.. has another.
        assert_eq!(claims.path(key(1)), claims.path(key(0x41)));
        assert_ne!(claims.path(key(1)), claims.path(key(2)));
        let held = claims.try_claim(key(1)).unwrap().expect("free");
        let other = claims.try_claim(key(0x41)).unwrap().expect("another key is free");
        let elsewhere = claims.try_claim(key(2)).unwrap().expect("a key in another file is free");
        assert!(!free_for_another_process(&claims, key(1)), "claimed: another process is kept out");
        assert!(!free_for_another_process(&claims, key(0x41)));
        assert!(!free_for_another_process(&claims, key(2)));
        assert!(free_for_another_process(&claims, key(0x81)), "an unclaimed call is free");
        drop(held);
        assert!(free_for_another_process(&claims, key(1)), "released on drop");
        assert!(!free_for_another_process(&claims, key(0x41)), "releasing one claim keeps the others in its file");
        assert!(!free_for_another_process(&claims, key(2)), "and in the other files");
        drop((other, elsewhere));
        assert!(free_for_another_process(&claims, key(2)));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "one claim file per shard used, none per call");
    }

    /// A key in claim file `shard` whose claimed byte is `n`.
    fn key_in(shard: u8, n: u8) -> StepKey {
        let mut bytes = [0u8; 32];
        bytes[0] = n;
        bytes[8] = shard;
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>().parse().unwrap()
    }

    /// Which of `keys` (all in one claim file) another process could take right now, asked of
    /// one Python process.
    fn free_of(claims: &Claims, keys: &[StepKey]) -> Vec<StepKey> {
        let script = "import fcntl, sys\nf = open(sys.argv[1], 'r+')\nfor o in sys.argv[2:]:\n    try:\n        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(o))\n        fcntl.lockf(f, fcntl.LOCK_UN, 1, int(o))\n        print(o)\n    except OSError:\n        pass\n";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(claims.path(keys[0]))
            .args(keys.iter().map(|k| offset(*k).to_string()))
            .output()
            .expect("python3");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let free: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
        keys.iter().copied().filter(|k| free.contains(&offset(*k).to_string())).collect()
    }

    /// POSIX record locks go when the process closes *any* descriptor of the file: threads
    /// that open a claim file at the same moment must not open it twice, or the loser's
    /// close drops the winner's claims and another process pays the same call again.
    #[test]
    fn claims_taken_at_once_by_many_threads_on_a_fresh_file_all_hold() {
        const THREADS: u8 = 8;
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let claims = Claims::new(dir.path());
            let keys: Vec<StepKey> = (0..THREADS).map(|n| key_in(5, n + 1)).collect();
            let barrier = std::sync::Barrier::new(usize::from(THREADS));
            let held: Vec<Claim> = std::thread::scope(|s| {
                let handles: Vec<_> = keys
                    .iter()
                    .map(|k| {
                        let (claims, barrier) = (&claims, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            claims.try_claim(*k).unwrap().expect("a distinct key is free")
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(free_of(&claims, &keys), Vec::<StepKey>::new(), "round {round}: every claim taken is held against other processes");
            drop(held);
            assert_eq!(free_of(&claims, &keys).len(), keys.len());
        }
    }

    #[test]
    fn offsets_differ_by_key_and_fit_a_signed_offset() {
        assert_ne!(offset(key(1)), offset(key(2)));
        assert!(offset(key(0xff)) < (1 << 62));
    }
}
