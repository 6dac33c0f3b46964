//! Reading a task's rows from JSONL, CSV or Parquet, streamed one row at a time, with every
//! problem located (`file:line` for text formats, the row index for Parquet) so a bad file
//! stops `validate` before any call.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The longest line (JSONL) or record (CSV) accepted: a longer one is almost always a
/// broken file, and reading it whole would hold it in memory.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Where a row sits in its file, as the user finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Place {
    /// 1-based line of a JSONL row or the first line of a CSV record.
    Line(u64),
    /// 0-based row index of a Parquet row.
    Row(u64),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Line(n) => write!(f, "{n}"),
            Self::Row(i) => write!(f, "row {i}"),
        }
    }
}

/// One row: its place and its columns (CSV cells are strings; an empty cell is absent).
#[derive(Clone, Debug)]
pub struct Row {
    /// Where it is in the file.
    pub place: Place,
    /// Column name → value.
    pub fields: Map<String, Value>,
}

/// Why a dataset cannot be read; `place` is `None` for a problem with the file as a whole.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), place.map(|p| format!(":{p}")).unwrap_or_default())]
pub struct DatasetError {
    /// The file.
    pub path: PathBuf,
    /// The row, when the problem is one row's.
    pub place: Option<Place>,
    /// What is wrong.
    pub message: String,
}

impl DatasetError {
    /// A problem at `place` of `path`.
    pub fn at(path: &Path, place: Place, message: impl Into<String>) -> Self {
        Self { path: path.to_owned(), place: Some(place), message: message.into() }
    }

    /// A problem with the file as a whole.
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_owned(), place: None, message: message.into() }
    }
}

/// The file formats a dataset may have, told by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// A header line, then one record per row (RFC 4180 quoting).
    Csv,
    /// Apache Parquet.
    Parquet,
}

impl Format {
    /// The format of `path` by its extension.
    pub fn of(path: &Path) -> Result<Self, DatasetError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("jsonl" | "ndjson") => Ok(Self::Jsonl),
            Some("csv") => Ok(Self::Csv),
            Some("parquet") => Ok(Self::Parquet),
            _ => Err(DatasetError::file(path, "unknown dataset format: use a `.jsonl`, `.csv` or `.parquet` file")),
        }
    }
}

/// A row as read: a JSONL line is parsed later, by [`RawRow::parse`], so that a large file's
/// lines can be parsed on all cores while the reader goes on.
#[derive(Debug)]
pub enum RawRow {
    /// A JSONL line (valid UTF-8, not blank), not yet parsed.
    Line {
        /// 1-based line number.
        line: u64,
        /// The line's text.
        text: String,
    },
    /// A CSV or Parquet row, already split into columns.
    Parsed(Row),
}

impl RawRow {
    /// The row's columns, or where and why its line is not a JSON object.
    pub fn parse(self, path: &Path) -> Result<Row, DatasetError> {
        match self {
            Self::Parsed(row) => Ok(row),
            Self::Line { line, text } => {
                let value: Value = serde_json::from_str(&text).map_err(|e| DatasetError::at(path, Place::Line(line), format!("not a JSON object: {e}")))?;
                let Value::Object(fields) = value else {
                    return Err(DatasetError::at(path, Place::Line(line), "not a JSON object"));
                };
                Ok(Row { place: Place::Line(line), fields })
            }
        }
    }
}

/// Reads every row of `path`, handing each to `each` as it is read (rows are never all held
/// as raw text); stops at the first problem.
pub fn read_rows(path: &Path, mut each: impl FnMut(Row) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    read_raw_rows(path, |raw| each(raw.parse(path)?))
}

/// [`read_rows`] without parsing JSONL lines: the caller parses them with [`RawRow::parse`].
pub fn read_raw_rows(path: &Path, mut each: impl FnMut(RawRow) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    let format = Format::of(path)?;
    let file = std::fs::File::open(path).map_err(|e| DatasetError::file(path, format!("cannot read: {}", e.kind())))?;
    match format {
        Format::Jsonl => read_jsonl(path, BufReader::new(file), &mut each),
        Format::Csv => read_csv(path, BufReader::new(file), &mut |row| each(RawRow::Parsed(row))),
        Format::Parquet => super::parquet::read_parquet(
            file,
            |row, message| match row {
                None => DatasetError::file(path, format!("not a readable Parquet file: {message}")),
                Some(index) => DatasetError::at(path, Place::Row(index), message),
            },
            &mut |index, fields| each(RawRow::Parsed(Row { place: Place::Row(index), fields })),
        ),
    }
}

/// Reads one line (without its `\n`/`\r\n`) into `buf`; `Ok(None)` at the end of the
/// input, `Ok(Some(false))` for a line longer than [`MAX_LINE_BYTES`] (skipped to its end).
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut any = false;
    let mut too_long = false;
    loop {
        let available = r.fill_buf()?;
        if available.is_empty() {
            break;
        }
        any = true;
        let (chunk, done) = match memchr(available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        r.consume(used);
        if done.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(!too_long))
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

fn too_long(path: &Path, line: u64) -> DatasetError {
    DatasetError::at(path, Place::Line(line), format!("line is longer than {} MiB", MAX_LINE_BYTES >> 20))
}

fn utf8<'a>(path: &Path, line: u64, bytes: &'a [u8]) -> Result<&'a str, DatasetError> {
    std::str::from_utf8(bytes).map_err(|e| DatasetError::at(path, Place::Line(line), format!("not valid UTF-8 (byte {} of the line)", e.valid_up_to() + 1)))
}

fn read_jsonl(path: &Path, mut r: impl BufRead, each: &mut dyn FnMut(RawRow) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    let mut buf = Vec::new();
    let mut line = 0u64;
    let io = |e: std::io::Error| DatasetError::file(path, format!("cannot read: {}", e.kind()));
    while let Some(ok) = next_line(&mut r, &mut buf).map_err(io)? {
        line += 1;
        if !ok {
            return Err(too_long(path, line));
        }
        let text = utf8(path, line, &buf)?;
        if text.trim().is_empty() {
            continue;
        }
        each(RawRow::Line { line, text: text.to_owned() })?;
    }
    Ok(())
}

/// Splits CSV records (RFC 4180: `"` quotes, `""` inside quotes, newlines inside quotes).
struct CsvRecords<R> {
    reader: R,
    line: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> CsvRecords<R> {
    /// The next record's first line and fields; `None` at the end.
    fn next(&mut self, path: &Path) -> Result<Option<(u64, Vec<String>)>, DatasetError> {
        let io = |e: std::io::Error| DatasetError::file(path, format!("cannot read: {}", e.kind()));
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut start = 0;
        let mut size = 0usize;
        loop {
            let Some(ok) = next_line(&mut self.reader, &mut self.buf).map_err(io)? else {
                if quoted {
                    return Err(DatasetError::at(path, Place::Line(start), "quoted field is never closed"));
                }
                return Ok(None);
            };
            self.line += 1;
            if !quoted {
                start = self.line;
            }
            if !ok {
                return Err(too_long(path, self.line));
            }
            size += self.buf.len();
            if size > MAX_LINE_BYTES {
                return Err(DatasetError::at(path, Place::Line(start), format!("record is longer than {} MiB", MAX_LINE_BYTES >> 20)));
            }
            let text = utf8(path, self.line, &self.buf)?;
            if !quoted && text.is_empty() {
                continue;
            }
            let mut chars = text.chars().peekable();
            while let Some(c) = chars.next() {
                match (quoted, c) {
                    (true, '"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    (true, '"') => quoted = false,
                    (true, c) => field.push(c),
                    (false, '"') if field.is_empty() => quoted = true,
                    (false, ',') => fields.push(std::mem::take(&mut field)),
                    (false, c) => field.push(c),
                }
            }
            if quoted {
                field.push('\n');
                continue;
            }
            fields.push(field);
            return Ok(Some((start, fields)));
        }
    }
}

fn read_csv(path: &Path, reader: impl BufRead, each: &mut dyn FnMut(Row) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    let mut records = CsvRecords { reader, line: 0, buf: Vec::new() };
    let Some((_, mut header)) = records.next(path)? else { return Ok(()) };
    if let Some(first) = header.first_mut()
        && let Some(rest) = first.strip_prefix('\u{feff}')
    {
        *first = rest.to_owned();
    }
    for (i, name) in header.iter().enumerate() {
        if name.is_empty() {
            return Err(DatasetError::at(path, Place::Line(1), format!("column {} of the header has no name", i + 1)));
        }
        if header[..i].contains(name) {
            return Err(DatasetError::at(path, Place::Line(1), format!("column `{name}` appears twice in the header")));
        }
    }
    while let Some((line, cells)) = records.next(path)? {
        if cells.len() != header.len() {
            return Err(DatasetError::at(path, Place::Line(line), format!("{} fields, but the header has {}", cells.len(), header.len())));
        }
        let fields = header.iter().zip(cells).filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), Value::String(v))).collect();
        each(Row { place: Place::Line(line), fields })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(name: &str, bytes: &[u8]) -> Result<Vec<Row>, DatasetError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut out = Vec::new();
        read_rows(&path, |r| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn jsonl_rows_keep_their_lines_and_skip_blank_ones() {
        let r = rows("d.jsonl", b"{\"input\": \"a\"}\n\n{\"input\": \"b\"}\r\n").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].place, Place::Line(3));
        assert_eq!(r[1].fields["input"], "b");
    }

    #[test]
    fn bad_jsonl_is_located() {
        let e = rows("d.jsonl", b"{\"input\": \"a\"}\n[1]\n").unwrap_err();
        assert_eq!((e.place, e.message.as_str()), (Some(Place::Line(2)), "not a JSON object"));
        let e = rows("d.jsonl", b"{\"input\": \"a\"}\n{\"input\": \"\xff\"}\n").unwrap_err();
        assert!(e.to_string().ends_with("d.jsonl:2: not valid UTF-8 (byte 12 of the line)"), "{e}");
        let mut big = b"{\"input\": \"a\"}\n{\"input\": \"".to_vec();
        big.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        big.extend(b"\"}\n");
        let e = rows("d.jsonl", &big).unwrap_err();
        assert_eq!(e.place, Some(Place::Line(2)));
        assert!(e.message.contains("longer than"), "{e}");
    }

    #[test]
    fn csv_quotes_newlines_and_ragged_rows() {
        let r = rows("d.csv", b"input,target\n\"a, \"\"b\"\"\nc\",x\nd,\n").unwrap();
        assert_eq!(r[0].fields["input"], "a, \"b\"\nc");
        assert_eq!(r[1].place, Place::Line(4));
        assert!(!r[1].fields.contains_key("target"), "an empty cell is absent");
        let e = rows("d.csv", b"input,target\na,b\nc\n").unwrap_err();
        assert_eq!(e.to_string().rsplit_once(".csv:").unwrap().1, "3: 1 fields, but the header has 2");
        let e = rows("d.csv", b"input,target\n\"a,b\n").unwrap_err();
        assert_eq!(e.place, Some(Place::Line(2)));
    }

    #[test]
    fn unknown_extensions_are_refused() {
        assert!(rows("d.txt", b"").unwrap_err().message.contains("unknown dataset format"));
    }
}
