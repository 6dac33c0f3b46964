//! The JSONL of the OpenAI Batch API: one request line per call in, one result line per
//! request out (`custom_id`, `response: {status_code, body}`, `error`), in any order.

use serde_json::{Value, json};

/// One input line: `{"custom_id", "method": "POST", "url", "body"}` and a newline.
#[must_use]
pub fn request_line(custom_id: &str, url: &str, body: &Value) -> String {
    let mut line = json!({"custom_id": custom_id, "method": "POST", "url": url, "body": body}).to_string();
    line.push('\n');
    line
}

/// One line of an output or error file.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputLine {
    /// The call key it answers.
    pub custom_id: String,
    /// The HTTP status and body the request got (read by the protocol like a live answer),
    /// or the batch's own error for it.
    pub result: Result<(u16, Vec<u8>), String>,
}

/// Reads an output or error file; a line that is not a result (torn, no `custom_id`) is
/// reported by its 1-based number and skipped, so the rest of the file still answers.
#[must_use]
pub fn parse_output(text: &[u8]) -> (Vec<OutputLine>, Vec<String>) {
    parse_jsonl(text, read_line)
}

/// Reads a JSONL of results with `read` (each provider's line shape); a line `read` does
/// not take is reported by its 1-based number and skipped.
pub(super) fn parse_jsonl(text: &[u8], read: impl Fn(&Value) -> Option<OutputLine>) -> (Vec<OutputLine>, Vec<String>) {
    let (mut lines, mut problems) = (Vec::new(), Vec::new());
    for (number, raw) in text.split(|b| *b == b'\n').enumerate() {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(raw).ok().and_then(|value| read(&value)) {
            Some(line) => lines.push(line),
            None => problems.push(format!("line {}: not a batch result line", number + 1)),
        }
    }
    (lines, problems)
}

fn read_line(value: &Value) -> Option<OutputLine> {
    let custom_id = value.get("custom_id")?.as_str()?.to_owned();
    let response = value.get("response").filter(|r| !r.is_null());
    let result = match response.and_then(|r| Some((r.get("status_code")?.as_u64()?, r.get("body")?))) {
        Some((status, body)) => Ok((u16::try_from(status).unwrap_or(500), serde_json::to_vec(body).ok()?)),
        None => {
            let error = value.get("error").filter(|e| !e.is_null());
            let message = error.and_then(|e| e.get("message")).and_then(Value::as_str);
            let code = error.and_then(|e| e.get("code")).and_then(Value::as_str);
            Err(format!("{}{}", code.map(|c| format!("{c}: ")).unwrap_or_default(), message.unwrap_or("the batch returned no response for this request")))
        }
    };
    Some(OutputLine { custom_id, result })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_answer_by_custom_id_and_torn_lines_are_numbered() {
        let out = br#"{"id":"batch_req_1","custom_id":"k2","response":{"status_code":200,"request_id":"r","body":{"x":1}},"error":null}

{"id":"batch_req_2","custom_id":"k1","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}
{"custom_id": "k3", "resp
{"id":"batch_req_3","custom_id":"k4","response":{"status_code":400,"body":{"error":{"message":"bad"}}},"error":null}
"#;
        let (lines, problems) = parse_output(out);
        assert_eq!(problems, vec!["line 4: not a batch result line".to_owned()]);
        assert_eq!(lines[0], OutputLine { custom_id: "k2".into(), result: Ok((200, br#"{"x":1}"#.to_vec())) });
        assert_eq!(lines[1].result, Err("batch_expired: This request could not be executed before the completion window expired.".into()));
        assert_eq!(lines[2].result.as_ref().map(|(status, _)| *status), Ok(400));
    }

    #[test]
    fn a_request_line_is_one_json_object_with_the_exact_body() {
        let line = request_line("ab12", "/v1/chat/completions", &json!({"model": "m", "messages": [{"role": "user", "content": "a\nb"}]}));
        assert_eq!(line.matches('\n').count(), 1);
        let value: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(
            value,
            json!({"custom_id": "ab12", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "a\nb"}]}})
        );
    }
}
