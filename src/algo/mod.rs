//! Training algorithms, each written once against the backend seam, and the driver that
//! runs one and measures the result (accuracy, R, achieved margin, Novikoff bound).

pub mod batch;
pub mod kernel;
pub mod online;
pub mod winnow;

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{
    cpu::CpuBackend, Backend, BackendKind, EpochStats, HeadRule, Kernel, StopReason, TrainView,
};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::{Model, ModelKind};
use crate::params::{Algo, Init, Mode, MulticlassStrategy, MulticlassUpdate, Params};

/// Receives progress from the training loop (the CLI draws a bar; the library never prints).
pub trait Progress {
    /// Called after each backend call with the epochs done so far and the last epoch's mistakes.
    fn update(&mut self, _epochs_done: usize, _max_epochs: usize, _mistakes: u64) {}
    /// True to receive [`Progress::snapshot`] calls (batch training then runs one epoch per
    /// backend call).
    fn wants_snapshots(&self) -> bool {
        false
    }
    /// The augmented weights after an epoch (batch) or an update (online), with the epoch.
    fn snapshot(&mut self, _epoch: usize, _w: &[f32]) {}
}

impl Progress for () {}

/// What a training run did: the JSON the CLI prints with `--json`, also stored in the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Algorithm name.
    pub algo: String,
    /// Backend that ran the epochs ("cpu" or "gpu").
    pub backend: String,
    /// Device name.
    pub device: String,
    /// Training rows.
    pub n: usize,
    /// Features (without the bias column).
    pub d: usize,
    /// Epochs run.
    pub epochs: usize,
    /// True when the last epoch made no mistake.
    pub converged: bool,
    /// Why training stopped.
    pub stop_reason: StopReason,
    /// Fraction of training rows predicted correctly by the final weights (sgn(0) = +1).
    pub train_accuracy: f64,
    /// Mistakes (J1) per epoch, measured with the weights at the start of that epoch.
    pub mistakes_per_epoch: Vec<u64>,
    /// Perceptron criterion J per epoch.
    pub criterion_per_epoch: Vec<f64>,
    /// Norm of each epoch's weight change.
    pub update_norm_per_epoch: Vec<f64>,
    /// Sum of the mistakes over all epochs (for online: the number of updates).
    pub total_mistakes: u64,
    /// R = max ||[x, bias]|| over the training rows.
    pub radius: f64,
    /// Achieved margin min y w^T x / ||w|| in the augmented space, when positive.
    pub margin: Option<f64>,
    /// Novikoff's bound (R / margin)^2, when the margin is positive.
    pub mistake_bound: Option<f64>,
    /// Wall time of training (binding the data, the epochs, the final scoring).
    pub seconds: f64,
    /// Set when training moved from the GPU to the CPU, with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// A trained model and the report of its training.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The model.
    pub model: Model,
    /// The report.
    pub report: TrainReport,
}

/// R = max over rows of ||[x_i, bias]||.
pub fn radius(x: &[f32], d: usize, bias: f32) -> f64 {
    if d == 0 {
        return bias.abs() as f64;
    }
    let max2 = x
        .par_chunks(d * 4096)
        .map(|block| {
            block
                .chunks_exact(d)
                .map(|r| r.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>())
                .fold(0f64, f64::max)
        })
        .reduce(|| 0.0, f64::max);
    (max2 + (bias as f64).powi(2)).sqrt()
}

/// Initial weights for `params`: `heads * (d + 1)` values.
pub fn initial_weights(d: usize, heads: usize, params: &Params) -> Vec<f32> {
    let mut w = vec![0f32; heads * (d + 1)];
    if params.init == Init::Random {
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ 0x5EED_1417);
        w.iter_mut()
            .for_each(|v| *v = rng.random_range(-0.01..=0.01));
        if !params.fit_bias {
            for h in 0..heads {
                w[h * (d + 1) + d] = 0.0;
            }
        }
    }
    w
}

/// The problem as the backends see it: rule, number of heads, labels in internal form.
struct Problem {
    rule: HeadRule,
    heads: usize,
    y: Vec<f32>,
    kind: ModelKind,
}

fn problem(ds: &Dataset, params: &Params) -> Result<Problem> {
    let labels = ds.require_labels()?;
    let k = labels.classes.len();
    if k < 2 {
        ds.binary_signs()?;
    }
    let multi = k > 2 || params.algo == Algo::Multiclass;
    if !multi {
        return Ok(Problem {
            rule: HeadRule::Binary,
            heads: 1,
            y: labels.signs(),
            kind: match params.algo {
                Algo::Voted => ModelKind::Voted,
                Algo::Kernel => ModelKind::Kernel,
                _ => ModelKind::Binary,
            },
        });
    }
    if matches!(params.algo, Algo::Voted | Algo::Winnow | Algo::Kernel) {
        return Err(Error::data(
            &ds.source,
            format!(
                "--algo {} is binary, but the labels have {k} classes; use --algo multiclass (or online, batch, pocket, averaged)",
                params.algo.name()
            ),
        ));
    }
    let (rule, kind) = match (params.multiclass, params.multiclass_update) {
        (MulticlassStrategy::Ovr, _) => (HeadRule::OneVsRest, ModelKind::Ovr),
        (_, MulticlassUpdate::All) => (HeadRule::MulticlassAll, ModelKind::Multiclass),
        (_, MulticlassUpdate::Argmax) => (HeadRule::MulticlassArgmax, ModelKind::Multiclass),
    };
    Ok(Problem {
        rule,
        heads: k,
        y: labels.index.iter().map(|&c| c as f32).collect(),
        kind,
    })
}

/// Trains the algorithm `params.algo` on `ds`: binary for two classes, multiclass (or
/// one-vs-rest) for more, in the online or batch form.
///
/// Batch epochs run on `backend`; if it is a GPU that fails mid-training and `fallback` is
/// given, training resumes from the last completed epoch on `fallback` and the report says
/// so. Online forms are sequential and always run on the host CPU; the report's `backend`
/// says "cpu" then.
pub fn train(
    ds: &Dataset,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    let pb = problem(ds, params)?;
    let classes = ds.require_labels()?.classes.clone();
    let bias = if params.fit_bias && params.algo != Algo::Winnow {
        1.0
    } else {
        0.0
    };
    let view = TrainView {
        x: &ds.x,
        y: &pb.y,
        n: ds.n,
        d: ds.d,
        bias,
        heads: pb.heads,
    };
    let t0 = Instant::now();
    let cpu = CpuBackend::new();
    let mut w = initial_weights(ds.d, pb.heads, params);
    let mut note = None;
    let mut voted = None;
    let mut dual = None;
    let (stats, stop, used, scores): (Vec<EpochStats>, StopReason, &dyn Backend, Option<Vec<f32>>) =
        match (params.algo, params.effective_mode()) {
            (Algo::Kernel, _) => {
                let kernel = params.kernel.unwrap_or(Kernel::Linear);
                let run = |b: &dyn Backend, progress: &mut dyn Progress| {
                    kernel::train(b, view.data(), &pb.y, &kernel, params, progress)
                };
                let (out, used): (kernel::Dual, &dyn Backend) =
                    match (run(backend, progress), fallback) {
                        (Ok(out), _) => (out, backend),
                        (Err(e @ (Error::Gpu(_) | Error::TooLarge(_))), Some(fb))
                            if backend.kind() == BackendKind::Gpu =>
                        {
                            note = Some(format!("GPU failed ({e}); trained on {}", fb.device()));
                            (run(fb, progress)?, fb)
                        }
                        (Err(e), _) => return Err(e),
                    };
                let (stats, stop, scores) = (out.stats.clone(), out.stop, out.scores.clone());
                dual = Some((out, kernel));
                (stats, stop, used, Some(scores))
            }
            (Algo::Winnow, Mode::Online) => {
                let (wn, stats, stop) = winnow::train(view, params, progress);
                w = wn;
                (stats, stop, &cpu, None)
            }
            (_, Mode::Online) => {
                let keep = online::Keep {
                    average: params.algo == Algo::Averaged,
                    voted: (params.algo == Algo::Voted).then_some(params.max_vectors),
                };
                let out = online::train(view, params, pb.rule, keep, &mut w, progress)?;
                if let Some(avg) = out.average {
                    w = avg;
                }
                voted = out.voted;
                (out.stats, out.stop, &cpu, None)
            }
            (_, Mode::Batch) => {
                let rule = batch::rule(params, pb.rule);
                let mut stats = Vec::new();
                let run = |b: &dyn Backend,
                           w: &mut Vec<f32>,
                           stats: &mut Vec<EpochStats>,
                           progress: &mut dyn Progress| {
                    let mut bound = b.bind(view)?;
                    let per_call = bound.epochs_per_call();
                    let stop =
                        batch::train(&mut *bound, params, &rule, w, stats, per_call, progress)?;
                    let ex = bound.extras()?;
                    if let Some((pw, _)) = ex.pocket.filter(|_| rule.pocket) {
                        *w = pw;
                    }
                    if let Some(sum) = ex.average_sum.filter(|_| rule.average) {
                        let t = stats.len().max(1) as f32;
                        *w = sum.iter().map(|v| v / t).collect();
                    }
                    if rule.multiplicative {
                        // Log-weights to the weights used, exp(lw - max) in (0, 1]; no bias.
                        let top = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        w.iter_mut().for_each(|v| *v = (*v - top).exp());
                        let last = w.len() - 1;
                        w[last] = 0.0;
                    }
                    let scores = bound.scores(w)?;
                    Ok::<_, Error>((stop, scores))
                };
                match (run(backend, &mut w, &mut stats, progress), fallback) {
                    (Ok((stop, scores)), _) => (stats, stop, backend, Some(scores)),
                    (Err(e @ (Error::Gpu(_) | Error::TooLarge(_))), Some(fb))
                        if backend.kind() == BackendKind::Gpu =>
                    {
                        note = Some(format!(
                            "GPU failed after {} epochs ({e}); finished on {}",
                            stats.len(),
                            fb.device()
                        ));
                        // Pocket and average are kept by the bound data, so a resumed run
                        // restarts them; the weights and the trace carry on.
                        let (stop, scores) = run(fb, &mut w, &mut stats, progress)?;
                        (stats, stop, fb, Some(scores))
                    }
                    (Err(e), _) => return Err(e),
                }
            }
        };
    let seconds = t0.elapsed().as_secs_f64();
    let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
    if !finite(&w)
        || voted
            .as_ref()
            .is_some_and(|(vs, _)| !vs.iter().all(|v| finite(v)))
    {
        let top = ds.x.iter().fold(0f32, |m, v| m.max(v.abs()));
        return Err(Error::data(
            &ds.source,
            format!(
                "training overflowed: the weights left the f32 range (the largest feature is {top:e}); \
                 rescale the features or lower --lr"
            ),
        ));
    }
    let placeholder = TrainReport::empty();
    let mut model = match (pb.kind, voted) {
        (ModelKind::Kernel, _) => {
            let (out, kernel) = dual.take().expect("kernel training ran");
            Model::kernel(
                classes,
                ds,
                &out.support,
                out.coef,
                kernel,
                params,
                placeholder,
            )
        }
        (ModelKind::Voted, Some((vecs, counts))) => {
            let flat: Vec<f32> = vecs.concat();
            Model::with_rows(
                ModelKind::Voted,
                classes,
                ds.d,
                &flat,
                Some(counts),
                params,
                placeholder,
            )
        }
        (ModelKind::Binary, _) => Model::new(classes, ds.d, &w, params, placeholder),
        (kind, _) => Model::with_rows(kind, classes, ds.d, &w, None, params, placeholder),
    };
    let raw = match scores {
        Some(s) if model.kind != ModelKind::Voted => s,
        _ => model.raw_scores(ds, &cpu)?,
    };
    let report = summarize(
        ds, params, &model, &raw, bias, stats, stop, used, seconds, note,
    );
    model.training = Some(report.clone());
    Ok(Trained { model, report })
}

impl TrainReport {
    fn empty() -> Self {
        TrainReport {
            algo: String::new(),
            backend: String::new(),
            device: String::new(),
            n: 0,
            d: 0,
            epochs: 0,
            converged: false,
            stop_reason: StopReason::MaxEpochs,
            train_accuracy: 0.0,
            mistakes_per_epoch: Vec::new(),
            criterion_per_epoch: Vec::new(),
            update_norm_per_epoch: Vec::new(),
            total_mistakes: 0,
            radius: 0.0,
            margin: None,
            mistake_bound: None,
            seconds: 0.0,
            fallback: None,
        }
    }
}

/// The report from the run's figures (shared by the linear and kernel summaries).
#[allow(clippy::too_many_arguments)]
fn report(
    ds: &Dataset,
    params: &Params,
    stats: Vec<EpochStats>,
    stop: StopReason,
    used: &dyn Backend,
    seconds: f64,
    fallback: Option<String>,
    correct: usize,
    radius: f64,
    margin: Option<f64>,
) -> TrainReport {
    TrainReport {
        algo: params.algo.name().to_string(),
        backend: used.kind().name().to_string(),
        device: used.device(),
        n: ds.n,
        d: ds.d,
        epochs: stats.len(),
        converged: stop == StopReason::Converged,
        stop_reason: stop,
        train_accuracy: correct as f64 / ds.n as f64,
        mistakes_per_epoch: stats.iter().map(|e| e.mistakes).collect(),
        criterion_per_epoch: stats.iter().map(|e| e.criterion).collect(),
        update_norm_per_epoch: stats.iter().map(|e| e.update_norm).collect(),
        total_mistakes: stats.iter().map(|e| e.mistakes).sum(),
        radius,
        margin,
        mistake_bound: margin.map(|g| (radius / g).powi(2)),
        seconds,
        fallback,
    }
}

/// Smallest y_i f(x_i) over the training rows (labels as class 1 = +1).
fn min_margin(raw: &[f32], labels: &crate::data::Labels) -> f64 {
    raw.iter()
        .zip(&labels.index)
        .map(|(s, &c)| (*s as f64) * if c == 1 { 1.0 } else { -1.0 })
        .fold(f64::INFINITY, f64::min)
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    ds: &Dataset,
    params: &Params,
    model: &Model,
    raw: &[f32],
    bias: f32,
    stats: Vec<EpochStats>,
    stop: StopReason,
    used: &dyn Backend,
    seconds: f64,
    fallback: Option<String>,
) -> TrainReport {
    let labels = ds.labels.as_ref().expect("checked by problem()");
    let pred = model.predict(raw);
    let correct = pred
        .iter()
        .zip(&labels.index)
        .filter(|(p, t)| p == t)
        .count();
    let (radius, margin) = geometry(ds, model, raw, labels, bias);
    report(
        ds, params, stats, stop, used, seconds, fallback, correct, radius, margin,
    )
}

/// R and the achieved margin for Novikoff's bound. Binary linear models: R = max ||[x, bias]||
/// and gamma = min y f(x) / ||w||. Kernel models, in the kernel's feature space:
/// R^2 = max K(x, x) + bias^2 and gamma = min y f(x) / ||f||, with ||f||^2 = sum_s c_s f(sv_s).
/// Other kinds have no single hyperplane: R only.
fn geometry(
    ds: &Dataset,
    model: &Model,
    raw: &[f32],
    labels: &crate::data::Labels,
    bias: f32,
) -> (f64, Option<f64>) {
    let positive = |g: f64, norm2: f64| (norm2 > 0.0 && g > 0.0).then(|| g / norm2.sqrt());
    match model.kind {
        ModelKind::Binary => {
            let norm2 = model
                .augmented()
                .iter()
                .map(|&v| (v as f64).powi(2))
                .sum::<f64>();
            (
                radius(&ds.x, ds.d, bias),
                positive(min_margin(raw, labels), norm2),
            )
        }
        ModelKind::Kernel => {
            let kernel = model.kernel.unwrap_or(Kernel::Linear);
            let r2 = (0..ds.n)
                .map(|i| {
                    let xx = crate::backend::dot(ds.row(i), ds.row(i));
                    kernel.eval(xx, xx, xx) as f64
                })
                .fold(0f64, f64::max)
                + (bias * bias) as f64;
            let coef = model.dual_coef.clone().unwrap_or_default();
            let sv = model.support_vectors.clone().unwrap_or_default();
            let flat: Vec<f32> = sv.concat();
            let svv = crate::backend::DataView {
                x: &flat,
                n: sv.len(),
                d: ds.d,
                bias,
            };
            let idx: Vec<u32> = (0..sv.len() as u32).collect();
            let norm2: f64 = CpuBackend::new()
                .kernel_scores(svv, svv, &idx, &coef, &kernel)
                .map(|f| {
                    f.iter()
                        .zip(&coef)
                        .map(|(f, c)| (*f as f64) * (*c as f64))
                        .sum()
                })
                .unwrap_or(0.0);
            (r2.sqrt(), positive(min_margin(raw, labels), norm2))
        }
        _ => (radius(&ds.x, ds.d, bias), None),
    }
}
