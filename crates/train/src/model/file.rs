//! The model file: versioned JSON ("format": "rosenblatt-model", "version" 1 to 6), one flat
//! object whose `kind` says which fields it has. [`Wire`] is that layout exactly; a file becomes a
//! [`Model`] only after [`check`] has validated it whole: the fields of its kind and no other,
//! lengths against `n_features` and the class count, finite numbers, kernel parameters in
//! range, positive counts, distinct class names and valid training parameters.
//!
//! Version 1 writers also wrote `"bias": 0.0` for kinds without a single bias; that value is
//! accepted on load for compatibility and no longer written. Version 3 added the voted
//! perceptron's steps (`vote_support`, `vote_rows`, `vote_coef`: the first vector in
//! `class_weights`/`class_bias`, then one step a mistake); a voted model is written as
//! version 3 and every other kind, unchanged since, as version 2, which older builds read.
//! Version 4 added `label_type` (the type of labels that came typed, from Python: "int",
//! "float", "bool" or "str", compared as that type) and `feature_names`; a model with either
//! is written as version 4, every other one as before. Version 5 added `hashing` (how raw
//! features were hashed into the columns: bits, sign, quadratic interactions); a model with it
//! is written as version 5. Version 6 added the hashing of CSV files with categorical columns
//! (`hashing.categorical`, the columns' names or indices, and `hashing.csv_columns`, the
//! training file's feature columns); a model with them is written as version 6. Version 7
//! added online scaling (`scaling.kind` "online") and, in the training report,
//! `progressive_accuracy` for a streamed run in place of the `train_accuracy` earlier versions
//! wrote there (a streamed report of version 6 or before loads with its accuracy moved to
//! `progressive_accuracy`); a model with either is written as version 7.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Body, Dual, Hyperplane, Model, ModelKind, Rows, SparseRow, VoteSteps, Voted};
use crate::data::hashing::Hashing;
use crate::data::scale::Scaler;
use crate::data::{check_label, same_class_as, LabelType};
use crate::error::{Error, Result};
use crate::params::Kernel;
use crate::params::{Algo, Scale, TrainParams};
use crate::report::TrainReport;

/// The `format` field of every model file.
pub const FORMAT: &str = "rosenblatt-model";
/// The newest model-file version this build reads (and writes for models that hash CSV
/// files with categorical columns).
pub const VERSION: u32 = 7;

/// The version written for models that hash CSV files with categorical columns.
const VERSION_CSV_HASHING: u32 = 6;

/// The version written for models with hashing of Vowpal Wabbit text.
const VERSION_HASHING: u32 = 5;

/// The version written for models with typed labels or feature names (and no hashing).
const VERSION_NAMES: u32 = 4;

/// The version written for voted models with steps.
const VERSION_STEPS: u32 = 3;

/// The version written for every kind but the voted perceptron's steps.
const VERSION_NO_STEPS: u32 = 2;

/// The file's layout (version 3; version 1 files, written before the scaling and the
/// training rules for real data, have no `scaling` and load with the defaults; version 2 has
/// no voted steps). Field order is the order written.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: String,
    version: u32,
    algorithm: Algo,
    #[serde(default)]
    kind: ModelKind,
    classes: Vec<String>,
    n_features: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weights: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bias: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    class_weights: Option<Vec<Vec<f32>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    class_bias: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counts: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vote_support: Option<Vec<SparseRow>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vote_rows: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vote_coef: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    support_vectors: Option<Vec<Vec<f32>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dual_coef: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernel: Option<Kernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scaling: Option<Scaler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label_type: Option<LabelType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hashing: Option<Hashing>,
    params: TrainParams,
    training: Option<TrainReport>,
}

impl Wire {
    fn of(m: &Model) -> Wire {
        let mut w = Wire {
            format: FORMAT.into(),
            version: match &m.body {
                _ if m.scaling.as_ref().is_some_and(|s| s.kind == Scale::Online)
                    || m.training
                        .as_ref()
                        .is_some_and(|t| t.progressive_accuracy.is_some()) =>
                {
                    VERSION
                }
                _ if m.hashing.as_ref().is_some_and(|h| h.hashes_csv()) => VERSION_CSV_HASHING,
                _ if m.hashing.is_some() => VERSION_HASHING,
                _ if m.label_type.is_some() || m.feature_names.is_some() => VERSION_NAMES,
                Body::Voted(Voted { steps: Some(_), .. }) => VERSION_STEPS,
                _ => VERSION_NO_STEPS,
            },
            algorithm: m.algorithm,
            kind: m.kind(),
            classes: m.classes.clone(),
            n_features: m.n_features,
            weights: None,
            bias: None,
            class_weights: None,
            class_bias: None,
            counts: None,
            vote_support: None,
            vote_rows: None,
            vote_coef: None,
            support_vectors: None,
            dual_coef: None,
            kernel: None,
            scaling: m.scaling.clone(),
            label_type: m.label_type,
            feature_names: m.feature_names.clone(),
            hashing: m.hashing.clone(),
            params: m.params.clone(),
            training: m.training.clone(),
        };
        let mut rows = |r: &Rows| {
            w.class_weights = Some(r.weights.clone());
            w.class_bias = Some(r.bias.clone());
        };
        match &m.body {
            Body::Binary(h) => {
                w.weights = Some(h.weights.clone());
                w.bias = Some(h.bias);
            }
            Body::Multiclass(r) | Body::Ovr(r) => rows(r),
            Body::Voted(v) => {
                rows(&v.rows);
                w.counts = Some(v.counts.clone());
                if let Some(st) = &v.steps {
                    w.vote_support = Some(st.support.clone());
                    w.vote_rows = Some(st.rows.clone());
                    w.vote_coef = Some(st.coef.clone());
                }
            }
            Body::Kernel(k) => {
                w.support_vectors = Some(k.support_vectors.clone());
                w.dual_coef = Some(k.coef.clone());
                w.kernel = Some(k.kernel);
            }
        }
        w
    }

    /// The body of the file's kind, refusing fields of other kinds.
    fn body(&mut self) -> std::result::Result<Body, String> {
        let kind = self.kind;
        let name = a_kind(kind);
        let need = |field: &str| format!("{name} model needs the field {field:?}");
        // Version 1 wrote "bias": 0.0 for every kind; only a binary model has one.
        if kind != ModelKind::Binary && self.bias.is_some_and(|b| b != 0.0) {
            return Err(format!("{name} model has no field \"bias\""));
        }
        let body = match kind {
            ModelKind::Binary => Body::Binary(Hyperplane {
                weights: self.weights.take().ok_or_else(|| need("weights"))?,
                bias: self.bias.take().unwrap_or(0.0),
            }),
            ModelKind::Multiclass | ModelKind::Ovr | ModelKind::Voted => {
                let rows = Rows {
                    weights: self
                        .class_weights
                        .take()
                        .ok_or_else(|| need("class_weights"))?,
                    bias: self.class_bias.take().ok_or_else(|| need("class_bias"))?,
                };
                match kind {
                    ModelKind::Multiclass => Body::Multiclass(rows),
                    ModelKind::Ovr => Body::Ovr(rows),
                    _ => Body::Voted(Voted {
                        rows,
                        counts: self.counts.take().ok_or_else(|| need("counts"))?,
                        steps: self.vote_steps()?,
                    }),
                }
            }
            ModelKind::Kernel => Body::Kernel(Dual {
                support_vectors: self
                    .support_vectors
                    .take()
                    .ok_or_else(|| need("support_vectors"))?,
                coef: self.dual_coef.take().ok_or_else(|| need("dual_coef"))?,
                kernel: self.kernel.take().ok_or_else(|| need("kernel"))?,
            }),
        };
        let left = [
            ("weights", self.weights.is_some()),
            ("class_weights", self.class_weights.is_some()),
            ("class_bias", self.class_bias.is_some()),
            ("counts", self.counts.is_some()),
            ("vote_support", self.vote_support.is_some()),
            ("vote_rows", self.vote_rows.is_some()),
            ("vote_coef", self.vote_coef.is_some()),
            ("support_vectors", self.support_vectors.is_some()),
            ("dual_coef", self.dual_coef.is_some()),
            ("kernel", self.kernel.is_some()),
        ];
        if let Some((field, _)) = left.iter().find(|(_, present)| *present) {
            return Err(format!("{name} model has no field {field:?}"));
        }
        Ok(body)
    }
}

impl Wire {
    /// A voted model's steps: all three fields or none.
    fn vote_steps(&mut self) -> std::result::Result<Option<VoteSteps>, String> {
        match (
            self.vote_support.take(),
            self.vote_rows.take(),
            self.vote_coef.take(),
        ) {
            (None, None, None) => Ok(None),
            (Some(support), Some(rows), Some(coef)) => {
                if self.version < 3 {
                    return Err(format!(
                        "version {} has no voted steps (vote_* fields are version 3)",
                        self.version
                    ));
                }
                Ok(Some(VoteSteps {
                    support,
                    rows,
                    coef,
                }))
            }
            _ => Err(
                "a voted model with steps needs all of vote_support, vote_rows and vote_coef"
                    .into(),
            ),
        }
    }
}

/// The fields read before the rest: any JSON object, other fields skipped.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    version: Option<serde_json::Value>,
}

/// A file whose fields do not make a model.
fn corrupt(path: &Path, e: serde_json::Error) -> Error {
    Error::Model {
        path: path.to_path_buf(),
        msg: format!("corrupt model: {e}"),
    }
}

/// "a binary", "an ovr", ...: the kind with its article, for messages.
fn a_kind(kind: ModelKind) -> String {
    let name = kind.name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

/// Checks a model whole; the message says what is wrong.
pub(super) fn check(m: &Model) -> std::result::Result<(), String> {
    let k = m.classes.len();
    let kind = m.kind();
    let name = a_kind(kind);
    if kind.is_binary() && k != 2 {
        return Err(format!("{name} model needs 2 classes, found {k}"));
    }
    if let Some(s) = &m.scaling {
        s.check(m.n_features)?;
    }
    if k < 2 {
        return Err(format!("{name} model needs at least 2 classes, found {k}"));
    }
    if let Some(c) = m.classes.iter().find(|c| check_label(c).is_err()) {
        return Err(format!(
            "class {c:?} contains a line break, tab or other control character"
        ));
    }
    for (i, a) in m.classes.iter().enumerate() {
        if let Some(b) = m.classes[..i]
            .iter()
            .find(|b| same_class_as(m.label_type, a, b))
        {
            return Err(format!("class {a:?} is listed twice (as {b:?})"));
        }
    }
    if let Some(ty) = m.label_type {
        check_typed_names(&m.classes, ty)?;
    }
    if let Some(names) = &m.feature_names {
        check_feature_names(names, m.n_features)?;
    }
    if let Some(h) = &m.hashing {
        check_hashing(h, m.n_features)?;
    }
    if m.n_features == 0 {
        return Err("n_features is 0".into());
    }
    check_body(m)?;
    if !m.body.is_finite() {
        return Err("a weight is not a finite number".into());
    }
    m.params
        .clone()
        .validate()
        .map_err(|e| format!("params: {e}"))?;
    Ok(())
}

/// Class names of a type read as that type: integers, numbers, False/True.
fn check_typed_names(classes: &[String], ty: LabelType) -> std::result::Result<(), String> {
    let ok = |c: &String| match ty {
        LabelType::Int => c.parse::<i128>().is_ok(),
        LabelType::Float => c.parse::<f64>().is_ok(),
        LabelType::Bool => c == "False" || c == "True",
        LabelType::Str => true,
    };
    match classes.iter().find(|c| !ok(c)) {
        Some(c) => Err(format!(
            "class {c:?} is not a label of the type {:?}",
            ty.name()
        )),
        None => Ok(()),
    }
}

/// Feature names: one per feature, each without line breaks or control characters.
/// A hashing's settings, and its 2^bits columns against the model's `d`.
pub(super) fn check_hashing(h: &Hashing, d: usize) -> std::result::Result<(), String> {
    h.check()?;
    if h.hashes_csv() != h.csv_columns.is_some() {
        return Err(
            "a hashing of CSV columns records both its categorical columns and the number of \
             feature columns"
                .into(),
        );
    }
    if h.columns() != d {
        return Err(format!(
            "hashing into 2^{} = {} columns, but the model has {d} features",
            h.bits,
            h.columns()
        ));
    }
    Ok(())
}

pub(super) fn check_feature_names(names: &[String], d: usize) -> std::result::Result<(), String> {
    if names.len() != d {
        return Err(format!(
            "feature_names has {} names for {d} features",
            names.len()
        ));
    }
    match names.iter().find(|n| check_label(n).is_err()) {
        Some(n) => Err(format!(
            "feature name {n:?} contains a line break, tab or other control character"
        )),
        None => Ok(()),
    }
}

/// The checks of the body's own fields: lengths, counts, kernel parameters.
fn check_body(m: &Model) -> std::result::Result<(), String> {
    let (k, kind) = (m.classes.len(), m.kind());
    let d = m.n_features;
    let wrong_len = |what: &str, got: usize| format!("{what} has {got} values for {d} features");
    match &m.body {
        Body::Binary(h) => {
            if h.weights.len() != d {
                return Err(wrong_len("weights", h.weights.len()));
            }
        }
        Body::Multiclass(r) | Body::Ovr(r) | Body::Voted(Voted { rows: r, .. }) => {
            let heads = r.weights.len();
            if let Some((i, row)) = r.weights.iter().enumerate().find(|(_, w)| w.len() != d) {
                return Err(wrong_len(&format!("class_weights[{i}]"), row.len()));
            }
            if r.bias.len() != heads {
                return Err(format!(
                    "class_bias has {} values for {heads} weight rows",
                    r.bias.len()
                ));
            }
            if kind != ModelKind::Voted && heads != k {
                return Err(format!("{heads} weight rows for {k} classes"));
            }
        }
        Body::Kernel(_) => {}
    }
    if let Body::Voted(v) = &m.body {
        if v.rows.weights.is_empty() {
            return Err("a voted model needs at least one vector".into());
        }
        // One weight row per vector for two classes, one per class for more.
        let per = if k == 2 { 1 } else { k };
        match &v.steps {
            Some(steps) => {
                if v.rows.weights.len() != per {
                    return Err(format!(
                        "the first voted vector has {} weight rows for {k} classes ({per} rows \
                         per voted vector)",
                        v.rows.weights.len()
                    ));
                }
                steps.check(per, v.counts.len(), d)?;
                if v.counts.iter().all(|&c| c == 0) {
                    return Err("every voted vector has count 0 (none votes)".into());
                }
            }
            None => {
                if v.counts.len() * per != v.rows.weights.len() {
                    return Err(format!(
                        "{} counts for {} weight rows of {k} classes ({per} rows per voted vector)",
                        v.counts.len(),
                        v.rows.weights.len()
                    ));
                }
                if v.counts.contains(&0) {
                    return Err("a voted vector has count 0 (counts are at least 1)".into());
                }
            }
        }
    }
    if let Body::Kernel(kd) = &m.body {
        let sv = &kd.support_vectors;
        if sv.is_empty() {
            return Err("a kernel model needs at least one support vector".into());
        }
        if sv.len() != kd.coef.len() {
            return Err(format!(
                "{} support vectors but {} dual coefficients",
                sv.len(),
                kd.coef.len()
            ));
        }
        if let Some((i, row)) = sv.iter().enumerate().find(|(_, r)| r.len() != d) {
            return Err(wrong_len(&format!("support_vectors[{i}]"), row.len()));
        }
        kd.kernel.check().map_err(|e| format!("kernel: {e}"))?;
    }
    Ok(())
}

impl Model {
    /// Writes the model as pretty JSON in the current file version.
    pub fn write(&self, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &Wire::of(self))?;
        out.write_all(b"\n")
    }

    /// Writes the model file at `path` whole or not at all: through a temporary beside it,
    /// renamed over it when written (the file the CLI's `train -o` writes).
    ///
    /// ```
    /// # use rosenblatt::{synth, SynthSpec, TrainParams, Trainer, BackendChoice, Model};
    /// # let data = synth::generate(&SynthSpec { n: 50, d: 2, ..Default::default() })?.data;
    /// # let model = Trainer::new(TrainParams::default())?.backend(BackendChoice::Cpu).fit(&data)?.model;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("model.json");
    /// model.save(&path)?;
    /// let back = Model::load(&path)?;
    /// assert_eq!(back.classes(), model.classes());
    /// # Ok::<(), rosenblatt::Error>(())
    /// ```
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |e| Error::io(path, e);
        let mut tmp = crate::output::temp_beside(path, ".json").map_err(io)?;
        let mut out = std::io::BufWriter::new(tmp.as_file_mut());
        self.write(&mut out).map_err(io)?;
        out.flush().map_err(io)?;
        drop(out);
        tmp.persist().map_err(io)
    }

    /// The model as an ONNX graph's bytes (linear models; voted and kernel models are an
    /// error): input `X` (float32, n x features), outputs `label` and `scores`.
    pub fn to_onnx(&self) -> Result<Vec<u8>> {
        super::onnx::to_onnx(self)
    }

    /// Reads a model file and validates it whole (streamed: the text is never held whole).
    pub fn load(path: &Path) -> Result<Model> {
        let open = || {
            std::fs::File::open(path)
                .map(std::io::BufReader::new)
                .map_err(|e| Error::io(path, e))
        };
        let header = serde_json::from_reader(open()?);
        let wire = Self::check_header(path, header)
            .and_then(|()| serde_json::from_reader(open()?).map_err(|e| corrupt(path, e)))?;
        Self::from_wire(path, wire)
    }

    /// Parses and validates model JSON; `path` is used in error messages.
    pub fn from_json(path: &Path, text: &str) -> Result<Model> {
        Self::check_header(path, serde_json::from_str(text))?;
        let wire = serde_json::from_str(text).map_err(|e| corrupt(path, e))?;
        Self::from_wire(path, wire)
    }

    /// The checks of `format` and `version` (read alone, so that a file of another format or
    /// a newer version is named as such rather than by its first unknown field).
    fn check_header(path: &Path, header: serde_json::Result<Header>) -> Result<()> {
        let bad = |msg: String| Error::Model {
            path: path.to_path_buf(),
            msg,
        };
        let v = header.map_err(|e| match e.classify() {
            serde_json::error::Category::Io => bad(format!("cannot read: {e}")),
            _ => bad(format!("not a rosenblatt model: invalid JSON ({e})")),
        })?;
        match v.format.as_deref() {
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
        match v.version.as_ref().and_then(|f| f.as_u64()) {
            Some(ver) if ver > VERSION as u64 => Err(bad(format!(
                "model file version {ver} is newer than this rosenblatt reads (version {VERSION}); upgrade rosenblatt"
            ))),
            Some(0) => Err(bad("corrupt model: version 0 does not exist".into())),
            Some(_) => Ok(()),
            None => Err(bad("corrupt model: missing or non-integer \"version\"".into())),
        }
    }

    /// The model of a parsed file, validated whole.
    fn from_wire(path: &Path, mut wire: Wire) -> Result<Model> {
        let bad = |msg: String| Error::Model {
            path: path.to_path_buf(),
            msg,
        };
        let body = wire
            .body()
            .map_err(|msg| bad(format!("corrupt model: {msg}")))?;
        if wire.version < 4 && (wire.label_type.is_some() || wire.feature_names.is_some()) {
            return Err(bad(format!(
                "corrupt model: version {} has no label_type or feature_names (they are \
                 version 4)",
                wire.version
            )));
        }
        if wire.version < 5 && wire.hashing.is_some() {
            return Err(bad(format!(
                "corrupt model: version {} has no hashing (it is version 5)",
                wire.version
            )));
        }
        if wire.version < 6
            && wire
                .hashing
                .as_ref()
                .is_some_and(|h| h.hashes_csv() || h.csv_columns.is_some())
        {
            return Err(bad(format!(
                "corrupt model: version {} hashes no CSV columns (that is version 6)",
                wire.version
            )));
        }
        if wire.version < 7
            && wire
                .scaling
                .as_ref()
                .is_some_and(|s| s.kind == Scale::Online)
        {
            return Err(bad(format!(
                "corrupt model: version {} has no online scaling (that is version 7)",
                wire.version
            )));
        }
        let mut training = wire.training;
        if let Some(t) = training.as_mut().filter(|_| wire.version < 7) {
            // Streamed reports before version 7 wrote the progressive accuracy as
            // train_accuracy.
            if t.streamed_bytes.is_some() && t.progressive_accuracy.is_none() {
                t.progressive_accuracy = t.train_accuracy.take();
            }
        }
        let m = Model {
            algorithm: wire.algorithm,
            classes: wire.classes,
            n_features: wire.n_features,
            body,
            params: wire.params,
            scaling: wire.scaling,
            training,
            label_type: wire.label_type,
            feature_names: wire.feature_names,
            hashing: wire.hashing,
        };
        check(&m).map_err(|msg| bad(format!("corrupt model: {msg}")))?;
        Ok(m)
    }
}
