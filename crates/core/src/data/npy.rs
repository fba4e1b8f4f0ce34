//! NumPy input: `.npy` arrays (version 1-3 headers) and `.npz` archives. Features are a 2-D
//! float16/32/64 or 8- or 16-bit integer array in C or Fortran order; labels come from a 1-D array of any integer,
//! float, bool or string dtype (a second `.npy` given with `--labels`, or `y` inside a `.npz`
//! next to `X`). Wrong dtype, shape or a missing array is an error naming the file and array.

use std::io::Read;
use std::path::Path;

use super::{Dataset, LabelBuilder, LoadOptions};
use crate::error::{Error, Result};
use crate::matrix::{CsrBuf, Features, MappedF32, MatrixBuf, Storage};

/// A parsed `.npy` array: its dtype string, shape, order, and the raw data bytes.
struct Npy {
    descr: String,
    fortran: bool,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn bad(path: &Path, what: &str, msg: impl Into<String>) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        msg: format!("{what}: {}", msg.into()),
    }
}

/// Parses the `.npy` bytes of array `what` (the file name or the array name in an archive).
fn parse(path: &Path, what: &str, bytes: Vec<u8>) -> Result<Npy> {
    let (descr, fortran, shape, start) = header(path, what, &bytes)?;
    let mut data = bytes;
    data.drain(..start);
    Ok(Npy {
        descr,
        fortran,
        shape,
        data,
    })
}

/// The header of the `.npy` bytes of array `what`: dtype, order, shape, and where the data
/// starts.
fn header(path: &Path, what: &str, bytes: &[u8]) -> Result<(String, bool, Vec<usize>, usize)> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad(
            path,
            what,
            "not a NumPy .npy array (no \\x93NUMPY magic)",
        ));
    }
    let major = bytes[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(path, what, format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(start..start + hlen)
        .ok_or_else(|| bad(path, what, "truncated header"))?;
    let header = String::from_utf8_lossy(header).into_owned();
    let field = |key: &str| -> Result<String> {
        let k = format!("'{key}':");
        let i = header
            .find(&k)
            .ok_or_else(|| bad(path, what, format!("header has no {key:?}: {header}")))?;
        Ok(header[i + k.len()..].trim_start().to_string())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad(path, what, format!("unreadable descr in {header}")))?
        .to_string();
    let fortran = field("fortran_order")?.starts_with("True");
    let shape_text = field("shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad(path, what, format!("unreadable shape in {header}")))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<usize>()
                .map_err(|_| bad(path, what, format!("bad shape {inner:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((descr, fortran, shape, start + hlen))
}

/// Element size and kind of a dtype string such as `<f4`, `|u1`, `<U7`.
fn dtype(path: &Path, what: &str, descr: &str) -> Result<(char, char, usize)> {
    let mut c = descr.chars();
    let (order, kind) = (c.next().unwrap_or('?'), c.next().unwrap_or('?'));
    let size: usize = c
        .as_str()
        .parse()
        .map_err(|_| bad(path, what, format!("unsupported dtype {descr:?}")))?;
    if order == '>' && size > 1 && kind != 'S' {
        return Err(bad(
            path,
            what,
            format!("big-endian dtype {descr:?} is not supported; save with '<' byte order"),
        ));
    }
    Ok((order, kind, size))
}

/// The features: a 2-D array of float16/32/64 or of 8- or 16-bit integers (every one exact
/// in f32), returned row-major with every value finite.
fn features(path: &Path, what: &str, a: &Npy) -> Result<(Vec<f32>, usize, usize)> {
    let (_, kind, size) = dtype(path, what, &a.descr)?;
    if !matches!((kind, size), ('f', 2 | 4 | 8) | ('u' | 'i', 1 | 2)) {
        return Err(bad(
            path,
            what,
            format!(
                "features must be float16, float32, float64 or 8- or 16-bit integers, found \
                 dtype {:?}",
                a.descr
            ),
        ));
    }
    let (n, d) = match a.shape[..] {
        [n, d] => (n, d),
        _ => {
            return Err(bad(
                path,
                what,
                format!(
                    "features must be 2-D (rows, features), found shape {:?}",
                    a.shape
                ),
            ))
        }
    };
    if n == 0 || d == 0 {
        return Err(bad(path, what, format!("empty array of shape ({n}, {d})")));
    }
    if n.checked_mul(d)
        .and_then(|v| v.checked_mul(size))
        .is_none_or(|need| a.data.len() < need)
    {
        return Err(bad(
            path,
            what,
            format!(
                "truncated data: {} bytes for shape ({n}, {d})",
                a.data.len()
            ),
        ));
    }
    let get = |k: usize| -> f64 {
        let b = &a.data[k * size..(k + 1) * size];
        match (kind, size) {
            ('u', 1) => b[0] as f64,
            ('i', 1) => b[0] as i8 as f64,
            ('u', 2) => u16::from_le_bytes([b[0], b[1]]) as f64,
            ('i', 2) => i16::from_le_bytes([b[0], b[1]]) as f64,
            ('f', 2) => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            ('f', 4) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            _ => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    };
    let mut x = super::dense_zeros(path, n, d)?;
    for i in 0..n {
        for j in 0..d {
            let v = get(if a.fortran { j * n + i } else { i * d + j });
            let f = v as f32;
            if !f.is_finite() {
                return Err(bad(
                    path,
                    what,
                    format!(
                        "row {}, column {}: {v} is not a finite f32 value",
                        i + 1,
                        j + 1
                    ),
                ));
            }
            x[i * d + j] = f;
        }
    }
    Ok((x, n, d))
}

/// The labels: a 1-D array (or n x 1) of integers, floats, bools or strings, as class names.
fn labels(path: &Path, what: &str, a: &Npy, n: usize) -> Result<super::Labels> {
    let len = match a.shape[..] {
        [m] | [m, 1] => m,
        _ => {
            return Err(bad(
                path,
                what,
                format!("labels must be 1-D, found shape {:?}", a.shape),
            ))
        }
    };
    if len != n {
        return Err(bad(
            path,
            what,
            format!("{len} labels for {n} rows of features"),
        ));
    }
    let (_, kind, count) = dtype(path, what, &a.descr)?;
    // Unicode strings count characters of 4 bytes each; every other dtype counts bytes.
    let size = if kind == 'U' { 4 * count } else { count };
    if n.checked_mul(size).is_none_or(|need| a.data.len() < need) {
        return Err(bad(path, what, "truncated data"));
    }
    let mut b = LabelBuilder::default();
    for i in 0..n {
        let e = &a.data[i * size..(i + 1) * size];
        let mut le = [0u8; 8];
        le[..size.min(8)].copy_from_slice(&e[..size.min(8)]);
        let name = match (kind, size) {
            ('b', 1) => (e[0] != 0).to_string(),
            ('i', 1 | 2 | 4 | 8) => {
                let shift = 64 - 8 * size as u32;
                ((i64::from_le_bytes(le) << shift) >> shift).to_string()
            }
            ('u', 1 | 2 | 4 | 8) => u64::from_le_bytes(le).to_string(),
            ('f', 4) => f32::from_le_bytes([e[0], e[1], e[2], e[3]]).to_string(),
            ('f', 8) => f64::from_le_bytes(le).to_string(),
            ('U', _) => e
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .take_while(|&c| c != 0)
                .filter_map(char::from_u32)
                .collect(),
            ('S', _) => String::from_utf8_lossy(e)
                .trim_end_matches('\0')
                .to_string(),
            _ => {
                return Err(bad(
                    path,
                    what,
                    format!("unsupported label dtype {:?}", a.descr),
                ))
            }
        };
        if name.is_empty() || name == "NaN" {
            return Err(bad(path, what, format!("label {} is empty or NaN", i + 1)));
        }
        super::check_label(&name).map_err(|m| bad(path, what, format!("label {}: {m}", i + 1)))?;
        b.push(&name);
    }
    Ok(b.finish())
}

/// Per-row weights from a `.npy` file: a 1-D (or n x 1) float or integer array of exactly `n`
/// values, each finite and >= 0.
pub fn load_weights(path: &Path, n: usize) -> Result<Vec<f32>> {
    let what = "weights";
    let a = parse(path, what, read_file(path)?)?;
    let (_, kind, size) = dtype(path, what, &a.descr)?;
    let len = match a.shape[..] {
        [m] | [m, 1] => m,
        _ => {
            return Err(bad(
                path,
                what,
                format!("weights must be 1-D, found shape {:?}", a.shape),
            ))
        }
    };
    if len != n {
        return Err(bad(
            path,
            what,
            format!("{len} weights for {n} rows of training data"),
        ));
    }
    let ok = match kind {
        'f' => size == 4 || size == 8,
        'i' | 'u' => matches!(size, 1 | 2 | 4 | 8),
        _ => false,
    };
    if !ok || a.data.len() < len.saturating_mul(size) {
        return Err(bad(
            path,
            what,
            format!(
                "weights must be a float or integer array of {len} values, found dtype {:?} with {} bytes",
                a.descr,
                a.data.len()
            ),
        ));
    }
    (0..len)
        .map(|k| {
            let b = &a.data[k * size..(k + 1) * size];
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(b);
            let v = match (kind, size) {
                ('f', 4) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                ('f', _) => f64::from_le_bytes(buf),
                ('u', _) => u64::from_le_bytes(buf) as f64,
                (_, _) => {
                    // Sign-extend the little-endian integer.
                    let shift = 64 - 8 * size as u32;
                    ((i64::from_le_bytes(buf) << shift) >> shift) as f64
                }
            };
            let f = v as f32;
            if f.is_finite() && f >= 0.0 {
                Ok(f)
            } else {
                Err(bad(
                    path,
                    what,
                    format!("row {}: {v} is not a finite weight >= 0", k + 1),
                ))
            }
        })
        .collect()
}

/// The labels of `n` rows from the `.npy` file `path`, when one is given.
fn labels_file(path: Option<&Path>, n: usize) -> Result<Option<super::Labels>> {
    let Some(lp) = path else {
        return Ok(None);
    };
    let name = lp
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Some(labels(
        lp,
        &name,
        &parse(lp, &name, read_file(lp)?)?,
        n,
    )?))
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

/// Loads features from a `.npy` file, with labels from `labels` (another `.npy`) if given.
/// A little-endian float32 array in C order is memory-mapped, not read: epochs stream it from
/// the page cache and X takes no anonymous memory (a file larger than RAM trains); every value
/// is still checked finite first. Other dtypes and orders are read into memory.
pub fn load_npy(path: &Path, labels_path: Option<&Path>) -> Result<Dataset> {
    if let Some(ds) = map_npy(path, labels_path)? {
        return Ok(ds);
    }
    parse_npy(path, &read_file(path)?, labels_path)
}

/// [`load_npy`] by memory map, or `None` when the file is not a 2-D little-endian C array of
/// float32, float16, uint8 or int8 of the size its header says (the caller reads it instead,
/// and names any error).
fn map_npy(path: &Path, labels_path: Option<&Path>) -> Result<Option<Dataset>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and private to this process. A file truncated while it
    // is mapped raises SIGBUS on reading past its new end: the map is listed with
    // `fault::WatchedMap`, so the CLI's handler names the file and exits 1 instead.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Ok(None);
    };
    #[cfg(unix)]
    let map = crate::fault::WatchedMap::new(map, file, path);
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Ok((descr, fortran, shape, start)) = header(path, &name, map.as_ref()) else {
        return Ok(None);
    };
    let (n, d) = match shape[..] {
        [n, d] if n > 0 && d > 0 => (n, d),
        _ => return Ok(None),
    };
    let Some(len) = n.checked_mul(d) else {
        return Ok(None);
    };
    // f32 and the compact storages the epochs read as they are (bytes, half floats).
    let storage = match descr.as_str() {
        "<f4" => Storage::F32,
        "<f2" => Storage::F16,
        "|u1" | "<u1" => Storage::U8,
        "|i1" | "<i1" => Storage::I8,
        _ => return Ok(None),
    };
    let size = storage.bytes();
    if fortran || map.as_ref().len() < start.saturating_add(len.saturating_mul(size)) {
        return Ok(None);
    }
    let Some(m) = MappedF32::new(map, start, len, storage) else {
        return Ok(None);
    };
    {
        use rayon::prelude::*;
        // Bytes are always finite; floats are checked in one pass.
        let bad_at = match m.features() {
            Features::F32(x) => x.par_iter().position_first(|v| !v.is_finite()),
            Features::F16(x) => {
                // Subnormal halves, which some GPUs flush to zero, are not read as f16 (the
                // compact storage holds none): such a file is read into memory instead.
                let subnormal = |v: &half::f16| v.classify() == std::num::FpCategory::Subnormal;
                if x.par_iter().any(subnormal) {
                    return Ok(None);
                }
                x.par_iter().position_first(|v| !v.is_finite())
            }
            _ => None,
        };
        if let Some(k) = bad_at {
            return Err(bad(
                path,
                &name,
                format!(
                    "row {}, column {}: {} is not a finite {} value",
                    k / d + 1,
                    k % d + 1,
                    m.features().get(k),
                    storage.name()
                ),
            ));
        }
    }
    let labels = labels_file(labels_path, n)?;
    Ok(Some(Dataset::from_matrix(
        MatrixBuf::Mapped(m),
        n,
        d,
        labels,
        path.to_path_buf(),
    )))
}

/// Parses `.npy` bytes read from `path`, with labels from `labels` (another `.npy`) if given.
pub fn parse_npy(path: &Path, bytes: &[u8], labels_path: Option<&Path>) -> Result<Dataset> {
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let a = parse(path, &name, bytes.to_vec())?;
    let (x, n, d) = features(path, &name, &a)?;
    let labels = labels_file(labels_path, n)?;
    Ok(Dataset::new(x, n, d, labels, path.to_path_buf()))
}

/// Loads `X` and, when present, `y` from a `.npz` archive (saved by `numpy.savez` or
/// `numpy.savez_compressed`), or a scipy sparse matrix (`scipy.sparse.save_npz`, CSR or CSC)
/// with labels from `opts.labels`.
pub fn load_npz(path: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    parse_npz(path, std::io::BufReader::new(file), opts)
}

/// Parses a `.npz` archive read from `path`. Each member's declared size is checked against
/// the memory budget before it is inflated, and it is never inflated past that size.
pub fn parse_npz<R: Read + std::io::Seek>(
    path: &Path,
    reader: R,
    opts: &LoadOptions,
) -> Result<Dataset> {
    let mut zip = zip::ZipArchive::new(reader)
        .map_err(|e| bad(path, "archive", format!("not a .npz (zip) archive: {e}")))?;
    let mut member = |name: &str| -> Result<Option<Vec<u8>>> {
        let Ok(f) = zip.by_name(&format!("{name}.npy")) else {
            return Ok(None);
        };
        let size = f.size();
        crate::limits::check(
            || {
                format!(
                    "{}: member {name}.npy, {size} bytes when inflated,",
                    path.display()
                )
            },
            size as u128,
            1,
        )?;
        let mut v = Vec::new();
        f.take(size)
            .read_to_end(&mut v)
            .map_err(|e| bad(path, name, format!("cannot read: {e}")))?;
        Ok(Some(v))
    };
    if let Some(fb) = member("format")? {
        let get = |name: &str, b: Option<Vec<u8>>| {
            b.ok_or_else(|| {
                bad(
                    path,
                    name,
                    "a scipy sparse archive without this array (save with scipy.sparse.save_npz)",
                )
            })
        };
        let shape = get("shape", member("shape")?)?;
        let indptr = get("indptr", member("indptr")?)?;
        let indices = get("indices", member("indices")?)?;
        let data = get("data", member("data")?)?;
        return scipy_sparse(path, [fb, shape, indptr, indices, data], opts);
    }
    let xb = member("X")?.ok_or_else(|| {
        bad(
            path,
            "X",
            "the archive has no array named X (save with np.savez(f, X=..., y=...)) and is not \
             a scipy sparse matrix (scipy.sparse.save_npz)",
        )
    })?;
    let yb = member("y")?;
    let a = parse(path, "X", xb)?;
    let (x, n, d) = features(path, "X", &a)?;
    let labels = match yb {
        Some(b) => Some(labels(path, "y", &parse(path, "y", b)?, n)?),
        None => None,
    };
    Ok(Dataset::new(x, n, d, labels, path.to_path_buf()))
}

/// A 1-D array of `len` non-negative integers (int32/int64, or their unsigned forms), as u64.
fn ints(path: &Path, what: &str, a: &Npy, len: Option<usize>) -> Result<Vec<u64>> {
    let (_, kind, size) = dtype(path, what, &a.descr)?;
    if !matches!(kind, 'i' | 'u') || !matches!(size, 4 | 8) {
        return Err(bad(
            path,
            what,
            format!("must be int32 or int64, found dtype {:?}", a.descr),
        ));
    }
    let m = match a.shape[..] {
        [m] => m,
        _ => {
            return Err(bad(
                path,
                what,
                format!("must be 1-D, found shape {:?}", a.shape),
            ))
        }
    };
    if let Some(len) = len.filter(|&l| l != m) {
        return Err(bad(path, what, format!("{m} values where {len} belong")));
    }
    if a.data.len() < m.saturating_mul(size) {
        return Err(bad(
            path,
            what,
            format!("truncated data: {} bytes for {m} values", a.data.len()),
        ));
    }
    a.data[..m * size]
        .chunks_exact(size)
        .enumerate()
        .map(|(k, b)| {
            let mut buf = [0u8; 8];
            buf[..size].copy_from_slice(b);
            let v = if kind == 'u' {
                u64::from_le_bytes(buf) as i128
            } else {
                let shift = 64 - 8 * size as u32;
                ((i64::from_le_bytes(buf) << shift) >> shift) as i128
            };
            u64::try_from(v)
                .map_err(|_| bad(path, what, format!("value {} is negative: {v}", k + 1)))
        })
        .collect()
}

/// The matrix of a `scipy.sparse.save_npz` archive: members format, shape, indptr, indices
/// and data. CSR and CSC (float32/float64 data, int32/int64 indices) are read; the structure
/// is checked whole (row or column starts from 0, non-decreasing, ending at the number of
/// values; indices in range, strictly ascending within a row or column) before it is used,
/// and every value must be a finite f32. CSC is turned into CSR. Explicit zeros are dropped.
fn scipy_sparse(path: &Path, members: [Vec<u8>; 5], opts: &LoadOptions) -> Result<Dataset> {
    let [fb, sb, pb, ib, db] = members;
    let csc = sparse_format(path, fb)?;
    let shape = ints(path, "shape", &parse(path, "shape", sb)?, Some(2))?;
    let (n, d) = (shape[0] as usize, shape[1] as usize);
    if n == 0 || d == 0 {
        return Err(bad(
            path,
            "shape",
            format!("empty matrix of shape ({n}, {d})"),
        ));
    }
    if d > u32::MAX as usize || n > u32::MAX as usize {
        return Err(bad(path, "shape", format!("shape ({n}, {d}) is too large")));
    }
    let outer = if csc { d } else { n };
    let indptr = ints(path, "indptr", &parse(path, "indptr", pb)?, Some(outer + 1))?;
    let indices = ints(path, "indices", &parse(path, "indices", ib)?, None)?;
    let m = Compressed {
        csc,
        n,
        d,
        indptr,
        indices,
    };
    let nnz = m.indices.len();
    // The CSR form (a value, a column and for CSC a reordering of both, 16 bytes per value)
    // and the row starts, before any of it is made.
    crate::limits::check(
        || {
            format!(
                "{}: {n} x {d} with {nnz} values stored sparse",
                path.display()
            )
        },
        nnz as u128 + n as u128 + 1,
        16,
    )?;
    let a = parse(path, "data", db)?;
    let (_, kind, size) = dtype(path, "data", &a.descr)?;
    if kind != 'f' || !(size == 4 || size == 8) {
        return Err(bad(
            path,
            "data",
            format!("must be float32 or float64, found dtype {:?}", a.descr),
        ));
    }
    if a.shape[..] != [nnz] || a.data.len() < nnz.saturating_mul(size) {
        return Err(bad(
            path,
            "data",
            format!(
                "shape {:?} ({} bytes) does not match the {nnz} indices",
                a.shape,
                a.data.len()
            ),
        ));
    }
    m.check(path)?;
    let value = |p: usize| -> Result<f32> {
        let b = &a.data[p * size..(p + 1) * size];
        let v = if size == 4 {
            f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64
        } else {
            f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        };
        let f = v as f32;
        if f.is_finite() {
            return Ok(f);
        }
        let (r, c) = m.place(p);
        Err(bad(
            path,
            "data",
            format!("row {r}, column {c}: {v} is not a finite f32 value"),
        ))
    };
    let c = m.to_csr(value)?;
    let x: MatrixBuf = if opts.layout.sparse_for(n, d, c.nnz()) {
        c.into()
    } else {
        let mut x = super::dense_zeros(path, n, d)?;
        for i in 0..n {
            for p in c.indptr[i]..c.indptr[i + 1] {
                x[i * d + c.indices[p] as usize] = c.values[p];
            }
        }
        x.into()
    };
    let labels = labels_file(opts.labels.as_deref(), n)?;
    Ok(Dataset::from_matrix(x, n, d, labels, path.to_path_buf()))
}

/// Whether the archive's `format` member says CSC (true) or CSR (false); other formats are
/// refused.
fn sparse_format(path: &Path, member: Vec<u8>) -> Result<bool> {
    let f = parse(path, "format", member)?;
    let format = String::from_utf8_lossy(&f.data)
        .trim_end_matches('\0')
        .to_string();
    match format.as_str() {
        "csr" => Ok(false),
        "csc" => Ok(true),
        other => Err(bad(
            path,
            "format",
            format!(
                "scipy sparse format {other:?} is not read; save a CSR or CSC matrix \
                 (m.tocsr())"
            ),
        )),
    }
}

/// The structure of a scipy compressed matrix: rows (CSR) or columns (CSC) of `n` x `d`,
/// with the starts of each in `indptr` and the other coordinate of each value in `indices`.
struct Compressed {
    csc: bool,
    n: usize,
    d: usize,
    indptr: Vec<u64>,
    indices: Vec<u64>,
}

impl Compressed {
    /// The compressed dimension and the other, with their names.
    fn dims(&self) -> (usize, usize, &'static str, &'static str) {
        if self.csc {
            (self.d, self.n, "column", "row")
        } else {
            (self.n, self.d, "row", "column")
        }
    }

    /// Checks the structure whole: `indptr` from 0 to the number of values, non-decreasing;
    /// indices in range and strictly ascending within each row or column.
    fn check(&self, path: &Path) -> Result<()> {
        let (outer, inner, what_outer, what_inner) = self.dims();
        let (indptr, indices, nnz) = (&self.indptr, &self.indices, self.indices.len());
        if indptr[0] != 0 || indptr[outer] != nnz as u64 {
            return Err(bad(
                path,
                "indptr",
                format!(
                    "must start at 0 and end at the number of values ({nnz}); it runs from {} \
                     to {}",
                    indptr[0], indptr[outer]
                ),
            ));
        }
        for k in 0..outer {
            let (a0, a1) = (indptr[k], indptr[k + 1]);
            if a1 < a0 || a1 > nnz as u64 {
                return Err(bad(
                    path,
                    "indptr",
                    format!("not monotone at {what_outer} {}: {a0} then {a1}", k + 1),
                ));
            }
        }
        for k in 0..outer {
            let seg = &indices[indptr[k] as usize..indptr[k + 1] as usize];
            for (t, &j) in seg.iter().enumerate() {
                if j as usize >= inner {
                    return Err(bad(
                        path,
                        "indices",
                        format!(
                            "{what_outer} {}: index {j} is not below the {inner} {what_inner}s \
                             of the shape",
                            k + 1
                        ),
                    ));
                }
                if t > 0 && seg[t - 1] >= j {
                    return Err(bad(
                        path,
                        "indices",
                        format!(
                            "{what_outer} {}: indices not sorted and unique ({} then {j}); save \
                             after m.sum_duplicates() and m.sort_indices()",
                            k + 1,
                            seg[t - 1]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The row and column (1-based) of stored value `p`.
    fn place(&self, p: usize) -> (u64, u64) {
        let outer_at = self.indptr.partition_point(|&q| q <= p as u64) as u64;
        if self.csc {
            (self.indices[p] + 1, outer_at)
        } else {
            (outer_at, self.indices[p] + 1)
        }
    }

    /// The rows as CSR, each value from `value(p)`, explicit zeros dropped. CSC: counted per
    /// row, then each column's entries placed in column order, so every row's columns ascend.
    fn to_csr(&self, value: impl Fn(usize) -> Result<f32>) -> Result<CsrBuf> {
        let (n, d, indptr, indices) = (self.n, self.d, &self.indptr, &self.indices);
        let mut c = CsrBuf::new();
        if !self.csc {
            for i in 0..n {
                let (a0, a1) = (indptr[i] as usize, indptr[i + 1] as usize);
                let mut row = Vec::new();
                for (p, &j) in indices.iter().enumerate().take(a1).skip(a0) {
                    let v = value(p)?;
                    if v != 0.0 {
                        row.push((j as u32, v));
                    }
                }
                c.push_row(row);
            }
            return Ok(c);
        }
        let nnz = indices.len();
        let mut start = vec![0usize; n + 1];
        for &r in indices {
            start[r as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let (mut cols, mut vals) = (vec![0u32; nnz], vec![0f32; nnz]);
        for j in 0..d {
            for p in indptr[j] as usize..indptr[j + 1] as usize {
                let q = &mut next[indices[p] as usize];
                cols[*q] = j as u32;
                vals[*q] = value(p)?;
                *q += 1;
            }
        }
        for i in 0..n {
            c.push_row(
                (start[i]..start[i + 1])
                    .map(|q| (cols[q], vals[q]))
                    .filter(|e| e.1 != 0.0),
            );
        }
        Ok(c)
    }
}
