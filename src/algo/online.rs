//! Rosenblatt's online perceptron (the lecture notes' Algorithm 1). Sequential by nature, so
//! it runs on the host: each epoch visits the rows in a seeded random order (or file order),
//! and each mistake y w^T x <= 0 applies w += eta * y * x at once.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::Progress;
use crate::backend::{axpy, decision, EpochStats, StopReason, TrainView};
use crate::params::Params;

/// Trains in place from `w` (`d + 1` entries). Returns per-epoch stats and why it stopped.
pub fn train(
    v: TrainView<'_>,
    params: &Params,
    w: &mut [f32],
    progress: &mut dyn Progress,
) -> (Vec<EpochStats>, StopReason) {
    let d = v.d;
    let eta = params.lr;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut start = w.to_vec();
    let mut stats = Vec::new();
    for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(w);
        let mut e = EpochStats::default();
        for &i in &order {
            let row = &v.x[i * d..(i + 1) * d];
            let y = v.y[i];
            let m = y * decision(w, row, v.bias);
            if m <= 0.0 {
                e.mistakes += 1;
                e.criterion -= m as f64;
                axpy(eta * y, row, &mut w[..d]);
                w[d] += eta * y * v.bias;
            }
        }
        e.update_norm = w
            .iter()
            .zip(&start)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        stats.push(e);
        progress.update(epoch + 1, params.epochs, e.mistakes);
        if e.mistakes == 0 {
            return (stats, StopReason::Converged);
        }
    }
    (stats, StopReason::MaxEpochs)
}
