//! Downloads of dataset files (`evalgrid datasets fetch`), bounded so that a bad server or a
//! wrong URL costs little: no byte for `idle` or a whole download past `total` stops it (a
//! server dripping one byte every few seconds would hold it for ever), a body past
//! `max_bytes` is refused (before it is read when its `Content-Length` says so), and a URL's
//! user name and password never appear in a message.

use std::time::Duration;

/// How much one download may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most bytes read; a larger body is refused.
    pub max_bytes: u64,
    /// The longest wait for the answer's head or for the next bytes of its body.
    pub idle: Duration,
    /// The longest a whole download may take.
    pub total: Duration,
}

/// A download that failed; `url` is already redacted.
#[derive(Debug, thiserror::Error)]
#[error("download of `{url}` failed: {message}")]
pub struct FetchError {
    /// The URL, without its user name and password.
    pub url: String,
    /// What went wrong.
    pub message: String,
}

/// `url` as it may be shown: the user name and password (`https://user:secret@host/…`, or a
/// token as the user name) replaced by `***`. Works on text that is not a valid URL too.
#[must_use]
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return url.to_owned() };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end], &rest[at..]),
        None => url.to_owned(),
    }
}

/// A reqwest error and its causes, without the URL reqwest puts in its own message.
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// Downloads `url`, handing each piece of the body to `write` as it arrives; returns the
/// number of bytes. Stops with an error at the first limit of `limits` reached, at an HTTP
/// error status, or when `write` fails.
pub async fn download(client: &reqwest::Client, url: &str, limits: Limits, mut write: impl FnMut(&[u8]) -> std::io::Result<()>) -> Result<u64, FetchError> {
    let shown = redact(url);
    let fail = |message: String| FetchError { url: shown.clone(), message: message.replace(url, &shown) };
    let idle_s = limits.idle.as_secs_f64();
    let stalled = || fail(format!("no data for {idle_s} s (`--read-timeout-s`)"));
    let work = async {
        let response = tokio::time::timeout(limits.idle, client.get(url).send()).await.map_err(|_| stalled())?.map_err(|e| fail(describe(e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(fail(format!("the server answered HTTP {status}")));
        }
        if let Some(length) = response.content_length()
            && length > limits.max_bytes
        {
            return Err(fail(format!(
                "the file is {length} bytes (its Content-Length), more than the {} allowed (`--max-bytes`): nothing was read",
                limits.max_bytes
            )));
        }
        let mut response = response;
        let mut got = 0u64;
        loop {
            let chunk = tokio::time::timeout(limits.idle, response.chunk()).await.map_err(|_| stalled())?.map_err(|e| fail(describe(e)))?;
            let Some(chunk) = chunk else { return Ok(got) };
            got += chunk.len() as u64;
            if got > limits.max_bytes {
                return Err(fail(format!("the server sent more than the {} bytes allowed (`--max-bytes`): stopped there", limits.max_bytes)));
            }
            write(&chunk).map_err(|e| fail(format!("cannot write what was downloaded: {e}")))?;
        }
    };
    tokio::time::timeout(limits.total, work)
        .await
        .unwrap_or_else(|_| Err(fail(format!("it took longer than {} s in all (`--timeout-s`)", limits.total.as_secs_f64()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_and_passwords_are_redacted() {
        assert_eq!(redact("https://alice:s3cret@example.org/d.jsonl?x=@y"), "https://***@example.org/d.jsonl?x=@y");
        assert_eq!(redact("https://TOKEN@example.org/d.jsonl"), "https://***@example.org/d.jsonl");
        assert_eq!(redact("http://a:b@c@host:8080"), "http://***@host:8080");
        assert_eq!(redact("https://example.org/a@b"), "https://example.org/a@b", "an @ in the path is not a user");
        assert_eq!(redact("not a url"), "not a url");
    }
}
