//! Plain CPU twins of every WGSL entry point, with the same names: `epoch`, `margins`,
//! `accumulate`, `gather`, `apply`, `finalize` and `scores` (shaders/batch.wgsl and its two
//! entry-point files) and `kscores` (shaders/kernel.wgsl).
//! Each is the shader's rule written as a sequential loop, with no SIMD, no threads and no
//! blocking, so it is easy to check by reading. [`ReferenceBackend`] chains them into a
//! [`Backend`]; tests hold the fast CPU backend (cpu.rs) and the GPU to it: bit-identical on
//! integer-valued data (every sum is exact below 2^24), within float tolerance otherwise.
//!
//! The state a resident data set keeps on the GPU (weights, pocket, average sum, log-weights,
//! the fewest mistakes seen, the stop word) is [`EpochState`] here.

use super::{
    cpu::chunk_rows, predicted_wrong, row_rule, winnow_weights, Backend, BackendKind, BatchRule,
    Bound, DataView, DualBound, DualRows, EpochStats, Epochs, Extras, HeadRule, Keep, Kernel,
    Pocket, Row, StopReason, StopState, TrainView, Update,
};
use crate::error::Result;

/// a . b summed in index order.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (x, y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

/// w_k . [x, bias]: the features in column order (a sparse row: its non-zeros in column
/// order), then the bias term; the twin of `row_score` in batch.wgsl.
pub fn row_score(w: &[f32], row: Row<'_>, bias: f32) -> f32 {
    let d = w.len() - 1;
    row.dot_seq(&w[..d]) + w[d] * bias
}

/// Twin of `margins`: for every training row the K scores, the rule's coefficient of x for
/// each head times the row's weight (`coef`, `n * heads`, row-major; 0 where the row does not
/// update the head), and the epoch's mistakes and criterion J (weighted); for every held-out
/// row the prediction rule with the weights `wv`, counting the rows predicted wrong.
pub fn margins(
    v: TrainView<'_>,
    w: &[f32],
    wv: &[f32],
    rule: &BatchRule,
    coef: &mut [f32],
) -> Margins {
    let (d, k) = (v.d, v.heads);
    let mut s = vec![0f32; k];
    let mut buf = Vec::new();
    let (mut mistakes, mut criterion, mut weighted, mut wrong_rows) = (0u64, 0f64, 0f64, 0u64);
    for i in 0..v.n {
        let row = v.x.row(i, d, &mut buf);
        for (h, sh) in s.iter_mut().enumerate() {
            *sh = row_score(&w[h * (d + 1)..(h + 1) * (d + 1)], row, v.bias);
        }
        let c = &mut coef[i * k..(i + 1) * k];
        c.fill(0.0);
        let o = row_rule(rule.rule, rule.tau, &s, v.y[i], v.row_weight(i), |h, a| {
            c[h] = a
        });
        mistakes += o.mistakes;
        criterion += o.criterion;
        weighted += o.weighted;
        wrong_rows += o.wrong_rows;
    }
    let val = v.val.map(|val| {
        let mut wrong = 0u64;
        for i in 0..val.n {
            let row = val.x.row(i, d, &mut buf);
            for (h, sh) in s.iter_mut().enumerate() {
                *sh = row_score(&wv[h * (d + 1)..(h + 1) * (d + 1)], row, v.bias);
            }
            wrong += u64::from(predicted_wrong(rule.rule, &s, val.y[i]));
        }
        wrong
    });
    Margins {
        mistakes,
        criterion,
        val_mistakes: val,
        weighted: v.sw.is_some().then_some(weighted),
        wrong_rows: (rule.rule == HeadRule::OneVsRest).then_some(wrong_rows),
    }
}

/// What `margins` counts in an epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margins {
    /// Training mistakes.
    pub mistakes: u64,
    /// The criterion J (weighted).
    pub criterion: f64,
    /// Held-out rows predicted wrong, when there are held-out rows.
    pub val_mistakes: Option<u64>,
    /// The mistakes' row weights summed, when rows have weights.
    pub weighted: Option<f64>,
    /// One-vs-rest: the training rows whose first highest score is not their class.
    pub wrong_rows: Option<u64>,
}

/// Twin of `accumulate`: per chunk of `chunk_rows` rows, the sum over its rows of
/// coef[r, k] * [x_r, bias] for every (head k, column j), rows in order, skipping rows whose
/// coefficient is 0. Returns `chunks * heads * (d + 1)` partial sums.
pub fn accumulate(v: TrainView<'_>, coef: &[f32], chunk_rows: usize) -> Vec<f32> {
    let (d, k) = (v.d, v.heads);
    let len = k * (d + 1);
    let chunks = v.n.div_ceil(chunk_rows).max(1);
    let mut partials = vec![0f32; chunks * len];
    let mut buf = Vec::new();
    for (c, part) in partials.chunks_exact_mut(len).enumerate() {
        for r in c * chunk_rows..((c + 1) * chunk_rows).min(v.n) {
            let row = v.x.row(r, d, &mut buf);
            for h in 0..k {
                let a = coef[r * k + h];
                if a == 0.0 {
                    continue;
                }
                let out = &mut part[h * (d + 1)..(h + 1) * (d + 1)];
                add_row(a, row, out);
                out[d] += a * v.bias;
            }
        }
    }
    partials
}

/// out[j] += a * x_j for every stored value of the row, in column order.
fn add_row(a: f32, row: Row<'_>, out: &mut [f32]) {
    match row {
        Row::Dense(x) => {
            for (o, x) in out.iter_mut().zip(x) {
                *o += a * x;
            }
        }
        Row::Sparse { idx, val } => {
            for (&j, &x) in idx.iter().zip(val) {
                out[j as usize] += a * x;
            }
        }
    }
}

/// Twin of `epoch` (the register pass over dense rows): the K scores of every training row,
/// the rule, its coefficients (`coef`, scratch here: the GPU keeps them in workgroup memory)
/// and the epoch's counts, as `margins`; and one partial per workgroup's run of `run` rows,
/// the sum over the run of coef[r, k] * [x_r, bias], as `accumulate` with chunks of `run`
/// rows. Held-out rows are counted as `margins` counts them. The GPU sums a run's rows in
/// row groups (each in row order) that are then added in order: the same sums wherever
/// they are exact (integer data), not bit for bit on float data.
pub fn epoch(
    v: TrainView<'_>,
    w: &[f32],
    wv: &[f32],
    rule: &BatchRule,
    run: usize,
    coef: &mut [f32],
) -> (Margins, Vec<f32>) {
    let m = margins(v, w, wv, rule, coef);
    (m, accumulate(v, coef, run.max(1)))
}

/// Twin of `gather` (CSR rows; the GPU reads a column-major copy): for every (head k, column
/// j) the sum over the rows of coef[r, k] * [x_r, bias]_j, rows in ascending order, skipping
/// rows whose coefficient is 0. Returns `heads * (d + 1)` sums (one partial). The GPU sums a
/// column's entries in TPC strided runs and then a tree, one partial per segment: the same
/// sums wherever they are exact (integer data), not bit for bit on float data.
pub fn gather(v: TrainView<'_>, coef: &[f32]) -> Vec<f32> {
    accumulate(v, coef, v.n.max(1))
}

/// What a resident data set keeps between epochs (the GPU's `w`, `aux` and `ctl` buffers).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochState {
    /// The weights rows are scored with (for the multiplicative update: the Winnow weights).
    pub w: Vec<f32>,
    /// The pocket's candidate: what the epoch started with (the weights, the log-weights, or
    /// for [`Keep::AveragePocket`] the running sum), and the epochs it includes.
    pub prev: Vec<f32>,
    /// Epochs `prev` includes.
    pub prev_updates: u64,
    /// The pocket and the epochs it includes.
    pub pocket: Vec<f32>,
    /// Epochs the pocket includes.
    pub pocket_updates: u64,
    /// Sum of the weights after each epoch.
    pub average_sum: Vec<f32>,
    /// Epochs in the sum.
    pub updates: u64,
    /// Log-weights (multiplicative update).
    pub logw: Vec<f32>,
    /// The stop rules' memory (the GPU's control word).
    pub stop: StopState,
}

impl EpochState {
    /// Fresh state for `len` weights.
    pub fn new(len: usize) -> Self {
        EpochState {
            w: vec![0.0; len],
            prev: vec![0.0; len],
            prev_updates: 0,
            pocket: vec![0.0; len],
            pocket_updates: 0,
            average_sum: vec![0.0; len],
            updates: 0,
            logw: vec![0.0; len],
            stop: StopState::default(),
        }
    }

    /// The weights held-out rows are scored with: the running sum for
    /// [`Keep::AveragePocket`] once it holds an epoch, else the scored weights.
    pub fn held_out_weights(&self, rule: &BatchRule) -> &[f32] {
        if rule.keep == Keep::AveragePocket && self.updates > 0 {
            &self.average_sum
        } else {
            &self.w
        }
    }
}

/// Twin of `apply`: sums the partials in chunk order, w += eta * sum (multiplicative: the
/// log-weights), keeps the pocket's candidate (what the epoch started with) and the running
/// sum after the update. Returns the squared steps (the GPU's `sq`).
pub fn apply(partials: &[f32], rule: &BatchRule, st: &mut EpochState) -> Vec<f32> {
    let len = st.w.len();
    let mut sq = vec![0f32; len];
    let from_sum = rule.keep == Keep::AveragePocket && st.updates > 0;
    for j in 0..len {
        let mut s = 0f32;
        for part in partials.chunks_exact(len) {
            s += part[j];
        }
        if rule.keep.pocket() {
            st.prev[j] = if from_sum {
                st.average_sum[j]
            } else if rule.update == Update::Multiplicative {
                st.logw[j]
            } else {
                st.w[j]
            };
        }
        let step = rule.eta * s;
        match rule.update {
            Update::Multiplicative => st.logw[j] += step,
            Update::Additive => st.w[j] += step,
        }
        sq[j] = step * step;
        if rule.keep.average() {
            st.average_sum[j] += st.w[j];
        }
    }
    st.prev_updates = if from_sum { st.updates } else { 0 };
    if rule.keep.average() {
        st.updates += 1;
    }
    sq
}

/// Twin of `fold` (one process of a data-parallel run): the chunks of `partials` (each
/// `len` long) added in order into the first, the others zeroed.
pub fn fold(partials: &mut [f32], len: usize) {
    if len == 0 {
        return;
    }
    let (first, rest) = partials.split_at_mut(len.min(partials.len()));
    for part in rest.chunks_exact_mut(len) {
        for (t, v) in first.iter_mut().zip(part.iter_mut()) {
            *t += *v;
            *v = 0.0;
        }
    }
}

/// Twin of `finalize`: the epoch's statistics from what `margins` counted and the squared
/// steps; the Winnow weights from the log-weights; the stop rules ([`StopState::record`]);
/// and the pocket when the epoch is the best so far.
pub fn finalize(
    m: Margins,
    sq: &[f32],
    rule: &BatchRule,
    st: &mut EpochState,
) -> (EpochStats, Option<StopReason>) {
    let q: f32 = sq.iter().sum();
    if rule.update == Update::Multiplicative {
        winnow_weights(&st.logw, &mut st.w);
    }
    let e = EpochStats {
        mistakes: m.mistakes,
        criterion: m.criterion,
        update_norm: q.sqrt() as f64,
        val_mistakes: m.val_mistakes,
        weighted: m.weighted,
        wrong_rows: m.wrong_rows,
    };
    let (better, stop) = st.stop.record(rule, &e);
    if rule.keep.pocket() && better {
        st.pocket.copy_from_slice(&st.prev);
        st.pocket_updates = st.prev_updates;
    }
    (e, stop)
}

/// Twin of `scores`: w_k . [x_i, bias] for every row and head, row-major.
pub fn scores(data: DataView<'_>, w: &[f32]) -> Vec<f32> {
    let d = data.d;
    let heads = w.len() / (d + 1);
    let mut out = Vec::with_capacity(data.n * heads);
    let mut buf = Vec::new();
    for i in 0..data.n {
        let row = data.x.row(i, d, &mut buf);
        for h in 0..heads {
            out.push(row_score(
                &w[h * (d + 1)..(h + 1) * (d + 1)],
                row,
                data.bias,
            ));
        }
    }
    out
}

/// Twin of `kscores` (kernel.wgsl): f_i = sum over s of coef[s] * (K(sv[idx[s]], x_i) +
/// bias^2), with the squared norms `sv_sq` of the support rows (indexed by row).
pub fn kscores(
    eval: DataView<'_>,
    sv: DataView<'_>,
    sv_sq: &[f32],
    idx: &[u32],
    coef: &[f32],
    kernel: &Kernel,
) -> Vec<f32> {
    let d = eval.d;
    let b2 = eval.bias * eval.bias;
    let (ex, sx) = (eval.x.to_dense(eval.n, d), sv.x.to_dense(sv.n, d));
    (0..eval.n)
        .map(|i| {
            let x = &ex[i * d..(i + 1) * d];
            let xx = dot(x, x);
            let mut f = 0f32;
            for (&j, &a) in idx.iter().zip(coef) {
                let j = j as usize;
                let z = &sx[j * d..(j + 1) * d];
                let xz = dot(x, z);
                f += a * (kernel.eval(xz, xx, sv_sq[j]) + b2);
            }
            f
        })
        .collect()
}

/// The reference twins as a backend: slow (one thread, no SIMD), plain, and the standard the
/// other backends are tested against.
#[derive(Debug, Default, Clone)]
pub struct ReferenceBackend;

impl Backend for ReferenceBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        "CPU (reference, 1 thread)".into()
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        let len = data.heads.max(1) * (data.d + 1);
        Ok(Box::new(ReferenceBound {
            v: data,
            st: EpochState::new(len),
            coef: vec![0.0; data.n * data.heads.max(1)],
            kept: (false, false),
        }))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        Ok(scores(data, w))
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        Ok(Box::new(ReferenceDual(DualRows::new(eval, sv)?)))
    }
}

/// Training data bound to the reference backend.
struct ReferenceBound<'a> {
    v: TrainView<'a>,
    st: EpochState,
    coef: Vec<f32>,
    /// Whether a pocket / an average sum was kept by any rule used.
    kept: (bool, bool),
}

impl Bound for ReferenceBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs> {
        let st = &mut self.st;
        self.kept.0 |= rule.keep.pocket();
        self.kept.1 |= rule.keep.average();
        match rule.update {
            Update::Multiplicative => {
                st.logw.copy_from_slice(w);
                winnow_weights(w, &mut st.w);
            }
            Update::Additive => st.w.copy_from_slice(w),
        }
        let rows = chunk_rows(self.v.n, self.v.d);
        let mut out = Epochs::default();
        for _ in 0..max_epochs {
            let wv = st.held_out_weights(rule).to_vec();
            let (m, partials) = if self.v.x.is_sparse() {
                let m = margins(self.v, &st.w, &wv, rule, &mut self.coef);
                (m, gather(self.v, &self.coef))
            } else {
                epoch(self.v, &st.w, &wv, rule, rows, &mut self.coef)
            };
            let sq = apply(&partials, rule, st);
            let (e, stop) = finalize(m, &sq, rule, st);
            out.stats.push(e);
            if stop.is_some() {
                out.stop = stop;
                break;
            }
        }
        w.copy_from_slice(match rule.update {
            Update::Multiplicative => &st.logw,
            Update::Additive => &st.w,
        });
        Ok(out)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        Ok(scores(self.v.data(), w))
    }

    fn extras(&mut self) -> Result<Extras> {
        let st = &self.st;
        Ok(Extras {
            pocket: (self.kept.0 && st.stop.epochs > 0).then(|| Pocket {
                w: st.pocket.clone(),
                figure: st.stop.best,
                updates: st.pocket_updates,
            }),
            average: self.kept.1.then(|| (st.average_sum.clone(), st.updates)),
            stop: st.stop,
        })
    }
}

/// Rows bound to the reference backend for kernel scoring.
struct ReferenceDual<'a>(DualRows<'a>);

impl DualBound for ReferenceDual<'_> {
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>> {
        let r = &self.0;
        Ok(kscores(r.eval, r.sv, &r.sq, idx, coef, kernel))
    }
}
