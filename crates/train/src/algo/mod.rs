//! Training algorithms, each written once against the backend seam, and the dispatcher that
//! runs one and reports on the result.
//!
//! Every algorithm module has the same entry, `fit(problem, params, backends, progress) ->
//! Result<Fitted>`: the [`Problem`] is the data in the backends' form, [`Backends`] the
//! hardware (with the GPU-to-CPU fallback written once, in [`Backends::resume`]), and
//! [`Fitted`] the model body, the per-epoch statistics, why it stopped, the training scores
//! when the algorithm has them, and where it ran. [`train`] only builds the problem, picks
//! the algorithm ([`fitter`]), checks the result is finite, and builds the model and report.

pub mod arow;
mod backends;
pub mod batch;
pub mod kernel;
pub mod online;
pub mod pa;
mod problem;
pub mod stream;
mod summary;
pub mod winnow;

pub use backends::{Backends, Checkpoint};
pub(crate) use problem::RowWeights;
pub use problem::{stratified_split, weights_fit, Holdout, Problem, Shard};

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{cpu::CpuBackend, Backend, EpochStats, MatrixBuf, Reduce, StopReason};
use crate::data::{Dataset, Labels};
use crate::error::{Error, Result};
use crate::model::{Body, Model};
use crate::params::{Algo, Init, Mode, Params};
use crate::report::{Ran, RunFacts};

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
    /// The augmented weights after an epoch (batch) or an update (online), with the epoch: the
    /// model `predict` would use if training stopped there (online: the running average of
    /// the averaged perceptron; batch: the epoch's weights, before any pocket or average).
    fn snapshot(&mut self, _epoch: usize, _w: &[f32]) {}
    /// A streamed run after each block: the rows trained on and the bytes of input read so
    /// far.
    fn rows(&mut self, _rows: u64, _bytes: u64) {}
    /// Asked after every [`Progress::update`] and [`Progress::rows`]: true stops training
    /// with [`Error::Interrupted`] (a front end's interrupt: Python's Ctrl-C), no model made.
    fn cancelled(&mut self) -> bool {
        false
    }
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

/// How many rows ahead the online forms prefetch the next row of a shuffled epoch.
pub(crate) const PREFETCH_ROWS: usize = 16;

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
    /// The epoch (1-based) with the fewest monitored mistakes; 0 when none ran.
    pub best_epoch: usize,
    /// AROW's mistake bound, where the rule gave one.
    pub arow_bound: Option<crate::report::ArowBound>,
}

impl Fitted {
    /// The result of an algorithm that ran on the host CPU and did not keep training scores.
    pub fn on_cpu(
        body: Body,
        stats: Vec<EpochStats>,
        stop: StopReason,
        best_epoch: usize,
    ) -> Fitted {
        Fitted {
            body,
            stats,
            stop,
            scores: None,
            ran: Ran::on(&CpuBackend::new()),
            best_epoch,
            arow_bound: None,
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
        (Algo::PassiveAggressive, _) => pa::fit,
        (Algo::Arow, _) => arow::fit,
        (_, Mode::Online) => online::fit,
        (_, Mode::Batch) => batch::fit,
    }
}

/// True when [`fitter`] runs an online rule that reads one training row at a time and keeps
/// nothing of X: the perceptron's online forms (not the voted perceptron, which keeps its
/// support rows), Winnow's and passive-aggressive. These read X as given and scale each row
/// as they visit it ([`Problem::scale_on_read`]).
pub(crate) fn fitter_is_online(params: &Params) -> bool {
    match (params.algo, params.effective_mode()) {
        (Algo::Kernel | Algo::Voted, _) => false,
        (Algo::PassiveAggressive | Algo::Arow, _) => true,
        (_, mode) => mode == Mode::Online,
    }
}

/// True when the rule reads the rows one at a time in sequence (an online rule in one step
/// and one stream), so that [`Scale::Online`](crate::params::Scale::Online) scales each row
/// by the maxima of the rows read so far in its first epoch. (A GPU's steps, chosen at run
/// time, take the whole set's maxima: their rows are copied scaled before the first step.)
///
/// Not AROW in memory: it takes the whole set's magnitudes before its first epoch. Each time
/// a feature's magnitude grows, the scale-invariant step multiplies the feature's confidence
/// by the square of the growth, and on sparse rows where a feature appears a few dozen times
/// that undoes what the confidences learnt: one pass over 25,000 sparse noisy rows (gen
/// --density 0.001, 5% noise) scores 0.657 scaled online against 0.728 by the whole set's
/// magnitudes and 0.725 unscaled. A streamed AROW, which cannot look ahead, scales online.
pub(crate) fn reads_online(params: &Params) -> bool {
    fitter_is_online(params)
        && !matches!(params.algo, Algo::Winnow | Algo::Arow)
        && params.minibatch == 1
        && params.streams == 1
}

/// The error for a run whose weights, margins or scores left the f32 range: the figures
/// would be meaningless (a NaN margin is never a mistake) and the model could not be saved.
pub fn overflow(ds: &Dataset) -> Error {
    let mut top = 0f32;
    ds.x.for_each_value(ds.d, |_, v| top = top.max(v.abs()));
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
    fit(
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
    let pb = Problem::build(ds, params, Holdout::FromParams, Some(model))?;
    fit(pb, params, backend, fallback, progress)
}

/// Trains on a built [`Problem`] (held-out rows, warm start and scaling already in it): the
/// algorithm of `params`, then the finite check, the model and its report.
pub fn fit(
    pb: Problem<'_>,
    params: &Params,
    backend: &dyn Backend,
    fallback: Option<&dyn Backend>,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    let ds: &Dataset = &pb.ds;
    let storage = pb.view().x.storage();
    let backends = Backends {
        primary: backend,
        fallback,
    };
    let t0 = Instant::now();
    let mut fitted = fitter(params)(&pb, params, &backends, progress)?;
    let seconds = t0.elapsed().as_secs_f64();
    // A data-parallel run: every process has the model; the training scores and R come from
    // every process's rows, in process (row) order.
    // Rows scaled as read: R of the scaled rows, a block at a time.
    let radius = match (&pb.shard, &pb.scale_on_read) {
        (Some(sh), _) => Some(gather_shards(&pb, sh, &mut fitted)?),
        (None, Some(sc)) => Some(crate::report::radius_scaled(
            sc, &ds.x, ds.n, ds.d, pb.bias, &ds.source,
        )?),
        (None, None) => None,
    };
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
    let labels = ds.require_labels()?;
    let invalid = |msg| Error::data(&ds.source, format!("the trained model is invalid: {msg}"));
    let model = Model::typed(
        params.algo,
        labels.classes.clone(),
        labels.ty,
        ds.d,
        fitted.body,
        (**params).clone(),
    )
    .and_then(|m| m.with_scaling(pb.scaling.clone()))
    .and_then(|m| m.with_hashing(ds.hashing.clone()))
    .map_err(invalid)?;
    let raw = match fitted.scores {
        Some(s) => s,
        // Unscaled rows: the model scales them a block at a time (the same bits).
        None if pb.scale_on_read.is_some() => model.raw_scores(ds, &CpuBackend::new())?,
        None => model.scores_of_scaled(ds, &CpuBackend::new())?,
    };
    if raw.iter().any(|v| !v.is_finite()) {
        return Err(overflow(ds));
    }
    let validation = match &pb.val {
        Some((v, _)) => {
            let truth = &v.require_labels()?.index;
            let pred = model.predict(&model.scores_of_scaled(v, &CpuBackend::new())?);
            let right = pred.iter().zip(truth).filter(|(p, t)| p == t).count();
            Some((v.n, right as f64 / v.n.max(1) as f64))
        }
        None => None,
    };
    let run = RunFacts {
        stats: fitted.stats,
        stop: fitted.stop,
        ran: fitted.ran,
        seconds,
        best_epoch: fitted.best_epoch,
        validation,
        storage,
        arow_bound: fitted.arow_bound,
        radius,
        scaled_online: pb.scales_online(params),
    };
    // A process holding only its rows reports on every process's: their labels, gathered.
    let whole;
    let report_ds = match &pb.shard {
        Some(sh) if sh.local.is_some() => {
            whole = gathered_labels(ds, sh)?;
            &whole
        }
        _ => ds,
    };
    let mut report = summary::build(report_ds, params, &model, &raw, pb.bias, run);
    if let (true, Some((v, _))) = (pb.auto_held_out, &pb.val) {
        report.held_out = Some(format!(
            "{} rows ({:.0}%, seeded, stratified) for the stopping rule, which keeps the best              epoch on them: the set has at least {} rows",
            v.n,
            100.0 * crate::params::AUTO_VALIDATION_FRACTION,
            crate::params::AUTO_VALIDATION_ROWS
        ));
    }
    Ok(Trained {
        model: model.with_training(report.clone()),
        report,
    })
}

/// One process of a data-parallel run: the training scores of every process's rows (in
/// process order) in `fitted`, and R over them.
fn gather_shards(pb: &Problem<'_>, sh: &Shard, fitted: &mut Fitted) -> Result<f64> {
    let local = fitted.scores.take().ok_or_else(|| {
        Error::data(
            &pb.ds.source,
            "a data-parallel run trains the batch form only",
        )
    })?;
    fitted.scores = Some(sh.reduce.gather_f32(&local));
    let v = pb.view();
    let mut buf = Vec::new();
    // In f64 and column order, as report::radius sums a row.
    let r2 = (0..v.n)
        .map(|i| match v.x.row(i, v.d, &mut buf) {
            crate::backend::Row::Dense(x) => x.iter().map(|&a| (a as f64) * (a as f64)).sum(),
            crate::backend::Row::Sparse { val, .. } => {
                val.iter().map(|&a| (a as f64) * (a as f64)).sum::<f64>()
            }
        })
        .fold(0f64, f64::max);
    Ok((sh.reduce.max_f64(r2) + (pb.bias as f64).powi(2)).sqrt())
}

/// Every process's labels, gathered in process order, as a data set without features (for
/// the report of a process that holds only its rows).
fn gathered_labels(ds: &Dataset, sh: &Shard) -> Result<Dataset> {
    let labels = ds.require_labels()?;
    let local: Vec<f32> = labels.index.iter().map(|&c| c as f32).collect();
    let index: Vec<u32> = (sh.reduce.gather_f32(&local).iter())
        .map(|&c| c as u32)
        .collect();
    Ok(Dataset {
        x: MatrixBuf::default(),
        n: index.len(),
        d: ds.d,
        labels: Some(Labels {
            classes: labels.classes.clone(),
            index,
            ty: labels.ty,
        }),
        source: ds.source.clone(),
        weights: None,
        hashing: ds.hashing.clone(),
    })
}
