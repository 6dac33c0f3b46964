//! Model-provider HTTP layer: OpenAI (Chat Completions and Responses), Anthropic and Gemini chat calls with bounded
//! retries, adaptive (AIMD) concurrency, request-rate pacing and error classification.
//!
//! Responsibilities: encode a provider-neutral [`ChatRequest`] as each protocol's exact,
//! deterministic JSON body; send it through one shared `reqwest::Client`; classify every
//! failure ([`CallError`]); retry what is transient while honouring `Retry-After`; adapt
//! concurrency per (provider, base URL); and refuse to return empty or refused outputs as
//! answers. Very long Responses API calls can run in background mode and be polled
//! ([`Background`]). Calls with a large output cap stream ([`stream`]), folded back into the body the
//! protocol returns without streaming. [`mock`] is a real local HTTP server speaking all four
//! protocols, streamed or not, for tests.
//!
//! Layout: the [`Protocol`] trait (`protocol.rs`) has one implementation per file
//! (`openai.rs`, `responses.rs`, `anthropic.rs`, `gemini.rs`), none importing another; what
//! they share is in leaves ([`shaping`], `wire.rs`); `registry.rs` is the one place a kind
//! picks its protocol. Callers reach a protocol only through [`ProviderKind::protocol`].
//!
//! Not here: caching (the caller hashes [`request_fingerprint`] and decides what to store)
//! and reading API keys (callers pass them in [`Endpoint`]).

pub mod anthropic;
mod attempt;
mod background;
mod base_url;
pub mod batch;
mod bench;
mod client;
pub mod completions;
mod error;
pub mod families;
pub mod gemini;
mod headers;
mod limiter;
pub mod logprobs;
pub mod mock;
pub mod openai;
pub mod overflow;
mod pacer;
pub mod protocol;
mod registry;
pub mod responses;
mod retry;
pub mod route;
pub mod scripted;
pub mod shaping;
mod slots;
mod stop;
pub mod stream;
mod switch;
#[cfg(test)]
pub(crate) mod testing;
pub mod tokens;
mod transport;
mod types;
mod wire;

pub use attempt::AttemptClass;
pub use background::{Background, ResponseLedger};
pub use bench::{BenchReport, ProxyError, RateLimitedProxy, bench_throughput};
pub use client::{
    CallOptions, CallOutcome, CallRecord, Lane, LaneSnapshot, ProviderClient, request_body, request_fingerprint, request_fingerprint_of, request_url,
};
pub use error::{CallError, REDACTED};
pub use limiter::{AimdConfig, ConcurrencyMode, Feedback, Limiter, LimiterSnapshot, Permit};
pub use pacer::{PaceTicket, Pacer, PacerConfig, PacerPhase, PacerSnapshot};
pub use protocol::Protocol;
pub use retry::{RateLimitHeaders, RetryPolicy, parse_go_duration, parse_http_date, parse_rfc3339, retry_after_from_headers};
pub use shaping::Shaping;
pub use slots::{LaneSlots, ServerSlots};
pub use stop::StopSwitch;
pub use stream::StreamMode;
pub use switch::Switch;
pub use transport::{
    ClientConfig, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_STREAM_FIRST_BYTE_TIMEOUT, DEFAULT_STREAM_IDLE_TIMEOUT, DEFAULT_STREAM_TOTAL_TIMEOUT, PollConfig,
    install_crypto_provider,
};
pub use types::{
    Answered, ChatRequest, ChatResponse, Endpoint, ExtraHeader, FinishReason, HeaderValueOf, Image, Message, OpenAiApi, PAID_BATCH, ProviderKind, Role, Secret,
    ToolCall, ToolSpec, Usage, answered_as, answered_at, canonical_json,
};
#[cfg(test)]
mod tests;
