//! Executor-side scorer (spec §6.5): reads the hidden labels outside the sandbox, parses
//! `results/test_preds.txt` strictly (one integer per element, ASCII-whitespace separated,
//! exactly `width` per line, exactly `rows` lines) and computes flattened accuracy.

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::npy;

/// Hidden test labels, flattened C-order `rows × width`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// Number of test samples.
    pub rows: usize,
    /// Integers per sample (1, or 9 for shuffle tasks).
    pub width: usize,
    /// `rows * width` labels.
    pub values: Vec<i64>,
}

/// Label loading failures (infrastructure errors, never a model failure).
#[derive(Debug, Error)]
pub enum ScoreError {
    /// Reading the labels file failed.
    #[error("reading labels {path}: {source}")]
    Read {
        /// Labels path.
        path: std::path::PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The labels file is not a supported integer `.npy`.
    #[error("labels file: {0}")]
    Npy(#[from] npy::NpyError),
    /// The labels' shape disagrees with the task manifest.
    #[error("labels have shape {shape:?}, task expects ({rows}, {width})")]
    Shape {
        /// Shape found.
        shape: Vec<usize>,
        /// Expected rows.
        rows: usize,
        /// Expected width.
        width: usize,
    },
}

impl Labels {
    /// Loads an integer `.npy` of shape `(rows,)` (width 1) or `(rows, width)`.
    pub fn load(path: &Path, rows: usize, width: usize) -> Result<Self, ScoreError> {
        let bytes = std::fs::read(path).map_err(|source| ScoreError::Read { path: path.to_path_buf(), source })?;
        let arr = npy::read_int(&bytes)?;
        let ok = match arr.shape.as_slice() {
            [n] => *n == rows && width == 1,
            [n, w] => *n == rows && *w == width,
            _ => false,
        };
        if !ok {
            return Err(ScoreError::Shape { shape: arr.shape, rows, width });
        }
        Ok(Self { rows, width, values: arr.values })
    }
}

/// Result of scoring one predictions file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreOutcome {
    /// Parsed fine; accuracy may be exactly 0 (the caller classifies that as a failure).
    Scored {
        /// correct / total.
        accuracy: f64,
        /// Correct elements.
        correct: u64,
        /// Compared elements (rows × width).
        total: u64,
    },
    /// `results/test_preds.txt` was not written.
    NoResultsFile,
    /// The file exists but violates the format; `reason` goes into the feedback.
    BadFormat {
        /// Human-readable reason.
        reason: String,
    },
}

impl ScoreOutcome {
    /// Accuracy contributed to the run (0 unless scored).
    pub fn accuracy(&self) -> f64 {
        match self {
            ScoreOutcome::Scored { accuracy, .. } => *accuracy,
            _ => 0.0,
        }
    }
}

/// Parses predictions text into `rows * width` integers, or explains why not.
pub fn parse_predictions(text: &str, rows: usize, width: usize) -> Result<Vec<i64>, String> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<&str> = if text.is_empty() { Vec::new() } else { body.split('\n').collect() };
    if lines.len() != rows {
        return Err(format!("expected {rows} rows, found {}", lines.len()));
    }
    let mut out = Vec::with_capacity(rows * width);
    for (n, line) in lines.iter().enumerate() {
        let tokens: Vec<&str> = line.split_ascii_whitespace().collect();
        if tokens.len() != width {
            return Err(format!(
                "line {}: expected {width} integer{}, found {} value{}",
                n + 1,
                if width == 1 { "" } else { "s" },
                tokens.len(),
                if tokens.len() == 1 { "" } else { "s" }
            ));
        }
        for t in tokens {
            let v = t.parse::<i64>().map_err(|_| {
                let shown: String = t.chars().take(40).collect();
                format!("line {}: {shown:?} is not an integer", n + 1)
            })?;
            out.push(v);
        }
    }
    Ok(out)
}

/// Scores predictions-file bytes (`None` = file missing) against the labels.
pub fn score_predictions(file: Option<&[u8]>, labels: &Labels) -> ScoreOutcome {
    let Some(bytes) = file else {
        return ScoreOutcome::NoResultsFile;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return ScoreOutcome::BadFormat { reason: "file is not UTF-8 text".into() };
    };
    match parse_predictions(text, labels.rows, labels.width) {
        Err(reason) => ScoreOutcome::BadFormat { reason },
        Ok(preds) => {
            let correct = preds.iter().zip(&labels.values).filter(|(p, l)| p == l).count() as u64;
            let total = labels.values.len() as u64;
            let accuracy = if total == 0 { 0.0 } else { correct as f64 / total as f64 };
            ScoreOutcome::Scored { accuracy, correct, total }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &[i64], width: usize) -> Labels {
        Labels { rows: v.len() / width, width, values: v.to_vec() }
    }

    #[test]
    fn strict_parsing() {
        let l = labels(&[0, 1, 2, 1], 1);
        let s = |t: &str| score_predictions(Some(t.as_bytes()), &l);
        assert_eq!(s("0\n1\n2\n0\n").accuracy(), 0.75);
        assert_eq!(s("0\n1\n2\n1").accuracy(), 1.0, "no trailing newline is fine");
        assert_eq!(s("0\r\n1\r\n2\r\n1\r\n").accuracy(), 1.0, "CRLF is whitespace");
        assert_eq!(s(" +0 \n1\n2\n1\n").accuracy(), 1.0);
        assert!(matches!(s("0\n1\n2\n"), ScoreOutcome::BadFormat { .. }));
        assert!(matches!(s("0\n1\n2\n1\n\n"), ScoreOutcome::BadFormat { .. }));
        assert!(matches!(s("0\n1.0\n2\n1\n"), ScoreOutcome::BadFormat { .. }));
        assert!(matches!(s("0 1\n1\n2\n1\n"), ScoreOutcome::BadFormat { .. }));
        assert!(matches!(s(""), ScoreOutcome::BadFormat { .. }));
        assert_eq!(score_predictions(None, &l), ScoreOutcome::NoResultsFile);
        assert!(matches!(score_predictions(Some(&[0xff, b'\n']), &l), ScoreOutcome::BadFormat { .. }));
        assert_eq!(s("1\n0\n0\n0\n"), ScoreOutcome::Scored { accuracy: 0.0, correct: 0, total: 4 });
    }

    #[test]
    fn multi_output_is_flattened() {
        let l = labels(&[0, 1, 2, 2, 1, 0], 3);
        let out = score_predictions(Some(b"0 1 2\n2 0 1\n"), &l);
        assert_eq!(out, ScoreOutcome::Scored { accuracy: 4.0 / 6.0, correct: 4, total: 6 });
        let bad = score_predictions(Some(b"0 1\n2 0 1\n"), &l);
        assert_eq!(bad, ScoreOutcome::BadFormat { reason: "line 1: expected 3 integers, found 2 values".into() });
    }

    #[test]
    fn load_checks_shape() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("l.npy");
        std::fs::write(&p, npy::write_i64(&[1, 2, 3])).expect("write");
        assert_eq!(Labels::load(&p, 3, 1).expect("load").values, vec![1, 2, 3]);
        assert!(matches!(Labels::load(&p, 4, 1), Err(ScoreError::Shape { .. })));
    }
}
