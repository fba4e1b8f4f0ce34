//! The kernel (dual) perceptron: one count alpha_i per training point; the decision value is
//! f(x) = sum over points of eta * alpha_j * y_j * (K(x_j, x) + bias^2), computed on the fly by
//! the backend (`kernel_scores`, CPU or GPU), never as a Gram matrix. Batch dual update: per
//! epoch, alpha_i += 1 for every mistake y_i f(x_i) <= tau. With the linear kernel this is
//! exactly the batch perceptron in primal form.

use super::Progress;
use crate::backend::{Backend, DataView, EpochStats, Kernel, StopReason};
use crate::error::Result;
use crate::params::Params;

/// The trained dual form: support indices (alpha > 0), their coefficients eta * alpha * y,
/// and the final decision values on the training rows.
pub struct Dual {
    /// Per-epoch statistics; `update_norm` is eta * ||delta alpha||.
    pub stats: Vec<EpochStats>,
    /// Why training stopped.
    pub stop: StopReason,
    /// Training rows with alpha > 0, ascending.
    pub support: Vec<u32>,
    /// eta * alpha * y for each support row.
    pub coef: Vec<f32>,
    /// f(x_i) for every training row with the final coefficients.
    pub scores: Vec<f32>,
}

/// Trains on `x` (bias column value `bias`) with labels `y` in {-1, +1}.
pub fn train(
    backend: &dyn Backend,
    x: DataView<'_>,
    y: &[f32],
    kernel: &Kernel,
    params: &Params,
    progress: &mut dyn Progress,
) -> Result<Dual> {
    let eta = params.lr;
    let tol = params.tol.unwrap_or(0.0) as f64;
    let mut alpha = vec![0u32; x.n];
    let mut stats = Vec::new();
    let support_of = |alpha: &[u32]| -> (Vec<u32>, Vec<f32>) {
        alpha
            .iter()
            .enumerate()
            .filter(|(_, a)| **a > 0)
            .map(|(j, a)| (j as u32, eta * *a as f32 * y[j]))
            .unzip()
    };
    let mut stop = StopReason::MaxEpochs;
    let mut scores;
    loop {
        let (support, coef) = support_of(&alpha);
        scores = backend.kernel_scores(x, x, &support, &coef, kernel)?;
        if stats.len() == params.epochs {
            break;
        }
        let mut e = EpochStats::default();
        for (i, (&f, &yi)) in scores.iter().zip(y).enumerate() {
            let m = yi * f;
            if m <= params.margin_threshold {
                e.mistakes += 1;
                e.criterion -= m as f64;
                alpha[i] += 1;
            }
        }
        e.update_norm = eta as f64 * (e.mistakes as f64).sqrt();
        stats.push(e);
        progress.update(stats.len(), params.epochs, e.mistakes);
        if e.mistakes == 0 {
            stop = StopReason::Converged;
            break;
        }
        if e.update_norm < tol {
            stop = StopReason::Tolerance;
            let (support, coef) = support_of(&alpha);
            scores = backend.kernel_scores(x, x, &support, &coef, kernel)?;
            break;
        }
    }
    let (support, coef) = support_of(&alpha);
    Ok(Dual {
        stats,
        stop,
        support,
        coef,
        scores,
    })
}
