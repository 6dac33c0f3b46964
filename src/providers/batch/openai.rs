//! The OpenAI Batch API for Chat Completions and Responses calls: upload a JSONL input file
//! (`POST /v1/files`, `purpose=batch`), create a batch tagged in `metadata`, poll it, read
//! its output and error files, list (to find a batch by tag), cancel.
//! Shapes: <https://platform.openai.com/docs/api-reference/batch>.

use reqwest::Method;
use serde_json::{Value, json};

use super::http::Http;
use super::lines::{OutputLine, parse_output, request_line};
use super::{BatchError, BatchObject, Found, Results};

fn read(value: &Value) -> BatchObject {
    let text = |name: &str| value.get(name).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let count = |name: &str| value.pointer(&format!("/request_counts/{name}")).and_then(Value::as_u64).unwrap_or(0);
    BatchObject {
        id: text("id").unwrap_or_default(),
        status: text("status").unwrap_or_default(),
        counts: (count("total"), count("completed"), count("failed")),
        tag: value.pointer("/metadata/evalgrid").and_then(Value::as_str).map(str::to_owned),
        created_at: value.get("created_at").and_then(Value::as_u64),
        results: Results::Files(text("output_file_id"), text("error_file_id")),
    }
}

/// `POST /v1/files` (`purpose=batch`, multipart) of the request lines: the input file's id.
pub(super) async fn upload(http: &Http, path: &str, items: &[(String, Value)], tag: &str) -> Result<String, BatchError> {
    let jsonl: String = items.iter().map(|(key, body)| request_line(key, &format!("/v1{path}"), body)).collect();
    let boundary = format!("evalgrid-{}", blake3::hash(jsonl.as_bytes()).to_hex());
    let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n").into_bytes();
    body.extend(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{tag}.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n").bytes(),
    );
    body.extend_from_slice(jsonl.as_bytes());
    body.extend(format!("\r\n--{boundary}--\r\n").bytes());
    let request = http.at(Method::POST, "/files").header("content-type", format!("multipart/form-data; boundary={boundary}")).body(body);
    let value = http.json("upload", request).await?;
    value.get("id").and_then(Value::as_str).map(str::to_owned).ok_or(BatchError::Transport { what: "upload", detail: "no `id` in the answer".into() })
}

/// `POST /v1/batches` with `metadata: {evalgrid: tag}`.
pub(super) async fn create(http: &Http, path: &str, input_file_id: &str, tag: &str) -> Result<BatchObject, BatchError> {
    let body = json!({"input_file_id": input_file_id, "endpoint": format!("/v1{path}"), "completion_window": "24h", "metadata": {"evalgrid": tag}});
    Ok(read(&http.json("create", http.at(Method::POST, "/batches").json(&body)).await?))
}

/// `GET /v1/batches/{id}`.
pub(super) async fn get(http: &Http, id: &str) -> Result<BatchObject, BatchError> {
    Ok(read(&http.json("poll", http.at(Method::GET, &format!("/batches/{id}"))).await?))
}

/// `POST /v1/batches/{id}/cancel`.
pub(super) async fn cancel(http: &Http, id: &str) -> Result<BatchObject, BatchError> {
    Ok(read(&http.json("cancel", http.at(Method::POST, &format!("/batches/{id}/cancel"))).await?))
}

/// The batch tagged `tag`, paging `GET /v1/batches?limit=100&after=…` to the end.
pub(super) async fn find(http: &Http, tag: &str) -> Result<Found, BatchError> {
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(after) => format!("/batches?limit=100&after={after}"),
            None => "/batches?limit=100".to_owned(),
        };
        let page = http.json("list", http.at(Method::GET, &path)).await?;
        let data = page.get("data").and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(found) = data.iter().map(read).find(|batch| batch.tag.as_deref() == Some(tag)) {
            return Ok(Found::One(found));
        }
        let more = page.get("has_more").and_then(Value::as_bool).unwrap_or(false);
        let last = page.get("last_id").and_then(Value::as_str).map(str::to_owned).or_else(|| data.last().map(|b| read(b).id));
        match last {
            Some(last) if more && after.as_deref() != Some(last.as_str()) => after = Some(last),
            _ => return Ok(Found::None),
        }
    }
}

/// The lines of the error then the output file (`GET /v1/files/{id}/content`).
pub(super) async fn results(http: &Http, output: Option<&str>, error: Option<&str>) -> Result<(Vec<OutputLine>, Vec<String>), BatchError> {
    let (mut lines, mut problems) = (Vec::new(), Vec::new());
    for file in [error, output].into_iter().flatten() {
        let text = http.send("file content", http.at(Method::GET, &format!("/files/{file}/content"))).await?;
        let (more, trouble) = parse_output(&text);
        lines.extend(more);
        problems.extend(trouble.into_iter().map(|problem| format!("file {file}: {problem}")));
    }
    Ok((lines, problems))
}
