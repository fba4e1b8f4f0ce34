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
pub mod pa;
mod summary;
pub mod winnow;

use std::borrow::Cow;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{
    cpu::CpuBackend, Backend, BackendKind, EpochStats, FeatureBuf, HeadRule, Matrix, MatrixBuf,
    Patience, Reduce, StopReason, Storage, TrainView, ValView,
};
use crate::data::scale::Scaler;
use crate::data::{same_class, Dataset, Labels};
use crate::error::{Error, Param, Result};
use crate::model::{Body, Hyperplane, Model, ModelKind, Rows};
use crate::params::{
    Algo, ClassWeight, Init, Mode, MulticlassStrategy, MulticlassUpdate, Params, Scale,
};
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

/// The data as the algorithms see it: the training rows (scaled, without held-out rows),
/// labels in internal form (±1 for binary rules, the class index otherwise), per-row weights,
/// the held-out rows, the per-row rule, and the kind of model the run makes.
pub struct Problem<'a> {
    /// The training rows the algorithm sees (scaled when the run scales; without the rows
    /// held out for validation).
    pub ds: Cow<'a, Dataset>,
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
    /// Per-row weights of the training rows (class weights times row weights); `None` when
    /// every row weighs 1.
    pub sw: Option<Vec<f32>>,
    /// Held-out rows (scaled like the training rows) and their labels in internal form.
    pub val: Option<(Dataset, Vec<f32>)>,
    /// The scaling fitted on the training rows (or taken from the model continued).
    pub scaling: Option<Scaler>,
    /// A compact exact copy of the training and held-out rows (u8, i8 or f16), which the
    /// backends bind instead of the f32 rows; `None`: they bind the f32 rows.
    pub packed: Option<(FeatureBuf, Option<FeatureBuf>)>,
    /// In a data-parallel run: this process's rows (the backends bind only them) and the sums
    /// across processes. `None`: one process trains on every row.
    pub shard: Option<Shard>,
}

/// One process's share of a data-parallel batch run ([`Problem::shard`]).
#[derive(Debug, Clone)]
pub struct Shard {
    /// This process's rows: a contiguous range, ranges in process order.
    pub rows: std::ops::Range<usize>,
    /// Sums across the processes (the same as the backend's).
    pub reduce: std::rc::Rc<dyn Reduce>,
    /// The data set holds only this process's rows (each process read its share of the
    /// file), rather than every row: then the number of rows and their total weight over
    /// every process (for the patience floor).
    pub local: Option<(usize, f32)>,
}

impl Shard {
    /// Process `rank` of `size`'s rows of `n`: rank * n / size up to (rank + 1) * n / size.
    pub fn rows_of(n: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
        let at = |r: usize| (r as u128 * n as u128 / size.max(1) as u128) as usize;
        at(rank)..at(rank + 1)
    }

    /// The end of an online epoch under iterative parameter mixing: `w` becomes its mean over
    /// the processes and the epoch's counts their sums.
    pub(crate) fn mix(&self, w: &mut [f32], e: &mut crate::backend::EpochStats, weights: bool) {
        self.reduce.sum_f32(w);
        let k = self.reduce.size() as f32;
        w.iter_mut().for_each(|v| *v /= k);
        self.sum_counts(e, weights);
    }

    /// An epoch's counts summed over the processes (with row weights, the weighted mistakes
    /// too, also where this process had none).
    pub(crate) fn sum_counts(&self, e: &mut crate::backend::EpochStats, weights: bool) {
        let mut c = [e.mistakes as f64, e.criterion, e.weighted.unwrap_or(0.0)];
        self.reduce.sum_f64(&mut c);
        e.mistakes = c[0] as u64;
        e.criterion = c[1];
        e.weighted = weights.then_some(c[2]);
    }

    /// `count` summed over the processes (held-out mistakes, each process scoring its share).
    pub(crate) fn total(&self, count: Option<u64>) -> Option<u64> {
        count.map(|m| {
            let mut c = [m as f64];
            self.reduce.sum_f64(&mut c);
            c[0] as u64
        })
    }
}

/// How many rows ahead the online forms prefetch the next row of a shuffled epoch.
pub(crate) const PREFETCH_ROWS: usize = 16;

/// Where the held-out rows of a run come from.
#[derive(Clone, Copy, Default)]
pub enum Holdout<'a> {
    /// None, unless the parameters ask for a validation fraction.
    #[default]
    FromParams,
    /// These rows (labels matched to the training classes by name or value).
    Rows(&'a Dataset),
}

/// The rule, model kind and heads for `params` on `ds` with `k` classes: binary for two
/// classes (or one, refused later), multiclass or one-vs-rest for more, or when asked for.
fn heads_of(ds: &Dataset, params: &Params, k: usize) -> Result<(HeadRule, ModelKind, usize)> {
    let binary = k <= 2 && params.algo != Algo::Multiclass;
    if !binary && matches!(params.algo, Algo::Winnow | Algo::Kernel) {
        return Err(Error::BinaryOnly {
            path: ds.source.clone(),
            algo: params.algo.name(),
            classes: k,
        });
    }
    if binary {
        let kind = match params.algo {
            Algo::Voted => ModelKind::Voted,
            Algo::Kernel => ModelKind::Kernel,
            _ => ModelKind::Binary,
        };
        return Ok((HeadRule::Binary, kind, 1));
    }
    let (rule, kind) = match (params.multiclass, params.multiclass_update) {
        (MulticlassStrategy::Ovr, _) => (HeadRule::OneVsRest, ModelKind::Ovr),
        (_, MulticlassUpdate::All) => (HeadRule::MulticlassAll, ModelKind::Multiclass),
        (_, MulticlassUpdate::Argmax) => (HeadRule::MulticlassArgmax, ModelKind::Multiclass),
    };
    let kind = if params.algo == Algo::Voted {
        ModelKind::Voted
    } else {
        kind
    };
    Ok((rule, kind, k))
}

/// The training rows and the held-out rows with their class indices: the rows `holdout`
/// gives (with the training data's features and classes), or a seeded stratified share of
/// `ds` (`params.validation_fraction`), or none.
#[allow(clippy::type_complexity)]
fn held_out<'a>(
    ds: &'a Dataset,
    labels: &Labels,
    holdout: Holdout<'_>,
    params: &Params,
) -> Result<(Cow<'a, Dataset>, Option<(Dataset, Vec<u32>)>)> {
    match (holdout, params.validation_fraction) {
        (Holdout::Rows(v), _) => {
            if v.d != ds.d {
                return Err(Error::Mismatch {
                    path: v.source.clone(),
                    msg: format!(
                        "the validation data has {} features, the training data {}",
                        v.d, ds.d
                    ),
                });
            }
            let idx = v.class_indices_in(&labels.classes, "the training data's")?;
            Ok((Cow::Borrowed(ds), Some((v.clone(), idx))))
        }
        (Holdout::FromParams, Some(f)) => {
            let (tr, va) = stratified_split(labels, f, params.seed);
            if va.is_empty() || tr.is_empty() {
                return Err(Error::param(
                    Param::ValidationFraction,
                    f,
                    format!("leaves no rows on one side of the split of {} rows", ds.n),
                ));
            }
            let v = ds.select(&va)?;
            let idx = v.require_labels()?.index.clone();
            Ok((Cow::Owned(ds.select(&tr)?), Some((v, idx))))
        }
        (Holdout::FromParams, None) => Ok((Cow::Borrowed(ds), None)),
    }
}

impl<'a> Problem<'a> {
    /// The problem for `params` on `ds`: binary for two classes (or one, refused later),
    /// multiclass or one-vs-rest for more, or when asked for.
    pub fn new(ds: &'a Dataset, params: &Params) -> Result<Self> {
        Self::build(ds, params, Holdout::FromParams, None)
    }

    /// The problem for `params` on `ds` with held-out rows from `holdout`, continuing from
    /// `start` when given (its scaling is kept; see [`Problem::continue_from`]).
    pub fn build(
        ds: &'a Dataset,
        params: &Params,
        holdout: Holdout<'_>,
        start: Option<&Model>,
    ) -> Result<Self> {
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
        let (rule, kind, heads) = heads_of(ds, params, k)?;
        weights_fit(ds, heads)?;
        let internal = |index: &[u32]| -> Vec<f32> {
            if rule == HeadRule::Binary {
                index
                    .iter()
                    .map(|&c| if c == 0 { -1.0 } else { 1.0 })
                    .collect()
            } else {
                index.iter().map(|&c| c as f32).collect()
            }
        };
        let (mut train, mut val) = held_out(ds, labels, holdout, params)?;
        let scaling = match start {
            Some(m) => m.scaling().cloned(),
            None => Scaler::fit_matrix(params.scale, &train.x, train.n, train.d)
                .map_err(|msg| Error::param(Param::Scale, params.scale.name(), msg))?,
        };
        if let Some(sc) = &scaling {
            let t = train.to_mut();
            sc.apply_matrix(&mut t.x, t.n, t.d, &t.source, false)?;
            if let Some((v, _)) = &mut val {
                sc.apply_matrix(&mut v.x, v.n, v.d, &v.source, false)?;
            }
        }
        let tl = train.require_labels()?;
        let y = internal(&tl.index);
        let sw = row_weights(&train, params)?;
        let val = val.map(|(v, idx)| {
            let yv = internal(&idx);
            (v, yv)
        });
        let packed = pack(&train, val.as_ref().map(|(v, _)| v), params)?;
        let mut pb = Problem {
            ds: train,
            y,
            bias,
            rule,
            heads,
            kind,
            fit_bias: params.fit_bias,
            start: None,
            sw,
            val,
            scaling,
            packed,
            shard: None,
        };
        if let Some(m) = start {
            pb.continue_from(m, params)?;
        }
        Ok(pb)
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
        if params.scale != crate::params::Scale::None
            && model.scaling().map(|s| s.kind) != Some(params.scale)
        {
            return Err(mismatch(format!(
                "it was trained with {} scaling, and this run asks for {} (a continued run \
                 keeps the model's scaling)",
                model.scaling().map_or("no", |s| s.kind.name()),
                params.scale.name()
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

    /// Makes this problem one process's share of a data-parallel run: the process `reduce`
    /// names trains on its range of the training rows (and scores its range of the held-out
    /// rows), with the sums going through `reduce`.
    pub fn distribute(&mut self, reduce: std::rc::Rc<dyn Reduce>) {
        let rows = Shard::rows_of(self.ds.n, reduce.rank(), reduce.size());
        self.shard = Some(Shard {
            rows,
            reduce,
            local: None,
        });
    }

    /// As [`Problem::distribute`], where the data set is this process's share of the rows
    /// (see `data::part`): it trains on all of them; held-out rows, when given whole, are
    /// still shared out by range.
    pub fn distribute_local(&mut self, reduce: std::rc::Rc<dyn Reduce>) {
        let mut t = [
            self.ds.n as f64,
            self.sw
                .as_ref()
                .map_or(0.0, |w| w.iter().sum::<f32>() as f64),
        ];
        reduce.sum_f64(&mut t);
        self.shard = Some(Shard {
            rows: 0..self.ds.n,
            reduce,
            local: Some((t[0] as usize, t[1] as f32)),
        });
    }

    /// The view the backends bind.
    pub fn view(&self) -> TrainView<'_> {
        let packed = self.packed.as_ref();
        // The compact copy holds the stored values: all of them when dense, the non-zeros
        // (with the data set's row starts and columns) when sparse.
        fn bind<'b>(ds: &'b Dataset, p: Option<&'b FeatureBuf>) -> Matrix<'b> {
            match (&ds.x, p) {
                (_, None) => ds.view(),
                (MatrixBuf::Dense(_) | MatrixBuf::Mapped(_), Some(p)) => Matrix::Dense(p.view()),
                (MatrixBuf::Csr(c), Some(p)) => Matrix::Csr(c.view_with(p.view())),
            }
        }
        let rows = self.shard.as_ref().map_or(0..self.ds.n, |s| s.rows.clone());
        TrainView {
            x: bind(&self.ds, packed.map(|(t, _)| t)).rows(rows.clone(), self.ds.d),
            y: &self.y[rows.clone()],
            n: rows.len(),
            d: self.ds.d,
            bias: self.bias,
            heads: self.heads,
            sw: self.sw.as_deref().map(|s| &s[rows.clone()]),
            val: self.val.as_ref().map(|(v, y)| {
                // A data-parallel run scores its share of the held-out rows too.
                let r = self.shard.as_ref().map_or(0..v.n, |s| {
                    Shard::rows_of(v.n, s.reduce.rank(), s.reduce.size())
                });
                ValView {
                    x: bind(v, packed.and_then(|(_, pv)| pv.as_ref())).rows(r.clone(), v.d),
                    y: &y[r.clone()],
                    n: r.len(),
                }
            }),
        }
    }

    /// The patience rule of `params` for this problem: the floor applies to training mistakes
    /// only (with held-out rows it is 0), as a fraction of the rows (of their total weight
    /// when rows have weights).
    pub fn patience(&self, params: &Params) -> Patience {
        let epochs = params.effective_patience();
        if epochs == 0 {
            return Patience::OFF;
        }
        Patience {
            epochs,
            keep_fraction: 1.0 - params.min_improvement,
            floor: match (
                &self.val,
                &self.sw,
                self.shard.as_ref().and_then(|s| s.local),
            ) {
                (Some(_), ..) => 0.0,
                // Only this process's rows are here: the totals over every process.
                (None, Some(_), Some((_, weight))) => params.patience_floor * weight,
                (None, None, Some((rows, _))) => params.patience_floor * rows as f32,
                (None, Some(sw), None) => params.patience_floor * sw.iter().sum::<f32>(),
                (None, None, None) => params.patience_floor * self.ds.n as f32,
            },
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
    /// The epoch (1-based) with the fewest monitored mistakes; 0 when none ran.
    pub best_epoch: usize,
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
        (Algo::PassiveAggressive, _) => pa::fit,
        (_, Mode::Online) => online::fit,
        (_, Mode::Batch) => batch::fit,
    }
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

/// The storage the rows of `train` and `val` are bound in, and their compact copies when it is
/// not f32: the storage `params` names (an error naming the first value it does not hold
/// exactly), or for batch epochs the narrowest that holds every value exactly.
fn pack(
    train: &Dataset,
    val: Option<&Dataset>,
    params: &Params,
) -> Result<Option<(FeatureBuf, Option<FeatureBuf>)>> {
    let sets = std::iter::once(train).chain(val);
    let storage = match params.storage {
        Some(s) => s,
        // A memory-mapped X (training or held-out rows) is read in place: a compact copy would
        // be anonymous memory.
        None if sets.clone().any(|ds| ds.x.is_mapped()) => Storage::F32,
        None if params.algo != Algo::Kernel && params.effective_mode() == Mode::Batch => {
            // (Not mapped: these are borrowed.)
            let values: Vec<_> = sets.map(|ds| ds.x.values()).collect();
            Storage::narrowest(values.iter().map(|v| &**v))
        }
        None => Storage::F32,
    };
    if storage == Storage::F32 {
        return Ok(None);
    }
    // Rows are counted in the rows trained on (after a validation split) and values are
    // those trained on (after scaling): say so when they differ from the file's.
    let after = match (
        params.validation_fraction.is_some(),
        params.scale != Scale::None,
    ) {
        (false, false) => "",
        (true, false) => " (counting the rows left after the validation split)",
        (false, true) => " (after scaling)",
        (true, true) => " (after the validation split and scaling)",
    };
    let packed = |ds: &Dataset| {
        crate::limits::check(
            || {
                format!(
                    "{}: a {} copy of {} values",
                    ds.source.display(),
                    storage.name(),
                    ds.stored()
                )
            },
            ds.stored() as u128,
            storage.bytes() as u128,
        )?;
        if ds.x.stored_values().storage() != Storage::F32 {
            // A compact memory map in another storage: widened first.
            crate::limits::check(
                || {
                    format!(
                        "{}: {} values widened to f32",
                        ds.source.display(),
                        ds.stored()
                    )
                },
                ds.stored() as u128,
                4,
            )?;
        }
        FeatureBuf::pack(&ds.x.values(), storage).map_err(|i| {
            let (row, col) = ds.x.position(i, ds.d);
            Error::data(
                &ds.source,
                format!(
                    "row {row}, feature {col} is {}{after}, which {} storage does not hold exactly \
                     (it holds {})",
                    ds.x.value(i),
                    storage.name(),
                    storage.holds_what()
                ),
            )
        })
    };
    Ok(Some((packed(train)?, val.map(packed).transpose()?)))
}

/// Checks that training `ds` with `heads` weight vectors has the memory for its per-feature
/// state: the weights are dense whatever the data, and a run keeps about 8 copies (weights,
/// start, update sums, pocket, average, scaling and scratch). A sparse file with a huge index
/// is small itself; this refuses it before anything of d entries is allocated.
pub fn weights_fit(ds: &Dataset, heads: usize) -> Result<()> {
    crate::limits::check(
        || {
            format!(
                "{}: {} features x {heads} weight vectors (8 copies while training)",
                ds.source.display(),
                ds.d
            )
        },
        heads.max(1) as u128 * (ds.d as u128 + 1),
        4 * 8,
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
    let radius = match &pb.shard {
        Some(sh) => Some(gather_shards(&pb, sh, &mut fitted)?),
        None => None,
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
    let classes = ds.require_labels()?.classes.clone();
    let invalid = |msg| Error::data(&ds.source, format!("the trained model is invalid: {msg}"));
    let model = Model::new(params.algo, classes, ds.d, fitted.body, (**params).clone())
        .and_then(|m| m.with_scaling(pb.scaling.clone()))
        .map_err(invalid)?;
    let raw = match fitted.scores {
        Some(s) => s,
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
        radius,
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
    let report = summary::build(report_ds, params, &model, &raw, pb.bias, run);
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
        }),
        source: ds.source.clone(),
        weights: None,
    })
}

/// A seeded split stratified by class: of each class's rows, round(fraction * count) drawn at
/// random are held out (none from a class of one row). Returns (kept, held out), each in row
/// order.
pub fn stratified_split(labels: &Labels, fraction: f32, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0DD5_EED5);
    let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); labels.classes.len()];
    for (i, &c) in labels.index.iter().enumerate() {
        by_class[c as usize].push(i);
    }
    let mut held = vec![false; labels.index.len()];
    for rows in &mut by_class {
        let take = ((fraction as f64 * rows.len() as f64).round() as usize)
            .min(rows.len().saturating_sub(1));
        rows.shuffle(&mut rng);
        for &i in &rows[..take] {
            held[i] = true;
        }
    }
    (0..held.len()).partition(|&i| !held[i])
}

/// The per-row weights of the training rows: the class weights of `params` (balanced: n /
/// (classes * rows of the class)) times the rows' own weights. `None` when every row weighs 1.
fn row_weights(ds: &Dataset, params: &Params) -> Result<Option<Vec<f32>>> {
    let labels = ds.require_labels()?;
    let k = labels.classes.len();
    let class_w: Option<Vec<f32>> = match &params.class_weight {
        None => None,
        Some(ClassWeight::Balanced) => {
            let mut count = vec![0usize; k];
            for &c in &labels.index {
                count[c as usize] += 1;
            }
            Some(
                count
                    .iter()
                    .map(|&c| {
                        if c == 0 {
                            1.0
                        } else {
                            (ds.n as f64 / (k as f64 * c as f64)) as f32
                        }
                    })
                    .collect(),
            )
        }
        Some(ClassWeight::Given(list)) => {
            let mut w = vec![1f32; k];
            for (name, v) in list {
                let c = labels
                    .classes
                    .iter()
                    .position(|m| same_class(m, name))
                    .ok_or_else(|| {
                        Error::param(
                            Param::ClassWeight,
                            format!("{name}={v}"),
                            format!(
                                "names a class the data does not have (classes: {})",
                                labels.classes.join(", ")
                            ),
                        )
                    })?;
                w[c] = *v;
            }
            Some(w)
        }
    };
    if class_w.is_none() && ds.weights.is_none() {
        return Ok(None);
    }
    let sw: Vec<f32> = (0..ds.n)
        .map(|i| {
            let c = class_w
                .as_ref()
                .map_or(1.0, |w| w[labels.index[i] as usize]);
            c * ds.weights.as_ref().map_or(1.0, |w| w[i])
        })
        .collect();
    if let Some(i) = sw.iter().position(|v| !v.is_finite()) {
        return Err(Error::param(
            Param::SampleWeight,
            sw[i],
            format!("should be finite (row {})", i + 1),
        ));
    }
    if sw.iter().all(|&v| v == 0.0) {
        return Err(Error::data(
            &ds.source,
            "every row weighs 0, so training cannot learn anything",
        ));
    }
    Ok(Some(sw))
}
