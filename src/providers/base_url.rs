//! Base URLs, parsed once per thread: every call asks its model's base URL several questions
//! (which server it names, where the request goes), and parsing it for each was a measurable
//! part of a call's CPU at thousands of calls a second.

use std::cell::RefCell;

use reqwest::Url;

/// Base URLs a thread remembers; a run has one per model, rarely more than a handful.
const REMEMBERED: usize = 16;

/// A base URL as parsed, and its host lowercased.
#[derive(Clone)]
struct Parsed {
    url: Option<Url>,
    host: Option<String>,
}

thread_local! {
    static MEMO: RefCell<Vec<(String, Parsed)>> = const { RefCell::new(Vec::new()) };
}

fn with_parsed<T>(base: &str, read: impl FnOnce(&Parsed) -> T) -> T {
    MEMO.with_borrow_mut(|memo| {
        if let Some((_, parsed)) = memo.iter().find(|(known, _)| known == base) {
            return read(parsed);
        }
        let url = Url::parse(base).ok();
        let host = url.as_ref().and_then(Url::host_str).map(str::to_ascii_lowercase);
        if memo.len() >= REMEMBERED {
            memo.remove(0);
        }
        memo.push((base.to_owned(), Parsed { url, host }));
        read(&memo[memo.len() - 1].1)
    })
}

/// `base` parsed as a URL; `None` when it does not parse.
pub(crate) fn parsed(base: &str) -> Option<Url> {
    with_parsed(base, |parsed| parsed.url.clone())
}

/// The host of `base`, lowercased; `None` when it does not parse or names none.
pub(crate) fn host(base: &str) -> Option<String> {
    with_parsed(base, |parsed| parsed.host.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_a_fresh_parse_does_for_every_url_and_after_many() {
        for round in 0..2 {
            for i in 0..40 {
                let base = format!("https://Host-{i}.Example.com:8{i:03}/v1/");
                assert_eq!(parsed(&base), Url::parse(&base).ok(), "round {round}");
                assert_eq!(host(&base).as_deref(), Some(format!("host-{i}.example.com").as_str()));
            }
        }
        assert_eq!((parsed("not a url"), host("not a url")), (None, None));
        assert_eq!(host("unix:/run/socket"), None);
    }
}
