//! A `qa` row's image (`fields.input_image`): a file next to the dataset, a `data:` URL (as
//! Inspect's Hub datasets hold them) or Parquet bytes. Read and checked once, at `validate`:
//! at most [`MAX_IMAGE_BYTES`], a PNG, JPEG, GIF or WebP by its magic bytes, and not cut
//! short. Its bytes are hashed into the row's question hash and sent as an image part.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::providers::Image;

/// The largest image sent: 20 MiB, the most the APIs accept in one request (OpenAI's and
/// Gemini's inline limit), far above a photo a question needs.
pub const MAX_IMAGE_BYTES: u64 = 20 << 20;

/// A row's image, loaded.
#[derive(Clone, Debug)]
pub struct RowImage {
    /// Where it came from, as shown in transcripts and reports: the cell's path, or
    /// `inline` for a `data:` URL or Parquet bytes. Never the bytes.
    pub source: String,
    /// Its bytes' size.
    pub size: usize,
    /// blake3 of its bytes (hex), in the row's hash and shown instead of the bytes.
    pub blake3: String,
    /// What is sent: media type and base64.
    pub part: Arc<Image>,
}

impl RowImage {
    /// A one-line description for transcripts and reports: source, type, size, hash prefix.
    #[must_use]
    pub fn label(&self) -> String {
        format!("[image {} ({}, {} bytes, blake3 {})]", self.source, self.part.media_type, self.size, &self.blake3[..16])
    }
}

/// The media type of `bytes` by its magic bytes, or why it is not an image evalgrid sends
/// (another format, or a known format cut short).
pub fn sniff(bytes: &[u8]) -> Result<&'static str, String> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    const IEND: &[u8] = b"\0\0\0\0IEND\xaeB`\x82";
    if bytes.starts_with(PNG) {
        return if bytes.ends_with(IEND) { Ok("image/png") } else { Err("is a truncated PNG (it does not end with the IEND chunk)".into()) };
    }
    if bytes.starts_with(b"\xff\xd8\xff") {
        // The end-of-image marker, allowing a little padding after it.
        let tail = &bytes[bytes.len().saturating_sub(64)..];
        return if tail.windows(2).any(|w| w == b"\xff\xd9") { Ok("image/jpeg") } else { Err("is a truncated JPEG (no end-of-image marker)".into()) };
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return if bytes.ends_with(b";") { Ok("image/gif") } else { Err("is a truncated GIF (it does not end with the trailer byte)".into()) };
    }
    if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        let declared = u64::from(u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]])) + 8;
        return if bytes.len() as u64 >= declared {
            Ok("image/webp")
        } else {
            Err(format!("is a truncated WebP ({} of the {declared} bytes its header declares)", bytes.len()))
        };
    }
    let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Err(format!("is not a PNG, JPEG, GIF or WebP image (it starts with bytes {})", head.join(" ")))
}

/// The image a cell names, read from `dataset`'s folder; `None` for an empty cell (the row is
/// then asked as text, as Inspect does).
pub fn load(dataset: &Path, cell: Option<&Value>) -> Result<Option<RowImage>, String> {
    let text = match cell {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.is_empty() => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => return Err("an image cell must be a path relative to the dataset, a `data:` URL or (in Parquet) bytes".into()),
    };
    let (source, bytes) = if let Some(rest) = text.strip_prefix("data:") {
        let Some((meta, data)) = rest.split_once(',') else { return Err("a `data:` URL without a `,`".into()) };
        if !meta.ends_with(";base64") {
            return Err("a `data:` URL must be base64 (`data:image/png;base64,…`)".into());
        }
        if data.len() as u64 / 4 * 3 > MAX_IMAGE_BYTES + 3 {
            return Err(format!("the image is more than the {} MiB an image may have", MAX_IMAGE_BYTES >> 20));
        }
        let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| format!("the `data:` URL is not valid base64: {e}"))?;
        ("inline".to_owned(), bytes)
    } else {
        let path = dataset.parent().unwrap_or(Path::new("")).join(text);
        let shown = format!("image `{text}`");
        let file = super::dataset::open_regular(&path, MAX_IMAGE_BYTES).map_err(|e| format!("{shown} ({}) {e}", path.display()))?;
        let mut bytes = Vec::new();
        file.take(MAX_IMAGE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("{shown}: cannot read: {}", e.kind()))?;
        (text.clone(), bytes)
    };
    let named = |m: String| if source == "inline" { format!("the inline image {m}") } else { format!("image `{source}` {m}") };
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(named(format!("is more than the {} MiB an image may have", MAX_IMAGE_BYTES >> 20)));
    }
    let media_type = sniff(&bytes).map_err(named)?;
    Ok(Some(RowImage {
        source,
        size: bytes.len(),
        blake3: blake3::hash(&bytes).to_hex().to_string(),
        part: Arc::new(Image { media_type: media_type.to_owned(), data: base64::engine::general_purpose::STANDARD.encode(&bytes) }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG.
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\0\x05\0\x01\xff\xa5\xf6E@\0\0\0\0IEND\xaeB`\x82";

    #[test]
    fn types_are_told_by_magic_bytes_and_truncation_is_caught() {
        assert_eq!(sniff(PNG), Ok("image/png"));
        assert!(sniff(&PNG[..PNG.len() - 5]).unwrap_err().contains("truncated PNG"));
        assert_eq!(sniff(b"\xff\xd8\xff\xe0 jfif \xff\xd9"), Ok("image/jpeg"));
        assert!(sniff(b"\xff\xd8\xff\xe0 jfif").unwrap_err().contains("truncated JPEG"));
        assert_eq!(sniff(b"GIF89a....;"), Ok("image/gif"));
        assert_eq!(sniff(b"RIFF\x04\0\0\0WEBP"), Ok("image/webp"));
        assert!(sniff(b"RIFF\x40\0\0\0WEBPVP8 ").unwrap_err().contains("truncated WebP"));
        assert!(sniff(b"%PDF-1.7").unwrap_err().contains("not a PNG, JPEG, GIF or WebP image (it starts with bytes 25 50 44 46"));
    }

    #[test]
    fn a_parquet_binary_column_is_the_image_and_its_bytes_are_in_the_row_hash() {
        use polars::prelude::{Column, DataFrame, ParquetWriter};
        let dir = tempfile::tempdir().unwrap();
        let write = |second: &[u8]| {
            let cells: [&[u8]; 2] = [PNG, second];
            let mut frame = DataFrame::new_infer_height(vec![
                Column::new("input".into(), ["Colour?", "Colour?"]),
                Column::new("target".into(), ["red", "blue"]),
                Column::new("picture".into(), cells),
            ])
            .unwrap();
            ParquetWriter::new(std::fs::File::create(dir.path().join("d.parquet")).unwrap()).finish(&mut frame).unwrap();
        };
        let params: crate::spec::Params =
            serde_json::json!({"dataset": "d.parquet", "fields": {"input_image": "picture"}}).as_object().unwrap().clone().into_iter().collect();
        let load_items = || {
            let instance = crate::envs::qa::task::load(dir.path(), &params).unwrap();
            crate::envs::qa::task::get(&instance).unwrap().items.clone()
        };
        write(b"GIF89a blue ;");
        let items = load_items();
        let kinds: Vec<&str> = items.iter().map(|i| i.image.as_ref().unwrap().part.media_type.as_str()).collect();
        assert_eq!(kinds, ["image/png", "image/gif"]);
        assert_eq!(items[0].image.as_ref().unwrap().source, "inline");
        write(b"GIF89a navy ;");
        let edited = load_items();
        assert_eq!(edited[0].ask_hash, items[0].ask_hash);
        assert_ne!(edited[1].ask_hash, items[1].ask_hash, "new bytes, a new question");
        write(b"GIF89a cut");
        let e = crate::envs::qa::task::load(dir.path(), &params).unwrap_err();
        assert!(e[0].message.ends_with("d.parquet:row 1: the inline image is a truncated GIF (it does not end with the trailer byte)"), "{}", e[0].message);
    }

    #[test]
    fn cells_are_paths_data_urls_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = dir.path().join("d.jsonl");
        std::fs::write(dir.path().join("a.png"), PNG).unwrap();
        let from_file = load(&dataset, Some(&Value::from("a.png"))).unwrap().unwrap();
        assert_eq!((from_file.source.as_str(), from_file.part.media_type.as_str(), from_file.size), ("a.png", "image/png", PNG.len()));
        let url = format!("data:image/jpeg;base64,{}", base64::engine::general_purpose::STANDARD.encode(PNG));
        let inline = load(&dataset, Some(&Value::from(url))).unwrap().unwrap();
        assert_eq!(
            (inline.source.as_str(), inline.part.media_type.as_str(), inline.blake3.clone()),
            ("inline", "image/png", from_file.blake3.clone()),
            "the type is the bytes'"
        );
        assert!(load(&dataset, Some(&Value::from(""))).unwrap().is_none());
        assert!(load(&dataset, None).unwrap().is_none());
        assert!(load(&dataset, Some(&Value::from("missing.png"))).unwrap_err().contains("cannot read"));
        assert!(load(&dataset, Some(&Value::from(3))).is_err());
        assert!(load(&dataset, Some(&Value::from("data:image/png,abc"))).unwrap_err().contains("base64"));
        let big = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(vec![0u8; (21 << 20) as usize]));
        assert!(load(&dataset, Some(&Value::from(big))).unwrap_err().contains("more than the 20 MiB"));
    }
}
