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
    #[error("{name} {reason}, but is {value}")]
    InvalidParam {
        /// Parameter name as the user knows it (e.g. `--lr`).
        name: &'static str,
        /// The value given.
        value: String,
        /// The rule it breaks.
        reason: &'static str,
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

    /// The data is larger than the device can hold.
    #[error("{0}")]
    TooLarge(String),

    /// A plot could not be drawn or written.
    #[error("plot: {0}")]
    Plot(String),
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
        )
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn data(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Data {
            path: path.into(),
            msg: msg.into(),
        }
    }
}
