//! Winnow (the lecture notes' Algorithm 3): positive weights beta, all 1 at the start; on a
//! mistake (y beta.x <= tau) every beta_j is multiplied by exp(eta * y * x_j). Predictions are
//! sgn(beta.x). Overflow and underflow are avoided by working in log space: the state is
//! log beta, an update adds eta * y * x_j to it, and the weights used are
//! exp(log beta - max log beta), which have the same signs of beta.x and lie in (0, 1].
//! Winnow learns over the features only (no bias column).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Backends, Fitted, Problem, Progress, PREFETCH_ROWS};
use crate::backend::cpu::{val_mistakes, CpuBackend};
use crate::backend::Backend;
use crate::backend::{
    update_norm, winnow_weights, BatchRule, EpochStats, Row, StopReason, StopState,
};
use crate::error::Result;
use crate::params::Params;

/// Trains online Winnow on the host CPU (whatever the backends).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    _backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let logw: Vec<f64> = match &pb.start {
        Some(w) => w[..pb.ds.d].iter().map(|&v| v as f64).collect(),
        None => vec![0.0; pb.ds.d],
    };
    let (w, stats, stop, best) = train(pb, params, logw, progress);
    // A data-parallel run: this process's rows' scores, gathered by the caller.
    let scores = match pb.shard {
        Some(_) => Some(CpuBackend::new().scores(pb.view().data(), &w)?),
        None => None,
    };
    Ok(Fitted {
        scores,
        ..Fitted::on_cpu(pb.linear_body(&w), stats, stop, best)
    })
}

/// Trains online from the log-weights `logb`; returns the normalised weights (`d + 1`
/// entries, the bias 0; with held-out rows those of the best validation epoch), the stats,
/// why it stopped and the best epoch.
fn train(
    pb: &Problem<'_>,
    params: &Params,
    mut logb: Vec<f64>,
    progress: &mut dyn Progress,
) -> (Vec<f32>, Vec<EpochStats>, StopReason, usize) {
    let v = pb.view();
    let d = v.d;
    let eta = params.lr as f64;
    let rule = BatchRule {
        patience: pb.patience(params),
        ..BatchRule::new(params.lr, 0.0)
    };
    let mut stop_state = StopState::default();
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut beta = vec![1f32; d];
    winnow_weights(&logb, &mut beta);
    let mut top = logb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut start = beta.clone();
    let mut stats = Vec::new();
    let mut stop = StopReason::MaxEpochs;
    let augmented = |beta: &[f32]| {
        let mut w = beta.to_vec();
        w.push(0.0);
        w
    };
    let mut best: Option<Vec<f32>> = None;
    let mut row_buf = Vec::new();
    for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(&beta);
        let mut e = EpochStats::default();
        for (j, &i) in order.iter().enumerate() {
            // Shuffled rows are random reads: start fetching a row some steps ahead (a
            // shuffled epoch at 500,000 x 64 went from 125-133 to 95-120 ms with it).
            if let Some(&a) = order.get(j + PREFETCH_ROWS) {
                v.x.prefetch_row(a, d);
            }
            let row = v.x.row(i, d, &mut row_buf);
            let y = v.y[i];
            // In column order for dense and sparse rows alike: the weights are not integers,
            // so only one order of the sum gives the sparse and dense runs the same bits.
            let m = y * row.dot_seq(&beta);
            if m <= params.margin_threshold {
                let wi = v.weight(i);
                e.mistakes += 1;
                e.criterion -= (m * wi) as f64;
                if v.sw.is_some() {
                    *e.weighted.get_or_insert(0.0) += wi as f64;
                }
                let step = eta * y as f64 * wi as f64;
                top = winnow_step(&mut logb, &mut beta, top, row, step);
            }
        }
        if let Some(sh) = &pb.shard {
            // Iterative parameter mixing: the processes' log-weights are averaged (the
            // geometric mean of their weights, Winnow's own scale), the counts summed.
            sh.reduce.sum_f64(&mut logb);
            let k = sh.reduce.size() as f64;
            logb.iter_mut().for_each(|l| *l /= k);
            sh.sum_counts(&mut e, v.sw.is_some());
            winnow_weights(&logb, &mut beta);
            top = logb.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        }
        e.update_norm = update_norm(&beta, &start);
        e.val_mistakes = val_mistakes(&v, &augmented(&beta), pb.rule);
        if let Some(sh) = &pb.shard {
            e.val_mistakes = sh.total(e.val_mistakes);
        }
        let (better, why) = stop_state.record(&rule, &e);
        if better && pb.val.is_some() {
            best = Some(augmented(&beta));
        }
        stats.push(e);
        progress.update(epoch + 1, params.epochs, e.mistakes);
        if let Some(why) = why {
            stop = why;
            break;
        }
    }
    let w = best.unwrap_or_else(|| augmented(&beta));
    (w, stats, stop, stop_state.best_epoch as usize)
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
