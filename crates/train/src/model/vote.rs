//! The voted perceptron kept compactly: its first vector and one step per mistake (the row the
//! mistake added and its coefficient for each head), instead of every intermediate vector.
//! Vector k + 1 is vector k plus step k, so its scores on a row x follow from vector k's by one
//! dot product, x_s . x + bias^2 for the step's row s. [`VoteScorer`] scores rows that way: a
//! block of rows against the steps' distinct rows is one matrix product on the backend (the
//! GPU's or the CPU's `scores`), then a walk along the steps adds each vector's vote, with the
//! winning head kept incrementally (a step changes one or two heads' scores).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{
    prefetch_ahead, Backend, BackendKind, CsrBuf, DataView, Matrix, Row, MAX_HEADS,
};
use crate::error::Result;

/// One row of the steps' rows, sparse: columns ascending, values finite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SparseRow {
    /// Columns (0-based, strictly ascending).
    pub idx: Vec<u32>,
    /// Values.
    pub val: Vec<f32>,
}

/// The steps of a voted perceptron after its first vector.
#[derive(Debug, Clone, PartialEq)]
pub struct VoteSteps {
    /// The distinct training rows the steps added (in the training space: scaled when the
    /// model scales), in order of first use.
    pub support: Vec<SparseRow>,
    /// Step k's row: an index into `support`.
    pub rows: Vec<u32>,
    /// Step k's coefficient for each head (`heads` values a step, 0 for heads it left):
    /// vector k + 1 = vector k + coef * [x_s, bias].
    pub coef: Vec<f32>,
}

impl VoteSteps {
    /// The support rows as CSR.
    pub fn support_csr(&self) -> CsrBuf {
        let mut c = CsrBuf::new();
        for r in &self.support {
            c.push_row(r.idx.iter().copied().zip(r.val.iter().copied()));
        }
        c
    }

    /// The checks of a loaded model: `heads` weight rows a vector, `vectors` counts, `d`
    /// features.
    pub fn check(&self, heads: usize, vectors: usize, d: usize) -> std::result::Result<(), String> {
        for (i, r) in self.support.iter().enumerate() {
            if r.idx.len() != r.val.len() {
                return Err(format!(
                    "vote_support[{i}] has {} columns and {} values",
                    r.idx.len(),
                    r.val.len()
                ));
            }
            if r.idx.iter().any(|&j| j as usize >= d) || r.idx.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "vote_support[{i}]: columns must ascend strictly and be below {d}"
                ));
            }
        }
        if let Some(k) = self
            .rows
            .iter()
            .position(|&r| r as usize >= self.support.len())
        {
            return Err(format!(
                "vote_rows[{k}] is {}, but there are {} support rows",
                self.rows[k],
                self.support.len()
            ));
        }
        if self.coef.len() != self.rows.len() * heads {
            return Err(format!(
                "vote_coef has {} values for {} steps of {heads} heads",
                self.coef.len(),
                self.rows.len()
            ));
        }
        if vectors != self.rows.len() + 1 {
            return Err(format!(
                "{vectors} counts for {} steps (one count a vector: the first and one a step)",
                self.rows.len()
            ));
        }
        Ok(())
    }

    /// Every stored number is finite.
    pub fn is_finite(&self) -> bool {
        self.coef.iter().all(|v| v.is_finite())
            && self
                .support
                .iter()
                .all(|r| r.val.iter().all(|v| v.is_finite()))
    }
}

/// One step's non-zero coefficients, as the walk reads them.
#[derive(Clone, Copy)]
struct Nz {
    head: u32,
    a: f32,
}

/// The running vote of a set of rows along the steps: each row's scores under the current
/// vector and the votes of the vectors before it. [`VoteScorer::advance`] moves along steps
/// whose counts are final; [`VoteScorer::votes_with`] adds the current vector's count.
pub struct VoteScorer {
    heads: usize,
    outputs: usize,
    /// Scores of the current vector, `n * heads`.
    s: Vec<f32>,
    /// Votes so far, `n * outputs`.
    votes: Vec<f32>,
}

/// Rows of a block scored against the distinct rows of the steps at once: at most this many
/// floats (128 MiB) in the block's matrix of dot products (the larger the block, the fewer
/// times the steps' rows are packed for the matrix product).
const BLOCK_FLOATS: usize = 1 << 25;

impl VoteScorer {
    /// Starts at the first vector `start` (`heads * (d + 1)` augmented weights).
    pub fn new(
        view: DataView<'_>,
        start: &[f32],
        heads: usize,
        outputs: usize,
        backend: &dyn Backend,
    ) -> Result<VoteScorer> {
        Ok(VoteScorer {
            heads,
            outputs,
            s: backend.scores(view, start)?,
            votes: vec![0f32; view.n * outputs],
        })
    }

    /// For each step k of `rows` (indices into `support`, rows of `d` features) and `coef`:
    /// the current vector votes with `counts[k]`, then step k moves it on. The steps' rows are
    /// scored against `view`'s in blocks on `backend`.
    pub fn advance(
        &mut self,
        view: DataView<'_>,
        support: Matrix<'_>,
        rows: &[u32],
        coef: &[f32],
        counts: &[u64],
        backend: &dyn Backend,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let heads = self.heads;
        // The distinct rows, and each step's column in the block's matrix.
        let mut distinct: Vec<u32> = rows.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let col: Vec<u32> = rows
            .iter()
            .map(|r| distinct.binary_search(r).unwrap_or(0) as u32)
            .collect();
        let (nz, starts) = nonzeros(coef, heads);
        let steps: Vec<StepRec> = (0..rows.len())
            .map(|k| StepRec {
                col: col[k],
                nz0: starts[k] as u32,
                nz1: starts[k + 1] as u32,
                count: counts[k] as f32,
            })
            .collect();
        let weights = augmented_rows(support, &distinct, view.d, view.bias);
        let p = distinct.len();
        let block = (BLOCK_FLOATS / p.max(1)).clamp(1, view.n.max(1));
        for r0 in (0..view.n).step_by(block) {
            let r1 = (r0 + block).min(view.n);
            let part = DataView {
                x: view.x.rows(r0..r1, view.d),
                n: r1 - r0,
                ..view
            };
            let g = dots(part, &weights, p, view.d, backend)?;
            let outputs = self.outputs;
            let walk = Walk {
                heads,
                outputs,
                steps: &steps,
                nz: &nz,
                g: &g,
                p,
            };
            self.s[r0 * heads..r1 * heads]
                .par_chunks_mut(WALK_ROWS * heads)
                .zip(self.votes[r0 * outputs..r1 * outputs].par_chunks_mut(WALK_ROWS * outputs))
                .enumerate()
                .for_each(|(c, (s, v))| walk.chunk(c * WALK_ROWS, s, v));
        }
        Ok(())
    }

    /// The votes (`n * outputs`) with the current vector voting `count` more times.
    pub fn votes_with(&self, count: u64) -> Vec<f32> {
        let mut out = self.votes.clone();
        if count > 0 {
            for (s, v) in self
                .s
                .chunks_exact(self.heads)
                .zip(out.chunks_exact_mut(self.outputs))
            {
                vote(s, lead(s), count as f32, v);
            }
        }
        out
    }
}

/// One step as the walk reads it: its column in the block's matrix, its non-zero
/// coefficients (`nz[nz0..nz1]`) and the count of the vector it retires.
#[derive(Clone, Copy)]
struct StepRec {
    col: u32,
    nz0: u32,
    nz1: u32,
    count: f32,
}

/// Rows walked together: their gathers and updates are independent, so they overlap.
const WALK_ROWS: usize = 4;

/// How many steps ahead the walk prefetches a step's entry of G.
const PREFETCH_STEPS: usize = 16;

/// The walk of one block along the steps.
struct Walk<'a> {
    heads: usize,
    outputs: usize,
    steps: &'a [StepRec],
    nz: &'a [Nz],
    g: &'a [f32],
    p: usize,
}

impl Walk<'_> {
    /// Rows `i..i + R` of the block: scores `s` (`R * heads`, updated) and votes `v`
    /// (`R * outputs`, added to).
    #[inline(always)]
    fn rows<const R: usize>(&self, i: usize, s: &mut [f32], v: &mut [f32]) {
        let (h, o) = (self.heads, self.outputs);
        let g: [&[f32]; R] =
            std::array::from_fn(|r| &self.g[(i + r) * self.p..(i + r + 1) * self.p]);
        let mut best: [usize; R] = std::array::from_fn(|r| lead(&s[r * h..(r + 1) * h]));
        for (k, st) in self.steps.iter().enumerate() {
            // The steps' columns are scattered over a row of G (tens of KiB): fetch ahead.
            if let Some(ahead) = self.steps.get(k + PREFETCH_STEPS) {
                for gr in &g {
                    prefetch_ahead(std::slice::from_ref(&gr[ahead.col as usize]), 0);
                }
            }
            if st.count != 0.0 {
                for r in 0..R {
                    vote(
                        &s[r * h..(r + 1) * h],
                        best[r],
                        st.count,
                        &mut v[r * o..(r + 1) * o],
                    );
                }
            }
            let gk: [f32; R] = std::array::from_fn(|r| g[r][st.col as usize]);
            let mut fell = [false; R];
            for z in &self.nz[st.nz0 as usize..st.nz1 as usize] {
                let hd = z.head as usize;
                for r in 0..R {
                    let sr = &mut s[r * h..(r + 1) * h];
                    let old = sr[hd];
                    sr[hd] += z.a * gk[r];
                    if h > 1 {
                        if hd == best[r] {
                            fell[r] |= sr[hd] < old;
                        } else if sr[hd] > sr[best[r]] || (sr[hd] == sr[best[r]] && hd < best[r]) {
                            best[r] = hd;
                        }
                    }
                }
            }
            for r in 0..R {
                if fell[r] {
                    best[r] = lead(&s[r * h..(r + 1) * h]);
                }
            }
        }
    }

    /// The rows of a chunk of at most [`WALK_ROWS`] rows starting at row `i`.
    fn chunk(&self, i: usize, s: &mut [f32], v: &mut [f32]) {
        let (h, o) = (self.heads, self.outputs);
        if s.len() == WALK_ROWS * h {
            self.rows::<WALK_ROWS>(i, s, v);
        } else {
            for (r, (sr, vr)) in s.chunks_exact_mut(h).zip(v.chunks_exact_mut(o)).enumerate() {
                self.rows::<1>(i + r, sr, vr);
            }
        }
    }
}

/// The head a vector's scores vote for: the first highest (one head: 0).
fn lead(s: &[f32]) -> usize {
    super::argmax(s)
}

/// Adds a vector's vote: two classes (one head), count * sgn(s) (sgn(0) = +1); more, count to
/// the winning head.
#[inline]
fn vote(s: &[f32], best: usize, c: f32, v: &mut [f32]) {
    if v.len() == 1 {
        v[0] += if s[0] >= 0.0 { c } else { -c };
    } else {
        v[best] += c;
    }
}

/// The non-zero coefficients of each step, and where each step's start (`steps + 1` offsets).
fn nonzeros(coef: &[f32], heads: usize) -> (Vec<Nz>, Vec<usize>) {
    let mut nz = Vec::new();
    let mut starts = vec![0];
    for step in coef.chunks_exact(heads.max(1)) {
        for (h, &a) in step.iter().enumerate() {
            if a != 0.0 {
                nz.push(Nz { head: h as u32, a });
            }
        }
        starts.push(nz.len());
    }
    (nz, starts)
}

/// The rows `which` of `support` as augmented weight rows [x_s, bias], dense.
fn augmented_rows(support: Matrix<'_>, which: &[u32], d: usize, bias: f32) -> Vec<f32> {
    let da = d + 1;
    let mut out = vec![0f32; which.len() * da];
    let mut buf = Vec::new();
    for (o, &r) in out.chunks_exact_mut(da).zip(which) {
        match support.row(r as usize, d, &mut buf) {
            Row::Dense(x) => o[..d].copy_from_slice(x),
            Row::Sparse { idx, val } => {
                for (&j, &v) in idx.iter().zip(val) {
                    o[j as usize] = v;
                }
            }
        }
        o[d] = bias;
    }
    out
}

/// x_i . x_s + bias^2 for every row of `part` and each of the `p` augmented rows `w`,
/// row-major (`part.n * p`): one [`Backend::products`] on the CPU, calls of at most
/// [`MAX_HEADS`] rows on a GPU.
fn dots(
    part: DataView<'_>,
    w: &[f32],
    p: usize,
    d: usize,
    backend: &dyn Backend,
) -> Result<Vec<f32>> {
    let da = d + 1;
    if p <= MAX_HEADS || backend.kind() == BackendKind::Cpu {
        return backend.products(part, w);
    }
    let mut out = vec![0f32; part.n * p];
    for c0 in (0..p).step_by(MAX_HEADS) {
        let c1 = (c0 + MAX_HEADS).min(p);
        let got = backend.products(part, &w[c0 * da..c1 * da])?;
        let k = c1 - c0;
        for (o, g) in out.chunks_exact_mut(p).zip(got.chunks_exact(k)) {
            o[c0..c1].copy_from_slice(g);
        }
    }
    Ok(out)
}
