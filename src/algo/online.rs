//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once
//! (by eta times the row's weight). Sequential by nature, so it runs on the host.
//!
//! One loop ([`run`]) serves every online rule: it shuffles, prefetches, counts the mistakes,
//! mixes the processes' weights in a data-parallel run, scores held-out rows, applies the stop
//! rules ([`Watch`], shared with the kernel perceptron), keeps the best epoch's model and
//! reports progress. A rule ([`OnlineRule`]) is the state a row updates and the model it
//! yields: the perceptron here (binary, multiclass and one-vs-rest through [`row_rule`], the
//! averaged perceptron with lazy sums, the voted perceptron with every intermediate vector
//! and its survival count), Winnow (`winnow.rs`) and the passive-aggressive rules (`pa.rs`).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Backends, Fitted, Problem, Progress, Shard, PREFETCH_ROWS};
use crate::backend::cpu::{val_mistakes, CpuBackend};
use crate::backend::{
    predicted_wrong, row_rule, update_norm, Backend, BatchRule, EpochStats, Reduce, Row,
    StopReason, StopState,
};
use crate::error::{Error, Result};
use crate::model::{vote_totals, Body, Rows, Voted};
use crate::params::{Algo, Params};

/// An online rule: the state one row at a time updates, and the model it yields.
pub(crate) trait OnlineRule {
    /// The model kept for the best validation epoch.
    type Best;

    /// The current augmented weights (`heads * (d + 1)`): the update norm, progress
    /// snapshots and the default held-out scoring use them.
    fn weights(&self) -> &[f32];

    /// One row `row` with label `y` (±1, or the class index) and weight `wi`: update on a
    /// mistake; returns the row's mistakes and weighted criterion, or why training stops.
    fn step(&mut self, pb: &Problem<'_>, row: Row<'_>, y: f32, wi: f32) -> Result<Step>;

    /// The end of an epoch in a data-parallel run: every process continues from the mean
    /// of the processes' weights, and the epoch's counts become their sums.
    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, weighted: bool) {
        shard.mix(self.weights_mut(), e, weighted);
    }

    /// The weights to mix (the default [`OnlineRule::mix`]).
    fn weights_mut(&mut self) -> &mut [f32];

    /// The held-out rows' mistakes of the model now (summed over the processes).
    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        let m = val_mistakes(&pb.view(), self.weights(), pb.rule);
        Ok(match &pb.shard {
            Some(sh) => sh.total(m),
            None => m,
        }
        .unwrap_or(0))
    }

    /// The model now, kept as the best so far.
    fn best(&self, pb: &Problem<'_>) -> Self::Best;

    /// The model trained: the best epoch's when one was kept, else the model now.
    fn finish(self, pb: &Problem<'_>, best: Option<Self::Best>) -> Snapshot;
}

/// What one row did.
pub(crate) struct Step {
    /// Mistakes (heads for one-vs-rest, else 0 or 1).
    pub mistakes: u64,
    /// Their perceptron criterion, times the row's weight.
    pub criterion: f64,
    /// Stop training after this row (its counts still go into the epoch).
    pub stop: Option<StopReason>,
}

/// The stop rules, the statistics and the progress of an epoch loop: the bookkeeping every
/// loop shares (the online loop and the kernel perceptron's).
pub(crate) struct Watch {
    rule: BatchRule,
    state: StopState,
    max_epochs: usize,
}

impl Watch {
    /// The stop rules of `params` (the patience rule among them), with the update-norm
    /// tolerance `tol` (0: none).
    pub(crate) fn new(pb: &Problem<'_>, params: &Params, tol: f32) -> Watch {
        Watch {
            rule: BatchRule {
                patience: pb.patience(params),
                ..BatchRule::new(params.lr, tol)
            },
            state: StopState::default(),
            max_epochs: params.epochs,
        }
    }

    /// Ends an epoch: records `e` in `stats` and reports progress; returns whether it is
    /// the best epoch so far and why to stop, if the stop rules say so.
    pub(crate) fn end(
        &mut self,
        stats: &mut Vec<EpochStats>,
        e: EpochStats,
        progress: &mut dyn Progress,
    ) -> (bool, Option<StopReason>) {
        let (better, why) = self.state.record(&self.rule, &e);
        stats.push(e);
        progress.update(stats.len(), self.max_epochs, e.mistakes);
        (better, why)
    }

    /// The epoch (1-based) with the fewest monitored mistakes; 0 when none ran.
    pub(crate) fn best_epoch(&self) -> usize {
        self.state.best_epoch as usize
    }
}

/// A model the run can return: weights (the last or the average), or a vote.
#[derive(Debug, Clone)]
pub(crate) enum Snapshot {
    /// Augmented weights, `heads * (d + 1)`.
    Linear(Vec<f32>),
    /// Voted vectors (augmented, `heads * (d + 1)` each, concatenated) and their counts.
    Voted { flat: Vec<f32>, counts: Vec<u64> },
}

/// The result of an online run.
pub(crate) struct Online {
    stats: Vec<EpochStats>,
    stop: StopReason,
    model: Snapshot,
    best_epoch: usize,
}

/// Runs `rule` over the problem's rows epoch after epoch until a stop rule says so.
pub(crate) fn run<R: OnlineRule>(
    pb: &Problem<'_>,
    params: &Params,
    mut rule: R,
    progress: &mut dyn Progress,
) -> Result<Online> {
    let v = pb.view();
    let d = v.d;
    // (The update-norm tolerance is the batch rule's: online runs have none.)
    let mut watch = Watch::new(pb, params, 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut start = rule.weights().to_vec();
    let mut stats = Vec::new();
    let mut best = None;
    let mut stop = StopReason::MaxEpochs;
    let snapshots = progress.wants_snapshots();
    let mut row_buf = Vec::new();
    'epochs: for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(rule.weights());
        let mut e = EpochStats::default();
        for (j, &i) in order.iter().enumerate() {
            // Shuffled rows are random reads: start fetching a row some steps ahead (a
            // shuffled epoch at 500,000 x 64 went from 125-133 to 95-120 ms with it).
            if let Some(&a) = order.get(j + PREFETCH_ROWS) {
                v.x.prefetch_row(a, d);
            }
            let row = v.x.row(i, d, &mut row_buf);
            let wi = v.weight(i);
            let step = rule.step(pb, row, v.y[i], wi)?;
            e.mistakes += step.mistakes;
            e.criterion += step.criterion;
            if v.sw.is_some() {
                *e.weighted.get_or_insert(0.0) += step.mistakes as f64 * wi as f64;
            }
            if step.mistakes > 0 && snapshots {
                progress.snapshot(epoch + 1, rule.weights());
            }
            if let Some(why) = step.stop {
                e.update_norm = update_norm(rule.weights(), &start);
                stats.push(e);
                stop = why;
                break 'epochs;
            }
        }
        if let Some(sh) = &pb.shard {
            // Iterative parameter mixing (McDonald, Hall and Mann, 2010): each process ran one
            // online epoch on its rows from the same weights; all continue from their mean.
            rule.mix(sh, &mut e, v.sw.is_some());
        }
        e.update_norm = update_norm(rule.weights(), &start);
        if pb.val.is_some() {
            e.val_mistakes = Some(rule.val_mistakes(pb)?);
        }
        let (better, why) = watch.end(&mut stats, e, progress);
        if better && pb.val.is_some() {
            best = Some(rule.best(pb));
        }
        if let Some(why) = why {
            stop = why;
            break;
        }
    }
    Ok(Online {
        stats,
        stop,
        model: rule.finish(pb, best),
        best_epoch: watch.best_epoch(),
    })
}

/// The fitted model of an online run (in a data-parallel run with this process's rows'
/// scores of a linear model, gathered by the caller).
pub(crate) fn fitted(pb: &Problem<'_>, out: Online) -> Result<Fitted> {
    let mut scores = None;
    let body = match out.model {
        Snapshot::Voted { flat, counts } => Body::Voted(Voted {
            rows: Rows::from_augmented(&flat, pb.ds.d, pb.fit_bias),
            counts,
        }),
        Snapshot::Linear(w) => {
            if pb.shard.is_some() {
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

/// Trains the online form of `params.algo` (the perceptron, averaged or voted) on the host
/// CPU (whatever the backends).
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
    let rule = Perceptron::new(pb, params, keep, pb.initial_weights(params));
    fitted(pb, run(pb, params, rule, progress)?)
}

/// What to keep besides the final weights.
#[derive(Debug, Clone, Copy, Default)]
struct Keep {
    /// The average of the weights over all steps (Daume's lazy-sum trick).
    average: bool,
    /// Every intermediate weight vector with its survival count, at most this many.
    voted: Option<usize>,
}

/// The vote at some step, without copying the retired vectors: the first `retired` of them,
/// then the vector then current with its count.
#[derive(Debug, Clone)]
struct VotePrefix {
    retired: usize,
    current: Vec<f32>,
    survived: u64,
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

/// The perceptron's online rule: binary, multiclass or one-vs-rest (the problem's head rule),
/// with the average or the vote kept when asked.
struct Perceptron {
    w: Vec<f32>,
    /// The weights before the row's update (the voted perceptron retires them).
    before: Vec<f32>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    eta: f32,
    tau: f32,
    avg: Option<Average>,
    votes: Option<Votes>,
    voted_val: VotedValidation,
}

/// The best epoch's model: the weights (or their average), or the vote then.
enum PerceptronBest {
    Linear(Vec<f32>),
    Vote(VotePrefix),
}

impl Perceptron {
    fn new(pb: &Problem<'_>, params: &Params, keep: Keep, w: Vec<f32>) -> Perceptron {
        let outputs = if pb.heads == 1 { 1 } else { pb.heads };
        Perceptron {
            before: w.clone(),
            s: vec![0f32; pb.heads],
            eta: params.lr,
            tau: params.margin_threshold,
            avg: keep.average.then(|| Average::new(&w)),
            votes: keep.voted.map(|cap| Votes {
                cap,
                // Half the budget: the model built from the vectors at the end is a second
                // copy.
                fit: (crate::limits::budget() / 2 / (4 * w.len().max(1) as u64 + 64)) as usize,
                len: w.len(),
                flat: Vec::new(),
                counts: Vec::new(),
                survived: 0,
            }),
            voted_val: VotedValidation {
                votes: vec![0.0; pb.val.as_ref().map_or(0, |(vd, _)| vd.n) * outputs],
                scored: 0,
                outputs,
            },
            w,
        }
    }
}

impl OnlineRule for Perceptron {
    type Best = PerceptronBest;

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn step(&mut self, pb: &Problem<'_>, row: Row<'_>, y: f32, wi: f32) -> Result<Step> {
        let v = pb.view();
        let (d, bias) = (v.d, v.bias);
        let da = d + 1;
        let Perceptron {
            w,
            before,
            s,
            eta,
            avg,
            votes,
            ..
        } = self;
        for (h, sh) in s.iter_mut().enumerate() {
            *sh = row.decision(&w[h * da..(h + 1) * da], bias);
        }
        let voting = votes.is_some();
        let mut updated = false;
        let (m, crit) = row_rule(pb.rule, self.tau, s, y, |h, coef| {
            if voting && !updated {
                before.copy_from_slice(w);
            }
            updated = true;
            let a = *eta * coef * wi;
            row.axpy(a, &mut w[h * da..h * da + d]);
            w[h * da + d] += a * bias;
            if let Some(avg) = avg.as_mut() {
                avg.add(h * da, d, a, row, bias);
            }
        });
        let mut step = Step {
            mistakes: m,
            criterion: crit * wi as f64,
            stop: None,
        };
        if let Some(votes) = votes.as_mut() {
            if !votes.step(updated.then_some(&before[..]))? {
                // The cap is reached: the vote keeps the vector before this update.
                w.copy_from_slice(before);
                step.stop = Some(StopReason::MaxVectors);
                return Ok(step);
            }
        }
        if let Some(avg) = avg.as_mut() {
            avg.c += 1;
        }
        Ok(step)
    }

    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, weighted: bool) {
        let before_mix = self.w.clone();
        shard.mix(&mut self.w, e, weighted);
        if let Some(avg) = self.avg.as_mut() {
            // The jump to the mean counts as one more update in the lazy sums, so the
            // average stays that of the weights this process went through.
            avg.jump(&before_mix, &self.w);
        }
    }

    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        match &self.votes {
            Some(votes) => self.voted_val.mistakes(pb, votes, &self.w),
            None => {
                let m = val_mistakes(&pb.view(), &mixed_average(pb, &self.avg, &self.w), pb.rule);
                Ok(match &pb.shard {
                    // Over every process's share of the held-out rows.
                    Some(sh) => sh.total(m),
                    None => m,
                }
                .unwrap_or(0))
            }
        }
    }

    fn best(&self, pb: &Problem<'_>) -> PerceptronBest {
        match &self.votes {
            Some(votes) => PerceptronBest::Vote(votes.prefix(&self.w)),
            None => PerceptronBest::Linear(mixed_average(pb, &self.avg, &self.w)),
        }
    }

    fn finish(self, pb: &Problem<'_>, best: Option<PerceptronBest>) -> Snapshot {
        match (best, self.votes) {
            (best, Some(votes)) => {
                let p = match best {
                    Some(PerceptronBest::Vote(p)) => p,
                    _ => votes.prefix(&self.w),
                };
                votes.into_model(p)
            }
            (Some(PerceptronBest::Linear(b)), None) => Snapshot::Linear(b),
            (_, None) => Snapshot::Linear(mixed_average(pb, &self.avg, &self.w)),
        }
    }
}
