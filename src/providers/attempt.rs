//! [`AttemptClass`]: why one HTTP attempt of a call failed, as a value, so callers count
//! rate limits and stalls by comparing enums instead of string literals.

use std::fmt;

use serde::Serialize;

use super::error::CallError;

/// The class of a failed attempt; one per [`CallError`] variant, written out (serde,
/// `Display`) as the same snake-case names as [`CallError::class`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptClass {
    /// HTTP 429 rate limit.
    RateLimited,
    /// Quota or credit used up.
    Quota,
    /// The provider said it is overloaded.
    Overloaded,
    /// HTTP 5xx (or an error inside a 200).
    Server,
    /// No answer in time.
    Timeout,
    /// A stream went silent past its idle timeout.
    StreamStalled,
    /// A stream sent nothing within its first-byte timeout.
    FirstByteTimeout,
    /// No connection, or it broke.
    Connect,
    /// A body that is cut, not JSON or not the expected shape.
    Protocol,
    /// A body over the response cap.
    ResponseTooLarge,
    /// HTTP 401/403.
    Auth,
    /// Any other 4xx.
    BadRequest,
    /// A prompt longer than the model's context (the client makes it the model's answer).
    ContextExceeded,
    /// An unusable endpoint or client configuration.
    Config,
    /// Not sent: requests were halted.
    Halted,
}

impl AttemptClass {
    /// The class of `error`.
    #[must_use]
    pub fn of(error: &CallError) -> Self {
        match error {
            CallError::RateLimited { .. } => Self::RateLimited,
            CallError::Quota { .. } => Self::Quota,
            CallError::Overloaded { .. } => Self::Overloaded,
            CallError::Server { .. } => Self::Server,
            CallError::Timeout => Self::Timeout,
            CallError::StreamStalled { .. } => Self::StreamStalled,
            CallError::FirstByteTimeout { .. } => Self::FirstByteTimeout,
            CallError::Connect { .. } => Self::Connect,
            CallError::Protocol { .. } => Self::Protocol,
            CallError::ResponseTooLarge { .. } => Self::ResponseTooLarge,
            CallError::Auth { .. } => Self::Auth,
            CallError::BadRequest { .. } => Self::BadRequest,
            CallError::ContextExceeded { .. } => Self::ContextExceeded,
            CallError::Config { .. } => Self::Config,
            CallError::Halted { .. } => Self::Halted,
        }
    }

    /// The stable name, identical to the serde form and to [`CallError::class`].
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "rate_limited",
            Self::Quota => "quota",
            Self::Overloaded => "overloaded",
            Self::Server => "server",
            Self::Timeout => "timeout",
            Self::StreamStalled => CallError::STREAM_STALLED,
            Self::FirstByteTimeout => "first_byte_timeout",
            Self::Connect => "connect",
            Self::Protocol => "protocol",
            Self::ResponseTooLarge => "response_too_large",
            Self::Auth => "auth",
            Self::BadRequest => "bad_request",
            Self::ContextExceeded => "context_exceeded",
            Self::Config => "config",
            Self::Halted => "halted",
        }
    }
}

impl fmt::Display for AttemptClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{AttemptClass, CallError};

    /// Every error's class is written out as the same string as before it was an enum.
    #[test]
    fn each_class_writes_the_name_the_error_had() {
        let text = || String::from("x");
        let errors = [
            CallError::RateLimited { retry_after: None },
            CallError::Quota { message: text() },
            CallError::Overloaded { retry_after: Some(Duration::from_secs(1)) },
            CallError::Server { status: 500, retry_after: None },
            CallError::Timeout,
            CallError::StreamStalled { idle: Duration::from_secs(1) },
            CallError::FirstByteTimeout { waited: Duration::from_secs(1) },
            CallError::Connect { detail: text() },
            CallError::Protocol { detail: text() },
            CallError::ResponseTooLarge { limit: 1 },
            CallError::Auth { status: 401 },
            CallError::BadRequest { status: 400, message: text() },
            CallError::ContextExceeded { message: text() },
            CallError::Config { detail: text() },
            CallError::Halted { reason: text() },
        ];
        for error in &errors {
            let class = AttemptClass::of(error);
            assert_eq!(class.as_str(), error.class());
            assert_eq!(serde_json::to_value(class).unwrap(), serde_json::json!(error.class()));
            assert_eq!(class.to_string(), error.class());
        }
    }
}
