//! CPython string primitives that benchmark ports depend on: `str.isspace`/`str.strip()`,
//! `str.lower()`, `float(str)` and Unicode decimal digits (the BBEH scorer and the Eleusis
//! response parser both copy CPython here, so there is one emulation).
//!
//! Rust's `str::trim`, `str::to_lowercase` and `str::parse::<f64>` differ from CPython in ways
//! that change BBEH outputs (spec §3.4), so they are emulated here against CPython 3.11
//! (Unicode 14.0), the interpreter the reference vectors were produced with.

/// Python `str.isspace()` for one character (CPython 3.11, Unicode 14.0).
/// Differs from `char::is_whitespace` only by including U+001C–U+001F.
pub fn py_isspace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python `s.strip()` with no argument: removes leading/trailing [`py_isspace`] characters.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// Characters Rust (Unicode 16) lower-cases but CPython 3.11 (Unicode 14, where they are
/// unassigned) leaves unchanged. Found by comparing `char::to_lowercase` of rustc 1.95 with
/// `str.lower()` of CPython 3.11.7 over every code point (55 differences, all listed here).
fn lower_added_after_unicode_14(c: char) -> bool {
    matches!(
        c,
        '\u{1C89}'
            | '\u{A7CB}'
            | '\u{A7CC}'
            | '\u{A7CE}'
            | '\u{A7D2}'
            | '\u{A7D4}'
            | '\u{A7DA}'
            | '\u{A7DC}'
            | '\u{10D50}'..='\u{10D65}'
            | '\u{16EA0}'..='\u{16EB8}'
    )
}

/// Python `str.lower()` (CPython 3.11): `str::to_lowercase` (same full mappings and final-sigma
/// rule) except for characters unassigned in Unicode 14, which are kept. Splitting at those
/// characters is exact for the sigma context too: an unassigned character is neither cased nor
/// case-ignorable for CPython, so it ends the context scan just like a string boundary.
pub fn py_lower(s: &str) -> String {
    if !s.chars().any(lower_added_after_unicode_14) {
        return s.to_lowercase();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some((i, c)) = rest.char_indices().find(|&(_, c)| lower_added_after_unicode_14(c)) {
        out.push_str(&rest[..i].to_lowercase());
        out.push(c);
        rest = &rest[i + c.len_utf8()..];
    }
    out.push_str(&rest.to_lowercase());
    out
}

/// Code points of the digit zero of every Unicode 14.0 decimal-digit run (category Nd); each
/// run is exactly ten consecutive code points 0–9. Generated from CPython 3.11 `unicodedata`.
const ND_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810,
    0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0, 0x10D30, 0x11066,
    0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// Python `unicodedata.decimal(c)` as a number (what `int()` accepts), if `c` is a digit.
#[must_use]
pub fn decimal_value(c: char) -> Option<u8> {
    decimal_ascii(c).and_then(|d| d.to_digit(10)).and_then(|d| u8::try_from(d).ok())
}

/// Python `unicodedata.decimal(c)` as an ASCII digit, or `None` for non-decimal characters.
fn decimal_ascii(c: char) -> Option<char> {
    let cp = c as u32;
    let run = ND_ZEROS.partition_point(|&z| z <= cp).checked_sub(1)?;
    let offset = cp - ND_ZEROS[run];
    if offset < 10 { char::from_digit(offset, 10) } else { None }
}

/// CPython's ASCII `Py_ISSPACE` (used by `float()` after its Unicode transform): no U+001C–1F.
fn ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t'..='\r')
}

/// Python `float(s)` for a `str`; `None` where CPython raises `ValueError`.
///
/// Steps as in CPython `float_from_string`: non-ASCII whitespace becomes a space and Unicode
/// decimal digits become ASCII (any other non-ASCII character is an error); ASCII whitespace is
/// trimmed; underscores are allowed only between two digits and then removed; the remainder
/// must match `[+-]?(inf|infinity|nan|digits[.digits][e[+-]digits]|.digits[e..])`
/// case-insensitively, where the mantissa may also be `digits.`.
pub fn py_float(s: &str) -> Option<f64> {
    let mut buf = String::with_capacity(s.len());
    for c in s.chars() {
        if (c as u32) < 127 {
            buf.push(c);
        } else if py_isspace(c) {
            buf.push(' ');
        } else {
            buf.push(decimal_ascii(c)?);
        }
    }
    let trimmed = buf.trim_matches(ascii_space);
    let cleaned = remove_underscores(trimmed)?;
    parse_python_float_literal(&cleaned)
}

/// CPython `_Py_string_to_number_with_underscores`: each `_` must sit between two ASCII digits.
fn remove_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut prev = '\0';
    for c in s.chars() {
        if c == '_' {
            if !prev.is_ascii_digit() {
                return None;
            }
        } else {
            if prev == '_' && !c.is_ascii_digit() {
                return None;
            }
            out.push(c);
        }
        prev = c;
    }
    if prev == '_' {
        return None;
    }
    Some(out)
}

/// Validates the grammar CPython's `PyOS_string_to_double` accepts for a whole string and
/// converts it. Rust's parser is only used on strings already proven valid for Python.
fn parse_python_float_literal(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let special = if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        Some(f64::INFINITY)
    } else if body.eq_ignore_ascii_case("nan") {
        Some(f64::NAN)
    } else {
        None
    };
    if let Some(v) = special {
        return Some(if negative { -v } else { v });
    }
    let bytes = body.as_bytes();
    let mut i = 0;
    let int_digits = count_digits(&bytes[i..]);
    i += int_digits;
    let mut frac_digits = 0;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = count_digits(&bytes[i..]);
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = count_digits(&bytes[i..]);
        if exp_digits == 0 {
            return None;
        }
        i += exp_digits;
    }
    if i != bytes.len() {
        return None;
    }
    let v: f64 = body.parse().ok()?;
    Some(if negative { -v } else { v })
}

fn count_digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_accepts_what_cpython_accepts() {
        let ok: [(&str, f64); 24] = [
            ("1_000", 1000.0),
            ("1e1_0", 1e10),
            ("0_0", 0.0),
            ("\u{85} 5\u{3000}", 5.0),
            ("\u{661}_\u{660}", 10.0),
            ("+inf", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("iNfIniTy", f64::INFINITY),
            ("1.e5", 1e5),
            ("00012", 12.0),
            ("\t5\n", 5.0),
            ("\u{b}5\u{c}", 5.0),
            ("\u{665}.\u{665}", 5.5),
            ("1_0e1_0", 1e11),
            ("1.0_0", 1.0),
            ("1_0.0_0", 10.0),
            ("\u{ff15}e\u{ff12}", 500.0),
            ("5.", 5.0),
            (".5", 0.5),
            ("-0", 0.0),
            ("1e999", f64::INFINITY),
            ("1e-999", 0.0),
            ("1E+05", 1e5),
            ("\u{1fbf5}", 5.0),
        ];
        for (s, v) in ok {
            assert_eq!(py_float(s), Some(v), "{s:?}");
        }
        assert!(py_float("+nan").is_some_and(f64::is_nan));
        assert!(py_float("-NaN").is_some_and(f64::is_nan));
    }

    #[test]
    fn float_rejects_what_cpython_rejects() {
        let bad = [
            "1__000",
            "_1",
            "1_",
            "1_.5",
            "1._5",
            "\u{1c}5",
            "5\u{1f}",
            "5\0",
            "infinit",
            "infinityy",
            "nan(1)",
            ".e5",
            "e5",
            "1e",
            "1e+",
            "0x10",
            "1,000",
            " ",
            "",
            "5 5",
            "\u{2013}5",
            "\u{2212}5",
            "+-5",
            "++5",
            "1e5_",
            "1.5_e3",
            "infinity_",
            ".",
            "+",
            "\u{7f}5",
            "5\u{200b}",
            "in_f",
            "\u{bd}",
        ];
        for s in bad {
            assert_eq!(py_float(s), None, "{s:?}");
        }
    }

    #[test]
    fn lower_matches_cpython_311() {
        assert_eq!(py_lower("\u{130}"), "i\u{307}");
        assert_eq!(py_lower("\u{391}\u{3a3} \u{3a3}"), "\u{3b1}\u{3c2} \u{3c3}");
        assert_eq!(py_lower("A\u{A7CB}B\u{1C89}"), "a\u{A7CB}b\u{1C89}");
        // Unassigned (for CPython 3.11) character after sigma: sigma is not final-after-cased.
        assert_eq!(py_lower("\u{391}\u{3a3}\u{10D50}"), "\u{3b1}\u{3c2}\u{10D50}");
    }

    #[test]
    fn decimal_table_edges() {
        assert_eq!(decimal_ascii('\u{2f}'), None);
        assert_eq!(decimal_ascii('9'), Some('9'));
        assert_eq!(decimal_ascii('\u{669}'), Some('9'));
        assert_eq!(decimal_ascii('\u{66a}'), None);
        assert_eq!(decimal_ascii('\u{1d7ff}'), Some('9'));
        assert_eq!(decimal_ascii('\u{1fbfa}'), None);
        assert_eq!(decimal_ascii('\u{10ffff}'), None);
    }
}
