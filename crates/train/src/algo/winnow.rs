//! Winnow (the lecture notes' Algorithm 3): positive weights beta, all 1 at the start; on a
//! mistake (y beta.x <= tau) every beta_j is multiplied by exp(eta * y * x_j). Predictions are
//! sgn(beta.x). Overflow and underflow are avoided by working in log space: the state is
//! log beta, an update adds eta * y * x_j to it, and the weights used are
//! exp(log beta - max log beta), which have the same signs of beta.x and lie in (0, 1].
//! Winnow learns over the features only (no bias column).

use super::online::{self, OnlineRule, Snapshot, Step};
use super::{Backends, Fitted, Problem, Progress, RowWeights, Shard};
use crate::backend::{winnow_weights, EpochStats, Row, RowWeight};
use crate::error::Result;
use crate::params::Params;

/// Trains online Winnow on the host CPU (whatever the backends).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    _backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    online::fitted(pb, online::run(pb, params, rule(pb, params), progress)?)
}

/// Winnow's rule for `params`, from the warm start's log-weights or all 0.
pub(crate) fn rule(pb: &Problem<'_>, params: &Params) -> impl OnlineRule {
    let logb: Vec<f64> = match &pb.start {
        Some(w) => w[..pb.ds.d].iter().map(|&v| v as f64).collect(),
        None => vec![0.0; pb.ds.d],
    };
    Winnow::new(logb, params)
}

/// Winnow's state: the log-weights and the weights used, exp(log beta - max), with a bias
/// of 0 after them (so that they read as augmented weights).
struct Winnow {
    logb: Vec<f64>,
    /// `d + 1` weights, the last (the bias) 0.
    w: Vec<f32>,
    top: f64,
    eta: f64,
    tau: f32,
    /// The last row's score.
    score: [f32; 1],
}

impl Winnow {
    fn new(logb: Vec<f64>, params: &Params) -> Winnow {
        let d = logb.len();
        let mut w = vec![1f32; d + 1];
        winnow_weights(&logb, &mut w[..d]);
        w[d] = 0.0;
        let top = logb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Winnow {
            logb,
            w,
            top,
            eta: params.lr as f64,
            tau: params.margin_threshold,
            score: [0.0],
        }
    }
}

impl OnlineRule for Winnow {
    type Best = Vec<f32>;

    fn row_scores(&self) -> Option<&[f32]> {
        Some(&self.score)
    }

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn step(
        &mut self,
        _pb: &Problem<'_>,
        _i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step> {
        let wi = wt.row;
        let d = self.logb.len();
        // In column order for dense and sparse rows alike: the weights are not integers, so
        // only one order of the sum gives the sparse and dense runs the same bits.
        self.score[0] = row.dot_seq(&self.w[..d]);
        let m = y * self.score[0];
        if m > self.tau {
            return Ok(Step::default());
        }
        let step = self.eta * y as f64 * wi as f64;
        self.top = winnow_step(&mut self.logb, &mut self.w[..d], self.top, row, step);
        Ok(Step {
            mistakes: 1,
            criterion: -((m * wi) as f64),
            weighted: wi as f64,
            ..Step::default()
        })
    }

    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, rw: RowWeights) -> Result<()> {
        // Iterative parameter mixing: the processes' log-weights are averaged (the geometric
        // mean of their weights, Winnow's own scale), the counts summed.
        shard.reduce.sum_f64(&mut self.logb);
        let k = shard.reduce.size() as f64;
        self.logb.iter_mut().for_each(|l| *l /= k);
        shard.sum_counts(e, rw);
        let d = self.logb.len();
        winnow_weights(&self.logb, &mut self.w[..d]);
        self.top = self.logb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ok(())
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        self.w.clone()
    }

    fn finish(self, _pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(best.unwrap_or(self.w)))
    }
}

/// One Winnow update: log beta_j += step * x_j for the row's non-zero values, then the
/// weights exp(log beta - max log beta) again; returns the new max. Bit-identical to
/// [`winnow_weights`] over all of `logb` after the update, at the cost of the non-zeros only,
/// unless the max moved (then every weight changes: O(d)).
fn winnow_step(logb: &mut [f64], beta: &mut [f32], top: f64, row: Row<'_>, step: f64) -> f64 {
    let mut moved = false;
    let mut touch = |j: usize, x: f32| {
        if x == 0.0 {
            return;
        }
        let old = logb[j];
        let new = old + step * x as f64;
        logb[j] = new;
        // The max moved: it grew, or the entry holding it shrank.
        moved |= new > top || (old == top && new < old);
    };
    match row {
        Row::Dense(x) => x.iter().enumerate().for_each(|(j, &v)| touch(j, v)),
        Row::Sparse { idx, val } => idx
            .iter()
            .zip(val)
            .for_each(|(&j, &v)| touch(j as usize, v)),
    }
    if moved {
        winnow_weights(logb, beta);
        return logb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    }
    let mut set = |j: usize, x: f32| {
        if x != 0.0 {
            beta[j] = (logb[j] - top).exp() as f32;
        }
    };
    match row {
        Row::Dense(x) => x.iter().enumerate().for_each(|(j, &v)| set(j, v)),
        Row::Sparse { idx, val } => idx.iter().zip(val).for_each(|(&j, &v)| set(j as usize, v)),
    }
    top
}
