//! A trained model: weights, bias, class names and how it was trained; decision values and
//! predictions (sgn(0) = +1); evaluation; and the versioned JSON model file.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::algo::TrainReport;
use crate::backend::{Backend, DataView, Kernel};
use crate::data::{cmp_class, Dataset};
use crate::error::{Error, Result};
use crate::metrics::{self, ClassMetrics};
use crate::params::{Params, TrainParams};

/// The `format` field of every model file.
pub const FORMAT: &str = "rosenblatt-model";
/// The model-file version this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// What a model computes from its weight rows.
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
    /// Voted perceptron: sign of the sum over kept vectors of count * sgn(w_k.x + b_k).
    Voted,
    /// Kernel perceptron: sgn(sum over support vectors of coef_s (K(sv_s, x) + bias^2)).
    Kernel,
}

/// A trained linear classifier (binary, multiclass, one-vs-rest or voted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Always [`FORMAT`].
    pub format: String,
    /// File version, [`VERSION`] when written by this build.
    pub version: u32,
    /// Training algorithm.
    pub algorithm: String,
    /// How predictions are made.
    #[serde(default)]
    pub kind: ModelKind,
    /// Class names. Binary and voted: index 0 is the -1 class, index 1 the +1 class.
    pub classes: Vec<String>,
    /// Number of input features.
    pub n_features: usize,
    /// Binary: the feature weights, `n_features` of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<f32>,
    /// Binary: the bias (0 when trained with `--no-bias`).
    #[serde(default)]
    pub bias: f32,
    /// Multiclass and one-vs-rest: one weight row per class; voted: one per kept vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_weights: Option<Vec<Vec<f32>>>,
    /// The bias of each row of `class_weights`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_bias: Option<Vec<f32>>,
    /// Voted: the survival count of each kept vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<Vec<u64>>,
    /// Kernel: the support vectors (training rows with alpha > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support_vectors: Option<Vec<Vec<f32>>>,
    /// Kernel: eta * alpha * y of each support vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_coef: Option<Vec<f32>>,
    /// Kernel: the kernel and its parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Kernel>,
    /// The parameters used.
    pub params: TrainParams,
    /// The training report.
    pub training: Option<TrainReport>,
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

/// Most weight rows scored in one backend call (the GPU kernels' head limit).
const HEADS_PER_CALL: usize = 64;

impl Model {
    fn base(
        classes: Vec<String>,
        d: usize,
        params: &Params,
        report: TrainReport,
        kind: ModelKind,
    ) -> Self {
        Model {
            format: FORMAT.into(),
            version: VERSION,
            algorithm: params.algo.name().into(),
            kind,
            classes,
            n_features: d,
            weights: Vec::new(),
            bias: 0.0,
            class_weights: None,
            class_bias: None,
            counts: None,
            support_vectors: None,
            dual_coef: None,
            kernel: None,
            params: (**params).clone(),
            training: Some(report),
        }
    }

    /// A binary model from augmented weights `w` (`d + 1` entries, the last the bias).
    pub fn new(
        classes: Vec<String>,
        d: usize,
        w: &[f32],
        params: &Params,
        report: TrainReport,
    ) -> Self {
        let mut m = Self::base(classes, d, params, report, ModelKind::Binary);
        m.weights = w[..d].to_vec();
        m.bias = if params.fit_bias { w[d] } else { 0.0 };
        m
    }

    /// A model with one augmented weight row per head (`rows * (d + 1)` values).
    pub fn with_rows(
        kind: ModelKind,
        classes: Vec<String>,
        d: usize,
        w: &[f32],
        counts: Option<Vec<u64>>,
        params: &Params,
        report: TrainReport,
    ) -> Self {
        let mut m = Self::base(classes, d, params, report, kind);
        let rows: Vec<&[f32]> = w.chunks_exact(d + 1).collect();
        m.class_weights = Some(rows.iter().map(|r| r[..d].to_vec()).collect());
        m.class_bias = Some(
            rows.iter()
                .map(|r| if params.fit_bias { r[d] } else { 0.0 })
                .collect(),
        );
        m.counts = counts;
        m
    }

    /// A kernel model from its support vectors (rows of `ds`) and dual coefficients.
    pub fn kernel(
        classes: Vec<String>,
        ds: &Dataset,
        support: &[u32],
        coef: Vec<f32>,
        kernel: Kernel,
        params: &Params,
        report: TrainReport,
    ) -> Self {
        let mut m = Self::base(classes, ds.d, params, report, ModelKind::Kernel);
        m.support_vectors = Some(
            support
                .iter()
                .map(|&j| ds.row(j as usize).to_vec())
                .collect(),
        );
        m.dual_coef = Some(coef);
        m.kernel = Some(kernel);
        m
    }

    /// Augmented weight rows `[w_k, b_k]`, head after head (bias column value 1).
    pub fn augmented(&self) -> Vec<f32> {
        match (&self.class_weights, &self.class_bias) {
            (Some(rows), Some(bias)) => rows
                .iter()
                .zip(bias)
                .flat_map(|(r, b)| r.iter().copied().chain(std::iter::once(*b)))
                .collect(),
            _ => {
                let mut w = self.weights.clone();
                w.push(self.bias);
                w
            }
        }
    }

    /// Number of weight rows scored per data row.
    pub fn heads(&self) -> usize {
        self.class_weights.as_ref().map_or(1, Vec::len)
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
        Ok(())
    }

    /// Raw scores w_k.x + b_k of every weight row for every data row (`n * heads`,
    /// row-major), computed on `backend` in blocks of at most 64 rows of weights.
    pub fn raw_scores(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        self.check_features(ds)?;
        let view = DataView {
            x: &ds.x,
            n: ds.n,
            d: ds.d,
            bias: 1.0,
        };
        if let (Some(sv), Some(coef), Some(kernel)) =
            (&self.support_vectors, &self.dual_coef, &self.kernel)
        {
            let flat: Vec<f32> = sv.concat();
            let svv = DataView {
                x: &flat,
                n: sv.len(),
                d: ds.d,
                bias: 1.0,
            };
            let view = DataView {
                bias: if self.params.fit_bias { 1.0 } else { 0.0 },
                ..view
            };
            let idx: Vec<u32> = (0..sv.len() as u32).collect();
            return backend.kernel_scores(view, svv, &idx, coef, kernel);
        }
        let w = self.augmented();
        let da = ds.d + 1;
        let heads = self.heads();
        if heads <= HEADS_PER_CALL {
            return backend.scores(view, &w);
        }
        let mut out = vec![0f32; ds.n * heads];
        for h0 in (0..heads).step_by(HEADS_PER_CALL) {
            let h1 = (h0 + HEADS_PER_CALL).min(heads);
            let part = backend.scores(view, &w[h0 * da..h1 * da])?;
            let k = h1 - h0;
            for i in 0..ds.n {
                out[i * heads + h0..i * heads + h1].copy_from_slice(&part[i * k..(i + 1) * k]);
            }
        }
        Ok(out)
    }

    /// One decision value per row: binary w.x + b; voted, the count-weighted vote; for
    /// multiclass and one-vs-rest, the winning class's score.
    pub fn decision_values(&self, raw: &[f32]) -> Vec<f32> {
        let h = self.heads();
        match self.kind {
            ModelKind::Binary | ModelKind::Kernel => raw.to_vec(),
            ModelKind::Voted => {
                let counts = self.counts.as_deref().unwrap_or(&[]);
                raw.chunks_exact(h)
                    .map(|r| {
                        r.iter()
                            .zip(counts)
                            .map(|(s, c)| if *s >= 0.0 { *c as f32 } else { -(*c as f32) })
                            .sum()
                    })
                    .collect()
            }
            ModelKind::Multiclass | ModelKind::Ovr => raw
                .chunks_exact(h)
                .map(|r| r.iter().copied().fold(f32::NEG_INFINITY, f32::max))
                .collect(),
        }
    }

    /// Predicted class index per row from raw scores (sgn(0) = +1; the first class on ties).
    pub fn predict(&self, raw: &[f32]) -> Vec<u32> {
        match self.kind {
            ModelKind::Binary | ModelKind::Voted | ModelKind::Kernel => {
                Self::predict_index(&self.decision_values(raw))
            }
            ModelKind::Multiclass | ModelKind::Ovr => raw
                .chunks_exact(self.heads())
                .map(|r| {
                    let mut best = 0;
                    for (k, v) in r.iter().enumerate() {
                        if *v > r[best] {
                            best = k;
                        }
                    }
                    best as u32
                })
                .collect(),
        }
    }

    /// Decision values for every row of `ds` (see [`Model::decision_values`]).
    pub fn decision_function(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        Ok(self.decision_values(&self.raw_scores(ds, backend)?))
    }

    /// Binary class index per decision value (sgn(0) = +1, i.e. class 1).
    pub fn predict_index(scores: &[f32]) -> Vec<u32> {
        scores.iter().map(|&s| u32::from(s >= 0.0)).collect()
    }

    /// Evaluates on labelled data. Labels are matched to the model's classes by name (or
    /// numeric value, so "1.0" matches "1"); a label the model does not know is an error.
    pub fn evaluate(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Evaluation> {
        let labels = ds.require_labels()?;
        let k = self.classes.len();
        let mut map = Vec::with_capacity(labels.classes.len());
        for c in &labels.classes {
            let idx = self
                .classes
                .iter()
                .position(|m| cmp_class(m, c) == std::cmp::Ordering::Equal || m == c)
                .ok_or_else(|| Error::Mismatch {
                    path: ds.source.clone(),
                    msg: format!(
                        "label {c:?} is not one of the model's classes ({})",
                        self.classes.join(", ")
                    ),
                })?;
            map.push(idx);
        }
        let raw = self.raw_scores(ds, backend)?;
        let pred = self.predict(&raw);
        let mut matrix = vec![vec![0u64; k]; k];
        let mut correct = 0usize;
        for (p, t) in pred.iter().zip(&labels.index) {
            let t = map[*t as usize];
            matrix[t][*p as usize] += 1;
            correct += usize::from(t == *p as usize);
        }
        let binary = matches!(
            self.kind,
            ModelKind::Binary | ModelKind::Voted | ModelKind::Kernel
        );
        let auc = if binary {
            let positive: Vec<bool> = labels.index.iter().map(|t| map[*t as usize] == 1).collect();
            metrics::auc(&self.decision_values(&raw), &positive)
        } else {
            None
        };
        let (per_class, macros) = metrics::per_class(&self.classes, &matrix);
        let pos = per_class.get(1).filter(|_| binary);
        Ok(Evaluation {
            n: ds.n,
            accuracy: if ds.n == 0 {
                0.0
            } else {
                correct as f64 / ds.n as f64
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
        })
    }

    /// Writes the model as pretty JSON.
    pub fn write(&self, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        out.write_all(b"\n")
    }

    /// Reads and checks a model file.
    pub fn load(path: &Path) -> Result<Model> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_json(path, &text)
    }

    /// Checks that the fields agree with the kind.
    fn check(&self) -> std::result::Result<(), String> {
        let k = self.classes.len();
        if self.kind == ModelKind::Kernel {
            if k != 2 {
                return Err(format!("a kernel model needs 2 classes, found {k}"));
            }
            let (Some(sv), Some(coef), Some(_)) =
                (&self.support_vectors, &self.dual_coef, &self.kernel)
            else {
                return Err("a kernel model needs support_vectors, dual_coef and kernel".into());
            };
            if sv.len() != coef.len() || sv.iter().any(|r| r.len() != self.n_features) {
                return Err("support_vectors and dual_coef do not match".into());
            }
            if !sv.iter().flatten().chain(coef).all(|v| v.is_finite()) {
                return Err("non-finite value".into());
            }
            return Ok(());
        }
        match self.kind {
            ModelKind::Binary | ModelKind::Voted if k != 2 => {
                return Err(
                    format!("a {:?} model needs 2 classes, found {k}", self.kind).to_lowercase(),
                )
            }
            ModelKind::Multiclass | ModelKind::Ovr if k < 2 => return Err(format!("{k} classes")),
            _ => {}
        }
        let rows: Vec<&Vec<f32>> = match (&self.kind, &self.class_weights) {
            (ModelKind::Binary, _) => vec![&self.weights],
            (_, Some(r)) => r.iter().collect(),
            (_, None) => return Err("no class_weights".into()),
        };
        if let Some(r) = rows.iter().find(|r| r.len() != self.n_features) {
            return Err(format!(
                "{} weights for {} features",
                r.len(),
                self.n_features
            ));
        }
        let heads = rows.len();
        if matches!(self.kind, ModelKind::Multiclass | ModelKind::Ovr) && heads != k {
            return Err(format!("{heads} weight rows for {k} classes"));
        }
        if self.kind != ModelKind::Binary && self.class_bias.as_ref().map(Vec::len) != Some(heads) {
            return Err("class_bias does not match class_weights".into());
        }
        if self.kind == ModelKind::Voted && self.counts.as_ref().map(Vec::len) != Some(heads) {
            return Err("counts do not match the voted vectors".into());
        }
        if !self.augmented().iter().all(|w| w.is_finite()) {
            return Err("non-finite weight".into());
        }
        Ok(())
    }

    /// Parses and checks model JSON; `path` is used in error messages.
    pub fn from_json(path: &Path, text: &str) -> Result<Model> {
        let bad = |msg: String| Error::Model {
            path: path.to_path_buf(),
            msg,
        };
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("not a rosenblatt model: invalid JSON ({e})")))?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(bad(format!(
                    "not a rosenblatt model: format is {other:?}, expected {FORMAT:?}"
                )))
            }
            None => {
                return Err(bad(format!(
                    "not a rosenblatt model: no \"format\": {FORMAT:?} field"
                )))
            }
        }
        match v.get("version").and_then(|f| f.as_u64()) {
            Some(ver) if ver > VERSION as u64 => {
                return Err(bad(format!(
                    "model file version {ver} is newer than this rosenblatt reads (version {VERSION}); upgrade rosenblatt"
                )))
            }
            Some(_) => {}
            None => return Err(bad("corrupt model: missing or non-integer \"version\"".into())),
        }
        let m: Model = serde_json::from_value(v).map_err(|e| bad(format!("corrupt model: {e}")))?;
        m.check()
            .map_err(|msg| bad(format!("corrupt model: {msg}")))?;
        Ok(m)
    }
}
