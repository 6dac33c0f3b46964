//! Reading a task's rows from JSONL, CSV or Parquet, streamed one row at a time, with every
//! problem located (`file:line` for text formats, the row index for Parquet) so a bad file
//! stops `validate` before any call.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The longest line (JSONL) or record (CSV) accepted: a longer one is almost always a
/// broken file, and reading it whole would hold it in memory.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// The largest dataset file read: every row is held in memory, so a bigger one (or a sparse
/// file, or a wrong path to a disk image) is refused before a byte is read.
pub const MAX_DATASET_BYTES: u64 = 4 << 30;

/// Opens `path` for reading when it is a regular file of at most `max` bytes. A device (the
/// zero device never ends), a FIFO (blocks for ever) or a folder is refused from its metadata
/// before it is opened, and once more from the open file in case it was swapped; the open
/// itself never blocks. The error is what to say after the path.
pub fn open_regular(path: &Path, max: u64) -> Result<std::fs::File, String> {
    fn check(meta: &std::fs::Metadata, max: u64) -> Result<(), String> {
        if meta.is_dir() {
            return Err("is a folder, not a file".into());
        }
        if !meta.is_file() {
            return Err("is not a regular file (a device, FIFO or socket cannot be read as one)".into());
        }
        if meta.len() > max {
            return Err(format!("is {} bytes, more than the {max} bytes such a file may have", meta.len()));
        }
        Ok(())
    }
    let cannot = |e: std::io::Error| format!("cannot read: {}", e.kind());
    check(&std::fs::metadata(path).map_err(cannot)?, max)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO swapped in after the check must not block the open.
    crate::platform::open_nonblocking(&mut options);
    let file = options.open(path).map_err(cannot)?;
    check(&file.metadata().map_err(cannot)?, max)?;
    Ok(file)
}

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
pub fn read_raw_rows(path: &Path, each: impl FnMut(RawRow) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    read_raw_rows_with(path, None, each)
}

/// [`read_raw_rows`] where the Parquet column `image` holds image bytes: its binary cells
/// are read as `data:` URLs instead of text.
pub fn read_raw_rows_with(path: &Path, image: Option<&str>, mut each: impl FnMut(RawRow) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    let format = Format::of(path)?;
    let file = open_regular(path, MAX_DATASET_BYTES).map_err(|m| DatasetError::file(path, m))?;
    match format {
        Format::Jsonl => read_jsonl(path, BufReader::new(file), &mut each),
        Format::Csv => read_csv(path, BufReader::new(file), &mut |row| each(RawRow::Parsed(row))),
        Format::Parquet => super::parquet::read_parquet(
            file,
            image,
            |row, message| match row {
                None => DatasetError::file(path, format!("not a readable Parquet file: {message}")),
                Some(index) => DatasetError::at(path, Place::Row(index), message),
            },
            &mut |index, fields| each(RawRow::Parsed(Row { place: Place::Row(index), fields })),
        ),
    }
}

/// Reads one line (without its `\n`/`\r\n`, or with `cr` its lone `\r` too, as old
/// spreadsheet exports end lines) into `buf`; `Ok(None)` at the end of the input,
/// `Ok(Some(false))` for a line longer than [`MAX_LINE_BYTES`] (skipped to its end).
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>, cr: bool) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut any = false;
    let mut too_long = false;
    let mut ended_by_cr = false;
    loop {
        let available = r.fill_buf()?;
        if available.is_empty() {
            break;
        }
        any = true;
        let end = available.iter().position(|b| *b == b'\n' || (cr && *b == b'\r'));
        ended_by_cr = end.is_some_and(|i| available[i] == b'\r');
        let (chunk, done) = match end {
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
    if ended_by_cr {
        // `\r\n`: the `\n` ends this line, not an empty one after it.
        if r.fill_buf()?.first() == Some(&b'\n') {
            r.consume(1);
        }
    } else if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(!too_long))
}

/// `bytes` without a leading UTF-8 byte-order mark, which Windows editors and Excel write at
/// the start of a file.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
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
    while let Some(ok) = next_line(&mut r, &mut buf, false).map_err(io)? {
        line += 1;
        if !ok {
            return Err(too_long(path, line));
        }
        let text = utf8(path, line, if line == 1 { without_bom(&buf) } else { &buf })?;
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
            let Some(ok) = next_line(&mut self.reader, &mut self.buf, true).map_err(io)? else {
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
            let text = utf8(path, self.line, if self.line == 1 { without_bom(&self.buf) } else { &self.buf })?;
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
    let Some((_, header)) = records.next(path)? else { return Ok(()) };
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
    fn a_leading_bom_and_cr_only_lines_are_read() {
        let r = rows("d.jsonl", b"\xef\xbb\xbf{\"input\": \"a\"}\n{\"input\": \"b\"}\n").unwrap();
        assert_eq!((r.len(), r[0].fields["input"].as_str()), (2, Some("a")));
        let e = rows("d.jsonl", b"{\"input\": \"a\"}\n\xef\xbb\xbf{\"input\": \"b\"}\n").unwrap_err();
        assert_eq!(e.place, Some(Place::Line(2)), "a BOM is a mark at the start of a file only");
        let r = rows("d.csv", b"\xef\xbb\xbf\"input\",target\ra,1\r\"b\rc\",2\rd,3").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].fields["input"], "a");
        assert_eq!((r[1].fields["input"].as_str(), r[1].place), (Some("b\nc"), Place::Line(3)));
        assert_eq!((r[2].fields["target"].as_str(), r[2].place), (Some("3"), Place::Line(5)));
        let r = rows("d.csv", b"input,target\r\na,1\r\n\r\nb,2\r\n").unwrap();
        assert_eq!((r.len(), r[1].place), (2, Place::Line(4)), "CRLF still ends one line, not two");
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_opened() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_regular(dir.path(), 10).unwrap_err();
        assert!(e.contains("folder"), "{e}");
        let small = dir.path().join("d.jsonl");
        std::fs::write(&small, b"{}\n").unwrap();
        assert!(open_regular(&small, 10).is_ok());
        assert!(open_regular(&small, 2).unwrap_err().contains("more than the 2 bytes"));
        #[cfg(unix)]
        {
            let e = open_regular(Path::new("/dev/zero"), MAX_DATASET_BYTES).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
            let fifo = dir.path().join("f.jsonl");
            crate::platform::make_fifo(&fifo).unwrap();
            let e = read_rows(&fifo, |_| Ok(())).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
    }

    #[test]
    fn unknown_extensions_are_refused() {
        assert!(rows("d.txt", b"").unwrap_err().message.contains("unknown dataset format"));
    }
}
