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
