//! Parsing of `--filter 'model=ideal*,task=*parity*,seed=1'`.

use crate::spec::CellFilter;

/// A `--filter` argument that could not be understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilterError {
    /// A part without `=`.
    #[error("filter part `{0}` is not `key=glob`")]
    NotKeyValue(String),
    /// A key other than model, task or seed.
    #[error("unknown filter key `{0}` (expected `model`, `task` or `seed`)")]
    UnknownKey(String),
    /// The same key twice.
    #[error("filter key `{0}` given twice")]
    Repeated(String),
}

/// Parses comma-separated `key=glob` parts into a [`CellFilter`].
pub fn parse_filter(text: &str) -> Result<CellFilter, FilterError> {
    let mut filter = CellFilter::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(|| FilterError::NotKeyValue(part.to_owned()))?;
        let slot = match key.trim() {
            "model" => &mut filter.model,
            "task" => &mut filter.task,
            "seed" => &mut filter.seed,
            other => return Err(FilterError::UnknownKey(other.to_owned())),
        };
        if slot.replace(value.trim().to_owned()).is_some() {
            return Err(FilterError::Repeated(key.trim().to_owned()));
        }
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_keys() {
        let f = parse_filter("model=ideal*, task=*parity*,seed=1").unwrap();
        assert_eq!(f.model.as_deref(), Some("ideal*"));
        assert_eq!(f.task.as_deref(), Some("*parity*"));
        assert_eq!(f.seed.as_deref(), Some("1"));
    }

    #[test]
    fn rejects_bad_parts() {
        assert_eq!(parse_filter("model"), Err(FilterError::NotKeyValue("model".into())));
        assert_eq!(parse_filter("rule=x"), Err(FilterError::UnknownKey("rule".into())));
        assert_eq!(parse_filter("seed=1,seed=2"), Err(FilterError::Repeated("seed".into())));
    }
}
