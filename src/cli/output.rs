//! All printing goes through here: results on stdout, messages on stderr.

#![expect(clippy::print_stdout, clippy::print_stderr, reason = "this module is the printer")]

/// A result line on stdout.
pub(crate) fn line(text: &str) {
    println!("{text}");
}

/// A JSON value on stdout (one line).
pub(crate) fn json(value: &serde_json::Value) {
    println!("{value}");
}

/// A message on stderr.
pub(crate) fn note(text: &str) {
    eprintln!("{text}");
}

/// An error on stderr, prefixed like other CLI tools.
pub(crate) fn error(text: &str) {
    eprintln!("error: {text}");
}
