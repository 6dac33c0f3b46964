//! The content-addressed store on disk.
//!
//! Layout under the cache directory (the `v1` bucket is bumped whenever the
//! record format changes, so old and new never mix):
//!
//! ```text
//! v1/steps/ab/<key>.json      finished steps (header + JSON, verified on read)
//! v1/blobs/ab/<blake3>        large outputs, addressed by their own hash
//! v1/heads/ab/<id-hash>.json  last keys seen for a cell, to explain staleness
//! v1/failures/ab/<key>.json   last error of a step (never served as an answer)
//! v1/substeps/ab/<episode>    sub-step keys an episode used, one hex key a line
//! v1/locks/<key>.lock         per-key OS locks
//! v1/progress/<run>/<part>.json  what each running shard has done (for `status`)
//! v1/tmp/ab/                  temp files, renamed into place when complete
//! ```
//!
//! Every write goes to a temp file under `tmp/`, then is renamed or linked into
//! place, so a killed process leaves either the old state or the complete new
//! file. Sub-step indexes are the one exception: they are append-only, and a
//! torn last line is skipped on read. Durability against a machine crash is
//! batched ([`super::commit`]): one `syncfs` per batch, not one `fsync` per
//! file; a file lost or torn by a crash fails its checksum and is a miss.
//!
//! Step entries are **first writer wins**: an entry is published with a
//! create-if-absent link (`persist_noclobber`), not a rename over whatever is
//! there, so on a cache shared between machines (NFS, Lustre), where `flock`
//! does not reach across hosts, two processes that computed the same step
//! never replace each other's answer: the loser reads, verifies and adopts
//! the stored entry. Model answers differ between runs, and later steps are
//! keyed by earlier keys, so one key must mean one answer everywhere.
//!
//! With a shared remote ([`Store::open_shared`], `--cache s3://…`) the remote is the
//! source of truth and this directory a read-through copy: reads try the local copy
//! (verified), then the remote (verified, then copied here); entries and blobs are
//! published remotely first ([`super::remote`]), then copied here. Heads, failures and
//! progress records are written to both (last writer wins); locks, sub-step indexes and
//! the maintenance commands (`cache verify|stats|gc`) stay local to this directory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::claims::{Claim, Claims};
use super::commit::GroupCommit;
pub use super::entry::{BUCKET, Stored};
use super::entry::{DecodeError, Entry};
use super::lock::KeyLock;
use super::remote::{Remote, RemoteError};
use crate::plan::{StepKey, StepKind};

/// A file-name-safe form of a run or part name.
fn safe_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

/// Errors from the store. A corrupt entry is *not* an error (it is a miss).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Filesystem failure, with the path involved.
    #[error("cache I/O failed at `{path}`")]
    Io {
        /// File or directory involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The shared remote store failed (the local copy is unchanged).
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

impl CacheError {
    /// Whether a write failed for lack of space (a full disk or an exhausted quota): every
    /// later write will fail too, so callers stop starting paid work.
    #[must_use]
    pub fn is_storage_full(&self) -> bool {
        match self {
            Self::Io { source, .. } => {
                matches!(source.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
            }
            Self::Remote(_) => false,
        }
    }
}

/// An I/O error at `path`, as the cache reports it (every cache module's one mapping).
pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.to_owned(), source }
}

/// What is remembered about the last run of a cell, for `status --explain`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Head {
    /// Cell id (`model/benchmark/task/seed`).
    pub cell: String,
    /// Episode key last completed for it.
    pub episode_key: StepKey,
    /// Its components.
    pub episode_components: Value,
    /// Score key last completed for it.
    pub score_key: StepKey,
    /// Its components.
    pub score_components: Value,
}

/// The last error of a step; kept apart from answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Failure {
    /// Failed step.
    pub key: StepKey,
    /// Cell it belongs to.
    pub cell: String,
    /// Step kind.
    pub kind: StepKind,
    /// Error message chain.
    pub error: String,
}

/// Handle to a cache directory, and to the shared remote it is a copy of, if any.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    remote: Option<Arc<Remote>>,
    commit: Arc<GroupCommit>,
    /// False while this directory holds no failure record (none at open, none written
    /// since): storing an entry then has no failure to clear, and skips the unlink.
    failures_seen: Arc<AtomicBool>,
    /// The directory is on a local disk filesystem and there is no shared remote, so a
    /// cache read or write takes microseconds ([`Store::quick_io`]).
    quick_io: bool,
    /// This run's answer journal, once reserved ([`super::journal`]).
    pub(super) journal: Arc<super::journal::JournalSlot>,
    /// Cross-process claims on model calls, in a few lock files shared by all of them.
    claims: Arc<Claims>,
}

impl Store {
    /// Opens (creating if needed) the cache at `dir`.
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        let root = dir.join(BUCKET);
        for sub in ["steps", "blobs", "heads", "failures", "locks", "tmp"] {
            let p = root.join(sub);
            fs_err::create_dir_all(&p).map_err(|e| CacheError::Io { path: p.clone(), source: e })?;
        }
        let commit = GroupCommit::start(&root).map_err(io(&root))?;
        let failures = root.join("failures");
        let failures_seen = std::fs::read_dir(&failures).map_err(io(&failures))?.next().is_some();
        let quick_io = crate::platform::is_local_filesystem(&root);
        let claims = Arc::new(Claims::new(&root.join("locks")));
        Ok(Self {
            root,
            remote: None,
            commit: Arc::new(commit),
            failures_seen: Arc::new(AtomicBool::new(failures_seen)),
            quick_io,
            journal: Arc::default(),
            claims,
        })
    }

    /// Whether a cache read or write may run on the async worker that needs it: the cache
    /// is on a local disk and has no shared remote. Handing each one to a blocking thread
    /// cost a loopback run 5–7 % of its throughput (BENCHMARKS.md); on a network filesystem
    /// or with an S3 remote an operation is a round trip, and goes to a blocking thread.
    #[must_use]
    pub fn quick_io(&self) -> bool {
        self.quick_io
    }

    /// Waits until everything this process wrote to the cache so far survives a machine
    /// crash (one batched `syncfs`); a run calls it before it reports success.
    pub fn flush(&self) -> Result<(), CacheError> {
        self.commit.flush().map_err(io(&self.root))
    }

    /// Opens the cache at `dir` as the read-through copy of a shared `remote` (already
    /// probed), which decides every entry: several machines then share one cache.
    pub fn open_shared(dir: &Path, remote: Remote) -> Result<Self, CacheError> {
        Ok(Self { remote: Some(Arc::new(remote)), quick_io: false, ..Self::open(dir)? })
    }

    /// The shared remote, when this directory is a copy of one.
    #[must_use]
    pub fn remote(&self) -> Option<&Remote> {
        self.remote.as_deref()
    }

    /// Root of the versioned bucket.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn sharded(&self, area: &str, name: &str, ext: &str) -> PathBuf {
        self.root.join(area).join(&name[..2]).join(format!("{name}{ext}"))
    }

    /// Path of the entry file for `key`.
    #[must_use]
    pub fn entry_path(&self, key: StepKey) -> PathBuf {
        self.sharded("steps", &key.to_hex(), ".json")
    }

    /// Cheap existence test (no read of a local file); `get` verifies the content. On a
    /// local miss a shared remote is asked (and a found entry copied here); a remote that
    /// cannot be reached counts as a miss.
    #[must_use]
    pub fn contains(&self, key: StepKey) -> bool {
        self.entry_path(key).is_file() || (self.remote.is_some() && matches!(self.get(key), Ok(Some(_))))
    }

    /// Reads and verifies the entry for `key`; corrupt entries are misses. On a local miss
    /// a shared remote is read (verified), and what it has is copied here.
    pub fn get(&self, key: StepKey) -> Result<Option<Entry>, CacheError> {
        match (self.read_local(key, Entry::decode)?, &self.remote) {
            (Some(entry), _) => Ok(Some(entry)),
            (None, None) => Ok(None),
            (None, Some(remote)) => {
                let found = remote.get(key)?;
                if let Some(entry) = &found {
                    self.write_atomic(&self.entry_path(key), &entry.encode())?;
                }
                Ok(found)
            }
        }
    }

    /// The local entry file of `key` decoded by `decode`; a missing, corrupt or undecodable
    /// file is `None`, and so is one that cannot be read at all (a directory in its place, a
    /// bad sector): a damaged entry is a miss that is computed again and replaced, never a
    /// reason to stop every later run (issue 21).
    fn read_local<T, E>(&self, key: StepKey, decode: impl FnOnce(&[u8], StepKey) -> Result<T, E>) -> Result<Option<T>, CacheError> {
        let path = self.entry_path(key);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(decode(&bytes, key).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read a cache entry ({e}); treating it as a miss");
                Ok(None)
            }
        }
    }

    /// The output of the entry for `key`, read as `T` without parsing the rest of the
    /// record (the report needs one field of each episode); a miss, a corrupt entry or an
    /// output that is not a `T` is `None`. A shared remote is asked as [`Store::get`] does.
    pub fn get_output<T: serde::de::DeserializeOwned>(&self, key: StepKey) -> Result<Option<T>, CacheError> {
        match (self.read_local(key, Entry::decode_output)?, &self.remote) {
            (Some(output), _) => Ok(Some(output)),
            (None, None) => Ok(None),
            (None, Some(_)) => Ok(self.get(key)?.and_then(|e| serde_json::from_value(e.output).ok())),
        }
    }

    /// Stores an entry unless a valid one is already there (first writer wins), and
    /// clears any recorded failure of its key. `Adopted` carries the entry another
    /// process stored first: use it instead of your own.
    pub fn put(&self, entry: &Entry) -> Result<Stored, CacheError> {
        let path = self.entry_path(entry.key);
        if let Some(remote) = &self.remote {
            // The remote decides; this directory copies whatever won there.
            let stored = remote.put(entry)?;
            let winner = match &stored {
                Stored::Written => entry,
                Stored::Adopted(existing) => existing,
            };
            self.write_atomic(&path, &winner.encode())?;
            // A failure recorded from here is cleared on both sides; one recorded by another
            // machine is superseded by the entry (`status` checks cached before failed).
            if std::fs::symlink_metadata(self.failure_path(entry.key)).is_ok() {
                self.clear_failure(entry.key)?;
            }
            return Ok(stored);
        }
        self.put_local(entry.key, &entry.encode())
    }

    /// [`Store::put`] of an entry already encoded ([`Entry::encode_parts`]); `entry` builds
    /// it whole, which only a remote needs.
    pub fn put_encoded(&self, key: StepKey, encoded: &[u8], entry: impl FnOnce() -> Entry) -> Result<Stored, CacheError> {
        if self.remote.is_some() {
            return self.put(&entry());
        }
        self.put_local(key, encoded)
    }

    fn put_local(&self, key: StepKey, bytes: &[u8]) -> Result<Stored, CacheError> {
        let path = self.entry_path(key);
        let stored = if self.write_new(&path, bytes)? {
            Stored::Written
        } else if let Some(existing) = self.get(key)? {
            Stored::Adopted(existing)
        } else {
            // What is there does not verify (a torn or damaged file): replace it.
            self.write_atomic(&path, bytes)?;
            Stored::Written
        };
        self.clear_failure(key)?;
        Ok(stored)
    }

    /// Stores `entry` over whatever is stored under its key (here and on a shared remote).
    /// Only for an answer the user asked to be re-asked (`run --retry-outcome`): every other
    /// write is first-writer-wins ([`Store::put`]).
    pub fn replace(&self, entry: &Entry) -> Result<(), CacheError> {
        if let Some(remote) = &self.remote {
            remote.overwrite(entry)?;
        }
        self.write_atomic(&self.entry_path(entry.key), &entry.encode())?;
        self.clear_failure(entry.key)
    }

    /// Stores bytes under their own blake3 hash and returns the hash. With a shared remote
    /// the blob is remote when this returns, so an entry stored afterwards never names a
    /// missing blob.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, CacheError> {
        let hash = blake3::hash(bytes).to_hex().to_string();
        let path = self.sharded("blobs", &hash, "");
        // What is there is kept only when it is these bytes: a damaged blob is replaced.
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64) || std::fs::read(&path).ok().as_deref() != Some(bytes) {
            self.write_atomic(&path, bytes)?;
        }
        if let Some(remote) = &self.remote {
            remote.put_blob(&hash, bytes)?;
        }
        Ok(hash)
    }

    /// Reads a blob, returning `None` when missing or when its content no longer matches its
    /// hash; a damaged blob is removed, so that storing the same bytes again repairs it.
    pub fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, CacheError> {
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let path = self.sharded("blobs", hash, "");
        match std::fs::read(&path) {
            Ok(bytes) if blake3::hash(&bytes).to_hex().as_str() == hash => return Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            damaged => {
                let why = damaged.err().map_or_else(|| "content does not match its hash".to_owned(), |e| e.to_string());
                tracing::warn!(path = %path.display(), "removing a damaged cache blob ({why})");
                remove_any(&path)?;
            }
        }
        let Some(remote) = &self.remote else { return Ok(None) };
        let found = remote.get_blob(hash)?;
        if let Some(bytes) = &found {
            self.write_atomic(&path, bytes)?;
        }
        Ok(found)
    }

    /// Path of a record relative to the bucket, as the remote names it too.
    fn rel(&self, path: &Path) -> Option<String> {
        path.strip_prefix(&self.root).ok().and_then(Path::to_str).map(str::to_owned)
    }

    /// Writes an informational record here and, with a shared remote, there (overwrite).
    fn put_record(&self, path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
        self.write_atomic(path, bytes)?;
        if let (Some(remote), Some(rel)) = (&self.remote, self.rel(path)) {
            remote.put_record(&rel, bytes)?;
        }
        Ok(())
    }

    /// Reads an informational record: the remote's when there is one and it answers, else ours.
    fn get_record(&self, path: &Path) -> Option<Vec<u8>> {
        if let (Some(remote), Some(rel)) = (&self.remote, self.rel(path))
            && let Ok(found) = remote.get_record(&rel)
        {
            return found;
        }
        std::fs::read(path).ok()
    }

    /// Takes the per-key lock without waiting (`None` = someone else has it).
    pub fn try_lock(&self, key: StepKey) -> Result<Option<KeyLock>, CacheError> {
        let path = self.lock_path(key);
        KeyLock::try_acquire(&path).map_err(io(&path))
    }

    /// Claims `key` for one computation without waiting (`None` = another process holds
    /// it), so two processes on one cache send each model call once ([`super::claims`]).
    pub fn try_claim(&self, key: StepKey) -> Result<Option<Claim>, CacheError> {
        self.claims.try_claim(key).map_err(io(&self.claims.path(key)))
    }

    /// Waits for the per-key lock (blocking; call from a blocking thread).
    pub fn lock(&self, key: StepKey) -> Result<KeyLock, CacheError> {
        let path = self.lock_path(key);
        KeyLock::acquire(&path).map_err(io(&path))
    }

    fn lock_path(&self, key: StepKey) -> PathBuf {
        self.root.join("locks").join(format!("{}.lock", key.to_hex()))
    }

    fn head_path(&self, cell: &str) -> PathBuf {
        let name = blake3::hash(cell.as_bytes()).to_hex().to_string();
        self.sharded("heads", &name, ".json")
    }

    /// Remembers the keys a cell completed with.
    pub fn set_head(&self, head: &Head) -> Result<(), CacheError> {
        let bytes = serde_json::to_vec(head).expect("heads are plain JSON values and always serialize");
        self.put_record(&self.head_path(&head.cell), &bytes)
    }

    /// The keys a cell last completed with, if any (unreadable = none).
    #[must_use]
    pub fn head(&self, cell: &str) -> Option<Head> {
        let bytes = self.get_record(&self.head_path(cell))?;
        serde_json::from_slice::<Head>(&bytes).ok().filter(|h| h.cell == cell)
    }

    fn failure_path(&self, key: StepKey) -> PathBuf {
        self.sharded("failures", &key.to_hex(), ".json")
    }

    /// Records why a step failed (for `status` and `--retry-errors`).
    pub fn record_failure(&self, failure: &Failure) -> Result<(), CacheError> {
        let bytes = serde_json::to_vec(failure).expect("failures are plain JSON values and always serialize");
        self.failures_seen.store(true, Ordering::SeqCst);
        self.put_record(&self.failure_path(failure.key), &bytes)
    }

    /// The recorded failure of `key`, if any. A record that is there but cannot be read or
    /// parsed still says the step failed (its cause is lost: `cell` is empty), so that
    /// `--retry-errors` retries it and `status` says so, instead of calling it never run.
    #[must_use]
    pub fn failure(&self, key: StepKey) -> Option<Failure> {
        let path = self.failure_path(key);
        if let Some(bytes) = self.get_record(&path)
            && let Ok(failure) = serde_json::from_slice(&bytes)
        {
            return Some(failure);
        }
        std::fs::symlink_metadata(&path).is_ok().then(|| Failure {
            key,
            cell: String::new(),
            kind: StepKind::Episode,
            error: "unknown: its failure record in the cache is damaged".to_owned(),
        })
    }

    /// Forgets a recorded failure (after a success), here and on a shared remote.
    pub fn clear_failure(&self, key: StepKey) -> Result<(), CacheError> {
        if self.remote.is_none() && !self.failures_seen.load(Ordering::SeqCst) {
            return Ok(());
        }
        let path = self.failure_path(key);
        if let (Some(remote), Some(rel)) = (&self.remote, self.rel(&path)) {
            remote.delete_record(&rel)?;
        }
        remove_any(&path)
    }

    /// Removes the local entry of `key`, so that it is computed and stored again. Only for
    /// steps that are a pure function of their key (metrics, report), whose entry names
    /// blobs that are gone; a model answer is never evicted.
    pub fn evict(&self, key: StepKey) -> Result<(), CacheError> {
        remove_any(&self.entry_path(key))
    }

    /// A temp file holding `bytes`, beside the others of `path`'s shard (`tmp/ab/`), so
    /// concurrent writers do not all queue on one directory's lock. Not synced here: the
    /// group commit makes it durable with its batch.
    fn temp_with(&self, path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile, CacheError> {
        let shard = path.parent().and_then(Path::file_name).map_or_else(|| "00".into(), |n| n.to_string_lossy().into_owned());
        let tmp_dir = self.root.join("tmp").join(shard);
        let mut tmp = in_made_dir(&tmp_dir, &tmp_dir, || tempfile::NamedTempFile::new_in(&tmp_dir))?;
        tmp.write_all(bytes).map_err(io(tmp.path()))?;
        Ok(tmp)
    }

    /// Publishes `bytes` at `path` only if nothing is there (temp file, then a
    /// create-if-absent rename or link); `false` when something was.
    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<bool, CacheError> {
        self.publish(self.temp_with(path, bytes)?, path, false)
    }

    /// Writes `bytes` to `path` through a temp file and a rename (replacing what is there).
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
        self.publish(self.temp_with(path, bytes)?, path, true).map(|_| ())
    }

    /// Moves a temp file to `path` (creating its shard directory on first use) and
    /// adds it to the group commit; `false` when `replace` is off and `path` exists.
    fn publish(&self, tmp: tempfile::NamedTempFile, path: &Path, replace: bool) -> Result<bool, CacheError> {
        let attempt = |tmp: tempfile::NamedTempFile| if replace { tmp.persist(path) } else { tmp.persist_noclobber(path) };
        let result = match attempt(tmp) {
            Err(e) if e.error.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                attempt(e.file)
            }
            // A directory where a file belongs is damage: replace it.
            Err(e) if replace && path.is_dir() => {
                remove_any(path)?;
                attempt(e.file)
            }
            other => other,
        };
        match result {
            Ok(_) => {
                self.commit.note(path);
                Ok(true)
            }
            Err(e) if !replace && e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(CacheError::Io { path: path.to_owned(), source: e.error }),
        }
    }

    /// Publishes the progress record of one part (`shard`) of a run, replacing the last.
    pub fn put_progress(&self, run: &str, part: &str, record: &Value) -> Result<(), CacheError> {
        let bytes = serde_json::to_vec(record).expect("progress records are plain JSON values and always serialize");
        self.put_record(&self.root.join("progress").join(safe_name(run)).join(format!("{}.json", safe_name(part))), &bytes)
    }

    /// Every part's progress record of `run`, by part name (unreadable records skipped);
    /// with a shared remote, the remote's records (every machine's) come first.
    pub fn progress(&self, run: &str) -> Result<Vec<(String, Value)>, CacheError> {
        let dir = self.root.join("progress").join(safe_name(run));
        let mut out: Vec<(String, Value)> = Vec::new();
        if let (Some(remote), Some(rel)) = (&self.remote, self.rel(&dir)) {
            for (name, bytes) in remote.list_records(&rel)? {
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    out.push((name.trim_end_matches(".json").to_owned(), v));
                }
            }
        }
        let remote_parts: std::collections::HashSet<String> = out.iter().map(|(n, _)| n.clone()).collect();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out.sort_by(|a, b| a.0.cmp(&b.0));
                return Ok(out);
            }
            Err(e) => return Err(CacheError::Io { path: dir, source: e }),
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().trim_end_matches(".json").to_owned();
            if remote_parts.contains(&name) {
                continue;
            }
            if let Some(v) = std::fs::read(entry.path()).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()) {
                out.push((name, v));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn substeps_path(&self, episode: StepKey) -> PathBuf {
        self.sharded("substeps", &episode.to_hex(), "")
    }

    /// Records that `episode` used sub-step `key`, so `gc --keep` finds it
    /// from the cell even when the episode never finished. One append per
    /// use; `durable` puts it in the group commit's batch (written before a
    /// fresh entry, so it is never younger than the entry it names).
    pub fn record_substep(&self, episode: StepKey, key: StepKey, durable: bool) -> Result<(), CacheError> {
        let path = self.substeps_path(episode);
        let shard = path.parent().unwrap_or(&self.root);
        let mut file = in_made_dir(shard, &path, || std::fs::OpenOptions::new().create(true).append(true).open(&path))?;
        // One write call: concurrent appenders never interleave inside a line.
        file.write_all(format!("{}\n", key.to_hex()).as_bytes()).map_err(io(&path))?;
        if durable {
            self.commit.note(&path);
        }
        Ok(())
    }

    /// The sub-step keys recorded under `episode`, first use first, without
    /// repeats; none when it has no index.
    pub fn substeps(&self, episode: StepKey) -> Result<Vec<StepKey>, CacheError> {
        let path = self.substeps_path(episode);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(parse_substeps(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(CacheError::Io { path, source: e }),
        }
    }

    /// Every sub-step index file with the episode key it belongs to (for gc).
    pub fn substep_indexes(&self) -> Result<Vec<(StepKey, PathBuf)>, CacheError> {
        let mut out = Vec::new();
        let dir = self.root.join("substeps");
        let shards = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(CacheError::Io { path: dir, source: e }),
        };
        for shard in shards {
            let shard = shard.map_err(io(&dir))?.path();
            if !shard.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(&shard).map_err(io(&shard))? {
                let p = file.map_err(io(&shard))?.path();
                if let Some(key) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<StepKey>().ok()) {
                    out.push((key, p));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Iterates over every entry file path (for verify, stats and gc).
    pub fn entry_files(&self) -> Result<Vec<PathBuf>, CacheError> {
        let mut out = Vec::new();
        let steps = self.root.join("steps");
        for shard in std::fs::read_dir(&steps).map_err(io(&steps))? {
            let shard = shard.map_err(io(&steps))?.path();
            if !shard.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(&shard).map_err(io(&shard))? {
                let p = file.map_err(io(&shard))?.path();
                if p.extension().is_some_and(|e| e == "json") {
                    out.push(p);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Decodes one entry file by path, reporting why it is bad if it is.
    pub fn check_file(path: &Path) -> Result<Entry, String> {
        let stem = path.file_stem().and_then(|s| s.to_str()).ok_or("file name is not a key")?;
        let key: StepKey = stem.parse().map_err(|e: crate::plan::key::ParseKeyError| e.to_string())?;
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        Entry::decode(&bytes, key).map_err(|e: DecodeError| e.to_string())
    }
}

/// Removes whatever is at `path` (a file, or a directory in a file's place); gone is fine.
pub(crate) fn remove_any(path: &Path) -> Result<(), CacheError> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CacheError::Io { path: path.to_owned(), source: e }),
        _ => Ok(()),
    }
}

/// Runs `op`, which creates `target` in `dir`; when `dir` is missing, makes it and runs
/// `op` again. Shard directories are made on their first use, not checked on every write.
fn in_made_dir<T>(dir: &Path, target: &Path, op: impl Fn() -> std::io::Result<T>) -> Result<T, CacheError> {
    match op() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            op().map_err(io(target))
        }
        other => other.map_err(io(target)),
    }
}

/// Reads an index: each line ends in a 64-digit hex key. A torn append (a
/// line cut short, or glued before the next append) loses only itself.
fn parse_substeps(bytes: &[u8]) -> Vec<StepKey> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Some(tail) = line.len().checked_sub(64).map(|start| &line[start..]) else { continue };
        let Some(key) = std::str::from_utf8(tail).ok().and_then(|t| t.parse::<StepKey>().ok()) else { continue };
        if seen.insert(key) {
            out.push(key);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(n: i64) -> Entry {
        let components = json!({"n": n});
        Entry { key: StepKey::compute(&components), kind: StepKind::Score, components, output: json!({"v": n}), duration_ms: 0, writer: String::new() }
    }

    #[test]
    fn put_get_and_corruption_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let e = entry(1);
        assert!(store.get(e.key).unwrap().is_none());
        store.put(&e).unwrap();
        assert!(store.contains(e.key));
        assert_eq!(store.get(e.key).unwrap(), Some(e.clone()));
        let path = store.entry_path(e.key);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
        assert!(store.get(e.key).unwrap().is_none());
        assert!(Store::check_file(&path).is_err());
    }

    /// Whatever is in an entry's, blob's or failure record's place (a directory here), it is
    /// a miss, `put` replaces it, and a failure record that cannot be read is still a failure.
    #[test]
    fn a_directory_in_a_files_place_is_a_miss_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let e = entry(2);
        let path = store.entry_path(e.key);
        std::fs::create_dir_all(path.join("junk")).unwrap();
        assert!(!store.contains(e.key));
        assert!(store.get(e.key).unwrap().is_none());
        assert!(store.get_output::<Value>(e.key).unwrap().is_none());
        assert!(matches!(store.put(&e).unwrap(), Stored::Written));
        assert_eq!(store.get(e.key).unwrap(), Some(e.clone()));

        let hash = blake3::hash(b"blob").to_hex().to_string();
        let blob = store.sharded("blobs", &hash, "");
        std::fs::create_dir_all(blob.join("junk")).unwrap();
        assert!(store.get_blob(&hash).unwrap().is_none());
        assert_eq!(store.put_blob(b"blob").unwrap(), hash);
        assert_eq!(store.get_blob(&hash).unwrap().as_deref(), Some(&b"blob"[..]));

        let failure = store.failure_path(e.key);
        std::fs::create_dir_all(failure.join("junk")).unwrap();
        assert!(store.failure(e.key).unwrap().error.contains("damaged"));
        store.record_failure(&Failure { key: e.key, cell: "c".into(), kind: StepKind::Episode, error: "boom".into() }).unwrap();
        assert_eq!(store.failure(e.key).unwrap().error, "boom");
        store.clear_failure(e.key).unwrap();
        assert!(store.failure(e.key).is_none());
    }

    /// Two processes (here two handles, as on two machines sharing the directory) that
    /// computed the same step: the first entry stays, the second writer adopts it; a damaged
    /// entry is replaced.
    #[test]
    fn first_writer_wins_and_the_loser_adopts() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Store::open(dir.path()).unwrap(), Store::open(dir.path()).unwrap());
        let first = entry(1);
        let mut second = first.clone();
        second.output = json!({"v": "a different answer"});
        assert!(matches!(a.put(&first).unwrap(), Stored::Written));
        match b.put(&second).unwrap() {
            Stored::Adopted(adopted) => assert_eq!(adopted, first),
            Stored::Written => panic!("the second writer replaced the first entry"),
        }
        assert_eq!(b.get(first.key).unwrap(), Some(first.clone()));
        std::fs::write(a.entry_path(first.key), b"torn").unwrap();
        assert!(matches!(b.put(&second).unwrap(), Stored::Written), "a damaged entry is replaced");
        assert_eq!(a.get(first.key).unwrap(), Some(second));
        let temps = std::fs::read_dir(dir.path().join(BUCKET).join("tmp")).unwrap().flatten().flat_map(|shard| std::fs::read_dir(shard.path()).unwrap());
        assert_eq!(temps.count(), 0, "no temp file left behind");
        a.flush().unwrap();
        assert!(a.commit.batches() >= 1, "what was written went through the group commit");
    }

    #[test]
    fn blobs_are_verified() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let h = store.put_blob(b"hello").unwrap();
        assert_eq!(store.get_blob(&h).unwrap().as_deref(), Some(&b"hello"[..]));
        assert!(store.get_blob("../../etc/passwd").unwrap().is_none());
    }

    #[test]
    fn failures_are_recorded_and_cleared_by_success() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let e = entry(2);
        store.record_failure(&Failure { key: e.key, cell: "c".into(), kind: StepKind::Episode, error: "boom".into() }).unwrap();
        assert_eq!(store.failure(e.key).unwrap().error, "boom");
        store.put(&e).unwrap();
        assert!(store.failure(e.key).is_none());
    }

    #[test]
    fn substep_index_survives_torn_lines_and_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (episode, a, b, c) = (entry(10).key, entry(11).key, entry(12).key, entry(13).key);
        assert!(store.substeps(episode).unwrap().is_empty());
        store.record_substep(episode, a, true).unwrap();
        store.record_substep(episode, b, false).unwrap();
        store.record_substep(episode, a, false).unwrap();
        assert_eq!(store.substeps(episode).unwrap(), vec![a, b]);
        // A crash mid-append leaves half a line; the next append glues onto it.
        let path = store.substeps_path(episode);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&c.to_hex().as_bytes()[..20]).unwrap();
        assert_eq!(store.substeps(episode).unwrap(), vec![a, b]);
        store.record_substep(episode, c, false).unwrap();
        assert_eq!(store.substeps(episode).unwrap(), vec![a, b, c]);
        assert_eq!(store.substep_indexes().unwrap(), vec![(episode, path)]);
    }
}
