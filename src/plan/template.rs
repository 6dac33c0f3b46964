//! Key templates: a step's canonical components with one leaf left open.
//!
//! A grid's cells differ in one value each (the seed of an episode, the episode key of a
//! score), so the components are built and encoded once per model and task, and each
//! cell only hashes the bytes around its own value. The canonical encoding of a leaf does
//! not depend on where it sits, so the key is the one [`StepKey::compute`] gives for the
//! whole object; where the open leaf cannot be found exactly once, there is no template
//! and the caller computes each key whole.

use serde_json::Value;

use super::canonical::{to_canonical_bytes, write_value};
use super::key::StepKey;

/// What stands in for the open leaf while the template is encoded: control characters
/// that a spec's text would have to spell out on purpose, and then there are two.
const HOLE: &str = "\u{0}evalgrid key template hole\u{1}";

/// The canonical bytes of a components object before and after its open leaf.
#[derive(Clone, Debug)]
pub struct KeyTemplate {
    prefix: blake3::Hasher,
    suffix: Vec<u8>,
}

impl KeyTemplate {
    /// `build` makes the components object with the given value at the open leaf, and
    /// must use it once, as a value; `None` when its encoding does not hold it exactly once.
    #[must_use]
    pub fn new(build: impl Fn(Value) -> Value) -> Option<Self> {
        let bytes = to_canonical_bytes(&build(Value::String(HOLE.to_owned())));
        let hole = to_canonical_bytes(&Value::String(HOLE.to_owned()));
        let mut found = bytes.windows(hole.len()).enumerate().filter(|(_, w)| *w == hole.as_slice()).map(|(at, _)| at);
        let (Some(at), None) = (found.next(), found.next()) else { return None };
        let mut prefix = StepKey::hasher();
        prefix.update(&bytes[..at]);
        Some(Self { prefix, suffix: bytes[at + hole.len()..].to_vec() })
    }

    /// The key of the components object with `leaf` at the open leaf.
    #[must_use]
    pub fn key(&self, leaf: &Value) -> StepKey {
        let mut encoded = Vec::with_capacity(80);
        write_value(&mut encoded, leaf);
        self.key_of_encoded(&encoded)
    }

    /// The key with a step key at the open leaf (a score's episode), which is encoded as
    /// its hex digits in quotes: no JSON value or escaping on the way.
    #[must_use]
    pub fn key_of_step(&self, leaf: StepKey) -> StepKey {
        let mut encoded = [b'"'; 66];
        encoded[1..65].copy_from_slice(blake3::Hash::from_bytes(*leaf.as_bytes()).to_hex().as_bytes());
        self.key_of_encoded(&encoded)
    }

    fn key_of_encoded(&self, encoded: &[u8]) -> StepKey {
        let mut hasher = self.prefix.clone();
        hasher.update(encoded);
        hasher.update(&self.suffix);
        StepKey::finish(&hasher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(leaf: Value) -> Value {
        json!({"z": {"seed": leaf, "b": [1, "x"]}, "a": {"params": {"t": 0.5}}})
    }

    #[test]
    fn a_template_key_is_the_whole_objects_key() {
        let template = KeyTemplate::new(build).unwrap();
        for leaf in [json!(0), json!(7), json!(u64::MAX), json!("é\"\n"), json!({"k": [null]}), json!("a".repeat(64))] {
            assert_eq!(template.key(&leaf), StepKey::compute(&build(leaf.clone())), "leaf {leaf}");
        }
    }

    #[test]
    fn a_step_key_leaf_is_its_json_string() {
        let template = KeyTemplate::new(build).unwrap();
        for n in 0..50 {
            let leaf = StepKey::compute(&json!(n));
            assert_eq!(template.key_of_step(leaf), template.key(&json!(leaf)));
            assert_eq!(template.key_of_step(leaf), StepKey::compute(&build(json!(leaf))));
        }
    }

    #[test]
    fn no_template_when_the_leaf_is_used_twice_or_not_at_all() {
        assert!(KeyTemplate::new(|leaf| json!({"a": leaf.clone(), "b": leaf})).is_none());
        assert!(KeyTemplate::new(|_| json!({"a": 1})).is_none());
        assert!(KeyTemplate::new(|leaf| json!({"a": leaf, "b": HOLE})).is_none(), "a spec's text spelling the hole out");
    }
}
