//! The text form of binary info values, as native MPICH's `MPIX_Info_set_hex` writes it:
//! each byte as two uppercase hex digits in memory order, except that a run of two or more zero bytes
//! is written `[N]` (so `0xDEADBEEF5555` as a little-endian u64 reads `EFBEADDE5555[2]`).
//! Decoding accepts exactly that form (hex digits of either case) and requires the decoded length
//! to equal the size of the destination, as native MPICH does.

use std::fmt::Write;

/// Encodes `bytes` in native MPICH's form.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            let run = bytes[i..].iter().take_while(|&&b| b == 0).count();
            if run >= 2 {
                let _ = write!(out, "[{run}]");
                i += run;
                continue;
            }
        }
        let _ = write!(out, "{:02X}", bytes[i]);
        i += 1;
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A character that is neither a hex digit nor part of a `[N]` run, at this position.
    BadChar(usize),
    /// An odd number of hex digits, or a `[` without a positive count and `]`.
    Malformed(usize),
    /// The text decodes to this many bytes, not the size asked for.
    WrongLength { decoded: usize, expected: usize },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::BadChar(p) => write!(f, "invalid character at position {p}"),
            DecodeError::Malformed(p) => write!(f, "malformed encoding at position {p}"),
            DecodeError::WrongLength { decoded, expected } => {
                write!(f, "the value holds {decoded} bytes, {expected} were asked for")
            }
        }
    }
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Walks `text`, calling `emit(position_in_output, byte, n)` for each run of `n` equal bytes (a literal
/// byte, or an `[N]` run of zeros), stopping with an error as soon as the output would pass `expected`
/// bytes: the decoded size is known before anything is written or allocated.
fn walk(text: &str, expected: usize, mut emit: impl FnMut(usize, u8, usize)) -> Result<(), DecodeError> {
    let s = text.as_bytes();
    let mut len = 0usize;
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'[' {
            let close = s[i..].iter().position(|&c| c == b']').ok_or(DecodeError::Malformed(i))? + i;
            let digits = &text[i + 1..close];
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) || digits.len() > 9 {
                return Err(DecodeError::Malformed(i));
            }
            let n: usize = digits.parse().map_err(|_| DecodeError::Malformed(i))?;
            if n == 0 {
                return Err(DecodeError::Malformed(i));
            }
            if len + n > expected {
                return Err(DecodeError::WrongLength { decoded: len + n, expected });
            }
            emit(len, 0, n);
            len += n;
            i = close + 1;
        } else {
            let hi = nibble(s[i]).ok_or(DecodeError::BadChar(i))?;
            let lo_c = *s.get(i + 1).ok_or(DecodeError::Malformed(i))?;
            let lo = nibble(lo_c).ok_or(DecodeError::BadChar(i + 1))?;
            if len + 1 > expected {
                return Err(DecodeError::WrongLength { decoded: len + 1, expected });
            }
            emit(len, hi << 4 | lo, 1);
            len += 1;
            i += 2;
        }
    }
    if len != expected {
        return Err(DecodeError::WrongLength { decoded: len, expected });
    }
    Ok(())
}

/// Decodes `text` into exactly `out.len()` bytes, in place and without allocating. `out` is written
/// only when the whole text is valid and has exactly that size.
pub fn decode_into(text: &str, out: &mut [u8]) -> Result<(), DecodeError> {
    walk(text, out.len(), |_, _, _| {})?;
    walk(text, out.len(), |at, b, n| out[at..at + n].fill(b))
}

/// Decodes `text` into exactly `expected` bytes.
pub fn decode(text: &str, expected: usize) -> Result<Vec<u8>, DecodeError> {
    // Validate first: the buffer is allocated only for a text that fills it exactly.
    walk(text, expected, |_, _, _| {})?;
    let mut out = vec![0u8; expected];
    decode_into(text, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs of native MPICH 5.0.2's `MPIX_Info_set_hex`, read back with `MPI_Info_get`.
    const NATIVE: &[(&[u8], &str)] = &[
        (&[0xef, 0xbe, 0xad, 0xde, 0x55, 0x55, 0, 0], "EFBEADDE5555[2]"),
        (&[0, 0, 0, 0, 0, 0, 0, 0], "[8]"),
        (&[0, 1, 0, 0, 2, 0, 0, 0, 3, 0], "0001[2]02[3]0300"),
        (&[0x0a, 0], "0A00"),
        (&[], ""),
    ];

    #[test]
    fn matches_native_outputs() {
        for (bytes, text) in NATIVE {
            assert_eq!(encode(bytes), *text);
            assert_eq!(decode(text, bytes.len()).unwrap(), *bytes);
        }
        let mut long = vec![0u8; 300];
        long[299] = 7;
        assert_eq!(encode(&long), "[299]07");
    }

    #[test]
    fn decode_rejects_malformed() {
        assert_eq!(decode("ABC", 2), Err(DecodeError::Malformed(2)));
        assert_eq!(decode("GG", 1), Err(DecodeError::BadChar(0)));
        assert_eq!(decode("[0]", 0), Err(DecodeError::Malformed(0)));
        assert_eq!(decode("[x]", 1), Err(DecodeError::Malformed(0)));
        assert_eq!(decode("[3", 3), Err(DecodeError::Malformed(0)));
        assert_eq!(decode("00", 2), Err(DecodeError::WrongLength { decoded: 1, expected: 2 }));
        assert_eq!(decode("[4]", 2), Err(DecodeError::WrongLength { decoded: 4, expected: 2 }));
        assert_eq!(decode("efbe", 2).unwrap(), vec![0xef, 0xbe]);
        // Asking for 2 GiB of a 2-byte text fails before anything that size is allocated.
        assert_eq!(decode("0A0B", 1 << 31), Err(DecodeError::WrongLength { decoded: 2, expected: 1 << 31 }));
    }

    #[test]
    fn decode_into_writes_only_a_valid_text() {
        let mut buf = [9u8; 4];
        assert!(decode_into("0102", &mut buf).is_err());
        assert_eq!(buf, [9; 4], "a wrong-length text leaves the buffer alone");
        assert!(decode_into("01[2]GG", &mut buf).is_err());
        assert_eq!(buf, [9; 4], "a malformed text leaves the buffer alone");
        decode_into("01[2]07", &mut buf).unwrap();
        assert_eq!(buf, [1, 0, 0, 7]);
    }

    /// Property: decode(encode(x)) == x, over random inputs biased towards zero runs.
    #[test]
    fn round_trip_random() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| if next() % 3 == 0 { 0 } else { next() as u8 }).collect();
            let text = encode(&bytes);
            assert!(!text.contains("[1]") && !text.contains("[0]"), "{text}");
            assert_eq!(decode(&text, len).unwrap(), bytes, "{text}");
            if len > 0 {
                assert!(decode(&text, len - 1).is_err());
            }
            assert!(decode(&text, len + 1).is_err());
        }
    }
}
