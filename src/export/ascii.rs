//! JSON as printable ASCII: every character outside `' '..='~'`, and `<`, `>`, `&`, `'`,
//! written as a `\uXXXX` escape. A parser reads back exactly the text that was exported,
//! while the file itself holds no markup a viewer could run, no terminal control sequence
//! and no bidi override, whatever a model answered.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// serde_json's compact formatter with the string escaping described above.
struct Ascii;

impl Formatter for Ascii {
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut units = [0u16; 2];
        for c in fragment.chars() {
            if matches!(c, ' '..='~') && !matches!(c, '<' | '>' | '&' | '\'') {
                writer.write_all(&[c as u8])?;
            } else {
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// `value` as one line of ASCII JSON.
#[must_use]
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Ascii);
    // Serializing a `serde_json::Value` or a derived struct into a Vec cannot fail.
    if value.serialize(&mut ser).is_err() {
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile text comes back intact through a JSON parser, and the bytes are inert.
    #[test]
    fn hostile_text_round_trips_and_the_bytes_are_printable_ascii() {
        let text = "<script>alert(1)</script>\x1b[2J\u{202e}gpj.exe 'x' & \"q\" \\ é 😀\n";
        let bytes = to_vec(&serde_json::json!({"t": text}));
        assert!(bytes.iter().all(|b| (b' '..=b'~').contains(b)), "{}", String::from_utf8_lossy(&bytes));
        let s = String::from_utf8(bytes.clone()).unwrap();
        assert!(!s.contains('<') && s.contains("\\u001b[2J") && s.contains("\\u202e"), "{s}");
        let back: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back["t"], text);
    }
}
