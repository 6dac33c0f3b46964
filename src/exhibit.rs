//! Report exhibits as plain data: the extra tables ([`Section`]) and charts ([`Figure`]) a
//! benchmark contributes, and the summary tables it may read ([`TableView`]). Benchmarks
//! (in `envs`) build them without knowing how the report renders; `report` draws them.
//! A leaf module: it imports nothing of evalgrid's, so every layer may use it.

/// What kind of chart a [`Figure`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FigureKind {
    /// Polylines through each series' points, in the given order.
    Line,
    /// One dot per point, labelled with the point's label when non-empty.
    Scatter,
    /// Grouped bars: categories are the point labels (or formatted x).
    Bars,
}

/// One named series of a figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// `(x, y)` points; non-finite points are skipped when drawing.
    pub points: Vec<(f64, f64)>,
    /// Per-point labels (bar categories, scatter annotations); may be empty.
    pub labels: Vec<String>,
    /// A reference (baseline) series: dashed line, or a marker across each
    /// bar group instead of a bar.
    pub reference: bool,
}

impl Series {
    /// A plain series of points without labels.
    #[must_use]
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.to_owned(), points, labels: Vec::new(), reference: false }
    }

    /// A series of labelled values (bar categories), x = position.
    #[must_use]
    pub fn labelled(name: &str, values: Vec<(String, f64)>) -> Self {
        let (labels, ys): (Vec<String>, Vec<f64>) = values.into_iter().unzip();
        let points = ys.into_iter().enumerate().map(|(i, y)| (i as f64, y)).collect();
        Self { name: name.to_owned(), points, labels, reference: false }
    }

    /// The same series marked as a reference (baseline).
    #[must_use]
    pub fn as_reference(mut self) -> Self {
        self.reference = true;
        self
    }

    /// The label of point `i` (empty when unlabelled).
    #[must_use]
    pub fn label(&self, i: usize) -> &str {
        self.labels.get(i).map_or("", String::as_str)
    }
}

/// A chart: the report draws it inline and writes it as SVG and CSV files.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Stable identifier (anchor and file stem of its `.svg`/`.csv` files).
    pub id: String,
    /// Title drawn above the plot.
    pub title: String,
    /// Chart kind.
    pub kind: FigureKind,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Series, drawn and listed in the legend in this order.
    pub series: Vec<Series>,
    /// Draw the `y = x` diagonal (calibration curves).
    pub diagonal: bool,
}

/// An extra table a benchmark contributes (e.g. Eleusis' spec §5 metrics).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Column names after the row label.
    pub columns: Vec<String>,
    /// Rows: label and values.
    pub rows: Vec<(String, Vec<Option<f64>>)>,
}

/// One summary table of a suite as plain numbers: what a benchmark's figures read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableView {
    /// Suite (table) name, e.g. `bbeh` or `bbeh-mini`.
    pub suite: String,
    /// Metric column names, in order.
    pub columns: Vec<String>,
    /// One row per model.
    pub by_model: Vec<RowView>,
    /// One row per model × task.
    pub by_task: Vec<RowView>,
}

/// One row of a [`TableView`]; every value is empty when the row is incomplete.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowView {
    /// Model id.
    pub model: String,
    /// Task id (per-task rows only).
    pub task: Option<String>,
    /// Values by column, in column order.
    pub values: Vec<Option<f64>>,
}

impl TableView {
    /// Index of the column called `name`.
    #[must_use]
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// The value of column `name` in `row`.
    #[must_use]
    pub fn value(&self, row: &RowView, name: &str) -> Option<f64> {
        row.values.get(self.column(name)?).copied().flatten()
    }
}

/// One CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, a quote
/// or a line break; as is otherwise. Every CSV evalgrid writes goes through it.
#[must_use]
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

/// First characters that make a spreadsheet read a cell as a formula (OWASP's CSV
/// injection list).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

fn formula_like(s: &str) -> bool {
    s.trim_start_matches('\'').starts_with(FORMULA_STARTS)
}

/// One CSV text cell, safe to open in a spreadsheet: a value starting with `=`, `+`, `-`,
/// `@`, a tab or a carriage return (after any leading `'`) is quoted with a `'` in front,
/// as OWASP recommends, so no spreadsheet runs it as a formula; [`csv_text_value`] reads
/// the original back. Numbers are written as numbers, never through this.
#[must_use]
pub fn csv_text(s: &str) -> String {
    if formula_like(s) { format!("\"'{}\"", s.replace('"', "\"\"")) } else { csv_field(s) }
}

/// The value [`csv_text`] wrote as `field` (already unquoted): its leading `'` removed
/// where [`csv_text`] added one.
#[must_use]
pub fn csv_text_value(field: &str) -> &str {
    match field.strip_prefix('\'') {
        Some(rest) if formula_like(field) => rest,
        _ => field,
    }
}

/// The records of a CSV text as [`csv_field`] writes them (RFC 4180: a quoted field may
/// hold commas, doubled quotes and line breaks), each with the line it starts on; blank
/// lines are skipped, `\r\n` ends a record as `\n` does.
///
/// # Errors
/// A quote left open at the end of the text, naming the line it opened on.
pub fn csv_records(text: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let mut records = Vec::new();
    let (mut fields, mut cur, mut quoted, mut line, mut start, mut opened) = (Vec::new(), String::new(), false, 1usize, 1usize, 0usize);
    let mut any = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) => {
                quoted = true;
                opened = line;
                any = true;
            }
            (',', false) => {
                fields.push(std::mem::take(&mut cur));
                any = true;
            }
            ('\r', false) if chars.peek() == Some(&'\n') => {}
            ('\n', false) => {
                if any || !cur.is_empty() {
                    fields.push(std::mem::take(&mut cur));
                    records.push((start, std::mem::take(&mut fields)));
                }
                any = false;
                line += 1;
                start = line;
            }
            _ => {
                if c == '\n' {
                    line += 1;
                }
                cur.push(c);
            }
        }
    }
    if quoted {
        return Err(format!("line {opened}: a quoted field is not closed"));
    }
    if any || !cur.is_empty() {
        fields.push(cur);
        records.push((start, fields));
    }
    Ok(records)
}

/// The fields of one CSV line as [`csv_field`] writes them (RFC 4180 quoting, no newline
/// inside a field): how `items.csv` is read back (`evalgrid diff --against`).
#[must_use]
pub fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cells_that_look_like_formulas_are_guarded_and_read_back() {
        for value in ["=HYPERLINK(\"x\")", "+1", "-0.5", "@SUM(A1)", "\tx", "'=x", "''-1", "'plain", "plain", "a,b", "", "-"] {
            let written = csv_text(value);
            let records = csv_records(&format!("{written},x\n")).unwrap();
            assert_eq!(records.len(), 1, "{written}");
            assert_eq!(csv_text_value(&records[0].1[0]), value, "{written}");
            if formula_like(value) {
                assert!(written.starts_with("\"'"), "{value} → {written}");
            }
        }
        assert_eq!(csv_text("=1+1"), "\"'=1+1\"");
        assert_eq!(csv_text("Paris"), "Paris");
    }

    #[test]
    fn records_follow_rfc_4180_across_lines() {
        let text = "a,b\r\n\"x\ny\",\"q\"\"\"\n\n,\n";
        let records = csv_records(text).unwrap();
        assert_eq!(records, vec![(1, vec!["a".into(), "b".into()]), (2, vec!["x\ny".into(), "q\"".into()]), (5, vec![String::new(), String::new()])]);
        assert_eq!(csv_records("a\n\"open\n").unwrap_err(), "line 2: a quoted field is not closed");
    }
}
