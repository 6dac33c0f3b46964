//! Streamed mock replies: the non-streaming success body of the request's protocol, split
//! into the server-sent events that protocol sends (Chat Completions chunks and `[DONE]`,
//! Responses `response.*` events, Anthropic `message_*`/`content_block_*` events, Gemini
//! `GenerateContentResponse` chunks), so folding them back gives the same answer.
//!
//! Text is sent one word per event; [`Pace`] spaces the events out and can hold the stream
//! silent after a given event, as a stalled provider does. Faults have streamed forms: an
//! error event mid-stream, a stream cut after half its events (cleanly or by a reset).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use serde_json::{Value, json};

use super::script::{HostileStream, MockRequest};
use super::wire::MockWire;

/// How a streamed reply is paced.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pace {
    /// Pause before every event but the first.
    pub(super) interval: Duration,
    /// Silence after this many events (the stall of a stalled provider), then the rest.
    pub(super) stall: Option<(usize, Duration)>,
}

/// How a streamed reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Every event.
    Whole,
    /// Half the events, then the connection closes cleanly (no last event).
    Cut,
    /// Half the events, then the connection is reset.
    Reset,
}

/// One SSE frame: an optional `event:` line, one `data:` line, a blank line.
pub(super) fn frame(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A Responses event of type `kind` at the location `at` (item, output and part index),
/// with the fields of `extra`.
fn located(at: &Value, kind: &str, extra: Value) -> Value {
    let mut data = at.clone();
    data["type"] = json!(kind);
    for (key, value) in extra.as_object().into_iter().flatten() {
        data[key] = value.clone();
    }
    data
}

/// A text in the pieces it is streamed in: one word (with its trailing space) per piece.
fn pieces(text: Option<&Value>) -> Vec<String> {
    text.and_then(Value::as_str).map(|text| text.split_inclusive(' ').map(str::to_owned).collect()).unwrap_or_default()
}

/// A string in two halves (on a char boundary), as tool arguments arrive.
fn halves(text: &str) -> Vec<String> {
    let mid = text.char_indices().map(|(at, _)| at).find(|at| *at >= text.len() / 2).unwrap_or(text.len());
    [&text[..mid], &text[mid..]].into_iter().filter(|half| !half.is_empty()).map(str::to_owned).collect()
}

/// The events of `body` (the protocol's non-streaming success body) as its protocol
/// streams them.
pub(super) fn frames(wire: &dyn MockWire, request: &MockRequest, body: &Value) -> Vec<String> {
    wire.frames(request, body)
}

/// Chat Completions chunks, ending in `[DONE]` (usage in a last chunk when asked).
pub(super) fn chat_frames(request: &MockRequest, body: &Value) -> Vec<String> {
    let include_usage = request.body.pointer("/stream_options/include_usage") == Some(&json!(true));
    let chunk = |choices: Value, usage: Value| {
        let mut chunk = json!({"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"],
            "system_fingerprint": null, "choices": choices});
        if include_usage {
            chunk["usage"] = usage;
        }
        frame(None, &chunk)
    };
    let delta = |delta: Value| chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]), Value::Null);
    let message = &body["choices"][0]["message"];
    let mut out = vec![delta(json!({"role": "assistant", "content": "", "refusal": null}))];
    for field in ["reasoning_content", "refusal", "content"] {
        out.extend(pieces(message.get(field)).into_iter().map(|piece| {
            let mut one = serde_json::Map::new();
            one.insert(field.to_owned(), json!(piece));
            delta(Value::Object(one))
        }));
    }
    for (index, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        out.push(delta(json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]})));
        for half in halves(call["function"]["arguments"].as_str().unwrap_or_default()) {
            out.push(delta(json!({"tool_calls": [{"index": index, "function": {"arguments": half}}]})));
        }
    }
    out.push(chunk(json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": body["choices"][0]["finish_reason"]}]), Value::Null));
    if include_usage {
        out.push(chunk(json!([]), body["usage"].clone()));
    }
    out.push("data: [DONE]\n\n".to_owned());
    out
}

/// Anthropic `message_*` and `content_block_*` events.
pub(super) fn anthropic_frames(body: &Value) -> Vec<String> {
    let event = |data: Value| frame(data["type"].as_str(), &data);
    let mut start = body.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut out = vec![event(json!({"type": "message_start", "message": start})), event(json!({"type": "ping"}))];
    for (index, block) in body["content"].as_array().into_iter().flatten().enumerate() {
        let delta = |delta: Value| event(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        match block["type"].as_str().unwrap_or_default() {
            "thinking" => {
                out.push(event(json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})));
                out.extend(pieces(block.get("thinking")).into_iter().map(|piece| delta(json!({"type": "thinking_delta", "thinking": piece}))));
                out.push(delta(json!({"type": "signature_delta", "signature": block["signature"]})));
            }
            "tool_use" => {
                out.push(event(json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})));
                out.extend(halves(&block["input"].to_string()).into_iter().map(|half| delta(json!({"type": "input_json_delta", "partial_json": half}))));
            }
            _ => {
                out.push(event(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
                out.extend(pieces(block.get("text")).into_iter().map(|piece| delta(json!({"type": "text_delta", "text": piece}))));
            }
        }
        out.push(event(json!({"type": "content_block_stop", "index": index})));
    }
    out.push(event(json!({"type": "message_delta", "delta": {"stop_reason": body["stop_reason"], "stop_sequence": body["stop_sequence"]},
        "usage": {"output_tokens": body["usage"]["output_tokens"]}})));
    out.push(event(json!({"type": "message_stop"})));
    out
}

/// Gemini `GenerateContentResponse` chunks, the last with the finish reason and usage.
pub(super) fn gemini_frames(body: &Value) -> Vec<String> {
    let candidate = &body["candidates"][0];
    let chunk = |parts: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "usageMetadata": {"promptTokenCount": body["usageMetadata"]["promptTokenCount"]},
            "modelVersion": body["modelVersion"], "responseId": body["responseId"]})
    };
    let mut chunks = Vec::new();
    for part in candidate["content"]["parts"].as_array().into_iter().flatten() {
        if part.get("text").is_some() {
            for piece in pieces(part.get("text")) {
                let mut piece_part = part.clone();
                piece_part["text"] = json!(piece);
                chunks.push(chunk(json!([piece_part])));
            }
        } else {
            chunks.push(chunk(json!([part])));
        }
    }
    if chunks.is_empty() {
        chunks.push(chunk(json!([])));
    }
    if let Some(last) = chunks.last_mut() {
        last["candidates"][0]["finishReason"] = candidate["finishReason"].clone();
        last["usageMetadata"] = body["usageMetadata"].clone();
    }
    chunks.iter().map(|chunk| frame(None, chunk)).collect()
}

/// Responses API `response.*` events, numbered, ending in the terminal one.
pub(super) fn responses_frames(body: &Value) -> Vec<String> {
    let mut sequence = 0_u64;
    let mut out = Vec::new();
    let mut event = |mut data: Value| {
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        out.push(frame(data["type"].as_str(), &data));
    };
    let mut started = body.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    started["incomplete_details"] = Value::Null;
    event(json!({"type": "response.created", "response": started.clone()}));
    event(json!({"type": "response.in_progress", "response": started}));
    for (index, item) in body["output"].as_array().into_iter().flatten().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => {
                added["summary"] = json!([]);
                event(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                for (part, summary) in item["summary"].as_array().into_iter().flatten().enumerate() {
                    let at = json!({"item_id": id, "output_index": index, "summary_index": part});
                    let with = |kind: &str, extra: Value| located(&at, kind, extra);
                    event(with("response.reasoning_summary_part.added", json!({"part": {"type": "summary_text", "text": ""}})));
                    for piece in pieces(summary.get("text")) {
                        event(with("response.reasoning_summary_text.delta", json!({"delta": piece})));
                    }
                    event(with("response.reasoning_summary_text.done", json!({"text": summary["text"]})));
                    event(with("response.reasoning_summary_part.done", json!({"part": summary})));
                }
            }
            "message" => {
                added["content"] = json!([]);
                added["status"] = json!("in_progress");
                event(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                for (part_index, part) in item["content"].as_array().into_iter().flatten().enumerate() {
                    let at = json!({"item_id": id, "output_index": index, "content_index": part_index});
                    let (kind, field) = if part["type"] == "refusal" { ("refusal", "refusal") } else { ("output_text", "text") };
                    let mut empty = part.clone();
                    empty[field] = json!("");
                    event(located(&at, "response.content_part.added", json!({"part": empty})));
                    for piece in pieces(part.get(field)) {
                        event(located(&at, &format!("response.{kind}.delta"), json!({"delta": piece})));
                    }
                    event(located(&at, &format!("response.{kind}.done"), json!({field: part[field]})));
                    event(located(&at, "response.content_part.done", json!({"part": part})));
                }
            }
            "function_call" => {
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                event(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                for half in halves(item["arguments"].as_str().unwrap_or_default()) {
                    event(json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": half}));
                }
                event(json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "arguments": item["arguments"]}));
            }
            _ => event(json!({"type": "response.output_item.added", "output_index": index, "item": added})),
        }
        event(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    let terminal = match body["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    event(json!({"type": terminal, "response": body}));
    out
}

/// Splits a recorded event stream into its events (each with its blank line), so pacing
/// applies to recorded streams too.
pub(super) fn recorded_frames(body: &str) -> Vec<String> {
    let normalized = body.replace("\r\n", "\n");
    let mut out: Vec<String> = normalized.split_inclusive("\n\n").map(str::to_owned).collect();
    out.retain(|frame| !frame.trim().is_empty());
    out
}

/// `frames`, ended as `ending` says, sent as `text/event-stream` at `pace`.
pub(super) fn sse_response(frames: Vec<String>, ending: Ending, pace: Pace) -> Response {
    let keep = match ending {
        Ending::Whole => frames.len(),
        Ending::Cut | Ending::Reset => frames.len() / 2,
    };
    let mut items: Vec<Result<Bytes, std::io::Error>> = frames.into_iter().take(keep).map(|frame| Ok(Bytes::from(frame))).collect();
    if ending == Ending::Reset {
        items.push(Err(std::io::Error::other("mock disconnect")));
    }
    paced(items.into_iter(), pace)
}

/// Sends `items` one by one at `pace` as an event stream.
pub(super) fn paced<I>(items: I, pace: Pace) -> Response
where
    I: Iterator<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let stream = futures::stream::unfold((items, 0_usize), move |(mut items, index)| async move {
        if index > 0 && !pace.interval.is_zero() {
            tokio::time::sleep(pace.interval).await;
        }
        if let Some((after, silence)) = pace.stall
            && index == after
        {
            tokio::time::sleep(silence).await;
        }
        let item = items.next()?;
        Some((item, (items, index + 1)))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// The model a [`HostileStream::ModelSwitch`] switches to.
pub const SWITCHED_MODEL: &str = "switched-model";

/// `frames` with each event's JSON data edited by `edit`; `[DONE]` and the other non-JSON frames pass as they are.
pub(super) fn edited(frames: Vec<String>, mut edit: impl FnMut(&mut Value)) -> Vec<String> {
    frames
        .into_iter()
        .map(|frame| {
            let event = frame.lines().find_map(|line| line.strip_prefix("event: ")).map(str::to_owned);
            let data = frame.lines().find_map(|line| line.strip_prefix("data: "));
            match data.and_then(|data| serde_json::from_str::<Value>(data).ok()) {
                Some(mut json) => {
                    edit(&mut json);
                    self::frame(event.as_deref(), &json)
                }
                None => frame,
            }
        })
        .collect()
}

/// `frames` (the answer's events) made hostile as `kind` says, as the chunks to send.
pub(super) fn hostile_stream(wire: &dyn MockWire, frames: Vec<String>, kind: HostileStream, pace: Pace) -> Response {
    let items: Vec<Bytes> = match kind {
        HostileStream::InvalidUtf8 => {
            let mut done = false;
            frames
                .into_iter()
                .map(|frame| match frame.find("echo").filter(|_| !done) {
                    Some(at) => {
                        done = true;
                        let mut bytes = frame.into_bytes();
                        bytes.insert(at + 2, 0xFF);
                        Bytes::from(bytes)
                    }
                    None => Bytes::from(frame),
                })
                .collect()
        }
        HostileStream::NoFinish => wire.unfinished(frames).into_iter().map(Bytes::from).collect(),
        HostileStream::ModelSwitch => {
            let mut named = 0;
            let mut switch = |model: Option<&mut Value>| {
                if let Some(model) = model.filter(|model| model.is_string()) {
                    named += 1;
                    if named == 2 {
                        *model = json!(SWITCHED_MODEL);
                    }
                }
            };
            edited(frames, |json| switch(wire.model_field(json))).into_iter().map(Bytes::from).collect()
        }
        HostileStream::EndlessLine { bytes } => {
            const CHUNK: u64 = 64 * 1024;
            let filler = Bytes::from(vec![b'a'; 64 * 1024]);
            let head = std::iter::once(Bytes::from_static(b"data: {\"text\": \""));
            let body = (0..bytes.div_ceil(CHUNK)).map(move |index| filler.slice(..usize::try_from((bytes - index * CHUNK).min(CHUNK)).unwrap_or(0)));
            return paced(head.chain(body).map(Ok), pace);
        }
    };
    paced(items.into_iter().map(Ok), pace)
}

/// The `type` field of an event (empty when none).
pub(super) fn json_type(json: &Value) -> &str {
    json.get("type").and_then(Value::as_str).unwrap_or_default()
}
