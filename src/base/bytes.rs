//! Byte helpers: lowercase hex both ways and a comparison whose time does not
//! depend on where two secrets first differ.

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The bytes of a hex string (either case); `None` unless every character is
/// a hex digit and there is an even number of them.
pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// Whether `a` and `b` are equal, looking at every byte whatever the first
/// difference (the length is not secret).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // `black_box` keeps the optimiser from turning the fold into an early exit.
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| std::hint::black_box(acc | (x ^ y)));
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        for bytes in [&b""[..], b"\x00", b"\x01\xab\xff", b"memd"] {
            let text = hex(bytes);
            assert_eq!(text.len(), bytes.len() * 2);
            assert_eq!(from_hex(&text).as_deref(), Some(bytes));
            assert_eq!(from_hex(&text.to_uppercase()).as_deref(), Some(bytes));
        }
        assert_eq!(hex(b"\x01\xab\xff"), "01abff");
        for bad in ["0", "0g", "zz", "0x01", "é1"] {
            assert_eq!(from_hex(bad), None, "{bad}");
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        for (a, b, same) in [
            (&b""[..], &b""[..], true),
            (b"ab", b"ab", true),
            (b"ab", b"ac", false),
            (b"ab", b"abc", false),
            (b"\x00", b"\x80", false),
        ] {
            assert_eq!(constant_time_eq(a, b), same, "{a:?} {b:?}");
        }
    }
}
