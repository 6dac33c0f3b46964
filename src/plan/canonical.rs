//! Canonical JSON encoding used for step keys.
//!
//! Keys must not depend on map iteration order, on which serde_json features
//! some dependency enabled, or on Rust `Debug` output, so objects are written
//! here with their keys sorted by byte order and without whitespace.

use serde_json::Value;

/// Encodes `value` as compact JSON with object keys sorted, so the same
/// logical value always produces the same bytes.
#[must_use]
pub fn to_canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// [`to_canonical_bytes`], and where the encoding of `part` (a value inside `value`, found
/// by identity) lies in it: a call sends its body as those bytes instead of encoding its
/// prompt again.
#[must_use]
pub fn to_canonical_bytes_marking(value: &Value, part: &Value) -> (Vec<u8>, Option<std::ops::Range<usize>>) {
    let mut out = Vec::with_capacity(256);
    let mut mark = None;
    write_marking(&mut out, value, &mut |out, v| {
        if std::ptr::eq(v, part) {
            let start = out.len();
            write_value(out, v);
            mark = Some(start..out.len());
            true
        } else {
            false
        }
    });
    (out, mark)
}

/// Appends the canonical encoding of `value` to `out` (a key template fills its hole with it).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    write_marking(out, value, &mut |_, _| false);
}

/// [`write_value`], where `each` may write a value itself first (returning `true`).
fn write_marking(out: &mut Vec<u8>, value: &Value, each: &mut dyn FnMut(&mut Vec<u8>, &Value) -> bool) {
    if each(out, value) {
        return;
    }
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, k);
                out.push(b':');
                write_marking(out, v, each);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_marking(out, v, each);
            }
            out.push(b']');
        }
        // Strings (serde_json's escaping is deterministic) and scalars have a single
        // serde_json rendering.
        other => write_json(out, other),
    }
}

/// serde_json's compact rendering (what `Value`'s `Display` prints), written straight into
/// `out`: keys hash every prompt, so no copy of the string and no `fmt` round trip.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("a string or JSON scalar always serializes into memory");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_depth() {
        let a = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": null}});
        let bytes = to_canonical_bytes(&a);
        assert_eq!(String::from_utf8(bytes).unwrap(), r#"{"a":{"c":null,"z":[1,{"x":3,"y":2}]},"b":1}"#);
    }

    #[test]
    fn a_marked_part_is_its_own_canonical_encoding() {
        let whole = json!({"inputs": {"request": {"body": {"z": "a\"b\n", "a": [1, 2.5]}}, "site": 1}});
        let part = whole.pointer("/inputs/request/body").unwrap();
        let (bytes, mark) = to_canonical_bytes_marking(&whole, part);
        assert_eq!(bytes, to_canonical_bytes(&whole));
        assert_eq!(&bytes[mark.unwrap()], to_canonical_bytes(part).as_slice());
        // An equal value elsewhere is not the part: found by identity only.
        let copy = part.clone();
        assert_eq!(to_canonical_bytes_marking(&whole, &copy).1, None);
    }

    #[test]
    fn floats_and_strings_are_stable() {
        let v = json!({"t": 0.7, "s": "é\"\n"});
        assert_eq!(String::from_utf8(to_canonical_bytes(&v)).unwrap(), r#"{"s":"é\"\n","t":0.7}"#);
    }
}
