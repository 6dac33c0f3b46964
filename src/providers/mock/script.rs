//! What the mock server answers: scripted replies and injected faults.
//!
//! A [`Script`] decides the reply to a request (echo, a fixed sequence per route, or any
//! function of the request, e.g. a lookup by a hash of the last user message). A
//! [`FaultPlan`] overrides the script for chosen calls, by explicit sequence or by a seeded
//! rate, so retry and limiter behaviour can be driven deterministically. Faults do not
//! consume sequence entries, so a retried call still gets the scripted reply.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::super::types::{FinishReason, ProviderKind, ToolCall, Usage};

/// A successful answer, rendered in whichever protocol the request used.
#[derive(Debug, Clone, PartialEq)]
pub struct MockReply {
    /// Answer text (empty text with no tool calls exercises the empty-output path).
    pub text: String,
    /// Reasoning text, returned as thinking/reasoning content.
    pub reasoning: Option<String>,
    /// Tool calls to return.
    pub tool_calls: Vec<ToolCall>,
    /// Usage to report; `None` counts words (input: system + all messages; output: answer
    /// plus reasoning).
    pub usage: Option<Usage>,
    /// Finish reason to report.
    pub finish_reason: FinishReason,
    /// Model name to report; overrides [`super::MockConfig::answered_model`].
    pub model: Option<String>,
}

impl MockReply {
    /// A plain text answer with word-count usage.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), reasoning: None, tool_calls: Vec::new(), usage: None, finish_reason: FinishReason::Stop, model: None }
    }

    /// An answer withheld by a content filter, rendered as each protocol's refusal shape.
    #[must_use]
    pub fn refusal() -> Self {
        Self { finish_reason: FinishReason::ContentFilter, ..Self::text("") }
    }

    /// The model declining (OpenAI's `refusal` field, Anthropic's `stop_reason: refusal`).
    #[must_use]
    pub fn declined() -> Self {
        Self { finish_reason: FinishReason::Refusal, ..Self::text("") }
    }

    /// Sets the reported usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the reported model, e.g. to simulate a gateway substituting models.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the finish reason.
    #[must_use]
    pub fn with_finish_reason(mut self, finish_reason: FinishReason) -> Self {
        self.finish_reason = finish_reason;
        self
    }
}

/// How the mock sends `Retry-After`, so every parsing path can be exercised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryHeader {
    /// No header at all.
    None,
    /// `Retry-After: <seconds>` (whole seconds).
    Seconds(u64),
    /// `retry-after-ms: <ms>` plus `Retry-After` rounded up, as OpenAI and Anthropic send.
    Millis(u64),
}

/// A failure the mock produces instead of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429 in the protocol's error shape.
    RateLimited(RetryHeader),
    /// HTTP 500.
    ServerError,
    /// HTTP 503 with a generic (non-overload) body.
    Unavailable(RetryHeader),
    /// The protocol's native overload: Anthropic 529, Gemini/OpenAI 503 "overloaded".
    Overloaded,
    /// HTTP 200 whose body is an overload error object.
    OverloadedIn200,
    /// Any status with a message, e.g. 400 or 404, in the protocol's error shape.
    Status {
        /// HTTP status.
        status: u16,
        /// Error message.
        message: String,
    },
    /// Wait this long, then reply normally (to trip the client timeout).
    Slow(Duration),
    /// HTTP 200 with a consistent `Content-Length` but only half of the JSON.
    TruncatedJson,
    /// Headers promise the full body, half is sent, then the connection is closed.
    Disconnect,
    /// HTTP 200 with a valid answer whose text is `bytes` bytes long, streamed in 64 KiB
    /// chunks without `Content-Length`, so response caps are tested without the mock (or a
    /// client that reads in chunks) ever holding the whole body.
    HugeAnswer {
        /// Length of the answer text in bytes.
        bytes: u64,
    },
    /// A stream built to break a client (see [`HostileStream`]); an unstreamed request gets
    /// the same corruption where it has one (invalid UTF-8), else the plain answer.
    HostileStream(HostileStream),
    /// A streamed reply goes silent for `silence` after its first `after` events, then sends
    /// the rest, as a stalled provider does; a non-streamed reply is held back that long.
    StallMidStream {
        /// Events sent before the silence.
        after: usize,
        /// How long nothing is sent.
        silence: Duration,
    },
}

/// Either a reply or a fault.
#[derive(Debug, Clone, PartialEq)]
pub enum MockOutcome {
    /// Answer normally.
    Reply(MockReply),
    /// Fail.
    Fault(Fault),
    /// Send this exact body (a response recorded in a provider's documented shape) with
    /// this status, as `application/json`: conformance tests parse real shapes, not ours.
    Recorded {
        /// HTTP status.
        status: u16,
        /// The body, verbatim.
        body: String,
    },
    /// Send this exact event stream (server-sent events recorded in a provider's documented
    /// streaming shape) as `text/event-stream` with HTTP 200, paced like any streamed reply.
    RecordedStream {
        /// The stream, verbatim.
        body: String,
    },
}

/// What a script sees of a request.
#[derive(Debug, Clone)]
pub struct MockRequest {
    /// Protocol of the route hit.
    pub protocol: ProviderKind,
    /// Requested model (body field, or URL for Gemini).
    pub model: String,
    /// Text of the last user turn.
    pub last_user: String,
    /// Whether the request asked for reasoning/thinking output.
    pub wants_reasoning: bool,
    /// The parsed request body.
    pub body: Value,
    /// 0-based index of this call on its route.
    pub route_index: u64,
    /// The API key the request presented (empty if none), so a script can make the model
    /// echo it back, as a leak test needs.
    pub api_key: String,
    /// Whether the request asked for a streamed reply (`stream: true`, or Gemini's
    /// `:streamGenerateContent`); the reply is then sent as server-sent events.
    pub stream: bool,
}

/// A reply function; must be deterministic for reproducible episodes.
pub type ReplyFn = Arc<dyn Fn(&MockRequest) -> MockOutcome + Send + Sync>;

/// Where replies come from.
#[derive(Clone, Default)]
pub enum Script {
    /// `echo: <last user message>`, plus `mock reasoning` when reasoning was requested.
    #[default]
    Echo,
    /// Outcomes consumed in order, separately per route; exhausted routes answer HTTP 410.
    Sequence(Vec<MockOutcome>),
    /// Any function of the request.
    Function(ReplyFn),
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Echo => f.write_str("Echo"),
            Self::Sequence(items) => f.debug_tuple("Sequence").field(items).finish(),
            Self::Function(_) => f.write_str("Function(..)"),
        }
    }
}

impl Script {
    /// A function script from a closure.
    pub fn function(reply: impl Fn(&MockRequest) -> MockOutcome + Send + Sync + 'static) -> Self {
        Self::Function(Arc::new(reply))
    }

    /// Replies looked up by [`prompt_hash`] of the last user message; unknown prompts echo.
    #[must_use]
    pub fn lookup(replies: BTreeMap<u64, MockReply>) -> Self {
        Self::function(move |request| match replies.get(&prompt_hash(&request.last_user)) {
            Some(reply) => MockOutcome::Reply(reply.clone()),
            None => MockOutcome::Reply(echo(request)),
        })
    }
}

/// The echo reply for a request.
#[must_use]
pub fn echo(request: &MockRequest) -> MockReply {
    MockReply { reasoning: request.wants_reasoning.then(|| "mock reasoning".to_owned()), ..MockReply::text(format!("echo: {}", request.last_user)) }
}

/// Stable 64-bit FNV-1a hash of a prompt, for lookup scripts (same on every platform).
#[must_use]
pub fn prompt_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Which calls fail, and how. Explicit entries win over the rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Faults for the first calls, by global call index (`None` = answer normally).
    pub sequence: Vec<Option<Fault>>,
    /// Probability in `[0, 1]` that a later call fails with one of `mix`.
    pub rate: f64,
    /// Faults chosen from uniformly when the rate fires.
    pub mix: Vec<Fault>,
    /// Seed of the per-call decision, so fault positions are reproducible.
    pub seed: u64,
}

impl FaultPlan {
    /// Faults for the first calls in order, then normal replies.
    pub fn sequence(faults: impl IntoIterator<Item = Fault>) -> Self {
        Self { sequence: faults.into_iter().map(Some).collect(), ..Self::default() }
    }

    /// A seeded random fraction of calls fail with faults drawn from `mix`.
    #[must_use]
    pub fn rate(rate: f64, mix: Vec<Fault>, seed: u64) -> Self {
        Self { rate, mix, seed, ..Self::default() }
    }

    /// The fault for global call `index`, if any; a pure function of the plan and index.
    #[must_use]
    pub fn decide(&self, index: u64) -> Option<Fault> {
        if let Some(entry) = usize::try_from(index).ok().and_then(|at| self.sequence.get(at)) {
            return entry.clone();
        }
        if self.mix.is_empty() || self.rate <= 0.0 {
            return None;
        }
        let draw = splitmix64(self.seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        #[expect(clippy::cast_precision_loss, reason = "53 random bits are plenty for a rate")]
        let unit = (draw >> 11) as f64 / (1_u64 << 53) as f64;
        if unit >= self.rate {
            return None;
        }
        let pick = splitmix64(draw) % self.mix.len() as u64;
        usize::try_from(pick).ok().and_then(|pick| self.mix.get(pick)).cloned()
    }
}

/// `SplitMix64` finaliser: a fast, well-mixed, dependency-free hash for seeded decisions.
fn splitmix64(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// A stream built to break a client (issue 21): each one, accepted, would cache something
/// that is not the model's whole answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostileStream {
    /// The answer's events with a byte that is not UTF-8 inside the answer text (unstreamed:
    /// the same byte inside the JSON body).
    InvalidUtf8,
    /// The answer's events without its finish reason, ended as the protocol ends: Chat's
    /// `[DONE]` after chunks whose `finish_reason` stays null, Anthropic's `message_stop`
    /// after a `message_delta` without `stop_reason`, Gemini chunks without `finishReason`,
    /// Responses events without the terminal one.
    NoFinish,
    /// The answer's events with the second of those that name a model naming
    /// `switched-model`, and the ones before and after it the requested model, so a client
    /// that reads one id (the first or the last) misses the switch. Anthropic names the
    /// model only once, in `message_start`: sent unchanged.
    ModelSwitch,
    /// A `data:` line of `bytes` bytes that never ends, generated 64 KiB at a time.
    EndlessLine {
        /// Bytes sent before the connection closes.
        bytes: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_seeded_and_close_to_target() {
        let plan = FaultPlan::rate(0.1, vec![Fault::ServerError, Fault::Overloaded], 42);
        let hits: Vec<u64> = (0..10_000).filter(|index| plan.decide(*index).is_some()).collect();
        assert!((900..1100).contains(&hits.len()), "{}", hits.len());
        let again: Vec<u64> = (0..10_000).filter(|index| plan.decide(*index).is_some()).collect();
        assert_eq!(hits, again);
    }

    #[test]
    fn sequence_then_clean() {
        let plan = FaultPlan { sequence: vec![Some(Fault::ServerError), None, Some(Fault::TruncatedJson)], ..FaultPlan::default() };
        assert_eq!(plan.decide(0), Some(Fault::ServerError));
        assert_eq!(plan.decide(1), None);
        assert_eq!(plan.decide(2), Some(Fault::TruncatedJson));
        assert_eq!(plan.decide(3), None);
    }

    #[test]
    fn prompt_hash_is_fnv1a() {
        assert_eq!(prompt_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(prompt_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
