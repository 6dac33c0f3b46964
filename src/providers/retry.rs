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
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries, for callers that retry at a higher level.
    #[must_use]
    pub fn no_retries() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The full-jitter window after `attempt` failed attempts: `min(max, base·2^(n-1))`.
    #[must_use]
    pub fn backoff_cap(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        self.base_delay
            .saturating_mul(1_u32 << exponent)
            .min(self.max_delay)
    }

    /// The sleep before the next attempt, or `None` to give up: not retryable, attempts
    /// used up, or the sleep would cross the total budget (`elapsed` is since attempt 1).
    #[must_use]
    pub fn next_delay(
        &self,
        attempt: u32,
        error: &CallError,
        elapsed: Duration,
    ) -> Option<Duration> {
        if !error.is_retryable() || attempt >= self.max_attempts {
            return None;
        }
        let delay = match error.retry_after() {
            Some(wait) => wait.min(MAX_HONOURED_WAIT) + jitter(wait / 10),
            None => jitter(self.backoff_cap(attempt)),
        };
        (elapsed.saturating_add(delay) < self.total_timeout).then_some(delay)
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
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(millis) = header("retry-after-ms").and_then(|text| text.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0).min(MAX_HONOURED_WAIT));
    }
    let text = header("retry-after")?;
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(MAX_HONOURED_WAIT.as_secs_f64())));
    }
    let when = parse_http_date(text)?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .min(MAX_HONOURED_WAIT),
    )
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
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|name| name == month)?;
    let year: i64 = year.parse().ok()?;
    let clock: Vec<u64> = time
        .split(':')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let [hour, minute, second] = clock.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *hour > 23 || *minute > 59 || *second > 60 {
        return None;
    }
    let month = u32::try_from(month).ok()? + 1;
    let days = days_from_civil(year, month, day);
    let seconds =
        days.checked_mul(86_400)? + i64::try_from(hour * 3600 + minute * 60 + second).ok()?;
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
        assert_eq!(
            when.duration_since(UNIX_EPOCH).unwrap().as_secs(),
            784_111_777
        );
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("garbage"), None);
    }

    #[test]
    fn retry_after_header_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after_from_headers(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(
            retry_after_from_headers(&headers),
            Some(Duration::from_secs(2))
        );
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(
            retry_after_from_headers(&headers),
            Some(Duration::from_millis(250))
        );
        headers.remove("retry-after-ms");
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after_from_headers(&headers), Some(Duration::ZERO));
        headers.insert("retry-after", HeaderValue::from_static("-5"));
        assert_eq!(retry_after_from_headers(&headers), None);
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let policy = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            total_timeout: Duration::from_secs(10),
        };
        assert_eq!(policy.backoff_cap(1), Duration::from_millis(100));
        assert_eq!(policy.backoff_cap(2), Duration::from_millis(200));
        assert_eq!(policy.backoff_cap(3), Duration::from_millis(350));
        assert_eq!(policy.backoff_cap(100), Duration::from_millis(350));
        let server = CallError::Server {
            status: 500,
            retry_after: None,
        };
        for _ in 0..100 {
            let delay = policy.next_delay(3, &server, Duration::ZERO).unwrap();
            assert!(delay <= Duration::from_millis(350));
        }
        assert_eq!(
            policy.next_delay(5, &server, Duration::ZERO),
            None,
            "attempts exhausted"
        );
        assert_eq!(
            policy.next_delay(1, &server, Duration::from_secs(10)),
            None,
            "time exhausted"
        );
        let auth = CallError::Auth { status: 401 };
        assert_eq!(
            policy.next_delay(1, &auth, Duration::ZERO),
            None,
            "not retryable"
        );
    }

    #[test]
    fn retry_after_wins_over_backoff() {
        let policy = RetryPolicy::default();
        let limited = CallError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
        };
        let delay = policy.next_delay(1, &limited, Duration::ZERO).unwrap();
        assert!(
            delay >= Duration::from_secs(3) && delay <= Duration::from_millis(3300),
            "{delay:?}"
        );
        let too_long = CallError::RateLimited {
            retry_after: Some(Duration::from_secs(700)),
        };
        assert_eq!(
            policy.next_delay(1, &too_long, Duration::ZERO),
            None,
            "would cross total budget"
        );
    }

    #[tokio::test]
    async fn retry_after_is_honoured() {
        for (header, wait) in [
            (RetryHeader::Millis(300), Duration::from_millis(300)),
            (RetryHeader::Seconds(1), Duration::from_secs(1)),
        ] {
            let faults = FaultPlan::sequence([Fault::RateLimited(header)]);
            let server = MockServer::start(MockConfig {
                faults,
                ..MockConfig::default()
            })
            .await
            .unwrap();
            let outcome = quick_client()
                .call(
                    &mock_endpoint(&server, ProviderKind::Anthropic, "m"),
                    &ask("x"),
                )
                .await
                .unwrap();
            assert_eq!(outcome.attempts, 2);
            let log = server.request_log();
            let gap = log[1].at.saturating_sub(log[0].at);
            assert!(gap >= wait, "{header:?}: second attempt after {gap:?}");
            assert!(
                gap < wait + Duration::from_millis(400),
                "{header:?}: waited too long, {gap:?}"
            );
        }
    }
}
