//! The batch rule: how a row's scores decide mistakes and updates (the CPU twin of the rule in
//! `margins`, shaders/batch.wgsl), what the update is, what is kept, and the patience rule's
//! parameters.

use serde::{Deserialize, Serialize};

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

/// What a backend keeps besides the current weights, for [`Bound::extras`](super::Bound::extras).
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
/// `keep_fraction` times the figure at the last improvement. While the fewest seen is at most a
/// positive `floor` (the data looks (nearly) separated and may still converge), the run must
/// also have gone as many epochs since its best as it took to reach it
/// ([`StopState::patience_ran_out`](super::StopState::patience_ran_out)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Patience {
    /// Epochs without improvement before stopping; 0 turns the rule off.
    pub epochs: u32,
    /// 1 - the relative improvement required (1: any decrease improves).
    pub keep_fraction: f32,
    /// When positive and the fewest monitored mistakes are at most this, the rule also waits
    /// the best epoch's number of epochs after it.
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
