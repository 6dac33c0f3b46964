//! Server-sent events framing (the WHATWG `text/event-stream` rules), fed one network chunk
//! at a time.
//!
//! Written here rather than taken from a crate: the client reads the body with
//! `reqwest::Response::chunk` under an inactivity timeout and a byte cap, so what it needs
//! is only the line and event framing, which is short; a crate would add a dependency and
//! reqwest's `stream` feature for no gain.

/// One dispatched event: its `event:` name (empty when the server gave none) and its
/// `data:` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or empty.
    pub event: String,
    /// The `data:` lines joined with newlines.
    pub data: String,
}

/// Splits a byte stream into events; lines may end in `\n`, `\r\n` or `\r`, and may be cut
/// anywhere between chunks.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already scanned without finding a line end.
    scanned: usize,
    event: String,
    data: String,
    has_data: bool,
    started: bool,
}

impl SseDecoder {
    /// Takes the next chunk and appends every event it completes to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        let mut at = self.scanned;
        while at < self.buffer.len() {
            let byte = self.buffer[at];
            if byte != b'\n' && byte != b'\r' {
                at += 1;
                continue;
            }
            // A `\r` at the end may be the first half of `\r\n`: wait for the next chunk.
            if byte == b'\r' && at + 1 == self.buffer.len() {
                break;
            }
            let line = String::from_utf8_lossy(&self.buffer[start..at]).into_owned();
            at += if byte == b'\r' && self.buffer[at + 1] == b'\n' { 2 } else { 1 };
            start = at;
            if let Some(event) = self.line(&line) {
                out.push(event);
            }
        }
        self.buffer.drain(..start);
        self.scanned = at - start;
    }

    /// The stream ended: a last line without its newline is still read, and an event whose
    /// blank line never came is still dispatched (servers that close right after `data:`).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            let text = String::from_utf8_lossy(&rest);
            for line in text.split(['\r', '\n']) {
                if let Some(event) = self.line(line) {
                    out.push(event);
                }
            }
        }
        self.scanned = 0;
        if let Some(event) = self.line("") {
            out.push(event);
        }
    }

    /// Applies one line; a blank line dispatches the pending event.
    fn line(&mut self, line: &str) -> Option<SseEvent> {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            return std::mem::take(&mut self.has_data).then_some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            // A comment: keep-alives (`: ping`, OpenRouter's `: OPENROUTER PROCESSING`).
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}

/// Every event of a whole recorded stream.
#[must_use]
pub fn events(bytes: &[u8]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::default();
    let mut out = Vec::new();
    decoder.push(bytes, &mut out);
    decoder.finish(&mut out);
    out
}
