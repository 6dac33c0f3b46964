//! Streaming (server-sent events) for all four protocols, as transport only.
//!
//! A streamed call sends the same keyed body plus the protocol's switch (`stream: true`,
//! and `stream_options.include_usage` on Chat Completions; Gemini's `:streamGenerateContent?alt=sse`
//! URL instead), reads the events under an inactivity timeout rather than a total one, and
//! folds them with one assembler per protocol into the exact JSON shape of the protocol's
//! non-streaming body. That body then goes through the protocol's own parser, so text,
//! reasoning, tool calls, outcome, usage and signatures come out as they would without
//! streaming, and no cache key can tell the two apart ([`super::request_fingerprint`] never
//! sees the switch).
//!
//! A stream is held to the answer cap (`transport.max_response_bytes`) while it arrives, as
//! an unstreamed body is ([`StreamReader`]): what the assembler keeps is counted as it is
//! folded in, one event (or one unfinished line) may not outgrow the cap, and the raw bytes
//! read are bounded too, so a hostile or runaway stream fails as `ResponseTooLarge` holding
//! no more than about the cap. A stream must also be whole (UTF-8, its protocol's finish
//! reason and last event) and name one model, or it is not an answer.
//!
//! When to stream is the model entry's `stream:` ([`StreamMode`]): `auto` streams calls whose
//! output cap is large ([`AUTO_STREAM_MIN_TOKENS`]) and Anthropic calls with thinking on, as
//! Inspect does, which also covers Anthropic's refusal of non-streaming calls above
//! [`ANTHROPIC_NON_STREAMING_MAX_TOKENS`].

mod anthropic;
mod chat;
mod gemini;
mod responses;
mod sse;

use serde_json::{Map, Value};

use super::error::CallError;
use super::types::{Answered, ProviderKind, answered_as};

use sse::SseDecoder;
pub use sse::{FramingError, SseEvent, events};

/// Output caps from which `stream: auto` streams (Inspect's Anthropic threshold): such calls
/// can run past a non-streaming request's timeout.
pub const AUTO_STREAM_MIN_TOKENS: u64 = 8192;

/// The largest `max_tokens` Anthropic's SDKs send without streaming (`3600 s · max_tokens /
/// 128000 > 600 s` is refused); `auto` streams far below it already.
pub const ANTHROPIC_NON_STREAMING_MAX_TOKENS: u64 = 21_333;

// `auto` streams every Anthropic call Anthropic would refuse unstreamed.
const _: () = assert!(AUTO_STREAM_MIN_TOKENS <= ANTHROPIC_NON_STREAMING_MAX_TOKENS);

/// Whether a model's calls stream (`stream:` on the model entry): `auto` (the default)
/// streams calls with a large output cap and Anthropic calls with thinking on; `true` for
/// stream-only servers (DashScope's Qwen3 thinking models); `false` for servers that reject
/// `stream_options` or proxies that buffer streams. Transport only: it changes how an
/// answer arrives, not what it says, so it enters no cache key.
pub type StreamMode = super::Switch;

impl StreamMode {
    /// Whether a call with this exact (keyed) body to a `kind` server streams.
    #[must_use]
    pub fn streams(self, kind: ProviderKind, body: &Value) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => output_cap(kind, body).unwrap_or(0) >= AUTO_STREAM_MIN_TOKENS || kind.protocol().thinks(body),
        }
    }
}

/// The output cap a body asks for, under the protocol's own name.
fn output_cap(kind: ProviderKind, body: &Value) -> Option<u64> {
    kind.protocol().output_cap_fields().iter().find_map(|pointer| body.pointer(pointer).and_then(Value::as_u64))
}

/// The body actually sent for a streamed call: the keyed body plus the protocol's switch
/// (Gemini's is in the URL, so its body is unchanged).
#[must_use]
pub fn streamed_body(kind: ProviderKind, body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        kind.protocol().switch_on_stream(map);
    }
    body
}

/// The URL of a streamed call (Gemini's differs; the others stream from the same URL).
#[must_use]
pub fn streamed_url(kind: ProviderKind, url: &str) -> String {
    kind.protocol().streamed_url(url)
}

/// Gemini's streamed URL: `:generateContent` becomes `:streamGenerateContent?alt=sse` (any
/// query the base URL carries is kept).
pub(super) fn gemini_streamed_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.replacen(":generateContent", ":streamGenerateContent?alt=sse", 1);
    };
    if let Some(path) = parsed.path().strip_suffix(":generateContent").map(|stem| format!("{stem}:streamGenerateContent")) {
        parsed.set_path(&path);
    }
    parsed.query_pairs_mut().append_pair("alt", "sse");
    parsed.to_string()
}

/// How many bytes of event stream one byte of assembled answer may take before a stream is
/// stopped as runaway: token-per-event streams spend ~150–250 bytes on a token. This bounds
/// the time and traffic of a stream of keep-alives or empty deltas; memory is bounded by the
/// answer cap itself.
const STREAM_BYTES_PER_ANSWER_BYTE: u64 = 16;

/// How much longer than the answer cap one event may be: Responses' terminal event carries
/// the whole answer in a small envelope.
const EVENT_ENVELOPE_BYTES: u64 = 64 * 1024;

/// A stream that ended before its protocol's last event: the answer may be partial, so the
/// attempt fails as a (retryable) protocol error, like a truncated JSON body.
fn stream_cut(what: &str) -> CallError {
    CallError::Protocol { detail: format!("the stream ended early: {what}") }
}

/// A framing failure as the error the same bytes give unstreamed: corrupt bytes are a
/// malformed response (retried, never cached), an overlong event an answer over the cap.
fn framing_error(error: FramingError, limit: u64) -> CallError {
    match error {
        FramingError::InvalidUtf8 => CallError::Protocol { detail: "invalid UTF-8 in the event stream".into() },
        FramingError::TooLong => CallError::ResponseTooLarge { limit },
    }
}

/// The answer cap, spent as an assembler keeps text and values, so a stream fails as soon as
/// what it would cache passes the cap instead of when it ends.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: u64,
}

impl Budget {
    /// Spends `bytes`; `ResponseTooLarge` once the cap is passed.
    fn take(&mut self, bytes: usize) -> Result<(), CallError> {
        self.used = self.used.saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
        if self.used > self.limit {
            return Err(CallError::ResponseTooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// Appends `piece` to `target`, spending its length first, so nothing past the cap is kept.
    fn append(&mut self, target: &mut String, piece: &str) -> Result<(), CallError> {
        self.take(piece.len())?;
        target.push_str(piece);
        Ok(())
    }

    /// Gives back what a replaced value had cost.
    fn give(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    /// Sets `map[key]` to `value`, spending its JSON size and giving back the old value's.
    fn put(&mut self, map: &mut Map<String, Value>, key: &str, value: Value) -> Result<(), CallError> {
        self.take(key.len() + json_len(&value))?;
        if let Some(old) = map.insert(key.to_owned(), value) {
            self.give(key.len() + json_len(&old));
        }
        Ok(())
    }
}

/// The length of a value written as JSON, without writing it anywhere.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _infallible = serde_json::to_writer(&mut count, value);
    count.0
}

/// The model ids a stream's events name. Each event carries one (Chat chunks, Gemini's
/// `modelVersion`, every Responses `response`): ids that are not the same model (nor one a
/// dated snapshot of the other, the answered-model rule) mean the server switched models
/// mid-answer, which is reported as one id naming both, so the rule treats the answer as
/// coming from another model than the one asked for.
#[derive(Debug, Default)]
struct ModelIds {
    /// The most specific id seen (a snapshot over its alias).
    answered: Option<String>,
    /// The first id that is another model, if any.
    switched_to: Option<String>,
}

impl ModelIds {
    fn see(&mut self, model: &str) {
        if model.is_empty() || self.switched_to.is_some() {
            return;
        }
        let Some(known) = &self.answered else {
            self.answered = Some(model.to_owned());
            return;
        };
        match (answered_as(known, model), answered_as(model, known)) {
            (Answered::Same, _) | (_, Answered::Snapshot) => {}
            (Answered::Snapshot, _) => self.answered = Some(model.to_owned()),
            _ => self.switched_to = Some(model.to_owned()),
        }
    }

    /// The id to report: the one model, or both of a switch (`a, then b`).
    fn answered(&self) -> Option<String> {
        let answered = self.answered.clone()?;
        Some(match &self.switched_to {
            Some(other) => format!("{answered}, then {other}"),
            None => answered,
        })
    }

    /// Writes the reported id into `map[key]` when any event named one.
    fn write(&self, map: &mut Map<String, Value>, key: &str) {
        if let Some(model) = self.answered() {
            map.insert(key.into(), Value::String(model));
        }
    }
}

/// An event's data as JSON.
fn event_json(event: &SseEvent) -> Result<Value, CallError> {
    serde_json::from_str(&event.data)
        .map_err(|error| CallError::Protocol { detail: format!("invalid JSON in a stream event ({} bytes): {error}", event.data.len()) })
}

/// One protocol's stream folding ([`Protocol::stream_fold`](super::Protocol::stream_fold)):
/// its events in, the body the same call returns without streaming out.
pub trait Fold: std::fmt::Debug + Send {
    /// Folds one event in, spending `budget` on what it keeps; `true` once the protocol's
    /// last event (or an error) has come.
    ///
    /// # Errors
    /// `ResponseTooLarge` once what is kept passes the cap; `Protocol` for a bad event.
    fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError>;
    /// The non-streaming body; an error event becomes the body as sent.
    ///
    /// # Errors
    /// `Protocol` for a stream cut before its finish reason or last event.
    fn finish(self: Box<Self>) -> Result<Value, CallError>;
}

macro_rules! fold {
    ($($stream:ty => $make:ident),* $(,)?) => {$(
        impl Fold for $stream {
            fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError> {
                <$stream>::push(self, event, budget)
            }
            fn finish(self: Box<Self>) -> Result<Value, CallError> {
                <$stream>::finish(*self)
            }
        }

        /// An empty folder for this protocol's events.
        pub(super) fn $make() -> Box<dyn Fold> {
            Box::new(<$stream>::default())
        }
    )*};
}

fold! {
    chat::ChatStream => fold_chat,
    responses::ResponsesStream => fold_responses,
    anthropic::AnthropicStream => fold_anthropic,
    gemini::GeminiStream => fold_gemini,
}

/// Folds one protocol's events into its non-streaming body, within the answer cap.
#[derive(Debug)]
pub(super) struct Assembler {
    fold: Box<dyn Fold>,
    budget: Budget,
}

impl Assembler {
    /// An empty assembler for `kind`'s events that keeps at most `limit` bytes of answer.
    pub(super) fn new(kind: ProviderKind, limit: u64) -> Self {
        Self { fold: kind.protocol().stream_fold(), budget: Budget { limit, used: 0 } }
    }

    /// Folds one event in; `true` once the protocol's last event (or an error) has come,
    /// after which nothing more need be read. `ResponseTooLarge` as soon as what it keeps
    /// passes the cap.
    pub(super) fn push(&mut self, event: &SseEvent) -> Result<bool, CallError> {
        if event.data.is_empty() {
            return Ok(false);
        }
        self.fold.push(event, &mut self.budget)
    }

    /// The non-streaming body; an error event becomes the body as sent, for the parser to
    /// classify, and a stream cut short (no finish reason or last event) is a protocol error.
    pub(super) fn finish(self) -> Result<Value, CallError> {
        self.fold.finish()
    }
}

/// One streamed answer as it arrives, fed one network chunk at a time: framed, folded, and
/// held to the answer cap throughout, so a runaway stream is stopped at the cap instead of
/// being read (and held) to its end.
#[derive(Debug)]
pub(super) struct StreamReader {
    decoder: SseDecoder,
    assembler: Assembler,
    events: Vec<SseEvent>,
    limit: u64,
    raw: u64,
    /// The protocol's last event has come.
    over: bool,
}

impl StreamReader {
    /// A reader for `kind`'s events, held to an answer of `limit` bytes.
    pub(super) fn new(kind: ProviderKind, limit: u64) -> Self {
        let max_event = usize::try_from(limit.saturating_add(EVENT_ENVELOPE_BYTES)).unwrap_or(usize::MAX);
        Self { decoder: SseDecoder::new(max_event), assembler: Assembler::new(kind, limit), events: Vec::new(), limit, raw: 0, over: false }
    }

    /// Takes the next chunk; `true` once the protocol's last event has come (read no more).
    ///
    /// # Errors
    /// `ResponseTooLarge` once the answer, one event or the raw stream passes its bound;
    /// `Protocol` for bytes that are not UTF-8 or an event that is not JSON.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<bool, CallError> {
        self.raw = self.raw.saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        if self.raw > self.limit.saturating_mul(STREAM_BYTES_PER_ANSWER_BYTE) {
            return Err(CallError::ResponseTooLarge { limit: self.limit });
        }
        self.decoder.push(bytes, &mut self.events).map_err(|error| framing_error(error, self.limit))?;
        self.fold()
    }

    fn fold(&mut self) -> Result<bool, CallError> {
        for event in self.events.drain(..) {
            if self.assembler.push(&event)? {
                self.over = true;
                break;
            }
        }
        Ok(self.over)
    }

    /// The stream is over (its last event came, or the connection closed): the body the
    /// same call returns without streaming.
    ///
    /// # Errors
    /// As [`Self::feed`], and `Protocol` for a stream cut before its finish reason or last event.
    pub(super) fn finish(mut self) -> Result<Value, CallError> {
        if !self.over {
            self.decoder.finish(&mut self.events).map_err(|error| framing_error(error, self.limit))?;
            self.fold()?;
        }
        self.assembler.finish()
    }
}

/// Folds a whole recorded stream of `kind` into the body the same call returns without
/// streaming, for tests and fixture tools.
///
/// # Errors
/// `Protocol` when the bytes are not UTF-8, an event is not JSON or the stream ended before
/// its finish reason or last event.
pub fn assemble(kind: ProviderKind, stream: &[u8]) -> Result<Value, CallError> {
    assemble_capped(kind, stream, u64::MAX)
}

/// [`assemble`] held to an answer cap of `limit` bytes, as a live stream is.
///
/// # Errors
/// As [`assemble`], and `ResponseTooLarge` once the answer passes the cap.
pub fn assemble_capped(kind: ProviderKind, stream: &[u8], limit: u64) -> Result<Value, CallError> {
    let mut reader = StreamReader::new(kind, limit);
    reader.feed(stream)?;
    reader.finish()
}

#[cfg(test)]
mod tests;
