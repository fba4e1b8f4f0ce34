//! rosenblatt's bottom layer: data sets and their loaders, the matrix and storage types the
//! backends read, the parameters, the cross-process sums and the one error type. It names
//! no backend and no algorithm (the crates above it do), so a wrong-way import fails to
//! compile. Users take these names from the `rosenblatt` crate, which re-exports the ones
//! that make its API; the modules here are the other crates' and the tests' view.

#![warn(missing_docs)]

pub mod alloc;
pub mod data;
pub mod error;
#[cfg(unix)]
pub mod fault;
pub mod limits;
pub mod matrix;
pub mod metrics;
pub mod output;
pub mod params;
pub mod reduce;

pub use error::{Error, Param, Result};
