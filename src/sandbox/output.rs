//! Bounded capture of a submission's terminal output and the v2 feedback view (spec §3/§4):
//! output longer than 8000 characters is cut to the first 4000 + last 4000 characters.
//! Capture keeps a head and a ring-buffer tail of bytes, so a 100 MB print costs O(caps).

use std::collections::VecDeque;

/// Incremental capture: first `head_cap` bytes, last `tail_cap` bytes, total byte count.
#[derive(Debug, Clone)]
pub struct OutputCapture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

/// A finished capture: the kept bytes and whether the middle was dropped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CapturedOutput {
    /// First bytes of the output (up to the head cap).
    pub head: Vec<u8>,
    /// Last bytes after the head (up to the tail cap); empty when all fit in `head`.
    pub tail: Vec<u8>,
    /// Total bytes the process wrote.
    pub total_bytes: u64,
    /// True when bytes between `head` and `tail` were dropped.
    pub dropped_middle: bool,
}

impl OutputCapture {
    /// New capture keeping at most `head_cap + tail_cap` bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self { head: Vec::new(), tail: VecDeque::new(), head_cap, tail_cap, total: 0 }
    }

    /// Appends a chunk read from the pipe.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        if room > 0 {
            let take = room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if self.tail_cap == 0 || chunk.is_empty() {
            return;
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Bytes currently held (bounded by the caps).
    pub fn held_bytes(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Snapshot of the capture.
    pub fn finish(&self) -> CapturedOutput {
        let kept = self.held_bytes() as u64;
        CapturedOutput { head: self.head.clone(), tail: self.tail.iter().copied().collect(), total_bytes: self.total, dropped_middle: kept < self.total }
    }
}

/// Decodes bytes lossily, dropping an incomplete UTF-8 sequence cut at the `front`/back.
fn decode(bytes: &[u8], trim_front: bool, trim_back: bool) -> String {
    let mut b = bytes;
    if trim_front {
        // Skip continuation bytes of a character whose start was dropped.
        let skip = b.iter().take(3).take_while(|&&x| x & 0xC0 == 0x80).count();
        b = &b[skip..];
    }
    if trim_back {
        // Drop a trailing partial character (lead byte plus fewer continuations than needed).
        for back in 1..=3.min(b.len()) {
            let x = b[b.len() - back];
            if x & 0xC0 == 0x80 {
                continue;
            }
            let need = match x {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            if need > back {
                b = &b[..b.len() - back];
            }
            break;
        }
    }
    String::from_utf8_lossy(b).into_owned()
}

/// Keeps the first `head` and last `tail` chars of `text` when it has more than
/// `head + tail` chars; returns (view, truncated). The two parts are joined directly.
pub fn truncate_view(text: &str, head: usize, tail: usize) -> (String, bool) {
    let n = text.chars().count();
    if n <= head + tail {
        return (text.to_string(), false);
    }
    let first: String = text.chars().take(head).collect();
    let last: String = text.chars().skip(n - tail).collect();
    (first + &last, true)
}

impl CapturedOutput {
    /// This log with `extra` (at most 4 KiB of it) written after it, e.g. the sandbox's own
    /// error text that arrived on another pipe.
    #[must_use]
    pub fn with_appended(mut self, extra: &[u8]) -> Self {
        let extra = &extra[..extra.len().min(4096)];
        if self.tail.is_empty() && !self.dropped_middle {
            self.head.extend_from_slice(extra);
        } else {
            self.tail.extend_from_slice(extra);
        }
        self.total_bytes += extra.len() as u64;
        self
    }

    /// The whole kept log as text (head, then tail; a gap marker only in this full log).
    pub fn log_text(&self) -> String {
        if !self.dropped_middle {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let dropped = self.total_bytes - (self.head.len() + self.tail.len()) as u64;
        format!("{}\n[evalgrid: {dropped} bytes omitted]\n{}", decode(&self.head, false, true), decode(&self.tail, true, false))
    }

    /// The feedback view: first `head` + last `tail` chars when longer than `head + tail`.
    /// Exact when nothing was dropped; otherwise the caps (≥ 4 bytes per kept char) make the
    /// kept head/tail long enough and the output is certainly over the threshold.
    pub fn view(&self, head: usize, tail: usize) -> (String, bool) {
        if !self.dropped_middle {
            return truncate_view(&self.log_text(), head, tail);
        }
        let h = decode(&self.head, false, true);
        let t = decode(&self.tail, true, false);
        let first: String = h.chars().take(head).collect();
        let tn = t.chars().count();
        let last: String = t.chars().skip(tn.saturating_sub(tail)).collect();
        (first + &last, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_verbatim() {
        let mut c = OutputCapture::new(16, 16);
        c.push(b"hello ");
        c.push(b"world");
        let o = c.finish();
        assert!(!o.dropped_middle);
        assert_eq!(o.view(4000, 4000), ("hello world".to_string(), false));
    }

    #[test]
    fn view_cuts_to_head_and_tail_chars() {
        let text: String = (0..20_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let (v, cut) = truncate_view(&text, 4000, 4000);
        assert!(cut);
        assert_eq!(v.chars().count(), 8000);
        assert_eq!(&v[..4000], &text[..4000]);
        assert_eq!(&v[4000..], &text[16_000..]);
        let exact: String = "x".repeat(8000);
        assert_eq!(truncate_view(&exact, 4000, 4000), (exact.clone(), false));
    }

    #[test]
    fn ring_buffer_bounds_memory_and_keeps_the_end() {
        let mut c = OutputCapture::new(10, 10);
        for i in 0..100_000u32 {
            c.push(format!("{i:08}\n").as_bytes());
            assert!(c.held_bytes() <= 20);
        }
        let o = c.finish();
        assert!(o.dropped_middle);
        assert_eq!(o.total_bytes, 900_000);
        assert_eq!(o.head, b"00000000\n0");
        assert_eq!(o.tail, b"\n00099999\n");
        let (v, cut) = o.view(3, 3);
        assert!(cut);
        assert_eq!(v, "00099\n");
    }

    #[test]
    fn multibyte_cut_at_cap_edges_is_clean() {
        let text = "é".repeat(50); // 2 bytes each
        let mut c = OutputCapture::new(5, 5);
        c.push(text.as_bytes());
        let o = c.finish();
        let (v, cut) = o.view(10, 10);
        assert!(cut);
        assert!(v.chars().all(|ch| ch == 'é'), "{v:?}");
        assert!(o.log_text().contains("bytes omitted"));
    }
}
