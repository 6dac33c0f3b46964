//! What servers say in response headers about waiting: `Retry-After` (seconds or an HTTP
//! date), `retry-after-ms`, and the `x-ratelimit-*` / `anthropic-ratelimit-*` budgets. Below
//! both the error classification and the retry policy, so neither imports the other.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

/// Longest server-requested wait we accept from a header, so a bogus date cannot park a
/// worker for days (the total timeout still applies on top).
pub(super) const MAX_HONOURED_WAIT: Duration = Duration::from_hours(1);

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

/// Parses an RFC 3339 instant (`2026-01-01T00:00:30Z`, fractions and offsets allowed);
/// instants before 1970 are `None`, as a reset in the past is simply now.
#[must_use]
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let when = SystemTime::from(chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?);
    (when >= UNIX_EPOCH).then_some(when)
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only HTTP-date form
/// servers may send (RFC 9110 §5.6.7); the obsolete RFC 850 and asctime forms, which
/// `httpdate` would also read, are refused as before.
pub fn parse_http_date(text: &str) -> Option<SystemTime> {
    let imf_fixdate = text.len() == 29 && text.get(3..5) == Some(", ") && text.ends_with(" GMT");
    imf_fixdate.then(|| httpdate::parse_http_date(text).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{parse_http_date, parse_rfc3339};

    /// The forms the hand-written parsers read are read the same through `chrono` and
    /// `httpdate`, and the ones they refused are still refused.
    #[test]
    fn dates_read_as_before() {
        let secs = |when: Option<std::time::SystemTime>| when.map(|when| when.duration_since(UNIX_EPOCH).unwrap());
        for text in ["1994-11-06T08:49:37Z", "1994-11-06t08:49:37z", "1994-11-06 08:49:37Z", " 1994-11-06T10:49:37+02:00 ", "1994-11-06T03:49:37-05:00"] {
            assert_eq!(secs(parse_rfc3339(text)), Some(Duration::from_secs(784_111_777)), "{text}");
        }
        assert_eq!(secs(parse_rfc3339("1994-11-06T08:49:37.5Z")), Some(Duration::from_millis(784_111_777_500)));
        for bad in ["1969-12-31T23:59:59Z", "1994-11-06T08:49:37", "1994-11-06T24:00:00Z", "1994-11-06", ""] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        assert_eq!(secs(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")), Some(Duration::from_secs(784_111_777)));
        for bad in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 25:49:37 GMT"] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }
}
