//! A stop switch for one model's calls, set once: the run keeps one per model (the call path's
//! fail-fast rule sets it) and the transport checks it at the last moment before sending, so
//! calls already waiting for a slot are not sent either.

use std::sync::OnceLock;

/// Why a model's calls are no longer sent, once something every call of it would hit failed.
#[derive(Debug)]
pub struct StopSwitch {
    /// The model entry's id, for the message of a call that is not sent.
    model: String,
    reason: OnceLock<String>,
}

impl StopSwitch {
    /// The switch of model entry `model`, not set.
    #[must_use]
    pub fn new(model: &str) -> Self {
        Self { model: model.to_owned(), reason: OnceLock::new() }
    }

    /// Stops the calls with `reason`; `true` only for the call that stopped them.
    pub fn stop(&self, reason: &str) -> bool {
        self.reason.set(reason.to_owned()).is_ok()
    }

    /// Why the calls stopped, once they did.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    /// What a call held back at the transport is told, once the switch is set.
    #[must_use]
    pub fn halted(&self) -> Option<String> {
        self.reason().map(|reason| format!("model `{}` stopped at a failure every call of it would hit: {}", self.model, crate::text::one_line(reason)))
    }
}
