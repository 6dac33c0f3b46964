//! The library's `tracing` events as log lines on stderr: warnings by default, more with
//! `-v` (info: retries, background polls and cancels), `-vv` (debug), `-vvv` (trace), or
//! `EVALGRID_LOG` (a level, or `target=level,…` as [`Targets`] parses it).
//!
//! Each line is escaped with [`evalgrid::text::one_line`] (fields and messages hold
//! provider text; the fmt layer's own sanitizing misses `\r`, `\n` and bidi overrides) and
//! printed above the progress bar, never through it.

use std::io::Write;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::{Layer as _, registry};

/// The variable that sets which log lines are shown.
const VAR: &str = "EVALGRID_LOG";

/// Installs the log subscriber for the process. `verbose` is how many `-v` were given.
pub(crate) fn init(verbose: u8) {
    let spec = std::env::var(VAR).ok();
    let filter = match filter(spec.as_deref(), verbose) {
        Ok(filter) => filter,
        Err(e) => {
            super::output::note(&format!("warning: {VAR}: {e}; showing warnings only"));
            filter(None, verbose).unwrap_or_default()
        }
    };
    let detailed = verbose >= 2 || spec.is_some();
    let layer = tracing_subscriber::fmt::layer().with_ansi(false).without_time().with_target(detailed).with_writer(Stderr);
    // Fails only if a subscriber is already set, which nothing else in the binary does.
    let _ = tracing::subscriber::set_global_default(registry().with(layer.with_filter(filter)));
}

/// What to show: `spec` (from `EVALGRID_LOG`), else warnings; `-v` raises evalgrid's own
/// targets to info, debug or trace when `spec` asked for less. A spec naming only some
/// targets keeps warnings from the rest.
fn filter(spec: Option<&str>, verbose: u8) -> Result<Targets, tracing_subscriber::filter::ParseError> {
    let mut targets = match spec.map(str::trim).filter(|s| !s.is_empty()) {
        Some(spec) => spec.parse::<Targets>()?,
        None => Targets::new(),
    };
    if targets.default_level().is_none() {
        targets = targets.with_default(LevelFilter::WARN);
    }
    let raised = match verbose {
        0 => None,
        1 => Some(tracing::Level::INFO),
        2 => Some(tracing::Level::DEBUG),
        _ => Some(tracing::Level::TRACE),
    };
    if let Some(level) = raised.filter(|level| !targets.would_enable("evalgrid", level)) {
        targets = targets.with_target("evalgrid", level);
    }
    Ok(targets)
}

/// Makes one [`Line`] per event.
struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

/// One formatted event, collected and then printed escaped, as one line, when dropped
/// (the fmt layer writes each event in one go).
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if !text.is_empty() {
            evalgrid::exec::progress::eprintln(&evalgrid::text::one_line(text));
        }
    }
}
