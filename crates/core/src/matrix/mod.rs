//! The forms X takes: dense rows ([`Features`] in any storage), CSR rows ([`CsrView`],
//! [`CsrBuf`]) or a memory-mapped f32 file ([`MappedF32`]), borrowed as a [`Matrix`] or owned
//! as a [`MatrixBuf`]; algorithms touch a row only through [`Row`] (dot, decision, axpy), so
//! they are written once for both forms.

use std::borrow::Cow;

use crate::with_features;

mod elem;
pub mod simd;
pub mod storage;

pub use elem::Elem;
pub use storage::{FeatureBuf, Features, Storage};

/// Rows in compressed sparse row form (CSR), borrowed: row i's non-zero values are
/// `values[indptr[i]..indptr[i + 1]]`, at the columns `indices[indptr[i]..indptr[i + 1]]`
/// (strictly ascending, below d). `indptr` has n + 1 entries and need not start at 0 (a range
/// of rows is a sub-slice of `indptr`).
#[derive(Debug, Clone, Copy)]
pub struct CsrView<'a> {
    /// Row starts, n + 1 of them, non-decreasing.
    pub indptr: &'a [usize],
    /// Column of each stored value.
    pub indices: &'a [u32],
    /// The stored values, in any storage.
    pub values: Features<'a>,
}

impl<'a> CsrView<'a> {
    /// Rows.
    pub fn n(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Stored values of the rows (not counting values before `indptr[0]`).
    pub fn nnz(&self) -> usize {
        match (self.indptr.first(), self.indptr.last()) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    /// The positions of row `i`'s values in `indices` and `values`.
    #[inline(always)]
    pub fn span(&self, i: usize) -> std::ops::Range<usize> {
        self.indptr[i]..self.indptr[i + 1]
    }

    /// The rows `range`.
    pub fn rows(&self, range: std::ops::Range<usize>) -> CsrView<'a> {
        CsrView {
            indptr: &self.indptr[range.start..=range.end],
            ..*self
        }
    }
}

/// Features of n rows, dense (row-major, `n * d` values) or sparse (CSR), in any storage:
/// what the backends bind. Algorithms see rows through [`Row`], whose dot product and update
/// are the two operations that differ between the forms.
#[derive(Debug, Clone, Copy)]
pub enum Matrix<'a> {
    /// Row-major, `n * d` values.
    Dense(Features<'a>),
    /// Compressed sparse rows.
    Csr(CsrView<'a>),
}

/// One row of a [`Matrix`], its values as f32.
#[derive(Debug, Clone, Copy)]
pub enum Row<'b> {
    /// All d values.
    Dense(&'b [f32]),
    /// The non-zero values and their (ascending) columns.
    Sparse {
        /// Columns.
        idx: &'b [u32],
        /// Values.
        val: &'b [f32],
    },
}

impl Row<'_> {
    /// x . w (w has at least d entries): SIMD for a dense row, the non-zeros in column order
    /// for a sparse one (the same sum on integer data, where every sum is exact). Four
    /// interleaved partial sums for sparse rows were no faster (docs/performance.md, "Figures
    /// behind the code's choices"): the epoch waits on the gathers of w.
    #[inline]
    pub fn dot(&self, w: &[f32]) -> f32 {
        match *self {
            Row::Dense(x) => simd::dot(&w[..x.len()], x),
            Row::Sparse { idx, val } => sparse_dot(idx, val, w),
        }
    }

    /// x . w summed in column order (the reference's sum).
    pub fn dot_seq(&self, w: &[f32]) -> f32 {
        match *self {
            Row::Dense(x) => x.iter().zip(w).fold(0f32, |a, (x, w)| a + x * w),
            Row::Sparse { idx, val } => sparse_dot(idx, val, w),
        }
    }

    /// w . [x, bias] for augmented weights `w` (d + 1 entries).
    #[inline]
    pub fn decision(&self, w: &[f32], bias: f32) -> f32 {
        match *self {
            Row::Dense(x) => simd::decision(w, x, bias),
            Row::Sparse { idx, val } => sparse_dot(idx, val, w) + w[w.len() - 1] * bias,
        }
    }

    /// [`Row::decision`] for each head of augmented weights `w` (`out.len()` heads of `d + 1`
    /// entries each), into `out`.
    #[inline]
    pub fn decisions(&self, w: &[f32], bias: f32, out: &mut [f32]) {
        let da = w.len() / out.len().max(1);
        for (h, o) in out.iter_mut().enumerate() {
            *o = self.decision(&w[h * da..(h + 1) * da], bias);
        }
    }

    /// out += a * x (out has d entries; a sparse row touches only its columns).
    #[inline]
    pub fn axpy(&self, a: f32, out: &mut [f32]) {
        match *self {
            Row::Dense(x) => simd::axpy(a, x, out),
            Row::Sparse { idx, val } => {
                for (&j, &v) in idx.iter().zip(val) {
                    out[j as usize] += a * v;
                }
            }
        }
    }

    /// Calls `f(j, x_j)` for every non-zero value, in column order.
    #[inline]
    pub fn for_each_nonzero(&self, mut f: impl FnMut(usize, f32)) {
        match *self {
            Row::Dense(x) => {
                for (j, &v) in x.iter().enumerate() {
                    if v != 0.0 {
                        f(j, v);
                    }
                }
            }
            Row::Sparse { idx, val } => {
                for (&j, &v) in idx.iter().zip(val) {
                    f(j as usize, v);
                }
            }
        }
    }

    /// ||x||^2.
    pub fn sq_norm(&self) -> f32 {
        match *self {
            Row::Dense(x) => simd::dot(x, x),
            Row::Sparse { val, .. } => val.iter().fold(0f32, |a, v| a + v * v),
        }
    }

    /// x . z for another row of the same width: SIMD for two dense rows, a merge of the
    /// columns for two sparse ones, the sparse row's columns otherwise.
    pub fn dot_row(&self, other: &Row<'_>) -> f32 {
        match (*self, *other) {
            (Row::Dense(a), Row::Dense(b)) => simd::dot(a, b),
            (Row::Dense(a), Row::Sparse { idx, val })
            | (Row::Sparse { idx, val }, Row::Dense(a)) => sparse_dot(idx, val, a),
            (Row::Sparse { idx: ia, val: va }, Row::Sparse { idx: ib, val: vb }) => {
                let (mut p, mut q, mut acc) = (0, 0, 0f32);
                while p < ia.len() && q < ib.len() {
                    match ia[p].cmp(&ib[q]) {
                        std::cmp::Ordering::Less => p += 1,
                        std::cmp::Ordering::Greater => q += 1,
                        std::cmp::Ordering::Equal => {
                            acc += va[p] * vb[q];
                            p += 1;
                            q += 1;
                        }
                    }
                }
                acc
            }
        }
    }
}

/// sum over the non-zeros of val * w[idx], in column order.
#[inline(always)]
fn sparse_dot(idx: &[u32], val: &[f32], w: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (&j, &v) in idx.iter().zip(val) {
        acc += v * w[j as usize];
    }
    acc
}

impl<'a> Matrix<'a> {
    /// How the values are stored.
    pub fn storage(&self) -> Storage {
        match self {
            Matrix::Dense(f) => f.storage(),
            Matrix::Csr(c) => c.values.storage(),
        }
    }

    /// The CSR rows, when sparse.
    pub fn csr(&self) -> Option<CsrView<'a>> {
        match *self {
            Matrix::Csr(c) => Some(c),
            Matrix::Dense(_) => None,
        }
    }

    /// The dense values, when dense.
    pub fn dense(&self) -> Option<Features<'a>> {
        match *self {
            Matrix::Dense(f) => Some(f),
            Matrix::Csr(_) => None,
        }
    }

    /// True for CSR rows.
    pub fn is_sparse(&self) -> bool {
        matches!(self, Matrix::Csr(_))
    }

    /// Row `i` of `d` values, as f32 (borrowed for f32 storage, widened into `buf` otherwise).
    #[inline]
    pub fn row<'b>(&'b self, i: usize, d: usize, buf: &'b mut Vec<f32>) -> Row<'b> {
        match self {
            Matrix::Dense(f) => Row::Dense(f.row(i, d, buf)),
            Matrix::Csr(c) => {
                let span = c.span(i);
                let idx = &c.indices[span.clone()];
                let val = match c.values {
                    Features::F32(v) => &v[span],
                    f => {
                        buf.clear();
                        with_features!(f, v => buf.extend(v[span].iter().map(|x| x.widen())));
                        &buf[..]
                    }
                };
                Row::Sparse { idx, val }
            }
        }
    }

    /// Asks the CPU to start loading row `i` (a hint; never faults).
    #[inline]
    pub fn prefetch_row(&self, i: usize, d: usize) {
        match self {
            Matrix::Dense(f) => f.prefetch_row(i, d),
            Matrix::Csr(c) => {
                // The row's columns and values, their first 256 entries at most.
                if let (Some(&a), Some(&b)) = (c.indptr.get(i), c.indptr.get(i + 1)) {
                    let b = b.min(a + 256);
                    if let Some(ix) = c.indices.get(a..b) {
                        simd::prefetch_ahead(ix, 0);
                    }
                    with_features!(c.values, v => if let Some(v) = v.get(a..b) {
                        simd::prefetch_ahead(v, 0);
                    });
                }
            }
        }
    }

    /// The rows `range` (of `d` values each when dense).
    pub fn rows(&self, range: std::ops::Range<usize>, d: usize) -> Matrix<'a> {
        match self {
            Matrix::Dense(f) => Matrix::Dense(f.slice(range.start * d..range.end * d)),
            Matrix::Csr(c) => Matrix::Csr(c.rows(range)),
        }
    }

    /// Bytes one pass over `n` rows of `d` values reads: the stored values, and for CSR the
    /// column indices and row starts.
    pub fn bytes(&self, n: usize, d: usize) -> u64 {
        let s = self.storage().bytes() as u64;
        match self {
            Matrix::Dense(_) => n as u64 * d as u64 * s,
            Matrix::Csr(c) => c.nnz() as u64 * (s + 4) + (c.n() as u64 + 1) * 8,
        }
    }

    /// Stored values: n * d when dense, the non-zeros when sparse.
    pub fn stored(&self, n: usize, d: usize) -> usize {
        match self {
            Matrix::Dense(_) => n * d,
            Matrix::Csr(c) => c.nnz(),
        }
    }

    /// The rows as dense row-major f32 (`n * d` values; borrowed for dense f32).
    pub fn to_dense(self, n: usize, d: usize) -> Cow<'a, [f32]> {
        match self {
            Matrix::Dense(f) => f.to_f32(),
            Matrix::Csr(c) => {
                let mut out = vec![0f32; n * d];
                for i in 0..n.min(c.n()) {
                    for p in c.span(i) {
                        out[i * d + c.indices[p] as usize] = c.values.get(p);
                    }
                }
                Cow::Owned(out)
            }
        }
    }

    /// The rows in CSR form with f32 values (row starts from 0; a dense row keeps its
    /// non-zero values).
    pub fn to_csr(self, n: usize, d: usize) -> CsrBuf {
        match self {
            Matrix::Dense(f) => CsrBuf::from_dense(&f.to_f32(), d),
            Matrix::Csr(c) => {
                let base = c.indptr.first().copied().unwrap_or(0);
                let end = c.indptr.get(n).copied().unwrap_or(base);
                CsrBuf {
                    indptr: c.indptr[..=n.min(c.n())].iter().map(|p| p - base).collect(),
                    indices: c.indices[base..end].to_vec(),
                    values: c.values.slice(base..end).to_f32().into_owned(),
                }
            }
        }
    }

    /// The rows with every value widened to f32 (borrowed when already f32).
    pub fn widened(&self) -> WideMatrix<'a> {
        match *self {
            Matrix::Dense(f) => WideMatrix::Dense(f.to_f32()),
            Matrix::Csr(c) => WideMatrix::Csr {
                indptr: c.indptr,
                indices: c.indices,
                values: c.values.to_f32(),
            },
        }
    }
}

/// A [`Matrix`] with its values as f32, for the kernels that read rows many times (the kernel
/// perceptron's dot products).
#[derive(Debug, Clone)]
pub enum WideMatrix<'a> {
    /// Row-major values.
    Dense(Cow<'a, [f32]>),
    /// CSR rows.
    Csr {
        /// Row starts.
        indptr: &'a [usize],
        /// Columns.
        indices: &'a [u32],
        /// Values.
        values: Cow<'a, [f32]>,
    },
}

impl WideMatrix<'_> {
    /// Row `i` of `d` values.
    #[inline]
    pub fn row(&self, i: usize, d: usize) -> Row<'_> {
        match self {
            WideMatrix::Dense(x) => Row::Dense(&x[i * d..(i + 1) * d]),
            WideMatrix::Csr {
                indptr,
                indices,
                values,
            } => {
                let span = indptr[i]..indptr[i + 1];
                Row::Sparse {
                    idx: &indices[span.clone()],
                    val: &values[span],
                }
            }
        }
    }

    /// The dense values, when dense.
    pub fn dense(&self) -> Option<&[f32]> {
        match self {
            WideMatrix::Dense(x) => Some(x),
            WideMatrix::Csr { .. } => None,
        }
    }
}

impl<'a> From<Features<'a>> for Matrix<'a> {
    fn from(f: Features<'a>) -> Self {
        Matrix::Dense(f)
    }
}

impl<'a> From<&'a MatrixBuf> for Matrix<'a> {
    fn from(m: &'a MatrixBuf) -> Self {
        m.view()
    }
}

impl<'a> From<CsrView<'a>> for Matrix<'a> {
    fn from(c: CsrView<'a>) -> Self {
        Matrix::Csr(c)
    }
}

impl<'a> From<&'a [f32]> for Matrix<'a> {
    fn from(x: &'a [f32]) -> Self {
        Matrix::Dense(Features::F32(x))
    }
}

impl<'a> From<&'a Vec<f32>> for Matrix<'a> {
    fn from(x: &'a Vec<f32>) -> Self {
        Matrix::Dense(Features::F32(x))
    }
}

impl<'a, const N: usize> From<&'a [f32; N]> for Matrix<'a> {
    fn from(x: &'a [f32; N]) -> Self {
        Matrix::Dense(Features::F32(x))
    }
}

/// CSR rows, owned, with f32 values: what a sparse data set holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsrBuf {
    /// Row starts, n + 1 of them, from 0.
    pub indptr: Vec<usize>,
    /// Columns, ascending within each row.
    pub indices: Vec<u32>,
    /// Values.
    pub values: Vec<f32>,
}

impl CsrBuf {
    /// No rows.
    pub fn new() -> Self {
        CsrBuf {
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Rows.
    pub fn n(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Stored values.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The borrowed view.
    pub fn view(&self) -> CsrView<'_> {
        CsrView {
            indptr: &self.indptr,
            indices: &self.indices,
            values: Features::F32(&self.values),
        }
    }

    /// The same rows with the values in another storage.
    pub fn view_with<'a>(&'a self, values: Features<'a>) -> CsrView<'a> {
        CsrView {
            values,
            ..self.view()
        }
    }

    /// The dense rows `x` (`n * d`, row-major) in CSR form, zeros left out.
    pub fn from_dense(x: &[f32], d: usize) -> CsrBuf {
        let mut c = CsrBuf::new();
        if d == 0 {
            c.indptr = vec![0; x.len() + 1];
            return c;
        }
        for row in x.chunks_exact(d) {
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    c.indices.push(j as u32);
                    c.values.push(v);
                }
            }
            c.indptr.push(c.indices.len());
        }
        c
    }

    /// Appends one row from (column, value) pairs in ascending column order.
    pub fn push_row(&mut self, entries: impl IntoIterator<Item = (u32, f32)>) {
        for (j, v) in entries {
            self.indices.push(j);
            self.values.push(v);
        }
        self.indptr.push(self.indices.len());
    }

    /// The rows `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> CsrBuf {
        let mut c = CsrBuf::new();
        for &i in idx {
            let span = self.indptr[i]..self.indptr[i + 1];
            c.indices.extend_from_slice(&self.indices[span.clone()]);
            c.values.extend_from_slice(&self.values[span]);
            c.indptr.push(c.indices.len());
        }
        c
    }

    /// Checks the structure for `d` columns: n + 1 non-decreasing row starts from 0 that end
    /// at the number of values, as many columns as values, and each row's columns strictly
    /// ascending and below `d`. The error says what is wrong and where (1-based rows).
    pub fn check(&self, d: usize) -> Result<(), String> {
        if self.indptr.first() != Some(&0) {
            return Err("the row pointers (indptr) do not start at 0".into());
        }
        if self.indices.len() != self.values.len() {
            return Err(format!(
                "{} column indices for {} values",
                self.indices.len(),
                self.values.len()
            ));
        }
        if self.indptr.last() != Some(&self.values.len()) {
            return Err(format!(
                "the row pointers (indptr) end at {}, not at the number of values ({})",
                self.indptr.last().unwrap_or(&0),
                self.values.len()
            ));
        }
        for (i, w) in self.indptr.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(format!(
                    "the row pointers (indptr) decrease at row {} ({} then {})",
                    i + 1,
                    w[0],
                    w[1]
                ));
            }
            let cols = &self.indices[w[0]..w[1]];
            for (k, &j) in cols.iter().enumerate() {
                if j as usize >= d {
                    return Err(format!(
                        "row {}: column index {j} is not below the {d} features",
                        i + 1
                    ));
                }
                if k > 0 && cols[k - 1] >= j {
                    return Err(format!(
                        "row {}: column indices are not strictly ascending ({} then {j})",
                        i + 1,
                        cols[k - 1]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Row-major values held outside the data set: a read-only memory map of a file (a `.npy`
/// array of f32, f16, u8 or i8), whose epochs stream them from the page cache in their own
/// storage, so X takes no anonymous memory and may be larger than RAM; or a caller's f32
/// array, borrowed (the Python package's NumPy arrays).
#[derive(Clone)]
pub struct MappedF32 {
    map: std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
    storage: Storage,
}

impl MappedF32 {
    /// The `len` values of `storage` at byte `start` of `map`; `None` when they are not all
    /// inside it or `start` is not aligned to the storage (the map itself starts on a page).
    pub fn new<M: AsRef<[u8]> + Send + Sync + 'static>(
        map: M,
        start: usize,
        len: usize,
        storage: Storage,
    ) -> Option<Self> {
        MappedF32::of(std::sync::Arc::new(map), start, len, storage)
    }

    /// The `len` f32 values at byte `start` of `bytes`, which the caller keeps unchanged while
    /// any clone of the result lives; `None` when they are not all inside it or not aligned to
    /// 4 bytes.
    pub fn shared(
        bytes: std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<MappedF32> {
        MappedF32::of(bytes, start, len, Storage::F32)
    }

    fn of(
        bytes: std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
        storage: Storage,
    ) -> Option<MappedF32> {
        let size = storage.bytes();
        let end = len.checked_mul(size)?.checked_add(start)?;
        let b = (*bytes).as_ref();
        let aligned = (b.as_ptr() as usize)
            .wrapping_add(start)
            .is_multiple_of(size);
        (aligned && end <= b.len()).then(|| MappedF32 {
            map: bytes,
            start,
            len,
            storage,
        })
    }

    /// The values in their storage.
    pub fn features(&self) -> Features<'_> {
        let b = &(*self.map).as_ref()[self.start..self.start + self.storage.bytes() * self.len];
        match self.storage {
            Storage::F32 => Features::F32(bytemuck::cast_slice(b)),
            Storage::F16 => Features::F16(bytemuck::cast_slice(b)),
            Storage::U8 => Features::U8(b),
            Storage::I8 => Features::I8(bytemuck::cast_slice(b)),
        }
    }

    /// The values as f32: borrowed for f32 storage, widened (a copy) otherwise.
    pub fn values(&self) -> Cow<'_, [f32]> {
        match self.features() {
            Features::F32(x) => Cow::Borrowed(x),
            f => f.to_f32(),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for MappedF32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedF32 {{ {} values }}", self.len)
    }
}

impl PartialEq for MappedF32 {
    fn eq(&self, other: &Self) -> bool {
        self.storage == other.storage && self.features().bytes() == other.features().bytes()
    }
}

/// Features of n rows with f32 values: dense (row-major, owned or memory-mapped) or CSR. What
/// a data set holds.
#[derive(Debug, Clone, PartialEq)]
pub enum MatrixBuf {
    /// Row-major, `n * d` values.
    Dense(Vec<f32>),
    /// Compressed sparse rows.
    Csr(CsrBuf),
    /// Row-major, `n * d` values in a memory-mapped file.
    Mapped(MappedF32),
}

impl From<Vec<f32>> for MatrixBuf {
    fn from(x: Vec<f32>) -> Self {
        MatrixBuf::Dense(x)
    }
}

impl From<CsrBuf> for MatrixBuf {
    fn from(c: CsrBuf) -> Self {
        MatrixBuf::Csr(c)
    }
}

impl Default for MatrixBuf {
    fn default() -> Self {
        MatrixBuf::Dense(Vec::new())
    }
}

impl MatrixBuf {
    /// The borrowed view.
    pub fn view(&self) -> Matrix<'_> {
        match self {
            MatrixBuf::Csr(c) => Matrix::Csr(c.view()),
            MatrixBuf::Dense(x) => Matrix::Dense(Features::F32(x)),
            MatrixBuf::Mapped(m) => Matrix::Dense(m.features()),
        }
    }

    /// The stored values as f32: all `n * d` when dense, the non-zeros when sparse; borrowed,
    /// except from a memory map of a compact storage, which is widened into a copy (code that
    /// may see large data reads [`MatrixBuf::stored_values`] or [`MatrixBuf::value`]).
    pub fn values(&self) -> Cow<'_, [f32]> {
        match self {
            MatrixBuf::Dense(x) => Cow::Borrowed(x),
            MatrixBuf::Csr(c) => Cow::Borrowed(&c.values),
            MatrixBuf::Mapped(m) => m.values(),
        }
    }

    /// The stored values in their storage (f32 but for a compact memory map).
    pub fn stored_values(&self) -> Features<'_> {
        match self {
            MatrixBuf::Dense(x) => Features::F32(x),
            MatrixBuf::Csr(c) => Features::F32(&c.values),
            MatrixBuf::Mapped(m) => m.features(),
        }
    }

    /// Calls `f(column, value)` for every stored value, in storage order, widened one at a
    /// time (no copy of X, whatever its storage).
    pub fn for_each_value(&self, d: usize, mut f: impl FnMut(usize, f32)) {
        if let MatrixBuf::Csr(c) = self {
            for (&j, &v) in c.indices.iter().zip(&c.values) {
                f(j as usize, v);
            }
            return;
        }
        let vals = self.stored_values();
        with_features!(vals, x => {
            for row in x.chunks_exact(d.max(1)) {
                for (j, v) in row.iter().enumerate() {
                    f(j, v.widen());
                }
            }
        })
    }

    /// Stored value `k`, as f32.
    pub fn value(&self, k: usize) -> f32 {
        self.stored_values().get(k)
    }

    /// Number of stored values.
    pub fn len(&self) -> usize {
        self.stored_values().len()
    }

    /// True when no value is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored values, to change in place (a zero written into CSR stays stored); `None`
    /// for a read-only map.
    pub fn values_mut(&mut self) -> Option<&mut [f32]> {
        match self {
            MatrixBuf::Dense(x) => Some(x),
            MatrixBuf::Csr(c) => Some(&mut c.values),
            MatrixBuf::Mapped(_) => None,
        }
    }

    /// The dense values, when dense (owned or mapped; widened from a compact map).
    pub fn dense(&self) -> Option<Cow<'_, [f32]>> {
        match self {
            MatrixBuf::Csr(_) => None,
            _ => Some(self.values()),
        }
    }

    /// The CSR rows, when sparse.
    pub fn csr(&self) -> Option<&CsrBuf> {
        match self {
            MatrixBuf::Csr(c) => Some(c),
            _ => None,
        }
    }

    /// True for CSR rows.
    pub fn is_sparse(&self) -> bool {
        matches!(self, MatrixBuf::Csr(_))
    }

    /// True for values in a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, MatrixBuf::Mapped(_))
    }

    /// The column of each stored value (`d` columns per row when dense).
    pub fn columns(&self, d: usize) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            MatrixBuf::Csr(c) => Box::new(c.indices.iter().map(|&j| j as usize)),
            _ => Box::new((0..self.len()).map(move |i| i % d.max(1))),
        }
    }

    /// (row, column) of stored value `k` (1-based, for messages).
    pub fn position(&self, k: usize, d: usize) -> (usize, usize) {
        match self {
            MatrixBuf::Csr(c) => (
                c.indptr.partition_point(|&p| p <= k),
                c.indices[k] as usize + 1,
            ),
            _ => (k / d.max(1) + 1, k % d.max(1) + 1),
        }
    }

    /// Row `i` of `d` values, dense (borrowed when dense).
    pub fn row(&self, i: usize, d: usize) -> Cow<'_, [f32]> {
        match self {
            MatrixBuf::Dense(x) => Cow::Borrowed(&x[i * d..(i + 1) * d]),
            MatrixBuf::Mapped(m) => match m.features().slice(i * d..(i + 1) * d) {
                Features::F32(r) => Cow::Borrowed(r),
                r => r.to_f32(),
            },
            MatrixBuf::Csr(c) => {
                let mut r = vec![0f32; d];
                for p in c.indptr[i]..c.indptr[i + 1] {
                    r[c.indices[p] as usize] = c.values[p];
                }
                Cow::Owned(r)
            }
        }
    }

    /// The rows `idx` of `d` values, in that order.
    pub fn select(&self, idx: &[usize], d: usize) -> MatrixBuf {
        match self {
            MatrixBuf::Dense(_) | MatrixBuf::Mapped(_) => {
                let mut out = Vec::with_capacity(idx.len() * d);
                for &i in idx {
                    out.extend_from_slice(&self.row(i, d));
                }
                MatrixBuf::Dense(out)
            }
            MatrixBuf::Csr(c) => MatrixBuf::Csr(c.select(idx)),
        }
    }
}
