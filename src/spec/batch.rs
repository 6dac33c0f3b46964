//! `batch:` of a model entry: the model's single-turn calls go through the provider's batch
//! API (half price, answers within 24 h) instead of one request each. A transport knob: it
//! never enters a key, so a batched answer is the same cache entry as a live one.

use serde::Serialize;
use serde_json::Value;

/// How a model's batchable calls are collected and polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BatchMode {
    /// Requests per batch at most: a full collector submits at once.
    pub max_requests: usize,
    /// Wait between polls of a submitted batch (ms).
    pub poll_ms: u64,
    /// A collector with fewer requests submits after this long without a new call (ms).
    pub window_ms: u64,
    /// How long after an interrupted intent was recorded (killed while its create request
    /// was in flight) the provider's batch list is searched for it before its calls are
    /// sent again (ms): a list shows a new batch only after a delay.
    pub lookup_ms: u64,
}

impl Default for BatchMode {
    fn default() -> Self {
        Self { max_requests: 1000, poll_ms: 60_000, window_ms: 2000, lookup_ms: 60_000 }
    }
}

impl BatchMode {
    /// Reads `batch: true | false | {max_requests, poll_ms, window_ms, lookup_ms}`; `Ok(None)` is off.
    ///
    /// # Errors
    /// What is wrong with the value, for a located diagnostic.
    pub fn parse(value: &Value) -> Result<Option<Self>, String> {
        let fields = match value {
            Value::Bool(on) => return Ok(on.then(Self::default)),
            Value::Object(fields) => fields,
            other => return Err(format!("`batch: {other}` is neither true, false nor a map")),
        };
        let mut mode = Self::default();
        for (name, field) in fields {
            let number = field.as_u64().filter(|n| *n > 0).ok_or_else(|| format!("`batch.{name}` must be a positive whole number"))?;
            match name.as_str() {
                "max_requests" => mode.max_requests = usize::try_from(number).unwrap_or(usize::MAX),
                "poll_ms" => mode.poll_ms = number,
                "window_ms" => mode.window_ms = number,
                "lookup_ms" => mode.lookup_ms = number,
                other => return Err(format!("unknown field `batch.{other}` (known: max_requests, poll_ms, window_ms, lookup_ms)")),
            }
        }
        Ok(Some(mode))
    }
}

#[cfg(test)]
mod tests {
    use super::BatchMode;
    use serde_json::json;

    #[test]
    fn batch_is_a_switch_or_a_map_of_known_positive_fields() {
        assert_eq!(BatchMode::parse(&json!(false)), Ok(None));
        assert_eq!(BatchMode::parse(&json!(true)), Ok(Some(BatchMode::default())));
        let mode = BatchMode::parse(&json!({"max_requests": 5, "poll_ms": 20})).unwrap().unwrap();
        assert_eq!((mode.max_requests, mode.poll_ms, mode.window_ms, mode.lookup_ms), (5, 20, 2000, 60_000));
        assert_eq!(BatchMode::parse(&json!({"lookup_ms": 1500})).unwrap().unwrap().lookup_ms, 1500);
        assert!(BatchMode::parse(&json!({"poll": 5})).unwrap_err().contains("unknown field `batch.poll`"));
        assert!(BatchMode::parse(&json!({"poll_ms": 0})).is_err());
        assert!(BatchMode::parse(&json!("yes")).is_err());
    }
}
