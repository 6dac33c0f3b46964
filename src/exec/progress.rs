//! Progress display on stderr: cells done / cached / failed, rate and ETA, calls, and
//! how each rate-limited lane is being paced (`paced openai m: 12 429s, 2 in flight, 37.5 req/s`).
//!
//! The ETA is the time so far scaled by the calls still expected over the calls made
//! (`calls 12/318 · ETA 4m10s`, the expected count being what `run --dry-run` counts), since
//! a grid's time is its calls, not its cells (a cell can hold hundreds). It shows only once
//! enough calls (5, and 5 % of them) have answered to measure a rate; before that, `ETA –`.
//! Without a call count (episodes whose calls depend on the game) the cells stand in.
//!
//! Three displays ([`Display`]): a bar redrawn in place on a terminal; plain lines for logs
//! (Slurm, Kubernetes, CI, pipes), one every [`plain_interval`] and one at each 10 % of
//! cells, so a job's log shows it moving; or nothing. Everything goes to stderr, so stdout
//! stays clean for `--json`.
//!
//! Every text shown here (lines above the bar, the bar's own lines) is escaped with
//! [`crate::text`]: it holds model names, lane names and provider errors from outside.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// How a run shows its progress on stderr (`run --progress`, `auto` resolved by the CLI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Display {
    /// A bar redrawn in place: for a terminal.
    #[default]
    Bar,
    /// One plain line every [`plain_interval`] and at each 10 % of cells: for log files.
    Plain,
    /// Nothing.
    None,
}

/// Seconds between two plain progress lines: 30, or `EVALGRID_PROGRESS_INTERVAL_S` (tests
/// set it low so a short run shows timed lines too).
#[must_use]
pub fn plain_interval() -> Duration {
    let secs = std::env::var("EVALGRID_PROGRESS_INTERVAL_S").ok().and_then(|s| s.trim().parse::<f64>().ok()).filter(|s| s.is_finite() && *s > 0.0);
    Duration::from_secs_f64(secs.unwrap_or(30.0))
}

/// What the plain lines need besides the (hidden) bar: counters, the call line, and which
/// tenth of the cells was last announced.
#[derive(Debug)]
struct Plain {
    started: Instant,
    /// Cells already done when the run started (cached), left out of the rate.
    start_done: u64,
    total: u64,
    counts: Mutex<(u64, u64, u64)>,
    extra: Mutex<String>,
    last_tenth: AtomicU64,
}

/// What the ETA is measured on: calls made against calls expected, else cells.
#[derive(Debug)]
struct Eta {
    started: Instant,
    /// Calls this run is expected to make (`None`: not known up front).
    expected: Option<u64>,
    /// Calls made so far.
    made: AtomicU64,
    /// Cells to compute, and computed so far (the stand-in without a call count).
    cells: u64,
    cells_done: AtomicU64,
}

/// Calls (or, without an expected count, cells) measured before an ETA is shown: at
/// least 5, and 5 % of the total.
fn enough(total: u64) -> u64 {
    (total / 20).max(5).min(total)
}

/// The ETA part of a progress line: `calls 12/318 · ETA 4m10s`, `calls 2/318 · ETA –`
/// (too few calls to tell), `calls 330 (318 expected) · ETA unknown`; without a call count,
/// from the cells computed over the cells to compute.
#[must_use]
pub fn eta_text(made: u64, expected: Option<u64>, (cells_done, cells): (u64, u64), elapsed_s: f64) -> String {
    let scale = |done: u64, total: u64| -> String {
        if done >= total {
            "ETA 0s".to_owned()
        } else if done < enough(total) || done == 0 {
            "ETA –".to_owned()
        } else {
            #[expect(clippy::cast_precision_loss, reason = "call and cell counts are far below 2^52")]
            let left = elapsed_s * (total - done) as f64 / done as f64;
            if left < 0.5 { "ETA <1s".to_owned() } else { format!("ETA {}", human(left)) }
        }
    };
    match expected {
        Some(e) if e > 0 && made > e => format!("calls {made} ({e} expected) · ETA unknown"),
        Some(e) if e > 0 => format!("calls {made}/{e} · {}", if cells_done >= cells { "ETA 0s".to_owned() } else { scale(made, e) }),
        _ => scale(cells_done, cells),
    }
}

/// Live counters shown next to the bar; clones draw the same bar.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
    plain: Option<Arc<Plain>>,
    eta: Arc<Eta>,
}

impl Progress {
    /// Creates a progress display of kind `display` over `total` cells of which `cached`
    /// are already done.
    #[must_use]
    pub fn with_display(total: u64, cached: u64, display: Display) -> Self {
        let target = if display == Display::Bar { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} cells  {msg}  {prefix}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_position(cached);
        bar.reset_eta();
        if display == Display::Bar {
            *LIVE.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.downgrade());
        }
        let plain = (display == Display::Plain).then(|| {
            let tenth = (cached * 10).checked_div(total).unwrap_or(10);
            Arc::new(Plain {
                started: Instant::now(),
                start_done: cached,
                total,
                counts: Mutex::new((0, cached, 0)),
                extra: Mutex::new(String::new()),
                last_tenth: AtomicU64::new(tenth),
            })
        });
        let eta = Arc::new(Eta {
            started: Instant::now(),
            expected: None,
            made: AtomicU64::new(0),
            cells: total.saturating_sub(cached),
            cells_done: AtomicU64::new(0),
        });
        let p = Self { bar, plain, eta };
        p.update(0, cached, 0);
        p
    }

    /// The same display, its ETA measured on `expected` calls (the count `run --dry-run`
    /// gives; `None` when some cell's calls are not known up front).
    #[must_use]
    pub fn expecting_calls(mut self, expected: Option<u64>) -> Self {
        self.eta = Arc::new(Eta { expected, made: AtomicU64::new(0), cells_done: AtomicU64::new(0), ..*self.eta });
        self.set_extra("");
        self
    }

    /// Records the calls made so far (answered or failed).
    pub fn set_calls(&self, made: u64) {
        self.eta.made.store(made, Ordering::Relaxed);
    }

    /// The ETA part of the lines, as things stand.
    fn eta_line(&self) -> String {
        let e = &self.eta;
        eta_text(e.made.load(Ordering::Relaxed), e.expected, (e.cells_done.load(Ordering::Relaxed), e.cells), e.started.elapsed().as_secs_f64())
    }

    /// Refreshes the counters text; in plain mode, prints a line when the cells done
    /// cross the next tenth of the total.
    pub fn update(&self, run: u64, cached: u64, failed: u64) {
        self.bar.set_message(format!("run {run} · cached {cached} · failed {failed}"));
        // Cells found cached once the run started count as done for the stand-in ETA.
        let start_cached = self.bar.length().unwrap_or(0).saturating_sub(self.eta.cells);
        self.eta.cells_done.store((run + cached + failed).saturating_sub(start_cached), Ordering::Relaxed);
        if let Some(plain) = &self.plain {
            *plain.counts.lock().unwrap_or_else(PoisonError::into_inner) = (run, cached, failed);
            let done = run + cached + failed;
            let tenth = (done * 10).checked_div(plain.total).unwrap_or(10).min(10);
            if plain.last_tenth.fetch_max(tenth, Ordering::Relaxed) < tenth {
                eprintln(&plain.line(&self.eta_line()));
            }
        }
    }

    /// Appends call/token/cost counters to the bar's prefix line, after the ETA.
    pub fn set_extra(&self, text: &str) {
        let text = one_line(text).into_owned();
        if let Some(plain) = &self.plain {
            plain.extra.lock().unwrap_or_else(PoisonError::into_inner).clone_from(&text);
        }
        let eta = self.eta_line();
        self.bar.set_prefix(if text.is_empty() { eta } else { format!("{eta}  {text}") });
    }

    /// Refreshes the prefix line from `line` twice a second until the returned guard is
    /// dropped, so pacing shows while long cells run (cells can take minutes when paced).
    /// Needs a tokio runtime.
    #[must_use]
    pub fn watch(&self, line: impl Fn() -> String + Send + 'static) -> Watch {
        let this = self.clone();
        let every = plain_interval();
        Watch(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            let mut last = Instant::now();
            loop {
                tick.tick().await;
                this.set_extra(&line());
                if let Some(plain) = &this.plain
                    && last.elapsed() >= every
                {
                    last = Instant::now();
                    eprintln(&plain.line(&this.eta_line()));
                }
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

impl Plain {
    /// `progress: 12/40 cells (30 %) · run 9 · cached 3 · failed 0 · 1.5 cells/s · calls 80/200 · ETA 19s · calls …`
    fn line(&self, eta: &str) -> String {
        let (run, cached, failed) = *self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let done = run + cached + failed;
        let percent = (done * 100).checked_div(self.total).unwrap_or(100);
        let elapsed = self.started.elapsed().as_secs_f64();
        let fresh = done.saturating_sub(self.start_done);
        let rate = if elapsed > 0.0 { fresh as f64 / elapsed } else { 0.0 };
        let extra = self.extra.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut line = format!(
            "progress: {done}/{} cells ({percent} %) · run {run} · cached {cached} · failed {failed} · {rate:.2} cells/s · {eta} · elapsed {}",
            self.total,
            human(elapsed)
        );
        if !extra.is_empty() {
            line.push_str(" · ");
            line.push_str(&extra);
        }
        one_line(&line).into_owned()
    }
}

/// `75s` → `1m15s`, `4000s` → `1h06m`.
fn human(secs: f64) -> String {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "durations of a run are small and non-negative")]
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_is_calls_left_over_calls_made_and_only_once_measured() {
        // 4 of 318 calls: too few to tell.
        assert_eq!(eta_text(4, Some(318), (0, 18), 120.0), "calls 4/318 · ETA –");
        // 16 of 318 (5 %) in 120 s: 302 left at 7.5 s each.
        assert_eq!(eta_text(16, Some(318), (0, 18), 120.0), "calls 16/318 · ETA 37m45s");
        assert_eq!(eta_text(318, Some(318), (17, 18), 600.0), "calls 318/318 · ETA 0s");
        assert_eq!(eta_text(330, Some(318), (17, 18), 600.0), "calls 330 (318 expected) · ETA unknown");
        // No call count: the cells stand in, with the same floor.
        assert_eq!(eta_text(0, None, (4, 18), 60.0), "ETA –");
        assert_eq!(eta_text(0, None, (6, 18), 60.0), "ETA 2m00s");
        assert_eq!(eta_text(0, Some(0), (18, 18), 60.0), "ETA 0s");
        assert_eq!(eta_text(190, Some(200), (9, 10), 1.0), "calls 190/200 · ETA <1s", "never 0s with calls left");
    }
}
