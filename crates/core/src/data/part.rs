//! One process's share of a text file in a data-parallel run: process k of N parses only the
//! lines that start in bytes [k S / N, (k + 1) S / N) of the file (S its size), and the
//! processes then agree on what the whole file would have given: the classes (the union of
//! every share's, sorted as one file sorts them), the number of features (LIBSVM: the largest
//! index of any share) and, for LIBSVM under the automatic layout, dense or sparse by the
//! density of the whole file. Vowpal Wabbit text is cut the same way (its rows hashed into
//! the columns every process shares, always sparse).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::{csv, dense_zeros, detect_format, libsvm, vw, Dataset, Format, LabelBuilder, Labels};
use super::{Layout, LoadOptions};
use crate::error::{Error, Result};
use crate::matrix::MatrixBuf;
use crate::reduce::Reduce;

/// Whether [`load_part`] reads a share of `path` (a regular CSV, LIBSVM or Vowpal Wabbit
/// file), rather than the whole file.
pub fn splits(path: &Path, opts: &LoadOptions) -> Result<bool> {
    if path == Path::new("-") || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(false);
    }
    Ok(matches!(
        format_of(path, opts)?,
        Format::Csv | Format::Libsvm | Format::Vw
    ))
}

fn format_of(path: &Path, opts: &LoadOptions) -> Result<Format> {
    let mut r = BufReader::new(File::open(path).map_err(|e| Error::io(path, e))?);
    let head = r.fill_buf().map_err(|e| Error::io(path, e))?;
    Ok(detect_format(opts.format, path, head))
}

/// The first byte at or after `at` that starts a line (0, or just after a newline): a line
/// belongs to the share its first byte is in.
fn line_start(f: &mut File, path: &Path, at: u64) -> Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    f.seek(SeekFrom::Start(at - 1))
        .map_err(|e| Error::io(path, e))?;
    let mut r = BufReader::new(&mut *f);
    let mut skipped = Vec::new();
    let k = r
        .read_until(b'\n', &mut skipped)
        .map_err(|e| Error::io(path, e))?;
    Ok(at - 1 + k as u64)
}

/// The bytes [start, end) of `path` and, before them for a CSV share other than the first, the
/// file's start up to the end of its header (with any comments before it): the share is then
/// parsed as the file is, told whether the first record is a header.
struct Share {
    head: Vec<u8>,
    start: u64,
    end: u64,
}

impl Share {
    /// Whether the share has a line that is not blank nor, where `comments`, a comment (`#`,
    /// which the CSV and LIBSVM readers skip; Vowpal Wabbit text has none).
    fn has_rows(&self, path: &Path, comments: bool) -> Result<bool> {
        let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
        f.seek(SeekFrom::Start(self.start))
            .map_err(|e| Error::io(path, e))?;
        let mut r = BufReader::new(f.take(self.end - self.start));
        let mut line = Vec::new();
        loop {
            line.clear();
            if r.read_until(b'\n', &mut line)
                .map_err(|e| Error::io(path, e))?
                == 0
            {
                return Ok(false);
            }
            let text = line.trim_ascii();
            let comment = comments && text.starts_with(b"#");
            if !text.is_empty() && !comment {
                return Ok(true);
            }
        }
    }

    fn reader(&self, path: &Path) -> std::io::Result<impl BufRead> {
        let mut f = File::open(path)?;
        f.seek(SeekFrom::Start(self.start))?;
        Ok(BufReader::with_capacity(
            1 << 20,
            std::io::Cursor::new(self.head.clone()).chain(f.take(self.end - self.start)),
        ))
    }
}

/// Parses process `part`'s share of the regular CSV, LIBSVM or Vowpal Wabbit file `path` (of
/// `parts`), as
/// [`super::load`] would parse the whole file, with LIBSVM rows held sparse (the layout is
/// decided by [`agree`]). Errors name the line of the whole file.
pub fn load_part(path: &Path, opts: &LoadOptions, part: usize, parts: usize) -> Result<Dataset> {
    let format = format_of(path, opts)?;
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut opts = opts.clone();
    // A CSV's header, decided once from the file's first two records as a whole-file parse
    // decides it; every share is told, and shares after the first get it put before them.
    let mut header_end = 0;
    if format == Format::Csv {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        if let Some((header, end)) = csv::first_record(path, file, &opts)? {
            opts.csv_header = Some(header);
            if header {
                header_end = end.min(size);
            }
        }
    }
    let cut = |k: usize| (k as u128 * size as u128 / parts.max(1) as u128) as u64;
    let bound = |f: &mut File, k: usize| -> Result<u64> {
        Ok(match k {
            0 => 0,
            _ => line_start(f, path, cut(k))?.max(header_end),
        })
    };
    let start = bound(&mut f, part)?;
    let end = bound(&mut f, part + 1)?.max(start);
    let mut head = Vec::new();
    if start > 0 && header_end > 0 {
        f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(path, e))?;
        (&mut f)
            .take(header_end)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(path, e))?;
    }
    let scan = Share {
        head: Vec::new(),
        start: start.max(header_end).min(end),
        end,
    };
    if !scan.has_rows(path, format != Format::Vw)? {
        // More processes than lines (or only blank ones and comments here): no rows, and the
        // features and classes of the others (see [`agree`]); hashed text has its columns.
        let hashing = match format {
            Format::Vw => Some(opts.hashing.clone().unwrap_or_default()),
            _ => opts.hashing.clone().filter(|h| h.hashes_csv()),
        };
        return Ok(Dataset {
            x: MatrixBuf::Csr(crate::matrix::CsrBuf::new()),
            n: 0,
            d: hashing.as_ref().map_or(0, |h| h.columns()),
            labels: Some(Labels {
                classes: Vec::new(),
                index: Vec::new(),
                ty: None,
            }),
            source: path.to_path_buf(),
            weights: opts.weight_col.is_some().then(Vec::new),
            hashing,
        });
    }
    let share = Share { head, start, end };
    let parsed = match format {
        Format::Libsvm => {
            let opts = LoadOptions {
                layout: Layout::Sparse,
                ..opts.clone()
            };
            libsvm::parse_with(path, || share.reader(path), &opts)
        }
        Format::Vw => vw::parse_with(path, || share.reader(path), &opts),
        _ => {
            let r = share.reader(path).map_err(|e| Error::io(path, e))?;
            csv::parse_reader(path, r, end - start, &opts)
        }
    };
    let head_lines = share.head.iter().filter(|&&b| b == b'\n').count();
    parsed.map_err(|e| match e {
        // The share's line l is line l of the file past the lines before the share (less the
        // lines of the header put before a CSV share).
        Error::Parse {
            path: p,
            line: Some(l),
            column,
            text,
            msg,
        } if start > 0 => {
            let before = lines_before(path, start).unwrap_or(0);
            let line = if l <= head_lines {
                l
            } else {
                l - head_lines + before
            };
            Error::Parse {
                path: p,
                line: Some(line),
                column,
                text,
                msg,
            }
        }
        other => other,
    })
}

/// Newlines in the first `upto` bytes of `path`.
fn lines_before(path: &Path, upto: u64) -> std::io::Result<usize> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(path)?.take(upto));
    let mut n = 0;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(n);
        }
        n += buf.iter().filter(|&&b| b == b'\n').count();
        let k = buf.len();
        r.consume(k);
    }
}

/// Makes the shares of every process agree (call it in every process, after
/// [`load_part`]): the classes become the whole file's, each share's class indices remapped;
/// the number of features becomes the largest of any share; LIBSVM rows under
/// `layout` (automatic: the whole file's density) become dense where one process reading
/// the whole file would have held them dense.
pub fn agree(ds: &mut Dataset, reduce: &dyn Reduce, layout: Layout) -> Result<()> {
    // Classes: every share's names, in process order, sorted as one file's would be.
    let local = ds.labels.as_ref().map(|l| l.classes.join("\n"));
    let mut blob = local.clone().unwrap_or_default().into_bytes();
    blob.push(b'\n');
    let all = reduce.gather_u8(&blob);
    let mut b = LabelBuilder::default();
    for name in String::from_utf8_lossy(&all).split('\n') {
        if !name.is_empty() {
            b.push(name);
        }
    }
    let union = b.finish();
    if let Some(l) = ds.labels.as_mut() {
        let map: Vec<u32> = l
            .classes
            .iter()
            .map(|c| {
                union
                    .classes
                    .iter()
                    .position(|u| super::same_class(u, c))
                    .unwrap_or(0) as u32
            })
            .collect();
        *l = Labels {
            classes: union.classes.clone(),
            index: l.index.iter().map(|&i| map[i as usize]).collect(),
            ty: None,
        };
    }
    // Features: the widest share's (CSV shares all have the header's).
    let d = reduce.max_f64(ds.d as f64) as usize;
    if d != ds.d {
        match &ds.x {
            MatrixBuf::Csr(_) => ds.d = d,
            _ => {
                return Err(Error::data(
                    &ds.source,
                    format!("this process's rows have {} features, another's {d}", ds.d),
                ))
            }
        }
    }
    // Dense or sparse, by the whole file (every process takes part in the sum); hashed rows
    // stay sparse, as a whole-file parse holds them.
    let mut t = [ds.n as f64, ds.stored() as f64];
    reduce.sum_f64(&mut t);
    if let (MatrixBuf::Csr(c), None) = (&ds.x, &ds.hashing) {
        if !layout.sparse_for(t[0] as usize, d, t[1] as usize) {
            let mut x = dense_zeros(&ds.source, ds.n, d)?;
            for i in 0..c.n() {
                let (a, b) = (c.indptr[i], c.indptr[i + 1]);
                for (&j, &v) in c.indices[a..b].iter().zip(&c.values[a..b]) {
                    x[i * d + j as usize] = v;
                }
            }
            ds.x = MatrixBuf::Dense(x);
        }
    }
    Ok(())
}
