//! Where each key of a JSON document is: its line, for error messages that name it.
//!
//! `serde_json::Value` keeps no positions, so the text is scanned once more (it is known to be
//! valid JSON by then): every object key and array element gets its path and the line it starts
//! on, and keys repeated within one object are listed (JSON parsers keep the last one silently;
//! in a config that is a mistake worth saying).

use std::collections::HashMap;

/// A path into a document: object keys and array indices (as decimal text).
pub(crate) type Path = Vec<String>;

/// The lines of a document's keys.
#[derive(Debug, Default)]
pub(crate) struct Index {
    lines: HashMap<Path, usize>,
    /// Keys that appear more than once in one object: the path and the line of the repeat.
    pub(crate) duplicates: Vec<(Path, usize)>,
}

impl Index {
    /// Scans `text` (valid JSON). A document this scanner cannot follow gives an empty index:
    /// messages then go without line numbers, never wrong ones.
    pub(crate) fn build(text: &str) -> Self {
        let mut scanner = Scanner {
            b: text.as_bytes(),
            i: 0,
            line: 1,
            index: Self::default(),
        };
        let mut path = Vec::new();
        if scanner.value(&mut path, 0).is_err() {
            return Self::default();
        }
        scanner.index
    }

    /// The line (1-based) `path` starts on: the key's line for an object member, the value's
    /// for an array element.
    pub(crate) fn line(&self, path: &[String]) -> Option<usize> {
        self.lines.get(path).copied()
    }

    /// The line of `path`, else of its nearest ancestor that has one.
    pub(crate) fn nearest_line(&self, path: &[String]) -> Option<usize> {
        (0..=path.len()).rev().find_map(|n| self.line(&path[..n]))
    }
}

/// Documents nest at most this deep (serde_json's own limit is 128).
const MAX_DEPTH: usize = 128;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    line: usize,
    index: Index,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn value(&mut self, path: &mut Path, depth: usize) -> Result<(), ()> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        self.ws();
        match self.peek().ok_or(())? {
            b'{' => {
                self.i += 1;
                let mut seen = std::collections::HashSet::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    let line = self.line;
                    let key = self.string()?;
                    path.push(key.clone());
                    if seen.insert(key) {
                        self.index.lines.entry(path.clone()).or_insert(line);
                    } else {
                        self.index.duplicates.push((path.clone(), line));
                    }
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(());
                    }
                    self.i += 1;
                    self.value(path, depth + 1)?;
                    path.pop();
                    self.ws();
                    match self.peek().ok_or(())? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(()),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                let mut n = 0usize;
                loop {
                    self.ws();
                    path.push(n.to_string());
                    self.index.lines.entry(path.clone()).or_insert(self.line);
                    self.value(path, depth + 1)?;
                    path.pop();
                    n += 1;
                    self.ws();
                    match self.peek().ok_or(())? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(()),
                    }
                }
            }
            b'"' => self.string().map(drop),
            _ => {
                // A number, `true`, `false` or `null`: up to the next delimiter.
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.i += 1;
                }
                Ok(())
            }
        }
    }

    /// A string token, decoded (escapes through serde_json).
    fn string(&mut self) -> Result<String, ()> {
        if self.peek() != Some(b'"') {
            return Err(());
        }
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'"' => {
                    let raw = std::str::from_utf8(&self.b[start..self.i]).map_err(|_| ())?;
                    return if escaped || raw.contains('\\') {
                        serde_json::from_str(raw).map_err(|_| ())
                    } else {
                        Ok(raw[1..raw.len() - 1].to_owned())
                    };
                }
                b'\n' => return Err(()),
                _ => {}
            }
            escaped |= c == b'\\';
        }
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(parts: &[&str]) -> Path {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn keys_and_elements_have_their_lines() {
        let text = "{\n  \"mcpServers\": {\n    \"py\": {\n      \"command\": \"python\",\n      \"args\": [\"a\",\n \"b\"]\n    }\n  },\n  \"health\": {\"cooldownSeconds\": 0}\n}\n";
        let index = Index::build(text);
        assert_eq!(index.line(&p(&["mcpServers"])), Some(2));
        assert_eq!(index.line(&p(&["mcpServers", "py", "command"])), Some(4));
        assert_eq!(index.line(&p(&["mcpServers", "py", "args", "1"])), Some(6));
        assert_eq!(index.line(&p(&["health", "cooldownSeconds"])), Some(9));
        assert_eq!(index.nearest_line(&p(&["health", "servers", "x"])), Some(9));
        assert!(index.duplicates.is_empty());
    }

    #[test]
    fn escaped_keys_and_repeats_are_found() {
        let text = "{\"a\\\"b\": 1,\n\"x\": {\"k\": \"v\\\\\", \"k\": 2}}";
        let index = Index::build(text);
        assert_eq!(index.line(&p(&["a\"b"])), Some(1));
        assert_eq!(index.duplicates, vec![(p(&["x", "k"]), 2)]);
    }
}
