//! Training algorithms, each written once against the backend seam, and the dispatcher that
//! runs one and reports on the result.
//!
//! Every algorithm module has the same entry, `fit(problem, params, backends, progress) ->
//! Result<Fitted>`: the [`Problem`] is the data in the backends' form, [`Backends`] the
//! hardware (with the GPU-to-CPU fallback written once, in [`Backends::resume`]), and
//! [`Fitted`] the model body, the per-epoch statistics, why it stopped, the training scores
//! when the algorithm has them, and where it ran. [`train`] only builds the problem, picks
//! the algorithm ([`fitter`]), checks the result is finite, and builds the model and report.

pub mod batch;
pub mod kernel;
pub mod online;
pub mod winnow;

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{
    cpu::CpuBackend, Backend, BackendKind, EpochStats, HeadRule, StopReason, TrainView,
};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::{Body, Hyperplane, Model, ModelKind, Rows};
use crate::params::{Algo, Init, Mode, MulticlassStrategy, MulticlassUpdate, Params};
use crate::report::{self, Ran, RunFacts};

pub use crate::report::TrainReport;

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

/// A trained model and the report of its training.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The model (its report attached).
    pub model: Model,
    /// The report.
    pub report: TrainReport,
}

/// The data as the algorithms see it: features with the bias column value, labels in
/// internal form (±1 for binary rules, the class index otherwise), the per-row rule, and the
/// kind of model the run makes.
pub struct Problem<'a> {
    /// The data set.
    pub ds: &'a Dataset,
    /// Labels in internal form.
    pub y: Vec<f32>,
    /// Value of the implicit bias column (1, or 0 without a bias and for Winnow).
    pub bias: f32,
    /// How a row's scores decide mistakes and updates.
    pub rule: HeadRule,
    /// Number of weight vectors.
    pub heads: usize,
    /// The kind of model the run makes.
    pub kind: ModelKind,
    /// Whether the model keeps a bias.
    pub fit_bias: bool,
    /// Weights to start from instead of [`initial_weights`] (warm start; for Winnow the
    /// log-weights), `heads * (d + 1)` of them.
    pub start: Option<Vec<f32>>,
}

impl<'a> Problem<'a> {
    /// The problem for `params` on `ds`: binary for two classes (or one, refused later),
    /// multiclass or one-vs-rest for more, or when asked for.
    pub fn new(ds: &'a Dataset, params: &Params) -> Result<Self> {
        let labels = ds.require_labels()?;
        let k = labels.classes.len();
        if k < 2 {
            ds.binary_signs()?;
        }
        let bias = if params.fit_bias && params.algo != Algo::Winnow {
            1.0
        } else {
            0.0
        };
        let pb = |rule, heads, y, kind| Problem {
            ds,
            y,
            bias,
            rule,
            heads,
            kind,
            fit_bias: params.fit_bias,
            start: None,
        };
        if k <= 2 && params.algo != Algo::Multiclass {
            let kind = match params.algo {
                Algo::Voted => ModelKind::Voted,
                Algo::Kernel => ModelKind::Kernel,
                _ => ModelKind::Binary,
            };
            return Ok(pb(HeadRule::Binary, 1, labels.signs(), kind));
        }
        if matches!(params.algo, Algo::Voted | Algo::Winnow | Algo::Kernel) {
            return Err(Error::BinaryOnly {
                path: ds.source.clone(),
                algo: params.algo.name(),
                classes: k,
            });
        }
        let (rule, kind) = match (params.multiclass, params.multiclass_update) {
            (MulticlassStrategy::Ovr, _) => (HeadRule::OneVsRest, ModelKind::Ovr),
            (_, MulticlassUpdate::All) => (HeadRule::MulticlassAll, ModelKind::Multiclass),
            (_, MulticlassUpdate::Argmax) => (HeadRule::MulticlassArgmax, ModelKind::Multiclass),
        };
        let y = labels.index.iter().map(|&c| c as f32).collect();
        Ok(pb(rule, k, y, kind))
    }

    /// Continues from `model` (warm start): the same features, kind and classes as this
    /// problem, else an error saying which differs. Binary, multiclass and one-vs-rest models
    /// can be continued; voted and kernel models cannot (their state is not a weight vector).
    pub fn continue_from(&mut self, model: &Model, params: &Params) -> Result<()> {
        let mismatch = |msg: String| Error::Mismatch {
            path: self.ds.source.clone(),
            msg: format!("cannot continue training from the given model: {msg}"),
        };
        if model.n_features() != self.ds.d {
            return Err(mismatch(format!(
                "it has {} features, the data {}",
                model.n_features(),
                self.ds.d
            )));
        }
        if model.kind() != self.kind {
            return Err(mismatch(format!(
                "it is a {} model, and this run makes a {} model",
                model.kind().name(),
                self.kind.name()
            )));
        }
        if matches!(self.kind, ModelKind::Voted | ModelKind::Kernel) {
            return Err(mismatch(format!(
                "a {} model keeps no single weight vector to start from",
                self.kind.name()
            )));
        }
        let classes = &self.ds.require_labels()?.classes;
        let same = classes.len() == model.classes().len()
            && classes
                .iter()
                .zip(model.classes())
                .all(|(a, b)| crate::data::same_class(a, b));
        if !same {
            return Err(mismatch(format!(
                "its classes are {}, the data's {}",
                model.classes().join(", "),
                classes.join(", ")
            )));
        }
        let mut w = model.augmented();
        if params.algo == Algo::Winnow {
            // Winnow runs on log-weights; its weights are in (0, 1] and its bias is 0.
            let d = self.ds.d;
            for (j, v) in w.iter_mut().enumerate() {
                *v = if j == d {
                    0.0
                } else {
                    v.max(f32::MIN_POSITIVE).ln()
                };
            }
        }
        self.start = Some(w);
        Ok(())
    }

    /// The weights training starts from: the warm start, or [`initial_weights`].
    pub fn initial_weights(&self, params: &Params) -> Vec<f32> {
        match &self.start {
            Some(w) => w.clone(),
            None => initial_weights(self.ds.d, self.heads, params),
        }
    }

    /// The view the backends bind.
    pub fn view(&self) -> TrainView<'_> {
        TrainView {
            x: &self.ds.x,
            y: &self.y,
            n: self.ds.n,
            d: self.ds.d,
            bias: self.bias,
            heads: self.heads,
        }
    }

    /// The model body of augmented weights `w` (`heads * (d + 1)`, the problem's linear kind).
    pub fn linear_body(&self, w: &[f32]) -> Body {
        let d = self.ds.d;
        let rows = Rows::from_augmented(w, d, self.fit_bias);
        match self.kind {
            ModelKind::Multiclass => Body::Multiclass(rows),
            ModelKind::Ovr => Body::Ovr(rows),
            _ => Body::Binary(Hyperplane {
                weights: w[..d].to_vec(),
                bias: rows.bias[0],
            }),
        }
    }
}

/// What an algorithm returns.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The model body.
    pub body: Body,
    /// Per-epoch statistics.
    pub stats: Vec<EpochStats>,
    /// Why training stopped.
    pub stop: StopReason,
    /// The model's raw training scores (`n * heads`), when the algorithm computed them.
    pub scores: Option<Vec<f32>>,
    /// Where it ran.
    pub ran: Ran,
}

/// The hardware a run may use: a primary backend and, for a GPU primary, an optional fallback
/// that takes over when the GPU fails.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    /// Where the epochs run.
    pub primary: &'a dyn Backend,
    /// Where they continue if the primary is a GPU and fails.
    pub fallback: Option<&'a dyn Backend>,
}

/// Training state that survives a failed backend: the algorithm's own state (weights,
/// counts) and the statistics of the epochs completed so far.
#[derive(Debug, Clone)]
pub struct Checkpoint<S> {
    /// The algorithm's state after the last completed epoch.
    pub state: S,
    /// One entry per completed epoch.
    pub stats: Vec<EpochStats>,
}

impl Fitted {
    /// The result of an algorithm that ran on the host CPU and did not keep training scores.
    pub fn on_cpu(body: Body, stats: Vec<EpochStats>, stop: StopReason) -> Fitted {
        Fitted {
            body,
            stats,
            stop,
            scores: None,
            ran: Ran::on(&CpuBackend::new()),
        }
    }
}

impl<'a> Backends<'a> {
    /// Runs `f` on the primary backend with the training state `cp`. If the primary is a GPU
    /// and fails with a GPU or size error and there is a fallback, runs `f` again on the
    /// fallback with the state as the failure left it (the last completed epoch), and says
    /// so in the returned [`Ran`].
    pub fn resume<S, T>(
        &self,
        cp: &mut Checkpoint<S>,
        mut f: impl FnMut(&dyn Backend, &mut Checkpoint<S>) -> Result<T>,
    ) -> Result<(T, Ran)> {
        let primary = self.primary;
        match (f(primary, cp), self.fallback) {
            (Ok(t), _) => Ok((t, Ran::on(primary))),
            (Err(e @ (Error::Gpu(_) | Error::TooLarge(_))), Some(fb))
                if primary.kind() == BackendKind::Gpu =>
            {
                let note = format!(
                    "GPU failed after {} epochs ({e}); finished on {}",
                    cp.stats.len(),
                    fb.device()
                );
                let t = f(fb, cp)?;
                Ok((
                    t,
                    Ran {
                        fallback: Some(note),
                        ..Ran::on(fb)
                    },
                ))
            }
            (Err(e), _) => Err(e),
        }
    }
}

/// An algorithm's entry.
pub type Fit = fn(&Problem<'_>, &Params, &Backends<'_>, &mut dyn Progress) -> Result<Fitted>;

/// The algorithm that trains `params`: one line per algorithm module.
pub fn fitter(params: &Params) -> Fit {
    match (params.algo, params.effective_mode()) {
        (Algo::Kernel, _) => kernel::fit,
        (Algo::Winnow, Mode::Online) => winnow::fit,
        (_, Mode::Online) => online::fit,
        (_, Mode::Batch) => batch::fit,
    }
}

/// The error for a run whose weights, margins or scores left the f32 range: the figures
/// would be meaningless (a NaN margin is never a mistake) and the model could not be saved.
pub fn overflow(ds: &Dataset) -> Error {
    let top = ds.x.iter().fold(0f32, |m, v| m.max(v.abs()));
    Error::data(
        &ds.source,
        format!(
            "training overflowed: the weights, margins or scores left the f32 range (the largest \
             feature is {top:e}); rescale the features, lower the learning rate or the kernel's gamma"
        ),
    )
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

/// Trains the algorithm `params.algo` on `ds`: binary for two classes, multiclass (or
/// one-vs-rest) for more, in the online or batch form.
///
/// Epochs run on `backend`; if it is a GPU that fails mid-training and `fallback` is given,
/// training resumes from the last completed epoch on `fallback` and the report says so.
/// Online forms are sequential and always run on the host CPU; the report's `backend` says
/// "cpu" then.
pub fn train(
    ds: &Dataset,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    train_problem(
        Problem::new(ds, params)?,
        params,
        backend,
        fallback,
        progress,
    )
}

/// As [`train`], continuing from the weights of `model` (see [`Problem::continue_from`]):
/// N epochs, then M more from the saved model, give the model of N + M epochs in one run
/// (batch form; the online forms draw a new shuffle).
pub fn train_from(
    model: &Model,
    ds: &Dataset,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    let mut pb = Problem::new(ds, params)?;
    pb.continue_from(model, params)?;
    train_problem(pb, params, backend, fallback, progress)
}

fn train_problem(
    pb: Problem<'_>,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    let ds = pb.ds;
    let backends = Backends {
        primary: backend,
        fallback,
    };
    let t0 = Instant::now();
    let fitted = fitter(params)(&pb, params, &backends, progress)?;
    let seconds = t0.elapsed().as_secs_f64();
    let finite_stats = fitted
        .stats
        .iter()
        .all(|e| e.criterion.is_finite() && e.update_norm.is_finite());
    let finite_scores = fitted
        .scores
        .as_ref()
        .is_none_or(|s| s.iter().all(|v| v.is_finite()));
    if !(fitted.body.is_finite() && finite_stats && finite_scores) {
        return Err(overflow(ds));
    }
    let classes = ds.require_labels()?.classes.clone();
    let model = Model::new(params.algo, classes, ds.d, fitted.body, (**params).clone())
        .map_err(|msg| Error::data(&ds.source, format!("the trained model is invalid: {msg}")))?;
    let raw = match fitted.scores {
        Some(s) => s,
        None => model.raw_scores(ds, &CpuBackend::new())?,
    };
    if raw.iter().any(|v| !v.is_finite()) {
        return Err(overflow(ds));
    }
    let run = RunFacts {
        stats: fitted.stats,
        stop: fitted.stop,
        ran: fitted.ran,
        seconds,
    };
    let report = report::build(ds, params, &model, &raw, pb.bias, run);
    Ok(Trained {
        model: model.with_training(report.clone()),
        report,
    })
}
