// An OpenAI-compatible dialect as one file: a gateway that speaks Chat Completions but takes
// its key in an `api-key` header (as Azure does) and serves under `/openai/v1`. Everything it
// does not change is delegated to `ChatCompletions`. Compiled by the tests of
// `src/providers/registry.rs` (`include!`), so this example cannot rot.

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value};

use crate::providers::openai::ChatCompletions;
use crate::providers::shaping::Shaping;
use crate::providers::protocol::Protocol;
use crate::providers::stream::Fold;
use crate::providers::{CallError, ChatRequest, ChatResponse, Endpoint, Secret};

/// A Chat Completions gateway keyed by `api-key`, under `/openai`.
pub(crate) struct KeyedGateway;

impl Protocol for KeyedGateway {
    fn default_base_url(&self) -> &'static str {
        "https://gateway.example.com/openai"
    }

    fn url(&self, base_url: &str, model: &str) -> String {
        ChatCompletions.url(base_url, model)
    }

    fn legacy_url(&self, base_url: &str, model: &str) -> String {
        ChatCompletions.legacy_url(base_url, model)
    }

    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        let mut headers = ChatCompletions.headers(None)?;
        if let Some(key) = api_key {
            // Never quote the key in the error.
            let mut value = HeaderValue::from_str(key.expose()).map_err(|_| CallError::Config { detail: "API key contains bytes not allowed in `api-key`".into() })?;
            value.set_sensitive(true);
            headers.insert("api-key", value);
        }
        Ok(headers)
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        ChatCompletions.build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError> {
        ChatCompletions.parse(status, headers, body, shaping)
    }

    fn settle(&self, response: ChatResponse, shaping: &Shaping) -> ChatResponse {
        ChatCompletions.settle(response, shaping)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        ChatCompletions.output_cap_fields()
    }

    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        ChatCompletions.switch_on_stream(body);
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        ChatCompletions.stream_fold()
    }
}
