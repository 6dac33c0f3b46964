//! Renders mock replies and faults in each protocol's exact success and error shapes.
//!
//! Usage is reported in each provider's own convention (OpenAI `completion_tokens` include
//! reasoning, Gemini reports thoughts separately, Anthropic reports cache reads apart from
//! `input_tokens`), so parsing it back yields the same [`Usage`]. A dropped connection is
//! produced by promising a longer `Content-Length` than is sent, which makes hyper close
//! the socket mid-body.

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::super::types::{FinishReason, Usage};
use super::script::{Fault, HostileStream, MockReply, MockRequest, RetryHeader, echo};
use super::signatures::{ANTHROPIC_SIGNATURE, GEMINI_SIGNATURE};
use super::stream::{Ending, Pace, frames, hostile_stream, paced, sse_response};
use super::wire::MockWire;

/// Text of a string, or of the `pointer` field of each element of an array of parts.
pub(super) fn strings<'a>(value: Option<&'a Value>, pointer: &str) -> Vec<&'a str> {
    let Some(value) = value else {
        return Vec::new();
    };
    match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(|item| item.pointer(pointer).and_then(Value::as_str)).collect(),
        _ => Vec::new(),
    }
}

/// Whitespace-separated words, as `split_whitespace` counts them; ASCII text (nearly all
/// of it) is counted by bytes, because this runs twice per request on every mock answer.
fn words(text: &str) -> u64 {
    if !text.is_ascii() {
        return text.split_whitespace().count() as u64;
    }
    // The ASCII characters `char::is_whitespace` accepts: tab, LF, VT, FF, CR (9–13) and
    // space. A word starts at each non-space byte after a space (or at the start); the
    // branch-free sum over byte pairs vectorizes.
    let space = |b: u8| u8::from(b == b' ' || (b'\t'..=b'\r').contains(&b));
    let bytes = text.as_bytes();
    let first = bytes.first().map_or(0, |b| u64::from(1 - space(*b)));
    let rest = bytes.get(1..).unwrap_or_default();
    let starts: u64 = bytes.iter().zip(rest).map(|(a, b)| u64::from(space(*a) & (1 - space(*b)))).sum();
    first + starts
}

/// Word count of everything the model would read: system prompt plus all turns.
fn input_words(wire: &dyn MockWire, request: &MockRequest) -> u64 {
    let body = &request.body;
    let mut texts: Vec<&str> = Vec::new();
    let (turns_key, content_key) = wire.turns();
    for turn in body.get(turns_key).and_then(Value::as_array).into_iter().flatten() {
        texts.extend(strings(turn.get(content_key), "/text"));
    }
    texts.extend(strings(body.get("system"), "/text"));
    texts.extend(strings(body.get("instructions"), "/text"));
    texts.extend(strings(body.pointer("/systemInstruction/parts"), "/text"));
    texts.iter().map(|text| words(text)).sum()
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A recorded body sent verbatim (an invalid status becomes 500, never a panic).
pub(super) fn recorded_response(status: u16, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The refusal of a prompt of `tokens` tokens by a model with a `window`-token context, in
/// the shape each API documents, always HTTP 400.
pub(super) fn overflow_response(wire: &dyn MockWire, tokens: u64, window: u64) -> Response {
    json_response(StatusCode::BAD_REQUEST, &wire.overflow_body(tokens, window))
}

pub(super) fn error_response(wire: &dyn MockWire, status: u16, message: &str, retry: RetryHeader) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, &wire.error_body(status, message));
    let headers = response.headers_mut();
    match retry {
        RetryHeader::None => {}
        RetryHeader::Seconds(seconds) => {
            headers.insert(HeaderName::from_static("retry-after"), HeaderValue::from(seconds));
        }
        RetryHeader::Millis(millis) => {
            headers.insert(HeaderName::from_static("retry-after-ms"), HeaderValue::from(millis));
            headers.insert(HeaderName::from_static("retry-after"), HeaderValue::from(millis.div_ceil(1000)));
        }
    }
    response
}

pub(super) async fn fault_response(wire: &dyn MockWire, fault: Fault, request: &MockRequest, answered_model: Option<&str>, pace: Pace) -> Response {
    if request.stream
        && let Some(response) = streamed_fault(wire, &fault, request, answered_model, pace).await
    {
        return response;
    }
    match fault {
        Fault::RateLimited(retry) => error_response(wire, 429, "Rate limit reached, slow down", retry),
        Fault::ServerError => error_response(wire, 500, "internal server error", RetryHeader::None),
        Fault::Unavailable(retry) => error_response(wire, 503, "service unavailable", retry),
        Fault::Overloaded => {
            let (status, message) = wire.overloaded();
            error_response(wire, status, message, RetryHeader::None)
        }
        Fault::OverloadedIn200 => json_response(StatusCode::OK, &wire.overloaded_in_200()),
        Fault::Status { status, message } => error_response(wire, status, &message, RetryHeader::None),
        Fault::Slow(delay) | Fault::StallMidStream { silence: delay, .. } => {
            tokio::time::sleep(delay).await;
            reply_response(wire, request, &echo(request), answered_model)
        }
        Fault::TruncatedJson | Fault::Disconnect => {
            let full = success_body(wire, request, &echo(request), answered_model).to_string().into_bytes();
            let half = Bytes::copy_from_slice(&full[..full.len() / 2]);
            let body = if fault == Fault::Disconnect {
                // Half a body, then the stream fails: hyper aborts the
                // connection mid-body, which the client sees as a reset.
                // (A lying Content-Length would trip hyper's debug assertions.)
                let chunks: Vec<Result<Bytes, std::io::Error>> = vec![Ok(half), Err(std::io::Error::other("mock disconnect"))];
                Body::from_stream(futures::stream::iter(chunks))
            } else {
                Body::from(half)
            };
            let mut response = Response::new(body);
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Fault::HugeAnswer { bytes } => huge_answer(wire, request, bytes, answered_model),
        Fault::HostileStream(HostileStream::InvalidUtf8) => {
            let mut body = success_body(wire, request, &echo(request), answered_model).to_string().into_bytes();
            if let Some(at) = body.windows(4).position(|window| window == b"echo") {
                body.insert(at + 2, 0xFF);
            }
            let mut response = Response::new(Body::from(body));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Fault::HostileStream(_) => reply_response(wire, request, &echo(request), answered_model),
    }
}

/// The streamed form of a fault, for faults that happen after a stream has begun (errors
/// with their own HTTP status are sent as such, before any event, as real servers do).
async fn streamed_fault(wire: &dyn MockWire, fault: &Fault, request: &MockRequest, answered_model: Option<&str>, pace: Pace) -> Option<Response> {
    let events = || frames(wire, request, &success_body(wire, request, &echo(request), answered_model));
    Some(match fault {
        Fault::OverloadedIn200 => {
            let mut events = events();
            events.truncate(2);
            events.push(wire.overload_frame());
            sse_response(events, Ending::Whole, pace)
        }
        Fault::TruncatedJson => sse_response(events(), Ending::Cut, pace),
        Fault::Disconnect => sse_response(events(), Ending::Reset, pace),
        Fault::Slow(delay) => {
            tokio::time::sleep(*delay).await;
            sse_response(events(), Ending::Whole, pace)
        }
        Fault::StallMidStream { after, silence } => sse_response(events(), Ending::Whole, Pace { stall: Some((*after, *silence)), ..pace }),
        Fault::HugeAnswer { bytes } => huge_stream(wire, request, *bytes, answered_model, pace),
        Fault::HostileStream(kind) => hostile_stream(wire, events(), *kind, pace),
        _ => return None,
    })
}

/// A streamed answer whose text is `bytes` × `a`, sent as 64 KiB text events generated one
/// at a time. (Events after the text that repeat it whole, such as the Responses API's
/// final response, carry it only when it is at most 4 MiB; a client reading that far has
/// a cap above the answer.)
fn huge_stream(wire: &dyn MockWire, request: &MockRequest, bytes: u64, answered_model: Option<&str>, pace: Pace) -> Response {
    const MARK: &str = "@@mock-huge-answer@@";
    const CHUNK: u64 = 64 * 1024;
    let mut before = frames(wire, request, &success_body(wire, request, &MockReply::text(MARK), answered_model));
    let at = before.iter().position(|event| event.contains(MARK)).unwrap_or(before.len());
    let mut rest = before.split_off(at);
    let expanded = (!rest.is_empty()).then(|| rest.remove(0));
    let whole = if bytes <= 4 << 20 { "a".repeat(usize::try_from(bytes).unwrap_or(0)) } else { String::new() };
    let after: Vec<String> = rest.iter().map(|event| event.replace(MARK, &whole)).collect();
    let text = expanded.into_iter().flat_map(move |event| {
        (0..bytes.div_ceil(CHUNK)).map(move |index| {
            let len = usize::try_from((bytes - index * CHUNK).min(CHUNK)).unwrap_or(0);
            event.replace(MARK, &"a".repeat(len))
        })
    });
    let items = before.into_iter().chain(text).chain(after).map(|event| Ok(Bytes::from(event)));
    paced(items, pace)
}

/// A valid success body whose answer text is `bytes` × `a`, generated chunk by chunk.
fn huge_answer(wire: &dyn MockWire, request: &MockRequest, bytes: u64, answered_model: Option<&str>) -> Response {
    const MARK: &str = "@@mock-huge-answer@@";
    const CHUNK: u64 = 64 * 1024;
    let full = success_body(wire, request, &MockReply::text(MARK), answered_model).to_string();
    let (head, tail) = full.split_once(MARK).unwrap_or((&full, ""));
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let pieces = (0..bytes.div_ceil(CHUNK)).map(move |index| {
        let len = (bytes - index * CHUNK).min(CHUNK);
        chunk.slice(..usize::try_from(len).unwrap_or(0))
    });
    let stream = std::iter::once(Bytes::from(head.to_owned())).chain(pieces).chain(std::iter::once(Bytes::from(tail.to_owned()))).map(Ok::<_, std::io::Error>);
    let mut response = Response::new(Body::from_stream(futures::stream::iter(stream)));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn reply_response(wire: &dyn MockWire, request: &MockRequest, reply: &MockReply, answered_model: Option<&str>) -> Response {
    json_response(StatusCode::OK, &success_body(wire, request, reply, answered_model))
}

/// A reply, streamed as the request's protocol streams when it asked for a stream.
pub(super) fn answer_response(wire: &dyn MockWire, request: &MockRequest, reply: &MockReply, answered_model: Option<&str>, pace: Pace) -> Response {
    if request.stream {
        sse_response(frames(wire, request, &success_body(wire, request, reply, answered_model)), Ending::Whole, pace)
    } else {
        reply_response(wire, request, reply, answered_model)
    }
}

/// The success JSON of the request's protocol, with usage and a `model` field.
pub(super) fn success_body(wire: &dyn MockWire, request: &MockRequest, reply: &MockReply, answered_model: Option<&str>) -> Value {
    let model = reply.model.as_deref().or(answered_model).unwrap_or(&request.model);
    let reasoning_words = reply.reasoning.as_deref().map_or(0, words);
    let usage = reply.usage.unwrap_or(Usage {
        input: input_words(wire, request),
        output: words(&reply.text) + reasoning_words,
        reasoning: reasoning_words,
        cached: 0,
        cost: None,
    });
    wire.success_body(request, reply, model, usage)
}

/// A Chat Completions response: one choice whose message holds the text (or refusal),
/// inline reasoning and tool calls.
pub(super) fn chat_body(request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
    let finish = &reply.finish_reason;
    let tool_calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|call| {
            json!({
                "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()},
            })
        })
        .collect();
    let declined = *finish == FinishReason::Refusal;
    let mut message = json!({"role": "assistant", "content": if declined { Value::Null } else { json!(reply.text) },
        "refusal": if declined { json!(if reply.text.is_empty() { "I can't help with that." } else { reply.text.as_str() }) } else { Value::Null }});
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = match finish {
        FinishReason::Other(other) => other.clone(),
        FinishReason::Refusal => "stop".to_owned(),
        FinishReason::Malformed => "tool_calls".to_owned(),
        known => known.to_string(),
    };
    json!({
        "id": format!("chatcmpl-mock-{}", request.route_index), "object": "chat.completion",
        "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.input, "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cached},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning}},
    })
}

/// An Anthropic Messages response: signed thinking, text and `tool_use` blocks.
pub(super) fn anthropic_body(request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
    let finish = &reply.finish_reason;
    let mut content = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        content.push(json!({"type": "thinking", "thinking": reasoning, "signature": format!("{ANTHROPIC_SIGNATURE}{}", request.route_index)}));
    }
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for call in &reply.tool_calls {
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}));
    }
    let stop = match finish {
        FinishReason::Stop => "end_turn".to_owned(),
        FinishReason::Length => "max_tokens".to_owned(),
        FinishReason::ToolCalls | FinishReason::Malformed => "tool_use".to_owned(),
        FinishReason::ContentFilter | FinishReason::Refusal => "refusal".to_owned(),
        // Never a 200 on a real server: see `overflow_response`.
        FinishReason::ContextExceeded => "context_exceeded".to_owned(),
        FinishReason::Other(other) => other.clone(),
    };
    json!({
        "id": format!("msg_mock_{}", request.route_index), "type": "message", "role": "assistant",
        "model": model, "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": usage.input.saturating_sub(usage.cached),
            "cache_read_input_tokens": usage.cached, "cache_creation_input_tokens": 0,
            "output_tokens": usage.output},
    })
}

/// A Gemini `generateContent` response: thought, text and `functionCall` parts, signed as
/// Gemini 3 (and thinking 2.5) sign them.
pub(super) fn gemini_body(request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
    let finish = &reply.finish_reason;
    let mut parts = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        parts.push(json!({"text": reasoning, "thought": true}));
    }
    if !reply.text.is_empty() {
        parts.push(json!({"text": reply.text}));
    }
    for call in &reply.tool_calls {
        parts.push(json!({"functionCall": {"name": call.name, "args": call.arguments}}));
    }
    // Gemini 3 (and thinking 2.5) sign the first function call, else the last part.
    if request.wants_reasoning || request.model.contains("gemini-3") {
        let signed = parts.iter().position(|part| part.get("functionCall").is_some()).or_else(|| parts.len().checked_sub(1));
        if let Some(part) = signed.and_then(|at| parts.get_mut(at)) {
            part["thoughtSignature"] = json!(format!("{GEMINI_SIGNATURE}{}", request.route_index));
        }
    }
    let finish = match finish {
        FinishReason::Stop | FinishReason::ToolCalls => "STOP".to_owned(),
        FinishReason::Length => "MAX_TOKENS".to_owned(),
        FinishReason::ContentFilter | FinishReason::Refusal => "SAFETY".to_owned(),
        FinishReason::Malformed => "MALFORMED_FUNCTION_CALL".to_owned(),
        FinishReason::ContextExceeded => "CONTEXT_EXCEEDED".to_owned(),
        FinishReason::Other(other) => other.to_uppercase(),
    };
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": usage.input,
            "candidatesTokenCount": usage.output.saturating_sub(usage.reasoning),
            "thoughtsTokenCount": usage.reasoning, "cachedContentTokenCount": usage.cached,
            "totalTokenCount": usage.input + usage.output},
        "modelVersion": model, "responseId": format!("mock-{}", request.route_index),
    })
}

/// A Responses API response object: a reasoning item (summary plus an opaque
/// `encrypted_content`) when there is reasoning, the answer as a `message` with one
/// `output_text` (or `refusal`) part, one `function_call` item per call, and
/// `status`/`incomplete_details` for truncated and filtered answers.
pub(super) fn responses_body(request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
    let index = request.route_index;
    let mut output = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        output.push(json!({"type": "reasoning", "id": format!("rs_mock_{index}"),
            "summary": [{"type": "summary_text", "text": reasoning}],
            "encrypted_content": format!("mock-encrypted-{index}")}));
    }
    let finish = &reply.finish_reason;
    let part = if *finish == FinishReason::Refusal {
        Some(json!({"type": "refusal", "refusal": if reply.text.is_empty() { "I can't help with that." } else { reply.text.as_str() }}))
    } else {
        (!reply.text.is_empty()).then(|| json!({"type": "output_text", "text": reply.text, "annotations": []}))
    };
    if let Some(part) = part {
        output.push(json!({"type": "message", "id": format!("msg_mock_{index}"), "status": "completed", "role": "assistant", "content": [part]}));
    }
    for (number, call) in reply.tool_calls.iter().enumerate() {
        output.push(json!({"type": "function_call", "id": format!("fc_mock_{index}_{number}"), "call_id": call.id,
            "name": call.name, "arguments": call.arguments.to_string(), "status": "completed"}));
    }
    let (status, incomplete) = match finish {
        FinishReason::Length => ("incomplete".to_owned(), json!({"reason": "max_output_tokens"})),
        FinishReason::ContentFilter => ("incomplete".to_owned(), json!({"reason": "content_filter"})),
        FinishReason::Other(other) => (other.clone(), Value::Null),
        _ => ("completed".to_owned(), Value::Null),
    };
    json!({
        "id": format!("resp_mock_{index}"), "object": "response", "created_at": 0,
        "status": status, "error": null, "incomplete_details": incomplete, "model": model, "output": output,
        "usage": {"input_tokens": usage.input, "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.input + usage.output},
    })
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_counts_as_split_whitespace_does() {
        for text in ["", " ", "one", "  two words ", "a\tb\nc\x0Bd\x0Ce\rf", "x\u{a0}y z", "é  ü\u{2003}ö", "end\n"] {
            assert_eq!(words(text), text.split_whitespace().count() as u64, "{text:?}");
        }
    }
}
