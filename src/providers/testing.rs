//! Test fixtures shared by the provider tests (a fast client, a mock endpoint, a one-line
//! request), here so that no test module imports another module's `tests`.

use std::time::Duration;

use super::client::ProviderClient;
use super::limiter::ConcurrencyMode;
use super::mock::MockServer;
use super::pacer::PacerConfig;
use super::retry::RetryPolicy;
use super::transport::PollConfig;
use super::transport::{ClientConfig, DEFAULT_MAX_RESPONSE_BYTES};
use super::types::{ChatRequest, Endpoint, Message, ProviderKind, Secret};

/// The API key every mock endpoint presents (and leak tests look for).
pub(crate) const KEY: &str = "sk-test-SECRET-1";

/// Every provider kind, for tests that must hold for each protocol.
pub(crate) const KINDS: [ProviderKind; 4] = [ProviderKind::OpenAi, ProviderKind::Anthropic, ProviderKind::Gemini, ProviderKind::OpenAiResponses];

/// Fast retries and short timeouts so fault tests finish in milliseconds.
pub(crate) fn quick_config() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_millis(400),
        read_timeout: None,
        concurrency: ConcurrencyMode::default(),
        pacing: PacerConfig::default(),
        retry: RetryPolicy {
            max_attempts: 8,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(40),
            total_timeout: Duration::from_secs(10),
            retry_rate_limits: true,
        },
        use_system_proxy: false,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        polling: PollConfig { first: Duration::from_millis(5), max: Duration::from_millis(20) },
        stream_idle_timeout: Duration::from_secs(1),
        stream_total_timeout: Duration::from_secs(10),
        stream_first_byte_timeout: Duration::from_secs(10),
        server_slots: super::slots::ServerSlots::Auto,
        served_lanes: std::collections::BTreeMap::new(),
    }
}

/// A client with [`quick_config`].
pub(crate) fn quick_client() -> ProviderClient {
    ProviderClient::new(quick_config()).unwrap()
}

/// A [`quick_config`] client with its own retry policy and concurrency.
pub(crate) fn client_with(retry: RetryPolicy, concurrency: ConcurrencyMode) -> ProviderClient {
    ProviderClient::new(ClientConfig { concurrency, retry, ..quick_config() }).unwrap()
}

/// An endpoint of `kind` on the mock `server`, presenting [`KEY`].
pub(crate) fn mock_endpoint(server: &MockServer, kind: ProviderKind, model: &str) -> Endpoint {
    Endpoint::new(kind, model).with_base_url(server.base_url()).with_api_key(Secret::new(KEY))
}

/// A request of one user turn.
pub(crate) fn ask(text: &str) -> ChatRequest {
    ChatRequest { messages: vec![Message::user(text)], ..ChatRequest::default() }
}
