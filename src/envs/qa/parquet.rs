//! Parquet rows through polars' reader: the one format that needs a columnar decoder, and
//! polars is already compiled in (no `arrow`/`parquet` crate is in the graph). Only this
//! file of `envs/` touches polars; values become JSON as the text formats give them.

use std::path::Path;

use polars::prelude::{AnyValue, ParquetReader, SerReader};
use serde_json::{Map, Value};

use super::dataset::{DatasetError, Place, Row};

/// Reads the rows of a Parquet file, one JSON object per row, in file order.
pub(super) fn read_parquet(path: &Path, file: std::fs::File, each: &mut dyn FnMut(Row) -> Result<(), DatasetError>) -> Result<(), DatasetError> {
    let frame = ParquetReader::new(file).finish().map_err(|e| DatasetError::file(path, format!("not a readable Parquet file: {e}")))?;
    let columns = frame.columns();
    for i in 0..frame.height() {
        let mut fields = Map::new();
        for column in columns {
            let value = column.get(i).map_err(|e| DatasetError::at(path, Place::Row(i as u64), e.to_string()))?;
            let value = json(&value);
            if !value.is_null() {
                fields.insert(column.name().to_string(), value);
            }
        }
        each(Row { place: Place::Row(i as u64), fields })?;
    }
    Ok(())
}

fn json(v: &AnyValue<'_>) -> Value {
    match v {
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
        AnyValue::List(series) => Value::Array(series.iter().map(|v| json(&v)).collect()),
        other => Value::String(other.to_string()),
    }
}
