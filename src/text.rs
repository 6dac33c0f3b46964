//! Text from outside (provider errors, model answers, file names, YAML values, server
//! headers) made safe to print on a terminal, so it can never clear the screen, retitle
//! the window, write the clipboard (OSC 52) or reorder what the reader sees.
//!
//! Every `char::is_control` except `\n` and `\t` (and, in [`one_line`], those two as
//! well) is replaced by a visible escape, as `tracing-subscriber` writes them: `\x1b` for
//! C0 controls and DEL, `\u{9b}` for C1 controls. The bidi embeddings, overrides,
//! isolates and marks (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) and the
//! invisible characters that can hide text (soft hyphen, zero-width space, word joiner and
//! invisible operators, line/paragraph separators, BOM, interlinear annotations, tag
//! characters) become `\u{202e}`. The zero-width (non-)joiners U+200C/U+200D are kept:
//! they only join neighbouring glyphs (emoji, Indic scripts). Nothing is dropped; a
//! backslash is printed as is, so this is for display, not a reversible encoding.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Escapes what a terminal would act on, keeping line breaks and tabs (multi-line
/// messages such as a pipeline's diagnostics stay readable).
#[must_use]
pub fn terminal(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// Like [`terminal`], but escapes `\n` (and `\r`, `\t`) too: for one-line contexts such as
/// a cell's error in `status` or a log line, where an outside newline could forge a line.
#[must_use]
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// Serialized JSON made safe to print: serde_json already writes every control character
/// in a string as `\u001b`; this writes the bidi and invisible characters it leaves raw
/// as JSON escapes too (`\u202e`, surrogate pairs above U+FFFF), so the line still parses
/// to the same value.
#[must_use]
pub fn json(serialized: &str) -> Cow<'_, str> {
    if !serialized.chars().any(needs_escape) {
        return Cow::Borrowed(serialized);
    }
    let mut out = String::with_capacity(serialized.len() + 16);
    for c in serialized.chars() {
        if needs_escape(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c) || keep(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` is a control or an invisible format character a terminal could act on.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'
                | '\u{61c}'
                | '\u{180e}'
                | '\u{200b}'
                | '\u{200e}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_become_visible() {
        let hostile = "a\x1b[2Jb\x1b]0;pwned\x07c\x1b]52;c;aGk=\x07d\u{9b}31m\u{202e}gpj.exe\u{2066}\r\x7f";
        let safe = terminal(hostile);
        assert_eq!(safe, "a\\x1b[2Jb\\x1b]0;pwned\\x07c\\x1b]52;c;aGk=\\x07d\\u{9b}31m\\u{202e}gpj.exe\\u{2066}\\x0d\\x7f");
        assert!(!safe.chars().any(needs_escape));
    }

    #[test]
    fn line_breaks_and_tabs_are_kept_only_where_lines_are_allowed() {
        assert_eq!(terminal("one\n\ttwo"), "one\n\ttwo");
        assert_eq!(one_line("one\n\ttwo\r\n"), "one\\x0a\\x09two\\x0d\\x0a");
    }

    #[test]
    fn json_stays_json_and_means_the_same() {
        let value = serde_json::json!({"error": "a\x1b]52;c;aGk=\x07 \u{202e}txt.exe \u{e0041}\n", "n": 1});
        let printed = json(&value.to_string()).into_owned();
        assert!(!printed.chars().any(needs_escape), "{printed}");
        assert!(printed.contains("\\u001b]52") && printed.contains("\\u202e") && printed.contains("\\udb40\\udc41"), "{printed}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&printed).unwrap(), value);
    }

    #[test]
    fn ordinary_text_is_borrowed_untouched() {
        for text in ["plain ascii", "émoji 👩\u{200d}💻 and 日本語", "C:\\path\\x1b literally", ""] {
            assert!(matches!(terminal(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(one_line(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn every_control_character_is_escaped_and_nothing_is_dropped() {
        for c in (0u32..=0x10ffff).filter_map(char::from_u32) {
            let s = c.to_string();
            let out = one_line(&s);
            assert!(!out.chars().any(|o| o.is_control()), "{c:?} -> {out:?}");
            if needs_escape(c) {
                assert!(out.starts_with('\\') && out.len() > 2, "{c:?} -> {out:?}");
            } else {
                assert_eq!(out, s);
            }
        }
    }
}
