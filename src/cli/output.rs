//! All printing goes through here: results on stdout, messages on stderr. Every line is
//! escaped with [`evalgrid::text::terminal`] whether or not the stream is a terminal (a
//! pipe into `less -R` or a CI log viewer acts on escape sequences too).

#![expect(clippy::print_stdout, reason = "this module is the printer (stderr goes through `progress::eprintln`, above the bar)")]

use std::sync::atomic::{AtomicBool, Ordering};

use evalgrid::text::terminal;

/// Whether a JSON value was printed: `--json` promises exactly one object on stdout, so
/// the error object is printed only when the command printed none.
static JSON_PRINTED: AtomicBool = AtomicBool::new(false);

/// A result line on stdout.
pub(crate) fn line(text: &str) {
    println!("{}", terminal(text));
}

/// A JSON value on stdout (one line). serde_json escapes every control character in
/// strings (`\u001b`); [`evalgrid::text::json`] writes the bidi/invisible ones it leaves
/// raw as JSON escapes too, so the line still parses to the same value.
pub(crate) fn json(value: &serde_json::Value) {
    JSON_PRINTED.store(true, Ordering::Relaxed);
    println!("{}", evalgrid::text::json(&value.to_string()));
}

/// A message on stderr.
pub(crate) fn note(text: &str) {
    evalgrid::exec::progress::eprintln(&terminal(text));
}

/// An error on stderr, prefixed like other CLI tools.
pub(crate) fn error(text: &str) {
    evalgrid::exec::progress::eprintln(&format!("error: {}", terminal(text)));
}

/// Whether [`json`] has printed an object in this process.
pub(crate) fn json_printed() -> bool {
    JSON_PRINTED.load(Ordering::Relaxed)
}
