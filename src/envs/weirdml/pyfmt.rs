//! Python-compatible number formatting for the feedback text: the spec prints accuracies
//! "with Python `repr`-style shortest float" (§4), which Rust's `Display` does not match
//! (`0` vs `0.0`, `0.00001` vs `1e-05`).

/// `repr(x)` of a Python float: shortest round-trip digits, scientific when the decimal
/// exponent is < -4 or >= 16, always a `.0` on integral values.
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde<exp>".
    let sci = format!("{x:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let n = digits.len() as i32;
    let body = if point <= 0 {
        format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
    } else if point >= n {
        format!("{}{}.0", digits, "0".repeat((point - n) as usize))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{body}")
}

/// Seconds for messages like `Timeout after 120 s`: integral values without a fraction,
/// others as the shortest decimal.
pub fn seconds_text(s: f64) -> String {
    if s.is_finite() && s.fract() == 0.0 && s.abs() < 1e15 { format!("{}", s as i64) } else { format!("{s}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (0.535, "0.535"),
            (1.0, "1.0"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (2.5e-7, "2.5e-07"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
            (0.8725, "0.8725"),
            (-12.5, "-12.5"),
            (214.0 / 400.0, "0.535"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn seconds() {
        assert_eq!(seconds_text(120.0), "120");
        assert_eq!(seconds_text(2.0), "2");
        assert_eq!(seconds_text(0.5), "0.5");
    }
}
