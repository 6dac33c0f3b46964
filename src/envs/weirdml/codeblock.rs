//! Code extraction from a model response: "if there are several code blocks, the longest is
//! taken" (spec §3). The precise rule implemented here:
//!
//! * a block opens on a line that, after any leading spaces/tabs (its indent), starts with
//!   n ≥ 3 backticks followed by an info string without backticks (```` ```python ````, bare
//!   ```` ``` ````, or any other tag: every tag is a candidate, as in a regex harness);
//! * it closes on the next line that, after leading whitespace, holds ≥ n backticks and
//!   nothing else but whitespace; an unclosed block is not a block;
//! * content = the lines in between (CR of CRLF dropped), each with up to `indent` leading
//!   whitespace characters removed, joined with `\n`, no trailing newline;
//! * blocks whose content is only whitespace are ignored;
//! * "longest" = most Unicode scalar values (chars) of content; ties go to the first block.

/// One fenced block found in a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// Info string after the opening fence (e.g. `python`), trimmed.
    pub info: String,
    /// Block content as defined in the module docs.
    pub content: String,
    /// 0-based line of the opening fence.
    pub start_line: usize,
}

impl CodeBlock {
    /// Length used for the "longest" rule: chars of content.
    pub fn len_chars(&self) -> usize {
        self.content.chars().count()
    }
}

/// Splits `line` into (indent chars, rest) on leading spaces/tabs.
fn split_indent(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    (line.len() - rest.len(), rest)
}

fn backtick_run(s: &str) -> usize {
    s.bytes().take_while(|&b| b == b'`').count()
}

/// Strips up to `n` leading space/tab characters from `line`.
fn dedent(line: &str, n: usize) -> &str {
    let mut cut = 0;
    for (i, b) in line.bytes().enumerate() {
        if i >= n || (b != b' ' && b != b'\t') {
            break;
        }
        cut = i + 1;
    }
    &line[cut..]
}

/// Every closed, non-blank fenced block of `response`, in order.
pub fn fenced_blocks(response: &str) -> Vec<CodeBlock> {
    let lines: Vec<&str> = response.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (indent, rest) = split_indent(lines[i]);
        let ticks = backtick_run(rest);
        let info = &rest[ticks..];
        if ticks < 3 || info.contains('`') {
            i += 1;
            continue;
        }
        let close = (i + 1..lines.len()).find(|&j| {
            let (_, r) = split_indent(lines[j]);
            let t = backtick_run(r);
            t >= ticks && r[t..].trim().is_empty()
        });
        let Some(close) = close else {
            // Unclosed fence: not a block; the remaining lines may still hold none.
            break;
        };
        let content: Vec<&str> = lines[i + 1..close].iter().map(|l| dedent(l, indent)).collect();
        let content = content.join("\n");
        if !content.trim().is_empty() {
            blocks.push(CodeBlock { info: info.trim().to_string(), content, start_line: i });
        }
        i = close + 1;
    }
    blocks
}

/// The code to run: the longest block (first on ties), or `None` when there is none.
pub fn extract_code(response: &str) -> Option<CodeBlock> {
    let mut best: Option<CodeBlock> = None;
    for b in fenced_blocks(response) {
        if best.as_ref().is_none_or(|cur| b.len_chars() > cur.len_chars()) {
            best = Some(b);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_block_wins_and_ties_go_to_first() {
        let r = "text\n```python\nprint(1)\n```\nmore\n```\nprint('longer one')\n```\n";
        assert_eq!(extract_code(r).map(|b| b.content), Some("print('longer one')".to_string()));
        let tie = "```\naaa\n```\n```py\nbbb\n```";
        let b = extract_code(tie).expect("a block");
        assert_eq!((b.content.as_str(), b.info.as_str(), b.start_line), ("aaa", "", 0));
    }

    #[test]
    fn length_counts_chars_not_bytes() {
        // 4 chars of 3 bytes each (12 bytes) vs 10 ASCII chars: the ASCII block is longer.
        let r = "```\n€€€€\n```\n```\nabcdefghij\n```";
        assert_eq!(extract_code(r).map(|b| b.content), Some("abcdefghij".to_string()));
    }

    #[test]
    fn no_block_unclosed_blank_and_inline() {
        assert_eq!(extract_code("just prose, no code"), None);
        assert_eq!(extract_code("```python\nprint(1)\n"), None);
        assert_eq!(extract_code("```\n   \n```"), None);
        assert_eq!(extract_code("use ```print(1)``` inline"), None);
    }

    #[test]
    fn crlf_indent_and_long_fences() {
        let r = "1. step\r\n   ```python\r\n   x = 1\r\n   if x:\r\n       y = 2\r\n   ```\r\n";
        assert_eq!(extract_code(r).map(|b| b.content), Some("x = 1\nif x:\n    y = 2".to_string()));
        // A four-backtick fence may contain a three-backtick line.
        let r = "````\ns = '''\n```\n'''\n````";
        assert_eq!(extract_code(r).map(|b| b.content), Some("s = '''\n```\n'''".to_string()));
    }

    #[test]
    fn closing_fence_must_be_bare() {
        let r = "```\nprint(1)\n```not a close\nprint(2)\n```";
        assert_eq!(extract_code(r).map(|b| b.content), Some("print(1)\n```not a close\nprint(2)".to_string()));
    }
}
