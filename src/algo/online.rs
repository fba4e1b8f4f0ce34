//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once
//! (by eta times the row's weight). Sequential by nature, so it runs on the host. One loop
//! serves the binary, multiclass and one-vs-rest rules (through [`row_rule`]), the averaged
//! perceptron (lazy sums, O(d) per update) and the voted perceptron (every intermediate
//! vector with its survival count; with more than two classes each vector is one row per
//! class and votes for the class it scores highest).
//!
//! After each epoch the stop rules ([`StopState`]) decide; with held-out rows the model after
//! the epoch (the weights, the average, or the vote so far) is scored on them, and the model
//! of the best validation epoch is the one kept.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Backends, Fitted, Problem, Progress, PREFETCH_ROWS};
use crate::backend::cpu::{val_mistakes, CpuBackend};
use crate::backend::{
    predicted_wrong, row_rule, update_norm, Backend, BatchRule, EpochStats, Reduce, Row,
    StopReason, StopState,
};
use crate::error::{Error, Result};
use crate::model::{vote_totals, Body, Rows, Voted};
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
    let out = train(pb, params, keep, &mut w, progress)?;
    let mut scores = None;
    let body = match out.model {
        Snapshot::Voted { flat, counts } => Body::Voted(Voted {
            rows: Rows::from_augmented(&flat, pb.ds.d, pb.fit_bias),
            counts,
        }),
        Snapshot::Linear(w) => {
            if pb.shard.is_some() {
                // A data-parallel run: this process's rows' scores, gathered by the caller.
                scores = Some(CpuBackend::new().scores(pb.view().data(), &w)?);
            }
            pb.linear_body(&w)
        }
    };
    Ok(Fitted {
        scores,
        ..Fitted::on_cpu(body, out.stats, out.stop, out.best_epoch)
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

/// A model the run can return: weights (the last or the average), or a vote.
#[derive(Debug, Clone)]
enum Snapshot {
    /// Augmented weights, `heads * (d + 1)`.
    Linear(Vec<f32>),
    /// Voted vectors (augmented, `heads * (d + 1)` each, concatenated) and their counts.
    Voted { flat: Vec<f32>, counts: Vec<u64> },
}

/// The vote at some step, without copying the retired vectors: the first `retired` of them,
/// then the vector then current with its count.
#[derive(Debug, Clone)]
struct VotePrefix {
    retired: usize,
    current: Vec<f32>,
    survived: u64,
}

/// The result of an online run.
struct Online {
    stats: Vec<EpochStats>,
    stop: StopReason,
    model: Snapshot,
    best_epoch: usize,
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

    /// Records the update `a * [row, bias]` of the head at `off` (d + 1 weights): O(d) for a
    /// dense row, O(non-zeros) for a sparse one.
    fn add(&mut self, off: usize, d: usize, a: f32, row: Row<'_>, bias: f32) {
        let ca = self.c as f64 * a as f64;
        let u = &mut self.u[off..off + d];
        match row {
            Row::Dense(x) => {
                for (u, &x) in u.iter_mut().zip(x) {
                    *u += ca * x as f64;
                }
            }
            Row::Sparse { idx, val } => {
                for (&j, &x) in idx.iter().zip(val) {
                    u[j as usize] += ca * x as f64;
                }
            }
        }
        self.u[off + d] += ca * bias as f64;
    }

    /// Records a jump of the weights from `old` to `new` (parameter mixing) as an update.
    fn jump(&mut self, old: &[f32], new: &[f32]) {
        let c = self.c as f64;
        for ((u, &a), &b) in self.u.iter_mut().zip(old).zip(new) {
            *u += c * (b as f64 - a as f64);
        }
    }

    fn finish(&self, w: &[f32]) -> Vec<f32> {
        if self.c <= 1 {
            return w.to_vec();
        }
        let c = self.c as f64;
        w.iter()
            .zip(&self.u)
            .zip(&self.w0)
            .map(|((&wj, &uj), &w0j)| ((c * wj as f64 - w0j as f64 - uj) / (c - 1.0)) as f32)
            .collect()
    }
}

/// The linear model now: the weights, or their average; in a data-parallel run the mean of
/// the processes' averages (every process calls this at the same points).
fn mixed_average(pb: &Problem<'_>, avg: &Option<Average>, w: &[f32]) -> Vec<f32> {
    let Some(avg) = avg else {
        return w.to_vec();
    };
    let mut a = avg.finish(w);
    if let Some(sh) = &pb.shard {
        sh.reduce.sum_f32(&mut a);
        let k = sh.reduce.size() as f32;
        a.iter_mut().for_each(|v| *v /= k);
    }
    a
}

/// The voted perceptron's retired vectors (concatenated) and their survival counts.
struct Votes {
    cap: usize,
    /// Most vectors that fit the memory budget.
    fit: usize,
    /// Floats per vector.
    len: usize,
    flat: Vec<f32>,
    counts: Vec<u64>,
    survived: u64,
}

impl Votes {
    /// One step: `before` is the vector a mistake replaced (None: no mistake). Returns false
    /// when the vector cap is reached (the vector is not retired; training stops).
    fn step(&mut self, before: Option<&[f32]>) -> Result<bool> {
        match before {
            // A mistake: the vector before the update retires with its count.
            Some(old) => {
                if self.survived > 0 {
                    if self.counts.len() + 1 >= self.cap {
                        return Ok(false);
                    }
                    self.reserve_one()?;
                    self.flat.extend_from_slice(old);
                    self.counts.push(self.survived);
                }
                self.survived = 1;
            }
            None => self.survived += 1,
        }
        Ok(true)
    }

    /// Room for one more vector, within the memory budget (grown by doubling, never past
    /// the budget, and never by an aborting allocation).
    fn reserve_one(&mut self) -> Result<()> {
        let need = self.flat.len() + self.len;
        if self.flat.capacity() >= need {
            return Ok(());
        }
        let too_big = || {
            let len = self.len as u64 * 4;
            Error::Memory {
                what: format!(
                    "the voted perceptron's {} vectors of {} weights",
                    self.counts.len() + 1,
                    self.len
                ),
                bytes: (self.counts.len() as u64 + 1) * len,
                available: self.fit as u64 * len,
            }
        };
        if self.counts.len() >= self.fit {
            return Err(too_big());
        }
        let want = (self.flat.capacity() * 2)
            .min(self.fit * self.len)
            .max(need);
        self.flat
            .try_reserve_exact(want - self.flat.len())
            .map_err(|_| too_big())
    }

    /// The vote at this step (the current vector `w`), without copying the retired ones.
    fn prefix(&self, w: &[f32]) -> VotePrefix {
        VotePrefix {
            retired: self.counts.len(),
            current: w.to_vec(),
            survived: self.survived,
        }
    }

    /// The vote of `p`, consuming the retired vectors.
    fn into_model(mut self, p: VotePrefix) -> Snapshot {
        self.flat.truncate(p.retired * self.len);
        self.counts.truncate(p.retired);
        if p.survived > 0 {
            self.flat.extend_from_slice(&p.current);
            self.counts.push(p.survived);
        }
        Snapshot::Voted {
            flat: self.flat,
            counts: self.counts,
        }
    }
}

/// Scores held-out rows for the voted perceptron as it grows: the retired vectors' votes are
/// added once (they never change), the current vector's on top for each count.
struct VotedValidation {
    votes: Vec<f32>,
    scored: usize,
    outputs: usize,
}

impl VotedValidation {
    fn mistakes(&mut self, pb: &Problem<'_>, votes: &Votes, w: &[f32]) -> Result<u64> {
        let (Some(data), Some((_, yv))) = (pb.view().val_data(), &pb.val) else {
            return Ok(0);
        };
        let cpu = CpuBackend::new();
        let heads = pb.heads;
        let per = votes.len;
        let upto = votes.counts.len();
        vote_totals(
            data,
            &votes.flat[self.scored * per..upto * per],
            &votes.counts[self.scored..upto],
            heads,
            self.outputs,
            &cpu,
            &mut self.votes,
        )?;
        self.scored = upto;
        let mut now = self.votes.clone();
        if votes.survived > 0 {
            vote_totals(
                data,
                w,
                &[votes.survived],
                heads,
                self.outputs,
                &cpu,
                &mut now,
            )?;
        }
        let wrong = now
            .chunks_exact(self.outputs)
            .zip(yv)
            .filter(|(v, &y)| predicted_wrong(pb.rule, v, y))
            .count();
        Ok(wrong as u64)
    }
}

/// Trains in place from `w` (`heads * (d + 1)` entries) with the problem's rule.
fn train(
    pb: &Problem<'_>,
    params: &Params,
    keep: Keep,
    w: &mut [f32],
    progress: &mut dyn Progress,
) -> Result<Online> {
    let v = pb.view();
    let d = v.d;
    let da = d + 1;
    let eta = params.lr;
    let rule = BatchRule {
        patience: pb.patience(params),
        ..BatchRule::new(eta, 0.0)
    };
    let mut stop_state = StopState::default();
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut start = w.to_vec();
    let mut before = w.to_vec();
    let mut s = vec![0f32; v.heads];
    let mut stats = Vec::new();
    let mut avg = keep.average.then(|| Average::new(w));
    let mut votes = keep.voted.map(|cap| Votes {
        cap,
        // Half the budget: the model built from the vectors at the end is a second copy.
        fit: (crate::limits::budget() / 2 / (4 * w.len().max(1) as u64 + 64)) as usize,
        len: w.len(),
        flat: Vec::new(),
        counts: Vec::new(),
        survived: 0,
    });
    let outputs = if pb.heads == 1 { 1 } else { pb.heads };
    let mut voted_val = VotedValidation {
        votes: vec![0.0; pb.val.as_ref().map_or(0, |(vd, _)| vd.n) * outputs],
        scored: 0,
        outputs,
    };
    let mut best: Option<Snapshot> = None;
    let mut best_vote: Option<VotePrefix> = None;
    let mut stop = StopReason::MaxEpochs;
    let snapshots = progress.wants_snapshots();
    let mut row_buf = Vec::new();
    'epochs: for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(w);
        let mut e = EpochStats::default();
        for (j, &i) in order.iter().enumerate() {
            // Shuffled rows are random reads: start fetching a row some steps ahead (a
            // shuffled epoch at 500,000 x 64 went from 125-133 to 95-120 ms with it).
            if let Some(&a) = order.get(j + PREFETCH_ROWS) {
                v.x.prefetch_row(a, d);
            }
            let row = v.x.row(i, d, &mut row_buf);
            for (h, sh) in s.iter_mut().enumerate() {
                *sh = row.decision(&w[h * da..(h + 1) * da], v.bias);
            }
            let voting = votes.is_some();
            let mut updated = false;
            let wi = v.weight(i);
            let (m, crit) = row_rule(pb.rule, params.margin_threshold, &s, v.y[i], |h, coef| {
                if voting && !updated {
                    before.copy_from_slice(w);
                }
                updated = true;
                let a = eta * coef * wi;
                row.axpy(a, &mut w[h * da..h * da + d]);
                w[h * da + d] += a * v.bias;
                if let Some(avg) = avg.as_mut() {
                    avg.add(h * da, d, a, row, v.bias);
                }
            });
            e.mistakes += m;
            e.criterion += crit * wi as f64;
            if v.sw.is_some() {
                *e.weighted.get_or_insert(0.0) += m as f64 * wi as f64;
            }
            if m > 0 && snapshots {
                progress.snapshot(epoch + 1, w);
            }
            if let Some(votes) = votes.as_mut() {
                if !votes.step(updated.then_some(&before[..]))? {
                    // The cap is reached: the vote keeps the vector before this update.
                    w.copy_from_slice(&before);
                    e.update_norm = update_norm(w, &start);
                    stats.push(e);
                    stop = StopReason::MaxVectors;
                    break 'epochs;
                }
            }
            if let Some(avg) = avg.as_mut() {
                avg.c += 1;
            }
        }
        if let Some(sh) = &pb.shard {
            // Iterative parameter mixing (McDonald, Hall and Mann, 2010): each process ran one
            // online epoch on its rows from the same weights; all continue from their mean.
            // The counts are the sums over the processes.
            let before_mix = w.to_vec();
            sh.mix(w, &mut e, v.sw.is_some());
            if let Some(avg) = avg.as_mut() {
                // The jump to the mean counts as one more update in the lazy sums, so the
                // average stays that of the weights this process went through.
                avg.jump(&before_mix, w);
            }
        }
        e.update_norm = update_norm(w, &start);
        let linear = || mixed_average(pb, &avg, w);
        if pb.val.is_some() {
            e.val_mistakes = Some(match &votes {
                Some(votes) => voted_val.mistakes(pb, votes, w)?,
                None => {
                    let m = val_mistakes(&v, &linear(), pb.rule);
                    match &pb.shard {
                        // Over every process's share of the held-out rows.
                        Some(sh) => sh.total(m),
                        None => m,
                    }
                    .unwrap_or(0)
                }
            });
        }
        let (better, why) = stop_state.record(&rule, &e);
        if better && pb.val.is_some() {
            match &votes {
                Some(votes) => best_vote = Some(votes.prefix(w)),
                None => best = Some(Snapshot::Linear(linear())),
            }
        }
        stats.push(e);
        progress.update(epoch + 1, params.epochs, e.mistakes);
        if let Some(why) = why {
            stop = why;
            break;
        }
    }
    let model = match (best, votes) {
        (_, Some(votes)) => {
            let p = best_vote.unwrap_or_else(|| votes.prefix(w));
            votes.into_model(p)
        }
        (Some(b), None) => b,
        (None, None) => Snapshot::Linear(mixed_average(pb, &avg, w)),
    };
    Ok(Online {
        stats,
        stop,
        model,
        best_epoch: stop_state.best_epoch as usize,
    })
}
