//! The report of a finished run: accuracy, and R, the achieved margin and Novikoff's bound of
//! the trained model (the geometry depends on the model's kind, so it lives with the
//! algorithms, which know models; `report` holds the report itself and what it computes from
//! data alone).

use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, DataView, MatrixBuf, StopReason};
use crate::data::{Dataset, Labels};
use crate::model::{Body, Model};
use crate::params::{Params, Scale};
use crate::report::{min_margin, radius, RunFacts, TrainReport};

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
    let ovr = model.kind() == crate::model::ModelKind::Ovr;
    TrainReport {
        algo: params.algo.name().to_string(),
        backend: run.ran.backend.name().to_string(),
        device: run.ran.device,
        n: ds.n,
        d: ds.d,
        epochs: stats.len(),
        converged: run.stop == StopReason::Converged,
        stop_reason: run.stop,
        train_accuracy: Some(correct as f64 / ds.n as f64),
        progressive_accuracy: None,
        scaling: scaling_note(params, model, run.scaled_online),
        held_out: None,
        chosen: None,
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
        streamed_bytes: None,
        arow_bound: run.arow_bound,
        heads: ovr.then(|| model.classes().len()),
        minibatch: run.ran.steps.map(|s| s.0),
        streams: run.ran.steps.map(|s| s.1),
        gpu_plan: run.ran.gpu_plan,
        wrong_rows_per_epoch: ovr
            .then(|| stats.iter().map(|e| e.wrong_rows).collect())
            .flatten(),
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

/// What the report says of the scaling: the model's, and how an online scaling was taken.
fn scaling_note(params: &Params, model: &Model, scaled_online: bool) -> Option<String> {
    let kept = model.scaling()?.kind;
    let floor = match crate::data::scale::online_floor(params.algo) {
        f if f > 0.0 => "; features under 1 are left as they are",
        _ => "",
    };
    Some(match kept {
        Scale::Online if scaled_online => format!(
            "online (each feature divided by its largest magnitude{floor}: the first epoch \
             by the rows before each row and the row itself, later epochs and the model by the \
             whole set's)"
        ),
        Scale::Online => format!(
            "online (each feature divided by its largest magnitude{floor}; this run takes the \
             whole set's, read before the first step)"
        ),
        k => k.name().to_string(),
    })
}
