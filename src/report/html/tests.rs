//! Tests of the HTML page: the escaping routine, links, CSP hashes, the
//! summary fragment, hostile transcripts, and size at 100,000 cells.

use proptest::prelude::*;

use super::*;
use crate::metrics::MetricDef;

const HOSTILE: &str = "<script>alert(1)</script>\n\"><img src=x onerror=alert(1)>\n' onmouseover='alert(1)";

fn tables() -> Vec<BenchmarkTables> {
    let ratio = |name: &str, agg: fn(String, String) -> Agg| MetricDef { name: name.into(), agg: agg("correct".into(), "n".into()) };
    vec![BenchmarkTables {
        benchmark: "bbeh<x>".into(),
        columns: vec![
            ratio("accuracy", Agg::Ratio),
            ratio("ci_low", Agg::WilsonLow),
            ratio("ci_high", Agg::WilsonHigh),
            MetricDef::mean("mean_score", "score"),
        ],
        by_task: vec![TableRow { model: "m&1".into(), task: Some("t<1>".into()), n: 3, values: vec![Some(0.5), Some(0.25), Some(0.75), None], planned: 0 }],
        by_model: vec![TableRow { model: "m&1".into(), task: None, n: 3, values: vec![Some(0.5), Some(0.25), Some(0.75), Some(f64::NAN)], planned: 0 }],
    }]
}

fn cell(i: usize, state: CellState, transcript: Transcript) -> CellLine {
    CellLine {
        id: format!("model-{}/bench/task-{}/{}", i % 7, i % 100, i % 3),
        model: format!("model-{}", i % 7),
        task: format!("task-{}", i % 100),
        seed: (i % 3) as u64,
        state,
        headline: format!("{:.2}", (i % 31) as f64 / 31.0),
        transcript,
        keys: format!("episode {i:012x} · score <{i:x}>"),
    }
}

fn report<'a>(tables: &'a [BenchmarkTables], cells: Vec<CellLine>) -> HtmlReport<'a> {
    HtmlReport {
        title: "demo <report>",
        tables,
        figures: vec![Figure {
            id: "bbeh/acc".into(),
            title: "Accuracy".into(),
            kind: FigureKind::Bars,
            x_label: "task".into(),
            y_label: "accuracy".into(),
            series: vec![Series::labelled("m", vec![("t1".into(), 0.5)])],
            diagonal: false,
        }],
        cells,
        provenance: vec![("evalgrid version".into(), "0.1.0".into()), ("pipeline hash".into(), "blake3:abc".into())],
        usage: vec![
            ModelUsage { model: "m&1".into(), input_tokens: 10, output_tokens: 5, cost_usd: Some(0.5), batch_saved_usd: None },
            ModelUsage { model: "free".into(), input_tokens: 1, output_tokens: 2, cost_usd: None, batch_saved_usd: None },
        ],
        decimals: 2,
        warnings: Vec::new(),
        sections: &[],
        comparisons: &[],
        item_pages: Vec::new(),
    }
}

#[test]
fn escape_html_covers_text_and_attributes() {
    assert_eq!(escape_html(r#"a&b<c>d"e'f"#), "a&amp;b&lt;c&gt;d&quot;e&#39;f");
    assert_eq!(escape_html("tab\tnl\ncr\r nul\0 bell\u{7} \u{ffff}é✓"), "tab\tnl\ncr\r nul\u{fffd} bell\u{fffd} \u{fffd}é✓");
    assert_eq!(escape_html(""), "");
    // U+FFFE/U+FFFF go; other characters whose UTF-8 starts with the same bytes stay.
    assert_eq!(escape_html("\u{fffe}x\u{feff}\u{ffef}\u{ffff}"), "\u{fffd}x\u{feff}\u{ffef}\u{fffd}");
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

proptest! {
    #[test]
    fn escaped_text_has_no_markup_and_round_trips(s in any::<String>()) {
        let e = escape_html(&s);
        prop_assert!(!e.contains(['<', '>', '"', '\'']));
        for (i, _) in e.match_indices('&') {
            let rest = &e[i..];
            prop_assert!(["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"].iter().any(|x| rest.starts_with(x)), "{e}");
        }
        let clean: String = s.chars().map(|c| if (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{fffe}' || c == '\u{ffff}' { '\u{fffd}' } else { c }).collect();
        prop_assert_eq!(unescape(&e), clean);
    }
}

#[test]
fn only_relative_links_survive() {
    assert_eq!(safe_href("transcripts/m a#1?.html").as_deref(), Some("transcripts/m%20a%231%3F.html"));
    assert_eq!(safe_href("t/\"><script>.html").as_deref(), Some("t/%22%3E%3Cscript%3E.html"));
    assert_eq!(safe_href("transcripts/openai:gpt-4o.html").as_deref(), Some("transcripts/openai%3Agpt-4o.html"));
    for bad in ["", "/etc/passwd", "//evil.example/x", "\\\\host\\x"] {
        assert_eq!(safe_href(bad), None, "{bad}");
    }
    for scheme in ["javascript:alert(1)", "https://x", "data:text/html,x", "JaVaScRiPt:x"] {
        let href = safe_href(scheme).unwrap();
        assert!(!href.contains(':'), "{scheme} still has a scheme: {href}");
    }
}

#[test]
fn csp_hashes_match_the_page() {
    assert_eq!(csp_hash(""), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    let t = tables();
    let page = render_html(&report(&t, vec![cell(0, CellState::Ok, Transcript::None)]));
    let between = |open: &str, close: &str| page.split_once(open).and_then(|(_, r)| r.split_once(close)).map(|(x, _)| x.to_owned()).unwrap();
    assert!(page.contains(&format!("script-src '{}'", csp_hash(&between("<script>", "</script>")))));
    assert!(page.contains(&format!("style-src '{}'", csp_hash(&between("<style>", "</style>")))));
}

#[test]
fn summary_fragment_snapshot() {
    let t = tables();
    let r = report(&t, Vec::new());
    let mut out = String::new();
    summary(&mut out, &r);
    insta::assert_snapshot!(out, @r#"
    <section id="summary">
    <h2>Summary</h2>
    <h3>bbeh&lt;x&gt;</h3>
    <div class="scroll"><table class="summary">
    <thead><tr><th>model</th><th class="num">n</th><th class="num">accuracy [95 % CI]</th><th class="num">mean_score</th></tr></thead>
    <tbody>
    <tr><td>m&amp;1</td><td class="num">3</td><td class="num">0.50 [0.25, 0.75]</td><td class="num">–</td></tr>
    </tbody>
    </table></div>
    <details>
    <summary>By model × task (1 row)</summary>
    <div class="scroll"><table class="summary">
    <thead><tr><th>model</th><th>task</th><th class="num">n</th><th class="num">accuracy [95 % CI]</th><th class="num">mean_score</th></tr></thead>
    <tbody>
    <tr><td>m&amp;1</td><td>t&lt;1&gt;</td><td class="num">3</td><td class="num">0.50 [0.25, 0.75]</td><td class="num">–</td></tr>
    </tbody>
    </table></div>
    </details>
    <p class="note">Intervals in brackets are 95 % Wilson score intervals; n is the number of cells.</p>
    </section>
    "#);
}

#[test]
fn hostile_transcripts_render_as_text() {
    let t = tables();
    let mut c = cell(0, CellState::Failed, Transcript::Inline(HOSTILE.into()));
    c.id = HOSTILE.into();
    c.headline = HOSTILE.into();
    let cells = vec![c, cell(1, CellState::Ok, Transcript::Link(HOSTILE.into())), cell(2, CellState::Ok, Transcript::Link("t/x.html".into()))];
    let mut r = report(&t, cells);
    r.provenance.push((HOSTILE.into(), HOSTILE.into()));
    let page = render_html(&r);
    let standalone = render_transcript_html(HOSTILE, HOSTILE);
    for p in [&page, &standalone] {
        assert!(!p.contains("<img") && !p.contains("<script>alert") && !p.contains("' onmouseover"), "{p}");
        assert!(p.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(p.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
        assert!(!p.contains("href=\"http") && !p.contains("src=\"") && !p.contains("url(") && !p.contains("@import"));
    }
    assert_eq!(page.matches("<script>").count(), 1, "only our own script");
    assert!(page.contains("<a href=\"#tr-0\">transcript</a>") && page.contains("<details id=\"tr-0\">"));
    assert!(page.contains("<a href=\"t/x.html\">transcript</a>"));
    assert!(page.contains("<tr class=\"failed\">"));
    assert!(page.contains("<dt>cells failed</dt><dd>1</dd>"));
    assert!(page.contains("<th class=\"num\">0.5000 (+1 unpriced)</th>"));
    assert!(!standalone.contains("<script"), "transcript pages carry no script");
    assert!(standalone.contains("script-src 'none'"));
    assert_eq!(page, render_html(&r), "deterministic");
}

#[test]
fn big_transcripts_are_not_inlined() {
    let t = tables();
    let big = "x".repeat(INLINE_TRANSCRIPT_MAX_BYTES + 1);
    let page = render_html(&report(&t, vec![cell(0, CellState::Ok, Transcript::Inline(big.clone()))]));
    assert!(!page.contains(&big));
    assert!(page.contains("not inlined (17 KB)"));
    assert!(!page.contains("<details id=\"tr-"));
}

#[test]
fn hundred_thousand_cells_stay_small() {
    let t = tables();
    let small = "turn 1: play 7♠ <ok>\n".repeat(40);
    let cells: Vec<CellLine> = (0..100_000)
        .map(|i| {
            let state = if i % 997 == 0 { CellState::Failed } else { CellState::Ok };
            let transcript = match i % 3 {
                0 => Transcript::Link(format!("transcripts/{i}.html")),
                1 => Transcript::Inline(small.clone()),
                _ => Transcript::Inline("y".repeat(INLINE_TRANSCRIPT_MAX_BYTES)),
            };
            cell(i, state, transcript)
        })
        .collect();
    let failed = cells.iter().filter(|c| c.state == CellState::Failed).count();
    let mut r = report(&t, cells);
    r.figures = (0..10)
        .map(|k| Figure {
            id: format!("f{k}"),
            title: format!("figure {k}"),
            kind: FigureKind::Scatter,
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series::new("s", (0..5_000).map(|i| (f64::from(i), f64::from(i % 13))).collect())],
            diagonal: true,
        })
        .collect();
    let start = std::time::Instant::now();
    let page = render_html(&r);
    let elapsed = start.elapsed();
    println!("100,000-cell report: {} bytes in {elapsed:?}", page.len());
    assert!(page.len() < 20 * 1024 * 1024, "{} bytes", page.len());
    assert_eq!(page.matches("<tr class=\"failed\">").count(), failed, "failed cells are always listed");
    let cells_section = page.split_once("<section id=\"cells\">").and_then(|(_, r)| r.split_once("</section>")).map(|(x, _)| x).unwrap();
    assert_eq!(cells_section.matches("</tr>\n").count(), MAX_CELL_ROWS, "cell rows are capped");
    assert!(page.contains("Showing 5000 of 100000 cells"));
    assert!(page.matches("<details id=\"tr-").count() * small.len() <= INLINE_TRANSCRIPTS_TOTAL_BYTES + INLINE_TRANSCRIPT_MAX_BYTES);
}
