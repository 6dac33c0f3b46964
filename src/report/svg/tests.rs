//! Tests of the SVG chart module: number and tick formatting, escaping,
//! marks per kind, thinning, CSV, and a small snapshot.

use super::*;

fn fig(kind: FigureKind, series: Vec<Series>, diagonal: bool) -> Figure {
    Figure { id: "f".into(), title: "T".into(), kind, x_label: "x".into(), y_label: "y".into(), series, diagonal }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn numbers_are_trimmed_and_never_negative_zero() {
    assert_eq!(num(1.0), "1");
    assert_eq!(num(1.5), "1.5");
    assert_eq!(num(1.256), "1.26");
    assert_eq!(num(-0.001), "0");
    assert_eq!(num(-2.50), "-2.5");
    assert_eq!(num(120.0), "120");
}

#[test]
fn ticks_are_nice_and_cover_the_data() {
    let labels = |a: Axis| a.ticks().into_iter().map(|t| t.1).collect::<Vec<_>>();
    let unit = Axis::over([0.0, 1.0].into_iter(), false);
    assert_eq!((unit.lo, unit.hi), (0.0, 1.0));
    assert_eq!(labels(unit), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
    assert_eq!(labels(Axis::over([3.0, 47.0].into_iter(), true)), ["0", "10", "20", "30", "40", "50"]);
    assert_eq!(labels(Axis::over([-0.3, 0.25].into_iter(), false)), ["-0.4", "-0.2", "0.0", "0.2", "0.4"]);
    assert_eq!(labels(Axis::over([0.0, 23_456.0].into_iter(), false)), ["0", "5k", "10k", "15k", "20k", "25k"]);
    // A single value, no values, and non-finite values still give a usable axis.
    let one = Axis::over([5.0].into_iter(), false);
    assert!(one.lo < 5.0 && one.hi > 5.0, "{one:?}");
    assert_eq!(Axis::over(std::iter::empty(), false), Axis::over([0.0, 1.0].into_iter(), false));
    assert_eq!(Axis::over([f64::NAN, f64::INFINITY, 0.0, 1.0].into_iter(), false), Axis::over([0.0, 1.0].into_iter(), false));
}

#[test]
fn small_line_chart_snapshot() {
    let f = fig(FigureKind::Line, vec![Series::new("a<b", vec![(0.0, 0.0), (0.5, 0.75), (1.0, 1.0)])], true);
    insta::assert_snapshot!(figure_svg(&f), @r##"<svg xmlns="http://www.w3.org/2000/svg" class="figure" viewBox="0 0 760 396" width="760" height="396" role="img" font-family="sans-serif" font-size="12"><title>T</title><text x="380" y="22" text-anchor="middle" font-size="15" font-weight="bold">T</text><g stroke="#e6e6e6"><line x1="72" x2="570" y1="340" y2="340"/><line x1="72" x2="570" y1="280" y2="280"/><line x1="72" x2="570" y1="220" y2="220"/><line x1="72" x2="570" y1="160" y2="160"/><line x1="72" x2="570" y1="100" y2="100"/><line x1="72" x2="570" y1="40" y2="40"/><line x1="72" x2="72" y1="40" y2="340"/><line x1="171.6" x2="171.6" y1="40" y2="340"/><line x1="271.2" x2="271.2" y1="40" y2="340"/><line x1="370.8" x2="370.8" y1="40" y2="340"/><line x1="470.4" x2="470.4" y1="40" y2="340"/><line x1="570" x2="570" y1="40" y2="340"/></g><g stroke="#333333"><line x1="72" x2="72" y1="40" y2="340"/><line x1="72" x2="570" y1="340" y2="340"/></g><g fill="#333333"><text x="66" y="344" text-anchor="end">0.0</text><text x="66" y="284" text-anchor="end">0.2</text><text x="66" y="224" text-anchor="end">0.4</text><text x="66" y="164" text-anchor="end">0.6</text><text x="66" y="104" text-anchor="end">0.8</text><text x="66" y="44" text-anchor="end">1.0</text><text x="72" y="356" text-anchor="middle">0.0</text><text x="171.6" y="356" text-anchor="middle">0.2</text><text x="271.2" y="356" text-anchor="middle">0.4</text><text x="370.8" y="356" text-anchor="middle">0.6</text><text x="470.4" y="356" text-anchor="middle">0.8</text><text x="570" y="356" text-anchor="middle">1.0</text></g><text x="321" y="388" text-anchor="middle">x</text><text x="16" y="190" text-anchor="middle" transform="rotate(-90 16 190)">y</text><line x1="72" y1="340" x2="570" y2="40" stroke="#999999" stroke-dasharray="4 4"/><g><polyline class="mark" fill="none" stroke="#4e79a7" stroke-width="2" points="72,340 321,115 570,40"/><circle class="mark" cx="72" cy="340" r="2.5" fill="#4e79a7"><title>a&lt;b (0, 0)</title></circle><circle class="mark" cx="321" cy="115" r="2.5" fill="#4e79a7"><title>a&lt;b (0.5, 0.75)</title></circle><circle class="mark" cx="570" cy="40" r="2.5" fill="#4e79a7"><title>a&lt;b (1, 1)</title></circle></g><g font-size="11"><line x1="586" x2="602" y1="46" y2="46" stroke="#4e79a7" stroke-width="2"/><text x="608" y="50">a&lt;b</text><line x1="586" x2="602" y1="64" y2="64" stroke="#999999" stroke-width="2" stroke-dasharray="4 4"/><text x="608" y="68">y = x</text></g></svg>"##);
}

#[test]
fn hostile_names_and_labels_are_escaped_everywhere() {
    let evil = "<script>alert(1)</script>\"><img src=x onerror=alert(1)>";
    let mut f = fig(FigureKind::Scatter, vec![Series { name: evil.into(), points: vec![(1.0, 2.0)], labels: vec![evil.into()], reference: false }], false);
    f.title = evil.into();
    f.x_label = evil.into();
    f.y_label = evil.into();
    for kind in [FigureKind::Line, FigureKind::Scatter, FigureKind::Bars] {
        f.kind = kind;
        let svg = figure_svg(&f);
        assert!(!svg.contains("<script") && !svg.contains("<img") && !svg.contains("\"><img"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"), "{svg}");
    }
}

#[test]
fn every_kind_draws_marks_of_its_own() {
    let line = figure_svg(&fig(
        FigureKind::Line,
        vec![Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)]), Series::new("b", vec![(0.0, 2.0), (1.0, 3.0)]).as_reference()],
        false,
    ));
    assert_eq!(count(&line, "<polyline class=\"mark\""), 2);
    assert!(line.contains("stroke-dasharray=\"6 4\""), "reference line is dashed");
    let scatter = figure_svg(&fig(
        FigureKind::Scatter,
        vec![Series { name: "m".into(), points: vec![(0.1, 3.0), (0.4, 5.0)], labels: vec!["model-a".into(), String::new()], reference: false }],
        false,
    ));
    assert_eq!(count(&scatter, "<circle class=\"mark\""), 2);
    assert_eq!(count(&scatter, ">model-a</text>"), 1, "only non-empty labels are drawn");
    let bars = figure_svg(&fig(
        FigureKind::Bars,
        vec![
            Series::labelled("acc", vec![("t1".into(), 0.5), ("t2".into(), -0.25)]),
            Series::labelled("acc2", vec![("t2".into(), 0.1)]),
            Series::labelled("random", vec![("t1".into(), 0.25), ("t2".into(), 0.1)]).as_reference(),
        ],
        false,
    ));
    assert_eq!(count(&bars, "<rect class=\"mark\""), 3);
    assert_eq!(count(&bars, "<path class=\"mark\""), 2);
    assert!(!bars.contains("height=\"-"), "negative bars have positive height: {bars}");
    assert!(bars.contains(">t1</text>") && bars.contains(">t2</text>"));
}

#[test]
fn empty_and_non_finite_series_draw_no_marks_but_say_so() {
    let svg = figure_svg(&fig(FigureKind::Line, vec![Series::new("a", vec![(f64::NAN, 1.0)])], false));
    assert!(!svg.contains("class=\"mark\""));
    assert!(svg.contains(">no data</text>"));
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    let svg = figure_svg(&fig(FigureKind::Bars, Vec::new(), false));
    assert!(svg.contains(">no data</text>"));
}

#[test]
fn long_series_are_thinned_but_csv_keeps_every_point() {
    let points: Vec<(f64, f64)> = (0..10_000).map(|i| (f64::from(i), f64::from(i % 7))).collect();
    let f = fig(FigureKind::Scatter, vec![Series::new("s", points)], false);
    let svg = figure_svg(&f);
    assert_eq!(count(&svg, "<circle class=\"mark\""), 2_000);
    assert!(svg.contains("1 in 5 points drawn"));
    assert_eq!(figure_csv(&f).lines().count(), 10_001);
    assert_eq!(svg, figure_svg(&f), "deterministic");
}

#[test]
fn csv_has_full_precision_and_quotes() {
    let f = fig(FigureKind::Bars, vec![Series::labelled("a,\"b\"", vec![("t\n1".into(), 1.0 / 3.0)])], false);
    insta::assert_snapshot!(figure_csv(&f), @r#"
    series,x,y,label
    "a,""b""",0,0.3333333333333333,"t
    1"
    "#);
}

#[test]
fn file_stems_are_safe() {
    assert_eq!(figure_file_stem("eleusis/calibration curve"), "eleusis-calibration-curve");
    assert_eq!(figure_file_stem("../x"), "---x");
    assert_eq!(figure_file_stem(""), "figure");
}
