//! The training report (what `train --json` prints and the model file keeps) and its geometry:
//! R, the achieved margin gamma and Novikoff's bound (R / gamma)^2, computed once per model
//! kind.

use crate::backend::simd::Elem;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{
    cpu::CpuBackend, Backend, BackendKind, DataView, EpochStats, MatrixBuf, StopReason,
};
use crate::data::{Dataset, Labels};
use crate::model::{Body, Model};
use crate::params::Params;

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
    /// The epoch (1-based) with the fewest monitored mistakes (validation mistakes when there
    /// is a validation set, else training mistakes); 0 in reports of earlier versions.
    #[serde(default)]
    pub best_epoch: usize,
    /// Rows held out for validation, when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_validation: Option<usize>,
    /// Accuracy of the model on the validation rows, when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_accuracy: Option<f64>,
    /// Validation accuracy per epoch (batch forms: of the weights the epoch started with,
    /// like its mistakes; online forms: of the model after the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_accuracy_per_epoch: Option<Vec<f64>>,
    /// How X was stored for the epochs (f32, f16, u8 or i8); absent in earlier reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

/// Where and how long a run went: the part of the report the algorithm itself cannot know.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// CPU or GPU.
    pub backend: BackendKind,
    /// The device's name.
    pub device: String,
    /// Set when training moved from the primary backend to the fallback, with the reason.
    pub fallback: Option<String>,
}

impl Ran {
    /// A run on `backend`, without fallback.
    pub fn on(backend: &dyn Backend) -> Self {
        Ran {
            backend: backend.kind(),
            device: backend.device(),
            fallback: None,
        }
    }
}

/// The epochs of a run, how it stopped and where it ran, with its wall time.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    /// Per-epoch statistics.
    pub stats: Vec<EpochStats>,
    /// Why training stopped.
    pub stop: StopReason,
    /// Where it ran.
    pub ran: Ran,
    /// Wall time in seconds.
    pub seconds: f64,
    /// The epoch (1-based) with the fewest monitored mistakes.
    pub best_epoch: usize,
    /// Validation rows and the final model's accuracy on them, when there were any.
    pub validation: Option<(usize, f64)>,
    /// How X was stored for the epochs.
    pub storage: crate::backend::Storage,
    /// R, when computed already (a data-parallel run: the largest over the processes' rows).
    pub radius: Option<f64>,
}

/// The report of a finished run: accuracy from the training scores `raw` (the model's heads
/// per row), the geometry of the model on `ds` (bias column value `bias`), and the run's facts.
pub fn build(
    ds: &Dataset,
    params: &Params,
    model: &Model,
    raw: &[f32],
    bias: f32,
    run: RunFacts,
) -> TrainReport {
    let labels = ds
        .labels
        .as_ref()
        .expect("training data is labelled (checked before training)");
    let correct = model
        .predict(raw)
        .iter()
        .zip(&labels.index)
        .filter(|(p, t)| p == t)
        .count();
    let (radius, margin) = geometry(ds, model, raw, labels, bias, run.radius);
    let stats = &run.stats;
    TrainReport {
        algo: params.algo.name().to_string(),
        backend: run.ran.backend.name().to_string(),
        device: run.ran.device,
        n: ds.n,
        d: ds.d,
        epochs: stats.len(),
        converged: run.stop == StopReason::Converged,
        stop_reason: run.stop,
        train_accuracy: correct as f64 / ds.n as f64,
        mistakes_per_epoch: stats.iter().map(|e| e.mistakes).collect(),
        criterion_per_epoch: stats.iter().map(|e| e.criterion).collect(),
        update_norm_per_epoch: stats.iter().map(|e| e.update_norm).collect(),
        total_mistakes: stats.iter().map(|e| e.mistakes).sum(),
        radius,
        margin,
        mistake_bound: margin.map(|g| (radius / g).powi(2)),
        seconds: run.seconds,
        fallback: run.ran.fallback,
        storage: Some(run.storage.name().to_string()),
        best_epoch: run.best_epoch,
        n_validation: run.validation.map(|v| v.0),
        validation_accuracy: run.validation.map(|v| v.1),
        validation_accuracy_per_epoch: run.validation.map(|(nv, _)| {
            stats
                .iter()
                .map(|e| 1.0 - e.val_mistakes.unwrap_or(0) as f64 / nv.max(1) as f64)
                .collect()
        }),
    }
}

/// R = max over rows of ||[x_i, bias]||.
pub fn radius(x: &MatrixBuf, d: usize, bias: f32) -> f64 {
    if d == 0 {
        return bias.abs() as f64;
    }
    let x = match x {
        MatrixBuf::Dense(_) | MatrixBuf::Mapped(_) => x.stored_values(),
        MatrixBuf::Csr(c) => {
            let max2 = c
                .indptr
                .windows(2)
                .map(|w| {
                    c.values[w[0]..w[1]]
                        .iter()
                        .map(|&v| (v as f64) * (v as f64))
                        .sum::<f64>()
                })
                .fold(0f64, f64::max);
            return (max2 + (bias as f64).powi(2)).sqrt();
        }
    };
    // (Values in their storage, widened one at a time: a compact memory map is not copied.)
    let max2 = crate::with_features!(x, x => x
        .par_chunks(d * 4096)
        .map(|block| {
            block
                .chunks_exact(d)
                .map(|r| {
                    r.iter()
                        .map(|&v| (v.widen() as f64) * (v.widen() as f64))
                        .sum::<f64>()
                })
                .fold(0f64, f64::max)
        })
        .reduce(|| 0.0, f64::max));
    (max2 + (bias as f64).powi(2)).sqrt()
}

/// Smallest y_i f(x_i) over the training rows (labels as class 1 = +1).
fn min_margin(raw: &[f32], labels: &Labels) -> f64 {
    raw.iter()
        .zip(&labels.index)
        .map(|(s, &c)| (*s as f64) * if c == 1 { 1.0 } else { -1.0 })
        .fold(f64::INFINITY, f64::min)
}

/// R and the achieved margin for Novikoff's bound. Binary linear models: R = max ||[x, bias]||
/// and gamma = min y f(x) / ||w||. Kernel models, in the kernel's feature space:
/// R^2 = max K(x, x) + bias^2 and gamma = min y f(x) / ||f||, with ||f||^2 = sum_s c_s f(sv_s).
/// Other kinds have no single hyperplane: R only.
fn geometry(
    ds: &Dataset,
    model: &Model,
    raw: &[f32],
    labels: &Labels,
    bias: f32,
    known_radius: Option<f64>,
) -> (f64, Option<f64>) {
    let radius =
        |x: &MatrixBuf, d: usize, bias: f32| known_radius.unwrap_or_else(|| radius(x, d, bias));
    let positive = |g: f64, norm2: f64| (norm2 > 0.0 && g > 0.0).then(|| g / norm2.sqrt());
    match model.body() {
        Body::Binary(h) => {
            let norm2 = h
                .weights
                .iter()
                .chain([&h.bias])
                .map(|&v| (v as f64).powi(2))
                .sum::<f64>();
            (
                radius(&ds.x, ds.d, bias),
                positive(min_margin(raw, labels), norm2),
            )
        }
        Body::Kernel(k) => {
            let r2 = (0..ds.n)
                .map(|i| {
                    let mut buf = Vec::new();
                    let xx = ds.view().row(i, ds.d, &mut buf).sq_norm();
                    k.kernel.eval(xx, xx, xx) as f64
                })
                .fold(0f64, f64::max)
                + (bias * bias) as f64;
            let flat: Vec<f32> = k.support_vectors.concat();
            let svv = DataView {
                x: (&flat).into(),
                n: k.support_vectors.len(),
                d: ds.d,
                bias,
            };
            let idx: Vec<u32> = (0..svv.n as u32).collect();
            let norm2: f64 = CpuBackend::new()
                .kernel_scores(svv, svv, &idx, &k.coef, &k.kernel)
                .map(|f| {
                    f.iter()
                        .zip(&k.coef)
                        .map(|(f, c)| (*f as f64) * (*c as f64))
                        .sum()
                })
                .unwrap_or(0.0);
            (r2.sqrt(), positive(min_margin(raw, labels), norm2))
        }
        _ => (radius(&ds.x, ds.d, bias), None),
    }
}
