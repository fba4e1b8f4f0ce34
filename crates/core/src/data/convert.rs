//! `convert`: CSV or LIBSVM text to a float32 `.npy` array in C order, which later runs
//! memory-map instead of reading (see [`super::npy::load_npy`]). Streamed: the text is parsed
//! row by row and each row written out at once, so memory holds one row (d values) and the
//! labels (n), never X; a file larger than memory converts. The labels go to a second `.npy`
//! (unicode class names, so every name survives as written).

use std::io::{BufReader, BufWriter, Seek, Write};
use std::path::Path;

use super::csv::{self, ValueSink};
use super::{libsvm, Format, Labels, LoadOptions};
use crate::error::{Error, Result};

/// Bytes of the `.npy` header written (magic, length and the padded dict): room for any
/// shape, and a multiple of 64 so the data starts aligned.
const HEADER_LEN: usize = 128;

/// What a conversion wrote.
#[derive(Debug, Clone)]
pub struct Converted {
    /// Rows.
    pub n: usize,
    /// Features.
    pub d: usize,
    /// The labels, when the input has them.
    pub labels: Option<Labels>,
}

/// The header of a version-1 `.npy` of `descr` and `shape`, padded with spaces to `len` bytes
/// (a multiple of 64), or `None` when it does not fit.
fn npy_header(descr: &str, shape: &str, len: usize) -> Option<Vec<u8>> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    if 10 + h.len() + 1 > len {
        return None;
    }
    while 10 + h.len() + 1 < len {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    Some(v)
}

/// Feature values written little-endian as they come, counted, with a progress callback.
struct NpySink<'a, W: Write> {
    w: W,
    out: &'a Path,
    values: u64,
    d: usize,
    progress: &'a mut dyn FnMut(usize),
}

impl<W: Write> ValueSink for NpySink<'_, W> {
    fn start(&mut self, d: usize, _row_bytes: u64) -> Result<()> {
        self.d = d;
        Ok(())
    }

    fn push(&mut self, v: f32, rows: usize) -> Result<()> {
        self.w
            .write_all(&v.to_le_bytes())
            .map_err(|e| Error::io(self.out, e))?;
        self.values += 1;
        if rows.is_multiple_of(1 << 16) && self.values.is_multiple_of(self.d.max(1) as u64) {
            (self.progress)(rows);
        }
        Ok(())
    }
}

/// Converts the CSV or LIBSVM file at `path` (format and label column as `opts` say) into a
/// float32 C-order `.npy` written to `out` (named `out_name` in errors), calling `progress`
/// with the rows done now and then. Other formats are refused: a `.npy` needs no conversion.
pub fn to_npy<W: Write + Seek>(
    path: &Path,
    opts: &LoadOptions,
    out: W,
    out_name: &Path,
    progress: &mut dyn FnMut(usize),
) -> Result<Converted> {
    let open = || -> std::io::Result<BufReader<std::fs::File>> {
        Ok(BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(path)?,
        ))
    };
    let format = match opts.format {
        Format::Auto => {
            use std::io::BufRead;
            let mut r = open().map_err(|e| Error::io(path, e))?;
            let head = r.fill_buf().map_err(|e| Error::io(path, e))?;
            super::detect_format(Format::Auto, path, head)
        }
        f => f,
    };
    let mut w = BufWriter::with_capacity(1 << 20, out);
    w.write_all(&[b' '; HEADER_LEN])
        .map_err(|e| Error::io(out_name, e))?;
    let mut sink = NpySink {
        w,
        out: out_name,
        values: 0,
        d: 0,
        progress,
    };
    let (n, d, labels, weights) = match format {
        Format::Csv => csv::parse_into(
            path,
            open().map_err(|e| Error::io(path, e))?,
            opts,
            &mut sink,
        )?,
        Format::Libsvm => libsvm::stream_with(path, open, opts, &mut sink)?,
        _ => {
            return Err(Error::data(
                path,
                "convert reads CSV or LIBSVM text; a NumPy file is used as it is",
            ))
        }
    };
    if weights.is_some() {
        return Err(Error::data(
            path,
            "convert writes features and labels only, not a weight column (give row weights \
             as their own .npy file when training)",
        ));
    }
    if sink.values != n as u64 * d as u64 {
        return Err(Error::data(path, "the file changed while it was read"));
    }
    let header = npy_header("<f4", &format!("({n}, {d})"), HEADER_LEN)
        .ok_or_else(|| Error::data(path, format!("shape ({n}, {d}) does not fit a header")))?;
    let mut w = sink
        .w
        .into_inner()
        .map_err(|e| Error::io(out_name, e.into_error()))?;
    w.rewind()
        .and_then(|_| w.write_all(&header))
        .and_then(|_| w.flush())
        .map_err(|e| Error::io(out_name, e))?;
    Ok(Converted { n, d, labels })
}

/// Writes one label per row as a `.npy` of unicode strings (`<U` as wide as the longest
/// class name), so the class names read back exactly as written.
pub fn write_labels(labels: &Labels, out: &mut dyn Write) -> std::io::Result<()> {
    let width = labels
        .classes
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(1)
        .max(1);
    let n = labels.index.len();
    let shape = format!("({n},)");
    let mut len = 64;
    let header = loop {
        if let Some(h) = npy_header(&format!("<U{width}"), &shape, len) {
            break h;
        }
        len += 64;
    };
    let mut w = BufWriter::new(out);
    w.write_all(&header)?;
    let encoded: Vec<Vec<u8>> = labels
        .classes
        .iter()
        .map(|c| {
            let mut v: Vec<u8> = c.chars().flat_map(|ch| (ch as u32).to_le_bytes()).collect();
            v.resize(4 * width, 0);
            v
        })
        .collect();
    for &i in &labels.index {
        w.write_all(&encoded[i as usize])?;
    }
    w.flush()
}
