//! The kernel (dual) perceptron: one count alpha_i per training point; the decision value is
//! f(x) = sum over points of eta * alpha_j * y_j * (K(x_j, x) + bias^2), computed on the fly by
//! the backend (`DualBound::kscores`, CPU or GPU, on rows bound once), never as a Gram matrix.
//! Batch dual update: per epoch, alpha_i += 1 for every mistake y_i f(x_i) <= tau. With the
//! linear kernel this is exactly the batch perceptron in primal form.

use super::{Backends, Checkpoint, Fitted, Problem, Progress};
use crate::backend::{EpochStats, Kernel, StopReason};
use crate::error::Result;
use crate::model::{Body, Dual};
use crate::params::Params;

/// Trains the kernel perceptron (binary labels ±1).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let kernel = params.kernel.unwrap_or(Kernel::Linear);
    let (eta, y) = (params.lr, &pb.y);
    let tol = params.tol.unwrap_or(0.0) as f64;
    let support_of = |alpha: &[u32]| -> (Vec<u32>, Vec<f32>) {
        alpha
            .iter()
            .enumerate()
            .filter(|(_, a)| **a > 0)
            .map(|(j, a)| (j as u32, eta * *a as f32 * y[j]))
            .unzip()
    };
    // The counts alpha and the epochs so far: what a fallback backend resumes from.
    let mut state = Checkpoint {
        state: vec![0u32; pb.ds.n],
        stats: Vec::new(),
    };
    let ((stop, scores), ran) = backends.resume(&mut state, |b, st| {
        let mut bound = b.bind_dual(pb.view().data(), None)?;
        loop {
            let (support, coef) = support_of(&st.state);
            let scores = bound.kscores(&support, &coef, &kernel)?;
            if scores.iter().any(|f| !f.is_finite()) {
                return Err(super::overflow(pb.ds));
            }
            if st.stats.len() == params.epochs {
                return Ok((StopReason::MaxEpochs, scores));
            }
            let mut e = EpochStats::default();
            let mut alpha = st.state.clone();
            for (i, (&f, &yi)) in scores.iter().zip(y).enumerate() {
                let m = yi * f;
                if m <= params.margin_threshold {
                    e.mistakes += 1;
                    e.criterion -= m as f64;
                    alpha[i] += 1;
                }
            }
            e.update_norm = eta as f64 * (e.mistakes as f64).sqrt();
            st.state = alpha;
            st.stats.push(e);
            progress.update(st.stats.len(), params.epochs, e.mistakes);
            if e.mistakes == 0 {
                return Ok((StopReason::Converged, scores));
            }
            if e.update_norm < tol {
                let (support, coef) = support_of(&st.state);
                return Ok((
                    StopReason::Tolerance,
                    bound.kscores(&support, &coef, &kernel)?,
                ));
            }
        }
    })?;
    let (support, coef) = support_of(&state.state);
    let body = Body::Kernel(Dual {
        support_vectors: support
            .iter()
            .map(|&j| pb.ds.row(j as usize).to_vec())
            .collect(),
        coef,
        kernel,
    });
    Ok(Fitted {
        body,
        stats: state.stats,
        stop,
        scores: Some(scores),
        ran,
    })
}
