//! A fake model provider on 127.0.0.1 for tests and benchmarks.
//!
//! [`MockServer`] is a real HTTP server (axum on a tokio listener bound to port 0) that
//! speaks the OpenAI (Chat Completions and Responses), Anthropic and Gemini success and error shapes,
//! streamed (server-sent events, optionally paced or stalled) when the request asks. Replies come from a
//! [`Script`]; failures from a [`FaultPlan`]. It signs reasoning like the real APIs (Anthropic
//! thinking signatures, Gemini `thoughtSignature`s) and, when asked, rejects a tool round
//! that does not carry them back. Responses API calls in background mode are queued and
//! answered after a few polls. It never reaches the network.

mod alarm;
mod background;
mod dialects;
mod render;
mod script;
mod server;
mod signatures;
mod stream;
mod wire;

pub use script::{Fault, FaultPlan, HostileStream, MockOutcome, MockReply, MockRequest, ReplyFn, RetryHeader, Script, echo, prompt_hash};
pub use server::{LoggedRequest, MockConfig, MockServer};
pub use stream::SWITCHED_MODEL;
