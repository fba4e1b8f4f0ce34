//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once.
//! Sequential by nature, so it runs on the host. One loop serves the binary, multiclass and
//! one-vs-rest rules (through [`row_rule`]), the averaged perceptron (lazy sums, O(d) per
//! update) and the voted perceptron (every intermediate vector with its survival count).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::Progress;
use crate::backend::{
    axpy, decision, row_rule, update_norm, EpochStats, HeadRule, StopReason, TrainView,
};
use crate::error::{Error, Result};
use crate::params::Params;

/// What to keep besides the final weights.
#[derive(Debug, Clone, Copy, Default)]
pub struct Keep {
    /// The average of the weights over all steps (Daume's lazy-sum trick).
    pub average: bool,
    /// Every intermediate weight vector with its survival count, at most this many.
    pub voted: Option<usize>,
}

/// The result of an online run.
#[derive(Debug, Clone)]
pub struct Online {
    /// Per-epoch statistics.
    pub stats: Vec<EpochStats>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The averaged weights, when kept.
    pub average: Option<Vec<f32>>,
    /// The voted vectors (augmented, `heads * (d + 1)` each) and their counts, when kept.
    pub voted: Option<(Vec<Vec<f32>>, Vec<u64>)>,
}

/// Trains in place from `w` (`heads * (d + 1)` entries) with `rule` and margin `tau`.
pub fn train(
    v: TrainView<'_>,
    params: &Params,
    rule: HeadRule,
    keep: Keep,
    w: &mut [f32],
    progress: &mut dyn Progress,
) -> Result<Online> {
    let d = v.d;
    let da = d + 1;
    let eta = params.lr;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut start = w.to_vec();
    let mut s = vec![0f32; v.heads];
    let mut stats = Vec::new();
    // Averaging over the weights after each of the T steps: with u = sum over updates of
    // (step index) * update and c = T + 1 at the end, the average is (c w - w0 - u) / (c - 1).
    let w0 = w.to_vec();
    let mut u = keep.average.then(|| vec![0f32; w.len()]);
    let mut c = 1f32;
    let mut votes: Option<(Vec<Vec<f32>>, Vec<u64>)> = keep.voted.map(|_| (Vec::new(), Vec::new()));
    let mut survived = 0u64;
    let mut stop = StopReason::MaxEpochs;
    let snapshots = progress.wants_snapshots();
    for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(w);
        let mut e = EpochStats::default();
        for &i in &order {
            let row = &v.x[i * d..(i + 1) * d];
            for (h, sh) in s.iter_mut().enumerate() {
                *sh = decision(&w[h * da..(h + 1) * da], row, v.bias);
            }
            let mut before: Option<Vec<f32>> = None;
            let voting = votes.is_some();
            let (m, crit) = row_rule(rule, params.margin_threshold, &s, v.y[i], |h, coef| {
                if voting && before.is_none() {
                    before = Some(w.to_vec());
                }
                let a = eta * coef;
                axpy(a, row, &mut w[h * da..h * da + d]);
                w[h * da + d] += a * v.bias;
                if let Some(u) = u.as_mut() {
                    axpy(c * a, row, &mut u[h * da..h * da + d]);
                    u[h * da + d] += c * a * v.bias;
                }
            });
            e.mistakes += m;
            e.criterion += crit;
            if m > 0 && snapshots {
                progress.snapshot(epoch + 1, w);
            }
            if let (Some((vecs, counts)), Some(cap)) = (votes.as_mut(), keep.voted) {
                match before {
                    // A mistake: the vector before the update retires with its count.
                    Some(old) => {
                        if survived > 0 {
                            if vecs.len() >= cap {
                                return Err(Error::InvalidParam {
                                    name: "--max-vectors",
                                    value: cap.to_string(),
                                    reason: "was reached: the voted perceptron keeps one vector per mistake; \
                                             raise it, lower --epochs, or use --algo averaged",
                                });
                            }
                            vecs.push(old);
                            counts.push(survived);
                        }
                        survived = 1;
                    }
                    None => survived += 1,
                }
            }
            c += 1.0;
        }
        e.update_norm = update_norm(w, &start);
        stats.push(e);
        progress.update(epoch + 1, params.epochs, e.mistakes);
        if e.mistakes == 0 {
            stop = StopReason::Converged;
            break;
        }
    }
    if let Some((vecs, counts)) = votes.as_mut() {
        if survived > 0 {
            vecs.push(w.to_vec());
            counts.push(survived);
        }
    }
    let average = u.map(|u| {
        w.iter()
            .zip(&u)
            .zip(&w0)
            .map(|((wj, uj), w0j)| (c * wj - w0j - uj) / (c - 1.0))
            .collect()
    });
    Ok(Online {
        stats,
        stop,
        average,
        voted: votes,
    })
}
