//! Datasets: dense row-major f32 features plus labels kept both as the original class names
//! and in internal form. Loaders for CSV and LIBSVM live in submodules, with the synthetic
//! generator.

pub mod clicks;
pub mod convert;
pub mod csv;
pub mod hashing;
pub mod libsvm;
pub mod npy;
pub mod part;
pub mod scale;
pub mod synth;
pub mod vw;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::matrix::{Matrix, MatrixBuf};

/// A dataset: `n` rows of `d` features, dense (row-major) or sparse (CSR), with optional
/// labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The features: dense (`n * d` values) or CSR, all finite.
    pub x: MatrixBuf,
    /// Number of rows.
    pub n: usize,
    /// Number of features (without the bias column).
    pub d: usize,
    /// Labels, when the file has them.
    pub labels: Option<Labels>,
    /// Where the data came from (for error messages).
    pub source: PathBuf,
    /// Per-row weights (finite, >= 0), when the data has them.
    pub weights: Option<Vec<f32>>,
    /// How raw features were hashed into the columns (Vowpal Wabbit input), kept in the
    /// model so `predict` hashes the same way.
    pub hashing: Option<hashing::Hashing>,
}

/// Labels: the sorted class names and one class index per row.
///
/// Class names are sorted numerically when they all parse as numbers, otherwise as strings.
/// With two classes the first maps to -1 and the second to +1, so `0/1`, `-1/+1` and
/// `no/yes` all give the natural signs.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    /// Distinct class names, sorted.
    pub classes: Vec<String>,
    /// Class index (into `classes`) of each row.
    pub index: Vec<u32>,
    /// What the names are when a typed source gave them (a NumPy array of integers, floats,
    /// bools or strings): names are then compared as that type. `None`: text from a file,
    /// where "1" and "1.0" are one class.
    pub ty: Option<LabelType>,
}

/// The type of a model's class labels, when they came typed (from Python): names are compared
/// as values of this type, so 10^17 and 10^17 + 1 stay two classes, and the labels keep
/// their type through model files and ONNX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelType {
    /// Integers of any width (compared exactly).
    Int,
    /// Floating-point numbers (compared by value; names are their shortest round-trip form).
    Float,
    /// Booleans, named "False" and "True".
    Bool,
    /// Strings (compared as written).
    Str,
}

impl LabelType {
    /// The name in model files.
    pub fn name(self) -> &'static str {
        match self {
            LabelType::Int => "int",
            LabelType::Float => "float",
            LabelType::Bool => "bool",
            LabelType::Str => "str",
        }
    }
}

/// True when two class names are the same class of a model whose labels are `ty`: exact
/// integers, float values, or the names themselves; untyped (text) names by
/// [`same_class`].
pub fn same_class_as(ty: Option<LabelType>, a: &str, b: &str) -> bool {
    match ty {
        None => same_class(a, b),
        Some(LabelType::Str) | Some(LabelType::Bool) => a == b,
        Some(LabelType::Int) => {
            a == b
                || matches!((a.trim().parse::<i128>(), b.trim().parse::<i128>()),
                    (Ok(x), Ok(y)) if x == y)
        }
        Some(LabelType::Float) => {
            a == b || matches!((class_value(a), class_value(b)), (Some(x), Some(y)) if x == y)
        }
    }
}

/// The index in `classes` of the class `name` names: the same name first, else the same
/// class by [`same_class_as`].
pub fn find_class(classes: &[String], ty: Option<LabelType>, name: &str) -> Option<usize> {
    classes
        .iter()
        .position(|c| c == name)
        .or_else(|| classes.iter().position(|c| same_class_as(ty, c, name)))
}

impl Labels {
    /// Builds labels from raw per-row class names.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Self {
        let mut b = LabelBuilder::default();
        for n in names {
            b.push(n.as_ref());
        }
        b.finish()
    }

    /// Internal ±1 form for two classes: class 0 -> -1, class 1 -> +1.
    pub fn signs(&self) -> Vec<f32> {
        self.index
            .iter()
            .map(|&c| if c == 0 { -1.0 } else { 1.0 })
            .collect()
    }
}

/// Collects labels row by row without allocating per row, then sorts the classes.
#[derive(Debug, Default)]
pub struct LabelBuilder {
    ids: std::collections::HashMap<String, u32>,
    names: Vec<String>,
    index: Vec<u32>,
}

impl LabelBuilder {
    /// Appends one row's label.
    pub fn push(&mut self, name: &str) {
        let id = match self.ids.get(name) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.ids.insert(name.to_string(), id);
                self.names.push(name.to_string());
                id
            }
        };
        self.index.push(id);
    }

    /// Sorts the classes and remaps the row indices onto the sorted order. When every name is
    /// a finite number, names with the same value are one class (`+1`, `1` and `1.0`), named
    /// as first seen, and classes sort by value; otherwise they sort as strings.
    pub fn finish(self) -> Labels {
        let values: Option<Vec<f64>> = self.names.iter().map(|s| class_value(s)).collect();
        // The class each distinct name belongs to, as an index into `reps` (first spellings).
        let mut reps: Vec<u32> = Vec::new();
        let mut class_of = vec![0u32; self.names.len()];
        match &values {
            Some(v) => {
                let mut by_value: Vec<u32> = (0..self.names.len() as u32).collect();
                // Integers compare exactly (10^17 and 10^17 + 1 are one f64, two classes).
                let int = |i: u32| class_int(&self.names[i as usize]);
                by_value.sort_by(|&a, &b| {
                    v[a as usize]
                        .total_cmp(&v[b as usize])
                        .then_with(|| match (int(a), int(b)) {
                            (Some(x), Some(y)) => x.cmp(&y),
                            _ => std::cmp::Ordering::Equal,
                        })
                        .then(a.cmp(&b))
                });
                for (k, &i) in by_value.iter().enumerate() {
                    let same = k > 0
                        && same_class(
                            &self.names[by_value[k - 1] as usize],
                            &self.names[i as usize],
                        );
                    if !same {
                        reps.push(i);
                    }
                    class_of[i as usize] = reps.len() as u32 - 1;
                }
            }
            None => {
                let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
                order.sort_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
                for (k, &i) in order.iter().enumerate() {
                    reps.push(i);
                    class_of[i as usize] = k as u32;
                }
            }
        }
        let classes = reps
            .iter()
            .map(|&o| self.names[o as usize].clone())
            .collect();
        let index = self.index.iter().map(|&i| class_of[i as usize]).collect();
        Labels {
            classes,
            index,
            ty: None,
        }
    }
}

/// Checks a class name read from input: predictions print one per line, so a name holds no
/// line break, tab or other control character.
pub fn check_label(name: &str) -> std::result::Result<(), &'static str> {
    if name.chars().any(char::is_control) {
        return Err("label contains a line break, tab or other control character");
    }
    Ok(())
}

/// The numeric value of a class name, when it is a finite number ("nan" and "inf" are names).
pub fn class_value(name: &str) -> Option<f64> {
    name.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The integer a class name writes, when it is one (of any width up to 128 bits).
fn class_int(name: &str) -> Option<i128> {
    name.trim().trim_start_matches('+').parse::<i128>().ok()
}

/// True when two class names are the same class: equal, or the same finite number (two
/// integers exactly: 10^17 and 10^17 + 1 are two classes though one f64).
pub fn same_class(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if let (Some(x), Some(y)) = (class_int(a), class_int(b)) {
        return x == y;
    }
    matches!((class_value(a), class_value(b)), (Some(x), Some(y)) if x == y)
}

/// File formats the loaders understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Pick by extension, else sniff the first line.
    #[default]
    Auto,
    /// Comma-separated values.
    Csv,
    /// LIBSVM / svmlight sparse text.
    Libsvm,
    /// A NumPy `.npy` array of features (labels from `LoadOptions::labels`).
    Npy,
    /// A NumPy `.npz` archive with arrays `X` and `y`.
    Npz,
    /// Vowpal Wabbit's text format, its features hashed ([`Hashing`](crate::data::hashing::Hashing)).
    Vw,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Format::Auto),
            "csv" => Ok(Format::Csv),
            "libsvm" | "svmlight" | "svm" => Ok(Format::Libsvm),
            "npy" => Ok(Format::Npy),
            "npz" => Ok(Format::Npz),
            "vw" | "vowpal" => Ok(Format::Vw),
            _ => Err(format!(
                "unknown format {s:?} (expected auto, csv, libsvm, npy, npz or vw)"
            )),
        }
    }
}

/// Which column holds the label (CSV only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LabelCol {
    /// A column named label, y, target or class (any case), else the last column.
    #[default]
    Auto,
    /// The column with this header name.
    Name(String),
    /// The column at this 0-based index; negative counts from the end (-1 is the last).
    Index(i64),
    /// No label column: every column is a feature.
    None,
}

impl std::str::FromStr for LabelCol {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("none") {
            Ok(LabelCol::None)
        } else if s.eq_ignore_ascii_case("auto") {
            Ok(LabelCol::Auto)
        } else if let Ok(i) = s.parse::<i64>() {
            Ok(LabelCol::Index(i))
        } else if s.is_empty() {
            Err("label column must not be empty".into())
        } else {
            Ok(LabelCol::Name(s.to_string()))
        }
    }
}

/// Options shared by the loaders.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// File format.
    pub format: Format,
    /// CSV label column.
    pub label_col: LabelCol,
    /// Number of features. LIBSVM: d (indices above it are an error). CSV with `LabelCol::Auto`:
    /// a file with exactly this many columns is read as unlabelled (used at predict time).
    pub features: Option<usize>,
    /// `.npy` features: the `.npy` file holding the labels.
    pub labels: Option<PathBuf>,
    /// CSV: the column holding per-row weights (not a feature).
    pub weight_col: Option<LabelCol>,
    /// Dense or sparse (CSR) features for the sparse formats (LIBSVM, scipy `.npz`).
    pub layout: Layout,
    /// CSV: whether the first record is a header; `None` decides from the first two records
    /// (a share of a file in a data-parallel run is told what the whole file's start says).
    pub csv_header: Option<bool>,
    /// Vowpal Wabbit input: how its features are hashed (`None`: 18 bits, signed).
    pub hashing: Option<hashing::Hashing>,
}

/// How a sparse format's features are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Sparse (CSR) below 10% non-zero values, dense above ([`Layout::sparse_for`]).
    #[default]
    Auto,
    /// Always dense (`n * d` values).
    Dense,
    /// Always CSR.
    Sparse,
}

impl Layout {
    /// Whether `nnz` non-zeros in `n` rows of `d` features are held as CSR: for `Auto`, below
    /// 10% density. There CSR takes a fifth of the dense memory or less (8 bytes per non-zero
    /// against 4 per value) and its epochs were faster at 1% and 10%; at 20% dense epochs were
    /// faster (docs/performance.md, "Figures behind the code's choices").
    pub fn sparse_for(self, n: usize, d: usize, nnz: usize) -> bool {
        match self {
            Layout::Dense => false,
            Layout::Sparse => true,
            Layout::Auto => (nnz as u128) * 10 < (n as u128) * (d as u128),
        }
    }
}

/// Loads a dataset from a file, choosing the loader by `opts.format`. Regular text files are
/// streamed: only X (and a buffer) is held in memory, never the whole text. Standard input
/// (`-`), pipes and devices are read once into memory (within the memory budget) and parsed
/// from there, so nothing read to sniff the format is lost.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let stdin = path == Path::new("-");
    let regular = !stdin && std::fs::metadata(path).map_or(true, |m| m.is_file());
    if !regular {
        let bytes = read_stream(path)?;
        return load_bytes(path, &bytes, opts);
    }
    let open = || -> std::io::Result<BufReader<File>> {
        Ok(BufReader::with_capacity(1 << 20, File::open(path)?))
    };
    // (A regular file: its format is always named or detected.)
    match format_of(path, opts)?.unwrap_or(opts.format) {
        Format::Npy => npy::load_npy(path, opts.labels.as_deref()),
        Format::Npz => npy::load_npz(path, opts),
        Format::Libsvm => libsvm::parse_with(path, open, opts),
        Format::Vw => vw::parse_with(path, open, opts),
        Format::Csv | Format::Auto => {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            csv::parse_reader(path, open().map_err(|e| Error::io(path, e))?, size, opts)
        }
    }
}

/// The format of the input at `path` as `opts` name it, or as detected from a regular
/// file's name and first bytes; `None` for standard input, pipes and devices under
/// [`Format::Auto`] (what is read to sniff them could not be read again).
pub fn format_of(path: &Path, opts: &LoadOptions) -> Result<Option<Format>> {
    if opts.format != Format::Auto {
        return Ok(Some(opts.format));
    }
    if path == Path::new("-") || !std::fs::metadata(path).map_or(true, |m| m.is_file()) {
        return Ok(None);
    }
    let mut head = Vec::new();
    File::open(path)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .map_err(|e| Error::io(path, e))?;
    Ok(Some(detect_format(Format::Auto, path, &head)))
}

/// The rows of the input at `path` (`-`: standard input) as a stream of blocks, for one
/// pass that never holds them whole ([`vw::Blocks`]): Vowpal Wabbit text, by `opts.format`
/// or as detected ([`format_of`]; standard input and pipes are taken as such).
pub fn stream(path: &Path, opts: &LoadOptions) -> Result<vw::Blocks> {
    match format_of(path, opts)? {
        Some(Format::Vw | Format::Auto) | None => vw::blocks(path, opts),
        Some(other) => Err(Error::data(
            path,
            format!(
                "a streamed run reads Vowpal Wabbit text, and this is {other:?} input: train \
                 on it without streaming, or write it as Vowpal Wabbit text"
            ),
        )),
    }
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
}

/// Parses a whole input held in memory (any format; sniffed from its first bytes).
pub fn load_bytes(path: &Path, bytes: &[u8], opts: &LoadOptions) -> Result<Dataset> {
    let format = detect_format(opts.format, path, bytes);
    match format {
        Format::Npy => npy::parse_npy(path, bytes, opts.labels.as_deref()),
        Format::Npz => npy::parse_npz(path, std::io::Cursor::new(bytes), opts),
        Format::Libsvm => libsvm::parse(path, bytes, opts),
        Format::Vw => vw::parse_with(path, || Ok(bytes), opts),
        Format::Csv | Format::Auto => csv::parse(path, bytes, opts),
    }
}

/// Reads standard input, a pipe or a device to its end, within the memory budget. Text that
/// starts with a NUL byte in its first 64 KiB is refused at once (binary data such as
/// /dev/zero would otherwise be read to the budget). The path `-` is standard input.
fn read_stream(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let stdin = path == Path::new("-");
    let name = if stdin {
        PathBuf::from("<stdin>")
    } else {
        path.to_path_buf()
    };
    let mut r: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(File::open(path).map_err(|e| Error::io(path, e))?)
    };
    let budget = crate::limits::budget();
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let k = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(&name, e)),
        };
        bytes.extend_from_slice(&chunk[..k]);
        let binary = bytes.starts_with(b"\x93NUMPY") || bytes.starts_with(b"PK");
        if !binary && bytes.len() <= 1 << 16 {
            if let Some(at) = bytes.iter().position(|&b| b == 0) {
                return Err(Error::Parse {
                    path: name,
                    line: None,
                    column: None,
                    text: String::new(),
                    msg: format!("binary data (a NUL byte at offset {at}), not CSV or LIBSVM text"),
                });
            }
        }
        if bytes.len() as u64 > budget {
            return Err(Error::Memory {
                what: format!(
                    "{}: an input of more than {} bytes",
                    name.display(),
                    bytes.len()
                ),
                bytes: bytes.len() as u64,
                available: budget,
            });
        }
    }
    Ok(bytes)
}

/// Allocates a dense n x d feature matrix of zeros, or explains why it cannot (the size
/// overflows, or the memory is not there) instead of aborting.
pub fn dense_zeros(path: &Path, n: usize, d: usize) -> Result<Vec<f32>> {
    let what = || format!("{}: {n} rows x {d} features stored densely", path.display());
    let len = n.checked_mul(d).ok_or_else(|| Error::Memory {
        what: what(),
        bytes: u64::MAX,
        available: crate::limits::budget(),
    })?;
    crate::limits::zeros(what, len)
}

/// The format of an input, decided in this one place (loading whole files, bytes and shares,
/// and `convert`): `requested` unless it is `Auto`; else NumPy by its magic bytes (`.npy`;
/// a zip archive, `.npz`) or its extension; CSV or LIBSVM by extension (.csv, .tsv: CSV with
/// tabs; .svm, .libsvm, .svmlight), else by the first data line of `head` (the input's first bytes): an `idx:val`
/// token after the first field means LIBSVM.
pub fn detect_format(requested: Format, path: &Path, bytes: &[u8]) -> Format {
    if requested != Format::Auto {
        return requested;
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return Format::Npy;
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return Format::Npz;
    }
    match extension(path).as_deref() {
        Some("npy") => return Format::Npy,
        Some("npz") => return Format::Npz,
        Some("csv" | "tsv") => return Format::Csv,
        Some("svm" | "libsvm" | "svmlight") => return Format::Libsvm,
        Some("vw") => return Format::Vw,
        _ => {}
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]);
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        // Vowpal Wabbit: features after a '|', a few tokens before it, no commas.
        if let Some((head, _)) = line.split_once('|') {
            if !line.contains(',') && head.split_whitespace().count() <= 3 {
                return Format::Vw;
            }
        }
        let mut toks = line.split_whitespace();
        let first = toks.next().unwrap_or("");
        let looks_sparse = !first.contains(',') && toks.next().is_none_or(|t| t.contains(':'));
        return if looks_sparse && !line.contains(',') {
            Format::Libsvm
        } else {
            Format::Csv
        };
    }
    Format::Csv
}

impl Dataset {
    /// A dataset of `n` rows of `d` features (row-major `x`), without row weights.
    pub fn new(
        x: Vec<f32>,
        n: usize,
        d: usize,
        labels: Option<Labels>,
        source: impl Into<PathBuf>,
    ) -> Dataset {
        Dataset::from_matrix(x.into(), n, d, labels, source)
    }

    /// A dataset of `n` rows of `d` features held dense or sparse, without row weights.
    pub fn from_matrix(
        x: MatrixBuf,
        n: usize,
        d: usize,
        labels: Option<Labels>,
        source: impl Into<PathBuf>,
    ) -> Dataset {
        Dataset {
            x,
            n,
            d,
            labels,
            source: source.into(),
            weights: None,
            hashing: None,
        }
    }

    /// The rows `idx`, in that order (labels, weights and source kept): a copy, in memory
    /// (checked against the budget first; memory-mapped rows too).
    pub fn select(&self, idx: &[usize]) -> Result<Dataset> {
        // Bytes per copied row: 4 per value when dense; 8 per non-zero (value and column)
        // and a row start when sparse.
        let per_row = match &self.x {
            MatrixBuf::Csr(c) => 8 * (c.nnz() / self.n.max(1) + 1) + 8,
            _ => 4 * self.d,
        };
        crate::limits::check(
            || {
                format!(
                    "{}: a copy of {} of its rows",
                    self.source.display(),
                    idx.len()
                )
            },
            idx.len() as u128 * per_row as u128,
            1,
        )?;
        Ok(Dataset {
            x: self.x.select(idx, self.d),
            n: idx.len(),
            d: self.d,
            labels: self.labels.as_ref().map(|l| Labels {
                classes: l.classes.clone(),
                index: idx.iter().map(|&i| l.index[i]).collect(),
                ty: l.ty,
            }),
            source: self.source.clone(),
            weights: self
                .weights
                .as_ref()
                .map(|w| idx.iter().map(|&i| w[i]).collect()),
            hashing: self.hashing.clone(),
        })
    }

    /// Row `i` as `d` features (borrowed when dense, expanded when sparse).
    pub fn row(&self, i: usize) -> std::borrow::Cow<'_, [f32]> {
        self.x.row(i, self.d)
    }

    /// Feature `j` of row `i` (a binary search in a sparse row).
    pub fn get(&self, i: usize, j: usize) -> f32 {
        match &self.x {
            MatrixBuf::Dense(_) | MatrixBuf::Mapped(_) => self.x.value(i * self.d + j),
            MatrixBuf::Csr(c) => {
                let span = c.indptr[i]..c.indptr[i + 1];
                match c.indices[span.clone()].binary_search(&(j as u32)) {
                    Ok(p) => c.values[span.start + p],
                    Err(_) => 0.0,
                }
            }
        }
    }

    /// The features as the backends see them.
    pub fn view(&self) -> Matrix<'_> {
        self.x.view()
    }

    /// True when the features are held in CSR form.
    pub fn is_sparse(&self) -> bool {
        self.x.is_sparse()
    }

    /// Stored feature values: `n * d` when dense, the non-zeros when sparse.
    pub fn stored(&self) -> usize {
        self.x.len()
    }

    /// The index in `classes` (labels of type `ty`) of every row's label: names match by
    /// name first, else by value ("1.0" and "+1" match "1" unless the labels are strings). A
    /// label not in `classes` is an error naming it and `whose` (e.g. "the model's") classes.
    pub fn class_indices_in(
        &self,
        classes: &[String],
        ty: Option<LabelType>,
        whose: &str,
    ) -> Result<Vec<u32>> {
        let labels = self.require_labels()?;
        let mut map = Vec::with_capacity(labels.classes.len());
        for c in &labels.classes {
            // Text labels that read as one number ("1", "01", "1.0") were one class when the
            // file was read; a model whose labels came as strings keeps them apart, and
            // cannot tell which the file meant.
            if labels.ty.is_none() && ty == Some(LabelType::Str) {
                let alike: Vec<&String> = classes.iter().filter(|m| same_class(m, c)).collect();
                if alike.len() > 1 {
                    return Err(Error::Mismatch {
                        path: self.source.clone(),
                        msg: format!(
                            "label {c:?} reads as the same number as {whose} classes {}, which \
                             came as strings and are different classes; a text file cannot \
                             tell them apart (use the labels as strings where the model was \
                             trained, e.g. in Python)",
                            alike
                                .iter()
                                .map(|m| format!("{m:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
            }
            let idx = find_class(classes, ty.or(labels.ty), c).ok_or_else(|| Error::Mismatch {
                path: self.source.clone(),
                msg: format!(
                    "label {c:?} is not one of {whose} classes ({})",
                    classes.join(", ")
                ),
            })?;
            map.push(idx as u32);
        }
        Ok(labels.index.iter().map(|&t| map[t as usize]).collect())
    }

    /// Labels, or an error naming the file when it has none.
    pub fn require_labels(&self) -> Result<&Labels> {
        self.labels
            .as_ref()
            .ok_or_else(|| Error::data(&self.source, "the data has no label column"))
    }

    /// Checks the labels for binary training: exactly two classes.
    pub fn binary_signs(&self) -> Result<Vec<f32>> {
        let labels = self.require_labels()?;
        match labels.classes.len() {
            0 | 1 => Err(Error::data(
                &self.source,
                format!(
                    "only one class ({}) in the labels; training needs two",
                    labels.classes.first().map(String::as_str).unwrap_or("none")
                ),
            )),
            2 => Ok(labels.signs()),
            k => Err(Error::data(
                &self.source,
                format!(
                    "{k} classes in the labels ({}); the online and batch perceptrons are binary",
                    preview(&labels.classes)
                ),
            )),
        }
    }
}

fn preview(v: &[String]) -> String {
    let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if v.len() > 5 {
        s.push_str(", ...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_sort_numerically_and_map_to_signs() {
        let l = Labels::from_names(&["1", "-1", "1", "-1"]);
        assert_eq!(l.classes, vec!["-1", "1"]);
        assert_eq!(l.signs(), vec![1.0, -1.0, 1.0, -1.0]);
        let l = Labels::from_names(&["10", "9"]);
        assert_eq!(l.classes, vec!["9", "10"]);
        let l = Labels::from_names(&["yes", "no"]);
        assert_eq!(l.classes, vec!["no", "yes"]);
        // Numeric labels are compared by value: one class per value, named as first seen.
        let l = Labels::from_names(&["+1", "1", "-1", "1.0", "-1.00"]);
        assert_eq!(l.classes, vec!["-1", "+1"]);
        assert_eq!(l.index, vec![1, 1, 0, 1, 0]);
        // "nan" is a name, not a number: string order, total, no panic.
        let names: Vec<String> = (0..20)
            .map(|i| i.to_string())
            .chain(["nan".into()])
            .collect();
        let l = Labels::from_names(&names);
        assert_eq!(l.classes.len(), 21);
        assert!(!same_class("nan", "5") && !same_class("nan", "nan ") && same_class("2", "2.0"));
        // Integers past f64's 2^53 stay apart, in order.
        let l = Labels::from_names(&[
            "100000000000000001",
            "100000000000000000",
            "+100000000000000001",
        ]);
        assert_eq!(l.classes, ["100000000000000000", "100000000000000001"]);
        assert_eq!(l.index, [1, 0, 1]);
        // Typed labels compare as their type.
        assert!(same_class_as(
            Some(LabelType::Int),
            "100000000000000000",
            "+100000000000000000"
        ));
        assert!(!same_class_as(Some(LabelType::Str), "1", "01"));
        assert!(same_class_as(Some(LabelType::Float), "1", "1.0"));
        assert_eq!(
            find_class(&["1".into(), "01".into()], Some(LabelType::Str), "01"),
            Some(1)
        );
    }

    #[test]
    fn sniffs_format() {
        let auto = |p: &str, head: &[u8]| detect_format(Format::Auto, Path::new(p), head);
        let p = "data.txt";
        assert_eq!(auto(p, b"+1 1:0.5 3:2\n"), Format::Libsvm);
        assert_eq!(auto(p, b"# c\n-1 2:1\n"), Format::Libsvm);
        assert_eq!(auto(p, b"a,b,label\n1,2,3\n"), Format::Csv);
        assert_eq!(auto("x.svm", b"1,2"), Format::Libsvm);
        assert_eq!(auto("x.CSV", b"1 1:2"), Format::Csv);
        assert_eq!(auto("x.npy", b""), Format::Npy);
        assert_eq!(auto("x.bin", b"\x93NUMPY\x01\x00"), Format::Npy);
        assert_eq!(auto("x", b"PK\x03\x04"), Format::Npz);
        assert_eq!(auto("x.NPZ", b""), Format::Npz);
        // Asked for, a format is taken as it is.
        let csv = detect_format(Format::Csv, Path::new("x.svm"), b"1 1:2");
        assert_eq!(csv, Format::Csv);
    }
}
