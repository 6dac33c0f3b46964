//! The one escaping routine of the report, for HTML pages and standalone SVG/XML alike: a
//! leaf that the page writer and the figure writer share.

/// Escapes text for HTML (element content and double-quoted attribute
/// values) and for standalone SVG/XML: the one escaping routine of the report.
#[must_use]
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    push_escaped(&mut out, s);
    out
}

/// Appends `s` escaped: `& < > " '` become entities, and characters XML
/// forbids (C0 controls other than tab/LF/CR, U+FFFE, U+FFFF) become U+FFFD.
/// Scans bytes, not chars: transcripts run to megabytes, and every special
/// character is ASCII except U+FFFE/U+FFFF (UTF-8 `EF BF BE`/`EF BF BF`).
pub fn push_escaped(out: &mut String, s: &str) {
    /// Bytes that may start something to replace.
    const SPECIAL: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 0x20 {
            table[b] = !matches!(b as u8, b'\t' | b'\n' | b'\r');
            b += 1;
        }
        table[b'&' as usize] = true;
        table[b'<' as usize] = true;
        table[b'>' as usize] = true;
        table[b'"' as usize] = true;
        table[b'\'' as usize] = true;
        table[0xEF] = true;
        table
    };
    let bytes = s.as_bytes();
    out.reserve(s.len());
    let (mut start, mut i) = (0, 0);
    while let Some(offset) = bytes[i..].iter().position(|b| SPECIAL[usize::from(*b)]) {
        i += offset;
        let (replacement, len) = match bytes[i] {
            b'&' => ("&amp;", 1),
            b'<' => ("&lt;", 1),
            b'>' => ("&gt;", 1),
            b'"' => ("&quot;", 1),
            b'\'' => ("&#39;", 1),
            0xEF if bytes.get(i + 1) == Some(&0xBF) && matches!(bytes.get(i + 2), Some(0xBE | 0xBF)) => ("\u{fffd}", 3),
            // Another character starting with 0xEF: kept as it is.
            0xEF => {
                i += 1;
                continue;
            }
            _ => ("\u{fffd}", 1),
        };
        // `i` is at an ASCII byte or a 3-byte character's lead byte: a char boundary.
        out.push_str(&s[start..i]);
        out.push_str(replacement);
        i += len;
        start = i;
    }
    out.push_str(&s[start..]);
}
