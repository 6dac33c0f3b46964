//! Anthropic Message Batches: `POST /v1/messages/batches` with `requests: [{custom_id,
//! params}]` (`params`: the exact live Messages body), `GET …/{id}` (`processing_status`
//! `in_progress`/`canceling`/`ended`, `request_counts`, `results_url`), the results JSONL
//! (`{custom_id, result: {type: succeeded, message} | {type: errored, error} | {type:
//! canceled} | {type: expired}}`), `POST …/{id}/cancel`, and the list (newest first,
//! `limit`, `after_id`; `data`, `has_more`, `last_id`).
//! Shapes: <https://docs.anthropic.com/en/api/creating-message-batches>.
//!
//! A batch carries no metadata, so an interrupted intent is found by what it has: created
//! at or after the intent (less [`CLOCK_SLACK_S`]), with the intent's request count, and
//! claimed by no other ledger record.

use reqwest::Method;
use serde_json::{Value, json};

use super::http::Http;
use super::lines::OutputLine;
use super::{BatchError, BatchObject, Found, Intent, Results};

/// How far this machine's clock may run ahead of the provider's when matching a batch's
/// `created_at` against an intent's time.
pub(super) const CLOCK_SLACK_S: u64 = 600;

fn read(value: &Value) -> BatchObject {
    let count = |name: &str| value.pointer(&format!("/request_counts/{name}")).and_then(Value::as_u64).unwrap_or(0);
    let (processing, succeeded) = (count("processing"), count("succeeded"));
    let failed = count("errored") + count("canceled") + count("expired");
    let status = value.get("processing_status").and_then(Value::as_str).unwrap_or_default().to_owned();
    let results = match value.get("results_url").and_then(Value::as_str) {
        Some(url) if status == "ended" && !url.is_empty() => Results::Url(url.to_owned()),
        _ => Results::None,
    };
    BatchObject {
        id: value.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
        status,
        counts: (processing + succeeded + failed, succeeded, failed),
        tag: None,
        created_at: value.get("created_at").and_then(Value::as_str).and_then(unix_seconds),
        results,
    }
}

/// An RFC 3339 time as Unix seconds.
fn unix_seconds(text: &str) -> Option<u64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().and_then(|time| u64::try_from(time.timestamp()).ok())
}

/// Whether `id` is a valid `custom_id` (`^[a-zA-Z0-9_-]{1,64}$`): a call key's 64 hex digits are.
fn valid_custom_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `POST /v1/messages/batches` of `items`, each `custom_id` its call key.
pub(super) async fn create(http: &Http, items: &[(String, Value)]) -> Result<BatchObject, BatchError> {
    if let Some((key, _)) = items.iter().find(|(key, _)| !valid_custom_id(key)) {
        return Err(BatchError::Config(format!("call key `{key}` is not a valid Anthropic custom_id")));
    }
    let requests: Vec<Value> = items.iter().map(|(key, body)| json!({"custom_id": key, "params": body})).collect();
    let body = json!({ "requests": requests });
    Ok(read(&http.json("create", http.at(Method::POST, "/messages/batches").json(&body)).await?))
}

/// `GET /v1/messages/batches/{id}`.
pub(super) async fn get(http: &Http, id: &str) -> Result<BatchObject, BatchError> {
    Ok(read(&http.json("poll", http.at(Method::GET, &format!("/messages/batches/{id}"))).await?))
}

/// `POST /v1/messages/batches/{id}/cancel`.
pub(super) async fn cancel(http: &Http, id: &str) -> Result<BatchObject, BatchError> {
    Ok(read(&http.json("cancel", http.at(Method::POST, &format!("/messages/batches/{id}/cancel"))).await?))
}

/// The batches `intent` may have created: paging the list (newest first) back to the
/// intent's time less the slack, those with its request count that no record claims.
pub(super) async fn find(http: &Http, intent: Intent<'_>) -> Result<Found, BatchError> {
    let since = intent.recorded_at.saturating_sub(CLOCK_SLACK_S);
    let mut after: Option<String> = None;
    let mut matches = Vec::new();
    loop {
        let path = match &after {
            Some(after) => format!("/messages/batches?limit=100&after_id={after}"),
            None => "/messages/batches?limit=100".to_owned(),
        };
        let page = http.json("list", http.at(Method::GET, &path)).await?;
        let data: Vec<BatchObject> = page.get("data").and_then(Value::as_array).map(|d| d.iter().map(read).collect()).unwrap_or_default();
        let older = data.iter().any(|batch| batch.created_at.is_some_and(|at| at < since));
        matches.extend(
            data.iter()
                .filter(|batch| {
                    batch.created_at.is_some_and(|at| at >= since)
                        && usize::try_from(batch.counts.0).is_ok_and(|n| n == intent.requests)
                        && !intent.claimed.contains(&batch.id)
                })
                .cloned(),
        );
        let more = page.get("has_more").and_then(Value::as_bool).unwrap_or(false);
        let last = page.get("last_id").and_then(Value::as_str).map(str::to_owned).or_else(|| data.last().map(|b| b.id.clone()));
        match last {
            Some(last) if more && !older && after.as_deref() != Some(last.as_str()) => after = Some(last),
            _ => break,
        }
    }
    Ok(match matches.len() {
        0 => Found::None,
        1 => Found::One(matches.remove(0)),
        _ => Found::Many(matches),
    })
}

/// The results JSONL at `url` (the batch's `results_url`).
pub(super) async fn results(http: &Http, url: &str) -> Result<(Vec<OutputLine>, Vec<String>), BatchError> {
    let text = http.send("results", http.client.get(url)).await?;
    Ok(parse_results(&text))
}

/// Reads the results JSONL; a line that is not a result is reported by number and skipped.
fn parse_results(text: &[u8]) -> (Vec<OutputLine>, Vec<String>) {
    super::lines::parse_jsonl(text, read_line)
}

/// One result: a succeeded message as a live 200 answer, an errored request as the live
/// error response of its type, a canceled or expired one as the batch's own error.
fn read_line(value: &Value) -> Option<OutputLine> {
    let custom_id = value.get("custom_id")?.as_str()?.to_owned();
    let result = value.get("result")?;
    let result = match result.get("type")?.as_str()? {
        "succeeded" => Ok((200, serde_json::to_vec(result.get("message")?).ok()?)),
        "errored" => {
            let error = result.get("error").cloned().unwrap_or(Value::Null);
            let kind = error.pointer("/error/type").or_else(|| error.get("type")).and_then(Value::as_str).unwrap_or("api_error");
            Ok((status_of(kind), serde_json::to_vec(&error).ok()?))
        }
        "canceled" => Err("batch_cancelled: the batch was canceled before this request ran".to_owned()),
        "expired" => Err("batch_expired: the batch expired before this request ran".to_owned()),
        _ => return None,
    };
    Some(OutputLine { custom_id, result })
}

/// The HTTP status a live request gets for an error of `kind`.
fn status_of(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_read_succeeded_errored_canceled_and_expired_and_number_torn_lines() {
        let text = br#"{"custom_id":"k1","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","content":[]}}}
{"custom_id":"k2","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}}}
{"custom_id":"k3","result":{"type":"canceled"}}
{"custom_id":"k4","res
{"custom_id":"k5","result":{"type":"expired"}}
"#;
        let (lines, problems) = parse_results(text);
        assert_eq!(problems, vec!["line 4: not a batch result line".to_owned()]);
        assert_eq!(lines[0].result, Ok((200, br#"{"content":[],"id":"msg_1","type":"message"}"#.to_vec())));
        assert_eq!(lines[1].result.as_ref().map(|(status, _)| *status), Ok(400));
        assert!(lines[2].result.as_ref().is_err_and(|e| e.starts_with("batch_cancelled")));
        assert!(lines[3].result.as_ref().is_err_and(|e| e.starts_with("batch_expired")));
    }

    #[test]
    fn a_batch_counts_every_request_and_its_creation_time_is_read() {
        let batch = read(&json!({"id": "msgbatch_1", "processing_status": "ended", "created_at": "2024-08-20T18:37:24.100435Z",
            "request_counts": {"processing": 0, "succeeded": 5, "errored": 1, "canceled": 1, "expired": 1}, "results_url": "http://h/r"}));
        assert_eq!((batch.counts, batch.created_at, batch.results.clone()), ((8, 5, 3), Some(1_724_179_044), Results::Url("http://h/r".into())));
        assert!(batch.ended());
        assert!(valid_custom_id(&"ab".repeat(32)) && !valid_custom_id(&"a".repeat(65)) && !valid_custom_id("a.b"));
    }
}
