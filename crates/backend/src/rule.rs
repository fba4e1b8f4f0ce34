//! The batch rule: how a row's scores decide mistakes and updates (the CPU twin of the rule in
//! `margins`, shaders/batch.wgsl), what the update is, what is kept, and the patience rule's
//! parameters.

pub use crate::params::PaSize;
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
/// is the multiplicative branch of `finalize` in shaders/batch_update.wgsl.
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

/// A row's weight in the heads it updates: `row` (its sample weight, times its class weight
/// except under one-vs-rest), and under one-vs-rest `own`, its weight in its own class's head
/// (`row` times the class weight). scikit-learn's one-vs-rest weighs a class's rows by the
/// class weight in the class's own head only; the other heads weigh them by their sample
/// weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowWeight {
    /// The weight in every head but the own head of a one-vs-rest row.
    pub row: f32,
    /// The weight in the row's own class's head under one-vs-rest.
    pub own: f32,
}

impl RowWeight {
    /// A row that weighs 1 everywhere.
    pub const ONE: RowWeight = RowWeight { row: 1.0, own: 1.0 };

    /// The same weight `w` in every head.
    pub fn uniform(w: f32) -> Self {
        RowWeight { row: w, own: w }
    }

    /// The weight in head `h` of a row of label `y` under `rule`: `own` for the row's own
    /// class's head under one-vs-rest, else `row` (the twin of `head_weight` in
    /// shaders/batch.wgsl).
    #[inline(always)]
    pub fn head(self, rule: HeadRule, h: usize, y: f32) -> f32 {
        if rule == HeadRule::OneVsRest && h == y as usize {
            self.own
        } else {
            self.row
        }
    }
}

/// What one row did under the rule: its mistakes (a one-vs-rest row counts one per head it
/// updates), its criterion (the sum over its mistakes of -margin times the head's weight) and
/// the sum of the heads' weights over its mistakes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RowOutcome {
    /// Mistakes.
    pub mistakes: u64,
    /// Weighted criterion.
    pub criterion: f64,
    /// Weighted mistakes.
    pub weighted: f64,
    /// One-vs-rest: 1 when the row's first highest score is not its class (the prediction
    /// rule gets it wrong), else 0; 0 under the other rules. (Summed over rows: the rows
    /// predicted wrong.)
    pub wrong_rows: u64,
}

impl std::ops::AddAssign for RowOutcome {
    fn add_assign(&mut self, o: RowOutcome) {
        self.mistakes += o.mistakes;
        self.criterion += o.criterion;
        self.weighted += o.weighted;
        self.wrong_rows += o.wrong_rows;
    }
}

/// Applies `rule` to one row's scores `s` (one per head) with label `y` (±1 for binary, the
/// class index otherwise) and weight `wt`: calls `add(head, coefficient)` for every head the
/// row updates, the coefficient being ±1 times the row's weight in that head, and returns
/// what the row did. The CPU's twin of the rule in `decide` and `margins`
/// (shaders/batch.wgsl); the online and batch CPU paths all use it.
#[inline(always)]
pub fn row_rule(
    rule: HeadRule,
    tau: f32,
    s: &[f32],
    y: f32,
    wt: RowWeight,
    mut add: impl FnMut(usize, f32),
) -> RowOutcome {
    let t = y as usize;
    let mut out = RowOutcome::default();
    match rule {
        HeadRule::Binary | HeadRule::OneVsRest => {
            if rule == HeadRule::OneVsRest {
                out.wrong_rows = predicted_wrong(rule, s, y) as u64;
            }
            for (h, &sh) in s.iter().enumerate() {
                let yh = match rule {
                    HeadRule::Binary => y,
                    _ if h == t => 1.0,
                    _ => -1.0,
                };
                let m = yh * sh;
                if m <= tau {
                    let wh = wt.head(rule, h, y);
                    out.mistakes += 1;
                    out.criterion -= m as f64 * wh as f64;
                    out.weighted += wh as f64;
                    add(h, yh * wh);
                }
            }
            out
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
                return out;
            }
            let wr = wt.row;
            for h in 0..s.len() {
                if h == t {
                    add(h, wr);
                } else if rule == HeadRule::MulticlassAll || h == best {
                    add(h, -wr);
                }
            }
            RowOutcome {
                mistakes: 1,
                criterion: -(m as f64) * wr as f64,
                weighted: wr as f64,
                wrong_rows: 0,
            }
        }
    }
}

/// A row as the passive-aggressive rule sees it besides its scores.
#[derive(Debug, Clone, Copy)]
pub struct PaRow {
    /// The label (±1, or the class index).
    pub y: f32,
    /// The row's weights.
    pub wt: RowWeight,
    /// ||x||^2, the bias column counted.
    pub sq: f32,
}

/// The passive-aggressive rule on one row's scores `s` (one per head) and the row's label,
/// weight and squared norm (`row`): calls `add(head, coefficient)` for every
/// head it steps (the step size times the sign times the row's weight in the head; the update
/// is eta times that times x), and returns what the row did. A row steps where its margin is
/// below 1 (a positive hinge loss); binary and one-vs-rest heads each on their own, K classes
/// (direct) jointly: the true class up and the highest wrong one (or, with `MulticlassAll`,
/// every wrong one) down, by one loss, 1 - the sum of the signed scores in head order, and
/// 2 ||x||^2 in place of ||x||^2. A mistake is a head (or a joint row) that steps, the
/// criterion the sum of the hinge losses times the weights. `steps` is scratch. The CPU's twin
/// of `decide_pa` (shaders/steps.wgsl); the sequential rule (algo::pa) uses it too.
#[inline(always)]
pub fn pa_rule(
    (rule, size): (HeadRule, PaSize),
    s: &[f32],
    row: PaRow,
    steps: &mut Vec<(usize, f32)>,
    mut add: impl FnMut(usize, f32),
) -> RowOutcome {
    let PaRow { y, wt, sq } = row;
    let joint = matches!(rule, HeadRule::MulticlassArgmax | HeadRule::MulticlassAll);
    // The heads to step: those with a margin of at most 1.
    steps.clear();
    let o = row_rule(rule, 1.0, s, y, RowWeight::ONE, |h, sign| {
        steps.push((h, sign))
    });
    let joint_loss = match joint {
        true => 1.0 - steps.iter().map(|&(h, sign)| sign * s[h]).sum::<f32>(),
        false => 0.0,
    };
    let q = sq * if joint { 2.0 } else { 1.0 };
    let mut out = RowOutcome {
        wrong_rows: o.wrong_rows,
        ..RowOutcome::default()
    };
    for (i, &(h, sign)) in steps.iter().enumerate() {
        let loss = match joint {
            true => joint_loss,
            false => 1.0 - sign * s[h],
        };
        if loss <= 0.0 {
            continue;
        }
        let wi = wt.head(rule, h, y);
        if !joint || i == 0 {
            out.mistakes += 1;
            out.criterion += loss as f64 * wi as f64;
            out.weighted += wi as f64;
        }
        if q > 0.0 {
            add(h, size.size(loss, q) * sign * wi);
        }
    }
    out
}

/// AROW's rule (diagonal covariance; Crammer, Kulesza and Dredze, 2009) on one row's scores
/// `s` (one per head; binary or one-vs-rest heads, each on its own) of a row of label `y`
/// (±1, or the class index under one-vs-rest) and weights `wt`, with regularization `r` and
/// learning rate `eta`: a head whose margin m = y s is below 1 steps, with
/// beta = c / (c v + r) (c the row's weight in the head, v = `conf(head)` its confidence in
/// the row, x^T Sigma x with the bias column, by the confidences before the row) and
/// alpha = (1 - m) beta; calls `add(head, eta alpha y, beta)`, the update being
/// w_j += eta alpha y sigma_j x_j and sigma_j -= beta (sigma_j x_j)^2. A mistake is a head
/// that steps, the criterion the sum of the hinge losses times the weights. The CPU's twin of
/// `decide_arow` (shaders/steps.wgsl); the sequential rule (algo::arow) uses it too.
#[inline(always)]
pub fn arow_rule(
    rule: HeadRule,
    (r, eta): (f32, f32),
    s: &[f32],
    (y, wt): (f32, RowWeight),
    mut conf: impl FnMut(usize) -> f32,
    mut add: impl FnMut(usize, f32, f32),
) -> RowOutcome {
    debug_assert!(matches!(rule, HeadRule::Binary | HeadRule::OneVsRest));
    let t = y as usize;
    let mut out = RowOutcome {
        wrong_rows: (rule == HeadRule::OneVsRest && predicted_wrong(rule, s, y)) as u64,
        ..RowOutcome::default()
    };
    for (h, &sh) in s.iter().enumerate() {
        let yh = match rule {
            HeadRule::OneVsRest if h == t => 1.0,
            HeadRule::OneVsRest => -1.0,
            _ => y,
        };
        let loss = 1.0 - yh * sh;
        if loss <= 0.0 {
            continue;
        }
        let wi = wt.head(rule, h, y);
        out.mistakes += 1;
        out.criterion += loss as f64 * wi as f64;
        out.weighted += wi as f64;
        // A row of weight c counts as c copies in AROW's objective: r becomes r / c, so
        // beta = c / (c v + r); a row of weight 0 changes neither w nor the confidences.
        let beta = wi / (wi * conf(h) + r);
        add(h, eta * loss * beta * yh, beta);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The coefficients `row_rule` gives each head, and what it returns.
    fn coefs(rule: HeadRule, s: &[f32], y: f32, wt: RowWeight) -> (Vec<f32>, RowOutcome) {
        let mut c = vec![0f32; s.len()];
        let o = row_rule(rule, 0.0, s, y, wt, |h, a| c[h] = a);
        (c, o)
    }

    #[test]
    fn one_vs_rest_weighs_the_class_weight_in_the_rows_own_head_only() {
        // A row of class 1 (sample weight 2, class weight 5) wrong in every head.
        let wt = RowWeight {
            row: 2.0,
            own: 10.0,
        };
        let (c, o) = coefs(HeadRule::OneVsRest, &[1.0, -1.0, 3.0], 1.0, wt);
        assert_eq!(c, [-2.0, 10.0, -2.0]);
        assert_eq!(o.mistakes, 3);
        assert_eq!(o.wrong_rows, 1);
        assert_eq!(o.weighted, 14.0);
        assert_eq!(o.criterion, 1.0 * 2.0 + 1.0 * 10.0 + 3.0 * 2.0);
        // Binary and multiclass rules weigh the row's weight everywhere.
        let (c, o) = coefs(HeadRule::Binary, &[-1.0], 1.0, wt);
        assert_eq!((c, o.weighted), (vec![2.0], 2.0));
        let (c, o) = coefs(HeadRule::MulticlassAll, &[1.0, -1.0, 3.0], 1.0, wt);
        assert_eq!((c, o.mistakes, o.weighted), (vec![-2.0, 2.0, -2.0], 1, 2.0));
        assert_eq!(o.criterion, 4.0 * 2.0);
    }
}
