//! Parquet rows through polars' reader: the one format that needs a columnar decoder, and
//! polars is already compiled in (no `arrow`/`parquet` crate is in the graph). Only this
//! file of `envs/` touches polars; values become JSON as the text formats give them.

use polars::prelude::{AnyValue, ParquetReader, SerReader};
use serde_json::{Map, Value};

/// Reads the rows of a Parquet file, one JSON object per row (with its 0-based index), in
/// file order; `failed` turns a file (`None`) or row failure into the caller's error.
pub(super) fn read_parquet<E>(
    file: std::fs::File,
    image: Option<&str>,
    failed: impl Fn(Option<u64>, String) -> E,
    each: &mut dyn FnMut(u64, Map<String, Value>) -> Result<(), E>,
) -> Result<(), E> {
    let frame = ParquetReader::new(file).finish().map_err(|e| failed(None, e.to_string()))?;
    let columns = frame.columns();
    for i in 0..frame.height() {
        let mut fields = Map::new();
        for column in columns {
            let value = column.get(i).map_err(|e| failed(Some(i as u64), e.to_string()))?;
            let value = match image_cell(&value) {
                Some(url) if image == Some(column.name().as_str()) => url,
                _ => json(&value).map_err(|m| failed(Some(i as u64), format!("column `{}`: {m}", column.name())))?,
            };
            if !value.is_null() {
                fields.insert(column.name().to_string(), value);
            }
        }
        each(i as u64, fields)?;
    }
    Ok(())
}

/// A cell of the image column as the image's source: a binary cell's bytes as a `data:` URL
/// (its type is told from its bytes when the image is loaded), or the Hub's `Image` feature
/// (a struct of `bytes` and `path`): its bytes, else its path (relative to the dataset, as a
/// text cell's), else no image (`null`). `None`: not an image cell (the caller says so).
fn image_cell(v: &AnyValue<'_>) -> Option<Value> {
    match v {
        AnyValue::Binary(bytes) => Some(data_url(bytes)),
        AnyValue::BinaryOwned(bytes) => Some(data_url(bytes)),
        AnyValue::Struct(_, _, fields) => hub_image(fields.iter().map(|f| f.name().as_str()).zip(v._iter_struct_av())),
        AnyValue::StructOwned(payload) => hub_image(payload.1.iter().map(|f| f.name().as_str()).zip(payload.0.iter().cloned())),
        _ => None,
    }
}

fn data_url(bytes: &[u8]) -> Value {
    use base64::Engine as _;
    Value::String(format!("data:application/octet-stream;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes)))
}

/// The Hub's `Image` struct: `None` when it has neither a `bytes` nor a `path` field.
fn hub_image<'a>(fields: impl Iterator<Item = (&'a str, AnyValue<'a>)>) -> Option<Value> {
    let (mut known, mut bytes, mut path) = (false, None, None);
    for (name, value) in fields {
        match (name, value) {
            ("bytes", AnyValue::Binary(b)) => bytes = Some(b.to_vec()),
            ("bytes", AnyValue::BinaryOwned(b)) => bytes = Some(b),
            ("path", AnyValue::String(s)) => path = Some(s.to_owned()),
            ("path", AnyValue::StringOwned(s)) => path = Some(s.to_string()),
            ("bytes" | "path", _) => {}
            _ => continue,
        }
        known = true;
    }
    known.then(|| match (bytes, path) {
        (Some(b), _) if !b.is_empty() => data_url(&b),
        (_, Some(p)) if !p.is_empty() => Value::String(p),
        _ => Value::Null,
    })
}

/// A cell as JSON. Binary cells (Parquet `BYTE_ARRAY` without a string type, as some
/// writers store text) are their UTF-8 text when they are valid UTF-8, and refused otherwise:
/// never their debug form (`b"\xff\xfe"`) sent to a model as if it were the question.
fn json(v: &AnyValue<'_>) -> Result<Value, String> {
    let binary = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(|s| Value::String(s.to_owned()))
            .map_err(|e| format!("a binary value that is not UTF-8 text (byte {} of {}): store text as a string column", e.valid_up_to() + 1, bytes.len()))
    };
    Ok(match v {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => Value::Bool(*b),
        AnyValue::String(s) => Value::String((*s).to_owned()),
        AnyValue::StringOwned(s) => Value::String(s.to_string()),
        AnyValue::Int8(n) => Value::from(*n),
        AnyValue::Int16(n) => Value::from(*n),
        AnyValue::Int32(n) => Value::from(*n),
        AnyValue::Int64(n) => Value::from(*n),
        AnyValue::UInt8(n) => Value::from(*n),
        AnyValue::UInt16(n) => Value::from(*n),
        AnyValue::UInt32(n) => Value::from(*n),
        AnyValue::UInt64(n) => Value::from(*n),
        AnyValue::Float32(x) => serde_json::Number::from_f64(f64::from(*x)).map_or(Value::Null, Value::Number),
        AnyValue::Float64(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        AnyValue::Binary(bytes) => binary(bytes)?,
        AnyValue::BinaryOwned(bytes) => binary(bytes)?,
        AnyValue::List(series) => Value::Array(series.iter().map(|v| json(&v)).collect::<Result<_, _>>()?),
        other => Value::String(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::{Column, DataFrame, ParquetWriter};

    #[test]
    fn parquet_rows_become_json_with_their_row_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.parquet");
        let mut frame = DataFrame::new_infer_height(vec![
            Column::new("input".into(), ["2+2?", "3+3?"]),
            Column::new("target".into(), ["4", "6"]),
            Column::new("id".into(), [7i64, 8]),
            Column::new("hint".into(), [Some("even"), None]),
        ])
        .unwrap();
        ParquetWriter::new(std::fs::File::create(&path).unwrap()).finish(&mut frame).unwrap();
        let failed = |row: Option<u64>, message: String| format!("{row:?}: {message}");
        let mut rows = Vec::new();
        read_parquet(std::fs::File::open(&path).unwrap(), None, failed, &mut |index, fields| {
            rows.push((index, fields));
            Ok(())
        })
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].0, 1);
        assert_eq!(rows[0].1["id"], 7);
        assert_eq!(rows[0].1["hint"], "even");
        assert!(!rows[1].1.contains_key("hint"), "a null cell is absent");
        let bad = dir.path().join("bad.parquet");
        std::fs::write(&bad, b"not parquet").unwrap();
        let e = read_parquet(std::fs::File::open(&bad).unwrap(), None, failed, &mut |_, _| Ok(())).unwrap_err();
        assert!(e.starts_with("None: "), "a file failure, not a row's: {e}");
        let located = crate::envs::qa::dataset::read_rows(&bad, |_| Ok(())).unwrap_err();
        assert!(located.to_string().contains("not a readable Parquet file"), "{located}");
    }

    #[test]
    fn binary_cells_are_their_utf8_text_or_refused_at_their_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.parquet");
        let cells: [&[u8]; 2] = [b"caf\xc3\xa9?", b"\xff\xfe"];
        let mut frame = DataFrame::new_infer_height(vec![Column::new("input".into(), cells), Column::new("target".into(), ["a", "b"])]).unwrap();
        ParquetWriter::new(std::fs::File::create(&path).unwrap()).finish(&mut frame).unwrap();
        let mut rows = Vec::new();
        let e = crate::envs::qa::dataset::read_rows(&path, |r| {
            rows.push(r);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(rows[0].fields["input"], "café?");
        assert!(
            e.to_string().ends_with("b.parquet:row 1: column `input`: a binary value that is not UTF-8 text (byte 1 of 2): store text as a string column"),
            "{e}"
        );
    }
}
