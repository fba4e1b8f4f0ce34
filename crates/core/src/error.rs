//! The library's one error type. Every variant says what was wrong and where (file, line,
//! column, value); `is_input_error` tells the CLI whether it is the user's input (exit 2) or
//! a runtime failure (exit 1).

use std::path::PathBuf;

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in rosenblatt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A data or model file could not be read.
    #[error("cannot read {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// A value in an input file is malformed. `line` and `column` are 1-based.
    #[error("{}: {}", .path.display(), fmt_parse(*.line, *.column, .text, .msg))]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number, when known.
        line: Option<usize>,
        /// 1-based column (field) number, when known.
        column: Option<usize>,
        /// The offending text.
        text: String,
        /// What is wrong with it.
        msg: String,
    },

    /// The data as a whole cannot be used (empty, one class, ...).
    #[error("{}: {msg}", .path.display())]
    Data {
        /// The file (or a description such as `<generated>`).
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },

    /// A parameter is out of range.
    #[error("{} {reason}, but is {value}", .name.name())]
    InvalidParam {
        /// Which parameter.
        name: Param,
        /// The value given.
        value: String,
        /// The rule it breaks.
        reason: String,
    },

    /// A model file is corrupt, of another format, or of a newer version.
    #[error("{}: {msg}", .path.display())]
    Model {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },

    /// Data does not match the model it is used with.
    #[error("{}: {msg}", .path.display())]
    Mismatch {
        /// The data file.
        path: PathBuf,
        /// What does not match.
        msg: String,
    },

    /// No usable GPU adapter, or the requested one does not exist.
    #[error("{0}")]
    NoGpu(String),

    /// The GPU reported an error (validation, out of memory, device lost, driver failure).
    #[error("GPU error: {0}")]
    Gpu(String),

    /// The message-passing library (MPI) of a data-parallel run failed.
    #[error("MPI: {0}")]
    Mpi(String),

    /// The data is larger than the device can hold (the CPU backend has no such limit).
    #[error("{0}")]
    TooLarge(String),

    /// An input asks for more memory than the process has.
    #[error("{what} need {} of memory; {} is available", human(*.bytes), human(*.available))]
    Memory {
        /// What would be allocated, with the sizes from the input.
        what: String,
        /// Bytes needed.
        bytes: u64,
        /// Bytes available.
        available: u64,
    },

    /// An output file cannot be written as asked (not a regular file, also an input, ...).
    #[error("{}: {msg}", .path.display())]
    Output {
        /// The output path.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },

    /// The voted perceptron kept as many vectors as it may (one per mistake).
    #[error("the voted perceptron reached its limit of {0} vectors (it keeps one per mistake)")]
    VotedLimit(usize),

    /// The algorithm learns two classes only, and the labels have more.
    #[error("{}: the {algo} perceptron is binary, but the labels have {classes} classes", .path.display())]
    BinaryOnly {
        /// The data file.
        path: PathBuf,
        /// The algorithm.
        algo: &'static str,
        /// How many classes the labels have.
        classes: usize,
    },

    /// A plot could not be drawn or written.
    #[error("plot: {0}")]
    Plot(String),

    /// The caller's progress asked training to stop (`Progress::cancelled` in the train
    /// crate: an interrupt), after this many epochs (or, in a streamed run, rows).
    #[error("interrupted after {done} {what}: no model was trained")]
    Interrupted {
        /// Epochs (rows, for a streamed run) done.
        done: u64,
        /// "epochs" or "rows".
        what: &'static str,
    },
}

fn fmt_parse(line: Option<usize>, column: Option<usize>, text: &str, msg: &str) -> String {
    let mut s = String::new();
    if let Some(l) = line {
        s.push_str(&format!("line {l}"));
        if let Some(c) = column {
            s.push_str(&format!(", column {c}"));
        }
        s.push_str(": ");
    }
    s.push_str(msg);
    if !text.is_empty() {
        let shown: String = text.chars().take(60).collect();
        let ell = if text.chars().count() > 60 { "..." } else { "" };
        s.push_str(&format!(" (found {shown:?}{ell})"));
    }
    s
}

impl Error {
    /// True when the error is caused by the user's input or parameters (CLI exit code 2:
    /// a missing or malformed file, a bad value), false for runtime failures such as GPU
    /// errors (exit code 1).
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            Error::Io { .. }
                | Error::Parse { .. }
                | Error::Data { .. }
                | Error::InvalidParam { .. }
                | Error::Model { .. }
                | Error::Mismatch { .. }
                | Error::TooLarge(_)
                | Error::VotedLimit(_)
                | Error::Memory { .. }
                | Error::Output { .. }
                | Error::BinaryOnly { .. }
        )
    }

    /// An I/O error on the file `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The parameter `name` rejected at `value`, for `reason`.
    pub fn param(name: Param, value: impl ToString, reason: impl Into<String>) -> Self {
        Error::InvalidParam {
            name,
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// A data error about `path` (an input that is not what the operation needs).
    pub fn data(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Data {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

/// Bytes as "1.5 GiB" / "12.0 MiB".
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// A parameter of the library, named as the library knows it. Exhaustive on purpose: the CLI
/// maps each to its flag in a `match` without a catch-all, so a new parameter without a flag
/// name does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// The training algorithm.
    Algo,
    /// Maximum number of epochs.
    Epochs,
    /// Learning rate eta.
    LearningRate,
    /// Stop tolerance on the update norm.
    Tolerance,
    /// Margin threshold tau.
    MarginThreshold,
    /// Most vectors the voted perceptron keeps.
    MaxVectors,
    /// Online or batch form.
    Mode,
    /// Polynomial kernel degree.
    Degree,
    /// Kernel width or scale gamma.
    Gamma,
    /// Polynomial kernel constant.
    Coef0,
    /// Rows to generate.
    Rows,
    /// Features to generate.
    Features,
    /// Geometric margin of generated data.
    Margin,
    /// Label noise of generated data.
    Noise,
    /// Experts in a committee stream.
    Experts,
    /// Size of a committee's hidden panel.
    Panel,
    /// The label column of a CSV file.
    LabelColumn,
    /// The two features a boundary plot shows.
    PlotFeatures,
    /// The path of an image to write.
    ImagePath,
    /// The path of an animation to write.
    AnimationPath,
    /// Image width in pixels.
    ImageWidth,
    /// Image height in pixels.
    ImageHeight,
    /// Epochs without improvement before stopping.
    Patience,
    /// Relative improvement the patience rule asks for.
    MinImprovement,
    /// Error rate under which the patience rule waits longer (nearly separable data).
    PatienceFloor,
    /// Share of the training rows held out for validation.
    ValidationFraction,
    /// Per-class weights.
    ClassWeight,
    /// Per-row weights.
    SampleWeight,
    /// The weight column of a CSV file.
    WeightColumn,
    /// The categorical columns of a CSV file (hashed).
    Categorical,
    /// Feature scaling.
    Scale,
    /// Share of non-zero features in generated sparse data.
    Density,
    /// The passive-aggressive rules' C.
    Aggressiveness,
    /// AROW's regularization r.
    ArowR,
    /// AROW's covariance (diagonal or full).
    ArowCovariance,
    /// The direct multiclass update (argmax or all).
    MulticlassUpdate,
    /// Rows per step of the online perceptron.
    Minibatch,
    /// Streams of the online perceptron.
    Streams,
}

impl Param {
    /// The parameter's name in library messages.
    pub fn name(self) -> &'static str {
        match self {
            Param::Algo => "algorithm",
            Param::Epochs => "epochs",
            Param::LearningRate => "learning rate",
            Param::Tolerance => "tolerance",
            Param::MarginThreshold => "margin threshold",
            Param::MaxVectors => "max vectors",
            Param::Mode => "mode",
            Param::Degree => "kernel degree",
            Param::Gamma => "kernel gamma",
            Param::Coef0 => "kernel coef0",
            Param::Rows => "rows",
            Param::Features => "features",
            Param::Margin => "margin",
            Param::Noise => "noise",
            Param::Experts => "experts",
            Param::Panel => "panel size",
            Param::LabelColumn => "label column",
            Param::PlotFeatures => "plot features",
            Param::ImagePath => "image path",
            Param::AnimationPath => "animation path",
            Param::ImageWidth => "image width",
            Param::ImageHeight => "image height",
            Param::Patience => "patience",
            Param::MinImprovement => "minimum improvement",
            Param::PatienceFloor => "patience floor",
            Param::ValidationFraction => "validation fraction",
            Param::ClassWeight => "class weight",
            Param::SampleWeight => "sample weight",
            Param::WeightColumn => "weight column",
            Param::Categorical => "categorical columns",
            Param::Scale => "scaling",
            Param::Density => "density",
            Param::Aggressiveness => "aggressiveness C",
            Param::ArowR => "AROW's r",
            Param::ArowCovariance => "AROW's covariance",
            Param::MulticlassUpdate => "multiclass update",
            Param::Minibatch => "rows per step",
            Param::Streams => "streams",
        }
    }
}
