//! A small JSON reader, for the one file the lean library reads: the contention profile of the guided
//! policy (`profile.json`, written by `scripts/contention.py`). Read once, at `MPI_Init`; no
//! serialisation crate for that.

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    /// Members in the file's order.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// Member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A whole number that fits `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        match *self {
            Value::Number(n) if n >= 0.0 && n <= u32::MAX as f64 && n.fract() == 0.0 => Some(n as u32),
            _ => None,
        }
    }
}

/// Parses `text` (one value, surrounded by white space only); the error says where it went wrong.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser { s: text.as_bytes(), at: 0 };
    let v = p.value(0)?;
    p.space();
    if p.at != p.s.len() {
        return Err(p.error("text after the value"));
    }
    Ok(v)
}

/// Nesting deeper than this is refused (a profile nests a few levels).
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn space(&mut self) {
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        let hit = self.s.get(self.at) == Some(&c);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, String> {
        if self.s[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(v)
        } else {
            Err(self.error("an unknown word"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.space();
        match self.s.get(self.at) {
            None => Err(self.error("end of text where a value was expected")),
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                if self.eat(b'}') {
                    return Ok(Value::Object(members));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return Err(self.error("':' expected"));
                    }
                    members.push((key, self.value(depth + 1)?));
                    if self.eat(b'}') {
                        return Ok(Value::Object(members));
                    }
                    if !self.eat(b',') {
                        return Err(self.error("',' or '}' expected"));
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b']') {
                        return Ok(Value::Array(items));
                    }
                    if !self.eat(b',') {
                        return Err(self.error("',' or ']' expected"));
                    }
                }
            }
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => self.number(),
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c)) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .filter(|n| n.is_finite())
            .map(Value::Number)
            .ok_or_else(|| {
                self.at = start;
                self.error("not a value")
            })
    }

    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.at) != Some(&b'"') {
            return Err(self.error("'\"' expected"));
        }
        self.at += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.at) else { return Err(self.error("unterminated string")) };
            self.at += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| self.error("a string that is not UTF-8")),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else { return Err(self.error("unterminated string")) };
                    self.at += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode()?,
                        _ => return Err(self.error("an unknown escape")),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                c => out.push(c),
            }
        }
    }

    /// The code point of a `\u` escape (a surrogate pair's two escapes together).
    fn unicode(&mut self) -> Result<char, String> {
        let hex = |p: &mut Self| -> Result<u32, String> {
            let digits = p.s.get(p.at..p.at + 4).and_then(|d| std::str::from_utf8(d).ok());
            let v = digits.and_then(|d| u32::from_str_radix(d, 16).ok()).ok_or_else(|| p.error("a bad \\u escape"))?;
            p.at += 4;
            Ok(v)
        };
        let hi = hex(self)?;
        let code = if (0xd800..0xdc00).contains(&hi) && self.s[self.at..].starts_with(b"\\u") {
            self.at += 2;
            let lo = hex(self)?;
            0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff)
        } else {
            hi
        };
        Ok(char::from_u32(code).unwrap_or('\u{fffd}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_python_writes() {
        let v =
            parse(r#" {"a": [1, 2.5, -3e2, true, false, null], "s": "x\"\\\n\u00e9\ud83d\ude00", "o": {}, "e": []} "#)
                .unwrap();
        assert_eq!(
            v.get("a").unwrap().as_array().unwrap(),
            &[
                Value::Number(1.0),
                Value::Number(2.5),
                Value::Number(-300.0),
                Value::Bool(true),
                Value::Bool(false),
                Value::Null
            ]
        );
        assert_eq!(v.get("s").unwrap().as_str(), Some("x\"\\\né😀"));
        assert_eq!(v.get("o"), Some(&Value::Object(vec![])));
        assert_eq!(v.get("a").unwrap().as_array().unwrap()[0].as_u32(), Some(1));
        assert_eq!(Value::Number(2.5).as_u32(), None);
    }

    #[test]
    fn refuses_what_is_not_json() {
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "{\"a\":1,}", "\"\\x\"", "nan"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse(&deep).unwrap_err().contains("too deep"));
    }
}
