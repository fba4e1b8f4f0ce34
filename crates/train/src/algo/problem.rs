//! The problem an algorithm solves: the data in the backends' form, built once from a data
//! set and the parameters (held-out rows, scaling, labels in internal form, class and row
//! weights, the head rule and model kind, a compact copy of X, a warm start), and the share of
//! the rows of one process of a data-parallel run.

use std::borrow::Cow;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{fitter_is_online, initial_weights};
use crate::backend::{
    FeatureBuf, HeadRule, Matrix, MatrixBuf, Patience, Reduce, Storage, TrainView, ValView,
};
use crate::data::scale::{online_floor, Overflow, Scaler};
use crate::data::{Dataset, Labels};
use crate::error::{Error, Param, Result};
use crate::model::{Body, Hyperplane, Model, ModelKind, Rows};
use crate::params::{
    Algo, ClassWeight, Mode, MulticlassStrategy, MulticlassUpdate, Params, Scale,
    AUTO_VALIDATION_FRACTION, AUTO_VALIDATION_ROWS,
};

/// The data as the algorithms see it: the training rows (scaled, without held-out rows),
/// labels in internal form (±1 for binary rules, the class index otherwise), per-row weights,
/// the held-out rows, the per-row rule, and the kind of model the run makes.
pub struct Problem<'a> {
    /// The training rows the algorithm sees (scaled when the run scales, unless
    /// `scale_on_read` says they are scaled as they are read; without the rows held out for
    /// validation).
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
    /// Per-row weights of the training rows (class weights times row weights; under
    /// one-vs-rest with class weights, the row weights only); `None` when every row weighs 1.
    pub sw: Option<Vec<f32>>,
    /// Under one-vs-rest with class weights, the class weights, one per class: a row of
    /// class c weighs `sw` times its class weight in head c and `sw` in the others
    /// (scikit-learn's one-vs-rest weighting, [`TrainView::own`]).
    pub own: Option<Vec<f32>>,
    /// Held-out rows (scaled like the training rows) and their labels in internal form.
    pub val: Option<(Dataset, Vec<f32>)>,
    /// The scaling fitted on the training rows (or taken from the model continued).
    pub scaling: Option<Scaler>,
    /// The online rules read the training rows as given and scale each row they visit
    /// ([`Scaler::scale_row`], the bits of a scaled copy), so that training holds no scaled
    /// copy of X: `ds` is then unscaled. `None`: `ds` is already scaled (or unscaled data).
    pub scale_on_read: Option<Scaler>,
    /// A compact exact copy of the training and held-out rows (u8, i8 or f16), which the
    /// backends bind instead of the f32 rows; `None`: they bind the f32 rows.
    pub packed: Option<(FeatureBuf, Option<FeatureBuf>)>,
    /// In a data-parallel run: this process's rows (the backends bind only them) and the sums
    /// across processes. `None`: one process trains on every row.
    pub shard: Option<Shard>,
    /// The held-out rows are the share the run chose itself
    /// ([`TrainParams::auto_validation`](crate::params::TrainParams)).
    pub auto_held_out: bool,
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

/// Whether a run's rows carry weights: then its epochs count their mistakes' weights too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowWeights {
    Unweighted,
    Weighted,
}

impl RowWeights {
    /// `Weighted` where there are row weights `sw`.
    pub(crate) fn of<T>(sw: Option<T>) -> RowWeights {
        match sw {
            Some(_) => RowWeights::Weighted,
            None => RowWeights::Unweighted,
        }
    }
}

impl Shard {
    /// Process `rank` of `size`'s rows of `n`: rank * n / size up to (rank + 1) * n / size.
    pub fn rows_of(n: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
        let at = |r: usize| (r as u128 * n as u128 / size.max(1) as u128) as usize;
        at(rank)..at(rank + 1)
    }

    /// The end of an online epoch under iterative parameter mixing: `w` becomes its mean over
    /// the processes and the epoch's counts their sums.
    pub(crate) fn mix(&self, w: &mut [f32], e: &mut crate::backend::EpochStats, rw: RowWeights) {
        self.reduce.sum_f32(w);
        let k = self.reduce.size() as f32;
        w.iter_mut().for_each(|v| *v /= k);
        self.sum_counts(e, rw);
    }

    /// An epoch's counts summed over the processes (with row weights, the weighted mistakes
    /// too, also where this process had none).
    pub(crate) fn sum_counts(&self, e: &mut crate::backend::EpochStats, rw: RowWeights) {
        let mut c = [
            e.mistakes as f64,
            e.criterion,
            e.weighted.unwrap_or(0.0),
            e.wrong_rows.unwrap_or(0) as f64,
        ];
        self.reduce.sum_f64(&mut c);
        e.mistakes = c[0] as u64;
        e.criterion = c[1];
        e.weighted = (rw == RowWeights::Weighted).then_some(c[2]);
        e.wrong_rows = e.wrong_rows.map(|_| c[3] as u64);
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
    // AROW is a binary rule: with K classes, one head per class against the rest.
    let strategy = match params.algo {
        Algo::Arow => MulticlassStrategy::Ovr,
        _ => params.multiclass,
    };
    let (rule, kind) = match (strategy, params.multiclass_update) {
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

/// The share [`TrainParams::auto_validation`](crate::params::TrainParams) holds out of `n`
/// rows, when it does: none asked, enough rows, several epochs and a patience rule to watch.
pub(crate) fn auto_fraction(params: &Params, n: usize) -> Option<f32> {
    (params.auto_validation
        && params.validation_fraction.is_none()
        && n >= AUTO_VALIDATION_ROWS
        && params.epochs > 1
        && params.effective_patience() > 0)
        .then_some(AUTO_VALIDATION_FRACTION)
}

/// The training rows and the held-out rows with their class indices: the rows `holdout`
/// gives (with the training data's features and classes), or a seeded stratified share of
/// `ds` (`params.validation_fraction`, or the share [`auto_fraction`] chooses; every class
/// keeps at least one training row), or none.
#[allow(clippy::type_complexity)]
fn held_out<'a>(
    ds: &'a Dataset,
    labels: &Labels,
    holdout: Holdout<'_>,
    params: &Params,
) -> Result<(Cow<'a, Dataset>, Option<(Dataset, Vec<u32>)>)> {
    let auto = auto_fraction(params, ds.n);
    match (holdout, params.validation_fraction.or(auto)) {
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
            let idx = v.class_indices_in(&labels.classes, labels.ty, "the training data's")?;
            Ok((Cow::Borrowed(ds), Some((v.clone(), idx))))
        }
        (Holdout::FromParams, Some(f)) => {
            let (tr, va) = stratified_split(labels, f, params.seed);
            if (va.is_empty() || tr.is_empty()) && auto.is_some() {
                // A held-out share the run chose itself, which the classes cannot give:
                // train on every row (the report says nothing was held out).
                return Ok((Cow::Borrowed(ds), None));
            }
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
        let asked = matches!(holdout, Holdout::Rows(_)) || params.validation_fraction.is_some();
        let (mut train, mut val) = held_out(ds, labels, holdout, params)?;
        let auto_held_out = !asked && val.is_some();
        // Online scaling: the sequential online rules scale each row by the maxima so far in
        // their first epoch; the model, and every other rule, by the whole set's.
        let scaling = match start {
            Some(m) => m.scaling().cloned(),
            None => Scaler::fit_matrix(params.scale, &train.x, train.n, train.d)
                .map_err(|msg| Error::param(Param::Scale, params.scale.name(), msg))?
                .map(|s| match params.scale {
                    Scale::Online => s.floored(online_floor(params.algo)),
                    _ => s,
                }),
        };
        // The online rules (not the voted perceptron, whose support rows are kept scaled)
        // scale each row as they read it: no scaled copy of X (sparse rows only for scalings
        // that keep zeros; compact storages are for the batch forms).
        let on_read = scaling.as_ref().is_some_and(|sc| {
            fitter_is_online(params)
                && params.storage.is_none_or(|s| s == Storage::F32)
                && (!matches!(train.x, MatrixBuf::Csr(_)) || sc.keeps_zeros())
        });
        if let Some(sc) = &scaling {
            if !on_read {
                let t = train.to_mut();
                sc.apply_matrix(&mut t.x, t.n, t.d, &t.source, Overflow::Error)?;
            }
            if let Some((v, _)) = &mut val {
                sc.apply_matrix(&mut v.x, v.n, v.d, &v.source, Overflow::Error)?;
            }
        }
        let tl = train.require_labels()?;
        let y = internal(&tl.index);
        let (sw, own) = row_weights(&train, params, rule)?;
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
            own,
            val,
            scale_on_read: scaling.clone().filter(|_| on_read),
            scaling,
            packed,
            shard: None,
            auto_held_out,
        };
        if let Some(m) = start {
            pb.continue_from(m, params)?;
        }
        Ok(pb)
    }

    /// True when the online rule's first epoch scales each row by the magnitudes of the rows
    /// read so far ([`Scale::Online`], a rule that reads rows in sequence, no model to go on
    /// from, and rows still scaled as read: a data-parallel run scales a copy first).
    pub fn scales_online(&self, params: &Params) -> bool {
        self.scale_on_read
            .as_ref()
            .is_some_and(|sc| sc.kind == Scale::Online)
            && self.start.is_none()
            && super::reads_online(params)
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
        if model.hashing() != self.ds.hashing.as_ref() {
            let says = |h: Option<&crate::data::hashing::Hashing>| {
                h.map_or("no hashing".to_string(), |h| {
                    format!(
                        "{} hash bits, {}, quadratic {:?}",
                        h.bits, h.sign, h.quadratic
                    )
                })
            };
            return Err(mismatch(format!(
                "its features were hashed with {}, the data's with {}",
                says(model.hashing()),
                says(self.ds.hashing.as_ref())
            )));
        }
        if model.kind() != self.kind {
            return Err(mismatch(format!(
                "it is a {} model, and this run makes a {} model",
                model.kind().describe(),
                self.kind.describe()
            )));
        }
        // The default (online) follows the model's scaling, whatever it is; a scaling named
        // otherwise must be the model's (maxabs and online keep the same factors).
        let kept = model.scaling().map(|s| s.kind);
        let same = kept == Some(params.scale)
            || (params.scale.is_max_abs() && kept.is_some_and(Scale::is_max_abs));
        if !matches!(params.scale, Scale::None | Scale::Online) && !same {
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
                self.kind.describe()
            )));
        }
        let classes = &self.ds.require_labels()?.classes;
        let same = classes.len() == model.classes().len()
            && classes
                .iter()
                .zip(model.classes())
                .all(|(a, b)| crate::data::same_class_as(model.label_type(), a, b));
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
    pub fn distribute(&mut self, reduce: std::rc::Rc<dyn Reduce>) -> Result<()> {
        self.scale_now()?;
        let rows = Shard::rows_of(self.ds.n, reduce.rank(), reduce.size());
        self.shard = Some(Shard {
            rows,
            reduce,
            local: None,
        });
        Ok(())
    }

    /// Scales the training rows now (a data-parallel run gathers scores and R from them),
    /// when they were to be scaled as read.
    fn scale_now(&mut self) -> Result<()> {
        if let Some(sc) = self.scale_on_read.take() {
            let t = self.ds.to_mut();
            sc.apply_matrix(&mut t.x, t.n, t.d, &t.source, Overflow::Error)?;
        }
        Ok(())
    }

    /// As [`Problem::distribute`], where the data set is this process's share of the rows
    /// (see `data::part`): it trains on all of them; held-out rows, when given whole, are
    /// still shared out by range.
    pub fn distribute_local(&mut self, reduce: std::rc::Rc<dyn Reduce>) -> Result<()> {
        self.scale_now()?;
        let mut t = [self.ds.n as f64, self.total_weight().unwrap_or(0.0) as f64];
        reduce.sum_f64(&mut t);
        self.shard = Some(Shard {
            rows: 0..self.ds.n,
            reduce,
            local: Some((t[0] as usize, t[1] as f32)),
        });
        Ok(())
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
            own: self.own.as_deref(),
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
                (None, Some(_), None) => params.patience_floor * self.total_weight().unwrap_or(0.0),
                (None, None, None) => params.patience_floor * self.ds.n as f32,
            },
        }
    }

    /// The rows' total weight, each row counted with its weight in its own head (its sample
    /// weight times its class weight under every rule); `None` when every row weighs 1.
    pub fn total_weight(&self) -> Option<f32> {
        let sw = self.sw.as_ref()?;
        Some(match &self.own {
            Some(f) => sw
                .iter()
                .zip(&self.y)
                .map(|(&w, &y)| w * f[y as usize])
                .sum(),
            None => sw.iter().sum(),
        })
    }

    /// The model body of augmented weights `w` (`heads * (d + 1)`, the problem's linear kind).
    pub fn linear_body(&self, w: &[f32]) -> Body {
        let d = self.ds.d;
        let rows = Rows::from_augmented(w, d);
        let rows = if self.fit_bias {
            rows
        } else {
            rows.without_bias()
        };
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

/// One-vs-rest class factors ([`Problem::own`]), when the run has them.
type OwnFactors = Option<Vec<f32>>;

/// The per-row weights of the training rows: the class weights of `params` (balanced: n /
/// (classes * rows of the class)) times the rows' own weights, `None` when every row weighs
/// 1; and under one-vs-rest (`rule`) with class weights, the class weights apart (the second
/// value), the rows' weights being their own weights only (or ones): scikit-learn's
/// one-vs-rest weighs a class's rows by its class weight in the class's head only.
fn row_weights(
    ds: &Dataset,
    params: &Params,
    rule: HeadRule,
) -> Result<(Option<Vec<f32>>, OwnFactors)> {
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
                let c =
                    crate::data::find_class(&labels.classes, labels.ty, name).ok_or_else(|| {
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
        return Ok((None, None));
    }
    let own = class_w.as_ref().filter(|_| rule == HeadRule::OneVsRest);
    let sw: Vec<f32> = (0..ds.n)
        .map(|i| {
            let c = match own {
                Some(_) => 1.0,
                None => class_w
                    .as_ref()
                    .map_or(1.0, |w| w[labels.index[i] as usize]),
            };
            c * ds.weights.as_ref().map_or(1.0, |w| w[i])
        })
        .collect();
    // A row's weight in its own head (its sample weight times its class weight, under every
    // rule) must be finite.
    let own_weight = |i: usize| own.map_or(sw[i], |f| sw[i] * f[labels.index[i] as usize]);
    if let Some(i) = (0..ds.n).find(|&i| !own_weight(i).is_finite()) {
        return Err(Error::param(
            Param::SampleWeight,
            own_weight(i),
            format!("should be finite (row {})", i + 1),
        ));
    }
    if sw.iter().all(|&v| v == 0.0) {
        return Err(Error::data(
            &ds.source,
            "every row weighs 0, so training cannot learn anything",
        ));
    }
    Ok((Some(sw), own.cloned()))
}
