//! The integration tests in one binary (linked once): a module a topic, each opening with
//! what it proves; `common` holds the helpers they share, the GPU backend on the default
//! adapter among them (opened once for the binary, its pipelines compiled once). `cargo test
//! --test it cli::` runs one topic; the MPI tests need a CLI built with `--features mpi`
//! (tests/it/mpi.rs). A GPU backend with other options is opened by the test that needs it
//! and dropped with it, except the conformance variants, held for that topic's many tests:
//! Mesa's software adapter keeps memory for each dispatch while a device lives
//! (CONTRIBUTING.md, "Test memory").

mod common;

mod api;
mod architecture;
mod arow;
mod bench;
mod cli;
mod conformance;
mod convergence;
mod coverage;
mod defaults;
mod docs;
mod family;
mod fuzz;
mod gpu;
mod model_files;
mod mpi;
mod npy;
mod passive_aggressive;
mod plot;
mod real_data;
mod reliability;
mod scale;
mod shaders;
mod sparse;
mod stream;
mod traffic;
mod vw;
mod warm_start;
