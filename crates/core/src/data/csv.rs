//! CSV loader (tab-separated for a `.tsv` file): header auto-detected, label column chosen
//! by name, index or convention, features parsed straight into the dataset's one f32 buffer
//! (no second copy of X).
//!
//! A first row is a header when it has a non-numeric field in a column whose second-row
//! value is numeric (features are numeric, unless categorical; the label column may hold
//! text), or, in a one-line file, when no field is numeric. `#` starts a comment line.
//!
//! With categorical columns ([`Hashing::categorical`]) the rows are hashed whole into
//! 2^bits sparse columns instead, each row as the Vowpal Wabbit line `| c=v name:x ...`
//! would be ([`parse_reader`]).

use std::io::Read;
use std::path::Path;

use csv::{ByteRecord, ReaderBuilder, Trim};

use super::hashing::Hashing;
use super::{Dataset, LabelBuilder, LabelCol, LoadOptions};
use crate::error::{Error, Param, Result};
use crate::matrix::{CsrBuf, MatrixBuf};

/// Column names recognised as the label when `--label-col` is not given, in order of
/// preference (so in `x,y,label` the label is `label`, not the feature `y`).
pub const LABEL_NAMES: [&str; 4] = ["label", "target", "class", "y"];

fn is_numeric(field: &[u8]) -> bool {
    std::str::from_utf8(field).is_ok_and(|s| s.parse::<f64>().is_ok())
}

/// Parses one feature value, rejecting NaN, infinities and values outside f32 range.
pub(crate) fn parse_value(field: &[u8]) -> std::result::Result<f32, &'static str> {
    let s = std::str::from_utf8(field).map_err(|_| "not valid UTF-8")?;
    if s.is_empty() {
        return Err("empty value where a number was expected");
    }
    let v: f32 = s.parse().map_err(|_| "not a number")?;
    if v.is_nan() {
        Err("NaN is not allowed")
    } else if v.is_infinite() {
        if s.to_ascii_lowercase().contains("inf") {
            Err("infinity is not allowed")
        } else {
            Err("value out of f32 range")
        }
    } else {
        Ok(v)
    }
}

/// The field separator of `path`: a tab for a `.tsv` file, else a comma.
pub fn delimiter(path: &Path) -> u8 {
    let tsv = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("tsv"));
    if tsv {
        b'\t'
    } else {
        b','
    }
}

/// Parses CSV bytes from `path` into a dataset.
pub fn parse(path: &Path, bytes: &[u8], opts: &LoadOptions) -> Result<Dataset> {
    parse_reader(path, bytes, bytes.len() as u64, opts)
}

/// Parses CSV streamed from `reader` (`size_hint`: its length in bytes, to size X once).
/// Only X and one record are held in memory, never the whole text. Where `opts.hashing`
/// names categorical columns, X is the rows hashed into CSR (recorded in the dataset's
/// hashing, with the number of feature columns).
pub fn parse_reader<R: Read>(
    path: &Path,
    reader: R,
    size_hint: u64,
    opts: &LoadOptions,
) -> Result<Dataset> {
    if let Some(h) = opts.hashing.as_ref().filter(|h| h.hashes_csv()) {
        h.check()
            .map_err(|m| Error::param(Param::Categorical, h.categorical.join(","), m))?;
        let mut target = Target::Hashed(Box::new(HashedRows::new(h)));
        let (n, _, labels, weights) = records(path, reader, opts, &mut target)?;
        let Target::Hashed(rows) = target else {
            unreachable!("the target stays hashed")
        };
        let d = h.columns();
        let mut ds = Dataset::from_matrix(MatrixBuf::Csr(rows.csr), n, d, labels, path);
        ds.weights = weights;
        ds.hashing = Some(Hashing {
            csv_columns: Some(rows.names),
            ..h.clone()
        });
        return Ok(ds);
    }
    let mut x = VecSink {
        path,
        size_hint,
        x: Vec::new(),
    };
    let (n, d, labels, weights) = parse_into(path, reader, opts, &mut x)?;
    let mut x = x.x;
    x.shrink_to_fit();
    let mut ds = Dataset::new(x, n, d, labels, path.to_path_buf());
    ds.weights = weights;
    Ok(ds)
}

/// Where parsed feature values go, row after row.
pub trait ValueSink {
    /// Called once before the first value, with the number of features and the length in
    /// bytes of the first data row (with its separators).
    fn start(&mut self, _d: usize, _row_bytes: u64) -> Result<()> {
        Ok(())
    }
    /// The next value (row-major), with the rows completed so far.
    fn push(&mut self, v: f32, rows: usize) -> Result<()>;
}

/// X in memory: reserved once from the size of the input, grown within the memory budget.
struct VecSink<'a> {
    path: &'a Path,
    size_hint: u64,
    x: Vec<f32>,
}

impl ValueSink for VecSink<'_> {
    fn start(&mut self, d: usize, row_bytes: u64) -> Result<()> {
        // Rows estimated from the first data row's length, plus 10%: X is reserved about
        // once. The estimate is only a hint (a huge comment can follow two rows): never more
        // than a sixteenth of the memory budget, and a failed reservation is not an error.
        let est_rows = (self.size_hint / row_bytes.max(1)) as usize;
        let cap = (d.saturating_mul(est_rows.saturating_add(est_rows / 10 + 1)) as u64)
            .min(crate::limits::budget() / 16);
        let _ = self.x.try_reserve_exact(cap as usize);
        Ok(())
    }

    fn push(&mut self, v: f32, rows: usize) -> Result<()> {
        if self.x.len() == self.x.capacity() {
            // Growing doubles X: check that against the budget instead of aborting.
            crate::limits::check(
                || format!("{}: more than {rows} rows", self.path.display()),
                (self.x.capacity().max(1) as u128) * 2,
                4,
            )?;
        }
        self.x.push(v);
        Ok(())
    }
}

/// Whether the first record is a header, from the first two: not when it is all numbers;
/// with a second record, when some field is text (not empty) above a number; alone, when
/// all is text.
fn header_rule(first: &ByteRecord, second: Option<&ByteRecord>) -> bool {
    if first.iter().all(is_numeric) {
        false
    } else if let Some(second) = second {
        // (An empty field is no evidence: in hashed rows it is a missing value.)
        first
            .iter()
            .zip(second.iter())
            .any(|(a, b)| !a.is_empty() && !is_numeric(a) && is_numeric(b))
    } else {
        first.iter().all(|f| !is_numeric(f))
    }
}

/// The CSV in `reader`'s first record, as a whole-file parse reads it: whether it is a
/// header ([`LoadOptions::csv_header`], else decided from the first two records) and the
/// byte offset just past it (after any comments before it). `None`: no record.
pub fn first_record<R: Read>(
    path: &Path,
    reader: R,
    opts: &LoadOptions,
) -> Result<Option<(bool, u64)>> {
    let mut rdr = ReaderBuilder::new()
        .delimiter(delimiter(path))
        .has_headers(false)
        .flexible(true)
        .trim(Trim::All)
        .comment(Some(b'#'))
        .from_reader(reader);
    let bad = |e: csv::Error| Error::data(path, format!("malformed CSV: {e}"));
    let (mut first, mut second) = (ByteRecord::new(), ByteRecord::new());
    if !rdr.read_byte_record(&mut first).map_err(bad)? {
        return Ok(None);
    }
    let end = rdr.position().byte();
    let has_second = rdr.read_byte_record(&mut second).map_err(bad)?;
    let header = match opts.csv_header {
        Some(h) => h,
        None => header_rule(&first, has_second.then_some(&second)),
    };
    Ok(Some((header, end)))
}

/// The parsed rows, counted: (rows, features, labels, row weights).
pub type Parsed = (usize, usize, Option<super::Labels>, Option<Vec<f32>>);

/// Parses CSV streamed from `reader`, sending the features to `sink` row by row; the labels
/// and row weights are kept (O(n)). Categorical columns are refused: their rows are hashed
/// into sparse rows, which [`parse_reader`] makes.
pub fn parse_into<R: Read>(
    path: &Path,
    reader: R,
    opts: &LoadOptions,
    sink: &mut dyn ValueSink,
) -> Result<Parsed> {
    if let Some(h) = opts.hashing.as_ref().filter(|h| h.hashes_csv()) {
        return Err(Error::param(
            Param::Categorical,
            h.categorical.join(","),
            format!(
                "makes hashed sparse rows, which {} cannot be read into here (dense values)",
                path.display()
            ),
        ));
    }
    records(path, reader, opts, &mut Target::Sink(sink))
}

/// Where a record's features go.
enum Target<'s> {
    /// Every feature a number, row-major, to a sink.
    Sink(&'s mut dyn ValueSink),
    /// Every feature hashed, the rows into CSR.
    Hashed(Box<HashedRows<'s>>),
}

/// A hashed CSV file's rows, as they are read.
struct HashedRows<'h> {
    hashing: &'h Hashing,
    /// For each column: a feature column's kind (categorical or not) and name; `None` for
    /// the label and weight columns. Set once the columns are known.
    cols: Vec<Option<(bool, Vec<u8>)>>,
    /// The feature columns' names, in order, as hashed.
    names: Vec<String>,
    /// One row's features: (namespace initial, hash, value); scratch for the hashing.
    feats: Vec<(u8, u32, f32)>,
    entries: Vec<(u32, f32)>,
    key: Vec<u8>,
    csr: CsrBuf,
    budget: u64,
}

impl<'h> HashedRows<'h> {
    fn new(hashing: &'h Hashing) -> Self {
        HashedRows {
            hashing,
            cols: Vec::new(),
            names: Vec::new(),
            feats: Vec::new(),
            entries: Vec::new(),
            key: Vec::new(),
            csr: CsrBuf::new(),
            budget: crate::limits::budget(),
        }
    }

    /// Names the columns: the categorical ones (by header name or 0-based index), and every
    /// feature column by its header's name or its position among the feature columns. Where
    /// the hashing records the training file's columns, the feature columns must be those
    /// (by name, any case and order), hashed with the training file's spelling.
    fn set_columns(
        &mut self,
        path: &Path,
        names: Option<&[String]>,
        ncols: usize,
        skip: [Option<usize>; 2],
    ) -> Result<()> {
        let mut categorical = vec![false; ncols];
        for spec in &self.hashing.categorical {
            let col = match spec.parse::<i64>() {
                Ok(i) => LabelCol::Index(i),
                Err(_) => LabelCol::Name(spec.clone()),
            };
            let j = resolve_label_col(path, &col, names, ncols, None, Param::Categorical)?
                .expect("a named or numbered column resolves to one");
            if skip.contains(&Some(j)) {
                let what = if skip[0] == Some(j) {
                    "label"
                } else {
                    "row weight"
                };
                return Err(Error::param(
                    Param::Categorical,
                    spec,
                    format!("is the {what} column of {}", path.display()),
                ));
            }
            categorical[j] = true;
        }
        // Each feature column's own name: its header's, or its position among them.
        let own: Vec<(usize, String)> = (0..ncols)
            .filter(|j| !skip.contains(&Some(*j)))
            .enumerate()
            .map(|(k, j)| (j, names.map_or_else(|| k.to_string(), |n| n[j].clone())))
            .collect();
        let same = |a: &str, b: &str| a.to_lowercase() == b.to_lowercase();
        let hashed: Vec<String> = match &self.hashing.csv_columns {
            None => own.iter().map(|(_, n)| n.clone()).collect(),
            Some(train) => {
                let listed = |c: &[String]| c.join(", ");
                let mine: Vec<String> = own.iter().map(|(_, n)| n.clone()).collect();
                if let Some(t) = train.iter().find(|t| !mine.iter().any(|n| same(n, t))) {
                    return Err(Error::data(
                        path,
                        format!(
                            "no feature column {t:?}, which the model was trained on (the \
                             file's feature columns: {}; the model's: {})",
                            listed(&mine),
                            listed(train)
                        ),
                    ));
                }
                let mut out = Vec::with_capacity(mine.len());
                for n in &mine {
                    match train.iter().find(|t| same(n, t)) {
                        Some(t) => out.push(t.clone()),
                        None => {
                            return Err(Error::data(
                                path,
                                format!(
                                    "column {n:?} is not a feature column the model was \
                                     trained on (the model's: {})",
                                    listed(train)
                                ),
                            ))
                        }
                    }
                }
                out
            }
        };
        let mut cols = vec![None; ncols];
        for ((j, _), name) in own.iter().zip(&hashed) {
            cols[*j] = Some((categorical[*j], name.clone().into_bytes()));
        }
        self.cols = cols;
        self.names = hashed;
        Ok(())
    }

    /// Column `j`'s field `field` as a feature of the row (an empty field is missing).
    fn field(&mut self, j: usize, field: &[u8]) -> std::result::Result<(), &'static str> {
        let (categorical, name) = self.cols[j].as_ref().expect("a feature column");
        if field.is_empty() {
            return Ok(());
        }
        if *categorical {
            self.key.clear();
            self.key.extend_from_slice(name);
            self.key.push(b'=');
            self.key.extend_from_slice(field);
            self.feats
                .push((b' ', Hashing::feature_hash(&self.key, 0), 1.0));
        } else {
            let v = parse_value(field)?;
            if v != 0.0 {
                self.feats.push((b' ', Hashing::feature_hash(name, 0), v));
            }
        }
        Ok(())
    }

    /// Hashes the row read into `feats` and appends it, within the memory budget.
    fn end_row(&mut self, path: &Path, line: Option<u64>, rows: usize) -> Result<()> {
        let (hashing, feats) = (self.hashing, &self.feats);
        super::vw::push_hashed(hashing, &[], feats, &mut self.entries, &mut self.csr).map_err(
            |()| {
                parse_error(
                    path,
                    line,
                    None,
                    b"",
                    "the features of one column add up out of f32 range",
                )
            },
        )?;
        self.feats.clear();
        let bytes = 8 * (self.csr.nnz() as u64 + self.csr.indptr.len() as u64);
        if bytes > self.budget {
            return Err(Error::Memory {
                what: format!(
                    "{}: {} rows with {} hashed non-zeros",
                    path.display(),
                    rows + 1,
                    self.csr.nnz()
                ),
                bytes,
                available: self.budget,
            });
        }
        Ok(())
    }
}

/// The records of `reader`: labels and row weights kept, the features to `target`.
fn records<R: Read>(
    path: &Path,
    reader: R,
    opts: &LoadOptions,
    target: &mut Target<'_>,
) -> Result<Parsed> {
    let mut rdr = ReaderBuilder::new()
        .delimiter(delimiter(path))
        .has_headers(false)
        .flexible(true)
        .trim(Trim::All)
        .comment(Some(b'#'))
        .buffer_capacity(1 << 20)
        .from_reader(reader);
    let read = |rdr: &mut csv::Reader<R>, rec: &mut ByteRecord| -> Result<bool> {
        rdr.read_byte_record(rec).map_err(|e| match e.kind() {
            csv::ErrorKind::Io(io) => {
                Error::io(path, std::io::Error::new(io.kind(), io.to_string()))
            }
            _ => {
                let line = e.position().map(|p| p.line());
                parse_error(path, line, None, b"", &format!("malformed CSV: {e}"))
            }
        })
    };

    let mut first = ByteRecord::new();
    let mut second = ByteRecord::new();
    if !read(&mut rdr, &mut first)? {
        return Err(Error::data(path, "empty file: no rows"));
    }
    let has_second = read(&mut rdr, &mut second)?;
    let ncols = first.len();
    let header = match opts.csv_header {
        Some(h) => h,
        None => header_rule(&first, has_second.then_some(&second)),
    };
    let names: Option<Vec<String>> = header.then(|| {
        first
            .iter()
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect()
    });
    if header && !has_second {
        return Err(Error::data(path, "the file has a header but no data rows"));
    }

    // A hashed file is unlabelled where it has as many columns as the training file had
    // feature columns (the model's features are its 2^bits hashed columns).
    let hashed_opts;
    let opts = match target {
        Target::Hashed(h) => {
            hashed_opts = LoadOptions {
                features: h.hashing.csv_columns.as_ref().map(Vec::len),
                ..opts.clone()
            };
            &hashed_opts
        }
        Target::Sink(_) => opts,
    };
    let (label_idx, weight_idx) = columns(path, names.as_deref(), ncols, opts)?;
    let d = ncols - usize::from(label_idx.is_some()) - usize::from(weight_idx.is_some());
    if d == 0 {
        return Err(Error::data(
            path,
            "no feature columns (the only column is the label)",
        ));
    }

    let first_line = first.position().map_or(1, |p| p.line());
    let sample = if header { &second } else { &first };
    match target {
        Target::Sink(sink) => sink.start(d, (sample.as_slice().len() + ncols) as u64)?,
        Target::Hashed(h) => {
            h.set_columns(path, names.as_deref(), ncols, [label_idx, weight_idx])?;
        }
    }
    let mut rows = Rows {
        path,
        ncols,
        first_line,
        label_idx,
        weight_idx,
        labels: LabelBuilder::default(),
        weights: Vec::new(),
        n: 0,
        target,
    };
    if !header {
        rows.push(&first)?;
    }
    if has_second {
        rows.push(&second)?;
        let mut rec = ByteRecord::new();
        while read(&mut rdr, &mut rec)? {
            rows.push(&rec)?;
        }
    }
    Ok((
        rows.n,
        d,
        label_idx.map(|_| rows.labels.finish()),
        weight_idx.map(|_| rows.weights),
    ))
}

/// Where each record's fields go: the label to the labels, the row weight to the weights,
/// the features to the target.
struct Rows<'a, 't> {
    path: &'a Path,
    ncols: usize,
    /// The line of the first record (ragged rows name it).
    first_line: u64,
    label_idx: Option<usize>,
    weight_idx: Option<usize>,
    labels: LabelBuilder,
    weights: Vec<f32>,
    /// Rows pushed.
    n: usize,
    target: &'a mut Target<'t>,
}

impl Rows<'_, '_> {
    /// Parses one record's fields, checking each, and sends them on.
    fn push(&mut self, rec: &ByteRecord) -> Result<()> {
        let line = rec.position().map(|p| p.line());
        let path = self.path;
        let perr = |column: Option<usize>, text: &[u8], msg: &str| {
            parse_error(path, line, column, text, msg)
        };
        if rec.len() != self.ncols {
            return Err(perr(
                None,
                b"",
                &format!(
                    "ragged row: {} fields, but line {} has {}",
                    rec.len(),
                    self.first_line,
                    self.ncols
                ),
            ));
        }
        for (j, field) in rec.iter().enumerate() {
            let at = Some(j + 1);
            if Some(j) == self.label_idx {
                if field.is_empty() {
                    return Err(perr(at, field, "empty label"));
                }
                let s = std::str::from_utf8(field)
                    .map_err(|_| perr(at, field, "label is not valid UTF-8"))?;
                super::check_label(s).map_err(|m| perr(at, field, m))?;
                self.labels.push(s);
            } else if Some(j) == self.weight_idx {
                let v = parse_value(field).map_err(|m| perr(at, field, m))?;
                if v < 0.0 {
                    return Err(perr(at, field, "a row weight must be >= 0"));
                }
                self.weights.push(v);
            } else {
                match self.target {
                    Target::Sink(sink) => {
                        let v = parse_value(field).map_err(|m| perr(at, field, m))?;
                        sink.push(v, self.n)?;
                    }
                    Target::Hashed(h) => h.field(j, field).map_err(|m| perr(at, field, m))?,
                }
            }
        }
        if let Target::Hashed(h) = self.target {
            h.end_row(path, line, self.n)?;
        }
        self.n += 1;
        Ok(())
    }
}

/// A parse error at `line` (and 1-based field `column`) of `path`, about `text`.
fn parse_error(
    path: &Path,
    line: Option<u64>,
    column: Option<usize>,
    text: &[u8],
    msg: &str,
) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line: line.map(|l| l as usize),
        column,
        text: String::from_utf8_lossy(text).into_owned(),
        msg: msg.to_string(),
    }
}

/// The label and row weight columns among `ncols` (named by `names` when there is a header).
/// By default the label is the last column that is not the weight column.
fn columns(
    path: &Path,
    names: Option<&[String]>,
    ncols: usize,
    opts: &LoadOptions,
) -> Result<(Option<usize>, Option<usize>)> {
    let weight_idx = match &opts.weight_col {
        None => None,
        Some(c) => resolve_label_col(path, c, names, ncols, None, Param::WeightColumn)?,
    };
    let label_idx = resolve_label_col(
        path,
        &opts.label_col,
        names,
        ncols,
        opts.features.map(|f| f + usize::from(weight_idx.is_some())),
        Param::LabelColumn,
    )?;
    let label_idx = match (label_idx, weight_idx) {
        (Some(l), Some(w)) if l == w && opts.label_col == LabelCol::Auto && ncols > 2 => {
            Some(if w == ncols - 1 { ncols - 2 } else { ncols - 1 })
        }
        (Some(l), Some(w)) if l == w => {
            return Err(Error::param(
                Param::WeightColumn,
                w,
                "is also the label column",
            ))
        }
        (l, _) => l,
    };
    Ok((label_idx, weight_idx))
}

/// The index of the column `col` names (a label or weight column: `param` says which, for
/// errors), among `ncols` columns.
fn resolve_label_col(
    path: &Path,
    col: &LabelCol,
    names: Option<&[String]>,
    ncols: usize,
    features: Option<usize>,
    param: Param,
) -> Result<Option<usize>> {
    match col {
        LabelCol::None => Ok(None),
        LabelCol::Auto => {
            if features == Some(ncols) {
                return Ok(None);
            }
            let by_name = names.and_then(|names| {
                LABEL_NAMES
                    .iter()
                    .find_map(|l| names.iter().position(|n| n.eq_ignore_ascii_case(l)))
            });
            Ok(Some(by_name.unwrap_or(ncols - 1)))
        }
        LabelCol::Index(i) => {
            let idx = if *i < 0 { ncols as i64 + i } else { *i };
            if idx < 0 || idx >= ncols as i64 {
                return Err(Error::InvalidParam {
                    name: param,
                    value: i.to_string(),
                    reason: if ncols == 1 {
                        "must be 0 or -1 for a file with 1 column".into()
                    } else {
                        "must be a column index from 0 to (columns - 1), or negative from the end"
                            .into()
                    },
                });
            }
            Ok(Some(idx as usize))
        }
        LabelCol::Name(name) => {
            let Some(names) = names else {
                return Err(Error::param(
                    param,
                    format!("{name:?}"),
                    format!("names a column, but {} has no header row", path.display()),
                ));
            };
            names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name))
                .map(Some)
                .ok_or_else(|| {
                    Error::data(
                        path,
                        format!(
                            "no column named {name:?}; the header has {}",
                            names.join(", ")
                        ),
                    )
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, label_col: LabelCol) -> Result<Dataset> {
        let opts = LoadOptions {
            label_col,
            ..Default::default()
        };
        parse(Path::new("t.csv"), text.as_bytes(), &opts)
    }

    #[test]
    fn header_detected_and_label_named() {
        let ds = load("a,Label,b\n1,x,2\n3,y,4\n", LabelCol::Auto).unwrap();
        assert_eq!((ds.n, ds.d), (2, 2));
        assert_eq!(&*ds.x.values(), &[1.0, 2.0, 3.0, 4.0]);
        let l = ds.labels.unwrap();
        assert_eq!(l.classes, vec!["x", "y"]);
        assert_eq!(l.index, vec![0, 1]);
    }

    #[test]
    fn label_beats_a_feature_named_y() {
        let ds = load("x,y,label\n1,2,a\n3,4,b\n", LabelCol::Auto).unwrap();
        assert_eq!(ds.d, 2);
        assert_eq!(ds.labels.unwrap().classes, vec!["a", "b"]);
        let ds = load("f,Y\n1,a\n2,b\n", LabelCol::Auto).unwrap();
        assert_eq!(ds.labels.unwrap().classes, vec!["a", "b"]);
    }

    #[test]
    fn no_header_with_string_labels_uses_last_column() {
        let ds = load("1,2,cat\n3,4,dog\n", LabelCol::Auto).unwrap();
        assert_eq!((ds.n, ds.d), (2, 2));
        assert_eq!(ds.labels.unwrap().classes, vec!["cat", "dog"]);
    }

    #[test]
    fn index_and_negative_index() {
        let ds = load("1,2,3\n4,5,6\n", LabelCol::Index(0)).unwrap();
        assert_eq!(&*ds.x.values(), &[2.0, 3.0, 5.0, 6.0]);
        let ds = load("1,2,3\n4,5,6\n", LabelCol::Index(-2)).unwrap();
        assert_eq!(&*ds.x.values(), &[1.0, 3.0, 4.0, 6.0]);
        assert!(load("1,2,3\n", LabelCol::Index(3)).is_err());
    }

    #[test]
    fn unlabelled_when_column_count_matches_features() {
        let opts = LoadOptions {
            features: Some(2),
            ..Default::default()
        };
        let ds = parse(Path::new("t.csv"), b"1,2\n3,4\n", &opts).unwrap();
        assert!(ds.labels.is_none());
        assert_eq!(ds.d, 2);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = load("1,2,1\n3,x,0\n", LabelCol::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2, column 2"), "{e}");
        assert!(e.contains("\"x\""), "{e}");
        let e = load("1,2,1\n3,nan,0\n", LabelCol::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("NaN"), "{e}");
        let e = load("1,2,1\n3,0\n", LabelCol::Auto)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("ragged"), "{e}");
        let e = load("a,b\n", LabelCol::Auto).unwrap_err().to_string();
        assert!(e.contains("header but no data"), "{e}");
        let e = load("", LabelCol::Auto).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = load("1,1e39,1\n", LabelCol::Auto).unwrap_err().to_string();
        assert!(e.contains("f32 range"), "{e}");
    }

    fn hashed(categorical: &[&str]) -> LoadOptions {
        LoadOptions {
            hashing: Some(Hashing {
                bits: 10,
                categorical: categorical.iter().map(|c| c.to_string()).collect(),
                ..Hashing::default()
            }),
            ..Default::default()
        }
    }

    fn vw(text: &str) -> Dataset {
        let opts = LoadOptions {
            hashing: Some(Hashing {
                bits: 10,
                ..Hashing::default()
            }),
            ..Default::default()
        };
        crate::data::vw::parse_with(Path::new("t.vw"), || Ok(text.as_bytes()), &opts).unwrap()
    }

    fn same_rows(a: &Dataset, b: &Dataset) {
        let (ca, cb) = (a.x.csr().unwrap(), b.x.csr().unwrap());
        assert_eq!((a.n, a.d), (b.n, b.d));
        assert_eq!(ca.indptr, cb.indptr);
        assert_eq!(ca.indices, cb.indices);
        assert_eq!(ca.values, cb.values);
    }

    #[test]
    fn categorical_columns_hash_each_row_as_its_vowpal_wabbit_line() {
        let text = "label,a,color,b\n1,0.5,red,2\n-1,,blue,0\n1,3,,1\n";
        let ds = parse(Path::new("t.csv"), text.as_bytes(), &hashed(&["COLOR"])).unwrap();
        // An empty field is missing, a zero adds nothing.
        same_rows(
            &ds,
            &vw("1 | a:0.5 color=red b:2\n-1 | color=blue\n1 | a:3 b:1\n"),
        );
        assert_eq!(ds.labels.as_ref().unwrap().index, vec![1, 0, 1]);
        let h = ds.hashing.as_ref().unwrap();
        let cols = ["a", "color", "b"].map(String::from).to_vec();
        assert_eq!((h.csv_columns.as_ref(), h.bits), (Some(&cols), 10));
        assert_eq!(h.categorical, vec!["COLOR".to_string()]);

        // Without a header: columns by 0-based index, features named by their position
        // among the feature columns; a file with as many columns as the training file had
        // feature columns is unlabelled.
        let ds = parse(
            Path::new("t.csv"),
            b"0.5,red,7\n2,blue,8\n",
            &hashed(&["1"]),
        )
        .unwrap();
        let want = vw("7 | 0:0.5 1=red\n8 | 0:2 1=blue\n");
        same_rows(&ds, &want);
        let mut opts = hashed(&["1"]);
        opts.hashing.as_mut().unwrap().csv_columns = Some(vec!["0".into(), "1".into()]);
        let unlabelled = parse(Path::new("t.csv"), b"0.5,red\n2,blue\n", &opts).unwrap();
        assert!(unlabelled.labels.is_none());
        same_rows(&unlabelled, &want);

        // A later file with a header: the training file's columns in any order and case,
        // hashed with the training file's spelling; a column missing or added is an error.
        let trained = parse(Path::new("t.csv"), text.as_bytes(), &hashed(&["color"])).unwrap();
        let opts = LoadOptions {
            hashing: trained.hashing.clone(),
            ..Default::default()
        };
        let later = "B,Color,A\n2,red,0.5\n0,blue,\n1,,3\n";
        same_rows(
            &parse(Path::new("p.csv"), later.as_bytes(), &opts).unwrap(),
            &{
                let mut t = trained;
                t.labels = None;
                t
            },
        );
        let e = parse(Path::new("p.csv"), b"b,color,label\n2,red,1\n", &opts).unwrap_err();
        assert!(e.to_string().contains("no feature column \"a\""), "{e}");
        let e = parse(Path::new("p.csv"), b"a,b,color,id\n1,2,red,7\n", &opts);
        // (Four columns: the last is taken as the label, the others are the model's.)
        assert!(e.unwrap().labels.is_some());
        let e = parse(
            Path::new("p.csv"),
            b"a,b,color,id,label\n1,2,red,7,1\n",
            &opts,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("\"id\" is not a feature column"),
            "{e}"
        );
    }

    #[test]
    fn a_tsv_file_is_csv_with_tabs() {
        let csv = parse(
            Path::new("t.csv"),
            b"a,b,label\n1,2,x\n3,4,y\n",
            &hashed(&[]),
        );
        let tsv = parse(
            Path::new("t.TSV"),
            b"a\tb\tlabel\n1\t2\tx\n3\t4\ty\n",
            &hashed(&[]),
        );
        let (csv, tsv) = (csv.unwrap(), tsv.unwrap());
        assert_eq!(&*csv.x.values(), &*tsv.x.values());
        assert_eq!(csv.labels, tsv.labels);
        // Criteo's layout: the label first, no header, counts then categories (one empty).
        let opts = LoadOptions {
            label_col: LabelCol::Index(0),
            ..hashed(&["3", "4"])
        };
        let ds = parse(
            Path::new("day.tsv"),
            b"1\t5\t\t68fd1e64\t\n0\t2\t7\t80e26c9b\tfb936136\n",
            &opts,
        )
        .unwrap();
        same_rows(
            &ds,
            &vw("1 | 0:5 2=68fd1e64\n0 | 0:2 1:7 2=80e26c9b 3=fb936136\n"),
        );
        assert!(
            crate::data::detect_format(crate::data::Format::Auto, Path::new("d.tsv"), b"1\t2")
                == crate::data::Format::Csv
        );
    }

    #[test]
    fn categorical_columns_are_checked() {
        let err = |text: &str, cols: &[&str]| {
            parse(Path::new("t.csv"), text.as_bytes(), &hashed(cols))
                .unwrap_err()
                .to_string()
        };
        let e = err("a,c,label\n1,x,0\n", &["color"]);
        assert!(
            e.contains("no column named \"color\"") && e.contains("a, c, label"),
            "{e}"
        );
        let e = err("a,c,label\n1,x,0\n", &["label"]);
        assert!(e.contains("is the label column of t.csv"), "{e}");
        let e = err("a,c,label\n1,x,0\n", &["7"]);
        assert!(e.contains("column index"), "{e}");
        // A column that is not categorical holds numbers.
        let e = err("a,c,label\n1,x,0\nz,y,1\n", &["c"]);
        assert!(e.contains("line 3") && e.contains("column 1"), "{e}");
        // Quadratic interactions name namespaces, which CSV columns are in none of.
        let mut opts = hashed(&["c"]);
        opts.hashing.as_mut().unwrap().quadratic = vec!["ab".into()];
        let e = parse(Path::new("t.csv"), b"a,c,label\n1,x,0\n", &opts).unwrap_err();
        assert!(e.to_string().contains("namespaces"), "{e}");
        // Dense readers refuse them.
        struct Nothing;
        impl ValueSink for Nothing {
            fn push(&mut self, _: f32, _: usize) -> Result<()> {
                Ok(())
            }
        }
        let e = parse_into(
            Path::new("t.csv"),
            &b"1,x,0\n"[..],
            &hashed(&["1"]),
            &mut Nothing,
        )
        .unwrap_err();
        assert!(e.to_string().contains("sparse rows"), "{e}");
    }
}
