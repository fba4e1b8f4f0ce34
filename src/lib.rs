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
//! assert_eq!(trained.report.train_accuracy, 1.0);
//! # Ok::<(), rosenblatt::Error>(())
//! ```
//!
//! Building with `default-features = false` gives this API alone (no command-line crates,
//! every module private). The `cli` feature (the default, which the `rosenblatt` binary and
//! the tests use) also opens the modules themselves, hidden from these docs: they are the
//! command line's and the tests' view, not a stable API.
#![warn(missing_docs)]
// Without the command line, code that only it and the tests call is unused here.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

// The crate's modules: public (and hidden from the docs) with the `internals` feature, for
// the binary, the tests and the benches; private without it, so a library user reaches
// the names re-exported below and nothing else. (Written out: modules declared by a macro
// could not export their macros by path.)
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod algo;
#[cfg(not(feature = "internals"))]
mod algo;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod alloc;
#[cfg(not(feature = "internals"))]
mod alloc;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod backend;
#[cfg(not(feature = "internals"))]
mod backend;
#[cfg(all(feature = "cli", feature = "internals"))]
#[doc(hidden)]
pub mod bench;
#[cfg(all(feature = "cli", not(feature = "internals")))]
mod bench;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod data;
#[cfg(not(feature = "internals"))]
mod data;
#[cfg(all(feature = "mpi", feature = "internals"))]
#[doc(hidden)]
pub mod distributed;
#[cfg(all(feature = "mpi", not(feature = "internals")))]
mod distributed;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod error;
#[cfg(not(feature = "internals"))]
mod error;
#[cfg(all(feature = "cli", feature = "internals"))]
#[doc(hidden)]
pub mod experiment;
#[cfg(all(feature = "cli", not(feature = "internals")))]
mod experiment;
#[cfg(all(unix, feature = "internals"))]
#[doc(hidden)]
pub mod fault;
#[cfg(all(unix, not(feature = "internals")))]
mod fault;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod limits;
#[cfg(not(feature = "internals"))]
mod limits;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod matrix;
#[cfg(not(feature = "internals"))]
mod matrix;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod metrics;
#[cfg(not(feature = "internals"))]
mod metrics;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod model;
#[cfg(not(feature = "internals"))]
mod model;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod output;
#[cfg(not(feature = "internals"))]
mod output;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod params;
#[cfg(not(feature = "internals"))]
mod params;
#[cfg(all(feature = "plot", feature = "internals"))]
#[doc(hidden)]
pub mod plot;
#[cfg(all(feature = "plot", not(feature = "internals")))]
mod plot;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod reduce;
#[cfg(not(feature = "internals"))]
mod reduce;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod report;
#[cfg(not(feature = "internals"))]
mod report;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod trainer;
#[cfg(not(feature = "internals"))]
mod trainer;

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
    default_epochs, default_stopping, Algo, Arow, ClassWeight, Kernel, Mode, MulticlassStrategy,
    MulticlassUpdate, Params, PassiveAggressive, Scale, TrainParams,
};
// Training.
pub use algo::{Progress, TrainReport, Trained};
pub use trainer::{Fallback, Trainer};
// The model and its file.
pub use model::{Body, DenseRows, Model, ModelKind};
pub use model::{FORMAT as MODEL_FORMAT, VERSION as MODEL_VERSION};
// Where work runs.
pub use backend::cpu::CpuBackend;
#[cfg(feature = "gpu")]
pub use backend::gpu::list_adapters;
#[cfg(not(feature = "gpu"))]
pub use backend::gpu_options::list_adapters;
pub use backend::gpu_options::{AdapterQuery, AdapterReport, GpuOptions};
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
