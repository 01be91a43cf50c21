//! A few helpers to write JSON by hand (the report is small and flat; no serialisation crate needed).
use std::fmt::Write;

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number or `null`.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

/// `{"messages": m, "bytes": b}`.
pub fn traffic(messages: u64, bytes: u64) -> String {
    format!("{{\"messages\":{messages},\"bytes\":{bytes}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(opt::<u32>(None), "null");
        assert_eq!(opt(Some(3)), "3");
        assert_eq!(traffic(1, 8), "{\"messages\":1,\"bytes\":8}");
    }
}
