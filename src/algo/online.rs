//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once.
//! Sequential by nature, so it runs on the host. One loop serves the binary, multiclass and
//! one-vs-rest rules (through [`row_rule`]), the averaged perceptron (lazy sums, O(d) per
//! update) and the voted perceptron (every intermediate vector with its survival count).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{initial_weights, Backends, Fitted, Problem, Progress};
use crate::backend::{
    axpy, cpu::CpuBackend, decision, row_rule, update_norm, EpochStats, HeadRule, StopReason,
    TrainView,
};
use crate::error::{Error, Result};
use crate::model::{Body, Rows, Voted};
use crate::params::{Algo, Params};
use crate::report::Ran;

/// Trains the online form of `params.algo` on the host CPU (whatever the backends).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    _backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let keep = Keep {
        average: params.algo == Algo::Averaged,
        voted: (params.algo == Algo::Voted).then_some(params.max_vectors),
    };
    let mut w = initial_weights(pb.ds.d, pb.heads, params);
    let out = train(pb.view(), params, pb.rule, keep, &mut w, progress)?;
    let body = match out.voted {
        Some((vecs, counts)) => Body::Voted(Voted {
            rows: Rows::from_augmented(&vecs.concat(), pb.ds.d, pb.fit_bias),
            counts,
        }),
        None => pb.linear_body(out.average.as_deref().unwrap_or(&w)),
    };
    Ok(Fitted {
        body,
        stats: out.stats,
        stop: out.stop,
        scores: None,
        ran: Ran::on(&CpuBackend::new()),
    })
}

/// What to keep besides the final weights.
#[derive(Debug, Clone, Copy, Default)]
struct Keep {
    /// The average of the weights over all steps (Daume's lazy-sum trick).
    average: bool,
    /// Every intermediate weight vector with its survival count, at most this many.
    voted: Option<usize>,
}

/// The result of an online run.
struct Online {
    /// Per-epoch statistics.
    stats: Vec<EpochStats>,
    /// Why it stopped.
    stop: StopReason,
    /// The averaged weights, when kept.
    average: Option<Vec<f32>>,
    /// The voted vectors (augmented, `heads * (d + 1)` each) and their counts, when kept.
    voted: Option<(Vec<Vec<f32>>, Vec<u64>)>,
}

/// Trains in place from `w` (`heads * (d + 1)` entries) with `rule` and margin `tau`.
fn train(
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
                                return Err(Error::VotedLimit(cap));
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
