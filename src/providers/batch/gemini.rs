//! Gemini batch mode with inline requests: `POST /v1beta/models/{model}:batchGenerateContent`
//! with `batch: {display_name: <tag>, input_config: {requests: {requests: [{request: <the
//! exact live generateContent body>, metadata: {key: <call key>}}]}}}`; the answer and
//! `GET /v1beta/{batches/…}` are an operation (`metadata`: the batch, its `state`
//! `BATCH_STATE_*`, `displayName`, `batchStats`, `createTime`; `done`; `response.
//! inlinedResponses.inlinedResponses[]` with `metadata.key` and `response` or `error`);
//! `POST /v1beta/{batches/…}:cancel`; the list `GET /v1beta/batches` (`operations`,
//! `nextPageToken`). The display name is the tag, found again by listing.
//! Shapes: <https://ai.google.dev/api/batch-mode>.

use reqwest::Method;
use serde_json::{Value, json};

use super::http::Http;
use super::lines::OutputLine;
use super::{BatchError, BatchObject, Found, Results};

/// A proto `int64` count, which REST JSON writes as a string.
fn count(value: &Value, pointer: &str) -> u64 {
    match value.pointer(pointer) {
        Some(Value::String(text)) => text.parse().unwrap_or(0),
        Some(number) => number.as_u64().unwrap_or(0),
        None => 0,
    }
}

fn read(value: &Value) -> BatchObject {
    let batch = value.get("metadata").filter(|m| m.get("state").is_some() || m.get("displayName").is_some()).unwrap_or(value);
    let done = value.get("done").and_then(Value::as_bool).unwrap_or(false);
    let mut status = batch.get("state").and_then(Value::as_str).unwrap_or_default().to_owned();
    if done && !super::state_ended(&status) {
        status = if value.get("error").is_some() { "BATCH_STATE_FAILED" } else { "BATCH_STATE_SUCCEEDED" }.to_owned();
    }
    let inline = value
        .pointer("/response/inlinedResponses/inlinedResponses")
        .or_else(|| batch.pointer("/output/inlinedResponses/inlinedResponses"))
        .and_then(Value::as_array);
    let results = match inline {
        Some(responses) if super::state_ended(&status) => Results::Inline(responses.iter().filter_map(read_line).collect()),
        _ => Results::None,
    };
    let stats = |name: &str| count(batch, &format!("/batchStats/{name}"));
    BatchObject {
        id: value.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
        status,
        counts: (stats("requestCount"), stats("successfulRequestCount"), stats("failedRequestCount")),
        tag: batch.get("displayName").and_then(Value::as_str).map(str::to_owned),
        created_at: batch
            .get("createTime")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .and_then(|t| u64::try_from(t.timestamp()).ok()),
        results,
    }
}

/// One inline response: `response` as a live 200 answer, `error` (a `google.rpc.Status`) as
/// the live error response of its code; one without `metadata.key` answers nothing.
fn read_line(value: &Value) -> Option<OutputLine> {
    let custom_id = value.pointer("/metadata/key")?.as_str()?.to_owned();
    let result = match (value.get("response"), value.get("error")) {
        (Some(response), _) if !response.is_null() => Ok((200, serde_json::to_vec(response).ok()?)),
        (_, Some(error)) if !error.is_null() => {
            let status = http_status(error.get("code").and_then(Value::as_u64).unwrap_or(2));
            Ok((status, serde_json::to_vec(&json!({"error": error})).ok()?))
        }
        _ => Err("the batch returned no response for this request".to_owned()),
    };
    Some(OutputLine { custom_id, result })
}

/// The HTTP status of a gRPC status code, as a live call would have got.
fn http_status(code: u64) -> u16 {
    match code {
        3 | 9 | 11 => 400,
        16 => 401,
        7 => 403,
        5 => 404,
        8 => 429,
        4 => 504,
        14 => 503,
        _ => 500,
    }
}

/// `POST /v1beta/models/{model}:batchGenerateContent` of `items`, inline, named `tag`.
pub(super) async fn create(http: &Http, model: &str, items: &[(String, Value)], tag: &str) -> Result<BatchObject, BatchError> {
    let requests: Vec<Value> = items.iter().map(|(key, body)| json!({"request": body, "metadata": {"key": key}})).collect();
    let body = json!({"batch": {"display_name": tag, "input_config": {"requests": {"requests": requests}}}});
    Ok(read(&http.json("create", http.at(Method::POST, &format!("/models/{model}:batchGenerateContent")).json(&body)).await?))
}

/// `GET /v1beta/{name}` (`batches/…`).
pub(super) async fn get(http: &Http, name: &str) -> Result<BatchObject, BatchError> {
    Ok(read(&http.json("poll", http.at(Method::GET, &format!("/{name}"))).await?))
}

/// `POST /v1beta/{name}:cancel` (it answers nothing), then the batch as it is.
pub(super) async fn cancel(http: &Http, name: &str) -> Result<BatchObject, BatchError> {
    http.send("cancel", http.at(Method::POST, &format!("/{name}:cancel"))).await?;
    get(http, name).await
}

/// The batch whose display name is `tag`, paging `GET /v1beta/batches` to the end.
pub(super) async fn find(http: &Http, tag: &str) -> Result<Found, BatchError> {
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(token) => format!("/batches?pageSize=100&pageToken={token}"),
            None => "/batches?pageSize=100".to_owned(),
        };
        let page = http.json("list", http.at(Method::GET, &path)).await?;
        let operations = page.get("operations").and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(found) = operations.iter().map(read).find(|batch| batch.tag.as_deref() == Some(tag)) {
            return Ok(Found::One(found));
        }
        match page.get("nextPageToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            Some(next) if token.as_deref() != Some(next) => token = Some(next.to_owned()),
            _ => return Ok(Found::None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_reads_state_stats_tag_and_inline_answers_by_key() {
        let op = json!({"name": "batches/b1", "done": true,
            "metadata": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch", "displayName": "eg-1",
                "state": "BATCH_STATE_SUCCEEDED", "createTime": "2025-07-01T00:00:00Z",
                "batchStats": {"requestCount": "3", "successfulRequestCount": "2", "failedRequestCount": "1"}},
            "response": {"inlinedResponses": {"inlinedResponses": [
                {"metadata": {"key": "k1"}, "response": {"candidates": []}},
                {"metadata": {"key": "k2"}, "error": {"code": 3, "message": "bad"}},
                {"response": {"candidates": []}}]}}});
        let batch = read(&op);
        assert_eq!((batch.id.as_str(), batch.tag.as_deref(), batch.counts, batch.ended()), ("batches/b1", Some("eg-1"), (3, 2, 1), true));
        let Results::Inline(lines) = batch.results else { panic!("inline results") };
        assert_eq!(lines.len(), 2, "a response without its key answers nothing");
        assert_eq!(lines[0], OutputLine { custom_id: "k1".into(), result: Ok((200, br#"{"candidates":[]}"#.to_vec())) });
        assert_eq!(lines[1].result.as_ref().map(|(status, _)| *status), Ok(400));
        let running = read(&json!({"name": "batches/b2", "metadata": {"state": "BATCH_STATE_RUNNING", "displayName": "eg-2"}}));
        assert!(!running.ended() && running.results == Results::None);
    }
}
