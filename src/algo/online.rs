//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once.
//! Sequential by nature, so it runs on the host. One loop serves the binary, multiclass and
//! one-vs-rest rules (through [`row_rule`]), the averaged perceptron (lazy sums, O(d) per
//! update) and the voted perceptron (every intermediate vector with its survival count).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Backends, Fitted, Problem, Progress};
use crate::backend::{
    axpy, decision, row_rule, update_norm, EpochStats, HeadRule, StopReason, TrainView,
};
use crate::error::{Error, Result};
use crate::model::{Body, Rows, Voted};
use crate::params::{Algo, Params};

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
    let mut w = pb.initial_weights(params);
    let out = train(pb.view(), params, pb.rule, keep, &mut w, progress)?;
    let body = match out.voted {
        Some((vecs, counts)) => Body::Voted(Voted {
            rows: Rows::from_augmented(&vecs.concat(), pb.ds.d, pb.fit_bias),
            counts,
        }),
        None => pb.linear_body(out.average.as_deref().unwrap_or(&w)),
    };
    Ok(Fitted::on_cpu(body, out.stats, out.stop))
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

/// The averaged perceptron's lazy sums. Averaging over the weights after each of the T steps:
/// with u = sum over updates of (step index) * update and c = T + 1 at the end, the average
/// is (c w - w0 - u) / (c - 1). The step counter is an integer and u is summed in f64, so on
/// integer data both stay exact up to 2^53 (an f32 counter stops moving at 2^24 steps).
struct Average {
    w0: Vec<f32>,
    u: Vec<f64>,
    c: u64,
}

impl Average {
    fn new(w: &[f32]) -> Self {
        Average {
            w0: w.to_vec(),
            u: vec![0.0; w.len()],
            c: 1,
        }
    }

    /// Records the update `a * [row, bias]` of the head at `off` (d + 1 weights).
    fn add(&mut self, off: usize, a: f32, row: &[f32], bias: f32) {
        let ca = self.c as f64 * a as f64;
        for (u, &x) in self.u[off..off + row.len()].iter_mut().zip(row) {
            *u += ca * x as f64;
        }
        self.u[off + row.len()] += ca * bias as f64;
    }

    fn finish(&self, w: &[f32]) -> Vec<f32> {
        let c = self.c as f64;
        w.iter()
            .zip(&self.u)
            .zip(&self.w0)
            .map(|((&wj, &uj), &w0j)| ((c * wj as f64 - w0j as f64 - uj) / (c - 1.0)) as f32)
            .collect()
    }
}

/// The voted perceptron's retired vectors and their survival counts.
struct Votes {
    cap: usize,
    /// Most vectors that fit the memory budget.
    fit: usize,
    vecs: Vec<Vec<f32>>,
    counts: Vec<u64>,
    survived: u64,
}

impl Votes {
    /// One step: `before` is the vector a mistake replaced (None: no mistake).
    fn step(&mut self, before: Option<Vec<f32>>) -> Result<()> {
        match before {
            // A mistake: the vector before the update retires with its count.
            Some(old) => {
                if self.survived > 0 {
                    if self.vecs.len() >= self.cap {
                        return Err(Error::VotedLimit(self.cap));
                    }
                    if self.vecs.len() >= self.fit {
                        let len = old.len() as u64 * 4;
                        return Err(Error::Memory {
                            what: format!(
                                "the voted perceptron's {} vectors of {} weights",
                                self.vecs.len() + 1,
                                old.len()
                            ),
                            bytes: (self.vecs.len() as u64 + 1) * len,
                            available: self.fit as u64 * len,
                        });
                    }
                    self.vecs.push(old);
                    self.counts.push(self.survived);
                }
                self.survived = 1;
            }
            None => self.survived += 1,
        }
        Ok(())
    }

    fn finish(mut self, w: &[f32]) -> (Vec<Vec<f32>>, Vec<u64>) {
        if self.survived > 0 {
            self.vecs.push(w.to_vec());
            self.counts.push(self.survived);
        }
        (self.vecs, self.counts)
    }
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
    let mut avg = keep.average.then(|| Average::new(w));
    let mut votes = keep.voted.map(|cap| Votes {
        cap,
        fit: (crate::limits::budget() / (4 * w.len().max(1) as u64 + 64)) as usize,
        vecs: Vec::new(),
        counts: Vec::new(),
        survived: 0,
    });
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
                if let Some(avg) = avg.as_mut() {
                    avg.add(h * da, a, row, v.bias);
                }
            });
            e.mistakes += m;
            e.criterion += crit;
            if m > 0 && snapshots {
                progress.snapshot(epoch + 1, w);
            }
            if let Some(votes) = votes.as_mut() {
                votes.step(before)?;
            }
            if let Some(avg) = avg.as_mut() {
                avg.c += 1;
            }
        }
        e.update_norm = update_norm(w, &start);
        stats.push(e);
        progress.update(epoch + 1, params.epochs, e.mistakes);
        if e.mistakes == 0 {
            stop = StopReason::Converged;
            break;
        }
    }
    let voted = votes.map(|v| v.finish(w));
    let average = avg.map(|a| a.finish(w));
    Ok(Online {
        stats,
        stop,
        average,
        voted,
    })
}
