//! Minimal `.npy` (format 1.0/2.0) support: byte-identical writing of the two array kinds
//! mini-shapes needs (`<f4` N-d, `<i8` 1-d) and reading integer label arrays for the scorer.

use thiserror::Error;

/// Why an `.npy` file could not be read as an integer array (the scorer reports it).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NpyError {
    /// The magic string or version bytes are wrong.
    #[error("not an .npy file (bad magic or unsupported version)")]
    BadMagic,
    /// The file ends before the header or the data it announces.
    #[error("truncated .npy file")]
    Truncated,
    /// The header dict could not be parsed.
    #[error("bad .npy header: {0}")]
    BadHeader(String),
    /// The dtype is not an integer type this reader supports.
    #[error("unsupported dtype {0:?} (want a little-endian or 1-byte integer type)")]
    UnsupportedDtype(String),
}

/// An integer array read from `.npy`, widened to i64 (labels are small integers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntArray {
    /// Array shape as stored (C order).
    pub shape: Vec<usize>,
    /// Values in C order.
    pub values: Vec<i64>,
}

/// Builds the format-1.0 header exactly as `numpy.save` writes it (64-byte alignment).
fn header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", parts.join(", "))
        }
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + length (2) = 10 bytes precede the header; the header ends in
    // '\n' and is space-padded so the data starts on a 64-byte boundary.
    let unpadded = 10 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let mut text = dict.into_bytes();
    text.extend(std::iter::repeat_n(b' ', pad));
    text.push(b'\n');
    let len = u16::try_from(text.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(10 + text.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&text);
    out
}

/// Serialises a C-order float32 array (the point clouds) byte-identically to `numpy.save`.
pub fn write_f32(shape: &[usize], values: &[f32]) -> Vec<u8> {
    let mut out = header("<f4", shape);
    out.reserve(values.len() * 4);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Serialises a 1-d int64 array (labels) byte-identically to `numpy.save`.
pub fn write_i64(values: &[i64]) -> Vec<u8> {
    let mut out = header("<i8", &[values.len()]);
    out.reserve(values.len() * 8);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Extracts the quoted value of `key` from the header dict text.
fn dict_str<'a>(dict: &'a str, key: &str) -> Result<&'a str, NpyError> {
    let pat = format!("'{key}':");
    let start = dict.find(&pat).ok_or_else(|| NpyError::BadHeader(format!("no {key}")))?;
    let rest = dict[start + pat.len()..].trim_start();
    Ok(rest)
}

/// Parses the header dict into (descr, fortran_order, shape).
fn parse_header(dict: &str) -> Result<(String, bool, Vec<usize>), NpyError> {
    let descr_rest = dict_str(dict, "descr")?;
    let quote = descr_rest.chars().next().ok_or(NpyError::Truncated)?;
    if quote != '\'' && quote != '"' {
        return Err(NpyError::BadHeader("descr is not a string".into()));
    }
    let body = &descr_rest[1..];
    let end = body.find(quote).ok_or_else(|| NpyError::BadHeader("unterminated descr".into()))?;
    let descr = body[..end].to_string();
    let fortran = dict_str(dict, "fortran_order")?.starts_with("True");
    let shape_rest = dict_str(dict, "shape")?;
    let open = shape_rest.strip_prefix('(').ok_or_else(|| NpyError::BadHeader("shape".into()))?;
    let close = open.find(')').ok_or_else(|| NpyError::BadHeader("shape".into()))?;
    let mut shape = Vec::new();
    for part in open[..close].split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let n = part.trim_end_matches('L').parse::<usize>();
        shape.push(n.map_err(|_| NpyError::BadHeader(format!("shape entry {part:?}")))?);
    }
    Ok((descr, fortran, shape))
}

/// Reads an integer `.npy` array (any of `<i1..<i8`, `<u1..<u8`, `|i1`, `|u1`) as i64.
pub fn read_int(bytes: &[u8]) -> Result<IntArray, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(NpyError::BadMagic);
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(NpyError::Truncated);
            }
            let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (usize::try_from(n).map_err(|_| NpyError::Truncated)?, 12)
        }
        _ => return Err(NpyError::BadMagic),
    };
    let data_start = hstart.checked_add(hlen).ok_or(NpyError::Truncated)?;
    let head = bytes.get(hstart..data_start).ok_or(NpyError::Truncated)?;
    let dict = std::str::from_utf8(head).map_err(|_| NpyError::BadHeader("not UTF-8".into()))?;
    let (descr, fortran, shape) = parse_header(dict)?;
    if fortran && shape.len() > 1 {
        return Err(NpyError::BadHeader("fortran_order arrays are not supported".into()));
    }
    let (signed, width) = match descr.as_str() {
        "<i8" => (true, 8),
        "<i4" => (true, 4),
        "<i2" => (true, 2),
        "|i1" | "<i1" => (true, 1),
        "<u8" => (false, 8),
        "<u4" => (false, 4),
        "<u2" => (false, 2),
        "|u1" | "<u1" => (false, 1),
        _ => return Err(NpyError::UnsupportedDtype(descr)),
    };
    let count = shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n));
    let count = count.ok_or_else(|| NpyError::BadHeader("shape overflows".into()))?;
    let need = count.checked_mul(width).ok_or(NpyError::Truncated)?;
    let data = bytes.get(data_start..).ok_or(NpyError::Truncated)?;
    if data.len() < need {
        return Err(NpyError::Truncated);
    }
    let values = data[..need]
        .chunks_exact(width)
        .map(|c| {
            let mut buf = [0u8; 8];
            buf[..width].copy_from_slice(c);
            let negative = signed && c[width - 1] & 0x80 != 0;
            if negative {
                buf[width..].fill(0xff);
            }
            // Values above i64::MAX (u64 only) wrap; labels never get there.
            i64::from_le_bytes(buf)
        })
        .collect();
    Ok(IntArray { shape, values })
}
