//! CPU backend: the reference implementation of the batch epoch and of scoring, and a fast
//! fallback. Rows are split into fixed chunks that depend only on (n, d), never on the thread
//! count; each chunk accumulates its own partial sums, and partials are added in chunk order,
//! so results are identical on any number of threads. One pass over X per epoch; all
//! buffers are allocated once in `bind`. The binary rule has its own loop (the hot path the
//! performance targets are measured on); the K-head rules share one.

use rayon::prelude::*;

use super::{
    axpy, predicted_wrong, prefetch_ahead, row_rule, simd_dispatch, winnow_weights, Backend,
    BackendKind, BatchRule, Bound, DataView, DualBound, DualRows, Elem, EpochStats, Epochs, Extras,
    HeadRule, Kernel, Lanes, Matrix, Pocket, Reduce, RowOutcome, StopState, TrainView, Update,
};
use crate::error::Result;
use crate::with_features;

/// Rows per chunk: at least ~256 KiB of X per chunk, and at most 64 chunks in all.
pub fn chunk_rows(n: usize, d: usize) -> usize {
    let min_rows = (1usize << 16).div_ceil(d + 1);
    min_rows.max(n.div_ceil(64)).max(1)
}

/// The CPU backend, using rayon's global thread pool.
#[derive(Debug, Default, Clone)]
pub struct CpuBackend;

impl CpuBackend {
    /// Creates the CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        match rayon::current_num_threads() {
            1 => "CPU (1 thread)".to_string(),
            n => format!("CPU ({n} threads)"),
        }
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        Ok(Box::new(CpuBound::new(data)))
    }

    fn bind_reduced<'a>(
        &'a self,
        data: TrainView<'a>,
        reduce: &'a dyn Reduce,
    ) -> Result<Box<dyn Bound + 'a>> {
        let mut b = CpuBound::new(data);
        b.reduce = Some(reduce);
        Ok(Box::new(b))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        Ok(cpu_scores(data, w))
    }

    /// Dense rows: a blocked single-precision matrix product (matrixmultiply's sgemm, rows
    /// split over the threads), [x_i, bias] . w_k for every row and weight row; sparse rows:
    /// `scores`. At 60,000 x 784 against 64 weight rows, several times the dot-per-pair
    /// `scores`, which streams every weight row past every data row.
    fn products(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        if data.x.is_sparse() {
            return Ok(cpu_scores(data, w));
        }
        Ok(gemm_scores(data, w))
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        Ok(Box::new(CpuDual(DualRows::new(eval, sv)?)))
    }
}

/// Rows bound for kernel scoring on the CPU.
struct CpuDual<'a>(DualRows<'a>);

impl DualBound for CpuDual<'_> {
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>> {
        let eval = self.0.eval;
        let mut out = vec![0f32; eval.n];
        let rows = chunk_rows(eval.n, eval.d);
        let (ex, sx) = (&self.0.ex, &self.0.sx);
        if let (Some(ex), Some(sx)) = (ex.dense(), sx.dense()) {
            let svs = Supports {
                x: sx,
                idx,
                coef,
                sq: &self.0.sq,
            };
            out.par_chunks_mut(rows).enumerate().for_each(|(c, o)| {
                chunk_kernel_scores_simd(ex, eval.d, eval.bias, &svs, kernel, c * rows, o);
            });
            return Ok(out);
        }
        // Sparse rows: the same sums through the rows' own dot products.
        let (d, b2) = (eval.d, eval.bias * eval.bias);
        out.par_chunks_mut(rows).enumerate().for_each(|(c, o)| {
            for (k, f) in o.iter_mut().enumerate() {
                let xi = ex.row(c * rows + k, d);
                let xx = xi.dot_row(&xi);
                let mut acc = 0f32;
                for (&j, &a) in idx.iter().zip(coef) {
                    let j = j as usize;
                    let xz = xi.dot_row(&sx.row(j, d));
                    acc += a * (kernel.eval(xz, xx, self.0.sq[j]) + b2);
                }
                *f = acc;
            }
        });
        Ok(out)
    }
}

/// The support vectors of a kernel model: rows `idx` of `x`, their coefficients, and the
/// squared norms of the rows of `x`.
struct Supports<'a> {
    x: &'a [f32],
    idx: &'a [u32],
    coef: &'a [f32],
    sq: &'a [f32],
}

/// Kernel decision values of the rows `start..` of `eval` against the support vectors, into
/// `out`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_kernel_scores<L: Lanes>(
    l: L,
    ex: &[f32],
    d: usize,
    bias: f32,
    svs: &Supports<'_>,
    kernel: &Kernel,
    start: usize,
    out: &mut [f32],
) {
    let b2 = bias * bias;
    for (k, f) in out.iter_mut().enumerate() {
        let i = start + k;
        let xi = &ex[i * d..(i + 1) * d];
        let xx = l.dot(xi, xi);
        let mut acc = 0f32;
        for (&j, &a) in svs.idx.iter().zip(svs.coef) {
            let j = j as usize;
            let zz = svs.sq[j];
            let xz = l.dot(xi, &svs.x[j * d..(j + 1) * d]);
            acc += a * (kernel.eval(xz, xx, zz) + b2);
        }
        *f = acc;
    }
}

simd_dispatch! {
    fn chunk_kernel_scores_simd(ex: &[f32], d: usize, bias: f32, svs: &Supports<'_>, kernel: &Kernel, start: usize, out: &mut [f32]) => chunk_kernel_scores
}

fn cpu_scores(data: DataView<'_>, w: &[f32]) -> Vec<f32> {
    let heads = w.len() / (data.d + 1);
    let mut out = vec![0f32; data.n * heads];
    if data.n == 0 || heads == 0 {
        return out;
    }
    let rows = chunk_rows(data.n, data.d);
    let (d, bias) = (data.d, data.bias);
    out.par_chunks_mut(rows * heads)
        .enumerate()
        .for_each(|(c, o)| match data.x {
            Matrix::Dense(f) => {
                with_features!(f, x => chunk_scores_simd(x, d, bias, w, c * rows, o));
            }
            Matrix::Csr(_) => {
                let mut buf = Vec::new();
                let da = d + 1;
                for (k, o) in o.chunks_exact_mut(heads).enumerate() {
                    let row = data.x.row(c * rows + k, d, &mut buf);
                    for (h, s) in o.iter_mut().enumerate() {
                        *s = row.decision(&w[h * da..(h + 1) * da], bias);
                    }
                }
            }
        });
    out
}

/// [`CpuBackend::products`] of dense rows: the rows widened to f32 (when stored narrower),
/// times the weight rows' transpose, one matrix product a thread over its share of the weight
/// rows (or of the rows, when they are more), so each packs only its share.
fn gemm_scores(data: DataView<'_>, w: &[f32]) -> Vec<f32> {
    let (d, da) = (data.d, data.d + 1);
    let heads = w.len() / da;
    let n = data.n;
    let mut out = vec![0f32; n * heads];
    if n == 0 || heads == 0 {
        return out;
    }
    let x = data.x.to_dense(n, d);
    let threads = rayon::current_num_threads().max(1);
    let by_rows = n >= heads;
    let len = if by_rows { n } else { heads };
    let per = len.div_ceil(threads);
    let c = SendPtr(out.as_mut_ptr());
    (0..len.div_ceil(per)).into_par_iter().for_each(|t| {
        let (a, b) = (t * per, ((t + 1) * per).min(len));
        let (r0, r1, h0, h1) = if by_rows {
            (a, b, 0, heads)
        } else {
            (0, n, a, b)
        };
        // C[r0..r1, h0..h1] = X[r0..r1] (row-major, d) * W[h0..h1, :d]^T (row stride 1,
        // column stride d + 1); C has row stride `heads`.
        // SAFETY: the pointers and strides stay inside `x` (n * d), `w` (heads * da) and
        // `out` (n * heads); the threads write disjoint blocks of `out`, which outlives them.
        unsafe {
            matrixmultiply::sgemm(
                r1 - r0,
                d,
                h1 - h0,
                1.0,
                x.as_ptr().add(r0 * d),
                d as isize,
                1,
                w.as_ptr().add(h0 * da),
                1,
                da as isize,
                0.0,
                c.get().add(r0 * heads + h0),
                heads as isize,
                1,
            );
        }
    });
    for row in out.chunks_exact_mut(heads) {
        for (k, s) in row.iter_mut().enumerate() {
            *s += data.bias * w[k * da + d];
        }
    }
    out
}

/// A raw pointer the threads of [`gemm_scores`] share, each writing its own block.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: used only for disjoint writes while the buffer is alive (see gemm_scores).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Decision values of the rows `start..` of `x` (`d` features each), `heads` per row, into
/// `out`.
#[inline(always)]
fn chunk_scores<L: Lanes, E: Elem>(
    l: L,
    x: &[E],
    d: usize,
    bias: f32,
    w: &[f32],
    start: usize,
    out: &mut [f32],
) {
    let da = d + 1;
    let heads = w.len() / da;
    for (k, o) in out.chunks_exact_mut(heads).enumerate() {
        let i = start + k;
        let row = &x[i * d..(i + 1) * d];
        for (h, s) in o.iter_mut().enumerate() {
            *s = l.decision(&w[h * da..(h + 1) * da], row, bias);
        }
    }
}

simd_dispatch! {
    fn chunk_scores_simd<E: Elem>(x: &[E], d: usize, bias: f32, w: &[f32], start: usize, out: &mut [f32]) => chunk_scores
}

/// Decision values of the dense rows in `x` (`d` features each) against the augmented weight
/// rows `w`, `w.len() / (d + 1)` a row, into `out`: the dot product [`CpuBackend`]'s `scores`
/// uses, for callers that prepare rows a block at a time (scaled, or widened from f64) and
/// want the same values bit for bit.
pub fn score_rows(x: &[f32], d: usize, bias: f32, w: &[f32], out: &mut [f32]) {
    chunk_scores_simd(x, d, bias, w, 0, out);
}

/// One chunk's share of an epoch.
#[derive(Debug, Clone)]
struct Partial {
    sum: Vec<f32>,
    scratch: Vec<f32>,
    /// The K-head epoch's group of rows widened to f32, when X is stored narrower.
    wide: Vec<f32>,
    mistakes: u64,
    criterion: f64,
    /// The mistakes' row weights, summed.
    weighted: f64,
    /// One-vs-rest: the rows whose first highest score is not their class.
    wrong_rows: u64,
}

/// Rows per group of the K-head epoch (see `chunk_epoch_heads`).
const HEAD_ROWS: usize = 4;

/// Rows (in bytes) that the K-head epoch prefetches, a group ahead. Measured at K = 10
/// (`bench --classes 10 --backend cpu`, ms per epoch without -> with, with the 2 x 2 tiles of
/// the time): d = 256 f32 26.0 -> 20.9, d = 784 19.8 -> 15.1, d = 128 36.2 -> 35.5; but
/// d = 64 52.0 -> 54.8 (short rows: the hardware prefetcher keeps up, and the hints cost
/// more than they save) and d = 5000 34.8 -> 38.5 (a group of long rows outgrows L1, and
/// prefetching the next evicts it).
const HEAD_PREFETCH_ROW: std::ops::RangeInclusive<usize> = 512..=PREFETCH_MAX_ROW;

/// Most rows in a block of the binary epoch.
const BLOCK: usize = 64;

/// The row weights of a block when rows have none.
const ONES: [f32; BLOCK] = [1.0; BLOCK];

/// Rows per block of the binary epoch: as many as keep a block within 8 KiB (a quarter of a
/// typical L1d; 16 KiB blocks were a little slower: docs/performance.md, "Figures behind the
/// code's choices"), from 1 to [`BLOCK`], for rows of `d` values of `bytes` bytes.
fn block_rows(d: usize, bytes: usize) -> usize {
    (8192 / (d * bytes).max(1)).clamp(1, BLOCK)
}

/// How far ahead of the row being scored X is prefetched, in bytes, when rows are short.
const PREFETCH_AHEAD: usize = 8 << 10;

/// Rows longer than this (bytes) are not prefetched: the hardware prefetcher follows long
/// rows on its own, and prefetching them was slower (docs/performance.md, "CPU, measured
/// here").
const PREFETCH_MAX_ROW: usize = 4 << 10;

/// The fused binary epoch over one chunk of rows: margins, mistakes, criterion, and the sum
/// of y*x (times the row's weight) over the mistakes, reading each row from memory once.
///
/// `x` is `v.x` as its typed slice (any storage; values are widened on load).
///
/// Rows go in blocks that stay in L1. First the block's margins, four rows' dot products at
/// a time; then each row's coefficient (y on a mistake, else 0) with vector compares and masks
/// ([`Lanes::block_rule`]); then the rows with a non-zero coefficient, listed without a
/// branch, are added with those coefficients (skipping a zero adds nothing: the sums start at
/// +0). No branch depends on the data: with 10-45% of rows mistakes in random places, a branch
/// per row was mispredicted so often that it cost more than reading the row. While scoring
/// short rows, X is prefetched [`PREFETCH_AHEAD`] bytes ahead, so memory keeps streaming while
/// a block is being added.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_epoch<L: Lanes, E: Elem>(
    l: L,
    x: &[E],
    v: TrainView<'_>,
    w: &[f32],
    tau: f32,
    start: usize,
    end: usize,
    p: &mut Partial,
) {
    let d = v.d;
    let sum = &mut p.sum[..=d];
    sum.fill(0.0);
    let (mut mistakes, mut criterion, mut weighted) = (0u64, 0f64, 0f64);
    let (mut ms, mut cs, mut ck, mut rk) =
        ([0f32; BLOCK], [0f32; BLOCK], [0f32; BLOCK], [0u32; BLOCK]);
    let per = block_rows(d, size_of::<E>());
    let prefetch = d * size_of::<E>() <= PREFETCH_MAX_ROW;
    let mut r0 = start;
    while r0 < end {
        let b = per.min(end - r0);
        // Four rows at a time: four independent dot products in flight (a row's dot is one
        // dependency chain), bit-identical to one `decision` per row.
        let wd = &w[..d];
        let wb = w[d] * v.bias;
        let mut k = 0;
        while k + 4 <= b {
            let i = r0 + k;
            let rows = std::array::from_fn(|r| &x[(i + r) * d..(i + r + 1) * d]);
            if prefetch {
                prefetch_ahead(&x[i * d..(i + 4) * d], PREFETCH_AHEAD);
            }
            let t = l.dot_tile::<E, 4, 1>(rows, [wd]);
            for r in 0..4 {
                ms[k + r] = v.y[i + r] * (t[r][0] + wb);
            }
            k += 4;
        }
        for (k, m) in ms[..b].iter_mut().enumerate().skip(k) {
            let i = r0 + k;
            let row = &x[i * d..(i + 1) * d];
            if prefetch {
                prefetch_ahead(row, PREFETCH_AHEAD);
            }
            *m = v.y[i] * l.decision(w, row, v.bias);
        }
        let ws = v.sw.map_or(&ONES[..b], |s| &s[r0..r0 + b]);
        if v.sw.is_some() {
            for (&m, &wk) in ms[..b].iter().zip(ws) {
                weighted += if m <= tau { wk as f64 } else { 0.0 };
            }
        }
        // Branch-free (LLVM compiled the plain selects into branches, which mispredicted on
        // random mistakes: 30% of the u8 epoch in perf).
        let hits = l.block_rule(tau, &mut ms[..b], &v.y[r0..r0 + b], ws, &mut cs[..b]);
        if v.sw.is_none() {
            weighted += hits as f64;
        }
        for &m in &ms[..b] {
            criterion -= m as f64;
        }
        if hits > 0 {
            // Only the rows with a non-zero coefficient are added (adding c * x = ±0 to a sum
            // that starts at +0 changes no bit), listed without a branch.
            let mut nz = 0;
            for (k, &c) in cs[..b].iter().enumerate() {
                rk[nz] = k as u32;
                ck[nz] = c;
                nz += usize::from(c != 0.0);
            }
            l.axpy_rows(
                &rk[..nz],
                &ck[..nz],
                &x[r0 * d..(r0 + b) * d],
                &mut sum[..d],
            );
            for &c in &ck[..nz] {
                sum[d] += c * v.bias;
            }
        }
        mistakes += hits as u64;
        r0 += b;
    }
    p.mistakes = mistakes;
    p.criterion = criterion;
    p.weighted = weighted;
}

simd_dispatch! {
    fn chunk_epoch_simd<E: Elem>(x: &[E], v: TrainView<'_>, w: &[f32], tau: f32, start: usize, end: usize, p: &mut Partial) => chunk_epoch
}

/// The K-head epoch over one chunk: K scores per row, the rule's coefficients, and the sums.
/// The twin of `margins` + `accumulate` in shaders/batch_two_kernels.wgsl.
///
/// `x` is `v.x` as its typed slice (any storage).
///
/// `w` holds the K heads (d weights and the bias weight each) at stride `ws` >= d + 1: the
/// epoch passes a copy with each head on a cache line of its own (see `CpuBound::accumulate`).
///
/// Rows go in groups of [`HEAD_ROWS`]; for each pair of heads, the whole group goes through
/// one [`Lanes::dot_tile`] of 4 rows x 2 heads ([`Lanes::dot_group`]): each 8 columns of a row
/// are loaded once for two heads, and each 8 columns of a head once for four rows (the
/// per-head dots are compute-bound on loads: one 4 x 2 tile, with the next group prefetched
/// meanwhile, beats per-head dots and two 2 x 2 tiles per pair; docs/performance.md, "Figures
/// behind the code's choices"), and each pair of heads is loaded once for the whole group (at
/// K = 10, d = 784 the heads outgrow L1 next to the rows). Rows over 4 KiB, and a chunk's last
/// rows, go in pairs.
/// The scores are bit-identical to per-head [`Lanes::decision`] calls. Then each row of the
/// group in order: its rule, and its heads' updates while the row is in L1 (the reference's
/// order).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_epoch_heads<L: Lanes, E: Elem>(
    l: L,
    x: &[E],
    v: TrainView<'_>,
    w: &[f32],
    ws: usize,
    rule: &BatchRule,
    start: usize,
    end: usize,
    p: &mut Partial,
) {
    let d = v.d;
    let da = d + 1;
    let k = v.heads;
    p.sum.fill(0.0);
    let (mut mistakes, mut criterion, mut weighted, mut wrong_rows) = (0u64, 0f64, 0f64, 0u64);
    let head = |h: usize| &w[h * ws..h * ws + da];
    let s = &mut p.scratch;
    let prefetch = HEAD_PREFETCH_ROW.contains(&(d * size_of::<E>()));
    // Rows of up to 4 KiB go through the 4 x 2 tile, whose two passes read the group's rows
    // twice per pair of heads; longer rows outgrow L1 and go in pairs, which are faster there
    // (up to the limit the tile is the faster; docs/performance.md, "Figures behind the
    // code's choices").
    let whole = d * size_of::<E>() <= PREFETCH_MAX_ROW;
    let mut i = start;
    while i < end {
        // A group of up to HEAD_ROWS rows: each pair of heads is loaded once for all of them
        // (from L2: the K heads together outgrow L1 at large K * d) while the group's rows
        // stay in L1.
        let g = HEAD_ROWS.min(end - i);
        let row = |r: usize| &x[(i + r) * d..(i + r + 1) * d];
        // The next group's rows (rows of HEAD_PREFETCH_ROW bytes), prefetched a share per
        // tile, so that memory keeps streaming while this group is scored.
        let next = match prefetch {
            true => &x[(i + g) * d..(i + g + HEAD_ROWS).min(end) * d],
            false => &x[..0],
        };
        let pf: &[u8] = bytemuck::cast_slice(next);
        let mut wide = false;
        if g == HEAD_ROWS && whole {
            // The whole group at once: a 4 x 2 tile per pair of heads (`Lanes::dot_group`).
            let group = &x[i * d..(i + HEAD_ROWS) * d];
            if size_of::<E>() < 4 {
                // Narrow rows are widened once per group rather than once per pair of heads
                // (exactly, so the scores are the same bits).
                for (o, v) in p.wide.iter_mut().zip(group) {
                    *o = v.widen();
                }
                l.dot_group(&p.wide[..HEAD_ROWS * d], d, w, ws, k, pf, s);
                wide = true;
            } else {
                l.dot_group(group, d, w, ws, k, pf, s);
            }
        }
        let mut h = if g == HEAD_ROWS && whole { k } else { 0 };
        while h < k {
            let two = h + 1 < k;
            // Long rows, and a chunk's last rows: in pairs.
            let mut r = 0;
            while r < g {
                let pair = r + 1 < g;
                let (a, b) = (r * k + h, (r + 1) * k + h);
                match (pair, two) {
                    (true, true) => {
                        let t = l.dot_tile([row(r), row(r + 1)], [head(h), head(h + 1)]);
                        (s[a], s[a + 1], s[b], s[b + 1]) = (t[0][0], t[0][1], t[1][0], t[1][1]);
                    }
                    (true, false) => {
                        let t = l.dot_tile([row(r), row(r + 1)], [head(h)]);
                        (s[a], s[b]) = (t[0][0], t[1][0]);
                    }
                    (false, true) => {
                        let t = l.dot_tile([row(r)], [head(h), head(h + 1)]);
                        (s[a], s[a + 1]) = (t[0][0], t[0][1]);
                    }
                    (false, false) => s[a] = l.dot_tile([row(r)], [head(h)])[0][0],
                }
                r += 1 + usize::from(pair);
            }
            h += 1 + usize::from(two);
        }
        for r in 0..g {
            let xr = row(r);
            let sr = &mut s[r * k..(r + 1) * k];
            for (h, sh) in sr.iter_mut().enumerate() {
                *sh += w[h * ws + d] * v.bias;
            }
            let sum = &mut p.sum;
            let xw = match wide {
                true => &p.wide[r * d..(r + 1) * d],
                false => &[][..],
            };
            let o = row_rule(
                rule.rule,
                rule.tau,
                sr,
                v.y[i + r],
                v.row_weight(i + r),
                |h, c| {
                    // The widened row where there is one (the same values: the same sums).
                    match wide {
                        true => axpy(c, xw, &mut sum[h * da..h * da + d]),
                        false => axpy(c, xr, &mut sum[h * da..h * da + d]),
                    }
                    sum[h * da + d] += c * v.bias;
                },
            );
            mistakes += o.mistakes;
            criterion += o.criterion;
            weighted += o.weighted;
            wrong_rows += o.wrong_rows;
        }
        i += g;
    }
    p.mistakes = mistakes;
    p.criterion = criterion;
    p.weighted = weighted;
    p.wrong_rows = wrong_rows;
}

simd_dispatch! {
    #[allow(clippy::too_many_arguments)]
    fn chunk_epoch_heads_simd<E: Elem>(x: &[E], v: TrainView<'_>, w: &[f32], ws: usize, rule: &BatchRule, start: usize, end: usize, p: &mut Partial) => chunk_epoch_heads
}

/// Copies the heads of `w` (stride `da`) into `buf` at a stride of `da` rounded up to 16
/// floats, the first head on a 64-byte boundary, so that every head starts a cache line;
/// returns the copy and its stride. At stride d + 1 all heads but the first start mid-line,
/// and every other 8-wide load of them in the 4 x 2 tile straddled two lines; the K-head
/// epoch is faster with the copy (docs/performance.md, "Every load on one cache line").
/// `buf` is kept between epochs; the copy costs K * d floats.
fn aligned_heads<'b>(buf: &'b mut Vec<f32>, w: &[f32], da: usize) -> (&'b [f32], usize) {
    let (k, ws) = (w.len() / da, da.next_multiple_of(16));
    let need = k * ws + 16;
    if buf.len() < need {
        *buf = vec![0.0; need];
    }
    let off = buf.as_ptr().align_offset(64).min(15);
    let out = &mut buf[off..off + k * ws];
    for (o, h) in out.chunks_exact_mut(ws).zip(w.chunks_exact(da)) {
        o[..da].copy_from_slice(h);
    }
    (out, ws)
}

/// Training data bound to the CPU, with the per-chunk buffers of the batch epoch.
pub struct CpuBound<'a> {
    v: TrainView<'a>,
    /// In a data-parallel run: the sums across processes.
    reduce: Option<&'a dyn Reduce>,
    rows: usize,
    partials: Vec<Partial>,
    /// Sparse rows: each row's coefficient per head (`n * heads`), written by the chunks and
    /// then summed in row order (dense rows keep per-chunk sums instead: with millions of
    /// columns those would not fit).
    coef: Vec<f32>,
    total: Vec<f32>,
    pocket: Option<Pocket>,
    /// The running sum of the weights after each epoch, and how many epochs it holds.
    average: Option<(Vec<f32>, u64)>,
    stop: StopState,
    /// Winnow: the weights used, exp(log w - max log w).
    beta: Vec<f32>,
    /// The K-head epoch's copy of the weights, each head on cache lines of its own (see
    /// [`aligned_heads`]).
    heads: Vec<f32>,
}

impl<'a> CpuBound<'a> {
    /// Binds `v`, allocating the chunk partials once.
    pub fn new(v: TrainView<'a>) -> Self {
        let sparse = v.x.is_sparse();
        // Sparse rows are chunked by their stored values, not by d.
        let rows = if sparse {
            chunk_rows(v.n, v.x.stored(v.n, v.d) / v.n.max(1))
        } else {
            chunk_rows(v.n, v.d)
        };
        let chunks = v.n.div_ceil(rows).max(1);
        let len = v.heads.max(1) * (v.d + 1);
        let p = Partial {
            sum: if sparse { Vec::new() } else { vec![0.0; len] },
            scratch: vec![0.0; HEAD_ROWS * v.heads.max(1)],
            wide: match v.x.storage() {
                super::Storage::F32 => Vec::new(),
                _ if sparse => Vec::new(),
                _ => vec![0.0; HEAD_ROWS * v.d],
            },
            mistakes: 0,
            criterion: 0.0,
            weighted: 0.0,
            wrong_rows: 0,
        };
        CpuBound {
            v,
            reduce: None,
            rows,
            partials: vec![p; chunks],
            coef: if sparse {
                vec![0.0; v.n * v.heads.max(1)]
            } else {
                Vec::new()
            },
            total: vec![0.0; len],
            pocket: None,
            average: None,
            stop: StopState::default(),
            beta: Vec::new(),
            heads: Vec::new(),
        }
    }

    /// One fused epoch with the weights `w`: fills `self.total` with the sums over the
    /// mistakes and returns the rows' counts, added in chunk order.
    fn accumulate(&mut self, w: &[f32], rule: &BatchRule) -> RowOutcome {
        let v = self.v;
        let rows = self.rows;
        let binary = rule.rule == HeadRule::Binary && v.heads == 1;
        let f = match v.x {
            Matrix::Dense(f) => f,
            Matrix::Csr(_) => return self.accumulate_csr(w, rule),
        };
        let (wp, ws) = match binary {
            true => (w, v.d + 1),
            false => aligned_heads(&mut self.heads, w, v.d + 1),
        };

        self.partials.par_iter_mut().enumerate().for_each(|(c, p)| {
            let end = ((c + 1) * rows).min(v.n);
            with_features!(f, x => if binary {
                chunk_epoch_simd(x, v, w, rule.tau, c * rows, end, p);
            } else {
                chunk_epoch_heads_simd(x, v, wp, ws, rule, c * rows, end, p);
            })
        });
        self.total.fill(0.0);
        for p in &self.partials {
            if p.mistakes > 0 {
                axpy(1.0, &p.sum, &mut self.total);
            }
        }
        self.counts()
    }

    /// The chunks' counts, added in chunk order.
    fn counts(&self) -> RowOutcome {
        let mut c = RowOutcome::default();
        for p in &self.partials {
            c += RowOutcome {
                mistakes: p.mistakes,
                criterion: p.criterion,
                weighted: p.weighted,
                wrong_rows: p.wrong_rows,
            };
        }
        c
    }

    /// The epoch on CSR rows: the chunks score their rows and write each row's coefficients
    /// (the twin of `margins`), then the sums over the mistakes are added row after row, each
    /// row touching only its own columns (for every column rows ascending, as
    /// `reference::gather`; the GPU's `gather` equals it where sums are exact). The counts are
    /// added in chunk order, as for dense rows.
    fn accumulate_csr(&mut self, w: &[f32], rule: &BatchRule) -> RowOutcome {
        let v = self.v;
        let (d, k, rows) = (v.d, v.heads.max(1), self.rows);
        let da = d + 1;
        self.partials
            .par_iter_mut()
            .zip(self.coef.par_chunks_mut(rows * k))
            .enumerate()
            .for_each(|(c, (p, coef))| {
                let mut buf = Vec::new();
                let s = &mut p.scratch[..k];
                let mut counts = RowOutcome::default();
                let csr = v.x.csr();
                for (r, cr) in coef.chunks_exact_mut(k).enumerate() {
                    let i = c * rows + r;
                    // The weights a row reads are in random places: ask for those of the row
                    // GATHER_AHEAD rows on while this one is scored.
                    if let Some(ix) = csr.and_then(|m| {
                        m.indptr
                            .get(i + GATHER_AHEAD + 1)
                            .map(|&e| &m.indices[m.indptr[i + GATHER_AHEAD]..e])
                    }) {
                        for h in 0..k {
                            prefetch_gather(&w[h * da..(h + 1) * da], ix);
                        }
                    }
                    let row = v.x.row(i, d, &mut buf);
                    for (h, sh) in s.iter_mut().enumerate() {
                        *sh = row.decision(&w[h * da..(h + 1) * da], v.bias);
                    }
                    cr.fill(0.0);
                    let o = row_rule(rule.rule, rule.tau, s, v.y[i], v.row_weight(i), |h, a| {
                        cr[h] = a
                    });
                    counts += o;
                }
                (p.mistakes, p.criterion, p.weighted) =
                    (counts.mistakes, counts.criterion, counts.weighted);
                p.wrong_rows = counts.wrong_rows;
            });
        self.total.fill(0.0);
        let mut buf = Vec::new();
        for (i, cr) in self.coef.chunks_exact(k).enumerate() {
            if cr.iter().all(|&a| a == 0.0) {
                continue;
            }
            let row = v.x.row(i, d, &mut buf);
            for (h, &a) in cr.iter().enumerate() {
                if a != 0.0 {
                    row.axpy(a, &mut self.total[h * da..h * da + d]);
                    self.total[h * da + d] += a * v.bias;
                }
            }
        }
        self.counts()
    }
}

/// Rows ahead of the one being scored whose weights the sparse epoch prefetches (faster than
/// none; 1 and 16 rows ahead no better: docs/performance.md, "Figures behind the code's
/// choices").
const GATHER_AHEAD: usize = 4;

/// Asks the CPU to start loading `w[j]` for every column `j` of `idx` (a hint; never faults).
#[inline(always)]
fn prefetch_gather(w: &[f32], idx: &[u32]) {
    for &j in idx {
        if let Some(v) = w.get(j as usize) {
            prefetch_ahead(std::slice::from_ref(v), 0);
        }
    }
}

/// Held-out rows of `v` predicted wrong by the weights `w`, when there are held-out rows.
pub fn val_mistakes(v: &TrainView<'_>, w: &[f32], rule: HeadRule) -> Option<u64> {
    let (val, data) = (v.val?, v.val_data()?);
    let heads = w.len() / (v.d + 1);
    let scores = cpu_scores(data, w);
    Some(
        scores
            .chunks_exact(heads.max(1))
            .zip(val.y)
            .filter(|(s, &y)| predicted_wrong(rule, s, y))
            .count() as u64,
    )
}

impl Bound for CpuBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs> {
        let mut out = Epochs::default();
        for _ in 0..max_epochs {
            let mut beta = std::mem::take(&mut self.beta);
            let scored: &[f32] = match rule.update {
                Update::Multiplicative => {
                    // w holds log-weights: rows are scored with the Winnow weights.
                    beta.resize(w.len(), 0.0);
                    winnow_weights(w, &mut beta);
                    &beta
                }
                Update::Additive => w,
            };
            let mut counts = self.accumulate(scored, rule);
            if let Some(r) = self.reduce {
                // One epoch over every process's rows: the update sums and the counts.
                r.sum_f32(&mut self.total);
                let mut c = [
                    counts.mistakes as f64,
                    counts.criterion,
                    counts.weighted,
                    counts.wrong_rows as f64,
                ];
                r.sum_f64(&mut c);
                counts = RowOutcome {
                    mistakes: c[0] as u64,
                    criterion: c[1],
                    weighted: c[2],
                    wrong_rows: c[3] as u64,
                };
            }
            // Held-out rows are scored by the model the epoch starts with: for averaging with
            // a pocket, the running sum (the average up to a positive factor).
            let (candidate, updates): (&[f32], u64) = match &self.average {
                Some((sum, t)) if rule.keep == super::Keep::AveragePocket && *t > 0 => (sum, *t),
                _ => (scored, 0),
            };
            let mut val = val_mistakes(&self.v, candidate, rule.rule);
            if let (Some(r), Some(m)) = (self.reduce, val.as_mut()) {
                // Held-out rows predicted wrong, over every process's share.
                let mut c = [*m as f64];
                r.sum_f64(&mut c);
                *m = c[0] as u64;
            }
            let mut e = EpochStats {
                mistakes: counts.mistakes,
                criterion: counts.criterion,
                val_mistakes: val,
                weighted: self.v.sw.is_some().then_some(counts.weighted),
                wrong_rows: (rule.rule == HeadRule::OneVsRest).then_some(counts.wrong_rows),
                ..Default::default()
            };
            if rule.keep.pocket() && e.monitored() < self.stop.best {
                let kept: &[f32] = match rule.keep {
                    super::Keep::AveragePocket => candidate,
                    _ => w,
                };
                match &mut self.pocket {
                    Some(p) => p.w.copy_from_slice(kept),
                    None => {
                        self.pocket = Some(Pocket {
                            w: kept.to_vec(),
                            figure: 0.0,
                            updates: 0,
                        })
                    }
                }
                if let Some(p) = &mut self.pocket {
                    p.figure = e.monitored();
                    p.updates = updates;
                }
            }
            self.beta = beta;
            let mut norm2 = 0f64;
            if counts.mistakes > 0 {
                for (wj, sj) in w.iter_mut().zip(&self.total) {
                    let step = rule.eta * sj;
                    norm2 += (step as f64) * (step as f64);
                    *wj += step;
                }
            }
            if rule.keep.average() {
                let (sum, t) = self.average.get_or_insert_with(|| (vec![0.0; w.len()], 0));
                axpy(1.0, w, sum);
                *t += 1;
            }
            e.update_norm = norm2.sqrt();
            let (_, mut stop) = self.stop.record(rule, &e);
            if let Some(r) = self.reduce {
                stop = super::agreed_stop(r, stop);
            }
            out.stats.push(e);
            if stop.is_some() {
                out.stop = stop;
                break;
            }
        }
        Ok(out)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        Ok(cpu_scores(self.v.data(), w))
    }

    fn extras(&mut self) -> Result<Extras> {
        Ok(Extras {
            pocket: self.pocket.clone(),
            average: self.average.clone(),
            stop: self.stop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Keep, RowWeight};
    use super::*;

    #[test]
    fn hand_computed_batch_epoch_with_tie_and_bias() {
        // x: (1, 0) y=+1, (0, 1) y=-1. w = 0: both margins are 0, ties count as mistakes.
        let x = [1.0, 0.0, 0.0, 1.0];
        let y = [1.0, -1.0];
        let v = TrainView::new(&x, &y, 2, 2, 1.0, 1);
        let cpu = CpuBackend::new();
        let mut b = cpu.bind(v).unwrap();
        let mut w = vec![0.0; 3];
        let rule = BatchRule::new(0.5, 0.0);
        let e = b.batch_epochs(&mut w, &rule, 1).unwrap().stats;
        // sum = (+1)(1,0,1) + (-1)(0,1,1) = (1,-1,0); w = 0.5 * sum.
        assert_eq!(w, vec![0.5, -0.5, 0.0]);
        assert_eq!(e[0].mistakes, 2);
        assert_eq!(e[0].criterion, 0.0);
        assert!((e[0].update_norm - 0.5f64.sqrt()).abs() < 1e-7);
        // Next epoch: margins 0.5 and 0.5, no mistakes -> converged, w unchanged.
        let e = b.batch_epochs(&mut w, &rule, 10).unwrap().stats;
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].mistakes, 0);
        assert_eq!(w, vec![0.5, -0.5, 0.0]);
        assert_eq!(b.scores(&w).unwrap(), vec![0.5, -0.5]);
    }

    #[test]
    fn hand_computed_multiclass_rules() {
        // Three classes, one row x = (1, 2) of class 1, W = 0: every score is 0, a tie, so a
        // mistake. `all`: class 1 gets +x, classes 0 and 2 get -x. `argmax`: only the first
        // highest wrong class (0) gets -x.
        let x = [1.0, 2.0];
        let y = [1.0];
        let v = TrainView::new(&x, &y, 1, 2, 1.0, 3);
        let cpu = CpuBackend::new();
        for (rule, want) in [
            (
                HeadRule::MulticlassAll,
                vec![-1.0, -2.0, -1.0, 1.0, 2.0, 1.0, -1.0, -2.0, -1.0],
            ),
            (
                HeadRule::MulticlassArgmax,
                vec![-1.0, -2.0, -1.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0],
            ),
        ] {
            let mut b = cpu.bind(v).unwrap();
            let mut w = vec![0.0; 9];
            let r = BatchRule {
                rule,
                ..BatchRule::new(1.0, 0.0)
            };
            let e = b.batch_epochs(&mut w, &r, 1).unwrap().stats;
            assert_eq!(e[0].mistakes, 1);
            assert_eq!(w, want, "{rule:?}");
        }
        // One-vs-rest: head 1 wants +, heads 0 and 2 want -; all three err at 0.
        let mut b = cpu.bind(v).unwrap();
        let mut w = vec![0.0; 9];
        let r = BatchRule {
            rule: HeadRule::OneVsRest,
            ..BatchRule::new(1.0, 0.0)
        };
        let e = b.batch_epochs(&mut w, &r, 1).unwrap().stats;
        assert_eq!(e[0].mistakes, 3);
        assert_eq!(w, vec![-1.0, -2.0, -1.0, 1.0, 2.0, 1.0, -1.0, -2.0, -1.0]);
    }

    #[test]
    fn pocket_and_average_are_kept() {
        let x = [1.0, 0.0, 0.0, 1.0];
        let y = [1.0, -1.0];
        let v = TrainView::new(&x, &y, 2, 2, 1.0, 1);
        let cpu = CpuBackend::new();
        let mut b = cpu.bind(v).unwrap();
        let mut w = vec![0.0; 3];
        let r = BatchRule {
            keep: Keep::Pocket,
            ..BatchRule::new(1.0, 0.0)
        };
        let e = b.batch_epochs(&mut w, &r, 10).unwrap().stats;
        assert_eq!(e.len(), 2);
        let ex = b.extras().unwrap();
        assert_eq!(
            ex.pocket,
            Some(Pocket {
                w: vec![1.0, -1.0, 0.0],
                figure: 0.0,
                updates: 0
            })
        );
        let mut b = cpu.bind(v).unwrap();
        let mut w = vec![0.0; 3];
        let r = BatchRule {
            keep: Keep::Average,
            ..BatchRule::new(1.0, 0.0)
        };
        let e = b.batch_epochs(&mut w, &r, 10).unwrap().stats;
        assert_eq!(e.len(), 2);
        let ex = b.extras().unwrap();
        // Weights after epoch 1 and 2 are both (1, -1, 0).
        assert_eq!(ex.average, Some((vec![2.0, -2.0, 0.0], 2)));
    }

    #[test]
    fn chunking_depends_on_shape_only() {
        assert_eq!(chunk_rows(10, 3), 16384);
        assert_eq!(chunk_rows(1 << 24, 3), (1 << 24) / 64);
    }

    /// The plain row-by-row form of the binary epoch (a branch per row, one axpy per
    /// mistake): the blocked, branch-free kernel must give exactly these sums and counts.
    fn reference_epoch(x: &[f32], v: TrainView<'_>, w: &[f32], tau: f32) -> (Vec<f32>, u64, f64) {
        let d = v.d;
        let (mut sum, mut mistakes, mut criterion) = (vec![0f32; d + 1], 0u64, 0f64);
        for i in 0..v.n {
            let row = &x[i * d..(i + 1) * d];
            let m = v.y[i] * crate::decision(w, row, v.bias);
            if m <= tau {
                mistakes += 1;
                criterion -= m as f64;
                axpy(v.y[i], row, &mut sum[..d]);
                sum[d] += v.y[i] * v.bias;
            }
        }
        (sum, mistakes, criterion)
    }

    /// The K-head epoch (rows in groups of four through the 4 x 2 tile, long rows and a
    /// chunk's last rows in pairs, the next group prefetched) equals per-row, per-head
    /// decisions with each row's rule and updates in row order, bit for bit on float data,
    /// portable and dispatched.
    #[test]
    fn grouped_k_head_epoch_equals_the_row_by_row_form_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        // d below and above the prefetch and 4 x 2 limits (512 B, 4 KiB of f32 rows); n not
        // a multiple of a group; K odd and even.
        for &(n, d, k) in &[
            (1, 3, 2),
            (11, 33, 3),
            (13, 64, 10),
            (10, 200, 5),
            (9, 784, 10),
            (7, 1100, 4),
        ] {
            let da = d + 1;
            let x: Vec<f32> = (0..n * d).map(|_| rng.random_range(-3.0..3.0)).collect();
            let y: Vec<f32> = (0..n).map(|_| rng.random_range(0..k) as f32).collect();
            let w: Vec<f32> = (0..k * da).map(|_| rng.random_range(-1.0..1.0)).collect();
            let v = TrainView::new(&x, &y, n, d, 1.0, k);
            for rule in [
                HeadRule::MulticlassArgmax,
                HeadRule::MulticlassAll,
                HeadRule::OneVsRest,
            ] {
                let rule = BatchRule {
                    rule,
                    tau: 0.25,
                    ..BatchRule::new(1.0, 0.0)
                };
                // The row-by-row form: per-head decisions, the rule, one axpy per update.
                let reference = |x: &[f32]| {
                    let (mut sum, mut mistakes, mut criterion) = (vec![0f32; k * da], 0u64, 0f64);
                    for i in 0..n {
                        let row = &x[i * d..(i + 1) * d];
                        let s: Vec<f32> = (0..k)
                            .map(|h| crate::decision(&w[h * da..(h + 1) * da], row, v.bias))
                            .collect();
                        let o = row_rule(rule.rule, rule.tau, &s, y[i], RowWeight::ONE, |h, c| {
                            axpy(c, row, &mut sum[h * da..h * da + d]);
                            sum[h * da + d] += c * v.bias;
                        });
                        mistakes += o.mistakes;
                        criterion += o.criterion;
                    }
                    (sum, mistakes, criterion)
                };
                let (sum, mistakes, criterion) = reference(&x);
                assert!(mistakes > 0 || n < 3, "n {n} d {d} k {k}");
                let mut p = Partial {
                    sum: vec![0.0; k * da],
                    scratch: vec![0.0; HEAD_ROWS * k],
                    wide: vec![0.0; HEAD_ROWS * d],
                    mistakes: 0,
                    criterion: 0.0,
                    weighted: 0.0,
                    wrong_rows: 0,
                };
                let want = (sum, mistakes, criterion.to_bits());
                chunk_epoch_heads(
                    crate::simd::Portable,
                    &x[..],
                    v,
                    &w,
                    da,
                    &rule,
                    0,
                    n,
                    &mut p,
                );
                let what = format!("n {n} d {d} k {k} {:?}", rule.rule);
                assert_eq!(
                    (p.sum.clone(), p.mistakes, p.criterion.to_bits()),
                    want,
                    "portable {what}"
                );
                p.sum.fill(9.0);
                chunk_epoch_heads_simd(&x[..], v, &w, v.d + 1, &rule, 0, n, &mut p);
                assert_eq!(
                    (p.sum.clone(), p.mistakes, p.criterion.to_bits()),
                    want,
                    "dispatched {what}"
                );
                // The epoch's own form: the heads copied onto cache lines (stride > d + 1).
                let mut buf = Vec::new();
                let (wp, ws) = aligned_heads(&mut buf, &w, da);
                assert!(ws >= da && ws % 16 == 0 && (wp.as_ptr() as usize).is_multiple_of(64));
                p.sum.fill(9.0);
                chunk_epoch_heads_simd(&x[..], v, wp, ws, &rule, 0, n, &mut p);
                assert_eq!(
                    (p.sum.clone(), p.mistakes, p.criterion.to_bits()),
                    want,
                    "dispatched, aligned heads, {what}"
                );
                // u8 rows (widened on load) through the same kernels give the f32 form's bits.
                let xb: Vec<u8> = x.iter().map(|&v| ((v + 3.0) * 42.0) as u8).collect();
                let xw: Vec<f32> = xb.iter().map(|&b| f32::from(b)).collect();
                let (sum, mistakes, criterion) = reference(&xw);
                let want = (sum, mistakes, criterion.to_bits());
                p.sum.fill(9.0);
                chunk_epoch_heads_simd(&xb[..], v, wp, ws, &rule, 0, n, &mut p);
                assert_eq!(
                    (p.sum, p.mistakes, p.criterion.to_bits()),
                    want,
                    "dispatched, u8 rows, {what}"
                );
            }
        }
    }

    #[test]
    fn blocked_binary_epoch_equals_the_row_by_row_form_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        // d around the block, tile (8, 32) and prefetch limits; n not a multiple of a block.
        for &(n, d) in &[
            (1, 1),
            (130, 1),
            (77, 7),
            (300, 32),
            (301, 33),
            (200, 64),
            (90, 100),
        ]
        .iter()
        .chain(&[(20, 1024), (9, 1031), (5, 5000)])
        .copied()
        .collect::<Vec<_>>()
        {
            let x: Vec<f32> = (0..n * d).map(|_| rng.random_range(-3.0..3.0)).collect();
            let y: Vec<f32> = (0..n)
                .map(|_| if rng.random_bool(0.5) { 1.0 } else { -1.0 })
                .collect();
            let w: Vec<f32> = (0..=d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let v = TrainView::new(&x, &y, n, d, 1.0, 1);
            for tau in [0.0, 0.5] {
                let (sum, mistakes, criterion) = reference_epoch(&x, v, &w, tau);
                assert!(mistakes > 0 && mistakes < n as u64 || n < 3, "n {n} d {d}");
                let mut p = Partial {
                    sum: vec![0.0; d + 1],
                    scratch: vec![0.0],
                    wide: Vec::new(),
                    mistakes: 0,
                    criterion: 0.0,
                    weighted: 0.0,
                    wrong_rows: 0,
                };
                chunk_epoch(crate::simd::Portable, &x[..], v, &w, tau, 0, n, &mut p);
                assert_eq!(
                    (p.sum.clone(), p.mistakes, p.criterion.to_bits()),
                    (sum.clone(), mistakes, criterion.to_bits()),
                    "portable n {n} d {d} tau {tau}"
                );
                p.sum.fill(9.0);
                chunk_epoch_simd(&x[..], v, &w, tau, 0, n, &mut p);
                assert_eq!(
                    (p.sum, p.mistakes, p.criterion.to_bits()),
                    (sum, mistakes, criterion.to_bits()),
                    "dispatched n {n} d {d} tau {tau}"
                );
            }
        }
    }
}
