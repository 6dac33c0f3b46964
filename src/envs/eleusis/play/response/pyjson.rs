//! The Python behaviours the action parser must copy (spec §4.3): CPython 3.11 `json.loads`
//! (`NaN`/`Infinity`, last duplicate key wins, raw control characters rejected, unbounded
//! integers, the 4,300-digit int limit), `int(str)` (signs, underscores, any Unicode decimal
//! digit), `str.strip()` whitespace, and `str()`/`repr()` of parsed values for the prompt.

use std::collections::HashMap;
use std::fmt::Write as _;

/// CPython's `sys.int_info.default_max_str_digits` (3.11): longer digit strings raise.
const MAX_INT_DIGITS: usize = 4300;
/// Nesting limit standing in for CPython's recursion limit while decoding.
const MAX_DEPTH: usize = 900;

use crate::envs::pystr::decimal_value;
pub use crate::envs::pystr::{py_isspace, py_strip};

/// A Python `int`: machine-sized when possible, else its decimal digits (no leading zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PyInt {
    /// Fits in an `i64`.
    Small(i64),
    /// Does not fit: sign and decimal digits.
    Big {
        /// True for negative values.
        negative: bool,
        /// Decimal digits, most significant first, no leading zero.
        digits: String,
    },
}

impl PyInt {
    fn from_digits(negative: bool, digits: &str) -> PyInt {
        let trimmed = digits.trim_start_matches('0');
        let text = if negative { format!("-{trimmed}") } else { trimmed.to_owned() };
        if trimmed.is_empty() {
            return PyInt::Small(0);
        }
        match text.parse::<i64>() {
            Ok(v) => PyInt::Small(v),
            Err(_) => PyInt::Big { negative, digits: trimmed.to_owned() },
        }
    }

    /// The value clamped to `i64` (keeps the sign, so `>= 5` tests stay right).
    pub fn saturating_i64(&self) -> i64 {
        match self {
            PyInt::Small(v) => *v,
            PyInt::Big { negative: true, .. } => i64::MIN,
            PyInt::Big { .. } => i64::MAX,
        }
    }

    /// The value as a float (lossy for big values), as Python's `float(int)`.
    pub fn to_f64(&self) -> f64 {
        match self {
            // Exact up to 2^53; beyond that Python rounds the same way.
            PyInt::Small(v) => *v as f64,
            PyInt::Big { negative, digits } => {
                let f = digits.parse::<f64>().unwrap_or(f64::INFINITY);
                if *negative { -f } else { f }
            }
        }
    }
}

impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PyInt::Small(v) => write!(f, "{v}"),
            PyInt::Big { negative, digits } => {
                write!(f, "{}{digits}", if *negative { "-" } else { "" })
            }
        }
    }
}

/// Python's `int(s)` for a `str` in base 10; `None` where Python raises `ValueError`.
pub fn py_int(s: &str) -> Option<PyInt> {
    // CPython first maps non-ASCII whitespace to ' ' and decimal digits to ASCII digits.
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii() {
                c
            } else if py_isspace(c) {
                ' '
            } else if let Some(d) = decimal_value(c) {
                char::from(b'0' + d)
            } else {
                '?'
            }
        })
        .collect();
    let c_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r');
    let body = mapped.trim_matches(c_space);
    let (negative, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let mut digits = String::with_capacity(body.len());
    let mut prev_digit = false;
    for c in body.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            prev_digit = true;
        } else if c == '_' && prev_digit {
            prev_digit = false;
        } else {
            return None;
        }
    }
    if !prev_digit || digits.len() > MAX_INT_DIGITS {
        return None;
    }
    Some(PyInt::from_digits(negative, &digits))
}

/// A value decoded by Python's `json.loads`.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    /// `null` → `None`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer literal (unbounded).
    Int(PyInt),
    /// A float literal, `NaN`, `Infinity` or `-Infinity`.
    Float(f64),
    /// A string (lone `\uD800`-style surrogates become U+FFFD: Rust strings cannot hold them).
    Str(String),
    /// An array.
    List(Vec<PyValue>),
    /// An object: keys in first-insertion order, values from the last duplicate.
    Dict(Vec<(String, PyValue)>),
}

impl PyValue {
    /// Python truthiness (`bool(x)`): NaN is truthy, `"false"` is truthy.
    pub fn truthy(&self) -> bool {
        match self {
            PyValue::Null => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(i) => *i != PyInt::Small(0),
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(l) => !l.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
        }
    }

    /// `dict.get(key)` on an object (`None` for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Python's type name, as in `'list' object has no attribute 'get'`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::Null => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
        }
    }

    /// Python's `str(x)` (what an f-string prints). Non-printable detection in string
    /// reprs covers control and separator characters only (an approximation of
    /// `str.isprintable`).
    pub fn py_str(&self) -> String {
        match self {
            PyValue::Str(s) => s.clone(),
            other => other.py_repr(),
        }
    }

    /// Python's `repr(x)`.
    pub fn py_repr(&self) -> String {
        match self {
            PyValue::Null => "None".to_owned(),
            PyValue::Bool(true) => "True".to_owned(),
            PyValue::Bool(false) => "False".to_owned(),
            PyValue::Int(i) => i.to_string(),
            PyValue::Float(f) => float_repr(*f),
            PyValue::Str(s) => str_repr(s),
            PyValue::List(items) => {
                let inner: Vec<String> = items.iter().map(PyValue::py_repr).collect();
                format!("[{}]", inner.join(", "))
            }
            PyValue::Dict(items) => {
                let inner: Vec<String> = items.iter().map(|(k, v)| format!("{}: {}", str_repr(k), v.py_repr())).collect();
                format!("{{{}}}", inner.join(", "))
            }
        }
    }

    /// Lossy conversion for records: NaN/±Infinity become `null`, big integers floats.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            PyValue::Null => Value::Null,
            PyValue::Bool(b) => Value::Bool(*b),
            PyValue::Int(PyInt::Small(v)) => Value::from(*v),
            PyValue::Int(big) => Value::from(big.to_f64()),
            PyValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            PyValue::Str(s) => Value::String(s.clone()),
            PyValue::List(l) => Value::Array(l.iter().map(PyValue::to_json).collect()),
            PyValue::Dict(d) => Value::Object(d.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation for exponents
/// −4 ≤ e < 16 (with a trailing `.0` when integral), else `d.ddde±XX`.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let mut out = String::from(sign);
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            // exp + 1 integer digits, padded with zeros.
            let int_len = usize::try_from(exp + 1).unwrap_or(1);
            let (int_part, frac) = if digits.len() > int_len {
                (digits[..int_len].to_owned(), digits[int_len..].to_owned())
            } else {
                (format!("{digits:0<int_len$}"), String::new())
            };
            out.push_str(&int_part);
            out.push('.');
            out.push_str(if frac.is_empty() { "0" } else { &frac });
        }
        out
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.unsigned_abs())
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || (py_isspace(c) && c != ' ') || c == '\u{ad}' => {
                let cp = u32::from(c);
                // Writing to a String cannot fail.
                let _ = match cp {
                    0..=0xff => write!(out, "\\x{cp:02x}"),
                    0x100..=0xffff => write!(out, "\\u{cp:04x}"),
                    _ => write!(out, "\\U{cp:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// A `json.loads` failure (CPython's `JSONDecodeError` or the int-digits `ValueError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}: char {position}")]
pub struct PyJsonError {
    /// What was expected or wrong.
    pub message: String,
    /// Character (not byte) offset, as Python reports it.
    pub position: usize,
}

/// Python's `json.loads(text)` with the default decoder.
pub fn loads(text: &str) -> Result<PyValue, PyJsonError> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser { s: &chars, i: 0 };
    if chars.first() == Some(&'\u{feff}') {
        return Err(p.err("Unexpected UTF-8 BOM (decode using utf-8-sig)"));
    }
    p.ws();
    let value = p.value(0)?;
    p.ws();
    if p.i != chars.len() {
        return Err(p.err("Extra data"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, message: &str) -> PyJsonError {
        PyJsonError { message: message.to_owned(), position: self.i }
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &str) -> bool {
        let n = word.chars().count();
        let matches = self.s.len() >= self.i + n && word.chars().eq(self.s[self.i..self.i + n].iter().copied());
        if matches {
            self.i += n;
        }
        matches
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, PyJsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("maximum recursion depth exceeded while decoding"));
        }
        match self.peek() {
            Some('"') => {
                self.i += 1;
                self.string().map(PyValue::Str)
            }
            Some('{') => self.object(depth),
            Some('[') => self.array(depth),
            _ if self.literal("null") => Ok(PyValue::Null),
            _ if self.literal("true") => Ok(PyValue::Bool(true)),
            _ if self.literal("false") => Ok(PyValue::Bool(false)),
            _ if self.literal("NaN") => Ok(PyValue::Float(f64::NAN)),
            _ if self.literal("Infinity") => Ok(PyValue::Float(f64::INFINITY)),
            _ if self.literal("-Infinity") => Ok(PyValue::Float(f64::NEG_INFINITY)),
            _ => self.number(),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<PyValue, PyJsonError> {
        let start = self.i;
        if self.peek() == Some('-') {
            self.i += 1;
        }
        match self.peek() {
            Some('1'..='9') => {
                self.digits();
            }
            Some('0') => self.i += 1,
            _ => {
                self.i = start;
                return Err(self.err("Expecting value"));
            }
        }
        let mut is_float = false;
        if self.peek() == Some('.') && self.s.get(self.i + 1).is_some_and(char::is_ascii_digit) {
            self.i += 1;
            self.digits();
            is_float = true;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let e_start = self.i;
            self.i += 1;
            if matches!(self.peek(), Some('+' | '-')) {
                self.i += 1;
            }
            if self.digits() > 0 {
                is_float = true;
            } else {
                self.i = e_start;
            }
        }
        let text: String = self.s[start..self.i].iter().collect();
        if is_float {
            // Rust's parser is correctly rounded like CPython's; overflow gives ±inf.
            let f = text.parse::<f64>().map_err(|_| self.err("Expecting value"))?;
            return Ok(PyValue::Float(f));
        }
        let (negative, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text.as_str()),
        };
        if digits.len() > MAX_INT_DIGITS {
            return Err(self.err("Exceeds the limit (4300 digits) for integer string conversion"));
        }
        Ok(PyValue::Int(PyInt::from_digits(negative, digits)))
    }

    fn hex4(&mut self) -> Result<u32, PyJsonError> {
        let mut v = 0u32;
        for k in 0..4 {
            let d = self.s.get(self.i + k).and_then(|c| c.to_digit(16)).ok_or_else(|| self.err("Invalid \\uXXXX escape"))?;
            v = v * 16 + d;
        }
        self.i += 4;
        Ok(v)
    }

    /// Decodes a string body; `self.i` is just after the opening quote.
    fn string(&mut self) -> Result<String, PyJsonError> {
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("Unterminated string starting at"));
            };
            self.i += 1;
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.err("Unterminated string starting at"));
                    };
                    self.i += 1;
                    match e {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let hi = self.hex4()?;
                            let mut cp = hi;
                            if (0xd800..0xdc00).contains(&hi) && self.s.get(self.i) == Some(&'\\') && self.s.get(self.i + 1) == Some(&'u') {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                                } else {
                                    self.i = save;
                                }
                            }
                            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.err("Invalid \\escape"));
                        }
                    }
                }
                c if u32::from(c) < 0x20 => {
                    self.i -= 1;
                    return Err(self.err("Invalid control character at"));
                }
                c => out.push(c),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<PyValue, PyJsonError> {
        self.i += 1;
        let mut items: Vec<(String, PyValue)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        self.ws();
        if self.peek() == Some('}') {
            self.i += 1;
            return Ok(PyValue::Dict(items));
        }
        loop {
            if self.peek() != Some('"') {
                return Err(self.err("Expecting property name enclosed in double quotes"));
            }
            self.i += 1;
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(':') {
                return Err(self.err("Expecting ':' delimiter"));
            }
            self.i += 1;
            self.ws();
            let value = self.value(depth + 1)?;
            match index.get(&key) {
                Some(&slot) => items[slot].1 = value,
                None => {
                    index.insert(key.clone(), items.len());
                    items.push((key, value));
                }
            }
            self.ws();
            match self.peek() {
                Some('}') => {
                    self.i += 1;
                    return Ok(PyValue::Dict(items));
                }
                Some(',') => {
                    self.i += 1;
                    self.ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<PyValue, PyJsonError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(']') {
            self.i += 1;
            return Ok(PyValue::List(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(']') => {
                    self.i += 1;
                    return Ok(PyValue::List(items));
                }
                Some(',') => {
                    self.i += 1;
                    self.ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }
}
