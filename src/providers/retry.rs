//! Retry policy: bounded attempts, bounded total time, exponential backoff with full
//! jitter, and the server's `Retry-After` / `retry-after-ms` wishes honoured.
//!
//! This module only computes delays; the loop that sleeps and counts attempts lives in
//! [`super::client`], so every attempt is counted in one place and reported to the caller.

use std::time::Duration;

use super::error::CallError;
use super::headers::MAX_HONOURED_WAIT;
pub use super::headers::{RateLimitHeaders, parse_go_duration, parse_http_date, parse_rfc3339, retry_after_from_headers};

/// How often and how long to retry a retryable failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included; at least 1.
    pub max_attempts: u32,
    /// Backoff before the second attempt (upper bound of the jitter window).
    pub base_delay: Duration,
    /// Cap on one backoff sleep (server `Retry-After` may exceed it, within the total).
    pub max_delay: Duration,
    /// Budget for all attempts and sleeps together, measured from the first attempt.
    pub total_timeout: Duration,
    /// Whether a 429 is retried (within `total_timeout`, without using up `max_attempts`);
    /// off only for callers that retry at a higher level.
    pub retry_rate_limits: bool,
}

impl Default for RetryPolicy {
    /// Six attempts, 1 s doubling to 60 s, ten minutes in total: bounded, unlike the
    /// unbounded retries that let runs hang (lessons §6, §7).
    fn default() -> Self {
        Self {
            max_attempts: 6,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_mins(1),
            total_timeout: Duration::from_mins(10),
            retry_rate_limits: true,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries, for callers that retry at a higher level.
    #[must_use]
    pub fn no_retries() -> Self {
        Self { max_attempts: 1, retry_rate_limits: false, ..Self::default() }
    }

    /// The full-jitter window after `attempt` failed attempts: `min(max, base·2^(n-1))`.
    #[must_use]
    pub fn backoff_cap(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        self.base_delay.saturating_mul(1_u32 << exponent).min(self.max_delay)
    }

    /// The sleep before the next attempt, or `None` to give up: not retryable, attempts
    /// used up, or the sleep would cross the total budget (`elapsed` is since attempt 1).
    /// `failures` counts the failed attempts that use the retry budget, which a rate limit
    /// never does: for a 429 this defers to [`Self::rate_limit_delay`].
    #[must_use]
    pub fn next_delay(&self, failures: u32, error: &CallError, elapsed: Duration) -> Option<Duration> {
        if let CallError::RateLimited { retry_after } = error {
            return self.rate_limit_delay(1, *retry_after, elapsed);
        }
        if !error.is_retryable() || failures >= self.max_attempts {
            return None;
        }
        let delay = match error.retry_after() {
            Some(wait) => wait.min(MAX_HONOURED_WAIT) + jitter(wait / 10),
            None => jitter(self.backoff_cap(failures)),
        };
        (elapsed.saturating_add(delay) < self.total_timeout).then_some(delay)
    }

    /// The call's own sleep after its `rate_limits`-th 429, or `None` when the server's
    /// wait cannot fit the time budget (the only bound on rate-limit retries). With a
    /// `Retry-After` the lane's pacer does the waiting for every request of the lane, so
    /// the call sleeps zero; without one it backs off like any retry.
    #[must_use]
    pub fn rate_limit_delay(&self, rate_limits: u32, retry_after: Option<Duration>, elapsed: Duration) -> Option<Duration> {
        if !self.retry_rate_limits {
            return None;
        }
        let (wait, delay) = match retry_after {
            Some(wait) => (wait.min(MAX_HONOURED_WAIT), Duration::ZERO),
            None => {
                let delay = jitter(self.backoff_cap(rate_limits));
                (delay, delay)
            }
        };
        (elapsed.saturating_add(wait) < self.total_timeout).then_some(delay)
    }
}

/// A uniformly random duration in `[0, cap]` (full jitter), spreading synchronized retries.
fn jitter(cap: Duration) -> Duration {
    let cap_micros = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
    if cap_micros == 0 {
        return Duration::ZERO;
    }
    Duration::from_micros(rand::random_range(0..=cap_micros))
}

#[cfg(test)]
mod tests {
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockServer, RetryHeader};
    use super::super::testing::{ask, mock_endpoint, quick_client};
    use super::super::types::ProviderKind;
    use super::*;
    use reqwest::header::HeaderMap;
    use reqwest::header::HeaderValue;
    use std::time::UNIX_EPOCH;

    #[test]
    fn http_date_parses() {
        let when = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(when.duration_since(UNIX_EPOCH).unwrap().as_secs(), 784_111_777);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("garbage"), None);
    }

    #[test]
    fn retry_after_header_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after_from_headers(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_from_headers(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after_from_headers(&headers), Some(Duration::from_millis(250)));
        headers.remove("retry-after-ms");
        headers.insert("retry-after", HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert_eq!(retry_after_from_headers(&headers), Some(Duration::ZERO));
        headers.insert("retry-after", HeaderValue::from_static("-5"));
        assert_eq!(retry_after_from_headers(&headers), None);
    }

    #[test]
    fn rate_limit_headers_of_both_dialects() {
        let mut headers = HeaderMap::new();
        assert_eq!(RateLimitHeaders::from_headers(&headers), None);
        headers.insert("x-ratelimit-limit-requests", HeaderValue::from_static("60"));
        headers.insert("x-ratelimit-remaining-requests", HeaderValue::from_static("59"));
        headers.insert("x-ratelimit-reset-requests", HeaderValue::from_static("6m0s"));
        assert_eq!(
            RateLimitHeaders::from_headers(&headers),
            Some(RateLimitHeaders { limit: Some(60), remaining: Some(59), reset: Some(Duration::from_mins(6)) })
        );
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-ratelimit-requests-limit", HeaderValue::from_static("50"));
        headers.insert("anthropic-ratelimit-requests-remaining", HeaderValue::from_static("0"));
        headers.insert("anthropic-ratelimit-requests-reset", HeaderValue::from_static("1994-11-06T08:49:37Z"));
        let parsed = RateLimitHeaders::from_headers(&headers).unwrap();
        assert_eq!((parsed.limit, parsed.remaining, parsed.reset), (Some(50), Some(0), Some(Duration::ZERO)), "a past reset is now");
    }

    #[test]
    fn go_durations_and_rfc3339() {
        for (text, want) in [("1s", 1000), ("6m0s", 360_000), ("20ms", 20), ("1m2.5s", 62_500), ("0.5s", 500)] {
            assert_eq!(parse_go_duration(text), Some(Duration::from_millis(want)), "{text}");
        }
        for bad in ["", "5", "1x", "s", "-1s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
        let at = |text| parse_rfc3339(text).map(|when| when.duration_since(UNIX_EPOCH).unwrap().as_millis());
        assert_eq!(at("1994-11-06T08:49:37Z"), Some(784_111_777_000));
        assert_eq!(at("1994-11-06T09:49:37.250+01:00"), Some(784_111_777_250));
        assert_eq!(at("1994-11-06T08:49:37"), None, "an offset is required");
        assert_eq!(at("1994-13-06T08:49:37Z"), None);
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let policy = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            total_timeout: Duration::from_secs(10),
            retry_rate_limits: true,
        };
        assert_eq!(policy.backoff_cap(1), Duration::from_millis(100));
        assert_eq!(policy.backoff_cap(2), Duration::from_millis(200));
        assert_eq!(policy.backoff_cap(3), Duration::from_millis(350));
        assert_eq!(policy.backoff_cap(100), Duration::from_millis(350));
        let server = CallError::Server { status: 500, retry_after: None };
        for _ in 0..100 {
            let delay = policy.next_delay(3, &server, Duration::ZERO).unwrap();
            assert!(delay <= Duration::from_millis(350));
        }
        assert_eq!(policy.next_delay(5, &server, Duration::ZERO), None, "attempts exhausted");
        assert_eq!(policy.next_delay(1, &server, Duration::from_secs(10)), None, "time exhausted");
        let auth = CallError::Auth { status: 401 };
        assert_eq!(policy.next_delay(1, &auth, Duration::ZERO), None, "not retryable");
    }

    #[test]
    fn rate_limits_use_the_time_budget_not_the_attempts() {
        let policy = RetryPolicy { max_attempts: 2, ..RetryPolicy::default() };
        let limited = CallError::RateLimited { retry_after: Some(Duration::from_secs(3)) };
        assert_eq!(policy.next_delay(100, &limited, Duration::ZERO), Some(Duration::ZERO), "the lane waits out Retry-After; attempts do not run out");
        let too_long = CallError::RateLimited { retry_after: Some(Duration::from_secs(700)) };
        assert_eq!(policy.next_delay(1, &too_long, Duration::ZERO), None, "would cross total budget");
        assert_eq!(policy.rate_limit_delay(1, Some(Duration::from_secs(3)), Duration::from_secs(598)), None);
        for count in [1, 5, 50] {
            let delay = policy.rate_limit_delay(count, None, Duration::ZERO).unwrap();
            assert!(delay <= policy.backoff_cap(count), "{delay:?}");
        }
        let server = CallError::Server { status: 500, retry_after: Some(Duration::from_secs(3)) };
        let delay = policy.next_delay(1, &server, Duration::ZERO).unwrap();
        assert!(delay >= Duration::from_secs(3) && delay <= Duration::from_millis(3300), "{delay:?}");
        assert_eq!(policy.next_delay(2, &server, Duration::ZERO), None, "other errors use the attempts");
    }

    #[tokio::test]
    async fn retry_after_is_honoured() {
        for (header, wait) in [(RetryHeader::Millis(300), Duration::from_millis(300)), (RetryHeader::Seconds(1), Duration::from_secs(1))] {
            let faults = FaultPlan::sequence([Fault::RateLimited(header)]);
            let server = MockServer::start(MockConfig { faults, ..MockConfig::default() }).await.unwrap();
            let outcome = quick_client().call(&mock_endpoint(&server, ProviderKind::Anthropic, "m"), &ask("x")).await.unwrap();
            assert_eq!(outcome.attempts, 2);
            let log = server.request_log();
            let gap = log[1].at.saturating_sub(log[0].at);
            assert!(gap >= wait, "{header:?}: second attempt after {gap:?}");
            assert!(gap < wait + Duration::from_millis(400), "{header:?}: waited too long, {gap:?}");
        }
    }
}
