//! Step keys: the blake3 identity of one cacheable unit of work.
//!
//! A key is the derive-key blake3 hash of the canonical JSON encoding of the
//! step's *key components*: everything that can change the step's output and
//! nothing that cannot (concurrency, timeouts and paths stay out).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::canonical::to_canonical_bytes;

/// Version of the key schema; bump it (and the derive context) whenever the
/// meaning of components changes, so old entries can never be mistaken for new.
///
/// v2: the caller's fields sit under `inputs`, apart from the envelope (v1 let
/// the envelope's `code` overwrite a caller's `code` field).
pub const KEY_SCHEMA_VERSION: u32 = 2;

/// blake3 domain-separation context; contains the schema version on purpose.
const DERIVE_CONTEXT: &str = "evalgrid 2026-11 step-key v2";

/// The kinds of step a plan is made of; part of every key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// One model playing one task instance with one seed.
    Episode,
    /// Per-cell scores derived from an episode record.
    Score,
    /// Aggregated tables over all cells of a pipeline.
    Metrics,
    /// Rendered report files.
    Report,
    /// One model API call (cached so a resumed episode never pays twice).
    Call,
    /// A deterministic judgement (e.g. an Eleusis equivalence verdict).
    Verdict,
    /// One sandboxed run of model-written code (WeirdML submission).
    Submission,
}

impl StepKind {
    /// Stable lower-case name used in keys and file listings.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Episode => "episode",
            Self::Score => "score",
            Self::Metrics => "metrics",
            Self::Report => "report",
            Self::Call => "call",
            Self::Verdict => "verdict",
            Self::Submission => "submission",
        }
    }
}

/// A 32-byte blake3 step key, shown as 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepKey([u8; 32]);

impl StepKey {
    /// Hashes a components object into a key; `components` must already
    /// contain the step kind and schema version (see [`key_components`]).
    #[must_use]
    pub fn compute(components: &Value) -> Self {
        Self::of_canonical(&to_canonical_bytes(components))
    }

    /// The key of a components object already in its canonical encoding
    /// ([`super::canonical::to_canonical_bytes`]), for a caller that keeps the bytes.
    #[must_use]
    pub fn of_canonical(encoded: &[u8]) -> Self {
        let mut hasher = Self::hasher();
        hasher.update(encoded);
        Self::finish(&hasher)
    }

    /// A hasher set up for keys, to be fed canonical bytes in pieces ([`super::template`]);
    /// cloned from one made once, since deriving the context's key costs a hash of its own.
    pub(crate) fn hasher() -> blake3::Hasher {
        static HASHER: std::sync::LazyLock<blake3::Hasher> = std::sync::LazyLock::new(|| blake3::Hasher::new_derive_key(DERIVE_CONTEXT));
        HASHER.clone()
    }

    /// The key of what `hasher` (from [`StepKey::hasher`]) was fed.
    pub(crate) fn finish(hasher: &blake3::Hasher) -> Self {
        Self(*hasher.finalize().as_bytes())
    }

    /// The 32 bytes; the first names the cache directory the key's files sit in, the first
    /// eight a claim's lock offset.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Full hex form, used as the cache file name.
    #[must_use]
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// The key with these 32 bytes (as [`StepKey::as_bytes`] gave them, e.g. from a file).
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The key spelled by 64 lower-case hex digits (a cache file's name), `None` for anything
    /// else; a table lookup per digit, since a large cache's listing decodes millions.
    #[must_use]
    pub fn from_lower_hex(hex: &[u8]) -> Option<Self> {
        const INVALID: u8 = 0xff;
        const DIGITS: [u8; 256] = {
            let mut table = [INVALID; 256];
            let mut i = 0;
            while i < 10 {
                table[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                table[b'a' as usize + i] = 10 + i as u8;
                i += 1;
            }
            table
        };
        let pairs: &[[u8; 2]] = hex.as_chunks::<2>().0;
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        let mut bad = 0u8;
        for (byte, pair) in out.iter_mut().zip(pairs) {
            let (high, low) = (DIGITS[usize::from(pair[0])], DIGITS[usize::from(pair[1])]);
            bad |= (high | low) & 0xf0;
            *byte = (high << 4) | (low & 0x0f);
        }
        (bad == 0).then_some(Self(out))
    }

    /// First 12 hex digits, for human-facing listings.
    #[must_use]
    pub fn short(&self) -> String {
        let mut hex = self.to_hex();
        hex.truncate(12);
        hex
    }
}

/// Error for a string that is not a 64-digit hex key.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a 64-digit hex step key")]
pub struct ParseKeyError(String);

impl FromStr for StepKey {
    type Err = ParseKeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_lower_hex(s.as_bytes()).map_or_else(|| blake3::Hash::from_hex(s).map(|h| Self(*h.as_bytes())), Ok).map_err(|_| ParseKeyError(s.to_owned()))
    }
}

impl fmt::Display for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StepKey({})", self.short())
    }
}

impl Serialize for StepKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for StepKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The envelope every key is built from: what the step is and which code runs
/// it, with the step's own fields nested under `inputs` so that no caller
/// field can ever clash with (or be overwritten by) the envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyEnvelope {
    /// [`KEY_SCHEMA_VERSION`].
    pub schema: u32,
    /// Step kind.
    pub step: StepKind,
    /// Code component that computes the step (`eleusis`, `eleusis.judge`, …).
    pub component: String,
    /// Version of that component's code.
    pub version: u32,
    /// The step's own fields: everything that can change its output.
    pub inputs: serde_json::Map<String, Value>,
}

impl KeyEnvelope {
    /// The components object that is hashed and stored with the entry.
    #[must_use]
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// [`KeyEnvelope::to_value`], moving the fields in (a call's hold its whole prompt).
    #[must_use]
    pub fn into_value(self) -> Value {
        serde_json::json!({
            "schema": self.schema,
            "step": self.step.as_str(),
            "component": self.component,
            "version": self.version,
            "inputs": Value::Object(self.inputs),
        })
    }
}

/// Builds the components object shared by every step: schema version, kind
/// and the version of the code component that runs it, with `fields` kept
/// whole under `inputs` (see [`KeyEnvelope`]).
#[must_use]
pub fn key_components(kind: StepKind, component: &str, component_version: u32, fields: serde_json::Map<String, Value>) -> Value {
    KeyEnvelope { schema: KEY_SCHEMA_VERSION, step: kind, component: component.to_owned(), version: component_version, inputs: fields }.into_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lower_hex_reads_exactly_what_to_hex_writes() {
        for n in 0..200u32 {
            let key = StepKey::compute(&serde_json::json!({ "n": n }));
            let hex = key.to_hex();
            assert_eq!(StepKey::from_lower_hex(hex.as_bytes()), Some(key));
            assert_eq!(hex.parse::<StepKey>().unwrap(), key);
            assert_eq!(hex.to_uppercase().parse::<StepKey>().unwrap(), key, "FromStr still takes upper case");
            assert_eq!(StepKey::from_lower_hex(hex.to_uppercase().as_bytes()), None);
            for bad in [
                &hex[..63],
                &format!("{hex}0"),
                &format!("{}g", &hex[..63]),
                &format!("{} ", &hex[..63]),
                &format!("{}/", &hex[..63]),
                &format!("{}:", &hex[..63]),
            ] {
                assert_eq!(StepKey::from_lower_hex(bad.as_bytes()), None, "{bad}");
            }
        }
    }

    #[test]
    fn hex_round_trip() {
        let k = StepKey::compute(&json!({"a": 1}));
        let parsed: StepKey = k.to_hex().parse().unwrap();
        assert_eq!(k, parsed);
        assert_eq!(k.short().len(), 12);
        assert!("xyz".parse::<StepKey>().is_err());
    }

    #[test]
    fn key_ignores_field_order_but_not_values() {
        let a = StepKey::compute(&json!({"a": 1, "b": [1, 2]}));
        let b = StepKey::compute(&json!({"b": [1, 2], "a": 1}));
        let c = StepKey::compute(&json!({"b": [2, 1], "a": 1}));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    /// The v1 bug: a caller field named like an envelope field was overwritten.
    #[test]
    fn caller_fields_never_clash_with_the_envelope() {
        for name in ["code", "schema", "step", "component", "version", "inputs"] {
            let with = |v: &str| {
                let mut m = serde_json::Map::new();
                m.insert(name.to_owned(), json!(v));
                StepKey::compute(&key_components(StepKind::Verdict, "eleusis.judge", 1, m))
            };
            assert_ne!(with("a"), with("b"), "field `{name}` does not reach the key");
        }
    }
}
