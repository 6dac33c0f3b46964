//! The shared cache against `object_store`'s in-memory store, and against doubles of
//! servers that lose answers or ignore conditional creates.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions,
    PutPayload, PutResult,
};
use serde_json::json;

use super::*;
use crate::cache::{Failure, Head, Store};
use crate::plan::StepKind;

fn entry(n: i64, answer: &str) -> Entry {
    let components = json!({"n": n});
    Entry { key: StepKey::compute(&components), kind: StepKind::Episode, components, output: json!({"answer": answer}), duration_ms: 0, writer: String::new() }
}

fn remote(objects: &Arc<dyn ObjectStore>) -> Remote {
    Remote::new(Arc::clone(objects), "team/grid", "s3://test/team/grid at memory".into()).unwrap()
}

/// One machine: its own local directory over the shared objects.
fn machine(objects: &Arc<dyn ObjectStore>) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_shared(dir.path(), remote(objects)).unwrap();
    (dir, store)
}

fn object(objects: &Arc<dyn ObjectStore>, rel: &str) -> Option<Vec<u8>> {
    let path = ObjectPath::from(format!("team/grid/v1/{rel}"));
    futures::executor::block_on(async { Some(objects.get(&path).await.ok()?.bytes().await.ok()?.to_vec()) })
}

fn step_rel(key: StepKey) -> String {
    let hex = key.to_hex();
    format!("steps/{}/{hex}.json", &hex[..2])
}

#[test]
fn first_writer_wins_across_machines_and_the_loser_adopts() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let ((_a_dir, a), (_b_dir, b)) = (machine(&objects), machine(&objects));
    let first = entry(1, "from machine a");
    let second = entry(1, "from machine b");
    assert!(matches!(a.put(&first).unwrap(), Stored::Written));
    match b.put(&second).unwrap() {
        Stored::Adopted(adopted) => assert_eq!(adopted, first),
        Stored::Written => panic!("machine b replaced machine a's entry"),
    }
    // The remote keeps the first answer, and b's local copy is the adopted one.
    assert_eq!(Entry::decode(&object(&objects, &step_rel(first.key)).unwrap(), first.key).unwrap(), first);
    assert_eq!(Store::check_file(&b.entry_path(first.key)).unwrap(), first);
    // Writing the very same entry again (a retry) is not an adoption.
    assert!(matches!(a.put(&first).unwrap(), Stored::Written));
}

#[test]
fn a_fresh_machine_reads_through_and_keeps_a_local_copy() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (_a_dir, a) = machine(&objects);
    let e = entry(2, "x");
    a.put(&e).unwrap();
    let (_c_dir, c) = machine(&objects);
    assert!(!c.entry_path(e.key).exists());
    assert!(c.contains(e.key), "contains consults the remote on a local miss");
    assert_eq!(c.get(e.key).unwrap(), Some(e.clone()));
    assert_eq!(Store::check_file(&c.entry_path(e.key)).unwrap(), e, "copied to the local layer");
    let missing = entry(3, "never stored");
    assert!(!c.contains(missing.key));
    assert_eq!(c.get(missing.key).unwrap(), None);
}

#[test]
fn a_corrupt_remote_entry_is_a_miss_and_is_replaced() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let e = entry(4, "good");
    let mut torn = e.encode();
    torn.truncate(torn.len() - 3);
    let path = ObjectPath::from(format!("team/grid/v1/{}", step_rel(e.key)));
    futures::executor::block_on(objects.put(&path, PutPayload::from(torn))).unwrap();
    let (_dir, store) = machine(&objects);
    assert_eq!(store.get(e.key).unwrap(), None, "a torn remote entry is never served");
    assert!(!store.entry_path(e.key).exists(), "nor copied locally");
    assert!(matches!(store.put(&e).unwrap(), Stored::Written), "a damaged entry is replaced, not adopted");
    assert_eq!(Entry::decode(&object(&objects, &step_rel(e.key)).unwrap(), e.key).unwrap(), e);
}

#[test]
fn blobs_are_remote_before_put_blob_returns_and_verified_on_read() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (_a_dir, a) = machine(&objects);
    let hash = a.put_blob(b"summary bytes").unwrap();
    assert_eq!(object(&objects, &format!("blobs/{}/{hash}", &hash[..2])).as_deref(), Some(&b"summary bytes"[..]));
    a.put_blob(b"summary bytes").unwrap(); // already there: success
    let (_b_dir, b) = machine(&objects);
    assert_eq!(b.get_blob(&hash).unwrap().as_deref(), Some(&b"summary bytes"[..]));
    // A remote blob whose bytes do not match its name is a miss.
    let fake = blake3::hash(b"other").to_hex().to_string();
    let path = ObjectPath::from(format!("team/grid/v1/blobs/{}/{fake}", &fake[..2]));
    futures::executor::block_on(objects.put(&path, PutPayload::from(b"tampered".to_vec()))).unwrap();
    assert_eq!(b.get_blob(&fake).unwrap(), None);
}

#[test]
fn a_blob_that_cannot_be_stored_fails_before_any_entry_names_it() {
    let objects: Arc<dyn ObjectStore> = Arc::new(Double::new(Behaviour::FailBlobs));
    let (_dir, store) = machine(&objects);
    let err = store.put_blob(b"report").unwrap_err();
    assert!(err.to_string().contains("blobs/"), "{err}");
}

#[test]
fn a_put_whose_answer_was_lost_is_read_back_not_repeated() {
    let double = Arc::new(Double::new(Behaviour::LoseAnswers));
    let objects: Arc<dyn ObjectStore> = Arc::clone(&double) as Arc<dyn ObjectStore>;
    let (_dir, store) = machine(&objects);
    let e = entry(5, "committed, answer lost");
    assert!(matches!(store.put(&e).unwrap(), Stored::Written));
    assert_eq!(double.puts.load(Ordering::SeqCst), 1, "the read found the committed entry: no second PUT");
    // Same for a lost answer when another writer's entry is what got committed.
    let other = entry(5, "someone else's");
    match store.put(&other).unwrap() {
        Stored::Adopted(adopted) => assert_eq!(adopted, e),
        Stored::Written => panic!("replaced the stored entry"),
    }
}

#[test]
fn the_probe_refuses_a_store_that_ignores_conditional_creates() {
    let good: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    remote(&good).probe().unwrap();
    let bad: Arc<dyn ObjectStore> = Arc::new(Double::new(Behaviour::IgnoreCreate));
    let err = remote(&bad).probe().unwrap_err();
    assert!(matches!(err, RemoteError::NotConditional { .. }), "{err:?}");
    assert!(err.to_string().contains("s3://test/team/grid at memory"), "names the store: {err}");
}

#[test]
fn heads_failures_and_progress_are_seen_from_another_machine() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let ((_a_dir, a), (_b_dir, b)) = (machine(&objects), machine(&objects));
    let e = entry(6, "x");
    a.record_failure(&Failure { key: e.key, cell: "c".into(), kind: StepKind::Episode, error: "boom".into() }).unwrap();
    assert_eq!(b.failure(e.key).map(|f| f.error).as_deref(), Some("boom"));
    a.put(&e).unwrap();
    assert!(b.failure(e.key).is_none(), "the writer that failed clears its failure everywhere");
    let head = Head { cell: "m/b/t/0".into(), episode_key: e.key, episode_components: json!({}), score_key: e.key, score_components: json!({}) };
    a.set_head(&head).unwrap();
    assert_eq!(b.head("m/b/t/0").map(|h| h.episode_key), Some(e.key));
    a.put_progress("run", "0-of-2", &json!({"done": 3})).unwrap();
    b.put_progress("run", "1-of-2", &json!({"done": 4})).unwrap();
    let seen = a.progress("run").unwrap();
    assert_eq!(seen, vec![("0-of-2".to_owned(), json!({"done": 3})), ("1-of-2".to_owned(), json!({"done": 4}))]);
}

/// The store is called synchronously from inside tokio tasks (the scheduler): that must
/// neither panic nor deadlock, and neither may dropping it there.
#[tokio::test(flavor = "current_thread")]
async fn works_and_drops_inside_an_async_context() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (_dir, store) = machine(&objects);
    let e = entry(7, "x");
    assert!(matches!(store.put(&e).unwrap(), Stored::Written));
    assert_eq!(store.get(e.key).unwrap(), Some(e));
    drop(store);
}

/// How a [`Double`] misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// Every PUT under `blobs/` fails.
    FailBlobs,
    /// Every PUT commits, then reports a transport error (an answer lost on the way back).
    LoseAnswers,
    /// `Create` overwrites (a server that ignores `If-None-Match: *`).
    IgnoreCreate,
}

/// An in-memory store that misbehaves in one way, counting PUTs.
#[derive(Debug)]
struct Double {
    inner: InMemory,
    behaviour: Behaviour,
    puts: AtomicUsize,
}

impl Double {
    fn new(behaviour: Behaviour) -> Self {
        Self { inner: InMemory::new(), behaviour, puts: AtomicUsize::new(0) }
    }
}

impl std::fmt::Display for Double {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Double")
    }
}

#[async_trait::async_trait]
impl ObjectStore for Double {
    async fn put_opts(&self, location: &ObjectPath, payload: PutPayload, mut opts: PutOptions) -> object_store::Result<PutResult> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        let lost = || object_store::Error::Generic { store: "Double", source: "connection reset after the request was sent".into() };
        match self.behaviour {
            Behaviour::FailBlobs if location.as_ref().contains("/blobs/") => Err(lost()),
            Behaviour::LoseAnswers => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(lost())
            }
            Behaviour::IgnoreCreate => {
                opts.mode = PutMode::Overwrite;
                self.inner.put_opts(location, payload, opts).await
            }
            Behaviour::FailBlobs => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(&self, location: &ObjectPath, opts: PutMultipartOptions) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, object_store::Result<ObjectPath>>) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &ObjectPath, to: &ObjectPath, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
