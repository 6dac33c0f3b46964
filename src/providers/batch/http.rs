//! The HTTP shared by the batch APIs: one root, the live call's headers, and an error that
//! names the request but never its URL or headers.

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::BatchError;

/// A batch API's client: its root (`…/v1`, `…/v1beta`) and headers (key, version).
pub(super) struct Http {
    pub(super) client: reqwest::Client,
    pub(super) root: String,
    pub(super) headers: HeaderMap,
}

impl Http {
    /// A request to `root` + `path`.
    pub(super) fn at(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.root))
    }

    /// Sends `request` with the headers; the body of a success.
    pub(super) async fn send(&self, what: &'static str, request: reqwest::RequestBuilder) -> Result<Vec<u8>, BatchError> {
        let response = request.headers(self.headers.clone()).send().await.map_err(|e| BatchError::Transport { what, detail: e.without_url().to_string() })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| BatchError::Transport { what, detail: e.without_url().to_string() })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(BatchError::Status { what, status: status.as_u16(), body: text });
        }
        Ok(body.to_vec())
    }

    /// [`send`](Self::send), its body read as JSON.
    pub(super) async fn json(&self, what: &'static str, request: reqwest::RequestBuilder) -> Result<Value, BatchError> {
        let body = self.send(what, request).await?;
        serde_json::from_slice(&body).map_err(|e| BatchError::Transport { what, detail: format!("the answer is not JSON: {e}") })
    }
}
