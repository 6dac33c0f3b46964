//! Server-sent events framing (the WHATWG `text/event-stream` rules), fed one network chunk
//! at a time, strictly: a line that is not UTF-8 is an error (never replaced by U+FFFD, which
//! would cache corrupt bytes as text), and so is a line or an event longer than the cap the
//! decoder was made with, so a stream that never ends its line cannot grow the buffer.
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

/// Why a byte stream is not a well-formed event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingError {
    /// A line is not UTF-8, as the SSE format requires (bytes corrupted on the way).
    InvalidUtf8,
    /// A line, or the data of one event, outgrew the decoder's cap.
    TooLong,
}

/// Splits a byte stream into events; lines may end in `\n`, `\r\n` or `\r`, and may be cut
/// anywhere between chunks.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    /// Longest line, and longest event data, accepted.
    max_event_bytes: usize,
    buffer: Vec<u8>,
    /// Bytes of `buffer` already scanned without finding a line end.
    scanned: usize,
    event: String,
    data: String,
    has_data: bool,
    started: bool,
}

impl Default for SseDecoder {
    /// A decoder without a cap, for whole recorded streams.
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl SseDecoder {
    /// A decoder that refuses lines and events longer than `max_event_bytes`.
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Self { max_event_bytes, buffer: Vec::new(), scanned: 0, event: String::new(), data: String::new(), has_data: false, started: false }
    }

    /// Takes the next chunk and appends every event it completes to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), FramingError> {
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
            let end = at;
            at += if byte == b'\r' && self.buffer[at + 1] == b'\n' { 2 } else { 1 };
            let line = std::mem::take(&mut self.buffer);
            let applied = self.line_bytes(&line[start..end]);
            self.buffer = line;
            start = at;
            if let Some(event) = applied? {
                out.push(event);
            }
        }
        self.buffer.drain(..start);
        self.scanned = at - start;
        if self.scanned > self.max_event_bytes {
            return Err(FramingError::TooLong);
        }
        Ok(())
    }

    /// Applies one line given as bytes, which must be UTF-8.
    fn line_bytes(&mut self, line: &[u8]) -> Result<Option<SseEvent>, FramingError> {
        if line.len() > self.max_event_bytes {
            return Err(FramingError::TooLong);
        }
        let line = std::str::from_utf8(line).map_err(|_| FramingError::InvalidUtf8)?;
        self.line(line)
    }

    /// The stream ended: a last line without its newline is still read, and an event whose
    /// blank line never came is still dispatched (servers that close right after `data:`).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), FramingError> {
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        for line in rest.split(|byte| *byte == b'\r' || *byte == b'\n') {
            if let Some(event) = self.line_bytes(line)? {
                out.push(event);
            }
        }
        if let Some(event) = self.line("")? {
            out.push(event);
        }
        Ok(())
    }

    /// Applies one line; a blank line dispatches the pending event.
    fn line(&mut self, line: &str) -> Result<Option<SseEvent>, FramingError> {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            return Ok(std::mem::take(&mut self.has_data).then_some(SseEvent { event, data }));
        }
        if line.starts_with(':') {
            // A comment: keep-alives (`: ping`, OpenRouter's `: OPENROUTER PROCESSING`).
            return Ok(None);
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
                if self.data.len() + value.len() > self.max_event_bytes {
                    return Err(FramingError::TooLong);
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        Ok(None)
    }
}

/// Every event of a whole recorded stream.
///
/// # Errors
/// [`FramingError::InvalidUtf8`] when a line is not UTF-8.
pub fn events(bytes: &[u8]) -> Result<Vec<SseEvent>, FramingError> {
    let mut decoder = SseDecoder::default();
    let mut out = Vec::new();
    decoder.push(bytes, &mut out)?;
    decoder.finish(&mut out)?;
    Ok(out)
}
