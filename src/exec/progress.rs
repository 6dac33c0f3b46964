//! Progress display on stderr: cells done / cached / failed, rate and ETA, calls, and
//! how each rate-limited lane is being paced (`paced openai m: 12 429s, 2 in flight, 37.5 req/s`).
//!
//! Hidden automatically when stderr is not a terminal (CI, pipes) or when
//! `EVALGRID_NO_PROGRESS` is set, so stdout stays clean for `--json`.
//!
//! Every text shown here (lines above the bar, the bar's own lines) is escaped with
//! [`crate::text`]: it holds model names, lane names and provider errors from outside.

use std::sync::{Mutex, PoisonError};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, WeakProgressBar};

use crate::text::one_line;

/// The bar on screen now, if any, so that lines printed from elsewhere (the CLI's notes,
/// log lines) are drawn above it instead of through it.
static LIVE: Mutex<Option<WeakProgressBar>> = Mutex::new(None);

/// Prints `line` on stderr as is (the caller escapes it), above the live progress bar if
/// one is drawn, so the bar is never garbled.
#[expect(clippy::print_stderr, reason = "progress output belongs on stderr")]
pub fn eprintln(line: &str) {
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(WeakProgressBar::upgrade);
    match live {
        Some(bar) if !bar.is_finished() => bar.suspend(|| eprintln!("{line}")),
        _ => eprintln!("{line}"),
    }
}

/// Live counters shown next to the bar; clones draw the same bar.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Creates a bar over `total` cells of which `cached` are already done.
    #[must_use]
    pub fn new(total: u64, cached: u64) -> Self {
        let hidden = std::env::var_os("EVALGRID_NO_PROGRESS").is_some();
        let target = if hidden { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} cells  {msg}  {per_sec}  ETA {eta}  {prefix}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_position(cached);
        bar.reset_eta();
        *LIVE.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.downgrade());
        let p = Self { bar };
        p.update(0, cached, 0);
        p
    }

    /// Refreshes the counters text.
    pub fn update(&self, run: u64, cached: u64, failed: u64) {
        self.bar.set_message(format!("run {run} · cached {cached} · failed {failed}"));
    }

    /// Appends call/token/cost counters to the bar's prefix line.
    pub fn set_extra(&self, text: &str) {
        self.bar.set_prefix(one_line(text).into_owned());
    }

    /// Refreshes the prefix line from `line` twice a second until the returned guard is
    /// dropped, so pacing shows while long cells run (cells can take minutes when paced).
    /// Needs a tokio runtime.
    #[must_use]
    pub fn watch(&self, line: impl Fn() -> String + Send + 'static) -> Watch {
        let bar = self.bar.clone();
        Watch(tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
            loop {
                tick.tick().await;
                bar.set_prefix(one_line(&line()).into_owned());
            }
        }))
    }

    /// One more cell finished (successfully or not).
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// Prints a line above the bar without garbling it. `line` is one line (a cell's
    /// error, a run-log note): control characters in it, newlines included, are escaped so
    /// text from a provider can neither drive the terminal nor forge a line of its own.
    pub fn println(&self, line: &str) {
        let line = one_line(line);
        self.bar.suspend(|| {
            #[expect(clippy::print_stderr, reason = "progress output belongs on stderr")]
            {
                eprintln!("{line}");
            }
        });
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Stops a [`Progress::watch`] refresher when dropped.
#[derive(Debug)]
pub struct Watch(tokio::task::JoinHandle<()>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}
