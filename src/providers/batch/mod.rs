//! The providers' batch APIs, one module per protocol behind one [`BatchApi`]: OpenAI
//! (`/v1/files` + `/v1/batches`), Anthropic Message Batches (`/v1/messages/batches`) and
//! Gemini batch mode (`models/{model}:batchGenerateContent`, inline requests). Each request
//! carries the exact body a live call would send, and each answer comes back as the status
//! and body of a live answer, so a batched answer parses (and caches) like a live one. The
//! collector (`exec::calls::batch`) speaks only to [`BatchApi`], never to a protocol.

mod anthropic;
mod gemini;
mod http;
mod lines;
mod object;
mod openai;

use serde_json::Value;

pub use lines::{OutputLine, parse_output, request_line};
pub use object::{BatchObject, Found, Intent, Results, state_ended};

use super::transport::request_headers;
use super::types::Endpoint;
use http::Http;

/// Which batch API a protocol's calls go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    /// The OpenAI Batch API, its request lines posting to this path after `/v1`
    /// (`/chat/completions`, `/responses`).
    OpenAi(&'static str),
    /// Anthropic Message Batches.
    Anthropic,
    /// Gemini batch mode with inline requests.
    Gemini,
}

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

/// One model endpoint's batch API.
pub struct BatchApi {
    http: Http,
    kind: BatchKind,
    model: String,
}

impl BatchApi {
    /// The batch API beside `endpoint` (its key already added), over `http`.
    ///
    /// # Errors
    /// `Unsupported` for a protocol without one; `Config` for a header that cannot be built.
    pub fn new(http: reqwest::Client, endpoint: &Endpoint) -> Result<Self, BatchError> {
        let protocol = endpoint.kind.protocol();
        let kind = protocol.batch_kind().ok_or_else(|| BatchError::Unsupported(endpoint.kind.to_string()))?;
        let model = endpoint.model.strip_prefix("models/").unwrap_or(&endpoint.model).to_owned();
        let tail = match kind {
            BatchKind::OpenAi(path) => path.to_owned(),
            BatchKind::Anthropic => "/messages".to_owned(),
            BatchKind::Gemini => format!("/models/{model}:generateContent"),
        };
        let url = protocol.url(&endpoint.base_url, &endpoint.model);
        let root = url.strip_suffix(tail.as_str()).unwrap_or(&url).trim_end_matches('/').to_owned();
        let headers = request_headers(endpoint).map_err(|e| BatchError::Config(e.to_string()))?;
        Ok(Self { http: Http { client: http, root, headers }, kind, model })
    }

    /// The endpoint a ledger record names (`/v1/chat/completions`, `/v1/messages/batches`…).
    #[must_use]
    pub fn path(&self) -> String {
        match self.kind {
            BatchKind::OpenAi(path) => format!("/v1{path}"),
            BatchKind::Anthropic => "/v1/messages/batches".into(),
            BatchKind::Gemini => format!("/v1beta/models/{}:batchGenerateContent", self.model),
        }
    }

    /// What must exist before the intent is recorded: OpenAI's uploaded input file (its id);
    /// nothing (an empty id) for the protocols whose create request carries the requests.
    ///
    /// # Errors
    /// The upload failed.
    pub async fn prepare(&self, items: &[(String, Value)], tag: &str) -> Result<String, BatchError> {
        match self.kind {
            BatchKind::OpenAi(path) => openai::upload(&self.http, path, items, tag).await,
            BatchKind::Anthropic | BatchKind::Gemini => Ok(String::new()),
        }
    }

    /// Creates the batch of `items` (key, exact live body), tagged `tag` where the API can.
    ///
    /// # Errors
    /// The request failed.
    pub async fn create(&self, items: &[(String, Value)], input_file_id: &str, tag: &str) -> Result<BatchObject, BatchError> {
        match self.kind {
            BatchKind::OpenAi(path) => openai::create(&self.http, path, input_file_id, tag).await,
            BatchKind::Anthropic => anthropic::create(&self.http, items).await,
            BatchKind::Gemini => gemini::create(&self.http, &self.model, items, tag).await,
        }
    }

    /// Polls batch `id`.
    ///
    /// # Errors
    /// The request failed.
    pub async fn get(&self, id: &str) -> Result<BatchObject, BatchError> {
        match self.kind {
            BatchKind::OpenAi(_) => openai::get(&self.http, id).await,
            BatchKind::Anthropic => anthropic::get(&self.http, id).await,
            BatchKind::Gemini => gemini::get(&self.http, id).await,
        }
    }

    /// Asks the provider to cancel batch `id`; its state after the request.
    ///
    /// # Errors
    /// The request failed.
    pub async fn cancel(&self, id: &str) -> Result<BatchObject, BatchError> {
        match self.kind {
            BatchKind::OpenAi(_) => openai::cancel(&self.http, id).await,
            BatchKind::Anthropic => anthropic::cancel(&self.http, id).await,
            BatchKind::Gemini => gemini::cancel(&self.http, id).await,
        }
    }

    /// The batch an interrupted `intent` created, if any: by its tag where the API keeps
    /// one, else (Anthropic) by its creation time and request count.
    ///
    /// # Errors
    /// A page of the account's batches could not be read.
    pub async fn find(&self, intent: Intent<'_>) -> Result<Found, BatchError> {
        match self.kind {
            BatchKind::OpenAi(_) => openai::find(&self.http, intent.tag).await,
            BatchKind::Anthropic => anthropic::find(&self.http, intent).await,
            BatchKind::Gemini => gemini::find(&self.http, intent.tag).await,
        }
    }

    /// The answers of an ended batch, one per request it answered (any order), and the
    /// result lines that could not be read (numbered).
    ///
    /// # Errors
    /// A results file could not be read.
    pub async fn results(&self, batch: &BatchObject) -> Result<(Vec<OutputLine>, Vec<String>), BatchError> {
        match &batch.results {
            Results::None => Ok((Vec::new(), Vec::new())),
            Results::Files(output, error) => openai::results(&self.http, output.as_deref(), error.as_deref()).await,
            Results::Url(url) => anthropic::results(&self.http, url).await,
            Results::Inline(lines) => Ok((lines.clone(), Vec::new())),
        }
    }
}
