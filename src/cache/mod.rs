//! Content-addressed, crash-safe cache of step results.

pub mod batches;
pub mod claims;
pub mod commit;
mod derived;
mod durable;
pub mod entry;
pub mod explain;
pub mod journal;
mod listing;
pub mod lock;
pub mod maintenance;
pub mod memo;
pub mod pending;
mod presence;
pub mod remote;
pub mod store;

pub use batches::{BatchLedger, BatchRecord, DamagedRecord, Forgotten};
pub use derived::DerivedError;
pub use entry::Entry;
pub use explain::{Change, diff};
pub use lock::KeyLock;
pub use memo::HashMemo;
pub use pending::{PendingResponse, PendingResponses};
pub use remote::{Remote, RemoteError};
pub use store::{CacheError, Failure, Head, Store, Stored};
