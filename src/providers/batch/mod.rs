//! The OpenAI Batch API (`/v1/files` + `/v1/batches`) for Chat Completions and Responses
//! calls: upload a JSONL input file, create a batch tagged in `metadata`, poll it, read its
//! output and error files, list (to find a batch by tag), cancel. The request lines carry
//! the exact body a live call would send, so a batched answer parses like a live one.
//! Shapes: <https://platform.openai.com/docs/api-reference/batch>.

mod lines;

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

pub use lines::{OutputLine, parse_output, request_line};

use super::transport::request_headers;
use super::types::Endpoint;

/// Why a batch request failed: never an answer, never cached.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The protocol has no batch API evalgrid speaks.
    #[error("`{0}` calls cannot be batched")]
    Unsupported(String),
    /// A header could not be built (the key itself is never quoted).
    #[error("{0}")]
    Config(String),
    /// The request did not get through.
    #[error("batch API request `{what}` failed: {detail}")]
    Transport {
        /// Which request (`upload`, `create`, …).
        what: &'static str,
        /// The transport error, no URL or header.
        detail: String,
    },
    /// The server answered with an error status.
    #[error("batch API request `{what}` answered HTTP {status}: {body}")]
    Status {
        /// Which request.
        what: &'static str,
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
}

/// What a poll says of a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchObject {
    /// `batch_…`.
    pub id: String,
    /// `validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`,
    /// `cancelling`, `cancelled`.
    pub status: String,
    /// The answers of requests that succeeded, once there are any.
    pub output_file_id: Option<String>,
    /// The lines of requests that failed.
    pub error_file_id: Option<String>,
    /// `request_counts`: total, completed, failed.
    pub counts: (u64, u64, u64),
    /// `metadata.evalgrid`, the tag evalgrid gave it.
    pub tag: Option<String>,
}

impl BatchObject {
    fn read(value: &Value) -> Self {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
        let count = |name: &str| value.pointer(&format!("/request_counts/{name}")).and_then(Value::as_u64).unwrap_or(0);
        Self {
            id: text("id").unwrap_or_default(),
            status: text("status").unwrap_or_default(),
            output_file_id: text("output_file_id").filter(|id| !id.is_empty()),
            error_file_id: text("error_file_id").filter(|id| !id.is_empty()),
            counts: (count("total"), count("completed"), count("failed")),
            tag: value.pointer("/metadata/evalgrid").and_then(Value::as_str).map(str::to_owned),
        }
    }

    /// Whether the batch ended: nothing more will be answered.
    #[must_use]
    pub fn ended(&self) -> bool {
        matches!(self.status.as_str(), "completed" | "failed" | "expired" | "cancelled")
    }
}

/// One model endpoint's batch API: its root (`…/v1`), headers and endpoint path.
pub struct BatchApi {
    http: reqwest::Client,
    root: String,
    headers: HeaderMap,
    path: String,
}

impl BatchApi {
    /// The batch API beside `endpoint` (its key already added), over `http`.
    ///
    /// # Errors
    /// `Unsupported` for a protocol without one; `Config` for a header that cannot be built.
    pub fn new(http: reqwest::Client, endpoint: &Endpoint) -> Result<Self, BatchError> {
        let protocol = endpoint.kind.protocol();
        let tail = protocol.batch_path().ok_or_else(|| BatchError::Unsupported(endpoint.kind.to_string()))?;
        let url = protocol.url(&endpoint.base_url, &endpoint.model);
        let root = url.strip_suffix(tail).unwrap_or(&url).trim_end_matches('/').to_owned();
        let headers = request_headers(endpoint).map_err(|e| BatchError::Config(e.to_string()))?;
        Ok(Self { http, root, headers, path: format!("/v1{tail}") })
    }

    /// The `endpoint` of the batch and the `url` of each request line (`/v1/chat/completions`).
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    async fn send(&self, what: &'static str, request: reqwest::RequestBuilder) -> Result<Vec<u8>, BatchError> {
        let response = request.headers(self.headers.clone()).send().await.map_err(|e| BatchError::Transport { what, detail: e.without_url().to_string() })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| BatchError::Transport { what, detail: e.without_url().to_string() })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(BatchError::Status { what, status: status.as_u16(), body: text });
        }
        Ok(body.to_vec())
    }

    async fn json(&self, what: &'static str, request: reqwest::RequestBuilder) -> Result<Value, BatchError> {
        let body = self.send(what, request).await?;
        serde_json::from_slice(&body).map_err(|e| BatchError::Transport { what, detail: format!("the answer is not JSON: {e}") })
    }

    /// `POST /v1/files` (`purpose=batch`, multipart): the input file's id.
    ///
    /// # Errors
    /// The request failed or the answer has no `id`.
    pub async fn upload(&self, jsonl: &[u8], name: &str) -> Result<String, BatchError> {
        let boundary = format!("evalgrid-{}", blake3::hash(jsonl).to_hex());
        let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n").into_bytes();
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n")
                .bytes(),
        );
        body.extend_from_slice(jsonl);
        body.extend(format!("\r\n--{boundary}--\r\n").bytes());
        let request = self.http.post(format!("{}/files", self.root)).header("content-type", format!("multipart/form-data; boundary={boundary}")).body(body);
        let value = self.json("upload", request).await?;
        value.get("id").and_then(Value::as_str).map(str::to_owned).ok_or(BatchError::Transport { what: "upload", detail: "no `id` in the answer".into() })
    }

    /// `POST /v1/batches` with `metadata: {evalgrid: tag}`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn create(&self, input_file_id: &str, tag: &str) -> Result<BatchObject, BatchError> {
        let body = json!({"input_file_id": input_file_id, "endpoint": self.path, "completion_window": "24h", "metadata": {"evalgrid": tag}});
        Ok(BatchObject::read(&self.json("create", self.http.post(format!("{}/batches", self.root)).json(&body)).await?))
    }

    /// `GET /v1/batches/{id}`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn get(&self, id: &str) -> Result<BatchObject, BatchError> {
        Ok(BatchObject::read(&self.json("poll", self.http.get(format!("{}/batches/{id}", self.root))).await?))
    }

    /// `POST /v1/batches/{id}/cancel`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn cancel(&self, id: &str) -> Result<BatchObject, BatchError> {
        Ok(BatchObject::read(&self.json("cancel", self.http.post(format!("{}/batches/{id}/cancel", self.root))).await?))
    }

    /// The batch tagged `tag`, paging `GET /v1/batches?limit=100&after=…` to the end.
    ///
    /// # Errors
    /// A page could not be read.
    pub async fn find(&self, tag: &str) -> Result<Option<BatchObject>, BatchError> {
        let mut after: Option<String> = None;
        loop {
            let url = match &after {
                Some(after) => format!("{}/batches?limit=100&after={after}", self.root),
                None => format!("{}/batches?limit=100", self.root),
            };
            let page = self.json("list", self.http.get(url)).await?;
            let data = page.get("data").and_then(Value::as_array).cloned().unwrap_or_default();
            if let Some(found) = data.iter().map(BatchObject::read).find(|batch| batch.tag.as_deref() == Some(tag)) {
                return Ok(Some(found));
            }
            let more = page.get("has_more").and_then(Value::as_bool).unwrap_or(false);
            let last = page.get("last_id").and_then(Value::as_str).map(str::to_owned).or_else(|| data.last().map(|b| BatchObject::read(b).id));
            match last {
                Some(last) if more && after.as_deref() != Some(last.as_str()) => after = Some(last),
                _ => return Ok(None),
            }
        }
    }

    /// `GET /v1/files/{id}/content`: an output or error file.
    ///
    /// # Errors
    /// The request failed.
    pub async fn content(&self, file_id: &str) -> Result<Vec<u8>, BatchError> {
        self.send("file content", self.http.get(format!("{}/files/{file_id}/content", self.root))).await
    }
}
