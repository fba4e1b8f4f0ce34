//! A trained model: class names, the number of features, how it was trained, and a [`Body`]
//! whose variant is the model's kind and holds exactly that kind's fields. A [`Model`] can only
//! be made through [`Model::new`] or by loading a file, both of which validate it whole, so
//! every `Model` scores and predicts without panicking. Decision values, predictions
//! (sgn(0) = +1) and evaluation live here; the file format lives in `file.rs`.

mod file;
pub mod onnx;
mod vote;

pub use file::{FORMAT, VERSION};
pub use vote::{SparseRow, VoteScorer, VoteSteps};

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, DataView, Kernel, Matrix, MAX_HEADS};
use crate::data::hashing::Hashing;
use crate::data::scale::{Overflow, Scaler};
use crate::data::{Dataset, LabelType};
use crate::error::{Error, Result};
use crate::metrics::{self, ClassMetrics};
use crate::params::{Algo, TrainParams};
use crate::report::TrainReport;

/// Dense rows in a caller's memory, row-major: what [`Model::scores_of_rows`] scores.
#[derive(Debug, Clone, Copy)]
pub enum DenseRows<'a> {
    /// Single precision, scored as they are.
    F32(&'a [f32]),
    /// Double precision, rounded to the nearest f32 (as NumPy's `astype(float32)`) first.
    F64(&'a [f64]),
}

impl DenseRows<'_> {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            DenseRows::F32(v) => v.len(),
            DenseRows::F64(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` as f32.
    fn get(&self, i: usize) -> f32 {
        match self {
            DenseRows::F32(v) => v[i],
            DenseRows::F64(v) => v[i] as f32,
        }
    }

    /// Value `i` as given.
    fn get_f64(&self, i: usize) -> f64 {
        match self {
            DenseRows::F32(v) => v[i] as f64,
            DenseRows::F64(v) => v[i],
        }
    }

    /// Appends values `start..start + len` as f32 to `buf`; false when one is not finite
    /// (after the rounding).
    fn widen_into(&self, start: usize, len: usize, buf: &mut Vec<f32>) -> bool {
        let finite = |c: &[f32]| c.iter().fold(true, |ok, v| ok & v.is_finite());
        match self {
            DenseRows::F32(v) => {
                let part = &v[start..start + len];
                buf.extend_from_slice(part);
                finite(part)
            }
            DenseRows::F64(v) => {
                buf.extend(v[start..start + len].iter().map(|&a| a as f32));
                finite(buf)
            }
        }
    }
}

/// What a model computes, as named in model files (`"kind"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// One weight vector: `classes[1]` when w.x + bias >= 0, else `classes[0]`.
    #[default]
    Binary,
    /// One weight vector per class: the class with the highest score (first on ties).
    Multiclass,
    /// One binary perceptron per class (class against the rest): the highest score.
    Ovr,
    /// Voted perceptron: every kept vector votes with its survival count, for the sign of
    /// w_k.x + b_k (two classes) or for the class it scores highest (more classes).
    Voted,
    /// Kernel perceptron: sgn(sum over support vectors of coef_s (K(sv_s, x) + bias^2)).
    Kernel,
}

impl ModelKind {
    /// The name used in files and messages.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Binary => "binary",
            ModelKind::Multiclass => "multiclass",
            ModelKind::Ovr => "ovr",
            ModelKind::Voted => "voted",
            ModelKind::Kernel => "kernel",
        }
    }

    /// The kind in words, for titles and messages: "one-vs-rest" rather than the file's
    /// "ovr".
    pub fn describe(self) -> &'static str {
        match self {
            ModelKind::Ovr => "one-vs-rest",
            k => k.name(),
        }
    }

    /// True for the kinds that always have two classes and one decision value per row (a
    /// voted model is binary when it has two classes).
    pub fn is_binary(self) -> bool {
        matches!(self, ModelKind::Binary | ModelKind::Kernel)
    }
}

/// One hyperplane: w.x + bias.
#[derive(Debug, Clone, PartialEq)]
pub struct Hyperplane {
    /// The feature weights, `n_features` of them.
    pub weights: Vec<f32>,
    /// The bias (0 when trained without one).
    pub bias: f32,
}

/// Several hyperplanes: one weight row and one bias per head.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Weight rows, `n_features` each.
    pub weights: Vec<Vec<f32>>,
    /// The bias of each row.
    pub bias: Vec<f32>,
}

impl Rows {
    /// Rows from augmented weights (`d + 1` per head, the last the bias).
    pub fn from_augmented(w: &[f32], d: usize) -> Rows {
        let rows: Vec<&[f32]> = w.chunks_exact(d + 1).collect();
        Rows {
            weights: rows.iter().map(|r| r[..d].to_vec()).collect(),
            bias: rows.iter().map(|r| r[d]).collect(),
        }
    }

    /// The rows of a model fitted without a bias: every bias 0.
    pub fn without_bias(mut self) -> Rows {
        self.bias.iter_mut().for_each(|b| *b = 0.0);
        self
    }

    /// Augmented rows `[w_k, b_k]`, head after head.
    pub fn augmented(&self) -> Vec<f32> {
        self.weights
            .iter()
            .zip(&self.bias)
            .flat_map(|(r, b)| r.iter().copied().chain(std::iter::once(*b)))
            .collect()
    }
}

/// The voted perceptron: vectors and their survival counts (each vector votes with its count).
/// Kept compactly ([`VoteSteps`], model files from version 3): `rows` is the first vector and
/// each step adds one row. Files of versions 1 and 2 hold every vector: `rows` then has them all
/// (with two classes one weight row a vector, with K > 2 classes K rows, vector after vector)
/// and `steps` is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Voted {
    /// The first vector's weight rows (with `steps`), or every vector's.
    pub rows: Rows,
    /// How many steps each vector survived: one count a vector (with `steps`, the first
    /// vector's may be 0).
    pub counts: Vec<u64>,
    /// The steps after the first vector.
    pub steps: Option<VoteSteps>,
}

impl Voted {
    /// Weight rows per vector.
    pub fn heads(&self) -> usize {
        match self.steps {
            Some(_) => self.rows.weights.len(),
            None => self.rows.weights.len() / self.counts.len().max(1),
        }
    }

    /// The number of vectors that vote (count > 0).
    pub fn vectors(&self) -> usize {
        self.counts.iter().filter(|&&c| c > 0).count()
    }

    /// Every voting vector written out (the form of model files before version 3), for
    /// inspection and tests: `d` features, `bias` the bias column's value in training (1, or
    /// 0 without a bias). Memory grows with vectors x heads x d.
    pub fn every_vector(&self, d: usize, bias: f32) -> Voted {
        let Some(steps) = &self.steps else {
            return self.clone();
        };
        let heads = self.heads();
        let da = d + 1;
        let mut w = self.rows.augmented();
        let (mut flat, mut counts) = (Vec::new(), Vec::new());
        for (k, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                flat.extend_from_slice(&w);
                counts.push(c);
            }
            let (Some(&r), Some(a)) = (steps.rows.get(k), steps.coef.chunks(heads).nth(k)) else {
                break;
            };
            let row = &steps.support[r as usize];
            for (h, &a) in a.iter().enumerate() {
                for (&j, &x) in row.idx.iter().zip(&row.val) {
                    w[h * da + j as usize] += a * x;
                }
                w[h * da + d] += a * bias;
            }
        }
        Voted {
            rows: Rows::from_augmented(&flat, d),
            counts,
            steps: None,
        }
    }
}

/// The kernel perceptron's dual form.
#[derive(Debug, Clone, PartialEq)]
pub struct Dual {
    /// The support vectors (training rows with alpha > 0).
    pub support_vectors: Vec<Vec<f32>>,
    /// eta * alpha * y of each support vector.
    pub coef: Vec<f32>,
    /// The kernel and its parameters.
    pub kernel: Kernel,
}

/// What a model holds, by kind: each variant exactly its fields.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One hyperplane.
    Binary(Hyperplane),
    /// One hyperplane per class, trained jointly.
    Multiclass(Rows),
    /// One hyperplane per class, each against the rest.
    Ovr(Rows),
    /// The voted perceptron.
    Voted(Voted),
    /// The kernel perceptron.
    Kernel(Dual),
}

impl Body {
    /// The kind of model this body makes.
    pub fn kind(&self) -> ModelKind {
        match self {
            Body::Binary(_) => ModelKind::Binary,
            Body::Multiclass(_) => ModelKind::Multiclass,
            Body::Ovr(_) => ModelKind::Ovr,
            Body::Voted(_) => ModelKind::Voted,
            Body::Kernel(_) => ModelKind::Kernel,
        }
    }

    /// Every stored number is finite.
    pub fn is_finite(&self) -> bool {
        let fin = |v: &[f32]| v.iter().all(|x| x.is_finite());
        match self {
            Body::Binary(h) => fin(&h.weights) && h.bias.is_finite(),
            Body::Multiclass(r) | Body::Ovr(r) => r.weights.iter().all(|w| fin(w)) && fin(&r.bias),
            Body::Voted(v) => {
                v.rows.weights.iter().all(|w| fin(w))
                    && fin(&v.rows.bias)
                    && v.steps.as_ref().is_none_or(VoteSteps::is_finite)
            }
            Body::Kernel(k) => k.support_vectors.iter().all(|v| fin(v)) && fin(&k.coef),
        }
    }
}

/// A trained, validated classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    algorithm: Algo,
    classes: Vec<String>,
    n_features: usize,
    body: Body,
    params: TrainParams,
    scaling: Option<Scaler>,
    training: Option<TrainReport>,
    /// The type of the class labels, when they came typed (from Python).
    label_type: Option<LabelType>,
    /// The features' names, when the training data had them (a DataFrame's columns).
    feature_names: Option<Vec<String>>,
    /// How raw features are hashed into the columns, when the training data was hashed
    /// (Vowpal Wabbit input).
    hashing: Option<Hashing>,
}

/// Accuracy, confusion matrix and per-class metrics of a model on labelled data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Rows evaluated.
    pub n: usize,
    /// Fraction predicted correctly.
    pub accuracy: f64,
    /// Confusion matrix.
    pub confusion: Confusion,
    /// Binary models: area under the ROC curve of the decision values (null when the data has
    /// one class only, and for multiclass models).
    pub auc: Option<f64>,
    /// Binary models: precision of the positive class (`classes[1]`).
    pub precision: Option<f64>,
    /// Binary models: recall of the positive class.
    pub recall: Option<f64>,
    /// Binary models: F1 of the positive class.
    pub f1: Option<f64>,
    /// Precision, recall, F1 and support of every class.
    pub per_class: Vec<ClassMetrics>,
    /// Macro averages over the classes.
    pub macro_precision: f64,
    /// Macro average recall.
    pub macro_recall: f64,
    /// Macro average F1.
    pub macro_f1: f64,
}

/// Confusion matrix: `matrix[true][predicted]` over `classes`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confusion {
    /// Class names, in the model's order.
    pub classes: Vec<String>,
    /// Counts, rows are true classes, columns predicted classes.
    pub matrix: Vec<Vec<u64>>,
}

impl Model {
    /// A model of `body`'s kind over `classes` and `n_features` features, checked whole (see
    /// [`Model::load`] for the rules). The message says what is wrong.
    pub fn new(
        algorithm: Algo,
        classes: Vec<String>,
        n_features: usize,
        body: Body,
        params: TrainParams,
    ) -> std::result::Result<Model, String> {
        Model::typed(algorithm, classes, None, n_features, body, params)
    }

    /// As [`Model::new`], with class labels of the type `label_type` (compared as that type:
    /// see `data::same_class_as`).
    pub fn typed(
        algorithm: Algo,
        classes: Vec<String>,
        label_type: Option<LabelType>,
        n_features: usize,
        body: Body,
        params: TrainParams,
    ) -> std::result::Result<Model, String> {
        let m = Model {
            algorithm,
            classes,
            n_features,
            body,
            params,
            scaling: None,
            training: None,
            label_type,
            feature_names: None,
            hashing: None,
        };
        file::check(&m)?;
        Ok(m)
    }

    /// The type of the class labels, when they came typed (model files of version 4).
    pub fn label_type(&self) -> Option<LabelType> {
        self.label_type
    }

    /// The features' names, when the model keeps them.
    pub fn feature_names(&self) -> Option<&[String]> {
        self.feature_names.as_deref()
    }

    /// The model with the features' names (one per feature, each a valid label: no line
    /// breaks or control characters).
    pub fn with_feature_names(
        mut self,
        names: Option<Vec<String>>,
    ) -> std::result::Result<Model, String> {
        if let Some(n) = &names {
            file::check_feature_names(n, self.n_features)?;
        }
        self.feature_names = names;
        Ok(self)
    }

    /// How raw features are hashed into the columns, when the model was trained on hashed
    /// input (model files of version 5): loaders of raw input (Vowpal Wabbit text) take it.
    pub fn hashing(&self) -> Option<&Hashing> {
        self.hashing.as_ref()
    }

    /// The model with the hashing its columns came from, checked against the number of
    /// features (2^bits).
    pub fn with_hashing(mut self, hashing: Option<Hashing>) -> std::result::Result<Model, String> {
        if let Some(h) = &hashing {
            file::check_hashing(h, self.n_features)?;
        }
        self.hashing = hashing;
        Ok(self)
    }

    /// The model with `scaling` applied to every input before scoring, checked against the
    /// number of features.
    pub fn with_scaling(mut self, scaling: Option<Scaler>) -> std::result::Result<Model, String> {
        if let Some(s) = &scaling {
            s.check(self.n_features)?;
        }
        self.scaling = scaling;
        Ok(self)
    }

    /// The scaling fitted on the training data, applied to inputs before scoring.
    pub fn scaling(&self) -> Option<&Scaler> {
        self.scaling.as_ref()
    }

    /// True when the model has two classes and one decision value per row (binary, kernel,
    /// and voted models of two classes).
    pub fn is_binary(&self) -> bool {
        self.kind().is_binary() || (self.kind() == ModelKind::Voted && self.classes.len() == 2)
    }

    /// The model with its training report attached.
    pub fn with_training(mut self, report: TrainReport) -> Model {
        self.training = Some(report);
        self
    }

    /// The training algorithm.
    pub fn algorithm(&self) -> Algo {
        self.algorithm
    }
    /// Class names. Binary kinds: index 0 is the -1 class, index 1 the +1 class.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
    /// Number of input features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }
    /// What the model holds.
    pub fn body(&self) -> &Body {
        &self.body
    }
    /// The model's kind.
    pub fn kind(&self) -> ModelKind {
        self.body.kind()
    }
    /// The parameters it was trained with.
    pub fn params(&self) -> &TrainParams {
        &self.params
    }
    /// The report of its training, when kept.
    pub fn training(&self) -> Option<&TrainReport> {
        self.training.as_ref()
    }
    /// The hyperplane of a binary model.
    pub fn hyperplane(&self) -> Option<&Hyperplane> {
        match &self.body {
            Body::Binary(h) => Some(h),
            _ => None,
        }
    }
    /// The hyperplane of a binary model in the input's coordinates: with scaling
    /// x' = (x - o) * f, w.x' + b = (w * f).x + (b - sum_j w_j f_j o_j).
    pub fn input_hyperplane(&self) -> Option<Hyperplane> {
        let h = self.hyperplane()?;
        let Some(s) = &self.scaling else {
            return Some(h.clone());
        };
        let weights: Vec<f32> = h
            .weights
            .iter()
            .zip(&s.factor)
            .map(|(w, f)| w * f)
            .collect();
        let shift: f32 = weights.iter().zip(&s.offset).map(|(w, o)| w * o).sum();
        Some(Hyperplane {
            weights,
            bias: h.bias - shift,
        })
    }

    /// The weight rows of a multiclass, one-vs-rest or voted model.
    pub fn rows(&self) -> Option<&Rows> {
        match &self.body {
            Body::Multiclass(r) | Body::Ovr(r) | Body::Voted(Voted { rows: r, .. }) => Some(r),
            _ => None,
        }
    }

    /// Augmented weight rows `[w_k, b_k]`, head after head (kernel models: none).
    pub fn augmented(&self) -> Vec<f32> {
        match &self.body {
            Body::Binary(h) => h.weights.iter().chain([&h.bias]).copied().collect(),
            Body::Kernel(_) => Vec::new(),
            _ => self.rows().map(Rows::augmented).unwrap_or_default(),
        }
    }

    /// Number of raw scores per data row: 1 for binary models, one per class otherwise
    /// (class scores, or a voted model's votes per class).
    pub fn outputs(&self) -> usize {
        if self.is_binary() {
            1
        } else {
            self.classes.len()
        }
    }

    /// Checks that `ds` has the model's number of features.
    pub fn check_features(&self, ds: &Dataset) -> Result<()> {
        if ds.d != self.n_features {
            return Err(Error::Mismatch {
                path: ds.source.clone(),
                msg: format!(
                    "the model expects {} features, the data has {}",
                    self.n_features, ds.d
                ),
            });
        }
        // Raw input hashed (Vowpal Wabbit text) must have been hashed as the model's was;
        // columns given as numbers are taken as they are.
        if let Some(h) = &ds.hashing {
            if self.hashing.as_ref() != Some(h) {
                return Err(Error::Mismatch {
                    path: ds.source.clone(),
                    msg: match &self.hashing {
                        None => "the data's features are hashed (Vowpal Wabbit text), and the \
                                 model was trained on columns given as numbers"
                            .to_string(),
                        Some(m) => format!(
                            "the data's features are hashed with {} bits, {}, quadratic {:?}, \
                             and the model's were with {} bits, {}, quadratic {:?}",
                            h.bits, h.sign, h.quadratic, m.bits, m.sign, m.quadratic
                        ),
                    },
                });
            }
        }
        Ok(())
    }

    /// Raw scores of every data row (`n * outputs`, row-major), after the model's scaling:
    /// w_k.x + b_k for each class row (computed on `backend` in blocks of at most
    /// `MAX_HEADS` (64) rows of weights), the kernel decision value, or a voted model's votes
    /// (two classes: the sum of count * sgn(w_k.x + b_k); more: each class's counts).
    pub fn raw_scores(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        self.check_features(ds)?;
        let Some(s) = &self.scaling else {
            return self.scores_of_scaled(ds, backend);
        };
        // A block of rows at a time, never a scaled copy of all of X (the same scores).
        let mut out = Vec::new();
        s.for_scaled_blocks(
            &ds.x,
            ds.n,
            ds.d,
            &ds.source,
            Overflow::Saturate,
            |rows, x| {
                let part = Dataset::from_matrix(x, rows, ds.d, None, ds.source.clone());
                out.extend(self.scores_of_scaled(&part, backend)?);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// [`Model::raw_scores`] of dense rows held in memory (`n` rows of
    /// [`Model::n_features`] values, row-major, f32 or f64), on the CPU without building a
    /// data set: each block of rows is widened to f32 and scaled as the model scales (with
    /// the same saturation) into a buffer of 64 KiB, then scored by the CPU backend's dot
    /// product, so the values equal `raw_scores` on the CPU backend bit for bit. A value that
    /// is not finite (or an f64 outside f32's range) is an error naming its row and column
    /// (from 0), as the data set built from an array reports it; `source` names the data.
    /// `None` for models that are not one weight row per output (voted, kernel) or that hold
    /// more than `MAX_HEADS` (64) rows: those score through `raw_scores`.
    ///
    /// Many rows are scored on rayon's pool (the current one, so a caller's `install` bounds
    /// the threads); a few on the calling thread, with nothing started.
    pub fn scores_of_rows(
        &self,
        x: DenseRows<'_>,
        n: usize,
        source: &std::path::Path,
    ) -> Result<Option<Vec<f32>>> {
        use rayon::prelude::*;
        if !matches!(
            self.body,
            Body::Binary(_) | Body::Multiclass(_) | Body::Ovr(_)
        ) {
            return Ok(None);
        }
        let d = self.n_features;
        let w = self.augmented();
        let heads = w.len() / (d + 1);
        if heads == 0 || heads > MAX_HEADS {
            return Ok(None);
        }
        if x.len() != n.saturating_mul(d) {
            return Err(Error::Mismatch {
                path: source.to_path_buf(),
                msg: format!(
                    "the model expects {d} features, the data has {} values for {n} rows",
                    x.len()
                ),
            });
        }
        let mut out: Vec<f32> = crate::limits::zeros(
            || format!("{}: scores of {n} rows x {heads} outputs", source.display()),
            n.saturating_mul(heads),
        )?;
        if n == 0 {
            return Ok(Some(out));
        }
        // Rows a block: 64 KiB of f32 (one row at least), scaled into a buffer and scored.
        let block = ((1usize << 14) / d.max(1)).max(1);
        let scaling = self.scaling.as_ref();
        let score_block = |buf: &mut Vec<f32>, b: usize, o: &mut [f32]| -> bool {
            let r0 = b * block;
            let rows = o.len() / heads;
            buf.clear();
            let finite = x.widen_into(r0 * d, rows * d, buf);
            if let Some(s) = scaling {
                s.apply_saturating(buf);
            }
            crate::backend::cpu::score_rows(buf, d, 1.0, &w, o);
            finite
        };
        let all_finite = if n.saturating_mul(d) < (1 << 16) {
            let mut buf = Vec::new();
            out.chunks_mut(block * heads)
                .enumerate()
                .fold(true, |ok, (b, o)| score_block(&mut buf, b, o) & ok)
        } else {
            out.par_chunks_mut(block * heads)
                .enumerate()
                .map_init(Vec::new, |buf, (b, o)| score_block(buf, b, o))
                .reduce(|| true, |a, b| a & b)
        };
        if !all_finite {
            let i = (0..x.len()).find(|&i| !x.get(i).is_finite()).unwrap_or(0);
            return Err(Error::data(
                source,
                format!(
                    "X holds {:?} at row {}, column {}",
                    x.get_f64(i),
                    i / d.max(1),
                    i % d.max(1)
                ),
            ));
        }
        Ok(Some(out))
    }

    /// [`Model::raw_scores`] of data already scaled as the model scales it (training data).
    pub fn scores_of_scaled(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        self.check_features(ds)?;
        let view = DataView {
            x: ds.view(),
            n: ds.n,
            d: ds.d,
            bias: 1.0,
        };
        if let Body::Kernel(k) = &self.body {
            let flat: Vec<f32> = k.support_vectors.concat();
            let sv = DataView {
                x: (&flat).into(),
                n: k.support_vectors.len(),
                ..view
            };
            let view = DataView {
                bias: if self.params.fit_bias { 1.0 } else { 0.0 },
                ..view
            };
            let idx: Vec<u32> = (0..sv.n as u32).collect();
            return backend.kernel_scores(view, sv, &idx, &k.coef, &k.kernel);
        }
        let outputs = self.outputs();
        crate::limits::check(
            || {
                format!(
                    "{}: scores of {} rows x {outputs} outputs",
                    ds.source.display(),
                    ds.n
                )
            },
            ds.n as u128 * outputs.max(MAX_HEADS) as u128,
            4,
        )?;
        let w = self.augmented();
        if let Body::Voted(v) = &self.body {
            let Some(steps) = &v.steps else {
                let mut votes = vec![0f32; ds.n * outputs];
                vote_totals(view, &w, &v.counts, v.heads(), outputs, backend, &mut votes)?;
                return Ok(votes);
            };
            let view = DataView {
                bias: if self.params.fit_bias { 1.0 } else { 0.0 },
                ..view
            };
            let support = steps.support_csr();
            let (last, before) = v.counts.split_last().unwrap_or((&0, &[]));
            let mut scorer = VoteScorer::new(view, &w, v.heads(), outputs, backend)?;
            scorer.advance(
                view,
                Matrix::Csr(support.view()),
                &steps.rows,
                &steps.coef,
                before,
                backend,
            )?;
            return Ok(scorer.votes_with(*last));
        }
        let da = ds.d + 1;
        let heads = w.len() / da;
        if heads <= MAX_HEADS {
            return backend.scores(view, &w);
        }
        let mut out = vec![0f32; ds.n * heads];
        for h0 in (0..heads).step_by(MAX_HEADS) {
            let h1 = (h0 + MAX_HEADS).min(heads);
            let part = backend.scores(view, &w[h0 * da..h1 * da])?;
            let k = h1 - h0;
            for i in 0..ds.n {
                out[i * heads + h0..i * heads + h1].copy_from_slice(&part[i * k..(i + 1) * k]);
            }
        }
        Ok(out)
    }

    /// One decision value per row: binary w.x + b (kernel: f(x); voted: the count-weighted
    /// vote); otherwise the winning class's score (or votes).
    pub fn decision_values(&self, raw: &[f32]) -> Vec<f32> {
        if self.is_binary() {
            return raw.to_vec();
        }
        raw.chunks_exact(self.outputs())
            .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .collect()
    }

    /// Predicted class index per row from raw scores (sgn(0) = +1; the first class on ties).
    pub fn predict(&self, raw: &[f32]) -> Vec<u32> {
        if self.is_binary() {
            return Self::predict_index(raw);
        }
        raw.chunks_exact(self.outputs())
            .map(|r| argmax(r) as u32)
            .collect()
    }

    /// Decision values for every row of `ds` (see [`Model::decision_values`]).
    pub fn decision_function(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        Ok(self.decision_values(&self.raw_scores(ds, backend)?))
    }

    /// Binary class index per decision value (sgn(0) = +1, i.e. class 1).
    pub fn predict_index(scores: &[f32]) -> Vec<u32> {
        scores.iter().map(|&s| u32::from(s >= 0.0)).collect()
    }

    /// The model's class index of every row's label. Labels are matched to the model's
    /// classes by name, or by value when both are finite numbers ("1.0" and "+1" match "1");
    /// a label the model does not know is an error naming it. Every command that compares
    /// labels with predictions goes through here.
    pub fn class_indices(&self, ds: &Dataset) -> Result<Vec<u32>> {
        ds.class_indices_in(&self.classes, self.label_type, "the model's")
    }

    /// Evaluates on labelled data (labels matched as in [`Model::class_indices`]).
    pub fn evaluate(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Evaluation> {
        let truth = self.class_indices(ds)?;
        let raw = self.raw_scores(ds, backend)?;
        Ok(self.evaluation(&truth, &raw))
    }

    /// The evaluation of rows whose classes (indices into the model's) are `truth` and whose
    /// scores ([`Model::raw_scores`]) are `raw`: what [`Model::evaluate`] gives for the rows,
    /// from their scores alone (rows read in blocks keep only these).
    pub fn evaluation(&self, truth: &[u32], raw: &[f32]) -> Evaluation {
        let k = self.classes.len();
        let n = truth.len();
        let pred = self.predict(raw);
        let mut matrix = vec![vec![0u64; k]; k];
        let mut correct = 0usize;
        for (p, &t) in pred.iter().zip(truth) {
            let t = t as usize;
            matrix[t][*p as usize] += 1;
            correct += usize::from(t == *p as usize);
        }
        let binary = self.is_binary();
        let auc = if binary {
            let positive: Vec<bool> = truth.iter().map(|&t| t == 1).collect();
            metrics::auc(&self.decision_values(raw), &positive)
        } else {
            None
        };
        let (per_class, macros) = metrics::per_class(&self.classes, &matrix);
        let pos = per_class.get(1).filter(|_| binary);
        Evaluation {
            n,
            accuracy: if n == 0 {
                0.0
            } else {
                correct as f64 / n as f64
            },
            confusion: Confusion {
                classes: self.classes.clone(),
                matrix,
            },
            auc,
            precision: pos.map(|m| m.precision),
            recall: pos.map(|m| m.recall),
            f1: pos.map(|m| m.f1),
            per_class,
            macro_precision: macros[0],
            macro_recall: macros[1],
            macro_f1: macros[2],
        }
    }
}

/// Index of the first highest value.
pub fn argmax(r: &[f32]) -> usize {
    let mut best = 0;
    for (k, v) in r.iter().enumerate() {
        if *v > r[best] {
            best = k;
        }
    }
    best
}

/// Adds the votes of voted vectors to `votes` (`n * outputs`) for every row of `view`: the
/// vectors are `flat` (`heads * (d + 1)` weights each, concatenated) with `counts`; two classes
/// (`outputs` 1), count * sgn(w_v.x + b_v) (sgn(0) = +1) added in f32 in vector order; K
/// classes, each vector's count to the class it scores highest (first on ties). Vectors are
/// scored on `backend` in blocks of at most [`MAX_HEADS`] weight rows, so memory stays
/// `n * outputs` whatever the number of vectors.
pub fn vote_totals(
    view: DataView<'_>,
    flat: &[f32],
    counts: &[u64],
    heads: usize,
    outputs: usize,
    backend: &dyn Backend,
    votes: &mut [f32],
) -> Result<()> {
    let da = view.d + 1;
    let heads = heads.max(1);
    let per_block = (MAX_HEADS / heads).max(1);
    for v0 in (0..counts.len()).step_by(per_block) {
        let v1 = (v0 + per_block).min(counts.len());
        let s = backend.scores(view, &flat[v0 * heads * da..v1 * heads * da])?;
        let width = (v1 - v0) * heads;
        for (i, row) in s.chunks_exact(width).enumerate() {
            let out = &mut votes[i * outputs..(i + 1) * outputs];
            for (k, c) in counts[v0..v1].iter().enumerate() {
                let c = *c as f32;
                let sv = &row[k * heads..(k + 1) * heads];
                if outputs == 1 {
                    out[0] += if sv[0] >= 0.0 { c } else { -c };
                } else {
                    out[argmax(sv)] += c;
                }
            }
        }
    }
    Ok(())
}
