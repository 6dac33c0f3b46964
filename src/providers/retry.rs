//! Retry policy: bounded attempts, bounded total time, exponential backoff with full
//! jitter, and the server's `Retry-After` / `retry-after-ms` wishes honoured.
//!
//! This module only computes delays; the loop that sleeps and counts attempts lives in
//! [`super::client`], so every attempt is counted in one place and reported to the caller.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

use super::error::CallError;

/// Longest server-requested wait we accept from a header, so a bogus date cannot park a
/// worker for days (the total timeout still applies on top).
const MAX_HONOURED_WAIT: Duration = Duration::from_hours(1);

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

/// Reads the server's requested wait: `retry-after-ms` (OpenAI, Anthropic) first, then
/// `Retry-After` as delta-seconds (fractions tolerated) or an HTTP-date.
#[must_use]
pub fn retry_after_from_headers(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(millis) = header("retry-after-ms").and_then(|text| text.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0).min(MAX_HONOURED_WAIT));
    }
    let text = header("retry-after")?;
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(MAX_HONOURED_WAIT.as_secs_f64())));
    }
    let when = parse_http_date(text)?;
    Some(when.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO).min(MAX_HONOURED_WAIT))
}

/// A provider's request budget as its rate-limit headers state it, so the pacer can slow
/// down before the budget is spent instead of after a 429.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// Requests allowed per window (`x-ratelimit-limit-requests`,
    /// `anthropic-ratelimit-requests-limit`).
    pub limit: Option<u64>,
    /// Requests left in the window.
    pub remaining: Option<u64>,
    /// Time until the budget is full again (OpenAI: a duration such as `6m0s`; Anthropic:
    /// an RFC 3339 instant, turned into the time from now).
    pub reset: Option<Duration>,
}

impl RateLimitHeaders {
    /// Reads OpenAI's `x-ratelimit-*-requests` or Anthropic's `anthropic-ratelimit-requests-*`
    /// headers; `None` when the response carries neither (nginx, Gemini, most gateways).
    #[must_use]
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
        let number = |name: &str| header(name).and_then(|text| text.parse::<u64>().ok());
        let openai = Self {
            limit: number("x-ratelimit-limit-requests"),
            remaining: number("x-ratelimit-remaining-requests"),
            reset: header("x-ratelimit-reset-requests").and_then(parse_go_duration),
        };
        let anthropic = Self {
            limit: number("anthropic-ratelimit-requests-limit"),
            remaining: number("anthropic-ratelimit-requests-remaining"),
            reset: header("anthropic-ratelimit-requests-reset")
                .and_then(parse_rfc3339)
                .map(|when| when.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO).min(MAX_HONOURED_WAIT)),
        };
        [openai, anthropic].into_iter().find(|found| found.remaining.is_some())
    }
}

/// Parses a Go-style duration as OpenAI sends it (`1s`, `6m0s`, `20ms`, `1h2m3.5s`).
#[must_use]
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut seconds = 0.0_f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        seconds += value * scale;
    }
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(MAX_HONOURED_WAIT.as_secs_f64())))
}

/// Parses an RFC 3339 instant (`2026-01-01T00:00:30Z`, fractions and offsets allowed).
#[must_use]
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut date_parts = date.splitn(3, '-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    let (clock, offset_seconds) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0_i64)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, offset) = time.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = offset[1..].split_once(':')?;
        (clock, sign * (hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60))
    };
    let mut clock_parts = clock.splitn(3, ':');
    let hour: u64 = clock_parts.next()?.parse().ok()?;
    let minute: u64 = clock_parts.next()?.parse().ok()?;
    let second: f64 = clock_parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || !(0.0..61.0).contains(&second) {
        return None;
    }
    let whole = days_from_civil(year, month, day).checked_mul(86_400)? + i64::try_from(hour * 3600 + minute * 60).ok()? - offset_seconds;
    let whole = u64::try_from(whole).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(whole) + Duration::from_secs_f64(second))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only HTTP-date form
/// servers may send (RFC 9110 §5.6.7).
pub fn parse_http_date(text: &str) -> Option<SystemTime> {
    let rest = text.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].iter().position(|name| name == month)?;
    let year: i64 = year.parse().ok()?;
    let clock: Vec<u64> = time.split(':').map(str::parse).collect::<Result<_, _>>().ok()?;
    let [hour, minute, second] = clock.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *hour > 23 || *minute > 59 || *second > 60 {
        return None;
    }
    let month = u32::try_from(month).ok()? + 1;
    let days = days_from_civil(year, month, day);
    let seconds = days.checked_mul(86_400)? + i64::try_from(hour * 3600 + minute * 60 + second).ok()?;
    let seconds = u64::try_from(seconds).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::super::client::tests::{ask, mock_endpoint, quick_client};
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockServer, RetryHeader};
    use super::super::types::ProviderKind;
    use super::*;
    use reqwest::header::HeaderValue;

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
