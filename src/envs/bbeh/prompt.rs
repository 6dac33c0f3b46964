//! The generic BBEH prompt suffix (paper Appendix C, spec §4) and the evalgrid prompt builder.
//!
//! Task inputs already contain their task-specific answer-format instruction; the suffix asks
//! for the `The answer is:` prefix the official scorer extracts. The exact paper wording is not
//! legible in the paper itself; this is the text used by public BBEH loaders. Any change to the
//! text or separator must bump [`SUFFIX_VERSION`] because both are hashed prompt parameters.

/// Version of ([`SUFFIX`], [`SEPARATOR`]); bump on any change so prompt-step caches split.
pub const SUFFIX_VERSION: u32 = 1;

/// The generic BBEH answer-format suffix, appended to every task input.
pub const SUFFIX: &str = "Think step by step, and when you provide the final answer, please use the \
prefix \"The answer is:\" without any modification, and provide the answer directly, with no \
formatting, no bolding, and no markup. For instance: \"The answer is: 42\" or \"The answer is: \
yes\". If the question is multiple choice with a single correct answer, the final answer must \
only be the letter corresponding to the correct answer. For example, \"The answer is: (a)\"";

/// Separator between input and suffix (evalgrid default; the paper does not specify one).
pub const SEPARATOR: &str = "\n\n";

/// Builds the single user message: `input + SEPARATOR + SUFFIX`, input kept verbatim
/// (including any trailing newline) so the prompt hash is a pure function of the data file.
pub fn build_prompt(input: &str) -> String {
    build_prompt_with(input, SUFFIX)
}

/// Like [`build_prompt`] with another suffix (a pipeline's `params.suffix`).
#[must_use]
pub fn build_prompt_with(input: &str, suffix: &str) -> String {
    let mut s = String::with_capacity(input.len() + SEPARATOR.len() + suffix.len());
    s.push_str(input);
    s.push_str(SEPARATOR);
    s.push_str(suffix);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_text_is_the_spec_text() {
        assert!(SUFFIX.starts_with("Think step by step, and when you provide the final answer"));
        assert!(SUFFIX.contains("the prefix \"The answer is:\" without any modification"));
        assert!(SUFFIX.contains("\"The answer is: 42\" or \"The answer is: yes\""));
        assert!(SUFFIX.ends_with("For example, \"The answer is: (a)\""));
        assert!(!SUFFIX.contains("  ") && !SUFFIX.contains('\n'));
    }

    #[test]
    fn prompt_is_input_separator_suffix() {
        assert_eq!(build_prompt("Q?"), format!("Q?\n\n{SUFFIX}"));
        assert_eq!(build_prompt(""), format!("\n\n{SUFFIX}"));
    }
}
