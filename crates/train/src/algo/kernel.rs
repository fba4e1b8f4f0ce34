//! The kernel (dual) perceptron: one count alpha_i per training point; the decision value is
//! f(x) = sum over points of eta * alpha_j * y_j * (K(x_j, x) + bias^2), computed on the fly by
//! the backend (`DualBound::kscores`, CPU or GPU, on rows bound once), never as a Gram matrix.
//! Batch dual update: per epoch, alpha_i += 1 for every mistake y_i f(x_i) <= tau. With the
//! linear kernel this is exactly the batch perceptron in primal form.

use super::online::Watch;
use super::{Backends, Checkpoint, Fitted, Problem, Progress};
use crate::backend::{predicted_wrong, DualBound, EpochStats, Kernel, StopReason, TrainView};
use crate::error::Result;
use crate::model::{Body, Dual};
use crate::params::Params;

/// Trains the kernel perceptron (binary labels ±1). A mistake adds the row's weight to its
/// count. With held-out rows they are scored each epoch by the counts the epoch starts with,
/// and the counts of the best validation epoch are kept; a run the patience rule stops keeps
/// the counts of its best epoch.
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let kernel = params.kernel.unwrap_or(Kernel::Linear);
    let (eta, y) = (params.lr, &pb.y);
    let view = pb.view();
    let support_of = |alpha: &[f32]| -> (Vec<u32>, Vec<f32>) {
        alpha
            .iter()
            .enumerate()
            .filter(|(_, a)| **a > 0.0)
            .map(|(j, a)| (j as u32, eta * *a * y[j]))
            .unzip()
    };
    // The counts alpha and the epochs so far: what a fallback backend resumes from.
    let mut state = Checkpoint {
        state: vec![0f32; pb.ds.n],
        stats: Vec::new(),
    };
    let ((stop, alpha, scores, best_epoch), ran) = backends.resume(&mut state, |b, st| {
        let mut bound = b.bind_dual(view.data(), None)?;
        let mut held: Option<Box<dyn DualBound + '_>> = match view.val_data() {
            Some(vd) => Some(b.bind_dual(vd, Some(view.data()))?),
            None => None,
        };
        let mut watch = Watch::new(pb, params, params.tol.unwrap_or(0.0));
        let mut best: Option<Vec<f32>> = None;
        // The last training scores, of the counts in `st.state` while `fresh`.
        let (stop, scores, fresh) = loop {
            let (support, coef) = support_of(&st.state);
            let scores = bound.kscores(&support, &coef, &kernel)?;
            if scores.iter().any(|f| !f.is_finite()) {
                return Err(super::overflow(&pb.ds));
            }
            if st.stats.len() == params.epochs {
                break (StopReason::MaxEpochs, scores, true);
            }
            let mut alpha = st.state.clone();
            let mut e = dual_epoch(&scores, &view, params.margin_threshold, eta, &mut alpha);
            if let (Some(h), Some((_, yv))) = (held.as_mut(), &pb.val) {
                let f = h.kscores(&support, &coef, &kernel)?;
                let wrong = f
                    .iter()
                    .zip(yv)
                    .filter(|(f, &y)| predicted_wrong(pb.rule, std::slice::from_ref(*f), y))
                    .count();
                e.val_mistakes = Some(wrong as u64);
            }
            let changed = e.mistakes > 0;
            let (better, why) = watch.end(&mut st.stats, e, progress);
            Watch::cancelled(progress, st.stats.len())?;
            if better {
                best = Some(st.state.clone());
            }
            st.state = alpha;
            if let Some(why) = why {
                break (why, scores, !changed);
            }
        };
        // A validation run keeps its best epoch's counts; so does a run the patience rule
        // stopped.
        let restore =
            (pb.val.is_some() && stop != StopReason::Converged) || stop == StopReason::Patience;
        let (alpha, scores) = match best.filter(|_| restore) {
            Some(b) => {
                let (support, coef) = support_of(&b);
                let s = bound.kscores(&support, &coef, &kernel)?;
                (b, s)
            }
            None if fresh => (st.state.clone(), scores),
            None => {
                let (support, coef) = support_of(&st.state);
                let s = bound.kscores(&support, &coef, &kernel)?;
                (st.state.clone(), s)
            }
        };
        Ok((stop, alpha, scores, watch.best_epoch()))
    })?;
    let (support, coef) = support_of(&alpha);
    let body = dual_body(pb, &support, coef, kernel)?;
    Ok(Fitted {
        body,
        stats: state.stats,
        stop,
        scores: Some(scores),
        ran,
        best_epoch,
        arow_bound: None,
    })
}

/// One batch dual epoch on the training `scores` (f_i of the counts the epoch starts with):
/// every mistake y_i f_i <= `tau` adds its row weight to its count in `alpha`. Returns the
/// epoch's statistics (the held-out mistakes are the caller's).
fn dual_epoch(
    scores: &[f32],
    view: &TrainView<'_>,
    tau: f32,
    eta: f32,
    alpha: &mut [f32],
) -> EpochStats {
    let mut e = EpochStats::default();
    let mut sq = 0f64;
    for (i, (&f, &yi)) in scores.iter().zip(view.y).enumerate() {
        let m = yi * f;
        if m <= tau {
            let wi = view.weight(i);
            e.mistakes += 1;
            e.criterion -= (m * wi) as f64;
            if view.sw.is_some() {
                *e.weighted.get_or_insert(0.0) += wi as f64;
            }
            alpha[i] += wi;
            sq += (wi as f64).powi(2);
        }
    }
    e.update_norm = eta as f64 * sq.sqrt();
    e
}

/// The kernel model: its support vectors dense (d values each, as the model file holds them;
/// checked against the memory budget before they are made, for sparse rows with millions of
/// features) and their coefficients.
fn dual_body(pb: &Problem<'_>, support: &[u32], coef: Vec<f32>, kernel: Kernel) -> Result<Body> {
    crate::limits::check(
        || {
            format!(
                "{}: the kernel model's {} support vectors of {} features, stored densely",
                pb.ds.source.display(),
                support.len(),
                pb.ds.d
            )
        },
        support.len() as u128 * pb.ds.d as u128,
        4,
    )?;
    Ok(Body::Kernel(Dual {
        support_vectors: support
            .iter()
            .map(|&j| pb.ds.row(j as usize).to_vec())
            .collect(),
        coef,
        kernel,
    }))
}
