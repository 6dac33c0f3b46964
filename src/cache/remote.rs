//! The shared cache on S3-compatible storage (`--cache s3://bucket/prefix`).
//!
//! The remote is the source of truth; the local directory is a read-through copy. Object
//! names mirror the local layout under the prefix (`<prefix>/v1/steps/ab/<key>.json`, …).
//!
//! * Step entries are created with `PutMode::Create` (`If-None-Match: *`): the first writer
//!   wins, and a loser reads, verifies and adopts the stored entry, because model answers
//!   differ between runs and later steps are keyed by earlier keys.
//! * Blobs are content-addressed: `Create`, and "already exists" is success. Callers store a
//!   blob before the entry that names it, and a blob write returns only once it is remote.
//! * A PUT that fails without an answer (timeout, 5xx, lost connection) may have committed,
//!   so it is followed by a read before any retry.
//! * Heads, failures and progress records are informational: overwritten (last writer wins).
//!
//! Start-up probe: one random key is created twice; a store that accepts the second create
//! does not enforce conditional writes and is refused ([`RemoteError::NotConditional`]).
//!
//! `object_store` is async; the store's callers are mostly synchronous, some of them inside
//! tokio tasks, where `Runtime::block_on` panics. So every request runs on a small runtime
//! owned by this handle (on its own thread), and the caller waits on a std channel.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::entry::Entry;
use super::entry::{BUCKET, Stored};
use crate::plan::StepKey;

/// How often a create whose outcome is unknown is tried again (each after a read).
const WRITE_ATTEMPTS: usize = 3;
/// How often an entry reported as existing is read before giving up: right after a
/// concurrent create (S3 409) the winner may not be readable yet.
const ADOPT_READS: usize = 6;

/// Why the shared cache could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The `--cache` value is not an `s3://bucket[/prefix]` URL.
    #[error("`{0}` is not a shared cache URL (expected s3://bucket/prefix)")]
    BadUrl(String),
    /// The S3 client could not be configured from the `AWS_*` environment.
    #[error("cannot configure the S3 client for {store}: {message}")]
    Config {
        /// Which store (URL and endpoint).
        store: String,
        /// What the client said.
        message: String,
    },
    /// The server accepted a second create of the same key: first writer wins cannot hold there.
    #[error(
        "the shared cache {store} does not enforce conditional creates (a second PUT with If-None-Match: * of one key was accepted); \
         refusing it, because two machines would silently replace each other's answers. Use a server that enforces them \
         (AWS S3, MinIO, Cloudflare R2, Ceph RGW, moto)"
    )]
    NotConditional {
        /// Which store (URL and endpoint).
        store: String,
    },
    /// A request failed.
    #[error("shared cache {store}: {what} `{path}` failed: {message}")]
    Request {
        /// Which store (URL and endpoint).
        store: String,
        /// The operation (`GET`, `PUT`, …).
        what: &'static str,
        /// The object.
        path: String,
        /// What the client said.
        message: String,
    },
    /// The I/O runtime is gone (only while the process shuts down).
    #[error("shared cache {0}: the I/O thread stopped")]
    Stopped(String),
}

/// A handle on the shared store: the object store, the key prefix and the I/O runtime.
pub struct Remote {
    objects: Arc<dyn ObjectStore>,
    prefix: String,
    name: String,
    runtime: tokio::runtime::Handle,
    // Dropping this ends the I/O thread, which then drops its runtime outside any async context.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A stored object and the version to name when replacing it.
struct Fetched {
    bytes: Vec<u8>,
    version: UpdateVersion,
}

/// What a create did.
enum Created {
    New,
    Exists,
}

impl Remote {
    /// Opens `s3://bucket/prefix` with endpoint and credentials from the standard `AWS_*`
    /// variables (never written anywhere), then probes that it enforces conditional creates.
    pub fn open(url: &str) -> Result<Self, RemoteError> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| RemoteError::BadUrl(url.to_owned()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(RemoteError::BadUrl(url.to_owned()));
        }
        // reqwest is built without a TLS provider; ring is the project's (idempotent).
        crate::providers::install_crypto_provider();
        let builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
        let endpoint = builder
            .get_config_value(&object_store::aws::AmazonS3ConfigKey::S3Endpoint)
            .or_else(|| builder.get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint))
            .unwrap_or_else(|| {
                let region = builder.get_config_value(&object_store::aws::AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".to_owned());
                format!("https://s3.{region}.amazonaws.com")
            });
        let name = format!("{url} at {endpoint}");
        // Few, short retries: a start-up against a dead endpoint should fail in seconds, and
        // every write whose outcome is unknown is read back before it is tried again anyway.
        let retry = object_store::RetryConfig { max_retries: 3, retry_timeout: Duration::from_secs(30), ..Default::default() };
        // Timeouts and `AWS_ALLOW_HTTP` stay as the environment and object_store's defaults say.
        let s3 = builder.with_retry(retry).build().map_err(|e| RemoteError::Config { store: name.clone(), message: e.to_string() })?;
        let remote = Self::new(Arc::new(s3), prefix, name)?;
        remote.probe()?;
        Ok(remote)
    }

    /// Wraps any object store (tests use `object_store::memory::InMemory`); no probe.
    pub fn new(objects: Arc<dyn ObjectStore>, prefix: &str, name: String) -> Result<Self, RemoteError> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (handle_tx, handle_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("evalgrid-cache-io".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("evalgrid-cache-io").enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = handle_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = handle_tx.send(Ok(runtime.handle().clone()));
            // Lives until the `Remote` is dropped; the runtime is dropped here, on this thread.
            let _ = runtime.block_on(stopped);
        });
        let io_failed = |message: String| RemoteError::Config { store: name.clone(), message: format!("cannot start the I/O thread: {message}") };
        thread.map_err(|e| io_failed(e.to_string()))?;
        let runtime = handle_rx.recv().map_err(|e| io_failed(e.to_string()))?.map_err(io_failed)?;
        Ok(Self { objects, prefix: prefix.trim_matches('/').to_owned(), name, runtime, _stop: stop })
    }

    /// The store's URL and endpoint, for messages.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `fut` on the I/O runtime and waits for it (safe from any thread, async or not).
    fn wait<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> Result<T, RemoteError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| RemoteError::Stopped(self.name.clone()))
    }

    /// Object path of `rel` (a path inside the versioned bucket) under the prefix.
    fn path(&self, rel: &str) -> ObjectPath {
        if self.prefix.is_empty() { ObjectPath::from(format!("{BUCKET}/{rel}")) } else { ObjectPath::from(format!("{}/{BUCKET}/{rel}", self.prefix)) }
    }

    fn failed(&self, what: &'static str, path: &ObjectPath, e: &object_store::Error) -> RemoteError {
        // The whole chain: the useful part (refused connection, TLS, status) is often a source.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            let text = s.to_string();
            if !message.contains(&text) {
                message = format!("{message}: {text}");
            }
            source = s.source();
        }
        RemoteError::Request { store: self.name.clone(), what, path: path.to_string(), message }
    }

    fn create(&self, path: &ObjectPath, bytes: &[u8]) -> Result<Result<Created, object_store::Error>, RemoteError> {
        let (objects, path, payload) = (Arc::clone(&self.objects), path.clone(), PutPayload::from(bytes.to_vec()));
        self.wait(async move {
            match objects.put_opts(&path, payload, PutOptions::from(PutMode::Create)).await {
                Ok(_) => Ok(Created::New),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(Created::Exists),
                Err(e) => Err(e),
            }
        })
    }

    fn fetch(&self, path: &ObjectPath) -> Result<Option<Fetched>, RemoteError> {
        let (objects, p) = (Arc::clone(&self.objects), path.clone());
        let got = self.wait(async move {
            let result = objects.get(&p).await?;
            let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
            Ok::<_, object_store::Error>(Fetched { bytes: result.bytes().await?.to_vec(), version })
        })?;
        match got {
            Ok(f) => Ok(Some(f)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("GET", path, &e)),
        }
    }

    fn step_path(&self, key: StepKey) -> ObjectPath {
        let hex = key.to_hex();
        self.path(&format!("steps/{}/{hex}.json", &hex[..2]))
    }

    /// Reads and verifies the entry for `key`; a corrupt or missing entry is `None`.
    pub fn get(&self, key: StepKey) -> Result<Option<Entry>, RemoteError> {
        Ok(self.fetch(&self.step_path(key))?.and_then(|f| Entry::decode(&f.bytes, key).ok()))
    }

    /// Publishes `entry` unless a valid entry is stored under its key (first writer wins);
    /// `Adopted` carries the stored one, which the caller must use instead of its own.
    pub fn put(&self, entry: &Entry) -> Result<Stored, RemoteError> {
        let path = self.step_path(entry.key);
        let bytes = entry.encode();
        let mut last_error = None;
        for _ in 0..WRITE_ATTEMPTS {
            match self.create(&path, &bytes)? {
                Ok(Created::New) => return Ok(Stored::Written),
                Ok(Created::Exists) => match self.adopt(&path, entry, &bytes)? {
                    Some(stored) => return Ok(stored),
                    None => continue,
                },
                Err(e) => {
                    // The PUT may have committed without our hearing of it: read before retrying.
                    let error = self.failed("PUT", &path, &e);
                    if let Ok(Some(found)) = self.fetch(&path)
                        && let Ok(stored) = Entry::decode(&found.bytes, entry.key)
                    {
                        return Ok(if stored == *entry { Stored::Written } else { Stored::Adopted(stored) });
                    }
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| RemoteError::Request {
            store: self.name.clone(),
            what: "PUT",
            path: path.to_string(),
            message: format!("the entry was neither created nor readable after {WRITE_ATTEMPTS} attempts"),
        }))
    }

    /// Publishes `entry` whatever is stored under its key (the one write that is not
    /// first-writer-wins: a re-asked answer, see `Store::replace`).
    pub fn overwrite(&self, entry: &Entry) -> Result<(), RemoteError> {
        let path = self.step_path(entry.key);
        let (objects, p, payload) = (Arc::clone(&self.objects), path.clone(), PutPayload::from(entry.encode()));
        match self.wait(async move { objects.put_opts(&p, payload, PutOptions::from(PutMode::Overwrite)).await })? {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed("PUT (overwrite)", &path, &e)),
        }
    }

    /// After "already exists": reads the stored entry (again, if it is not readable yet) and
    /// adopts it; a stored entry that does not verify is replaced by ours, conditionally on
    /// its version. `None`: the entry vanished or changed under us, create again.
    fn adopt(&self, path: &ObjectPath, entry: &Entry, bytes: &[u8]) -> Result<Option<Stored>, RemoteError> {
        for attempt in 0..ADOPT_READS {
            let Some(found) = self.fetch(path)? else {
                std::thread::sleep(Duration::from_millis(50 << attempt.min(5)));
                continue;
            };
            return match Entry::decode(&found.bytes, entry.key) {
                Ok(stored) if stored == *entry => Ok(Some(Stored::Written)),
                Ok(stored) => Ok(Some(Stored::Adopted(stored))),
                Err(_) => {
                    // A torn or damaged object: replace exactly that version with ours.
                    let (objects, p, payload) = (Arc::clone(&self.objects), path.clone(), PutPayload::from(bytes.to_vec()));
                    let mode = PutMode::Update(found.version);
                    match self.wait(async move { objects.put_opts(&p, payload, PutOptions::from(mode)).await })? {
                        Ok(_) => Ok(Some(Stored::Written)),
                        // Someone else replaced it first; read again.
                        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(self.failed("PUT (replace corrupt)", path, &e)),
                    }
                }
            };
        }
        Ok(None)
    }

    fn blob_path(&self, hash: &str) -> ObjectPath {
        self.path(&format!("blobs/{}/{hash}", &hash[..2]))
    }

    /// Stores a blob under its blake3 hash; "already exists" is success (same name, same bytes).
    pub fn put_blob(&self, hash: &str, bytes: &[u8]) -> Result<(), RemoteError> {
        let path = self.blob_path(hash);
        let mut last_error = None;
        for _ in 0..WRITE_ATTEMPTS {
            match self.create(&path, bytes)? {
                Ok(_) => return Ok(()),
                Err(e) => {
                    last_error = Some(self.failed("PUT", &path, &e));
                    if self.get_blob(hash).ok().flatten().is_some() {
                        return Ok(());
                    }
                }
            }
        }
        Err(last_error.unwrap_or_else(|| RemoteError::Stopped(self.name.clone())))
    }

    /// Reads a blob; `None` when missing or when its bytes do not match its hash.
    pub fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.fetch(&self.blob_path(hash))?.map(|f| f.bytes).filter(|b| blake3::hash(b).to_hex().as_str() == hash))
    }

    /// Replaces an informational record (head, failure, progress): last writer wins.
    pub fn put_record(&self, rel: &str, bytes: &[u8]) -> Result<(), RemoteError> {
        let (objects, path, payload) = (Arc::clone(&self.objects), self.path(rel), PutPayload::from(bytes.to_vec()));
        let p = path.clone();
        self.wait(async move { objects.put_opts(&p, payload, PutOptions::from(PutMode::Overwrite)).await })?
            .map(|_| ())
            .map_err(|e| self.failed("PUT", &path, &e))
    }

    /// Reads an informational record, if there is one.
    pub fn get_record(&self, rel: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.fetch(&self.path(rel))?.map(|f| f.bytes))
    }

    /// Deletes an informational record (missing is fine).
    pub fn delete_record(&self, rel: &str) -> Result<(), RemoteError> {
        let (objects, path) = (Arc::clone(&self.objects), self.path(rel));
        let p = path.clone();
        match self.wait(async move { objects.delete(&p).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed("DELETE", &path, &e)),
        }
    }

    /// Every record under the folder `rel`, as (file name, bytes), sorted by name.
    pub fn list_records(&self, rel: &str) -> Result<Vec<(String, Vec<u8>)>, RemoteError> {
        let (objects, dir) = (Arc::clone(&self.objects), self.path(rel));
        let d = dir.clone();
        let metas = self.wait(async move { objects.list(Some(&d)).try_collect::<Vec<_>>().await })?.map_err(|e| self.failed("LIST", &dir, &e))?;
        let mut out = Vec::new();
        for meta in metas {
            let Some(name) = meta.location.filename().map(str::to_owned) else { continue };
            if let Some(f) = self.fetch(&meta.location)? {
                out.push((name, f.bytes));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Creates one random key twice: the second create must be refused, or the store does
    /// not give first writer wins and is refused itself.
    pub fn probe(&self) -> Result<(), RemoteError> {
        let path = self.path(&format!("probe/{:032x}", rand::random::<u128>()));
        let body = b"evalgrid conditional-create probe";
        let first = self.create(&path, body)?.map_err(|e| self.failed("PUT (probe)", &path, &e))?;
        let second = self.create(&path, body)?;
        let cleanup = || {
            let (objects, p) = (Arc::clone(&self.objects), path.clone());
            let _ = self.wait(async move { objects.delete(&p).await });
        };
        let verdict = match (first, second) {
            (Created::New, Ok(Created::Exists)) => Ok(()),
            (_, Ok(_)) => Err(RemoteError::NotConditional { store: self.name.clone() }),
            (_, Err(object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. })) => {
                Err(RemoteError::NotConditional { store: self.name.clone() })
            }
            (_, Err(e)) => Err(self.failed("PUT (probe)", &path, &e)),
        };
        cleanup();
        verdict
    }
}

#[cfg(test)]
mod tests;
