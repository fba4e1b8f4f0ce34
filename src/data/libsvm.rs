//! LIBSVM / svmlight loader: `label idx:val ...` with 1-based strictly ascending indices,
//! `#` comments and ignored `qid:` tokens, densified into the same [`Dataset`].
//! d is the largest index seen, or `LoadOptions::features` when given (then a larger index
//! is an error). Columns in error messages are 1-based byte offsets within the line.

use std::path::Path;

use super::csv::parse_value;
use super::{Dataset, LabelBuilder, LoadOptions};
use crate::error::{Error, Result};

/// Parses LIBSVM bytes from `path` into a dense dataset.
pub fn parse(path: &Path, bytes: &[u8], opts: &LoadOptions) -> Result<Dataset> {
    let perr = |line: usize, col: usize, text: &[u8], msg: String| Error::Parse {
        path: path.to_path_buf(),
        line: Some(line),
        column: Some(col),
        text: String::from_utf8_lossy(text).into_owned(),
        msg,
    };
    let mut row_end: Vec<usize> = Vec::new();
    let mut idx: Vec<u32> = Vec::new();
    let mut val: Vec<f32> = Vec::new();
    let mut labels = LabelBuilder::default();
    let mut max_index = 0u32;

    for (ln, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = ln + 1;
        let content = match raw.iter().position(|&b| b == b'#') {
            Some(p) => &raw[..p],
            None => raw,
        };
        let mut tokens = Tokens::new(content);
        let Some((lcol, label)) = tokens.next() else {
            continue;
        };
        if label.contains(&b':') {
            return Err(perr(
                line_no,
                lcol,
                label,
                "expected a label before the first index:value pair".into(),
            ));
        }
        let label = std::str::from_utf8(label)
            .map_err(|_| perr(line_no, lcol, label, "label is not valid UTF-8".into()))?;
        labels.push(label);
        let mut prev = 0u32;
        for (col, tok) in tokens {
            let Some(colon) = tok.iter().position(|&b| b == b':') else {
                return Err(perr(
                    line_no,
                    col,
                    tok,
                    "malformed pair: expected index:value".into(),
                ));
            };
            let (key, value) = (&tok[..colon], &tok[colon + 1..]);
            if key == b"qid" {
                continue;
            }
            let index: u32 = std::str::from_utf8(key)
                .ok()
                .and_then(|k| k.parse().ok())
                .ok_or_else(|| {
                    perr(
                        line_no,
                        col,
                        tok,
                        "malformed pair: index is not a positive integer".into(),
                    )
                })?;
            if index == 0 {
                return Err(perr(
                    line_no,
                    col,
                    tok,
                    "index 0: indices are 1-based".into(),
                ));
            }
            if index == prev {
                return Err(perr(line_no, col, tok, format!("duplicate index {index}")));
            }
            if index < prev {
                return Err(perr(
                    line_no,
                    col,
                    tok,
                    format!("indices not ascending: {index} after {prev}"),
                ));
            }
            if let Some(d) = opts.features {
                if index as usize > d {
                    return Err(perr(
                        line_no,
                        col,
                        tok,
                        format!("index {index} is past the {d} features expected"),
                    ));
                }
            }
            let v = parse_value(value)
                .map_err(|m| perr(line_no, col + colon + 1, value, m.to_string()))?;
            prev = index;
            max_index = max_index.max(index);
            idx.push(index - 1);
            val.push(v);
        }
        row_end.push(idx.len());
    }
    let n = row_end.len();
    if n == 0 {
        return Err(Error::data(path, "empty file: no rows"));
    }
    let d = opts.features.unwrap_or(max_index as usize);
    if d == 0 {
        return Err(Error::data(path, "no features: every row has only a label"));
    }
    let mut x = vec![0f32; n * d];
    let mut start = 0;
    for (i, &end) in row_end.iter().enumerate() {
        let row = &mut x[i * d..(i + 1) * d];
        for k in start..end {
            row[idx[k] as usize] = val[k];
        }
        start = end;
    }
    Ok(Dataset {
        x,
        n,
        d,
        labels: Some(labels.finish()),
        source: path.to_path_buf(),
    })
}

/// Whitespace-separated tokens with their 1-based byte column.
struct Tokens<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a [u8]) -> Self {
        Tokens { s, pos: 0 }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = (usize, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if self.pos >= self.s.len() {
            return None;
        }
        let start = self.pos;
        while self.pos < self.s.len() && !self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        Some((start + 1, &self.s[start..self.pos]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, features: Option<usize>) -> Result<Dataset> {
        let opts = LoadOptions {
            features,
            ..Default::default()
        };
        parse(Path::new("t.svm"), text.as_bytes(), &opts)
    }

    #[test]
    fn densifies_with_comments_and_qid() {
        let ds = load("# header\n+1 qid:3 1:0.5 3:2 # tail\n\n-1 2:-1\n", None).unwrap();
        assert_eq!((ds.n, ds.d), (2, 3));
        assert_eq!(ds.x, vec![0.5, 0.0, 2.0, 0.0, -1.0, 0.0]);
        assert_eq!(ds.labels.unwrap().classes, vec!["-1", "+1"]);
        let ds = load("1 1:1\n", Some(4)).unwrap();
        assert_eq!(ds.d, 4);
    }

    #[test]
    fn bad_pairs_are_named() {
        for (text, want) in [
            ("1 0:1\n", "index 0"),
            ("1 2:1 2:3\n", "duplicate index 2"),
            ("1 3:1 2:3\n", "not ascending"),
            ("1 2=1\n", "malformed pair"),
            ("1 x:1\n", "malformed pair"),
            ("1 1:abc\n", "not a number"),
            ("1 1:inf\n", "infinity"),
        ] {
            let e = load(text, None).unwrap_err().to_string();
            assert!(e.contains("line 1") && e.contains(want), "{text:?}: {e}");
        }
        let e = load("1 1:1\n-1 5:1\n", Some(3)).unwrap_err().to_string();
        assert!(
            e.contains("line 2, column 4") && e.contains("past the 3"),
            "{e}"
        );
    }
}
