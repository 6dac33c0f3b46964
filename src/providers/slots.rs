//! A local server's slot count as a lane's ceiling: llama.cpp's `GET /props` says how many
//! requests it decodes at once (`total_slots`); a request beyond that waits in the server's
//! queue, where a stream sends nothing and a slot of another lane's work is taken. So a lane
//! to such a server never has more requests in flight than it has slots.
//!
//! `/props` is read once per lane, and only where the server is llama.cpp-like: in `auto`
//! (the default) once a response of the lane came with llama.cpp's `Server: llama.cpp`
//! header, so no other server (a hosted API, a proxy, a mock) ever gets an extra request; in
//! `props` before the lane's first request, for a llama.cpp behind a proxy or a remote host.
//! A `/props` that fails, or has no `total_slots`, changes nothing. Transport only: never in
//! a key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::header::{HeaderMap, SERVER};
use serde_json::Value;

use super::limiter::Limiter;

/// Where a lane reads its server's slot count (`transport.server_slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerSlots {
    /// After a response says `Server: llama.cpp`; no extra request to any other server.
    #[default]
    Auto,
    /// Before the lane's first request, whatever the server (`GET <root>/props`).
    Props,
    /// Never: only the configured concurrency bounds the lane.
    Off,
}

impl ServerSlots {
    /// The setting's values as written in a pipeline, in the order the docs list them.
    pub const NAMES: [&'static str; 3] = ["auto", "props", "off"];

    /// The setting named `name` in a pipeline (`auto`, `props`, `off`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "props" => Some(Self::Props),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

/// How long the one `/props` request may take; a slower one changes nothing.
const PROPS_TIMEOUT: Duration = Duration::from_secs(5);

/// A lane's knowledge of its server's slots.
#[derive(Debug)]
pub struct LaneSlots {
    mode: ServerSlots,
    /// Set when a response named llama.cpp as its server.
    llama_cpp: AtomicBool,
    /// The slot count read (`None`: read, nothing usable); unset until read.
    read: tokio::sync::OnceCell<Option<usize>>,
    /// Set once the cap was handed to the run log ([`Self::news`]).
    announced: AtomicBool,
}

impl LaneSlots {
    /// A lane that reads its server's slots as `mode` says.
    #[must_use]
    pub fn new(mode: ServerSlots) -> Self {
        Self { mode, llama_cpp: AtomicBool::new(false), read: tokio::sync::OnceCell::new(), announced: AtomicBool::new(false) }
    }

    /// Notes a response's `Server` header: `llama.cpp` makes an `auto` lane read `/props`.
    pub(super) fn observe(&self, headers: &HeaderMap) {
        if self.mode == ServerSlots::Auto && !self.llama_cpp.load(Ordering::Relaxed) && is_llama_cpp(headers) {
            self.llama_cpp.store(true, Ordering::Relaxed);
        }
    }

    /// Whether `/props` should be read now (and has not been).
    pub(super) fn wanted(&self) -> bool {
        self.read.get().is_none()
            && match self.mode {
                ServerSlots::Props => true,
                ServerSlots::Auto => self.llama_cpp.load(Ordering::Relaxed),
                ServerSlots::Off => false,
            }
    }

    /// Reads `/props` once (concurrent callers wait for the one read) and caps `limiter` at
    /// the slot count it reports.
    pub(super) async fn read(&self, http: &reqwest::Client, base_url: &str, headers: &HeaderMap, limiter: &Limiter) {
        self.read
            .get_or_init(|| async {
                let slots = total_slots(http, base_url, headers).await;
                if let Some(slots) = slots {
                    limiter.cap_at(slots);
                }
                slots
            })
            .await;
    }

    /// The slot count read, the first time it is asked for after the cap was set (so the
    /// run log says it once); `None` every other time.
    pub fn news(&self) -> Option<usize> {
        let slots = (*self.read.get()?)?;
        (!self.announced.swap(true, Ordering::Relaxed)).then_some(slots)
    }
}

/// Whether the response came from llama.cpp's server (`Server: llama.cpp`).
fn is_llama_cpp(headers: &HeaderMap) -> bool {
    headers.get(SERVER).and_then(|value| value.to_str().ok()).is_some_and(|server| server.trim().to_ascii_lowercase().starts_with("llama.cpp"))
}

/// `total_slots` of `GET <root>/props`, the root being the base URL less a trailing `/v1`;
/// `None` when the request fails or the answer has no positive count.
async fn total_slots(http: &reqwest::Client, base_url: &str, headers: &HeaderMap) -> Option<usize> {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let response = http.get(format!("{root}/props")).headers(headers.clone()).timeout(PROPS_TIMEOUT).send().await.ok()?;
    let props: Value = response.error_for_status().ok()?.json().await.ok()?;
    let slots = usize::try_from(props.get("total_slots")?.as_u64()?).ok()?;
    (slots > 0).then_some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn server(name: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(SERVER, HeaderValue::from_str(name).unwrap());
        headers
    }

    #[test]
    fn only_a_llama_cpp_server_header_makes_an_auto_lane_read_props() {
        let lane = LaneSlots::new(ServerSlots::Auto);
        assert!(!lane.wanted());
        lane.observe(&server("nginx/1.24.0"));
        lane.observe(&HeaderMap::new());
        assert!(!lane.wanted());
        lane.observe(&server("llama.cpp"));
        assert!(lane.wanted());
        let off = LaneSlots::new(ServerSlots::Off);
        off.observe(&server("llama.cpp"));
        assert!(!off.wanted());
        assert!(LaneSlots::new(ServerSlots::Props).wanted());
    }

    #[tokio::test]
    async fn an_unreachable_props_changes_nothing_and_is_read_once() {
        let limiter = Limiter::new(super::super::limiter::ConcurrencyMode::Static { max_concurrency: 8 });
        let lane = LaneSlots::new(ServerSlots::Props);
        super::super::transport::install_crypto_provider();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        // Port 9 (discard) on loopback: nothing listens, the connection is refused.
        lane.read(&http, "http://127.0.0.1:9/v1", &HeaderMap::new(), &limiter).await;
        assert_eq!(limiter.snapshot().limit, 8);
        assert!(!lane.wanted(), "read once, even when it failed");
        assert_eq!(lane.news(), None);
    }
}
