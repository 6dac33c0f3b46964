//! Test-only helper that locates the shipped BBEH data folder from either crate that compiles
//! this module (the main crate at `/work/main` or a scratch crate one level deeper).

use std::path::PathBuf;

/// Returns `<manifest>/../shared/data/bbeh` or `<manifest>/../../shared/data/bbeh`, whichever
/// exists first; panics (tests only) with both candidates if neither does.
pub(super) fn data_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [manifest.join("../shared/data/bbeh"), manifest.join("../../shared/data/bbeh")];
    for c in &candidates {
        if c.is_dir() {
            return c.clone();
        }
    }
    panic!("BBEH test data not found; tried {candidates:?}");
}
