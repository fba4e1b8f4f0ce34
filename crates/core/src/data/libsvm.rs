//! LIBSVM / svmlight loader: `label idx:val ...` with 1-based strictly ascending indices,
//! `#` comments and ignored `qid:` tokens, into a [`Dataset`] held sparse (CSR) or dense as
//! `LoadOptions::layout` says (auto: CSR below 10% density). d is the largest index seen, or
//! `LoadOptions::features` when given (then a larger index is an error). Columns in error
//! messages are 1-based byte offsets within the line.
//!
//! Two passes over the text, so that only X is ever held: a quick scan for the number of rows,
//! the largest index and the number of pairs, then the full parse straight into X (CSR: memory
//! grows with the non-zeros, never with n * d).

use std::io::BufRead;
use std::path::Path;

use super::csv::{parse_value, Parsed, ValueSink};
use super::{Dataset, LabelBuilder, LoadOptions};
use crate::error::{Error, Result};
use crate::matrix::{CsrBuf, MatrixBuf};

/// Parses LIBSVM bytes from `path` into a dense dataset.
pub fn parse(path: &Path, bytes: &[u8], opts: &LoadOptions) -> Result<Dataset> {
    parse_with(path, || Ok(bytes), opts)
}

/// Parses LIBSVM text that `open` provides (called once per pass).
pub fn parse_with<R: BufRead>(
    path: &Path,
    open: impl FnMut() -> std::io::Result<R>,
    opts: &LoadOptions,
) -> Result<Dataset> {
    match parse_impl(path, open, opts, None)? {
        Out::Data(ds) => Ok(ds),
        Out::Streamed(..) => Err(Error::data(path, "internal: rows were streamed")),
    }
}

/// Parses LIBSVM text that `open` provides, sending each row's d values (zeros included) to
/// `sink`: memory O(d) for the row and O(n) for the labels, whatever the file's size.
pub fn stream_with<R: BufRead>(
    path: &Path,
    open: impl FnMut() -> std::io::Result<R>,
    opts: &LoadOptions,
    sink: &mut dyn ValueSink,
) -> Result<Parsed> {
    match parse_impl(path, open, opts, Some(sink))? {
        Out::Streamed(p) => Ok(p),
        Out::Data(_) => Err(Error::data(path, "internal: rows were not streamed")),
    }
}

/// What a parse made: a data set, or rows sent to a sink.
enum Out {
    Data(Dataset),
    Streamed(Parsed),
}

fn parse_impl<R: BufRead>(
    path: &Path,
    mut open: impl FnMut() -> std::io::Result<R>,
    opts: &LoadOptions,
    mut sink: Option<&mut dyn ValueSink>,
) -> Result<Out> {
    let io = |e| Error::io(path, e);
    let (n, max_index, pairs) = scan(path, open().map_err(io)?)?;
    if n == 0 {
        return Err(Error::data(path, "empty file: no rows"));
    }
    // d = 0 is refused after pass 2, which names a malformed token (such as index 0) first.
    let d = opts.features.unwrap_or(max_index);
    if d > u32::MAX as usize {
        let msg = format!("{d} features: at most {} are supported", u32::MAX);
        return Err(Error::data(path, msg));
    }

    // Pass 2: parse and check every token, straight into the dense X.
    let perr = |line: usize, col: usize, text: &[u8], msg: String| Error::Parse {
        path: path.to_path_buf(),
        line: Some(line),
        column: Some(col),
        text: String::from_utf8_lossy(text).into_owned(),
        msg,
    };
    let sparse = sink.is_none() && opts.layout.sparse_for(n, d, pairs);
    let streamed = sink.is_some();
    if let Some(s) = &mut sink {
        s.start(d, 0)?;
    }
    // Streamed: one row at a time.
    let target = match () {
        _ if streamed => Target::OneRow,
        _ if sparse => Target::Csr,
        _ => Target::Dense,
    };
    let (mut x, mut csr) = targets(path, n, d, pairs, target)?;
    let mut labels = LabelBuilder::default();
    let mut row = 0usize;
    for_each_line(open().map_err(io)?, |line_no, content| {
        let mut tokens = Tokens::new(content);
        let Some((lcol, label)) = tokens.next() else {
            return Ok(());
        };
        if row == n {
            return Err(Error::data(path, "the file changed while it was read"));
        }
        let label = row_label(label).map_err(|m| perr(line_no, lcol, label, m.into()))?;
        labels.push(label);
        let dense = if sparse {
            &mut [][..]
        } else if streamed {
            &mut x[..]
        } else {
            &mut x[row * d..(row + 1) * d]
        };
        let mut prev = 0usize;
        for (col, tok) in tokens {
            let Some((index, v)) =
                pair(tok, prev, d).map_err(|(at, text, msg)| perr(line_no, col + at, text, msg))?
            else {
                continue;
            };
            if !sparse {
                dense[index - 1] = v;
            } else if v != 0.0 {
                if csr.values.len() == pairs {
                    return Err(Error::data(path, "the file changed while it was read"));
                }
                csr.indices.push((index - 1) as u32);
                csr.values.push(v);
            }
            prev = index;
        }
        if sparse {
            csr.indptr.push(csr.values.len());
        }
        if let Some(s) = &mut sink {
            for v in x.iter_mut() {
                s.push(*v, row)?;
                *v = 0.0;
            }
        }
        row += 1;
        Ok(())
    })
    .map_err(io)??;
    if row != n {
        return Err(Error::data(path, "the file changed while it was read"));
    }
    if d == 0 {
        return Err(Error::data(path, "no features: every row has only a label"));
    }
    if streamed {
        return Ok(Out::Streamed((n, d, Some(labels.finish()), None)));
    }
    let x: MatrixBuf = if sparse { csr.into() } else { x.into() };
    Ok(Out::Data(Dataset::from_matrix(
        x,
        n,
        d,
        Some(labels.finish()),
        path.to_path_buf(),
    )))
}

/// A row's first token as a label: not an index:value pair, and valid UTF-8.
fn row_label(tok: &[u8]) -> std::result::Result<&str, &'static str> {
    if tok.contains(&b':') {
        return Err("expected a label before the first index:value pair");
    }
    std::str::from_utf8(tok).map_err(|_| "label is not valid UTF-8")
}

/// Pass 1: the rows, the largest index and the index:value pairs (malformed tokens are
/// reported by pass 2).
fn scan<R: BufRead>(path: &Path, r: R) -> Result<(usize, usize, usize)> {
    let (mut n, mut max_index, mut pairs) = (0usize, 0usize, 0usize);
    for_each_line(r, |_, content| {
        let mut tokens = Tokens::new(content);
        if tokens.next().is_some() {
            n += 1;
            for (_, tok) in tokens {
                if let Some(c) = tok.iter().position(|&b| b == b':') {
                    pairs += 1;
                    if let Some(i) = std::str::from_utf8(&tok[..c])
                        .ok()
                        .and_then(|k| k.parse::<usize>().ok())
                    {
                        max_index = max_index.max(i);
                    }
                }
            }
        }
        Ok(())
    })
    .map_err(|e| Error::io(path, e))??;
    Ok((n, max_index, pairs))
}

/// Where pass 2 puts the values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// CSR arrays with room for every pair, within the memory budget.
    Csr,
    /// One dense row at a time (streamed to a sink).
    OneRow,
    /// The dense X.
    Dense,
}

/// The arrays pass 2 fills for `target`.
fn targets(
    path: &Path,
    n: usize,
    d: usize,
    pairs: usize,
    target: Target,
) -> Result<(Vec<f32>, CsrBuf)> {
    let mut csr = CsrBuf::new();
    let x = match target {
        Target::OneRow => super::dense_zeros(path, 1, d)?,
        Target::Csr => Vec::new(),
        Target::Dense => super::dense_zeros(path, n, d)?,
    };
    if target == Target::Csr {
        let what = || {
            format!(
                "{}: {n} rows with {pairs} index:value pairs stored sparse",
                path.display()
            )
        };
        // A value and a column per pair, a row start per row.
        crate::limits::check(what, pairs as u128 + n as u128, 8)?;
        csr.indptr.reserve(n);
        csr.indices.reserve(pairs);
        csr.values.reserve(pairs);
    }
    Ok((x, csr))
}

/// A bad token: the byte offset of the bad part within the token, that part, and what is
/// wrong with it.
type BadToken<'t> = (usize, &'t [u8], String);

/// One token of a row after the label, in a row whose last index was `prev`, with `d`
/// features: its 1-based index and value, or `None` for a `qid:` token.
fn pair(
    tok: &[u8],
    prev: usize,
    d: usize,
) -> std::result::Result<Option<(usize, f32)>, BadToken<'_>> {
    let bad = |msg: String| (0, tok, msg);
    let Some(colon) = tok.iter().position(|&b| b == b':') else {
        return Err(bad("malformed pair: expected index:value".into()));
    };
    let (key, value) = (&tok[..colon], &tok[colon + 1..]);
    if key == b"qid" {
        return Ok(None);
    }
    let index: usize = std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.parse().ok())
        .ok_or_else(|| bad("malformed pair: index is not a positive integer".into()))?;
    if index == 0 {
        return Err(bad("index 0: indices are 1-based".into()));
    }
    if index == prev {
        return Err(bad(format!("duplicate index {index}")));
    }
    if index < prev {
        return Err(bad(format!("indices not ascending: {index} after {prev}")));
    }
    if index > d {
        return Err(bad(format!(
            "index {index} is past the {d} features expected"
        )));
    }
    let v = parse_value(value).map_err(|m| (colon + 1, value, m.to_string()))?;
    Ok(Some((index, v)))
}

/// Calls `f(line_number, content)` for each line, with any `#` comment and the line end
/// removed. The outer error is an I/O error, the inner one `f`'s.
fn for_each_line<R: BufRead>(
    mut r: R,
    mut f: impl FnMut(usize, &[u8]) -> Result<()>,
) -> std::io::Result<Result<()>> {
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0usize;
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            return Ok(Ok(()));
        }
        line_no += 1;
        let end = buf.iter().position(|&b| b == b'#').unwrap_or(buf.len());
        if let Err(e) = f(line_no, &buf[..end]) {
            return Ok(Err(e));
        }
    }
}

/// Whitespace-separated tokens with their 1-based byte column.
pub(super) struct Tokens<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Tokens<'a> {
    pub(super) fn new(s: &'a [u8]) -> Self {
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
    use super::super::Layout;
    use super::*;

    fn load(text: &str, features: Option<usize>) -> Result<Dataset> {
        load_as(text, features, Layout::Auto)
    }

    fn load_as(text: &str, features: Option<usize>, layout: Layout) -> Result<Dataset> {
        let opts = LoadOptions {
            features,
            layout,
            ..Default::default()
        };
        parse(Path::new("t.svm"), text.as_bytes(), &opts)
    }

    #[test]
    fn densifies_with_comments_and_qid() {
        let text = "# header\n+1 qid:3 1:0.5 3:2 # tail\n\n-1 2:-1\r\n";
        let ds = load_as(text, None, Layout::Dense).unwrap();
        assert_eq!((ds.n, ds.d), (2, 3));
        assert_eq!(&*ds.x.values(), &[0.5, 0.0, 2.0, 0.0, -1.0, 0.0]);
        // The same file held sparse: the non-zeros only, the same rows.
        let sp = load_as(text, None, Layout::Sparse).unwrap();
        let c = sp.x.csr().unwrap();
        assert_eq!(c.indptr, vec![0, 2, 3]);
        assert_eq!(
            (c.indices.clone(), c.values.clone()),
            (vec![0, 2, 1], vec![0.5, 2.0, -1.0])
        );
        assert_eq!(sp.x.view().to_dense(2, 3).to_vec(), &*ds.x.values());
        // Auto: 3 of 6 values are non-zero (50%), so dense; with 3 of 300, sparse.
        assert!(!load(text, None).unwrap().is_sparse());
        assert!(load(text, Some(100)).unwrap().is_sparse());
        // An explicit zero is not stored, and a row with no pair is an empty row.
        let z = load_as("1 2:0 5:1\n-1\n1 1:3\n", None, Layout::Sparse).unwrap();
        assert_eq!(z.x.csr().unwrap().indptr, vec![0, 1, 1, 2]);
        assert_eq!((z.n, z.d), (3, 5));
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
            ("1:2 1:3\n", "expected a label"),
        ] {
            let e = load(text, None).unwrap_err().to_string();
            assert!(e.contains("line 1") && e.contains(want), "{text:?}: {e}");
        }
        let e = load("1 1:1\n-1 5:1\n", Some(3)).unwrap_err().to_string();
        assert!(
            e.contains("line 2, column 4") && e.contains("past the 3"),
            "{e}"
        );
        let e = load("\n# only comments\n", None).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
    }
}
