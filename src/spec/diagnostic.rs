//! Located problems in a pipeline file, rendered as `file:line:col: message`.
//!
//! Every error the spec layer reports, syntactic or semantic, becomes a
//! [`Diagnostic`]; they are collected rather than stopping at the first, and
//! rendered with the offending source line and a caret.

use std::fmt;
use std::path::PathBuf;

/// A 1-based position in the pipeline source; line 0 means "unknown".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub column: u32,
}

/// One problem found in a pipeline, with where it is and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the problem is.
    pub position: Position,
    /// Lower-case sentence fragment saying what is wrong.
    pub message: String,
    /// Optional suggestion ("did you mean ...").
    pub hint: Option<String>,
}

impl Diagnostic {
    /// Creates a diagnostic without a hint.
    #[must_use]
    pub fn new(position: Position, message: impl Into<String>) -> Self {
        Self { position, message: message.into(), hint: None }
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// Diagnostics for one file together with its source, ready to print.
#[derive(Clone, Debug)]
pub struct Report {
    /// File the diagnostics refer to, as the user named it.
    pub path: PathBuf,
    /// Full source text, for the snippet lines.
    pub source: String,
    /// Problems, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&str> = self.source.lines().collect();
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let Position { line, column } = d.position;
            write!(f, "{}:{line}:{column}: {}", self.path.display(), d.message)?;
            if let Some(text) = (line as usize).checked_sub(1).and_then(|l| lines.get(l)) {
                let gutter = line.to_string().len();
                write!(f, "\n{:gutter$} |\n{line} | {text}\n{:gutter$} | ", "", "")?;
                write!(f, "{:>width$}", "^", width = column.max(1) as usize)?;
            }
            if let Some(hint) = &d.hint {
                write!(f, "\n  = hint: {hint}")?;
            }
        }
        Ok(())
    }
}

/// Returns the candidate closest to `word` by Jaro-Winkler similarity, when it
/// is close enough to be a plausible typo.
#[must_use]
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates.into_iter().map(|c| (strsim::jaro_winkler(word, c), c)).filter(|(score, _)| *score > 0.7).max_by(|a, b| a.0.total_cmp(&b.0)).map(|(_, c)| c)
}

/// Formats a "did you mean" hint, or lists the valid choices when no
/// candidate is close.
#[must_use]
pub fn suggestion(word: &str, candidates: &[&str]) -> Option<String> {
    match nearest(word, candidates.iter().copied()) {
        Some(best) => Some(format!("did you mean `{best}`?")),
        None if candidates.is_empty() => None,
        None if candidates.len() <= 30 => Some(format!("expected one of: {}", candidates.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", "))),
        None => Some(format!("{} choices; run `evalgrid validate --list` to see them", candidates.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_snippet_and_hint() {
        let report = Report {
            path: "p.yaml".into(),
            source: "name: x\nmodels:\n  - idd: a\n".into(),
            diagnostics: vec![Diagnostic::new(Position { line: 3, column: 5 }, "unknown field `idd`").with_hint(Some("did you mean `id`?".into()))],
        };
        let text = report.to_string();
        assert!(text.starts_with("p.yaml:3:5: unknown field `idd`"), "{text}");
        assert!(text.contains("3 |   - idd: a"), "{text}");
        assert!(text.contains("  |     ^"), "{text}");
        assert!(text.ends_with("= hint: did you mean `id`?"), "{text}");
    }

    #[test]
    fn nearest_finds_typos_only() {
        assert_eq!(nearest("temprature", ["temperature", "seed"]), Some("temperature"));
        assert_eq!(nearest("zzz", ["temperature", "seed"]), None);
    }
}
