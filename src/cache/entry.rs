//! The record stored for one step, and its on-disk encoding.
//!
//! An entry file is a header line `evalgrid-entry/1 <blake3 of body>` followed
//! by the JSON body, so a torn or bit-flipped file is detected on read and
//! treated as missing instead of being served as an answer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{StepKey, StepKind};

/// What a put did, locally ([`super::Store::put`]) or on the remote.
#[derive(Debug)]
pub enum Stored {
    /// This entry is now the stored one.
    Written,
    /// Another writer stored a valid entry under the key first; this is it.
    Adopted(Entry),
}

/// Name of the versioned bucket inside the cache directory.
pub const BUCKET: &str = "v1";

/// Header tag; bump with the record format.
const MAGIC: &str = "evalgrid-entry/1";

/// One finished step: its key, the components that produced the key (so
/// misses can be explained), and its output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The step key (also the file name).
    pub key: StepKey,
    /// Step kind, for listings and stats.
    pub kind: StepKind,
    /// Key components, stored beside the output for `status --explain`.
    pub components: Value,
    /// The step's result.
    pub output: Value,
    /// Wall-clock milliseconds the step took (informational, not keyed).
    #[serde(default)]
    pub duration_ms: u64,
    /// evalgrid version that wrote it (informational, not keyed).
    #[serde(default)]
    pub writer: String,
}

/// Why bytes could not be decoded as an entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// No header line or wrong magic.
    #[error("missing or unknown entry header")]
    Header,
    /// The body hash does not match the header.
    #[error("checksum mismatch (entry is torn or corrupted)")]
    Checksum,
    /// The body is not a valid entry.
    #[error("invalid entry body: {0}")]
    Body(String),
    /// The stored key differs from the file name.
    #[error("entry key does not match its file name")]
    KeyMismatch,
}

impl Entry {
    /// Encodes header + body.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        with_header(|body| serde_json::to_writer(body, self).expect("entries are plain JSON values and always serialize"))
    }

    /// The bytes [`Entry::encode`] gives for an entry with these fields, where the components
    /// come already in their canonical encoding (the bytes their key was hashed from): a
    /// call's components hold its whole prompt, which is then not encoded a second time.
    #[must_use]
    pub fn encode_parts(key: StepKey, kind: StepKind, components: &[u8], output: &impl Serialize, duration_ms: u64, writer: &str) -> Vec<u8> {
        with_header(|body| {
            /// The fields of [`Entry`] in its order, the components written as they come.
            fn fields(
                body: &mut Vec<u8>,
                (key, kind, components): (StepKey, StepKind, &[u8]),
                output: &impl Serialize,
                duration_ms: u64,
                writer: &str,
            ) -> serde_json::Result<()> {
                body.extend_from_slice(b"{\"key\":");
                serde_json::to_writer(&mut *body, &key)?;
                body.extend_from_slice(b",\"kind\":");
                serde_json::to_writer(&mut *body, &kind)?;
                body.extend_from_slice(b",\"components\":");
                body.extend_from_slice(components);
                body.extend_from_slice(b",\"output\":");
                serde_json::to_writer(&mut *body, output)?;
                body.extend_from_slice(format!(",\"duration_ms\":{duration_ms},\"writer\":").as_bytes());
                serde_json::to_writer(&mut *body, writer)?;
                body.push(b'}');
                Ok(())
            }
            fields(body, (key, kind, components), output, duration_ms, writer).expect("entries are plain JSON values and always serialize");
        })
    }

    /// Decodes and verifies bytes read from the file named after `expected`.
    pub fn decode(bytes: &[u8], expected: StepKey) -> Result<Self, DecodeError> {
        let entry: Self = serde_json::from_slice(verified_body(bytes)?).map_err(|e| DecodeError::Body(e.to_string()))?;
        if entry.key != expected {
            return Err(DecodeError::KeyMismatch);
        }
        Ok(entry)
    }

    /// Like [`Entry::decode`], but only the output, read as `T`: everything else in the
    /// body is skipped unparsed, which is several times faster for a reader that needs
    /// one field of a large record.
    pub fn decode_output<T: DeserializeOwned>(bytes: &[u8], expected: StepKey) -> Result<T, DecodeError> {
        #[derive(Deserialize)]
        struct OutputOnly<T> {
            key: StepKey,
            output: T,
        }
        let part: OutputOnly<T> = serde_json::from_slice(verified_body(bytes)?).map_err(|e| DecodeError::Body(e.to_string()))?;
        if part.key != expected {
            return Err(DecodeError::KeyMismatch);
        }
        Ok(part.output)
    }
}

/// The header line, then the body `write` appends, in one buffer: the header's checksum is
/// filled in once the body is written (no second copy of a large entry).
fn with_header(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    const HEX: usize = 64;
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(MAGIC.as_bytes());
    out.push(b' ');
    let at = out.len();
    out.extend_from_slice(&[b'0'; HEX]);
    out.push(b'\n');
    let body = out.len();
    write(&mut out);
    let hash = blake3::hash(&out[body..]);
    out[at..at + HEX].copy_from_slice(hash.to_hex().as_bytes());
    out
}

/// The body of an entry file whose header names its checksum and whose checksum matches.
fn verified_body(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    let newline = bytes.iter().position(|b| *b == b'\n').ok_or(DecodeError::Header)?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| DecodeError::Header)?;
    let hash = header.strip_prefix(MAGIC).and_then(|r| r.strip_prefix(' ')).ok_or(DecodeError::Header)?;
    let body = &bytes[newline + 1..];
    if blake3::hash(body).to_hex().as_str() != hash {
        return Err(DecodeError::Checksum);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Entry {
        let key = StepKey::compute(&json!({"x": 1}));
        Entry { key, kind: StepKind::Episode, components: json!({"x": 1}), output: json!({"score": 30}), duration_ms: 3, writer: "t".into() }
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(Entry::decode(&e.encode(), e.key).unwrap(), e);
    }

    /// Entries written before the header was filled in place, and entries written from a
    /// call's canonical components, are the same bytes as ever.
    #[test]
    fn encoding_from_parts_gives_the_bytes_of_the_whole_entry() {
        let components = json!({"b": {"prompt": "line\n\"quoted\" é \u{1}", "n": [1, 2.5, null]}, "a": true});
        let e = Entry {
            components: components.clone(),
            output: json!({"text": "a\tb", "z": 1, "a": [false]}),
            duration_ms: 42,
            writer: "evalgrid \"x\"".into(),
            ..sample()
        };
        let body = serde_json::to_vec(&e).unwrap();
        let mut before = format!("{MAGIC} {}\n", blake3::hash(&body).to_hex()).into_bytes();
        before.extend_from_slice(&body);
        assert_eq!(e.encode(), before);
        let canonical = crate::plan::canonical::to_canonical_bytes(&components);
        assert_eq!(Entry::encode_parts(e.key, e.kind, &canonical, &e.output, e.duration_ms, &e.writer), before);
    }

    #[test]
    fn detects_every_single_byte_flip_and_truncation() {
        let e = sample();
        let bytes = e.encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(Entry::decode(&bad, e.key).is_err(), "flip at {i} went unnoticed");
        }
        for n in 0..bytes.len() {
            assert!(Entry::decode(&bytes[..n], e.key).is_err(), "truncation to {n} went unnoticed");
        }
    }

    #[test]
    fn the_output_alone_is_read_and_verified_like_the_whole_entry() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct Score {
            score: u32,
        }
        let e = sample();
        let bytes = e.encode();
        assert_eq!(Entry::decode_output::<Score>(&bytes, e.key), Ok(Score { score: 30 }));
        let mut bad = bytes.clone();
        let last = bad.len() - 3;
        bad[last] ^= 0x01;
        assert_eq!(Entry::decode_output::<Score>(&bad, e.key), Err(DecodeError::Checksum));
        assert_eq!(Entry::decode_output::<Score>(&bytes, StepKey::compute(&json!({"x": 2}))), Err(DecodeError::KeyMismatch));
    }

    #[test]
    fn rejects_entry_under_wrong_name() {
        let e = sample();
        let other = StepKey::compute(&json!({"x": 2}));
        assert_eq!(Entry::decode(&e.encode(), other), Err(DecodeError::KeyMismatch));
    }
}
