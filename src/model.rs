//! A trained model: weights, bias, class names and how it was trained; decision values and
//! predictions (sgn(0) = +1); evaluation; and the versioned JSON model file.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::algo::TrainReport;
use crate::backend::{Backend, DataView};
use crate::data::{cmp_class, Dataset};
use crate::error::{Error, Result};
use crate::params::{Params, TrainParams};

/// The `format` field of every model file.
pub const FORMAT: &str = "rosenblatt-model";
/// The model-file version this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// A binary linear classifier: predicts `classes[1]` when w.x + bias >= 0, else `classes[0]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Always [`FORMAT`].
    pub format: String,
    /// File version, [`VERSION`] when written by this build.
    pub version: u32,
    /// Training algorithm.
    pub algorithm: String,
    /// Class names: index 0 is the -1 class, index 1 the +1 class.
    pub classes: Vec<String>,
    /// Number of input features.
    pub n_features: usize,
    /// Feature weights, `n_features` of them.
    pub weights: Vec<f32>,
    /// Bias (0 when trained with `--no-bias`).
    pub bias: f32,
    /// The parameters used.
    pub params: TrainParams,
    /// The training report.
    pub training: Option<TrainReport>,
}

/// Accuracy and confusion matrix of a model on labelled data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Rows evaluated.
    pub n: usize,
    /// Fraction predicted correctly.
    pub accuracy: f64,
    /// Confusion matrix.
    pub confusion: Confusion,
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
    /// Builds a model from augmented weights `w` (`d + 1` entries, the last the bias).
    pub fn new(
        classes: Vec<String>,
        d: usize,
        w: &[f32],
        params: &Params,
        report: TrainReport,
    ) -> Self {
        Model {
            format: FORMAT.into(),
            version: VERSION,
            algorithm: params.algo.name().into(),
            classes,
            n_features: d,
            weights: w[..d].to_vec(),
            bias: if params.fit_bias { w[d] } else { 0.0 },
            params: (**params).clone(),
            training: Some(report),
        }
    }

    /// Augmented weights `[w, bias]` for the backends (bias column value 1).
    pub fn augmented(&self) -> Vec<f32> {
        let mut w = self.weights.clone();
        w.push(self.bias);
        w
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

    /// Decision values w.x + bias for every row of `ds`, computed on `backend`.
    pub fn decision_function(&self, ds: &Dataset, backend: &dyn Backend) -> Result<Vec<f32>> {
        self.check_features(ds)?;
        let view = DataView {
            x: &ds.x,
            n: ds.n,
            d: ds.d,
            bias: 1.0,
        };
        backend.scores(view, &self.augmented())
    }

    /// Predicted class index per decision value (sgn(0) = +1, i.e. class 1).
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
        let scores = self.decision_function(ds, backend)?;
        let pred = Self::predict_index(&scores);
        let mut matrix = vec![vec![0u64; k]; k];
        let mut correct = 0usize;
        for (p, t) in pred.iter().zip(&labels.index) {
            let t = map[*t as usize];
            matrix[t][*p as usize] += 1;
            correct += usize::from(t == *p as usize);
        }
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
        if m.weights.len() != m.n_features {
            return Err(bad(format!(
                "corrupt model: {} weights for {} features",
                m.weights.len(),
                m.n_features
            )));
        }
        if m.classes.len() != 2 {
            return Err(bad(format!(
                "corrupt model: a binary model needs 2 classes, found {}",
                m.classes.len()
            )));
        }
        if !m
            .weights
            .iter()
            .chain(std::iter::once(&m.bias))
            .all(|w| w.is_finite())
        {
            return Err(bad("corrupt model: non-finite weight".into()));
        }
        Ok(m)
    }
}
