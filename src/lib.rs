//! # rosenblatt
//!
//! Perceptrons trained on any GPU through wgpu compute shaders, with a multithreaded CPU
//! backend that is both the reference the GPU is checked against and a fast fallback.
//!
//! Conventions (from the lecture notes): augmented input `[x, 1]` for the bias; labels in
//! {-1, +1} internally (any two class names map onto them); a training mistake is
//! `y w^T x <= 0`; `sgn(0) = +1` when predicting; learning rate in (0, 1]; w starts at 0.
//!
//! ```
//! use rosenblatt::{data::synth, params::TrainParams, backend::cpu::CpuBackend, algo};
//! let s = synth::generate(&synth::SynthSpec { n: 200, d: 2, ..Default::default() }).unwrap();
//! let params = TrainParams::default().validate().unwrap();
//! let t = algo::train(&s.data, &params, &CpuBackend::new(), None, &mut ()).unwrap();
//! assert!(t.report.converged);
//! assert_eq!(t.report.train_accuracy, 1.0);
//! ```

pub mod algo;
pub mod alloc;
pub mod backend;
#[cfg(feature = "cli")]
pub mod bench;
pub mod data;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod error;
#[cfg(feature = "cli")]
pub mod experiment;
#[cfg(unix)]
pub mod fault;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod output;
pub mod params;
#[cfg(feature = "plot")]
pub mod plot;
pub mod report;

pub use error::{Error, Result};

/// The guide's Rust examples, compiled and run by `cargo test` (its shell examples run in
/// `tests/docs.rs`).
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
pub struct GuideExamples;
