//! What the `rosenblatt` command runs beyond training: the epoch benchmark (`bench`), the
//! experiments of the lecture notes (`experiment`) and the pictures (`plot`: boundary,
//! training curves, ROC, animations). It builds on the crates below and nothing builds on it
//! but the command line.

#![warn(missing_docs)]

pub mod bench;
pub mod experiment;
pub mod plot;

// The layers below, named here as they were when this was one crate.
use rosenblatt_backend as backend;
use rosenblatt_core::{data, error, limits, metrics, output, params};
use rosenblatt_train::{algo, model, report};
