//! Query-input parsing and validation (spec §4.2): Python/JSON literals (integers, tuples in
//! parentheses or brackets, quoted or bare strings), arity and domain checks, and the
//! model-facing error messages (wrong arity, out of domain, malformed).

use super::task::{InputKind, MAX_STRING_LEN, MIN_STRING_LEN, Task, TaskId, TaskParams, UnknownTask};
use super::value::Input;

/// Why a query input was rejected (§4.2); the message names the input as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Not parseable as the task's input type.
    #[error("invalid input {input:?}: expected {expected}")]
    Malformed {
        /// The input as written.
        input: String,
        /// What the task accepts.
        expected: String,
    },
    /// A tuple (or scalar) with the wrong number of components.
    #[error("invalid input {input:?}: expected {expected} integers, got {got}")]
    WrongArity {
        /// The input as written.
        input: String,
        /// The task's arity.
        expected: usize,
        /// Components found.
        got: usize,
    },
    /// Well-formed but outside the task's domain.
    #[error("invalid input {input:?}: {reason}")]
    OutOfDomain {
        /// The input as written.
        input: String,
        /// Which constraint failed.
        reason: String,
    },
    /// The CLI named a task that does not exist.
    #[error(transparent)]
    UnknownTask(#[from] UnknownTask),
}

/// A parsed Python/JSON literal before validation against a task.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Int(i128),
    Str(String),
    Seq(Vec<Lit>),
}

struct LitParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl LitParser<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn value(&mut self) -> Option<Lit> {
        self.ws();
        match self.peek()? {
            open @ (b'(' | b'[') => {
                self.pos += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                let mut saw_comma = false;
                loop {
                    self.ws();
                    if self.peek()? == close {
                        self.pos += 1;
                        break;
                    }
                    items.push(self.value()?);
                    self.ws();
                    match self.peek()? {
                        b',' => {
                            self.pos += 1;
                            saw_comma = true;
                        }
                        c if c == close => {}
                        _ => return None,
                    }
                }
                // Python: `(x)` is x itself, `(x,)` a 1-tuple; lists are always sequences.
                if open == b'(' && items.len() == 1 && !saw_comma { items.pop() } else { Some(Lit::Seq(items)) }
            }
            q @ (b'\'' | b'"') => {
                self.pos += 1;
                let start = self.pos;
                while self.peek()? != q {
                    if self.peek()? == b'\\' {
                        return None;
                    }
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).ok()?.to_string();
                self.pos += 1;
                Some(Lit::Str(text))
            }
            _ => {
                let neg = match self.peek()? {
                    b'-' => {
                        self.pos += 1;
                        true
                    }
                    b'+' => {
                        self.pos += 1;
                        false
                    }
                    _ => false,
                };
                let start = self.pos;
                let mut v: i128 = 0;
                while let Some(c @ b'0'..=b'9') = self.peek() {
                    v = v.saturating_mul(10).saturating_add(i128::from(c - b'0'));
                    self.pos += 1;
                }
                if self.pos == start {
                    return None;
                }
                Some(Lit::Int(if neg { -v } else { v }))
            }
        }
    }
}

/// Parses a whole text as one literal; `None` when it is not a literal.
fn parse_literal(text: &str) -> Option<Lit> {
    let mut p = LitParser { s: text.as_bytes(), pos: 0 };
    let v = p.value()?;
    p.ws();
    (p.pos == p.s.len()).then_some(v)
}

/// Inclusive integer bounds of a component under `params`.
fn int_range(positive: bool, params: &TaskParams) -> (i64, i64) {
    let b = params.int_bound;
    (if positive { 1 } else { -b }, b)
}

/// Checks a literal integer against the task domain.
fn check_int(text: &str, v: i128, positive: bool, params: &TaskParams) -> Result<i64, InputError> {
    let (lo, hi) = int_range(positive, params);
    if v < i128::from(lo) || v > i128::from(hi) {
        return Err(InputError::OutOfDomain { input: text.to_string(), reason: format!("integers must be between {lo} and {hi}") });
    }
    i64::try_from(v).map_err(|_| InputError::OutOfDomain { input: text.to_string(), reason: format!("integers must be between {lo} and {hi}") })
}

/// Whether the six ints are the vertices of a non-degenerate triangle (§4.2).
pub fn is_nondegenerate_triangle(v: &[i64]) -> bool {
    let g = |i: usize| i128::from(v.get(i).copied().unwrap_or(0));
    let cross = ((g(2) - g(0)).checked_mul(g(5) - g(1))).zip((g(3) - g(1)).checked_mul(g(4) - g(0))).map(|(p, q)| p - q);
    // Overflow only happens far outside every domain: reject.
    v.len() == 6 && cross.is_some_and(|c| c != 0)
}

/// Checks an already-typed input against `task`'s domain (§4.2) under default parameters.
pub fn validate(task: TaskId, input: &Input) -> Result<(), InputError> {
    validate_with(task, input, &TaskParams::default())
}

/// Checks an already-typed input against `task`'s domain (§4.2); used for sampler draws.
pub fn validate_with(task: TaskId, input: &Input, params: &TaskParams) -> Result<(), InputError> {
    let text = input.to_string();
    match (task.task().input, input) {
        (InputKind::Int { positive }, Input::Int(x)) => check_int(&text, i128::from(*x), positive, params).map(|_| ()),
        (InputKind::Tuple { .. }, Input::Tuple(xs)) => {
            let lit = Lit::Seq(xs.iter().map(|&x| Lit::Int(i128::from(x))).collect());
            typed(task.task(), &text, Some(lit), params).map(|_| ())
        }
        (InputKind::Str, Input::Str(s)) => check_str(&text, s).map(|_| ()),
        _ => Err(InputError::Malformed { input: text, expected: expected_text(&task.task()) }),
    }
}

/// What a task accepts, for `Malformed` messages.
fn expected_text(task: &Task) -> String {
    match task.input {
        InputKind::Int { .. } => "an integer".to_string(),
        InputKind::Tuple { arity, .. } => {
            format!("a tuple of {arity} integers in parentheses, e.g. (1, 2)")
        }
        InputKind::Str => "a string of lower-case letters a-z".to_string(),
    }
}

fn check_str(text: &str, s: &str) -> Result<Input, InputError> {
    let n = s.chars().count();
    if !(MIN_STRING_LEN..=MAX_STRING_LEN).contains(&n) {
        return Err(InputError::OutOfDomain {
            input: text.to_string(),
            reason: format!("strings must have {MIN_STRING_LEN} to {MAX_STRING_LEN} characters, got {n}"),
        });
    }
    if !s.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(InputError::OutOfDomain { input: text.to_string(), reason: "strings may contain only lower-case letters a-z".to_string() });
    }
    Ok(Input::Str(s.to_string()))
}

/// Turns a parsed literal (or `None` for a non-literal text) into a validated input.
fn typed(task: Task, text: &str, lit: Option<Lit>, params: &TaskParams) -> Result<Input, InputError> {
    // Numeric tasks: a quoted literal is unwrapped once, as for a JSON string item
    // ("strings that are a base-10 integer literal", "strings of the form (a, b, c)").
    let lit = match lit {
        Some(Lit::Str(inner)) if !matches!(task.input, InputKind::Str) => parse_literal(inner.trim()).filter(|l| !matches!(l, Lit::Str(_))),
        other => other,
    };
    let malformed = || InputError::Malformed { input: text.to_string(), expected: expected_text(&task) };
    match task.input {
        InputKind::Int { positive } => match lit {
            Some(Lit::Int(v)) => check_int(text, v, positive, params).map(Input::Int),
            Some(Lit::Seq(items)) => Err(InputError::WrongArity { input: text.to_string(), expected: 1, got: items.len() }),
            _ => Err(malformed()),
        },
        InputKind::Tuple { arity, positive, triangle } => {
            let items = match lit {
                Some(Lit::Seq(items)) => items,
                Some(Lit::Int(_)) => {
                    return Err(InputError::WrongArity { input: text.to_string(), expected: arity, got: 1 });
                }
                _ => return Err(malformed()),
            };
            if items.len() != arity {
                return Err(InputError::WrongArity { input: text.to_string(), expected: arity, got: items.len() });
            }
            let mut xs = Vec::with_capacity(arity);
            for item in items {
                match item {
                    Lit::Int(v) => xs.push(check_int(text, v, positive, params)?),
                    _ => return Err(malformed()),
                }
            }
            if triangle && !is_nondegenerate_triangle(&xs) {
                return Err(InputError::OutOfDomain {
                    input: text.to_string(),
                    reason: "the points (a, b), (c, d), (e, f) must be distinct and not collinear".to_string(),
                });
            }
            Ok(Input::Tuple(xs))
        }
        InputKind::Str => match lit {
            Some(Lit::Str(s)) => check_str(text, &s),
            // A bare word is not a Python literal: it is taken as the string itself.
            None => check_str(text, text.trim()),
            Some(_) => Err(malformed()),
        },
    }
}

/// Parses one query input as written by the model (§4.2) under default parameters.
pub fn parse_input(task: TaskId, text: &str) -> Result<Input, InputError> {
    parse_input_with(task, text, &TaskParams::default())
}

/// Parses one query input (§4.2): integer literals, `(a, b, c)` / `[a, b, c]` tuples, quoted or
/// bare strings; then validates it against the task's domain under `params`.
pub fn parse_input_with(task: TaskId, text: &str, params: &TaskParams) -> Result<Input, InputError> {
    typed(task.task(), text, parse_literal(text.trim()), params)
}

/// Parses one JSON item of a `query` tool call (§4.2): JSON integers (not booleans or floats),
/// arrays of integers for tuples, and strings (parsed as in [`parse_input_with`]).
pub fn parse_json_input_with(task: TaskId, value: &serde_json::Value, params: &TaskParams) -> Result<Input, InputError> {
    use serde_json::Value;
    let t = task.task();
    let text = value.to_string();
    let int_lit = |v: &Value| -> Option<Lit> {
        match v {
            Value::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)).map(Lit::Int),
            _ => None,
        }
    };
    let lit = match value {
        Value::String(s) => return parse_input_with(task, s, params),
        Value::Number(_) => match int_lit(value) {
            Some(l) => Some(l),
            None => {
                return Err(InputError::Malformed { input: text, expected: expected_text(&t) });
            }
        },
        Value::Array(items) => {
            let lits: Option<Vec<Lit>> = items.iter().map(int_lit).collect();
            match lits {
                Some(l) => Some(Lit::Seq(l)),
                None => {
                    return Err(InputError::Malformed { input: text, expected: expected_text(&t) });
                }
            }
        }
        Value::Bool(_) | Value::Null | Value::Object(_) => {
            return Err(InputError::Malformed { input: text, expected: expected_text(&t) });
        }
    };
    typed(t, &text, lit, params)
}
