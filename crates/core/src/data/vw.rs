//! Vowpal Wabbit's text format, one example a line:
//!
//! ```text
//! [label] [importance] [tag]|namespace[:value] feature[:value] ... |namespace ...
//! 1 1.0 zebra|MetricFeatures:3.28 height:1.5 length:2.0 |Says black with white stripes
//! -1 'horse|MetricFeatures:1.5 height:1.7 |Says brown
//! |Says black white    (no label: for predict)
//! ```
//!
//! Labels are numbers: -1/1 or 0/1 for two classes, 1..K for more (any numbers name classes,
//! as in the other formats). The importance is the row's weight (finite, >= 0; 1 when absent).
//! A tag (a token that starts with `'`, or one that touches the first `|`) names the example
//! and is not data. After each `|` comes a namespace name (none when a space follows the `|`)
//! with an optional value that scales its features, then its features, each a name with an
//! optional value (1 when absent). Features are hashed into 2^b columns ([`Hashing`]), with
//! the quadratic interactions it names; features that land in one column are added, and a
//! row is held sparse (CSR): memory grows with the non-zeros, not with 2^b.
//!
//! Errors name the file, the line and the 1-based byte column. Not supported, each a clear
//! error: label:cost and other label forms with `:`, an initial prediction (a third number
//! before the `|`), rows with labels mixed with rows without.

use std::io::{BufRead, Read};

use rayon::prelude::*;
use std::path::Path;

use super::csv::parse_value;
use super::hashing::Hashing;
use super::libsvm::Tokens;
use super::{Dataset, LabelBuilder, LoadOptions};
use crate::error::{Error, Result};
use crate::matrix::{CsrBuf, MatrixBuf};

/// Parses Vowpal Wabbit text that `open` provides (read once) into a sparse data set of
/// `2^bits` columns, hashed as `opts.hashing` says (Vowpal Wabbit's 18 bits, signed, when it
/// says nothing).
pub fn parse_with<R: BufRead>(
    path: &Path,
    mut open: impl FnMut() -> std::io::Result<R>,
    opts: &LoadOptions,
) -> Result<Dataset> {
    let hashing = checked_hashing(path, opts)?;
    let d = hashing.columns();
    let mut r = open().map_err(|e| Error::io(path, e))?;
    let mut all = Rows::new(path, &hashing);
    let mut labels = LabelBuilder::default();
    let mut reader = BlockReader::default();
    while let Some(parts) = reader.next_parts(path, &hashing, &mut r)? {
        for part in parts {
            all.append(part, &mut labels)?;
        }
    }
    all.finish(d, labels)
}

/// The hashing `opts` name (Vowpal Wabbit's 18 bits, signed, when they name none), checked,
/// and a feature count, if given, that it matches.
fn checked_hashing(path: &Path, opts: &LoadOptions) -> Result<Hashing> {
    let hashing = opts.hashing.clone().unwrap_or_default();
    if hashing.hashes_csv() {
        return Err(Error::param(
            crate::error::Param::Categorical,
            hashing.categorical.join(","),
            format!(
                "names CSV columns, and {} is Vowpal Wabbit text (its features are hashed by \
                 name already)",
                path.display()
            ),
        ));
    }
    hashing.check().map_err(|m| Error::data(path, m))?;
    let d = hashing.columns();
    if let Some(f) = opts.features.filter(|&f| f != d) {
        return Err(Error::data(
            path,
            format!(
                "Vowpal Wabbit input is hashed into 2^{} = {d} columns, not {f} \
                 (set the hash bits instead)",
                hashing.bits
            ),
        ));
    }
    Ok(hashing)
}

/// Reads whole lines a block at a time and parses each block on every core: the rows, and
/// any error's line, are those of a parse line by line.
#[derive(Default)]
struct BlockReader {
    /// The next block's first line (1-based).
    next_line: usize,
    text: Vec<u8>,
    /// Bytes read so far.
    bytes: u64,
}

impl BlockReader {
    /// The next block's rows, in parts in order; `None` at the end of the input.
    fn next_parts<'a, R: BufRead>(
        &mut self,
        path: &'a Path,
        hashing: &'a Hashing,
        r: &mut R,
    ) -> Result<Option<Vec<Rows<'a>>>> {
        let io = |e| Error::io(path, e);
        self.next_line = self.next_line.max(1);
        self.text.clear();
        r.take(BLOCK_BYTES)
            .read_to_end(&mut self.text)
            .map_err(io)?;
        if self.text.is_empty() {
            return Ok(None);
        }
        if self.text.last() != Some(&b'\n') {
            r.read_until(b'\n', &mut self.text).map_err(io)?;
        }
        self.bytes += self.text.len() as u64;
        let cuts = 4 * rayon::current_num_threads();
        let mut parts = Vec::with_capacity(cuts);
        let mut line = self.next_line;
        for text in line_parts(&self.text, cuts) {
            parts.push((line, text));
            line += text.iter().filter(|&&b| b == b'\n').count();
        }
        self.next_line = line;
        parts
            .into_par_iter()
            .map(|(start, text)| {
                let mut rows = Rows::new(path, hashing);
                for (k, l) in text.split_inclusive(|&b| b == b'\n').enumerate() {
                    rows.line(start + k, l)?;
                }
                Ok(rows)
            })
            .collect::<Result<Vec<Rows>>>()
            .map(Some)
    }
}

/// Vowpal Wabbit text read as a stream of blocks of rows, never held whole: a reader thread
/// reads 8 MiB of whole lines at a time, parses shares of them on every core, and hands the
/// shares over in order, each a block (a data set of its own: its rows, their labels as its
/// classes, importances as row weights, hashed as the options say), while the caller uses
/// the text before. Memory holds two texts' rows at most. Ends at the first error (the
/// file, line and column named), which it yields.
pub struct Blocks {
    /// Each text's blocks, then `None` at the end of the input (or an error).
    rx: std::sync::mpsc::Receiver<Result<Option<Vec<Block>>>>,
    /// The blocks of the last text received, in reverse order.
    ready: Vec<Block>,
    /// The end (or an error) was received: nothing follows.
    done: bool,
    /// The input, for the error of a reader that stopped without saying why.
    path: std::path::PathBuf,
}

/// One block of a [`Blocks`] stream.
pub struct Block {
    /// Its rows.
    pub data: Dataset,
    /// Bytes of text read up to the end of the text this block came from.
    pub bytes: u64,
}

impl Iterator for Blocks {
    type Item = Result<Block>;

    fn next(&mut self) -> Option<Result<Block>> {
        while self.ready.is_empty() {
            if self.done {
                return None;
            }
            match self.rx.recv() {
                Ok(Ok(Some(mut parts))) => {
                    parts.reverse();
                    self.ready = parts;
                }
                Ok(Ok(None)) => self.done = true,
                Ok(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                // The reader ended without the end of the input or an error: never a
                // shorter input in silence.
                Err(_) => {
                    self.done = true;
                    return Some(Err(Error::data(
                        &self.path,
                        "the reader of the input stopped before its end",
                    )));
                }
            }
        }
        self.ready.pop().map(Ok)
    }
}

/// Streams the Vowpal Wabbit text at `path` (`-`: standard input) a block at a time
/// ([`Blocks`]), hashed as `opts.hashing` says (Vowpal Wabbit's 18 bits, signed, when it says
/// nothing).
pub fn blocks(path: &Path, opts: &LoadOptions) -> Result<Blocks> {
    let hashing = checked_hashing(path, opts)?;
    let input: Box<dyn BufRead + Send> = if path == Path::new("-") {
        Box::new(std::io::BufReader::with_capacity(1 << 20, std::io::stdin()))
    } else {
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        Box::new(std::io::BufReader::with_capacity(1 << 20, f))
    };
    // The reader parses the next block while the caller uses one, then waits to hand it
    // over: two blocks in memory at most. Each part of a block (a share of its lines, parsed
    // on one core) goes over as a block of its own, in order: never copied into one.
    let (tx, rx) = std::sync::mpsc::sync_channel(0);
    let name = path.to_path_buf();
    let path = path.to_path_buf();
    std::thread::Builder::new()
        .name("rosenblatt-vw-reader".into())
        .spawn(move || {
            let mut r = input;
            let mut reader = BlockReader::default();
            let d = hashing.columns();
            loop {
                let parts = match reader.next_parts(&path, &hashing, &mut r) {
                    Ok(None) => {
                        let _ = tx.send(Ok(None));
                        return;
                    }
                    Ok(Some(parts)) => parts
                        .into_iter()
                        .filter(|part| part.csr.n() > 0)
                        .map(|part| {
                            let mut labels = LabelBuilder::default();
                            for name in &part.names {
                                labels.push(name);
                            }
                            part.finish(d, labels)
                        })
                        .collect::<Result<Vec<Dataset>>>(),
                    Err(e) => Err(e),
                };
                let bytes = reader.bytes;
                let sent = match parts {
                    Ok(parts) => tx.send(Ok(Some(
                        parts
                            .into_iter()
                            .map(|data| Block { data, bytes })
                            .collect(),
                    ))),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if sent.is_err() {
                    return; // The caller stopped listening.
                }
            }
        })
        .map_err(|e| Error::io(&name, e))?;
    Ok(Blocks {
        rx,
        ready: Vec::new(),
        done: false,
        path: name,
    })
}

/// Bytes of text read at a time (then cut into parts for the cores).
const BLOCK_BYTES: u64 = 8 << 20;

/// `text` cut into about `parts` pieces of whole lines (the last may lack its line end).
fn line_parts(text: &[u8], parts: usize) -> Vec<&[u8]> {
    let step = text.len().div_ceil(parts.max(1)).max(1);
    let mut out = Vec::with_capacity(parts);
    let mut at = 0;
    while at < text.len() {
        let end = match text[(at + step).min(text.len())..]
            .iter()
            .position(|&b| b == b'\n')
        {
            Some(p) => (at + step).min(text.len()) + p + 1,
            None => text.len(),
        };
        out.push(&text[at..end]);
        at = end;
    }
    out
}

/// What the parse has read so far.
struct Rows<'a> {
    path: &'a Path,
    hashing: &'a Hashing,
    /// The interactions as pairs of namespace initials.
    pairs: Vec<(u8, u8)>,
    csr: CsrBuf,
    /// The labelled rows' labels, in order.
    names: Vec<String>,
    /// Rows with and without a label, and the line of the first of each.
    labelled: (usize, Option<usize>),
    unlabelled: (usize, Option<usize>),
    weights: Vec<f32>,
    /// One row's features: (namespace initial, hash, value), and its entries.
    feats: Vec<(u8, u32, f32)>,
    entries: Vec<(u32, f32)>,
    /// Bytes the rows take, checked against the memory budget.
    budget: u64,
}

impl<'a> Rows<'a> {
    fn new(path: &'a Path, hashing: &'a Hashing) -> Self {
        let pairs = hashing
            .quadratic
            .iter()
            .map(|q| {
                // Each character's first byte, as a namespace's initial is its name's.
                let mut first = q.chars().map(|c| c.to_string().as_bytes()[0]);
                (first.next().unwrap_or(0), first.next().unwrap_or(0))
            })
            .collect();
        Rows {
            path,
            hashing,
            pairs,
            csr: CsrBuf::new(),
            names: Vec::new(),
            labelled: (0, None),
            unlabelled: (0, None),
            weights: Vec::new(),
            feats: Vec::new(),
            entries: Vec::new(),
            budget: crate::limits::budget(),
        }
    }

    fn err(&self, line: usize, col: usize, text: &[u8], msg: impl Into<String>) -> Error {
        Error::Parse {
            path: self.path.to_path_buf(),
            line: Some(line),
            column: Some(col),
            text: String::from_utf8_lossy(text).into_owned(),
            msg: msg.into(),
        }
    }

    /// One line: a row, or nothing when blank.
    fn line(&mut self, line_no: usize, line: &[u8]) -> Result<()> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let Some(bar) = line.iter().position(|&b| b == b'|') else {
            return Err(self.err(
                line_no,
                1,
                line,
                "no '|': a Vowpal Wabbit example has its features after a '|'",
            ));
        };
        let (label, weight) = self.header(line_no, &line[..bar])?;
        self.feats.clear();
        self.features(line_no, line, bar)?;
        self.row(label, weight, line_no)
    }

    /// The label and importance before the first `|` (the tag dropped).
    fn header<'l>(&self, line_no: usize, head: &'l [u8]) -> Result<(Option<&'l str>, f32)> {
        let mut toks: Vec<(usize, &[u8])> = Tokens::new(head).collect();
        // A tag: the token that touches the '|' (unless it is a lone number: the label, as
        // in "1|f a"), or one that starts with an apostrophe.
        let touches = head.last().is_some_and(|b| !b.is_ascii_whitespace());
        if let Some(&(_, t)) = toks.last() {
            let lone_number = toks.len() == 1
                && std::str::from_utf8(t).is_ok_and(|s| super::class_value(s).is_some());
            if t.starts_with(b"'") || (touches && !lone_number) {
                toks.pop();
            }
        }
        if let Some(&(col, t)) = toks.iter().find(|(_, t)| t.starts_with(b"'")) {
            return Err(self.err(
                line_no,
                col,
                t,
                "a tag must be the last token before the '|'",
            ));
        }
        let mut it = toks.into_iter();
        let label = match it.next() {
            None => None,
            Some((col, t)) => {
                if t.contains(&b':') {
                    return Err(self.err(
                        line_no,
                        col,
                        t,
                        "label forms with ':' (costs, probabilities) are not supported: a \
                         label is a class number",
                    ));
                }
                let s = std::str::from_utf8(t)
                    .ok()
                    .filter(|s| super::class_value(s).is_some())
                    .ok_or_else(|| {
                        self.err(line_no, col, t, "a label is a number (-1/1, 0/1 or 1..K)")
                    })?;
                Some(s)
            }
        };
        let weight = match it.next() {
            None => 1.0,
            Some((col, t)) => match parse_value(t) {
                Ok(w) if w >= 0.0 => w,
                Ok(_) => return Err(self.err(line_no, col, t, "an importance is >= 0")),
                Err(m) => {
                    return Err(self.err(line_no, col, t, format!("importance: {m}")));
                }
            },
        };
        if let Some((col, t)) = it.next() {
            return Err(self.err(
                line_no,
                col,
                t,
                "a third number before the '|' (an initial prediction) is not supported",
            ));
        }
        Ok((label, weight))
    }

    /// The namespaces and features after `line[bar]`, into `self.feats`.
    fn features(&mut self, line_no: usize, line: &[u8], bar: usize) -> Result<()> {
        let mut at = bar;
        while at < line.len() {
            // line[at] is a '|': the section runs to the next one.
            let start = at + 1;
            let end = line[start..]
                .iter()
                .position(|&b| b == b'|')
                .map_or(line.len(), |p| start + p);
            let section = &line[start..end];
            let mut toks = Tokens::new(section).map(|(c, t)| (start + c, t));
            // A namespace name touches its '|'.
            let (initial, seed, scale) = match section.first() {
                Some(b) if !b.is_ascii_whitespace() => {
                    let (col, t) = toks.next().expect("a token starts the section");
                    let (name, value) = split_value(t);
                    let scale = match value {
                        None => 1.0,
                        Some(v) => parse_value(v).map_err(|m| {
                            self.err(line_no, col, t, format!("namespace value: {m}"))
                        })?,
                    };
                    if name.is_empty() {
                        return Err(self.err(line_no, col, t, "a namespace value with no name"));
                    }
                    (name[0], Hashing::namespace_seed(name), scale)
                }
                _ => (b' ', 0, 1.0),
            };
            for (col, t) in toks {
                let (name, value) = split_value(t);
                if name.is_empty() {
                    return Err(self.err(line_no, col, t, "a feature value with no name"));
                }
                let v = match value {
                    None => 1.0,
                    Some(v) => parse_value(v)
                        .map_err(|m| self.err(line_no, col, t, format!("feature value: {m}")))?,
                };
                let v = v * scale;
                if !v.is_finite() {
                    return Err(self.err(
                        line_no,
                        col,
                        t,
                        "the value times its namespace's is out of f32 range",
                    ));
                }
                if v != 0.0 {
                    self.feats
                        .push((initial, Hashing::feature_hash(name, seed), v));
                }
            }
            at = end;
        }
        Ok(())
    }

    /// Hashes the row's features (and their interactions) into columns and appends it.
    fn row(&mut self, label: Option<&str>, weight: f32, line_no: usize) -> Result<()> {
        push_hashed(
            self.hashing,
            &self.pairs,
            &self.feats,
            &mut self.entries,
            &mut self.csr,
        )
        .map_err(|()| {
            Error::data(
                self.path,
                format!("line {line_no}: the features of one column add up out of f32 range"),
            )
        })?;
        let seen = if label.is_some() {
            &mut self.labelled
        } else {
            &mut self.unlabelled
        };
        seen.0 += 1;
        seen.1.get_or_insert(line_no);
        if let Some(l) = label {
            self.names.push(l.to_string());
        }
        self.weights.push(weight);
        Ok(())
    }

    /// Appends the rows `part` parsed after these (their labels into `labels`), within the
    /// memory budget.
    fn append(&mut self, part: Rows<'_>, labels: &mut LabelBuilder) -> Result<()> {
        let base = self.csr.nnz();
        self.csr.indices.extend_from_slice(&part.csr.indices);
        self.csr.values.extend_from_slice(&part.csr.values);
        self.csr
            .indptr
            .extend(part.csr.indptr[1..].iter().map(|&p| base + p));
        for name in &part.names {
            labels.push(name);
        }
        self.weights.extend_from_slice(&part.weights);
        for (all, p) in [
            (&mut self.labelled, part.labelled),
            (&mut self.unlabelled, part.unlabelled),
        ] {
            all.0 += p.0;
            all.1 = all.1.or(p.1);
        }
        let bytes = 8 * (self.csr.nnz() as u64 + self.csr.indptr.len() as u64)
            + 4 * self.weights.len() as u64;
        if bytes > self.budget {
            return Err(Error::Memory {
                what: format!(
                    "{}: {} rows with {} hashed non-zeros",
                    self.path.display(),
                    self.csr.n(),
                    self.csr.nnz()
                ),
                bytes,
                available: self.budget,
            });
        }
        Ok(())
    }

    fn finish(self, d: usize, labels: LabelBuilder) -> Result<Dataset> {
        let n = self.csr.n();
        if n == 0 {
            return Err(Error::data(self.path, "empty file: no examples"));
        }
        if let ((_, Some(a)), (_, Some(b))) = (self.labelled, self.unlabelled) {
            return Err(Error::data(
                self.path,
                format!(
                    "some examples have labels (line {a}) and some do not (line {b}): label \
                     every example, or none (to predict)"
                ),
            ));
        }
        let labels = (self.labelled.0 > 0).then(|| labels.finish());
        let mut ds = Dataset::from_matrix(
            MatrixBuf::Csr(self.csr),
            n,
            d,
            labels,
            self.path.to_path_buf(),
        );
        if self.weights.iter().any(|&w| w != 1.0) {
            ds.weights = Some(self.weights);
        }
        ds.hashing = Some(self.hashing.clone());
        Ok(ds)
    }
}

/// Hashes one row's features `feats` (namespace initial, hash, value) and the interactions
/// `pairs` of namespace initials into columns (features in one column added, in column
/// order; `entries` is scratch) and appends the row to `csr`. `Err` where a column's sum
/// leaves the f32 range (nothing appended).
pub(crate) fn push_hashed(
    hashing: &Hashing,
    pairs: &[(u8, u8)],
    feats: &[(u8, u32, f32)],
    entries: &mut Vec<(u32, f32)>,
    csr: &mut CsrBuf,
) -> std::result::Result<(), ()> {
    entries.clear();
    for &(_, h, v) in feats {
        let (col, s) = hashing.place(h);
        entries.push((col, s * v));
    }
    for &(a, b) in pairs {
        for (i, &(ia, ha, va)) in feats.iter().enumerate() {
            if ia != a {
                continue;
            }
            // For "aa" each unordered pair of distinct features once.
            let from = if a == b { i + 1 } else { 0 };
            for &(ib, hb, vb) in &feats[from..] {
                if ib == b {
                    let (col, s) = hashing.place(Hashing::pair_hash(ha, hb));
                    entries.push((col, s * va * vb));
                }
            }
        }
    }
    entries.sort_unstable_by_key(|e| e.0);
    let mut merged: Vec<(u32, f32)> = Vec::with_capacity(entries.len());
    for &(c, v) in entries.iter() {
        match merged.last_mut() {
            Some(last) if last.0 == c => last.1 += v,
            _ => merged.push((c, v)),
        }
    }
    if merged.iter().any(|e| !e.1.is_finite()) {
        return Err(());
    }
    csr.push_row(merged.into_iter().filter(|&(_, v)| v != 0.0));
    Ok(())
}

/// `name[:value]`: the name and the value's text (split at the last ':').
fn split_value(t: &[u8]) -> (&[u8], Option<&[u8]>) {
    match t.iter().rposition(|&b| b == b':') {
        Some(c) => (&t[..c], Some(&t[c + 1..])),
        None => (t, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::hashing::HashSign;

    #[test]
    fn a_stream_whose_reader_stops_before_the_end_is_an_error_not_a_shorter_input() {
        let (tx, rx) = std::sync::mpsc::sync_channel(0);
        drop(tx);
        let mut b = Blocks {
            rx,
            ready: Vec::new(),
            done: false,
            path: "x.vw".into(),
        };
        match b.next() {
            Some(Err(e)) => assert!(e.to_string().contains("stopped before its end"), "{e}"),
            _ => panic!("expected an error"),
        }
        assert!(b.next().is_none());
        // The reader's end marker ends the stream cleanly.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.vw");
        std::fs::write(&p, "1 |a x\n-1 |a y\n").unwrap();
        let rows: usize = blocks(&p, &LoadOptions::default())
            .unwrap()
            .map(|b| b.unwrap().data.n)
            .sum();
        assert_eq!(rows, 2);
    }

    fn load(text: &str, hashing: Option<Hashing>) -> Result<Dataset> {
        let opts = LoadOptions {
            hashing,
            ..Default::default()
        };
        parse_with(Path::new("t.vw"), || Ok(text.as_bytes()), &opts)
    }

    /// The row's (column, value) pairs.
    fn row(ds: &Dataset, i: usize) -> Vec<(u32, f32)> {
        let c = ds.x.csr().unwrap();
        let r = c.indptr[i]..c.indptr[i + 1];
        c.indices[r.clone()]
            .iter()
            .copied()
            .zip(c.values[r].iter().copied())
            .collect()
    }

    /// Where a feature goes: (column, signed value).
    fn at(h: &Hashing, ns: &str, name: &str, v: f32) -> (u32, f32) {
        let (col, s) = h.place(Hashing::feature_hash(
            name.as_bytes(),
            Hashing::namespace_seed(ns.as_bytes()),
        ));
        (col, s * v)
    }

    #[test]
    fn the_documented_example_hashes_every_feature_with_its_namespace() {
        // Vowpal Wabbit's input-format page: a tag touching the bar, namespace values,
        // features with and without values.
        let text = "1 1.0 zebra|MetricFeatures:3.28 height:1.5 length:2.0 |Says black with \
                    white stripes |OtherFeatures NumberOfLegs:4.0 HasStripes\n";
        let h = Hashing::default();
        let ds = load(text, None).unwrap();
        assert_eq!((ds.n, ds.d), (1, 1 << 18));
        assert_eq!(ds.labels.as_ref().unwrap().classes, vec!["1"]);
        assert!(ds.weights.is_none(), "importance 1 everywhere: no weights");
        assert_eq!(ds.hashing, Some(h.clone()));
        let mut want = vec![
            at(&h, "MetricFeatures", "height", 1.5 * 3.28),
            at(&h, "MetricFeatures", "length", 2.0 * 3.28),
            at(&h, "Says", "black", 1.0),
            at(&h, "Says", "with", 1.0),
            at(&h, "Says", "white", 1.0),
            at(&h, "Says", "stripes", 1.0),
            at(&h, "OtherFeatures", "NumberOfLegs", 4.0),
            at(&h, "OtherFeatures", "HasStripes", 1.0),
        ];
        want.sort_by_key(|e| e.0);
        assert_eq!(row(&ds, 0), want);
        // Signed: some of these eight carry -1, unsigned none.
        assert!(want.iter().any(|e| e.1 < 0.0));
        let u = Hashing {
            sign: HashSign::Unsigned,
            ..h
        };
        let ds = load(text, Some(u)).unwrap();
        assert!(row(&ds, 0).iter().all(|e| e.1 > 0.0));
    }

    #[test]
    fn importance_tags_multiclass_and_unlabelled_rows() {
        let text = "3 2.5 'a|f x\n1 'b |f y\n\n2 0 |f z:3\n";
        // A lone number touching the bar is the label; any other token there, a tag.
        let two = load("2|f a\n1 t|f b\n", None).unwrap();
        assert_eq!(two.labels.unwrap().index, vec![1, 0]);
        let ds = load(
            text,
            Some(Hashing {
                bits: 8,
                ..Hashing::default()
            }),
        )
        .unwrap();
        assert_eq!(ds.n, 3, "the blank line is no row");
        let l = ds.labels.unwrap();
        assert_eq!(l.classes, vec!["1", "2", "3"]);
        assert_eq!(l.index, vec![2, 0, 1]);
        assert_eq!(ds.weights, Some(vec![2.5, 1.0, 0.0]));
        // Windows line ends are line ends.
        let crlf = load("1 |f a\r\n-1 |f a\r\n", None).unwrap();
        assert_eq!(row(&crlf, 0), row(&crlf, 1));
        let ds = load("|f a b\n| c\n", None).unwrap();
        assert!(ds.labels.is_none());
        assert_eq!(ds.n, 2);
        let e = load("1 |f a\n|f b\n", None).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn repeated_features_add_up_and_interactions_pair_namespaces() {
        let h = Hashing {
            bits: 12,
            sign: HashSign::Unsigned,
            quadratic: vec!["ab".into(), "cc".into()],
            ..Hashing::default()
        };
        let ds = load("1 |a x:2 x |b z:3 |c p q r\n", Some(h.clone())).unwrap();
        let r = row(&ds, 0);
        let col = |ns: &str, f: &str| at(&h, ns, f, 1.0).0;
        let pair = |(na, fa): (&str, &str), (nb, fb): (&str, &str)| {
            let seed = |n: &str| Hashing::namespace_seed(n.as_bytes());
            let ha = Hashing::feature_hash(fa.as_bytes(), seed(na));
            let hb = Hashing::feature_hash(fb.as_bytes(), seed(nb));
            h.place(Hashing::pair_hash(ha, hb)).0
        };
        let value = |c: u32| r.iter().find(|e| e.0 == c).map(|e| e.1);
        assert_eq!(value(col("a", "x")), Some(3.0), "x twice: 2 + 1");
        // ab: x (3 in all, but each occurrence pairs) with z: 2 * 3 + 1 * 3.
        assert_eq!(value(pair(("a", "x"), ("b", "z"))), Some(9.0));
        // cc: each unordered pair of distinct features once: pq, pr, qr.
        for (f, g) in [("p", "q"), ("p", "r"), ("q", "r")] {
            assert_eq!(value(pair(("c", f), ("c", g))), Some(1.0), "{f}{g}");
        }
        assert_eq!(r.len(), 1 + 1 + 3 + 1 + 3, "{r:?}");
        // Numbered features: their number plus the namespace's seed.
        let ds = load("1 | 5 7:2\n", Some(h.clone())).unwrap();
        assert_eq!(row(&ds, 0), vec![(5, 1.0), (7, 2.0)]);
    }

    #[test]
    fn bad_lines_name_the_line_and_column() {
        let cases = [
            ("1 |f a\n-1 f b\n", 2, 1, "no '|'"),
            ("1 |f a:x\n", 1, 6, "feature value: not a number"),
            ("1 |f a:nan\n", 1, 6, "NaN"),
            ("1:0.5 |f a\n", 1, 1, "not supported"),
            ("yes |f a\n", 1, 1, "a label is a number"),
            ("1 -2 |f a\n", 1, 3, "an importance is >= 0"),
            ("1 1 0.5 |f a\n", 1, 5, "initial prediction"),
            ("1 'a 2 |f a\n", 1, 3, "a tag must be the last token"),
            ("1 |f:x a\n", 1, 4, "namespace value"),
            ("1 |:2 a\n", 1, 4, "no name"),
            ("1 |f :2\n", 1, 6, "no name"),
            ("1 |f:1e30 a:1e30\n", 1, 11, "out of f32 range"),
        ];
        for (text, line, col, msg) in cases {
            match load(text, None) {
                Err(Error::Parse {
                    line: Some(l),
                    column: Some(c),
                    msg: m,
                    ..
                }) => {
                    assert_eq!((l, c), (line, col), "{text:?}: {m}");
                    assert!(m.contains(msg), "{text:?}: {m}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(load("\n \n", None)
            .unwrap_err()
            .to_string()
            .contains("no examples"));
        let bad = LoadOptions {
            features: Some(10),
            ..Default::default()
        };
        let e = parse_with(Path::new("t.vw"), || Ok(&b"1 |f a\n"[..]), &bad).unwrap_err();
        assert!(e.to_string().contains("hash bits"), "{e}");
    }

    #[test]
    fn parts_on_every_core_give_the_rows_and_lines_of_a_parse_line_by_line() {
        let text: String = (0..3000)
            .map(|i| format!("{} {} |f a{} b:{}\n", 1 - 2 * (i % 2), 1 + i % 3, i % 50, i))
            .collect();
        for cuts in [1, 2, 7, 64] {
            let parts = line_parts(text.as_bytes(), cuts);
            assert_eq!(parts.concat(), text.as_bytes());
            assert!(parts.iter().all(|p| p.ends_with(b"\n")), "{cuts}");
        }
        assert_eq!(
            line_parts(b"a\nb\nc\nd", 4),
            vec![&b"a\nb\n"[..], &b"c\nd"[..]]
        );
        let h = Hashing {
            bits: 10,
            ..Hashing::default()
        };
        let ds = load(&text, Some(h.clone())).unwrap();
        assert_eq!(ds.n, 3000);
        // Row 2,999 is itself, wherever its part began.
        let last = load("-1 3 |f a49 b:2999\n", Some(h.clone())).unwrap();
        assert_eq!(row(&ds, 2999), row(&last, 0));
        assert_eq!(ds.weights.as_ref().unwrap()[2999], 3.0);
        let bad = text.replacen("|f a26 b:776", "|f a26 b:x", 1);
        match load(&bad, Some(h)) {
            Err(Error::Parse { line, .. }) => assert_eq!(line, Some(777)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vowpal_wabbit_lines_are_recognised_by_extension_and_content() {
        use crate::data::{detect_format, Format};
        let f =
            |name: &str, text: &str| detect_format(Format::Auto, Path::new(name), text.as_bytes());
        assert_eq!(f("a.vw", "x,y\n"), Format::Vw);
        assert_eq!(f("a.txt", "1 1.0 'tag|ns a b:2\n"), Format::Vw);
        assert_eq!(f("a.txt", "| a b\n"), Format::Vw);
        assert_eq!(f("a.txt", "1 1:0.5 3:2\n"), Format::Libsvm);
        assert_eq!(f("a.txt", "a,b|c,1\n"), Format::Csv);
    }
}
