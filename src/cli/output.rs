//! All printing goes through here: results on stdout, messages on stderr. Every line is
//! escaped with [`evalgrid::text::terminal`] whether or not the stream is a terminal (a
//! pipe into `less -R` or a CI log viewer acts on escape sequences too).

use std::sync::atomic::{AtomicBool, Ordering};

use evalgrid::text::terminal;

/// Whether a JSON value was printed: `--json` promises exactly one object on stdout, so
/// the error object is printed only when the command printed none.
static JSON_PRINTED: AtomicBool = AtomicBool::new(false);

/// Whether writing to stdout failed once: said once, then output goes nowhere.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes one line to stdout. A closed pipe (`evalgrid status | head`) or a full disk
/// must not panic or stop the command's work: the rest of its output is dropped (said on
/// stderr once, unless the reader just left).
fn out(text: &str) {
    use std::io::Write as _;
    if STDOUT_FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{text}") {
        STDOUT_FAILED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            note(&format!("cannot write the output: {e}"));
        }
    }
}

/// A result line on stdout.
pub(crate) fn line(text: &str) {
    out(&terminal(text));
}

/// A JSON value on stdout (one line). serde_json escapes every control character in
/// strings (`\u001b`); [`evalgrid::text::json`] writes the bidi/invisible ones it leaves
/// raw as JSON escapes too, so the line still parses to the same value.
pub(crate) fn json(value: &serde_json::Value) {
    JSON_PRINTED.store(true, Ordering::Relaxed);
    out(&evalgrid::text::json(&value.to_string()));
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
