//! The integration tests in one binary (linked once): a module a topic, each opening with
//! what it proves; `common` holds the helpers every test binary shares. `cargo test --test it
//! cli::` runs one topic; the MPI tests build with `--features mpi`. The GPU conformance
//! tests (tests/conformance.rs, gpu.rs, sparse.rs, traffic.rs) are binaries of their own:
//! each holds its GPU set-ups and their compiled pipelines for its whole run (conformance
//! alone peaks near 8 GB on lavapipe), and in one process together they ran out of this
//! machine's 24 GB.

mod common;

mod api;
mod architecture;
mod arow;
mod bench;
mod cli;
mod convergence;
mod docs;
mod family;
mod fuzz;
mod model_files;
#[cfg(feature = "mpi")]
mod mpi;
mod npy;
mod passive_aggressive;
mod plot;
mod real_data;
mod reliability;
mod scale;
mod shaders;
mod vw;
mod warm_start;
