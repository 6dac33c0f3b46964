//! `qa` image inputs (`fields.input_image`): one task asked on all four protocols of the
//! mock, each request's image part in that protocol's shape; the image's bytes in the row's
//! key (replacing one picture asks that row again only); `show` and the Inspect export name
//! the image and never carry its bytes; oversized, truncated and non-image files are exit 2
//! at `validate`, at their row.

use base64::Engine as _;
use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};
use serde_json::{Value, json};

use crate::providers::Mock;
use crate::support::Workspace;

/// Stand-ins with a PNG's signature and its final IEND chunk (what `validate` checks).
fn png(middle: &[u8]) -> Vec<u8> {
    [b"\x89PNG\r\n\x1a\n".as_slice(), middle, b"\0\0\0\0IEND\xaeB`\x82"].concat()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const ROWS: &str = concat!(
    "{\"id\": \"r\", \"input\": \"Which colour is the square?\", \"target\": \"red\", \"picture\": \"pics/red.png\"}\n",
    "{\"id\": \"b\", \"input\": \"Which colour is the square?\", \"target\": \"blue\", \"picture\": \"pics/blue.png\"}\n",
    "{\"id\": \"t\", \"input\": \"No picture here: answer text\", \"target\": \"text\"}\n",
);

/// The mock "sees" the picture: it answers by the image bytes in the body.
fn reply(req: &MockRequest) -> MockOutcome {
    let body = req.body.to_string();
    let text = if body.contains(&b64(&png(b"red"))) {
        "red"
    } else if body.contains(&b64(&png(b"blue"))) {
        "blue"
    } else if body.contains(&b64(&png(b"green"))) {
        "green"
    } else {
        "text"
    };
    MockOutcome::Reply(MockReply::text(text))
}

fn workspace(base: &str) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path("pics")).unwrap();
    std::fs::write(ws.path("pics/red.png"), png(b"red")).unwrap();
    std::fs::write(ws.path("pics/blue.png"), png(b"blue")).unwrap();
    ws.write("d.jsonl", ROWS);
    let (v1, gemini) = (format!("{base}/v1"), format!("{base}/v1beta"));
    ws.write(
        "p.yaml",
        &format!(
            "name: img\nmodels:\n  - {{id: chat, provider: openai, model: m, base_url: \"{v1}\"}}\n  - {{id: resp, provider: openai, api: responses, model: m, base_url: \"{v1}\"}}\n  - {{id: claude, provider: anthropic, model: m, base_url: \"{v1}\"}}\n  - {{id: gem, provider: gemini, model: m, base_url: \"{gemini}\"}}\ntasks:\n  - benchmark: qa\n    params: {{dataset: d.jsonl, fields: {{input_image: picture}}, scorers: [includes]}}\nseeds: [0]\n"
        ),
    );
    ws
}

/// The image part of the last user turn of a logged body, by protocol.
fn image_part(path: &str, body: &Value) -> Option<Value> {
    let last = |list: &Value| list.as_array().and_then(|l| l.last()).cloned();
    if path.ends_with("/chat/completions") {
        last(&body["messages"])?["content"].get(1).cloned()
    } else if path.ends_with("/responses") {
        last(&body["input"])?["content"].get(1).cloned()
    } else if path.ends_with("/messages") {
        last(&body["messages"])?["content"].get(1).cloned()
    } else {
        last(&body["contents"])?["parts"].get(1).cloned()
    }
}

#[test]
fn an_image_column_is_sent_on_all_four_protocols_and_keyed_by_its_bytes() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = workspace(mock.server().base_url().trim_end_matches('/'));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, mock.server().calls()), (0, 12), "3 rows × 4 protocols: {v}");
    let red = b64(&png(b"red"));
    let mut shapes = std::collections::BTreeMap::new();
    for r in mock.server().request_log() {
        let text = r.body.to_string();
        if !text.contains(&red) {
            if text.contains("No picture") {
                assert!(!text.contains("image"), "a row without a picture is text only: {text}");
            }
            continue;
        }
        shapes.insert(r.path.clone(), image_part(&r.path, &r.body));
    }
    let url = format!("data:image/png;base64,{red}");
    let want = |suffix: &str| shapes.iter().find(|(p, _)| p.ends_with(suffix)).and_then(|(_, v)| v.clone());
    assert_eq!(want("/chat/completions"), Some(json!({"type": "image_url", "image_url": {"url": url}})), "{shapes:?}");
    assert_eq!(want("/responses"), Some(json!({"type": "input_image", "image_url": url})), "{shapes:?}");
    assert_eq!(want("/messages"), Some(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": red}})), "{shapes:?}");
    assert_eq!(want(":generateContent"), Some(json!({"inline_data": {"mime_type": "image/png", "data": red}})), "{shapes:?}");
    let items = std::fs::read_to_string(ws.path("reports/img/items.csv")).unwrap();
    assert_eq!(items.lines().filter(|l| l.ends_with(",1.0")).count(), 12, "every protocol's model saw its picture: {items}");

    // `show` and the Inspect export name the image, never its bytes.
    let out = ws.run(&["show", "p.yaml", "claude/qa/d/0"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("[image pics/red.png (image/png, ") && !shown.contains(&red), "{shown}");
    let out = ws.run(&["export", "p.yaml", "--format", "inspect", "--out", "inspect"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut exported = 0;
    for entry in walk(&ws.path("inspect")) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(!bytes.windows(red.len()).any(|w| w == red.as_bytes()), "{} holds the image's base64", entry.display());
        exported += bytes.len();
    }
    assert!(exported > 0);

    // A new picture for one row: that row is asked again on each protocol, nothing else.
    std::fs::write(ws.path("pics/blue.png"), png(b"green")).unwrap();
    let (_, s) = ws.run_json(&["status", "p.yaml", "--explain", "chat/qa/d/0", "--json"]);
    assert_eq!(s["changed_rows"], json!(["row `b` (d.jsonl:2): question changed"]), "{s}");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, mock.server().calls()), (0, 16), "{v}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// Each bad image is exit 2 at `validate`, naming the dataset's line and the file.
#[test]
fn oversized_truncated_and_non_image_files_are_located_errors() {
    let ws = workspace("http://127.0.0.1:9");
    let check = |write: &dyn Fn(), want: &str| {
        write();
        let out = ws.run(&["validate", "p.yaml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "want {want:?} in:\n{err}");
    };
    check(&|| std::fs::write(ws.path("pics/blue.png"), png(&vec![0u8; 21 << 20])).unwrap(), "d.jsonl:2: image `pics/blue.png` (");
    check(&|| std::fs::write(ws.path("pics/blue.png"), png(&vec![0u8; 21 << 20])).unwrap(), "bytes, more than the 20971520 bytes such a file may have");
    check(&|| std::fs::write(ws.path("pics/blue.png"), &png(b"blue")[..20]).unwrap(), "d.jsonl:2: image `pics/blue.png` is a truncated PNG");
    check(
        &|| std::fs::write(ws.path("pics/blue.png"), b"just some text, not a picture\n").unwrap(),
        "d.jsonl:2: image `pics/blue.png` is not a PNG, JPEG, GIF or WebP image",
    );
    check(&|| std::fs::remove_file(ws.path("pics/blue.png")).unwrap(), "d.jsonl:2: image `pics/blue.png` (");
}

/// The Hub's `Image` feature in Parquet (a struct of `bytes` and `path`, as `datasets`
/// writes it), written by pyarrow: a row with bytes sends them, a row with only a path sends
/// that file, a null image is asked as text only.
#[test]
fn the_hubs_image_struct_in_parquet_is_read_by_bytes_or_path() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = workspace(mock.server().base_url().trim_end_matches('/'));
    let (red, blue) = (png(b"red"), png(b"blue"));
    let script = format!(
        "import base64, pyarrow as pa, pyarrow.parquet as pq\nred = base64.b64decode('{}')\nimage = pa.struct([('bytes', pa.binary()), ('path', pa.string())])\nt = pa.table({{'question': ['Which colour is the square?'] * 2 + ['No picture here'], 'image': pa.array([{{'bytes': red, 'path': 'red.png'}}, {{'bytes': None, 'path': 'pics/blue.png'}}, None], type=image), 'answer': ['red', 'blue', 'text']}})\npq.write_table(t, 'hub.parquet')\n",
        b64(&red)
    );
    let out = std::process::Command::new("python3").arg("-c").arg(&script).current_dir(ws.path(".")).output().expect("python3 runs");
    if !out.status.success() {
        eprintln!("SKIPPED: pyarrow cannot write the Hub's image layout here: {}", String::from_utf8_lossy(&out.stderr));
        return;
    }
    let v1 = format!("{}/v1", mock.server().base_url().trim_end_matches('/'));
    ws.write(
        "hub.yaml",
        &format!(
            "name: hub\nmodels:\n  - {{id: chat, provider: openai, model: m, base_url: \"{v1}\"}}\ntasks:\n  - benchmark: qa\n    params: {{dataset: hub.parquet, fields: {{input: question, target: answer, input_image: image}}, scorers: [includes]}}\nseeds: [0]\n"
        ),
    );
    let (code, v) = ws.run_json(&["run", "hub.yaml", "--json"]);
    assert_eq!((code, mock.server().calls()), (0, 3), "{v}");
    let parts: Vec<Option<Value>> = mock.server().request_log().iter().map(|r| image_part(&r.path, &r.body)).collect();
    for bytes in [&red, &blue] {
        let url = format!("data:image/png;base64,{}", b64(bytes));
        assert_eq!(parts.iter().filter(|p| **p == Some(json!({"type": "image_url", "image_url": {"url": url}}))).count(), 1, "{parts:?}");
    }
    assert_eq!(parts.iter().filter(|p| p.is_none()).count(), 1, "the null image is text only: {parts:?}");
    let items = std::fs::read_to_string(ws.path("reports/hub/items.csv")).unwrap();
    assert_eq!(items.lines().filter(|l| l.ends_with(",1.0")).count(), 3, "{items}");
}
