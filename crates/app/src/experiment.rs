//! The experiments that check what the theory says (`rosenblatt experiment ...`):
//! - `committee`: the online perceptron and Winnow on the same committee streams (one pass
//!   each), mistakes against the number of experts p, next to the perceptron's bound p * k.
//!   The lecture notes claim Winnow's mistakes grow far more slowly with p.
//! - `margin`: the online perceptron's mistakes against Novikoff's bound (R / gamma)^2 on
//!   separable sets of controlled margin.
//! - `averaging`: test error per epoch of the last, pocket, averaged and voted models on noisy
//!   data (Freund and Schapire, 1999).
//! - `complexity`: time per batch epoch against n d (the lecture's O(n d) per iteration).
//! - `time-to-accuracy`: test accuracy against wall time (upload included) of rules trained
//!   from scratch for growing epoch budgets: what a GPU buys.

use serde::Serialize;

use std::time::Instant;

use crate::algo::{fitter, Backends, Problem};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, StopReason};
use crate::data::synth::{committee, generate, SynthSpec};
use crate::data::{Dataset, Labels};
use crate::error::Result;
use crate::params::{Algo, TrainParams};
use crate::report::radius;

/// One row of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct CommitteeRow {
    /// Experts.
    pub p: usize,
    /// Panel size.
    pub k: usize,
    /// Examples in the stream.
    pub n: usize,
    /// Online perceptron mistakes in one pass.
    pub perceptron_mistakes: u64,
    /// Winnow mistakes in one pass.
    pub winnow_mistakes: u64,
    /// The perceptron's Novikoff bound for this problem, p * k (with the bias: (p + 1) * k).
    pub perceptron_bound: usize,
}

/// Runs one pass of each algorithm over a committee stream of `n` examples for each p.
/// `eta` is Winnow's learning rate (the perceptron's is 1).
pub fn committee_experiment(
    ps: &[usize],
    k: usize,
    n: usize,
    eta: f32,
    seed: u64,
) -> Result<Vec<CommitteeRow>> {
    ps.iter()
        .map(|&p| {
            let (ds, _) = committee(n, p, k, seed ^ p as u64)?;
            // One pass over the stream in its order: the online setting of the mistake bounds.
            let base = TrainParams::for_algo(Algo::Batch).epochs(1).shuffle(false);
            let mistakes = |params: TrainParams| -> Result<u64> {
                let params = params.validate()?;
                let pb = Problem::new(&ds, &params)?;
                let cpu = CpuBackend::new();
                let backends = Backends {
                    primary: &cpu,
                    fallback: None,
                };
                let fitted = fitter(&params)(&pb, &params, &backends, &mut ())?;
                Ok(fitted.stats.iter().map(|e| e.mistakes).sum())
            };
            let perceptron_mistakes = mistakes(base.clone().algo(Algo::Online))?;
            let winnow_mistakes = mistakes(base.algo(Algo::Winnow).lr(eta))?;
            Ok(CommitteeRow {
                p,
                k,
                n,
                perceptron_mistakes,
                winnow_mistakes,
                perceptron_bound: (p + 1) * k,
            })
        })
        .collect()
}

/// Trains `params` on `ds` on the CPU (every form the experiments run).
fn fit_cpu(ds: &Dataset, params: TrainParams) -> Result<crate::algo::Trained> {
    let params = params.validate()?;
    crate::algo::train(ds, &params, &CpuBackend::new(), None, &mut ())
}

/// One run of `experiment margin`.
#[derive(Debug, Clone, Serialize)]
pub struct MarginRun {
    /// The margin asked of the generator, in input space.
    pub requested_margin: f32,
    /// The true separator's margin in the augmented space [x, 1] (the gamma of the bound).
    pub gamma: f64,
    /// R = max ||[x, 1]||.
    pub radius: f64,
    /// Novikoff's bound (R / gamma)^2.
    pub bound: f64,
    /// The online perceptron's mistakes until an epoch without one (or the epoch cap).
    pub mistakes: u64,
    /// Epochs run.
    pub epochs: usize,
    /// An epoch made no mistake.
    pub converged: bool,
    /// The generator's seed.
    pub seed: u64,
}

/// `experiment margin`: for each margin in `margins` and each of `seeds` seeds, a separable set
/// of `n` points in `d` dimensions with that margin; the online perceptron (w = 0, shuffled)
/// runs until an epoch without mistake (at most `max_epochs`), and its mistakes are set
/// against Novikoff's bound (R / gamma)^2, gamma the true separator's margin in the augmented
/// space. The theorem says mistakes <= bound for every run.
pub fn margin_experiment(
    margins: &[f32],
    seeds: u64,
    n: usize,
    d: usize,
    max_epochs: usize,
    seed: u64,
) -> Result<Vec<MarginRun>> {
    let mut out = Vec::new();
    for (mi, &margin) in margins.iter().enumerate() {
        for s in 0..seeds {
            let run_seed = seed.wrapping_mul(1_000_003) ^ ((mi as u64) << 32 | s);
            let syn = generate(&SynthSpec {
                n,
                d,
                margin,
                noise: 0.0,
                seed: run_seed,
            })?;
            let t = fit_cpu(
                &syn.data,
                TrainParams::for_algo(Algo::Online)
                    .epochs(max_epochs)
                    .patience(0)
                    .seed(run_seed),
            )?;
            let radius = radius(&syn.data.x, d, 1.0);
            let gamma = syn.margin_augmented;
            out.push(MarginRun {
                requested_margin: margin,
                gamma,
                radius,
                bound: (radius / gamma).powi(2),
                mistakes: t.report.mistakes_per_epoch.iter().sum(),
                epochs: t.report.epochs,
                converged: t.report.stop_reason == StopReason::Converged,
                seed: run_seed,
            });
        }
    }
    Ok(out)
}

/// One epoch count of `experiment averaging`: the test error of each model after `epoch`
/// epochs.
#[derive(Debug, Clone, Serialize)]
pub struct AveragingRow {
    /// Epochs trained.
    pub epoch: usize,
    /// The online perceptron's last vector.
    pub last: f64,
    /// The pocket (the batch rule's best epoch by training mistakes).
    pub pocket: f64,
    /// The averaged perceptron (online).
    pub averaged: f64,
    /// The voted perceptron.
    pub voted: f64,
}

/// `experiment averaging` (the comparison of Freund and Schapire, 1999): `n` training and `n`
/// test points in `d` dimensions with a fraction `noise` of the labels flipped; for each
/// epoch count from 1 to `epochs`, the test error of the last, pocket, averaged and voted
/// models trained that long (same seed, so the online forms see the same rows in the same
/// order).
pub fn averaging_experiment(
    n: usize,
    d: usize,
    noise: f32,
    epochs: usize,
    seed: u64,
) -> Result<Vec<AveragingRow>> {
    let syn = generate(&SynthSpec {
        n: 2 * n,
        d,
        margin: 0.0,
        noise,
        seed,
    })?;
    let (train, test) = halves(&syn.data)?;
    let error = |algo: Algo, e: usize| -> Result<f64> {
        let t = fit_cpu(
            &train,
            TrainParams::for_algo(algo).epochs(e).patience(0).seed(seed),
        )?;
        Ok(1.0 - t.model.evaluate(&test, &CpuBackend::new())?.accuracy)
    };
    (1..=epochs)
        .map(|e| {
            Ok(AveragingRow {
                epoch: e,
                last: error(Algo::Online, e)?,
                pocket: error(Algo::Pocket, e)?,
                averaged: error(Algo::Averaged, e)?,
                voted: error(Algo::Voted, e)?,
            })
        })
        .collect()
}

/// The first and second halves of a dense data set's rows.
fn halves(ds: &Dataset) -> Result<(Dataset, Dataset)> {
    let labels = ds.require_labels()?;
    let x = ds.x.view().to_dense(ds.n, ds.d);
    let h = ds.n / 2;
    let part = |r: std::ops::Range<usize>, name: &str| {
        Dataset::new(
            x[r.start * ds.d..r.end * ds.d].to_vec(),
            r.len(),
            ds.d,
            Some(Labels {
                classes: labels.classes.clone(),
                index: labels.index[r].to_vec(),
                ty: labels.ty,
            }),
            name,
        )
    };
    Ok((part(0..h, "train"), part(h..ds.n, "test")))
}

/// One size of `experiment complexity`.
#[derive(Debug, Clone, Serialize)]
pub struct ComplexityRow {
    /// The backend's device.
    pub device: String,
    /// Rows.
    pub n: usize,
    /// Features.
    pub d: usize,
    /// Median seconds of a batch epoch (K = 1).
    pub seconds: f64,
}

/// `experiment complexity`: the median time of a batch epoch on `backend` for each (n, d) of
/// `sizes` (noisy generated data, so every epoch has mistakes to add), `reps` epochs each.
/// The lecture's claim is O(n d) per epoch: the fitted slope of log time against log (n d)
/// near 1 (see [`fitted_slope`]).
pub fn complexity_experiment(
    sizes: &[(usize, usize)],
    reps: usize,
    backend: &dyn Backend,
    seed: u64,
) -> Result<Vec<ComplexityRow>> {
    let mut out = Vec::new();
    for &(n, d) in sizes {
        let syn = generate(&SynthSpec {
            n,
            d,
            margin: 0.0,
            noise: 0.2,
            seed,
        })?;
        let params = TrainParams::for_algo(Algo::Batch)
            .epochs(1)
            .patience(0)
            .validate()?;
        let pb = Problem::new(&syn.data, &params)?;
        let mut bound = backend.bind(pb.view())?;
        let rule = crate::algo::batch::rule(&params, &pb);
        let mut w = pb.initial_weights(&params);
        // One epoch to warm up (uploads, pipelines, caches), then `reps` timed one by one.
        bound.batch_epochs(&mut w, &rule, 1)?;
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            bound.batch_epochs(&mut w, &rule, 1)?;
            times.push(t0.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        out.push(ComplexityRow {
            device: backend.device(),
            n,
            d,
            seconds: times[times.len() / 2],
        });
    }
    Ok(out)
}

/// The least-squares slope of log y against log x over the points with both positive (None
/// with fewer than two distinct x).
pub fn fitted_slope(points: &[(f64, f64)]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    let m = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
    let (mx, my) = (sx / m, sy / m);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (pts.len() >= 2 && sxx > 0.0).then(|| sxy / sxx)
}

/// One point of a time-to-accuracy curve.
#[derive(Debug, Clone, Serialize)]
pub struct TimePoint {
    /// The rule's name.
    pub rule: String,
    /// Where it ran.
    pub device: String,
    /// Epochs it was allowed (patience off).
    pub epochs: usize,
    /// Wall time of the training call: the problem, the upload, the epochs, the scoring.
    pub seconds: f64,
    /// Accuracy on the test rows.
    pub accuracy: f64,
    /// Rows a step and streams, for a stepped run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<(usize, usize)>,
}

/// A rule of a time-to-accuracy run: its name, parameters (epochs and patience are set per
/// point) and backend.
pub struct TimedRule<'a> {
    /// Shown in tables and legends.
    pub name: String,
    /// The training parameters.
    pub params: TrainParams,
    /// Where it trains.
    pub backend: &'a dyn Backend,
}

/// Test accuracy against wall time: each rule trained from scratch on `train` for each of
/// `budgets` epochs (no early stop), timed around the whole training call, scored on `test`
/// on the CPU.
pub fn time_to_accuracy(
    train: &Dataset,
    test: &Dataset,
    rules: &[TimedRule<'_>],
    budgets: &[usize],
) -> Result<Vec<TimePoint>> {
    let cpu = CpuBackend::new();
    let mut out = Vec::new();
    for r in rules {
        for &epochs in budgets {
            let params = r.params.clone().epochs(epochs).patience(0).validate()?;
            let t0 = Instant::now();
            let t = crate::algo::train(train, &params, r.backend, None, &mut ())?;
            let seconds = t0.elapsed().as_secs_f64();
            out.push(TimePoint {
                rule: r.name.clone(),
                device: t.report.device.clone(),
                epochs,
                seconds,
                accuracy: t.model.evaluate(test, &cpu)?.accuracy,
                steps: t.report.minibatch.zip(t.report.streams),
            });
        }
    }
    Ok(out)
}
