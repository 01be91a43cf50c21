//! Text helpers of the report: C strings read back, cells cut to a table's width.
use std::os::raw::c_char;

/// The text of a NUL-terminated C buffer.
pub fn cstr(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `s` cut to `n` characters (the last one an ellipsis when cut).
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
