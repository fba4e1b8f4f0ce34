//! One process's share of a text file in a data-parallel run: process k of N parses only the
//! lines that start in bytes [k S / N, (k + 1) S / N) of the file (S its size), and the
//! processes then agree on what the whole file would have given: the classes (the union of
//! every share's, sorted as one file sorts them), the number of features (LIBSVM: the largest
//! index of any share) and, for LIBSVM under the automatic layout, dense or sparse by the
//! density of the whole file.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::{csv, dense_zeros, detect_format, libsvm, Dataset, Format, LabelBuilder, Labels};
use super::{Layout, LoadOptions};
use crate::backend::{MatrixBuf, Reduce};
use crate::error::{Error, Result};

/// Whether [`load_part`] reads a share of `path` (a regular CSV or LIBSVM file), rather than
/// the whole file.
pub fn splits(path: &Path, opts: &LoadOptions) -> Result<bool> {
    if path == Path::new("-") || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(false);
    }
    Ok(matches!(
        format_of(path, opts)?,
        Format::Csv | Format::Libsvm
    ))
}

fn format_of(path: &Path, opts: &LoadOptions) -> Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    Ok(match (opts.format, ext.as_deref()) {
        (Format::Auto, Some("npy")) => Format::Npy,
        (Format::Auto, Some("npz")) => Format::Npz,
        (Format::Auto, _) => {
            let mut r = BufReader::new(File::open(path).map_err(|e| Error::io(path, e))?);
            let head = r.fill_buf().map_err(|e| Error::io(path, e))?;
            match detect_format(path, head) {
                Format::Auto => Format::Csv,
                f => f,
            }
        }
        (f, _) => f,
    })
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
/// file's first line (its header, if it has one: the share is then parsed as the file is).
struct Share {
    head: Vec<u8>,
    start: u64,
    end: u64,
}

impl Share {
    /// Whether the share has a line that is not blank (nor, in LIBSVM, a comment), past its
    /// first `skip` lines.
    fn has_rows(&self, path: &Path, format: Format, mut skip: usize) -> Result<bool> {
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
            if skip > 0 {
                skip -= 1;
            } else {
                let comment = format == Format::Libsvm && text.starts_with(b"#");
                if !text.is_empty() && !comment {
                    return Ok(true);
                }
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

/// Parses process `part`'s share of the regular CSV or LIBSVM file `path` (of `parts`), as
/// [`super::load`] would parse the whole file, with LIBSVM rows held sparse (the layout is
/// decided by [`agree`]). Errors name the line of the whole file.
pub fn load_part(path: &Path, opts: &LoadOptions, part: usize, parts: usize) -> Result<Dataset> {
    let format = format_of(path, opts)?;
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let cut = |k: usize| (k as u128 * size as u128 / parts.max(1) as u128) as u64;
    let start = line_start(&mut f, path, cut(part))?;
    let end = line_start(&mut f, path, cut(part + 1))?.max(start);
    let mut head = Vec::new();
    if format == Format::Csv {
        f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(path, e))?;
        BufReader::new(&mut f)
            .read_until(b'\n', &mut head)
            .map_err(|e| Error::io(path, e))?;
        // A first line that parses as a row is data (the file has no header): process 0's.
        if csv::parse(path, &head, opts).is_ok_and(|h| h.n == 1) {
            head.clear();
        }
    }
    // The first share holds the header itself.
    let header_here = start == 0 && !head.is_empty();
    if start == 0 {
        head.clear();
    }
    let share = Share { head, start, end };
    if !share.has_rows(path, format, usize::from(header_here))? {
        // More processes than lines (or only blank ones here): no rows, and the features and
        // classes of the others (see [`agree`]).
        return Ok(Dataset {
            x: MatrixBuf::Csr(crate::backend::CsrBuf::new()),
            n: 0,
            d: 0,
            labels: Some(Labels {
                classes: Vec::new(),
                index: Vec::new(),
            }),
            source: path.to_path_buf(),
            weights: opts.weight_col.is_some().then(Vec::new),
        });
    }
    let parsed = match format {
        Format::Libsvm => {
            let opts = LoadOptions {
                layout: Layout::Sparse,
                ..opts.clone()
            };
            libsvm::parse_with(path, || share.reader(path), &opts)
        }
        _ => {
            let r = share.reader(path).map_err(|e| Error::io(path, e))?;
            csv::parse_reader(path, r, end - start, opts)
        }
    };
    parsed.map_err(|e| match e {
        // The share's line l is line l of the file past the lines before the share (less the
        // header line put before a CSV share).
        Error::Parse {
            path: p,
            line: Some(l),
            column,
            text,
            msg,
        } if start > 0 => {
            let before = lines_before(path, start).unwrap_or(0);
            let head = usize::from(!share.head.is_empty());
            let line = if l <= head { l } else { l - head + before };
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
    // Dense or sparse, by the whole file (every process takes part in the sum).
    let mut t = [ds.n as f64, ds.stored() as f64];
    reduce.sum_f64(&mut t);
    if let MatrixBuf::Csr(c) = &ds.x {
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
