//! The seam between algorithms and hardware. Algorithms call [`Backend`] (bind data, score)
//! and [`Bound`] (run batch epochs on bound data); the CPU and GPU implement these primitive
//! steps and know nothing about which algorithm calls them.
//!
//! The batch epoch is one fused pass over X with K weight vectors ("heads", K = 1 for a
//! binary perceptron): for every row the K scores s_k = w_k^T x, a per-row rule
//! ([`HeadRule`]) that decides whether the row is a mistake and how much of x each head
//! gets (binary: y on y s <= tau), the mistake count, the criterion J, and the sums over the
//! mistakes; then W += eta * sums. Optionally the backend keeps the pocket (the weights with
//! the fewest mistakes seen) and the running sum of the per-epoch weights (for averaging).
//! [`BatchRule::stop`] is the stop decision both backends apply after each epoch (the GPU twin
//! is in shaders/batch.wgsl).

pub mod cpu;
pub mod gpu;
pub mod reference;
pub mod simd;
pub mod storage;

pub(crate) use simd::simd_dispatch;
pub use simd::{axpy, decision, dot, prefetch_ahead, simd_enabled, sum_simd, Elem, Lanes};
pub use storage::{
    CsrBuf, CsrView, FeatureBuf, Features, MappedF32, Matrix, MatrixBuf, Row, Storage, WideMatrix,
};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Param, Result};

/// Most weight vectors ("heads") one batch epoch or scoring call handles: the size of the
/// per-row score array in the GPU kernels (`MAX_HEADS` in shaders/batch.wgsl, checked equal by
/// a test). Models with more rows are scored in blocks of this many.
pub const MAX_HEADS: usize = 64;

/// Host view of a training set. The bias column is implicit: row i is treated as
/// `[x_i, bias]`, and each of the `heads` weight vectors has `d + 1` entries, the last one for
/// the bias; weights are stored head after head (`heads * (d + 1)` values).
#[derive(Debug, Clone, Copy)]
pub struct TrainView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Labels, `n` of them: -1 or +1 for [`HeadRule::Binary`], else the class index (exact in
    /// f32 below 2^24).
    pub y: &'a [f32],
    /// Rows.
    pub n: usize,
    /// Features (without the bias column).
    pub d: usize,
    /// Value of the implicit last column: 1 with a bias, 0 without.
    pub bias: f32,
    /// Number of weight vectors K (1 for binary; the number of classes otherwise).
    pub heads: usize,
    /// Per-row weights, `n` of them (a factor on the row's update and criterion); `None`:
    /// every row weighs 1.
    pub sw: Option<&'a [f32]>,
    /// Held-out rows, scored every epoch with the prediction rule and never trained on.
    pub val: Option<ValView<'a>>,
}

/// Held-out rows of a training set (validation): features with the training set's `d` and
/// labels in the same internal form.
#[derive(Debug, Clone, Copy)]
pub struct ValView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Labels (±1 or class index, as [`TrainView::y`]).
    pub y: &'a [f32],
    /// Rows.
    pub n: usize,
}

/// Host view of unlabelled features, for scoring.
#[derive(Debug, Clone, Copy)]
pub struct DataView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Rows.
    pub n: usize,
    /// Features (without the bias column).
    pub d: usize,
    /// Value of the implicit last column.
    pub bias: f32,
}

impl<'a> TrainView<'a> {
    /// A view of `n` rows of `d` features with labels `y`, every row weighing 1 and no
    /// held-out rows.
    pub fn new(
        x: impl Into<Matrix<'a>>,
        y: &'a [f32],
        n: usize,
        d: usize,
        bias: f32,
        heads: usize,
    ) -> Self {
        TrainView {
            x: x.into(),
            y,
            n,
            d,
            bias,
            heads,
            sw: None,
            val: None,
        }
    }

    /// The features without labels.
    pub fn data(&self) -> DataView<'a> {
        DataView {
            x: self.x,
            n: self.n,
            d: self.d,
            bias: self.bias,
        }
    }

    /// The held-out rows' features, when there are any.
    pub fn val_data(&self) -> Option<DataView<'a>> {
        self.val.map(|v| DataView {
            x: v.x,
            n: v.n,
            d: self.d,
            bias: self.bias,
        })
    }

    /// Weight of row `i` (1 without per-row weights).
    #[inline(always)]
    pub fn weight(&self, i: usize) -> f32 {
        self.sw.map_or(1.0, |w| w[i])
    }
}

/// How a row's K scores decide a mistake and the update of each head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadRule {
    /// K = 1, y in {-1, +1}: a mistake when y s <= tau; the head gets y x.
    #[default]
    Binary,
    /// K independent binary heads, head k taking class k as +1 and the rest as -1; each
    /// (row, head) error counts as a mistake.
    OneVsRest,
    /// Multiclass (the lecture notes' Algorithm 2): a mistake when s_true - max_{k != true} s_k
    /// <= tau; the true class gets +x and every other class -x.
    MulticlassAll,
    /// Multiclass: as `MulticlassAll`, but only the highest-scoring wrong class gets -x.
    MulticlassArgmax,
}

impl HeadRule {
    /// GPU code of the rule (`RULE_*` in shaders/batch.wgsl, checked equal by a test).
    pub fn code(self) -> u32 {
        match self {
            HeadRule::Binary => 0,
            HeadRule::OneVsRest => 1,
            HeadRule::MulticlassAll => 2,
            HeadRule::MulticlassArgmax => 3,
        }
    }
}

/// How an epoch's sum over the mistakes changes the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Update {
    /// w += eta * sum (the perceptron).
    #[default]
    Additive,
    /// Winnow: the weights passed in and out are log-weights; rows are scored with
    /// [`winnow_weights`] of them, and the update adds eta * sum to the log-weights.
    Multiplicative,
}

/// What a backend keeps besides the current weights, for [`Bound::extras`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Nothing.
    #[default]
    Nothing,
    /// The pocket: the weights the best epoch started with, best by the monitored figure
    /// (training mistakes: Gallant's pocket; held-out mistakes when there are held-out rows).
    Pocket,
    /// The running sum of the weights after each epoch (for averaging).
    Average,
    /// The running sum, with the held-out rows scored by it (the average up to a positive
    /// factor) and the pocket keeping the sum of the best epoch (for averaging with
    /// validation).
    AveragePocket,
}

impl Keep {
    /// True when the pocket is kept.
    pub fn pocket(self) -> bool {
        matches!(self, Keep::Pocket | Keep::AveragePocket)
    }
    /// True when the running sum is kept.
    pub fn average(self) -> bool {
        matches!(self, Keep::Average | Keep::AveragePocket)
    }
}

/// The batch update rule and its stop tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchRule {
    /// Learning rate eta.
    pub eta: f32,
    /// Stop when ||eta * sum|| < tol; 0 disables the test.
    pub tol: f32,
    /// Margin threshold tau >= 0: a mistake is a margin <= tau (0: the classic rule).
    pub tau: f32,
    /// How scores decide mistakes and updates.
    pub rule: HeadRule,
    /// Additive or multiplicative update.
    pub update: Update,
    /// What to keep besides the weights.
    pub keep: Keep,
    /// When to stop for lack of improvement.
    pub patience: Patience,
}

/// The patience rule: stop when `epochs` epochs in a row did not improve the monitored figure
/// (training mistakes, or held-out mistakes when there are held-out rows) to below
/// `keep_fraction` times the figure at the last improvement, unless the fewest seen is at most
/// a positive `floor` (then the data is taken as (nearly) separated and the classic stops
/// decide).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Patience {
    /// Epochs without improvement before stopping; 0 turns the rule off.
    pub epochs: u32,
    /// 1 - the relative improvement required (1: any decrease improves).
    pub keep_fraction: f32,
    /// When positive, the rule stops nothing while the fewest monitored mistakes are at most
    /// this.
    pub floor: f32,
}

impl Patience {
    /// No patience rule.
    pub const OFF: Patience = Patience {
        epochs: 0,
        keep_fraction: 1.0,
        floor: 0.0,
    };
}

impl Default for Patience {
    fn default() -> Self {
        Patience::OFF
    }
}

impl BatchRule {
    /// The classic binary rule with learning rate `eta` and tolerance `tol`.
    pub fn new(eta: f32, tol: f32) -> Self {
        BatchRule {
            eta,
            tol,
            tau: 0.0,
            rule: HeadRule::Binary,
            update: Update::Additive,
            keep: Keep::Nothing,
            patience: Patience::OFF,
        }
    }
}

/// Winnow's weights from log-weights: exp(lw - max lw), in (0, 1], so they never overflow and
/// give the same signs of w.x as exp(lw). The one home of this rule on the host; its WGSL twin
/// is the multiplicative branch of `finalize` in shaders/batch.wgsl.
pub fn winnow_weights<T: LogWeight>(logw: &[T], out: &mut [f32]) {
    let top = logw.iter().copied().fold(T::NEG_INFINITY, T::max);
    for (o, &l) in out.iter_mut().zip(logw) {
        *o = (l - top).exp_f32();
    }
}

/// A float type log-weights are kept in (f32 for the batch form, f64 for online Winnow).
pub trait LogWeight: Copy + std::ops::Sub<Output = Self> {
    /// Negative infinity.
    const NEG_INFINITY: Self;
    /// The larger of two values.
    fn max(self, other: Self) -> Self;
    /// exp(self), rounded to f32.
    fn exp_f32(self) -> f32;
}

impl LogWeight for f32 {
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    fn max(self, other: Self) -> Self {
        f32::max(self, other)
    }
    fn exp_f32(self) -> f32 {
        self.exp()
    }
}

impl LogWeight for f64 {
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    fn max(self, other: Self) -> Self {
        f64::max(self, other)
    }
    fn exp_f32(self) -> f32 {
        self.exp() as f32
    }
}

/// Squared norms ||x_i||^2 of every row (without the bias column): the kernels' K(x, x) and
/// K(z, z) inputs, computed in one place for both backends.
pub fn sq_norms(data: DataView<'_>) -> Vec<f32> {
    if data.d == 0 {
        return vec![0.0; data.n];
    }
    let mut buf = Vec::new();
    (0..data.n)
        .map(|i| data.x.row(i, data.d, &mut buf).sq_norm())
        .collect()
}

/// Applies `rule` to one row's scores `s` (one per head) with label `y` (±1 for binary, the
/// class index otherwise): calls `add(head, coefficient)` for every head the row updates and
/// returns (mistakes, criterion) for the row. The CPU's twin of the rule in `margins`
/// (shaders/batch.wgsl); the online and batch CPU paths both use it.
#[inline(always)]
pub fn row_rule(
    rule: HeadRule,
    tau: f32,
    s: &[f32],
    y: f32,
    mut add: impl FnMut(usize, f32),
) -> (u64, f64) {
    let t = y as usize;
    match rule {
        HeadRule::Binary | HeadRule::OneVsRest => {
            let (mut mistakes, mut crit) = (0u64, 0f64);
            for (h, &sh) in s.iter().enumerate() {
                let yh = match rule {
                    HeadRule::Binary => y,
                    _ if h == t => 1.0,
                    _ => -1.0,
                };
                let m = yh * sh;
                if m <= tau {
                    mistakes += 1;
                    crit -= m as f64;
                    add(h, yh);
                }
            }
            (mistakes, crit)
        }
        HeadRule::MulticlassAll | HeadRule::MulticlassArgmax => {
            let mut best = usize::MAX;
            for (h, &sh) in s.iter().enumerate() {
                if h != t && (best == usize::MAX || sh > s[best]) {
                    best = h;
                }
            }
            let m = s[t] - s[best];
            if m > tau {
                return (0, 0.0);
            }
            for h in 0..s.len() {
                if h == t {
                    add(h, 1.0);
                } else if rule == HeadRule::MulticlassAll || h == best {
                    add(h, -1.0);
                }
            }
            (1, -(m as f64))
        }
    }
}

/// What a backend kept besides the current weights, when asked by [`BatchRule`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extras {
    /// The pocket, when kept and an epoch has run.
    pub pocket: Option<Pocket>,
    /// Sum of the weights after each epoch run so far, and the number of those epochs.
    pub average: Option<(Vec<f32>, u64)>,
    /// The stop rules' memory (the best epoch among them).
    pub stop: StopState,
}

/// The weights the best epoch started with (for [`Keep::AveragePocket`]: the running sum
/// then, over `updates` epochs).
#[derive(Debug, Clone, PartialEq)]
pub struct Pocket {
    /// The weights (for a multiplicative update: the log-weights).
    pub w: Vec<f32>,
    /// The monitored figure of the best epoch.
    pub figure: f32,
    /// Epochs whose updates the weights include.
    pub updates: u64,
}

/// Why training stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// An epoch made no mistake.
    Converged,
    /// The update norm fell under the tolerance.
    Tolerance,
    /// The epoch limit was reached.
    MaxEpochs,
    /// The monitored figure stopped improving (the patience rule).
    Patience,
    /// The voted perceptron kept as many vectors as it may.
    MaxVectors,
}

impl StopReason {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::Tolerance => "tolerance",
            StopReason::MaxEpochs => "max_epochs",
            StopReason::Patience => "patience",
            StopReason::MaxVectors => "max_vectors",
        }
    }
}

/// What one epoch did, measured with the weights at the start of the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EpochStats {
    /// Points with y w^T x <= 0 (J1).
    pub mistakes: u64,
    /// Perceptron criterion J(w) = sum over mistakes of -y w^T x.
    pub criterion: f64,
    /// ||w_after - w_before||: for batch, ||eta * sum||.
    pub update_norm: f64,
    /// Held-out rows predicted wrong (batch: by the weights the epoch started with; online:
    /// by the model after the epoch), when there are held-out rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_mistakes: Option<u64>,
    /// The sum of the mistakes' row weights, when rows have weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<f64>,
}

impl EpochStats {
    /// The figure the patience rule and the pocket watch, in f32 as the GPU keeps it:
    /// held-out mistakes when there are held-out rows, else the weighted training mistakes
    /// when rows have weights, else the training mistakes.
    pub fn monitored(&self) -> f32 {
        match (self.val_mistakes, self.weighted) {
            (Some(v), _) => v as f32,
            (None, Some(w)) => w as f32,
            (None, None) => self.mistakes as f32,
        }
    }
}

/// What the stop rules remember between epochs: the one home of the patience rule and the
/// best epoch on the host (the GPU keeps the same fields in its control word and applies the
/// same f32 arithmetic in `finalize`, shaders/batch.wgsl).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopState {
    /// Fewest monitored mistakes seen (infinity before the first epoch).
    pub best: f32,
    /// The epoch (1-based) that saw them; 0 before the first epoch.
    pub best_epoch: u32,
    /// The monitored figure at the last improvement by the patience rule's margin.
    pub reference: f32,
    /// Epochs since that improvement.
    pub wait: u32,
    /// Epochs recorded.
    pub epochs: u32,
}

impl Default for StopState {
    fn default() -> Self {
        StopState {
            best: f32::INFINITY,
            best_epoch: 0,
            reference: f32::INFINITY,
            wait: 0,
            epochs: 0,
        }
    }
}

impl StopState {
    /// Records epoch `e`: returns whether it is a new best (fewest monitored mistakes, the
    /// pocket's test) and whether training stops after it: [`BatchRule::stop`], else the
    /// patience rule.
    pub fn record(&mut self, rule: &BatchRule, e: &EpochStats) -> (bool, Option<StopReason>) {
        self.epochs += 1;
        let fig = e.monitored();
        let better = fig < self.best;
        if better {
            self.best = fig;
            self.best_epoch = self.epochs;
        }
        let p = rule.patience;
        if fig < self.reference * p.keep_fraction {
            self.reference = fig;
            self.wait = 0;
        } else {
            self.wait = self.wait.saturating_add(1);
        }
        let stop = rule.stop(e).or_else(|| {
            (p.epochs > 0 && self.wait >= p.epochs && (self.best > p.floor || p.floor <= 0.0))
                .then_some(StopReason::Patience)
        });
        (better, stop)
    }
}

impl BatchRule {
    /// The stop decision after an epoch: no mistake (no update is applied), or an update
    /// (already applied) whose norm is under the tolerance.
    pub fn stop(&self, e: &EpochStats) -> Option<StopReason> {
        if e.mistakes == 0 {
            Some(StopReason::Converged)
        } else if (e.update_norm as f32) < self.tol {
            Some(StopReason::Tolerance)
        } else {
            None
        }
    }
}

/// A kernel for the dual (kernel) perceptron. The bias column adds `bias^2` to every value,
/// as the augmented input [x, bias] does for the linear kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "lowercase")]
pub enum Kernel {
    /// x . z
    Linear,
    /// (gamma x . z + coef0)^degree
    Poly {
        /// Degree (>= 1).
        degree: u32,
        /// Scale of the dot product.
        gamma: f32,
        /// Additive constant.
        coef0: f32,
    },
    /// exp(-gamma ||x - z||^2)
    Rbf {
        /// Width (> 0).
        gamma: f32,
    },
}

impl Kernel {
    /// Checks the parameters: degree 1 to 16, gamma positive and finite, coef0 finite.
    pub fn check(&self) -> Result<()> {
        match *self {
            Kernel::Linear => Ok(()),
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => {
                if degree == 0 || degree > 16 {
                    Err(Error::param(
                        Param::Degree,
                        degree,
                        "should be between 1 and 16",
                    ))
                } else if !(gamma.is_finite() && gamma > 0.0) {
                    Err(Error::param(
                        Param::Gamma,
                        gamma,
                        "should be positive and finite",
                    ))
                } else if !coef0.is_finite() {
                    Err(Error::param(Param::Coef0, coef0, "should be finite"))
                } else {
                    Ok(())
                }
            }
            Kernel::Rbf { gamma } if !(gamma.is_finite() && gamma > 0.0) => Err(Error::param(
                Param::Gamma,
                gamma,
                "should be positive and finite",
            )),
            Kernel::Rbf { .. } => Ok(()),
        }
    }

    /// GPU code (`KERNEL_*` in shaders/kernel.wgsl, checked equal by a test).
    pub fn code(&self) -> u32 {
        match self {
            Kernel::Linear => 0,
            Kernel::Poly { .. } => 1,
            Kernel::Rbf { .. } => 2,
        }
    }

    /// The kernel from the dot product `xz` and the squared norms `xx`, `zz`.
    #[inline(always)]
    pub fn eval(&self, xz: f32, xx: f32, zz: f32) -> f32 {
        match *self {
            Kernel::Linear => xz,
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => (gamma * xz + coef0).powi(degree as i32),
            Kernel::Rbf { gamma } => (-gamma * (xx + zz - 2.0 * xz).max(0.0)).exp(),
        }
    }
}

/// Which kind of hardware a backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The CPU (multithreaded reference).
    Cpu,
    /// A wgpu adapter.
    Gpu,
}

impl BackendKind {
    /// "cpu" or "gpu".
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

/// Sums across the processes of a data-parallel run, each holding a share of the rows: what
/// makes their batch epochs one epoch over all rows. Implemented over MPI by
/// `rosenblatt::distributed` (feature `mpi`); the backends only call it.
pub trait Reduce: std::fmt::Debug {
    /// This process's index (0-based).
    fn rank(&self) -> usize;
    /// Processes.
    fn size(&self) -> usize;
    /// This process's index among the processes on its machine (which GPU it takes).
    fn local_rank(&self) -> usize {
        self.rank()
    }
    /// Replaces `v` with its sum over the processes, added in process order (so the result
    /// does not depend on how the processes are scheduled).
    fn sum_f32(&self, v: &mut [f32]);
    /// As [`Reduce::sum_f32`], in f64.
    fn sum_f64(&self, v: &mut [f64]);
    /// The largest `v` over the processes.
    fn max_f64(&self, v: f64) -> f64;
    /// Every process's `local`, concatenated in process order.
    fn gather_f32(&self, local: &[f32]) -> Vec<f32>;
    /// As [`Reduce::gather_f32`], for bytes.
    fn gather_u8(&self, local: &[u8]) -> Vec<u8>;
    /// Ends every process with exit code `code` (after an error in one, which the others may
    /// be waiting for); returns only where there is nothing to end.
    fn abort(&self, _code: i32) {}
}

/// The stop every process of a data-parallel run takes after an epoch: each decided from the
/// same sums, but the tolerance rule compares an update norm that backends of different kinds
/// compute in different precision, so a stop anywhere is a stop everywhere (one more sum per
/// epoch, which every backend's bound makes at the same point).
pub(crate) fn agreed_stop(r: &dyn Reduce, stop: Option<StopReason>) -> Option<StopReason> {
    const ORDER: [StopReason; 3] = [
        StopReason::Converged,
        StopReason::Tolerance,
        StopReason::Patience,
    ];
    let code = stop
        .and_then(|s| ORDER.iter().position(|&o| o == s))
        .map_or(0, |k| k + 1);
    match r.max_f64(code as f64) as usize {
        0 => None,
        k => ORDER.get(k - 1).copied(),
    }
}

impl<T: Reduce + ?Sized> Reduce for std::rc::Rc<T> {
    fn rank(&self) -> usize {
        (**self).rank()
    }
    fn size(&self) -> usize {
        (**self).size()
    }
    fn local_rank(&self) -> usize {
        (**self).local_rank()
    }
    fn sum_f32(&self, v: &mut [f32]) {
        (**self).sum_f32(v)
    }
    fn sum_f64(&self, v: &mut [f64]) {
        (**self).sum_f64(v)
    }
    fn max_f64(&self, v: f64) -> f64 {
        (**self).max_f64(v)
    }
    fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
        (**self).gather_f32(local)
    }
    fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
        (**self).gather_u8(local)
    }
    fn abort(&self, code: i32) {
        (**self).abort(code)
    }
}

/// A backend for one process of a data-parallel run: training binds through
/// [`Backend::bind_reduced`] with `reduce`; scoring is the backend's own.
pub struct Distributed<R: Reduce> {
    /// This process's backend (its CPU or its GPU).
    pub backend: Box<dyn Backend>,
    /// The sums across processes.
    pub reduce: R,
}

impl<R: Reduce> Backend for Distributed<R> {
    fn kind(&self) -> BackendKind {
        self.backend.kind()
    }

    fn device(&self) -> String {
        format!(
            "{}, process {} of {}",
            self.backend.device(),
            self.reduce.rank() + 1,
            self.reduce.size()
        )
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        self.backend.bind_reduced(data, &self.reduce)
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        self.backend.scores(data, w)
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        self.backend.bind_dual(eval, sv)
    }
}

/// Hardware that runs the primitive steps.
pub trait Backend {
    /// CPU or GPU.
    fn kind(&self) -> BackendKind;
    /// Human-readable device name (CPU model and thread count, or adapter name and API).
    fn device(&self) -> String;
    /// Makes a training set resident (uploads it, for a GPU) for repeated epochs.
    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>>;
    /// As [`Backend::bind`], for one process's share of the rows of a data-parallel run: each
    /// epoch's sums and counts over these rows go through `reduce` (summed over every
    /// process) before the update, so every process applies the same update and takes the
    /// same stop decision. Processes may run different backends: each epoch makes the same
    /// calls, in this order: the update sums (`sum_f32`, `heads * (d + 1)`), the counts
    /// (`sum_f64` of mistakes, criterion, weighted mistakes), with held-out rows their
    /// mistakes (`sum_f64` of one), then the stop ([`agreed_stop`]).
    fn bind_reduced<'a>(
        &'a self,
        _data: TrainView<'a>,
        _reduce: &'a dyn Reduce,
    ) -> Result<Box<dyn Bound + 'a>> {
        Err(crate::Error::Mpi(format!(
            "the {} backend does not train data-parallel",
            self.device()
        )))
    }
    /// Decision values w_k^T [x_i, bias] for every row and each of the `w.len() / (d + 1)`
    /// weight vectors, row-major (`n * heads`).
    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>>;
    /// Makes rows resident for repeated kernel scoring: `eval` are the rows scored, `sv` the
    /// rows support vectors are drawn from (`None`: the same rows, as in training).
    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>>;
    /// Dual decision values f_i = sum over s of coef[s] * (K(sv[idx[s]], x_i) + bias^2) for
    /// every row of `eval`, computed on the fly (no Gram matrix), `idx` in ascending order.
    /// `eval.bias` is the bias column's value.
    fn kernel_scores(
        &self,
        eval: DataView<'_>,
        sv: DataView<'_>,
        idx: &[u32],
        coef: &[f32],
        kernel: &Kernel,
    ) -> Result<Vec<f32>> {
        self.bind_dual(eval, Some(sv))?.kscores(idx, coef, kernel)
    }
}

/// The rows a host backend scores kernels on: the eval rows, the support rows (the eval rows
/// when none are given) and the squared norms of the support rows.
pub struct DualRows<'a> {
    /// Rows scored.
    pub eval: DataView<'a>,
    /// Rows support vectors are drawn from.
    pub sv: DataView<'a>,
    /// ||sv_j||^2 for every support row j.
    pub sq: Vec<f32>,
    /// The eval rows as f32 (widened once when stored compactly).
    pub ex: WideMatrix<'a>,
    /// The support rows as f32.
    pub sx: WideMatrix<'a>,
}

impl<'a> DualRows<'a> {
    /// Binds `eval` and `sv` (`None`: the eval rows), widened to f32 (within the memory
    /// budget).
    pub fn new(eval: DataView<'a>, sv: Option<DataView<'a>>) -> Result<Self> {
        check_widened(eval)?;
        if let Some(s) = sv {
            check_widened(s)?;
        }
        let same = sv.is_none();
        let sv = sv.unwrap_or(eval);
        let ex = eval.x.widened();
        let sx = if same { ex.clone() } else { sv.x.widened() };
        Ok(DualRows {
            eval,
            sv,
            sq: sq_norms(sv),
            ex,
            sx,
        })
    }
}

/// Checks the memory for the rows of `data` widened into an f32 copy, as kernel scoring and
/// storage conversions make one: nothing to check for f32 dense rows, which are borrowed
/// (and CSR rows are checked where they are made dense).
pub(crate) fn check_widened(data: DataView<'_>) -> Result<()> {
    if data.x.is_sparse() || data.x.storage() == Storage::F32 {
        return Ok(());
    }
    crate::limits::check(
        || {
            format!(
                "{} rows x {} features held as {}, widened to f32",
                data.n,
                data.d,
                data.x.storage().name()
            )
        },
        (data.n as u128) * (data.d as u128),
        4,
    )
}

/// Rows made resident for kernel scoring (see [`Backend::bind_dual`]).
pub trait DualBound {
    /// f_i for every bound eval row, with the support vectors `idx` (ascending rows of the
    /// bound support rows) and their coefficients. The twin of `kscores` in kernel.wgsl.
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>>;
}

/// A training set made resident on a backend.
pub trait Bound {
    /// Runs up to `max_epochs` batch epochs starting from `w` (`heads * (d + 1)` entries),
    /// updating it in place, and stops after the first epoch for which [`StopState::record`]
    /// says so. Returns one [`EpochStats`] per epoch run and the stop, if any. On error `w` is
    /// left as it was; a backend that fails after some of the call's epochs completed may
    /// return those instead, and the failure then answers the next call. The pocket, the
    /// average sum and the stop rules' memory persist across calls on the same bound data.
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs>;
    /// Decision values w_k^T [x_i, bias] for the bound rows, row-major `n * heads`.
    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>>;
    /// The pocket and the average sum kept so far (as asked by the rules used).
    fn extras(&mut self) -> Result<Extras>;
    /// How many epochs a call to `batch_epochs` should ask for: 1 where a call costs nothing
    /// extra (the CPU), more where each call has a fixed cost (a GPU submit and read-back).
    fn epochs_per_call(&self) -> usize {
        1
    }
    /// Runs up to `epochs` batch epochs from `w` (updated) with a timer around every kernel
    /// (where the device has timers), then one epoch with instrumented kernels that count
    /// the words they load and store, and returns both; `None` where the backend has no
    /// kernels to split (the CPU runs one fused pass).
    fn profile(
        &mut self,
        _w: &mut [f32],
        _rule: &BatchRule,
        _epochs: usize,
    ) -> Result<Option<KernelProfile>> {
        Ok(None)
    }
}

/// What the kernels of a batch epoch cost ([`Bound::profile`]): their times, and the words
/// they load and store counted by instrumented kernels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelProfile {
    /// Epochs timed (0 where the device has no timestamp queries: `kernels` is empty).
    pub epochs: usize,
    /// (entry point, milliseconds per epoch, summed over the X segments), in dispatch order.
    pub kernels: Vec<(String, f64)>,
    /// The words each entry point loaded and stored in one epoch, counted by instrumented
    /// kernels (summed over the X segments), in dispatch order.
    pub traffic: Vec<KernelTraffic>,
    /// 32-bit words of one read of X as the device stores it: the ideal (dense rows are
    /// padded to a multiple of 4 values; none when d is one).
    pub x_words: u64,
    /// How the epoch runs: the register pass (one read of X) or the two-kernel path, with its
    /// layout.
    pub plan: String,
}

/// What one kind of word is in [`KernelTraffic`] (the WGSL `CAT_*` codes, in order).
pub const TRAFFIC_CATEGORIES: [&str; 7] = [
    "X", "index", "rows", "coef", "partials", "weights", "control",
];

/// The words one entry point loaded and stored from global memory in one epoch, by
/// category ([`TRAFFIC_CATEGORIES`]: X values, CSR/CSC indices, labels and row weights,
/// per-row coefficients or scores, partial sums, weights (with the pocket, average and
/// squared steps), control and statistics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelTraffic {
    /// The entry point.
    pub kernel: String,
    /// Words loaded, by category.
    pub loads: [u64; 7],
    /// Words stored, by category.
    pub stores: [u64; 7],
}

impl KernelProfile {
    /// Words loaded (`stores`: false) or stored of category `cat` over all entry points.
    pub fn words(&self, cat: usize, stores: bool) -> u64 {
        self.traffic
            .iter()
            .map(|t| if stores { t.stores[cat] } else { t.loads[cat] })
            .sum()
    }

    /// Every word loaded and stored in the epoch.
    pub fn total_words(&self) -> u64 {
        self.traffic
            .iter()
            .map(|t| t.loads.iter().sum::<u64>() + t.stores.iter().sum::<u64>())
            .sum()
    }
}

/// What a call to [`Bound::batch_epochs`] ran.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Epochs {
    /// One entry per epoch run.
    pub stats: Vec<EpochStats>,
    /// Why the last epoch stopped training, if it did.
    pub stop: Option<StopReason>,
}

/// The prediction rule on one row's scores, for held-out rows: true when the row is predicted
/// wrong. Binary: sgn(s) with sgn(0) = +1 against y = ±1; otherwise the first highest score
/// against the class index. The twin of the held-out branch of `margins` (batch.wgsl).
#[inline(always)]
pub fn predicted_wrong(rule: HeadRule, s: &[f32], y: f32) -> bool {
    match rule {
        HeadRule::Binary => (s[0] >= 0.0) != (y > 0.0),
        _ => {
            let mut best = 0;
            for (k, &v) in s.iter().enumerate() {
                if v > s[best] {
                    best = k;
                }
            }
            best != y as usize
        }
    }
}

/// ||a - b|| in f64: the size of an epoch's weight change.
pub fn update_norm(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y) as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// What the user asked for with `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// A GPU adapter when one exists, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// A GPU adapter, or an error.
    Gpu,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::Gpu),
            _ => Err(format!("unknown backend {s:?} (expected auto, cpu or gpu)")),
        }
    }
}

/// A chosen backend and one line saying which and why (for the CLI to show).
pub struct Selected {
    /// The backend.
    pub backend: Box<dyn Backend>,
    /// Which backend was chosen and why.
    pub note: String,
}

/// Picks the backend for `choice`. Under `Auto` a software adapter (such as llvmpipe) is
/// passed over for the CPU, which is faster, unless `gpu.adapter.name` names it.
pub fn select(choice: BackendChoice, gpu: &gpu::GpuOptions) -> Result<Selected> {
    let cpu = || Box::new(cpu::CpuBackend::new()) as Box<dyn Backend>;
    match choice {
        BackendChoice::Cpu => Ok(Selected {
            backend: cpu(),
            note: "backend: cpu (requested)".into(),
        }),
        BackendChoice::Gpu => {
            let g = gpu::GpuBackend::new(gpu)?;
            let note = format!("backend: gpu, {} (requested)", g.device());
            Ok(Selected {
                backend: Box::new(g),
                note,
            })
        }
        BackendChoice::Auto => {
            let mut opts = gpu.clone();
            opts.adapter.hardware_only = opts.adapter.name.is_none();
            match gpu::GpuBackend::new(&opts) {
                Ok(g) => {
                    let note = format!(
                        "backend: gpu, {} (auto: a GPU adapter is present)",
                        g.device()
                    );
                    Ok(Selected {
                        backend: Box::new(g),
                        note,
                    })
                }
                Err(e) => Ok(Selected {
                    backend: cpu(),
                    note: format!("backend: cpu (auto: {e})"),
                }),
            }
        }
    }
}
