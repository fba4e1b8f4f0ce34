//! rosenblatt's algorithms, each written once against the backend seam
//! (rosenblatt-backend), the [`trainer::Trainer`] that runs them, their reports and the
//! model file. Users take these names from the `rosenblatt` crate, which re-exports the ones
//! that make its API; the modules here are the command line's and the tests' view.

#![warn(missing_docs)]

pub mod algo;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod model;
pub mod report;
pub mod trainer;

// The layers below, named here as they were when this was one crate.
use rosenblatt_backend as backend;
use rosenblatt_core::{data, error, limits, matrix, metrics, output, params, with_features};
use rosenblatt_core::{Error, Result};
