//! The query input and function output values shared by [`super::function`] (evaluation) and
//! [`super::parse`] (parsing and validation), with their rendering as the model sees them (§4.7)
//! and their JSON form.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One query input: an integer, a tuple of integers or a string (JSON: number, array, string).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Input {
    /// A single integer.
    Int(i64),
    /// A tuple of integers (arity 2, 3 or 6).
    Tuple(Vec<i64>),
    /// A string.
    Str(String),
}

/// One function value: an integer (classes included) or a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Output {
    /// Integer or class label.
    Int(i128),
    /// String result (`add_k_to_kth`, `caesar_cipher`).
    Str(String),
}

/// Writes `s` as a Python string literal in single quotes (the model-facing rendering).
fn write_py_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("'")?;
    for ch in s.chars() {
        match ch {
            '\'' => f.write_str("\\'")?,
            '\\' => f.write_str("\\\\")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("'")
}

/// Python-literal rendering (§4.7): `5`, `(3, 4, 5)`, `'jav'`.
impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Int(x) => write!(f, "{x}"),
            Input::Tuple(xs) => {
                f.write_str("(")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(")")
            }
            Input::Str(s) => write_py_str(f, s),
        }
    }
}

/// Python-literal rendering (§4.7): integers in decimal, strings in single quotes.
impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Int(x) => write!(f, "{x}"),
            Output::Str(s) => write_py_str(f, s),
        }
    }
}

impl Serialize for Input {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Input::Int(x) => serializer.serialize_i64(*x),
            Input::Tuple(xs) => xs.serialize(serializer),
            Input::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Number(n) => n.as_i64().map(Input::Int).ok_or_else(|| serde::de::Error::custom("input integer out of i64 range")),
            serde_json::Value::String(s) => Ok(Input::Str(s)),
            serde_json::Value::Array(items) => items
                .iter()
                .map(|v| v.as_i64().ok_or_else(|| serde::de::Error::custom("non-integer in tuple")))
                .collect::<Result<Vec<_>, _>>()
                .map(Input::Tuple),
            other => Err(serde::de::Error::custom(format!("not an input: {other}"))),
        }
    }
}

impl Serialize for Output {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Output::Int(x) => match i64::try_from(*x) {
                Ok(v) => serializer.serialize_i64(v),
                Err(_) => serializer.serialize_i128(*x),
            },
            Output::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Output {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Number(n) => {
                n.as_i64().map(|v| Output::Int(i128::from(v))).ok_or_else(|| serde::de::Error::custom("output integer out of i64 range"))
            }
            serde_json::Value::String(s) => Ok(Output::Str(s)),
            other => Err(serde::de::Error::custom(format!("not an output: {other}"))),
        }
    }
}
