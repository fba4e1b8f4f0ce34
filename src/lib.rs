//! # rosenblatt
//!
//! Perceptrons trained on any GPU through wgpu compute shaders, with a multithreaded CPU
//! backend that is both the reference the GPU is checked against and a fast fallback.
//!
//! Conventions (from the lecture notes): augmented input `[x, 1]` for the bias; labels in
//! {-1, +1} internally (any two class names map onto them); a training mistake is
//! `y w^T x <= 0`; `sgn(0) = +1` when predicting; learning rate in (0, 1]; w starts at 0.
//!
//! The API is the names below, re-exported here: data ([`Dataset`], [`load`],
//! [`synth::generate`]), parameters ([`TrainParams`], validated into [`Params`]), training
//! ([`Trainer`] → [`Trained`]: a [`Model`] and its [`TrainReport`]), the model file
//! ([`Model::load`], [`Model::save`]) and where work runs ([`BackendChoice`],
//! [`GpuOptions`]). Errors are one [`Error`] type naming the file, value or parameter.
//!
//! ```
//! use rosenblatt::{synth, BackendChoice, SynthSpec, TrainParams, Trainer};
//!
//! let data = synth::generate(&SynthSpec { n: 200, d: 2, ..Default::default() })?.data;
//! let trained = Trainer::new(TrainParams::default())?.backend(BackendChoice::Cpu).fit(&data)?;
//! assert!(trained.report.converged);
//! assert_eq!(trained.report.train_accuracy, Some(1.0));
//! # Ok::<(), rosenblatt::Error>(())
//! ```
//!
//! Building with `default-features = false` gives this API alone (no command-line crates).
//! The crates it is built from (rosenblatt-core, rosenblatt-backend, rosenblatt-train, and
//! rosenblatt-app for the command line) are the command line's and the tests' view, not a
//! stable API.
#![warn(missing_docs)]

// The layers (each a crate of this workspace, so that a wrong-way import fails to compile):
// rosenblatt-core (data, matrix and storage types, parameters, errors) <- rosenblatt-backend
// (the CPU and the GPU behind one seam) <- rosenblatt-train (the algorithms, the trainer, the
// model file). This crate re-exports the names below from them and adds nothing else; the
// command line (src/main.rs, src/cli) builds on these crates too.
use rosenblatt_backend as backend;
use rosenblatt_core::{alloc, data, error, matrix, output, params};
use rosenblatt_train::{algo, model, trainer};

// Data: a data set, its loaders and the synthetic generator.
pub use data::synth::{self, SynthSpec, Synthetic};
pub use data::{
    load, load_bytes, Dataset, Format, LabelCol, LabelType, Labels, Layout, LoadOptions,
};
// Raw features hashed into columns (Vowpal Wabbit text).
pub use data::hashing::{HashSign, Hashing};
// Feature storage a data set is built from.
pub use matrix::{CsrBuf, MappedF32, MatrixBuf, Storage};
// Parameters, validated into `Params`.
pub use params::{
    default_epochs, default_scale, default_stopping, Algo, Arow, ClassWeight, Kernel, Mode,
    MulticlassStrategy, MulticlassUpdate, Params, PassiveAggressive, Scale, TrainParams,
};
// Training.
pub use algo::{Progress, TrainReport, Trained};
pub use trainer::{Fallback, Trainer};
// The model and its file.
pub use model::{Body, DenseRows, Model, ModelKind};
pub use model::{FORMAT as MODEL_FORMAT, VERSION as MODEL_VERSION};
// Where work runs.
pub use backend::cpu::CpuBackend;
pub use backend::gpu_options::{AdapterQuery, AdapterReport, GpuOptions};
pub use backend::list_adapters;
pub use backend::AUTO_GPU_MIN_VALUES;
pub use backend::{select_for as select_backend, Backend, BackendChoice, Selected};
// Errors.
pub use error::{Error, Param, Result};
// Files written whole or not at all, and the allocator the binary uses.
pub use alloc::CacheLines;
pub use output::{remove_stale_temps, temp_prefix};

/// The README's Rust example, compiled by `cargo test` (its shell examples run in
/// `tests/it/docs.rs`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

/// The guide's Rust examples, compiled and run by `cargo test` (its shell examples run in
/// `tests/it/docs.rs`).
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
pub struct GuideExamples;
