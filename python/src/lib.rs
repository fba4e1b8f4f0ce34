//! `rosenblatt._rosenblatt`: the crate's training and scoring for the Python estimators
//! (python/python/rosenblatt), built on the `rosenblatt` crate's API alone (it declares no
//! module, only the names it re-exports from the layer crates). X arrives as C-contiguous NumPy arrays, borrowed
//! for the call (not copied), or as the three arrays of a CSR matrix; labels as class indices
//! with the class names. A fitted model is a native handle (`Model`), parsed and validated
//! once; it pickles as the model file's text (the CLI's format). The GIL is released while
//! the crate works.

use std::path::Path;
use std::sync::Arc;

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyMemoryError, PyOSError, PyPermissionError,
    PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString, PyTuple};

use rosenblatt::{
    default_stopping, load_bytes, AdapterQuery, Arow, BackendChoice, Body, ClassWeight, CpuBackend,
    CsrBuf, Dataset, DenseRows, Error, Fallback, Format, GpuOptions, HashSign, Hashing, Kernel,
    LabelCol, LabelType, Labels, LoadOptions, MappedF32, MatrixBuf, Model, Param,
    PassiveAggressive, Progress, Selected, Storage, TrainParams, Trainer,
};

/// The crate's errors as Python exceptions, with the crate's messages: GPU and MPI failures
/// are RuntimeError, memory that is not there MemoryError, files that cannot be read OSError
/// (FileNotFoundError and the like, by the error's kind), everything else (bad input, bad
/// parameters) ValueError.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::InvalidParam {
            name,
            value,
            reason,
            ..
        } => PyValueError::new_err(format!("{} {reason}, got {value}", python_name(name))),
        Error::Gpu(_) | Error::NoGpu(_) | Error::Mpi(_) => PyRuntimeError::new_err(msg),
        Error::Memory { .. } => PyMemoryError::new_err(msg),
        Error::Interrupted { .. } => PyKeyboardInterrupt::new_err(msg),
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        _ => PyValueError::new_err(msg),
    }
}

/// The estimators' name of a parameter the crate names in an error (scikit-learn's where the
/// estimators use it).
fn python_name(p: Param) -> &'static str {
    match p {
        Param::Algo => "algo",
        Param::Epochs => "max_iter",
        Param::LearningRate => "eta0",
        Param::Tolerance => "update_tol",
        Param::MarginThreshold => "margin_threshold",
        Param::MaxVectors => "max_vectors",
        Param::Mode => "mode",
        Param::Degree => "degree",
        Param::Gamma => "gamma",
        Param::Coef0 => "coef0",
        Param::Patience => "n_iter_no_change",
        Param::MinImprovement => "tol",
        Param::ValidationFraction => "validation_fraction",
        Param::ClassWeight => "class_weight",
        Param::SampleWeight => "sample_weight",
        Param::Scale => "scale",
        Param::Aggressiveness => "C",
        Param::ArowR => "r",
        Param::ArowCovariance => "covariance",
        Param::MulticlassUpdate => "multiclass_update",
        Param::Minibatch => "minibatch",
        Param::Streams => "streams",
        Param::Categorical => "categorical",
        other => other.name(),
    }
}

/// The keys of the training parameters (TrainParams' fields as the model file writes them):
/// a key the crate does not know is refused, not ignored.
fn known_keys() -> Vec<String> {
    let full = TrainParams {
        kernel: Some(Kernel::Linear),
        passive_aggressive: Some(PassiveAggressive {
            variant: Default::default(),
            c: 1.0,
        }),
        arow: Some(Arow::default()),
        validation_fraction: Some(0.1),
        // (Written only where true.)
        auto_validation: true,
        class_weight: Some(ClassWeight::Balanced),
        // (Written only where not 1.)
        minibatch: 2,
        streams: 2,
        ..Default::default()
    };
    match serde_json::to_value(full) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// A Python value of the kinds parameters take (None, bool, int, float, str, and lists and
/// dicts of them) as the JSON value serde reads into TrainParams: no text in between.
fn to_json(v: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = v.extract::<i64>() {
        if v.cast::<PyFloat>().is_err() {
            return Ok(Value::from(i));
        }
    }
    if let Ok(i) = v.extract::<u64>() {
        if v.cast::<PyFloat>().is_err() {
            return Ok(Value::from(i));
        }
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(serde_json::Number::from_f64(f.value()).map_or(Value::Null, Value::Number));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut m = serde_json::Map::new();
        for (k, x) in d.iter() {
            m.insert(k.extract::<String>()?, to_json(&x)?);
        }
        return Ok(Value::Object(m));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return l
            .iter()
            .map(|x| to_json(&x))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t
            .iter()
            .map(|x| to_json(&x))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    Err(PyTypeError::new_err(format!(
        "a training parameter cannot be a {}",
        v.get_type().name()?
    )))
}

/// The first key of `value` that TrainParams cannot take, as "KEY: " (for a message): each
/// key tried alone over the defaults. Empty when none is to blame alone.
fn bad_key(value: &serde_json::Value) -> String {
    let (Some(obj), Ok(serde_json::Value::Object(base))) = (
        value.as_object(),
        serde_json::to_value(TrainParams::default()),
    ) else {
        return String::new();
    };
    obj.iter()
        .find(|(k, v)| {
            let mut one = base.clone();
            one.insert((*k).clone(), (*v).clone());
            serde_json::from_value::<TrainParams>(serde_json::Value::Object(one)).is_err()
        })
        .map_or(String::new(), |(k, _)| format!("{k}: "))
}

/// Reads the training parameters the estimators send: an object of known keys only. Without
/// a patience (null) or a patience floor, the algorithm's own, as the CLI's: the floor of
/// `default_stopping` whatever the patience (a patience given keeps the algorithm's floor).
fn read_params(value: serde_json::Value) -> PyResult<TrainParams> {
    let internal = |e: String| {
        PyRuntimeError::new_err(format!(
            "rosenblatt's Python package sent parameters its extension cannot read ({e}); \
             please report this"
        ))
    };
    let known = known_keys();
    if let Some(obj) = value.as_object() {
        if let Some(k) = obj.keys().find(|k| !known.contains(k)) {
            return Err(PyValueError::new_err(format!(
                "unknown training parameter {k:?} (known: {})",
                known.join(", ")
            )));
        }
    }
    let floor_given = value.get("patience_floor").is_some();
    let mut tp: TrainParams = match serde_json::from_value(value.clone()) {
        Ok(tp) => tp,
        Err(e) => return Err(internal(format!("{}{e}", bad_key(&value)))),
    };
    let (patience, floor) = default_stopping(tp.algo, tp.mode);
    if tp.patience.is_none() {
        tp.patience = Some(patience);
    }
    if !floor_given {
        tp.patience_floor = floor;
    }
    Ok(tp)
}

/// Runs `f` on `threads` CPU threads (None: rayon's global pool, every core). A pool of each
/// size asked for is started once and kept (starting one took 0.17 ms a call, as long as
/// predicting 10 rows).
fn with_threads<T: Send>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    type Pools = std::sync::Mutex<std::collections::HashMap<usize, Arc<rayon::ThreadPool>>>;
    static POOLS: std::sync::OnceLock<Pools> = std::sync::OnceLock::new();
    // Never more threads than cores: n_jobs=10**6 runs as n_jobs=-1 (the Python side clamps
    // too; this keeps any caller's count bounded, and the pools cached here few).
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let Some(n) = threads.map(|n| n.clamp(1, cores)) else {
        return Ok(f());
    };
    let pool = {
        let mut pools = POOLS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match pools.get(&n) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(n)
                        .build()
                        .map_err(|e| Error::Gpu(format!("cannot start {n} CPU threads: {e}")))?,
                );
                pools.insert(n, p.clone());
                p
            }
        }
    };
    Ok(pool.install(f))
}

/// A NumPy array's bytes, borrowed for one call. The array is held (its read-only borrow
/// taken) by the caller for longer than any data set built on it.
struct Borrowed {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are only read, and the caller keeps the array alive and borrowed
// read-only (numpy's borrow flags) until every data set on it is dropped, before returning.
unsafe impl Send for Borrowed {}
unsafe impl Sync for Borrowed {}

impl AsRef<[u8]> for Borrowed {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see above; ptr points at len readable bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Features given from Python: a dense float32 array (borrowed) or CSR parts (copied into the
/// crate's CSR form: its columns are u32).
enum Features<'py> {
    Dense(PyReadonlyArray2<'py, f32>),
    Csr {
        indptr: PyReadonlyArray1<'py, i64>,
        indices: PyReadonlyArray1<'py, i64>,
        data: PyReadonlyArray1<'py, f32>,
        d: usize,
    },
}

impl Features<'_> {
    /// The rows as a data set with `labels` and `weights`; a dense array is borrowed.
    fn dataset(&self, labels: Option<Labels>, weights: Option<Vec<f32>>) -> Result<Dataset, Error> {
        let source = Path::new("<array>").to_path_buf();
        let (x, n, d) = match self {
            Features::Dense(a) => {
                let (n, d) = (a.shape()[0], a.shape()[1]);
                let values = a.as_slice().map_err(|_| {
                    Error::data(
                        &source,
                        "X must be C-contiguous float32 (the wrapper converts)",
                    )
                })?;
                let bytes = Arc::new(Borrowed {
                    ptr: values.as_ptr().cast(),
                    len: std::mem::size_of_val(values),
                });
                let m = MappedF32::shared(bytes, 0, values.len())
                    .ok_or_else(|| Error::data(&source, "X is not aligned to 4 bytes"))?;
                (MatrixBuf::Mapped(m), n, d)
            }
            Features::Csr {
                indptr,
                indices,
                data,
                d,
            } => {
                let (p, ix, v) = (indptr.as_slice(), indices.as_slice(), data.as_slice());
                let (p, ix, v) = match (p, ix, v) {
                    (Ok(p), Ok(ix), Ok(v)) => (p, ix, v),
                    _ => return Err(Error::data(&source, "CSR arrays must be contiguous")),
                };
                let n = p.len().saturating_sub(1);
                let bad = |m: &str| Error::data(&source, format!("invalid CSR matrix: {m}"));
                if p.first() != Some(&0) || p.windows(2).any(|w| w[1] < w[0]) {
                    return Err(bad("indptr must start at 0 and never decrease"));
                }
                if p.last().copied().unwrap_or(0) as usize != ix.len() || ix.len() != v.len() {
                    return Err(bad("indptr, indices and data disagree in length"));
                }
                let mut indices = Vec::new();
                indices
                    .try_reserve_exact(ix.len())
                    .map_err(|_| bad("no memory for the column indices"))?;
                for &j in ix {
                    if j < 0 || j as u64 >= *d as u64 || j > u32::MAX as i64 {
                        return Err(bad(&format!("column index {j} outside 0..{d}")));
                    }
                    indices.push(j as u32);
                }
                let c = CsrBuf {
                    indptr: p.iter().map(|&a| a as usize).collect(),
                    indices,
                    values: v.to_vec(),
                };
                c.check(*d).map_err(|m| bad(&m))?;
                (MatrixBuf::Csr(c), n, *d)
            }
        };
        if let MatrixBuf::Mapped(m) = &x {
            let values = m.values();
            // A branch-free pass (vectorised) first; the position only when one is not finite.
            let all_finite = values
                .chunks(1024)
                .all(|c| c.iter().fold(true, |ok, v| ok & v.is_finite()));
            if let Some(i) = (!all_finite)
                .then(|| values.iter().position(|v| !v.is_finite()))
                .flatten()
            {
                return Err(Error::data(
                    &source,
                    format!(
                        "X holds {} at row {}, column {}",
                        values[i],
                        i / d.max(1),
                        i % d.max(1)
                    ),
                ));
            }
        }
        let ds = Dataset::from_matrix(x, n, d, labels, source);
        Ok(Dataset { weights, ..ds })
    }
}

/// A CSR matrix from Python: (indptr, indices, data, number of columns).
type CsrParts<'py> = (
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, f32>,
    usize,
);

/// Training or scoring X: dense, or CSR parts with the number of columns.
fn features<'py>(
    x: Option<PyReadonlyArray2<'py, f32>>,
    csr: Option<CsrParts<'py>>,
) -> PyResult<Features<'py>> {
    match (x, csr) {
        (Some(a), None) => Ok(Features::Dense(a)),
        (None, Some((indptr, indices, data, d))) => Ok(Features::Csr {
            indptr,
            indices,
            data,
            d,
        }),
        _ => Err(PyValueError::new_err(
            "give X dense or as CSR parts, one of them",
        )),
    }
}

/// Opens the backend asked for: "auto" (a hardware GPU when there is one, else the CPU),
/// "cpu" or "gpu" (any adapter, software ones too; `adapter` picks one by name).
/// The backend for a job of `values` values of X: under auto, small jobs take the CPU without
/// opening any adapter (as the command line's `train`: the probe costs 20-50 ms).
fn open_backend(
    choice: BackendChoice,
    adapter: Option<String>,
    values: u64,
) -> Result<Selected, Error> {
    rosenblatt::select_backend(choice, &gpu_options(adapter), values)
}

/// The GPU options for an adapter named (part of its name) or not.
fn gpu_options(adapter: Option<String>) -> GpuOptions {
    GpuOptions {
        adapter: AdapterQuery {
            name: adapter,
            hardware_only: false,
            nth: None,
        },
        ..Default::default()
    }
}

/// The backend asked for, by name.
fn backend_choice(name: &str) -> PyResult<BackendChoice> {
    match name {
        "auto" => Ok(BackendChoice::Auto),
        "cpu" => Ok(BackendChoice::Cpu),
        "gpu" => Ok(BackendChoice::Gpu),
        other => Err(PyValueError::new_err(format!(
            "backend must be one of 'auto', 'cpu', 'gpu', got {other:?}"
        ))),
    }
}

/// A progress bar on stderr, when asked for; and Python's signals, looked at between epochs
/// (at most every [`SIGNAL_CHECK`]), so that Ctrl-C stops a long fit.
struct Bar(Option<indicatif::ProgressBar>, std::time::Instant);

/// How often a fit looks at Python's signals (each look takes the GIL).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

impl Progress for Bar {
    fn update(&mut self, done: usize, max: usize, mistakes: u64) {
        if let Some(b) = &self.0 {
            b.set_length(max as u64);
            b.set_position(done as u64);
            b.set_message(format!("{mistakes} mistakes"));
        }
    }

    fn cancelled(&mut self) -> bool {
        if self.1.elapsed() < SIGNAL_CHECK {
            return false;
        }
        self.1 = std::time::Instant::now();
        // A pending KeyboardInterrupt (or any error a signal handler raised) ends the fit;
        // the error returned is raised again as KeyboardInterrupt.
        Python::attach(|py| py.check_signals().is_err())
    }
}

/// How a fit runs, besides the training parameters: the estimators pass a dict with every
/// key, each checked for its type here.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct FitOptions<'py> {
    /// Per-row weights.
    sample_weight: Option<PyReadonlyArray1<'py, f32>>,
    /// A model to continue from (its JSON).
    start: Option<String>,
    /// auto, cpu or gpu.
    backend: String,
    /// Part of an adapter's name.
    adapter: Option<String>,
    /// Show a progress bar.
    progress: bool,
    /// CPU threads (None: every core).
    threads: Option<usize>,
    /// How X is stored for training (None: the narrowest exact storage).
    storage: Option<String>,
    /// The type of the class labels (int, float, bool, str).
    label_type: Option<String>,
    /// The columns' names (a DataFrame's).
    feature_names: Option<Vec<String>>,
}

/// Trains on X (dense `x`, or `csr` = (indptr, indices, data, n_features)) with class index
/// `y` into `classes`, the training parameters as a dict of the model file's `params` keys
/// (Python values, checked against TrainParams) and the run's `options`. Returns the fitted
/// model and the training report's JSON.
#[pyfunction]
fn fit<'py>(
    py: Python<'py>,
    x: Option<PyReadonlyArray2<'py, f32>>,
    csr: Option<CsrParts<'py>>,
    y: PyReadonlyArray1<'py, i64>,
    classes: Vec<String>,
    params: &Bound<'py, PyDict>,
    options: FitOptions<'py>,
) -> PyResult<(PyModel, String)> {
    let FitOptions {
        sample_weight,
        start,
        backend,
        adapter,
        progress,
        threads,
        storage,
        label_type,
        feature_names,
    } = options;
    let backend = backend.as_str();
    let start = start.as_deref();
    let storage = storage.as_deref();
    let label_type = label_type.as_deref();
    let choice = backend_choice(backend)?;
    let ty = match label_type {
        None => None,
        Some(t) => Some(
            serde_json::from_value::<LabelType>(serde_json::Value::String(t.to_string())).map_err(
                |_| {
                    PyValueError::new_err(format!(
                        "label_type must be one of 'int', 'float', 'bool', 'str', got {t:?}"
                    ))
                },
            )?,
        ),
    };
    let feats = features(x, csr)?;
    let n = match &feats {
        Features::Dense(a) => a.shape()[0],
        Features::Csr { indptr, .. } => indptr.len().saturating_sub(1),
    };
    if y.len() != n || sample_weight.as_ref().is_some_and(|w| w.len() != n) {
        return Err(PyValueError::new_err(format!(
            "X has {n} rows, y {} and sample_weight {}: they must agree",
            y.len(),
            sample_weight.as_ref().map_or(n, |w| w.len())
        )));
    }
    let index: Vec<u32> = y
        .as_slice()
        .map_err(|_| PyValueError::new_err("y must be contiguous"))?
        .iter()
        .map(|&c| {
            u32::try_from(c)
                .ok()
                .filter(|&c| (c as usize) < classes.len())
        })
        .collect::<Option<_>>()
        .ok_or_else(|| PyValueError::new_err("y holds a class index outside the classes"))?;
    let weights = match &sample_weight {
        Some(w) => Some(
            w.as_slice()
                .map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?
                .to_vec(),
        ),
        None => None,
    };
    let mut tp = read_params(to_json(params.as_any())?)?;
    tp.storage = match storage {
        Some(s) => Some(s.parse::<Storage>().map_err(|_| {
            PyValueError::new_err(format!(
                "storage must be one of None, 'f32', 'f16', 'u8', 'i8', got {s:?}"
            ))
        })?),
        None => None,
    };
    let start = match start {
        Some(text) => Some(Model::from_json(Path::new("<model>"), text).map_err(py_err)?),
        None => None,
    };
    let labels = Labels { classes, index, ty };
    let ds = feats.dataset(Some(labels), weights).map_err(py_err)?;
    let result = py.detach(move || -> Result<(PyModel, String), Error> {
        let params = tp.validate()?;
        with_threads(threads, move || {
            let mut bar = Bar(
                progress.then(|| {
                    let b = indicatif::ProgressBar::new(params.epochs as u64);
                    b.set_style(
                        indicatif::ProgressStyle::with_template("{bar:40} epoch {pos}/{len} {msg}")
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    b
                }),
                std::time::Instant::now(),
            );
            // Under auto, a GPU failure mid-training finishes on the CPU, as in the CLI.
            let mut trainer = Trainer::with_params(params)
                .backend(choice)
                .gpu(gpu_options(adapter))
                .fallback(Fallback::CpuUnderAuto)
                .progress(&mut bar);
            if let Some(m) = &start {
                trainer = trainer.warm_start(m);
            }
            let trained = trainer.fit(&ds)?;
            if let Some(b) = &bar.0 {
                b.finish_and_clear();
            }
            let model = trained
                .model
                .with_feature_names(feature_names)
                .map_err(|m| Error::data(Path::new("<model>"), m))?;
            let report = serde_json::to_string(&trained.report)
                .map_err(|e| Error::data(Path::new("<model>"), e.to_string()))?;
            drop(ds);
            Ok((PyModel::of(model)?, report))
        })?
    });
    result.map_err(py_err)
}

/// Dense rows as Python gives them to score: float32 or float64, C-contiguous.
enum DenseIn<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

impl DenseIn<'_> {
    fn shape(&self) -> (usize, usize) {
        let s = match self {
            DenseIn::F32(a) => a.shape(),
            DenseIn::F64(a) => a.shape(),
        };
        (s[0], s[1])
    }

    fn rows(&self) -> Option<DenseRows<'_>> {
        match self {
            DenseIn::F32(a) => a.as_slice().ok().map(DenseRows::F32),
            DenseIn::F64(a) => a.as_slice().ok().map(DenseRows::F64),
        }
    }
}

/// A fitted model, parsed and validated once (from the model file's JSON, or as training
/// made it) and held natively: scoring reads nothing again. Pickles as the model file's
/// text.
#[pyclass(frozen, module = "rosenblatt._rosenblatt", name = "Model")]
struct PyModel {
    model: Model,
    json: String,
}

impl PyModel {
    fn of(model: Model) -> Result<PyModel, Error> {
        let mut buf = Vec::new();
        model
            .write(&mut buf)
            .map_err(|e| Error::data(Path::new("<model>"), e.to_string()))?;
        let json =
            String::from_utf8(buf).map_err(|e| Error::data(Path::new("<model>"), e.to_string()))?;
        Ok(PyModel { model, json })
    }

    /// Raw scores of X on the backend asked for: the model's own CPU path for dense rows
    /// where the CPU runs (`cpu`, or `auto` with no adapter named and too few values to gain
    /// from a GPU), else a data set through the backend (float64 rows converted first), a
    /// GPU one opened once by this thread and kept.
    fn scores<'py>(
        &self,
        py: Python<'py>,
        dense: Option<DenseIn<'py>>,
        csr: Option<CsrParts<'py>>,
        choice: BackendChoice,
        adapter: Option<String>,
        threads: Option<usize>,
    ) -> PyResult<Vec<f32>> {
        let (n, d) = match (&dense, &csr) {
            (Some(x), _) => x.shape(),
            (None, Some((indptr, _, _, d))) => (indptr.len().saturating_sub(1), *d),
            (None, None) => (0, 0),
        };
        let source = Path::new("<array>");
        if (dense.is_some() || csr.is_some()) && d != self.model.n_features() {
            return Err(py_err(Error::Mismatch {
                path: source.to_path_buf(),
                msg: format!(
                    "the model expects {} features, the data has {d}",
                    self.model.n_features()
                ),
            }));
        }
        let values = (n as u64).saturating_mul(d as u64);
        let on_cpu = choice == BackendChoice::Cpu
            || (choice == BackendChoice::Auto
                && adapter.is_none()
                && values < rosenblatt::AUTO_GPU_MIN_VALUES);
        if let (true, Some(rows), None) = (on_cpu, dense.as_ref().and_then(DenseIn::rows), &csr) {
            let fast = py
                .detach(|| with_threads(threads, || self.model.scores_of_rows(rows, n, source)))
                .and_then(|r| r)
                .map_err(py_err)?;
            if let Some(raw) = fast {
                return Ok(raw);
            }
        }
        // The data set path takes float32: a float64 X is converted.
        let f32_x = match dense {
            Some(DenseIn::F32(a)) => Some(a),
            Some(DenseIn::F64(a)) => {
                let a = a.as_array().mapv(|v| v as f32);
                Some(PyArray2::from_owned_array(py, a).readonly())
            }
            None => None,
        };
        let feats = features(f32_x, csr)?;
        let ds = feats.dataset(None, None).map_err(py_err)?;
        py.detach(|| {
            if on_cpu {
                with_threads(threads, || self.model.raw_scores(&ds, &CpuBackend::new()))?
            } else {
                with_backend(choice, adapter, values, |b| self.model.raw_scores(&ds, b))
            }
        })
        .map_err(py_err)
    }
}

/// What the estimators read from a model: kind, class names, number of features, the weight
/// rows and biases in the input's coordinates (scaling folded in; none for voted and kernel
/// models) and the training report's JSON.
type Description = (
    String,
    Vec<String>,
    usize,
    Option<(Vec<Vec<f32>>, Vec<f32>)>,
    Option<String>,
);

/// The GPU backend this thread opened last, kept for the next call that asks for the same:
/// choosing and opening an adapter costs tens of milliseconds (the software ones too), more
/// than scoring most batches. Dropped when a call on it fails, so the next call opens afresh.
type Kept = Option<((BackendChoice, Option<String>), Selected)>;
thread_local! {
    static BACKEND: std::cell::RefCell<Kept> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on the backend for `choice` (see [`open_backend`]), kept per thread.
fn with_backend<T>(
    choice: BackendChoice,
    adapter: Option<String>,
    values: u64,
    f: impl FnOnce(&dyn rosenblatt::Backend) -> Result<T, Error>,
) -> Result<T, Error> {
    let key = (choice, adapter);
    let kept = BACKEND.with(|b| b.borrow_mut().take());
    let sel = match kept {
        Some((k, sel)) if k == key => sel,
        _ => open_backend(key.0, key.1.clone(), values)?,
    };
    let out = f(&*sel.backend);
    if out.is_ok() {
        BACKEND.with(|b| *b.borrow_mut() = Some((key, sel)));
    }
    out
}

#[pymethods]
impl PyModel {
    /// Reads and validates a model from the model file's JSON text.
    #[new]
    fn new(json: &str) -> PyResult<Self> {
        let model = Model::from_json(Path::new("<model>"), json).map_err(py_err)?;
        Ok(PyModel {
            model,
            json: json.to_string(),
        })
    }

    /// Reads and validates the model file at `path`.
    #[staticmethod]
    fn load(path: &str) -> PyResult<Self> {
        let m = Model::load(Path::new(path)).map_err(py_err)?;
        PyModel::of(m).map_err(py_err)
    }

    /// The model file's JSON text.
    #[getter]
    fn json(&self) -> &str {
        &self.json
    }

    /// Scores X: (raw scores, n x outputs: one decision value per row for a binary model,
    /// one per class otherwise; predicted class indices). Dense X is float32 or float64,
    /// C-contiguous (float64 rounded to float32 as NumPy's astype); `csr` the parts of a CSR
    /// matrix.
    #[pyo3(signature = (x, csr=None, *, backend="auto", adapter=None, threads=None))]
    #[allow(clippy::type_complexity)]
    fn decide<'py>(
        &self,
        py: Python<'py>,
        x: Option<&Bound<'py, PyAny>>,
        csr: Option<CsrParts<'py>>,
        backend: &str,
        adapter: Option<String>,
        threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray1<i64>>)> {
        let choice = backend_choice(backend)?;
        let dense = match x {
            None => None,
            Some(a) => Some(if let Ok(a) = a.extract::<PyReadonlyArray2<'py, f32>>() {
                DenseIn::F32(a)
            } else {
                DenseIn::F64(a.extract::<PyReadonlyArray2<'py, f64>>().map_err(|_| {
                    PyValueError::new_err("X must be a 2-d float32 or float64 NumPy array")
                })?)
            }),
        };
        let raw = self.scores(py, dense, csr, choice, adapter, threads)?;
        let pred: Vec<i64> = self.model.predict(&raw).iter().map(|&p| p as i64).collect();
        let width = self.model.outputs();
        let values = if self.model.is_binary() {
            self.model.decision_values(&raw)
        } else {
            raw
        };
        let n = pred.len();
        let values = PyArray1::from_vec(py, values)
            .reshape([n, width])
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok((values, PyArray1::from_vec(py, pred)))
    }

    /// Kind, class names, number of features, the weight rows and biases in the input's
    /// coordinates (linear models), the training report's JSON.
    fn describe(&self) -> PyResult<Description> {
        let m = &self.model;
        let d = m.n_features();
        let linear = match m.body() {
            Body::Binary(_) | Body::Multiclass(_) | Body::Ovr(_) => {
                let aug = m.augmented();
                let mut rows = Vec::new();
                let mut bias = Vec::new();
                for r in aug.chunks_exact(d + 1) {
                    let (mut w, mut b) = (r[..d].to_vec(), r[d]);
                    if let Some(s) = m.scaling() {
                        // w.((x - o) f) + b = (w f).x + b - sum w f o
                        for (j, wj) in w.iter_mut().enumerate() {
                            *wj *= s.factor[j];
                            b -= *wj * s.offset[j];
                        }
                    }
                    rows.push(w);
                    bias.push(b);
                }
                Some((rows, bias))
            }
            _ => None,
        };
        let report = match m.training() {
            Some(r) => {
                Some(serde_json::to_string(r).map_err(|e| PyRuntimeError::new_err(e.to_string()))?)
            }
            None => None,
        };
        Ok((
            m.kind().name().to_string(),
            m.classes().to_vec(),
            d,
            linear,
            report,
        ))
    }

    /// The model as an ONNX graph's bytes (`rosenblatt export`'s).
    fn to_onnx<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let bytes = self.model.to_onnx().map_err(|e| match e {
            Error::Model { msg, .. } => PyValueError::new_err(msg),
            e => py_err(e),
        })?;
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }

    /// Pickled as the model file's text, read and validated again when unpickled.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        Ok((slf.get_type().into_any(), (slf.get().json.clone(),)))
    }
}

/// The prefix of this process's temporaries (`.rosenblatt-MACHINE-PID-`), as the CLI names its.
/// Vowpal Wabbit text (whole lines) hashed as `train data.vw` hashes it: 2^bits columns,
/// the interactions `quadratic` names, signed or not. Returns the rows as CSR parts
/// (n, d, indptr, indices, values); any labels and importances in the lines are dropped.
#[pyfunction]
#[pyo3(signature = (text, bits, quadratic, signed))]
fn hash_vw<'py>(
    py: Python<'py>,
    text: &[u8],
    bits: u32,
    quadratic: Vec<String>,
    signed: bool,
) -> PyResult<HashedCsr<'py>> {
    let opts = LoadOptions {
        format: Format::Vw,
        hashing: Some(Hashing {
            bits,
            sign: sign_of(signed),
            quadratic,
            ..Hashing::default()
        }),
        ..LoadOptions::default()
    };
    hashed_rows(py, Path::new("<text>"), text, &opts)
}

#[pyfunction]
fn temp_prefix() -> String {
    rosenblatt::temp_prefix()
}

/// Removes the temporaries that this machine's finished processes left in `dir` (the CLI's rule);
/// returns how many.
#[pyfunction]
fn remove_stale_temps(dir: &str) -> usize {
    rosenblatt::remove_stale_temps(Path::new(dir))
}

/// The library's training defaults for `algo` (`TrainParams::for_algo`, the one place they are
/// written; None: `TrainParams::default()`, the default algorithm's), as the JSON of a model
/// file's `params`: the estimators start from them.
#[pyfunction]
#[pyo3(signature = (algo=None))]
fn defaults(algo: Option<&str>) -> PyResult<String> {
    let params = match algo {
        None => TrainParams::default(),
        Some(a) => TrainParams::for_algo(a.parse().map_err(PyValueError::new_err)?),
    };
    serde_json::to_string(&params).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The front ends' default scaling for `algo` (`params::default_scale`, which the command
/// line's `--scale` takes too): "online", or "none" for the kernel perceptron.
#[pyfunction]
fn default_scale(algo: &str) -> PyResult<String> {
    let algo = algo.parse().map_err(PyValueError::new_err)?;
    Ok(rosenblatt::default_scale(algo).name().to_string())
}

/// The GPU adapters wgpu finds here: (name, API, type) of each.
#[pyfunction]
fn adapters() -> Vec<(String, String, String)> {
    rosenblatt::list_adapters()
        .0
        .into_iter()
        .map(|a| (a.name, a.backend, a.device_type))
        .collect()
}

/// Large blocks this module allocates (compact copies of X, the weights) on cache-line
/// boundaries: see `rosenblatt::CacheLines`. NumPy's arrays keep their own alignment.
#[global_allocator]
static ALLOC: rosenblatt::CacheLines = rosenblatt::CacheLines;

/// CSV rows (every column a feature; the first record the header where `header`) hashed as
/// `train data.csv --categorical ...` hashes them: (n, d, indptr, indices, values) of the
/// CSR rows.
#[pyfunction]
#[pyo3(signature = (text, bits, categorical, signed, header))]
fn hash_csv<'py>(
    py: Python<'py>,
    text: &[u8],
    bits: u32,
    categorical: Vec<String>,
    signed: bool,
    header: bool,
) -> PyResult<HashedCsr<'py>> {
    let opts = LoadOptions {
        format: Format::Csv,
        label_col: LabelCol::None,
        csv_header: Some(header),
        hashing: Some(Hashing {
            bits,
            sign: sign_of(signed),
            categorical,
            ..Hashing::default()
        }),
        ..LoadOptions::default()
    };
    hashed_rows(py, Path::new("<table>"), text, &opts)
}

/// Hashed rows as NumPy arrays: (n, d, indptr, indices, values) of a CSR matrix.
type HashedCsr<'py> = (
    usize,
    usize,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<f32>>,
);

/// Python's `signed` flag as the crate's hash sign.
fn sign_of(signed: bool) -> HashSign {
    if signed {
        HashSign::Signed
    } else {
        HashSign::Unsigned
    }
}

/// The rows of `text` loaded with `opts` (which hash them), as [`HashedCsr`].
fn hashed_rows<'py>(
    py: Python<'py>,
    source: &Path,
    text: &[u8],
    opts: &LoadOptions,
) -> PyResult<HashedCsr<'py>> {
    let ds = py
        .detach(|| load_bytes(source, text, opts))
        .map_err(py_err)?;
    let (n, d) = (ds.n, ds.d);
    let MatrixBuf::Csr(c) = ds.x else {
        return Err(PyRuntimeError::new_err("hashed rows are held sparse"));
    };
    Ok((
        n,
        d,
        PyArray1::from_vec(py, c.indptr.iter().map(|&p| p as i64).collect()),
        PyArray1::from_vec(py, c.indices.iter().map(|&j| j as i32).collect()),
        PyArray1::from_vec(py, c.values),
    ))
}

#[pymodule]
fn _rosenblatt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_class::<PyModel>()?;
    m.add_function(wrap_pyfunction!(hash_vw, m)?)?;
    m.add_function(wrap_pyfunction!(hash_csv, m)?)?;
    m.add_function(wrap_pyfunction!(temp_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(remove_stale_temps, m)?)?;
    m.add_function(wrap_pyfunction!(adapters, m)?)?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(default_scale, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
