//! The training report (what `train --json` prints and the model file keeps), and what of its
//! geometry comes from the data alone: R and the smallest margin of the training scores. The
//! report of a trained model (its accuracy, margin gamma and Novikoff's bound (R / gamma)^2,
//! per model kind) is built in `algo::summary`, which knows models.

use crate::matrix::Elem;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendKind, EpochStats, MatrixBuf, StopReason};
use crate::data::Labels;

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
    /// Fraction of training rows predicted correctly by the final model (sgn(0) = +1);
    /// absent for a streamed run, whose rows are gone by the end (see
    /// `progressive_accuracy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_accuracy: Option<f64>,
    /// A streamed run: the fraction of rows the model predicted correctly as it met each row,
    /// before the row's update (Vowpal Wabbit's progressive validation). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_accuracy: Option<f64>,
    /// The scaling the model keeps (online, maxabs, standard, minmax), and for online
    /// scaling how the run took it; absent for none (and in reports of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<String>,
    /// How the front end chose this run where the user named no rule (a large Vowpal Wabbit
    /// file's streamed pass), in words; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
    /// Rows held out of the training rows for the stopping rule, and why, when the run chose
    /// to (a large set with no validation asked for); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<String>,
    /// Mistakes (J1) per epoch, measured with the weights at the start of that epoch. For a
    /// one-vs-rest model, head mistakes: a row counts once in each head that is wrong on it
    /// (see `heads`).
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
    /// One-vs-rest: the heads the mistakes are counted over (each epoch's mistakes are at
    /// most `heads` x n); absent for every other model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<usize>,
    /// One-vs-rest: per epoch, the training rows whose highest head was not their class (the
    /// rows the prediction rule got wrong; batch forms: by the weights the epoch started with,
    /// online forms: as each row was met), where `mistakes_per_epoch` counts (row, head) errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong_rows_per_epoch: Option<Vec<u64>>,
    /// The online perceptron in steps of this many rows (with `streams`), when it ran so;
    /// absent for the sequential rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minibatch: Option<usize>,
    /// The streams of a stepped run, mixed by their mean after every epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// How the GPU ran a stepped run (by subgroup lanes or by the workgroup's threads), when
    /// it ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_plan: Option<String>,
    /// How X was stored for the epochs (f32, f16, u8 or i8); absent in earlier reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// A streamed run (one pass over rows read in blocks, never held): the bytes of input it
    /// read. Its accuracy is then `progressive_accuracy` and its margin unknown. Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed_bytes: Option<u64>,
    /// AROW with a full covariance, binary: its mistakes and the paper's bound on them where
    /// the trained model separates the training rows. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arow_bound: Option<ArowBound>,
}

/// AROW's mistake bound (Crammer, Kulesza and Dredze, NIPS 2009, Theorem 2) for AROW with a
/// full covariance: for every u, M <= sqrt(r |u|^2 + u^T X_A u) sqrt(log det(I + X_A / r) + U)
/// plus the sum of u's hinge losses on the rows stepped on, minus U, X_A the sum of x x^T over
/// those rows, U the steps that were not mistakes. Evaluated, as Novikoff's bound is, at the
/// trained weights scaled to a functional margin of 1 on every training row,
/// u = w / min y w.x (all hinge losses 0), so it is given where that margin is positive:
/// M <= sqrt(r |w|^2 + w^T X_A w) sqrt(log det(I + X_A / r) + U) / min y w.x - U.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArowBound {
    /// Mistakes M: steps on rows whose margin y w.x was at most 0 (a wrong prediction).
    pub mistakes: u64,
    /// Steps U on rows predicted right whose margin was below 1.
    pub corrections: u64,
    /// log det(I + X_A / r).
    pub log_det: f64,
    /// The bound on M, where the trained weights separate the training rows.
    pub bound: Option<f64>,
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
    /// The online perceptron in steps and streams: (rows per step, streams).
    pub steps: Option<(usize, usize)>,
    /// How a GPU ran the steps, in words (`StepsBound::plan`).
    pub gpu_plan: Option<String>,
}

impl Ran {
    /// A run on `backend`, without fallback.
    pub fn on(backend: &dyn Backend) -> Self {
        Ran {
            backend: backend.kind(),
            device: backend.device(),
            fallback: None,
            steps: None,
            gpu_plan: None,
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
    pub storage: crate::matrix::Storage,
    /// AROW's mistake bound, where the rule gave one.
    pub arow_bound: Option<ArowBound>,
    /// R, when computed already (a data-parallel run: the largest over the processes' rows;
    /// rows scaled as read: R of the scaled rows).
    pub radius: Option<f64>,
    /// The first epoch scaled each row by the magnitudes of the rows read so far
    /// ([`Problem::scales_online`](crate::algo::Problem::scales_online)).
    pub scaled_online: bool,
}

/// R = max ||[x, bias]|| of `n` rows of `x` (`d` features) as `sc` scales them, the rows
/// scaled 16 MiB at a time, never all at once: [`radius`] of the scaled copy, to the bit.
pub fn radius_scaled(
    sc: &crate::data::scale::Scaler,
    x: &MatrixBuf,
    n: usize,
    d: usize,
    bias: f32,
    source: &std::path::Path,
) -> crate::error::Result<f64> {
    let mut r = radius(&MatrixBuf::Dense(Vec::new()), 0, bias);
    sc.for_scaled_blocks(
        x,
        n,
        d,
        source,
        crate::data::scale::Overflow::Error,
        |_, part| {
            r = r.max(radius(&part, d, bias));
            Ok(())
        },
    )?;
    Ok(r)
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
pub(crate) fn min_margin(raw: &[f32], labels: &Labels) -> f64 {
    raw.iter()
        .zip(&labels.index)
        .map(|(s, &c)| (*s as f64) * if c == 1 { 1.0 } else { -1.0 })
        .fold(f64::INFINITY, f64::min)
}
