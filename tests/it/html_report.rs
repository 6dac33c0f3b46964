//! The HTML report in a real browser: headless Chromium loads a hand-made
//! report (every figure kind, one hostile transcript inline and one linked),
//! and the test checks there are no console messages (errors, CSP
//! violations), every figure has drawn marks after load, hostile text stayed
//! text, and the standalone SVGs parse; it saves a screenshot under
//! `target/tmp/html_report/` with the report. Skips (and passes) when `chromium` is not on PATH.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use evalgrid::metrics::{Agg, BenchmarkTables, Comparison, MetricDef, TableRow};
use evalgrid::report::html::{
    CellLine, CellState, Figure, FigureKind, HtmlReport, Series, Transcript, figure_csv, figure_file_stem, figure_svg, render_html, render_transcript_html,
};
use evalgrid::report::{ModelUsage, Section};

pub(crate) const HOSTILE: &str = "turn 1: <script>alert(1)</script>\nturn 2: \"><img src=x onerror=alert(2)>\nturn 3: ' onmouseover='alert(3)";
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

fn chromium() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("chromium")).find(|p| p.is_file())
}

/// Runs Chromium on `url` with the flags the issue asks for plus `extra`,
/// killing it after [`CHROMIUM_TIMEOUT`]; returns (stdout, stderr).
fn run_chromium(bin: &Path, profile: &Path, extra: &[String], url: &str) -> (String, String) {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--enable-logging=stderr", "--v=0"])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait on chromium") {
            break s;
        }
        if start.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_TIMEOUT:?} on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().expect("stdout reader"), err.join().expect("stderr reader"));
    assert!(status.success(), "chromium failed on {url}: {status}\n{err}");
    (out, err)
}

/// Console lines Chromium logged (`...:CONSOLE...`): our pages log nothing,
/// so any line is an error, an uncaught exception or a CSP violation.
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

fn tables() -> Vec<BenchmarkTables> {
    let ratio = |name: &str, agg: fn(String, String) -> Agg| MetricDef { name: name.into(), agg: agg("correct".into(), "n".into()) };
    let row = |model: &str, task: Option<&str>, v: [f64; 3]| TableRow {
        model: model.into(),
        task: task.map(str::to_owned),
        n: 4,
        values: v.iter().map(|x| Some(*x)).collect(),
        planned: 4,
    };
    vec![
        BenchmarkTables {
            benchmark: "eleusis".into(),
            columns: vec![MetricDef::mean("mean_score", "score"), MetricDef::mean("mean_no_stakes", "no_stakes"), MetricDef::mean("boldness", "boldness")],
            by_task: vec![row("oracle", Some("only_aces"), [30.0, 0.0, 0.5]), row("random", Some("only_aces"), [-4.0, 2.0, 0.1])],
            by_model: vec![row("oracle", None, [30.0, 0.0, 0.5]), row("random", None, [-4.0, 2.0, 0.1])],
        },
        BenchmarkTables {
            benchmark: "bbeh".into(),
            columns: vec![ratio("accuracy", Agg::Ratio), ratio("ci_low", Agg::WilsonLow), ratio("ci_high", Agg::WilsonHigh)],
            by_task: vec![row("m1", Some("boolean_expressions"), [0.5, 0.3, 0.7])],
            by_model: vec![row("m1", None, [0.5, 0.3, 0.7])],
        },
    ]
}

fn figures() -> Vec<Figure> {
    let fig = |id: &str, kind, x: &str, y: &str, series, diagonal| Figure {
        id: id.into(),
        title: format!("{id} <figure>"),
        kind,
        x_label: x.into(),
        y_label: y.into(),
        series,
        diagonal,
    };
    vec![
        fig(
            "eleusis/calibration",
            FigureKind::Line,
            "confidence",
            "observed accuracy",
            vec![Series::new("oracle", vec![(0.1, 0.0), (0.5, 0.6), (0.9, 1.0)]), Series::new("random <b>", vec![(0.1, 0.2), (0.5, 0.4), (0.9, 0.5)])],
            true,
        ),
        fig(
            "eleusis/score-vs-tokens",
            FigureKind::Scatter,
            "tokens per turn",
            "score",
            vec![Series {
                name: "models".into(),
                points: vec![(120.0, 30.0), (15_000.0, -4.0)],
                labels: vec!["oracle".into(), HOSTILE.into()],
                reference: false,
            }],
            false,
        ),
        fig(
            "bbeh/per-task",
            FigureKind::Bars,
            "task",
            "accuracy",
            vec![
                Series::labelled("m1", vec![("boolean_expressions".into(), 0.5), ("dyck_languages".into(), 0.2)]),
                Series::labelled("random baseline", vec![("boolean_expressions".into(), 0.25), ("dyck_languages".into(), 0.1)]).as_reference(),
            ],
            false,
        ),
        fig(
            "eleusis/boldness",
            FigureKind::Bars,
            "model",
            "boldness index",
            vec![Series::labelled("boldness", vec![("oracle".into(), 0.5), ("random".into(), -0.1)])],
            false,
        ),
        fig(
            "bbq/solved-vs-budget",
            FigureKind::Line,
            "fraction of budget",
            "solved fraction",
            vec![Series::new("solver", vec![(0.1, 0.2), (0.25, 0.5), (0.5, 0.8), (1.0, 0.9)])],
            false,
        ),
    ]
}

/// Three Eleusis models on `score`: oracle and ideal each far above random (Holm p ≈ 0),
/// oracle and ideal tied (p 0.6). The report's by-model table lists oracle and random.
fn comparisons() -> Vec<Comparison> {
    let pair = |a: &str, b: &str, (mean_a, mean_b): (f64, f64), se: f64, p: f64| Comparison {
        suite: "eleusis".into(),
        metric: "score".into(),
        model_a: a.into(),
        model_b: b.into(),
        n_pairs: 78,
        clusters: 26,
        mean_a: Some(mean_a),
        mean_b: Some(mean_b),
        diff: Some(mean_a - mean_b),
        se: Some(se),
        ci_low: Some(mean_a - mean_b - 1.96 * se),
        ci_high: Some(mean_a - mean_b + 1.96 * se),
        p_value: Some(p),
        p_holm: Some(p),
        mcnemar_p: None,
        mde: Some(2.8 * se),
        se_level: "task".into(),
    };
    vec![pair("oracle", "random", (30.0, -4.0), 0.5, 1e-12), pair("oracle", "ideal", (30.0, 29.0), 2.0, 0.6), pair("ideal", "random", (29.0, -4.0), 0.5, 1e-12)]
}

fn cells() -> Vec<CellLine> {
    let line = |id: &str, state, headline: &str, transcript| CellLine {
        id: id.into(),
        model: id.split('/').next().unwrap_or_default().into(),
        task: "only_aces".into(),
        seed: 0,
        state,
        headline: headline.into(),
        transcript,
        keys: String::new(),
    };
    vec![
        line("oracle/eleusis/only_aces/0", CellState::Ok, "30", Transcript::Inline("turn 1: guess correct".into())),
        line("random/eleusis/only_aces/0", CellState::Ok, "-4", Transcript::Inline(HOSTILE.into())),
        line("random/eleusis/only_aces/1", CellState::Failed, HOSTILE, Transcript::Link("transcripts/random-only_aces-1.html".into())),
        line("m1/bbeh/boolean_expressions/0", CellState::Ok, "0.50", Transcript::None),
    ]
}

#[test]
fn report_renders_in_headless_chromium_without_errors() {
    let Some(bin) = chromium() else {
        eprintln!("SKIPPED: `chromium` is not on PATH (Debian: apt-get install -y chromium); the HTML report was not checked in a browser");
        return;
    };
    // The report is written under target/tmp so a human can open it and the screenshot.
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html_report");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).expect("mkdir output");
    let out = out_dir.as_path();
    let profile_dir = tempfile::tempdir().expect("temp dir");
    let tables = tables();
    let comparisons = comparisons();
    let sections = [Section {
        title: "eleusis: spec §5 metrics <wide>".into(),
        columns: (0..24).map(|i| format!("a_rather_long_metric_name_{i}")).collect(),
        rows: vec![(HOSTILE.into(), (0..24).map(|i| Some(f64::from(i) / 7.0)).collect())],
    }];
    let report = HtmlReport {
        title: "html report <test>",
        tables: &tables,
        figures: figures(),
        cells: cells(),
        provenance: vec![
            ("evalgrid version".into(), "0.1.0 (test)".into()),
            ("pipeline file".into(), "blake3:0123abcd".into()),
            ("models as answered".into(), HOSTILE.into()),
        ],
        usage: vec![ModelUsage { model: "m1".into(), input_tokens: 1200, output_tokens: 300, cost_usd: Some(0.0123), batch_saved_usd: None }],
        decimals: 2,
        warnings: vec!["model code ran <unsandboxed>".into()],
        sections: &sections,
        comparisons: &comparisons,
        item_pages: Vec::new(),
    };
    let index = out.join("index.html");
    std::fs::write(&index, render_html(&report)).expect("write index");
    std::fs::create_dir_all(out.join("transcripts")).expect("mkdir transcripts");
    let transcript = out.join("transcripts/random-only_aces-1.html");
    std::fs::write(&transcript, render_transcript_html("random/eleusis/only_aces/1", HOSTILE)).expect("write transcript");
    std::fs::create_dir_all(out.join("figures")).expect("mkdir figures");
    for f in &report.figures {
        let stem = figure_file_stem(&f.id);
        std::fs::write(out.join(format!("figures/{stem}.svg")), figure_svg(f)).expect("write svg");
        std::fs::write(out.join(format!("figures/{stem}.csv")), figure_csv(f)).expect("write csv");
    }
    let profile = profile_dir.path().join("profile");
    let url = |p: &Path| format!("file://{}", p.display());

    // The page after load: no console output, script ran, marks drawn, hostile text inert.
    let (dom, err) = run_chromium(&bin, &profile, &["--dump-dom".to_owned()], &url(&index));
    assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output on index.html");
    assert!(dom.contains("id=\"cells-table\""), "page did not load:\n{dom}");
    assert!(!dom.contains("placeholder=\"filter cells\" aria-label=\"filter cells\" hidden"), "the inline script did not run (CSP?)");
    let svgs: Vec<&str> = dom.split("<svg ").skip(1).filter(|s| s.split_once('>').is_some_and(|(tag, _)| tag.contains("class=\"figure\""))).collect();
    assert_eq!(svgs.len(), report.figures.len(), "every figure is in the DOM");
    for (svg, f) in svgs.iter().zip(&report.figures) {
        let body = svg.split_once("</svg>").map_or(*svg, |(b, _)| b);
        let drawn = ["<path class=\"mark\"", "<rect class=\"mark\"", "<circle class=\"mark\"", "<polyline class=\"mark\""].iter().any(|m| body.contains(m));
        assert!(drawn, "figure {} has no drawn marks", f.id);
    }
    assert!(!dom.contains("<img") && !dom.contains("<script>alert"), "hostile markup became elements:\n{dom}");
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "hostile text missing:\n{dom}");
    assert!(dom.contains("a_rather_long_metric_name_23") && dom.matches("<div class=\"scroll\">").count() >= 2, "wide tables scroll inside their box");
    // The pairwise matrix: one cell per ordered pair (3 models → 6), row − column with its
    // clustered CI, significant cells coloured by sign (green above, red below), the tie not.
    let matrix = between(&dom, "<table class=\"pairwise\" data-suite=\"eleusis\">", "</table>");
    assert_eq!(matrix.matches("<td class=\"pair").count(), 6, "{matrix}");
    assert_eq!(matrix.matches("<td class=\"pair sig-pos\"").count(), 2, "{matrix}");
    assert_eq!(matrix.matches("<td class=\"pair sig-neg\"").count(), 2, "{matrix}");
    assert_eq!(matrix.matches("<td class=\"diag\">").count(), 3, "{matrix}");
    assert!(
        matrix.contains("+34.000<span class=\"ci\">[33.020, 34.980]</span>") && matrix.contains("-34.000<span class=\"ci\">[-34.980, -33.020]</span>"),
        "{matrix}"
    );
    assert!(matrix.contains("<td class=\"pair\" title=\"Holm-adjusted p = 0.6000, 78 pairs\">+1.000<span class=\"ci\">[-2.920, 4.920]</span>"), "{matrix}");
    assert!(dom.contains("td.sig-pos{background:#d4f0dc") && dom.contains("td.sig-neg{background:#f9d9d9"), "the colours are in the page's (CSP-hashed) style");
    assert!(dom.contains("oracle<span class=\"best\">best</span>"), "the best model is marked in the by-model table");
    assert!(dom.contains("or no p-value): ideal. Minimum detectable difference against it at 80 % power: random 1.400, ideal 5.600."), "{dom}");

    // The linked transcript page and the standalone SVG files.
    let (dom, err) = run_chromium(&bin, &profile, &["--dump-dom".to_owned()], &url(&transcript));
    assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output on the transcript page");
    assert!(!dom.contains("<img") && !dom.contains("<script"), "transcript page: hostile markup became elements:\n{dom}");
    assert!(dom.contains("\"&gt;&lt;img src=x onerror=alert(2)&gt;"), "{dom}");
    for f in &report.figures {
        let path = out.join(format!("figures/{}.svg", figure_file_stem(&f.id)));
        let (dom, err) = run_chromium(&bin, &profile, &["--dump-dom".to_owned()], &url(&path));
        assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output on {}", path.display());
        assert!(!dom.contains("parsererror") && dom.contains("class=\"mark\""), "{} is not a well-formed SVG with marks:\n{dom}", path.display());
    }

    // Screenshot, next to the report.
    let shot = out.join("index.png");
    let (_, err) = run_chromium(&bin, &profile, &[format!("--screenshot={}", shot.display()), "--window-size=1280,2000".to_owned()], &url(&index));
    assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output while taking the screenshot");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "screenshot looks empty ({} bytes)", png.len());
    eprintln!("screenshot: {}", shot.display());
}

/// The text of `html` from `start` to the next `end`.
fn between<'h>(html: &'h str, start: &str, end: &str) -> &'h str {
    let from = html.find(start).unwrap_or_else(|| panic!("no `{start}` in the page:\n{html}"));
    let rest = &html[from..];
    &rest[..rest.find(end).map_or(rest.len(), |i| i + end.len())]
}

/// The real quickstart report, built by the binary, in the browser.
#[test]
fn quickstart_report_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIPPED: `chromium` is not on PATH (Debian: apt-get install -y chromium); the quickstart report was not checked in a browser");
        return;
    };
    let ws = crate::support::Workspace::new();
    let pipeline = ws.quickstart();
    let (code, v) = ws.run_json(&["run", pipeline.to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code, 0, "{v}");
    let index = ws.path("reports/quickstart/index.html");
    let profile = tempfile::tempdir().expect("temp dir");
    let url = format!("file://{}", index.display());
    let (dom, err) = run_chromium(&bin, &profile.path().join("p"), &["--dump-dom".to_owned()], &url);
    assert_eq!(console_lines(&err), Vec::<&str>::new(), "console output on the quickstart report");
    let svgs: Vec<&str> = dom.split("<svg ").skip(1).filter(|s| s.split_once('>').is_some_and(|(tag, _)| tag.contains("class=\"figure\""))).collect();
    assert!(svgs.len() >= 4, "expected the Eleusis figures, found {}", svgs.len());
    assert!(dom.contains("eleusis: spec §5 metrics") && dom.contains("eleusis: calibration"), "the Eleusis §5 tables are on the page");
    for svg in &svgs {
        let body = svg.split_once("</svg>").map_or(*svg, |(b, _)| b);
        assert!(
            ["<path class=\"mark\"", "<rect class=\"mark\"", "<circle class=\"mark\"", "<polyline class=\"mark\""].iter().any(|m| body.contains(m)),
            "a figure has no drawn marks"
        );
    }
    // The Eleusis pairwise matrix from the real comparisons: random, oracle and ideal give
    // 6 ordered pairs; oracle beats random on every rule, so that pair is significant.
    let matrix = between(&dom, "<table class=\"pairwise\" data-suite=\"eleusis\">", "</table>");
    assert_eq!(matrix.matches("<td class=\"pair").count(), 6, "{matrix}");
    assert!(matrix.matches(" sig-pos\"").count() >= 1 && matrix.matches(" sig-neg\"").count() >= 1, "{matrix}");
    assert_eq!(matrix.matches("<span class=\"ci\">[").count(), 6, "every pair shows its CI: {matrix}");
    let comparisons = std::fs::read_to_string(ws.path("reports/quickstart/comparisons.csv")).expect("comparisons.csv");
    let oracle_random = comparisons.lines().find(|l| l.starts_with("eleusis,score,random,oracle,")).unwrap_or_else(|| panic!("{comparisons}"));
    let diff: f64 = oracle_random.split(',').nth(8).and_then(|x| x.parse().ok()).expect("diff");
    assert!(matrix.contains(&format!("{diff:+.3}<span class=\"ci\">")), "random − oracle = {diff} is in the matrix: {matrix}");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quickstart-report.png");
    let _ = run_chromium(&bin, &profile.path().join("q"), &[format!("--screenshot={}", shot.display()), "--window-size=1280,2400".to_owned()], &url);
    assert!(shot.is_file(), "no screenshot written");
    // Every cell links a transcript page that exists.
    let transcripts = std::fs::read_dir(ws.path("reports/quickstart/transcripts")).expect("transcripts folder").count();
    assert!(transcripts > 0 && dom.matches("transcripts/").count() >= transcripts);
}
