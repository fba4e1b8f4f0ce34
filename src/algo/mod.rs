//! Training algorithms, each written once against the backend seam, and the driver that
//! runs one and measures the result (accuracy, R, achieved margin, Novikoff bound).

pub mod batch;
pub mod online;

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{cpu::CpuBackend, Backend, BackendKind, EpochStats, StopReason, TrainView};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::params::{Algo, Init, Params};

/// Receives progress from the training loop (the CLI draws a bar; the library never prints).
pub trait Progress {
    /// Called after each backend call with the epochs done so far and the last epoch's mistakes.
    fn update(&mut self, _epochs_done: usize, _max_epochs: usize, _mistakes: u64) {}
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

/// Initial weights for `params` (`d + 1` entries).
pub fn initial_weights(d: usize, params: &Params) -> Vec<f32> {
    let mut w = vec![0f32; d + 1];
    if params.init == Init::Random {
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ 0x5EED_1417);
        w.iter_mut()
            .for_each(|v| *v = rng.random_range(-0.01..=0.01));
        if !params.fit_bias {
            w[d] = 0.0;
        }
    }
    w
}

/// Trains a binary perceptron on `ds` with `params`.
///
/// Batch epochs run on `backend`; if it is a GPU that fails mid-training and `fallback` is
/// given, training resumes from the last completed epoch on `fallback` and the report says
/// so. The online algorithm is sequential and always runs on the host CPU; the report's
/// `backend` says "cpu" then.
pub fn train(
    ds: &Dataset,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    let y = ds.binary_signs()?;
    let classes = ds.require_labels()?.classes.clone();
    let bias = if params.fit_bias { 1.0 } else { 0.0 };
    let view = TrainView {
        x: &ds.x,
        y: &y,
        n: ds.n,
        d: ds.d,
        bias,
        heads: 1,
    };
    let t0 = Instant::now();
    let mut w = initial_weights(ds.d, params);
    let cpu = CpuBackend::new();
    let mut note = None;
    let (stats, stop, used, scores): (Vec<EpochStats>, StopReason, &dyn Backend, Vec<f32>) =
        match params.algo {
            Algo::Online => {
                let (stats, stop) = online::train(view, params, &mut w, progress);
                let scores = cpu.scores(view.data(), &w)?;
                (stats, stop, &cpu, scores)
            }
            Algo::Batch => {
                let mut stats = Vec::new();
                let attempt = (|| {
                    let mut bound = backend.bind(view)?;
                    let per_call = bound.epochs_per_call();
                    let stop =
                        batch::train(&mut *bound, params, &mut w, &mut stats, per_call, progress)?;
                    let scores = bound.scores(&w)?;
                    Ok::<_, Error>((stop, scores))
                })();
                match (attempt, fallback) {
                    (Ok((stop, scores)), _) => (stats, stop, backend, scores),
                    (Err(e @ (Error::Gpu(_) | Error::TooLarge(_))), Some(fb))
                        if backend.kind() == BackendKind::Gpu =>
                    {
                        note = Some(format!(
                            "GPU failed after {} epochs ({e}); finished on {}",
                            stats.len(),
                            fb.device()
                        ));
                        let mut bound = fb.bind(view)?;
                        let per_call = bound.epochs_per_call();
                        let stop = batch::train(
                            &mut *bound,
                            params,
                            &mut w,
                            &mut stats,
                            per_call,
                            progress,
                        )?;
                        let scores = bound.scores(&w)?;
                        (stats, stop, fb, scores)
                    }
                    (Err(e), _) => return Err(e),
                }
            }
        };
    let seconds = t0.elapsed().as_secs_f64();
    let report = summarize(
        ds, params, &y, &w, bias, stats, stop, used, scores, seconds, note,
    );
    let model = Model::new(classes, ds.d, &w, params, report.clone());
    Ok(Trained { model, report })
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    ds: &Dataset,
    params: &Params,
    y: &[f32],
    w: &[f32],
    bias: f32,
    stats: Vec<EpochStats>,
    stop: StopReason,
    used: &dyn Backend,
    scores: Vec<f32>,
    seconds: f64,
    fallback: Option<String>,
) -> TrainReport {
    let correct = scores
        .iter()
        .zip(y)
        .filter(|(s, y)| (**s >= 0.0) == (**y > 0.0))
        .count();
    let wnorm = w.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
    let min_margin = scores
        .iter()
        .zip(y)
        .map(|(s, y)| (*s as f64) * (*y as f64))
        .fold(f64::INFINITY, f64::min);
    let radius = radius(&ds.x, ds.d, bias);
    let margin = (wnorm > 0.0 && min_margin > 0.0).then(|| min_margin / wnorm);
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
