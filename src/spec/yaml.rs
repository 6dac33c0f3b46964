//! The only module that talks to the YAML crate (serde-saphyr).
//!
//! Keeping it behind one door means a YAML-crate upgrade or swap touches one
//! file, and every parse error is turned into our own [`Diagnostic`] here.

use serde::de::DeserializeOwned;
use serde_saphyr::{Location, Options, Spanned};

use super::diagnostic::{Diagnostic, Position, suggestion};

/// Parses one YAML document into `T`, or returns a located diagnostic.
pub fn parse<T: DeserializeOwned>(source: &str) -> Result<T, Diagnostic> {
    let options = Options::default();
    serde_saphyr::from_str_with_options(source, options).map_err(|err| to_diagnostic(&err))
}

/// Position of a spanned value in the source.
#[must_use]
pub fn position_of<T>(spanned: &Spanned<T>) -> Position {
    location_to_position(spanned.referenced)
}

fn location_to_position(location: Location) -> Position {
    Position { line: u32::try_from(location.line()).unwrap_or(u32::MAX), column: u32::try_from(location.column()).unwrap_or(u32::MAX) }
}

fn to_diagnostic(err: &serde_saphyr::Error) -> Diagnostic {
    let position = err.location().map(location_to_position).unwrap_or_default();
    let plain = err.without_snippet().render_with_options(serde_saphyr::render_options! {
        snippets: serde_saphyr::SnippetMode::Off,
    });
    let message = strip_location_suffix(plain.trim());
    let hint = unknown_field_hint(&message);
    Diagnostic::new(position, message).with_hint(hint)
}

/// serde-saphyr appends " at line L column C" to plain messages; we print the
/// position in front instead.
fn strip_location_suffix(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    match first.rfind(" at line ") {
        Some(idx) => first[..idx].to_owned(),
        None => first.to_owned(),
    }
}

/// For "unknown field `x`, expected one of `a`, `b`" suggest the nearest.
fn unknown_field_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected ")?.1;
    let expected = expected.strip_prefix("one of ").unwrap_or(expected);
    let candidates: Vec<&str> =
        expected.split(", ").flat_map(|part| part.split(" or ")).map(|c| c.trim().trim_matches('`')).filter(|c| !c.is_empty()).collect();
    suggestion(field, &candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "fields exist to be parsed")]
    struct Small {
        temperature: f64,
        seed: u64,
    }

    #[test]
    fn unknown_field_gets_location_and_hint() {
        let d = parse::<Small>("temperature: 0.5\ntemprature: 1\n").unwrap_err();
        assert_eq!(d.position.line, 2, "{d:?}");
        assert!(d.message.contains("unknown field `temprature`"), "{d:?}");
        assert_eq!(d.hint.as_deref(), Some("did you mean `temperature`?"), "{d:?}");
    }

    #[test]
    fn wrong_type_and_duplicate_key_are_located() {
        let d = parse::<Small>("temperature: 0.5\nseed: two\n").unwrap_err();
        assert_eq!(d.position.line, 2, "{d:?}");
        let d = parse::<Small>("temperature: 0.5\nseed: 1\nseed: 2\n").unwrap_err();
        assert_eq!(d.position.line, 3, "{d:?}");
        assert!(!d.message.contains(" at line "), "{d:?}");
    }

    #[test]
    fn syntax_error_is_located() {
        let d = parse::<Small>("temperature: [1, 2\nseed: 3\n").unwrap_err();
        assert!(d.position.line >= 1, "{d:?}");
    }
}
