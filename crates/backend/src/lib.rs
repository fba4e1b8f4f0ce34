//! The seam between algorithms and hardware. Algorithms call [`Backend`] (bind data, score)
//! and [`Bound`] (run batch epochs on bound data); the CPU and GPU implement these primitive
//! steps and know nothing about which algorithm calls them.
//!
//! The batch epoch is one fused pass over X with K weight vectors ("heads", K = 1 for a
//! binary perceptron): for every row the K scores s_k = w_k^T x, a per-row rule
//! ([`HeadRule`]) that decides whether the row is a mistake and how much of x each head
//! gets (binary: y on y s <= tau), the mistake count, the criterion J, and the sums over the
//! mistakes; then W += eta * sums. Optionally the backend keeps the pocket (the weights with
//! the fewest mistakes seen) and the running sum of the per-epoch weights (for averaging).
//! [`BatchRule::stop`] is the stop decision both backends apply after each epoch (the GPU twin
//! is in shaders/batch_update.wgsl).

#![warn(missing_docs)]

pub mod cpu;
mod data_parallel;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod gpu_options;
mod profile;
pub mod reference;
mod rule;
mod select;
pub mod steps;
mod stop;
mod view;

// The layer below: the matrix and storage types, the parameters, errors, limits and the
// cross-process sums (rosenblatt-core), named here as they were when this was one crate.
use rosenblatt_core::{error, limits, matrix, params, reduce, with_features, Error};

/// The adapters wgpu finds (none without the `gpu` feature) and the one `auto` would pick.
#[cfg(feature = "gpu")]
pub use gpu::list_adapters;
#[cfg(not(feature = "gpu"))]
pub use gpu_options::list_adapters;

// The matrix and storage types and the SIMD kernels live below the backends (crate::matrix);
// the kernel function is a parameter (crate::params).
pub use crate::matrix::simd::{
    axpy, decision, dot, prefetch_ahead, simd_enabled, sum_simd, Elem, Lanes,
};
pub use crate::matrix::{simd, storage};
pub use crate::matrix::{
    CsrBuf, CsrView, FeatureBuf, Features, MappedF32, Matrix, MatrixBuf, Row, Storage, WideMatrix,
};
pub use crate::params::Kernel;
pub use crate::reduce::{agree, Disagreement, Reduce};
pub(crate) use data_parallel::agreed_stop;
pub use data_parallel::Distributed;
pub use profile::{
    Chain, KernelProfile, KernelTraffic, CHAIN_WORKGROUPS_PER_CU, TRAFFIC_CATEGORIES,
};
pub(crate) use rosenblatt_core::simd_dispatch;
pub use rule::{
    arow_rule, pa_rule, predicted_wrong, row_rule, update_norm, winnow_weights, BatchRule,
    HeadRule, Keep, LogWeight, PaRow, PaSize, Patience, RowOutcome, RowWeight, Update,
};
pub use select::{select, select_for, BackendChoice, BackendKind, Selected, AUTO_GPU_MIN_VALUES};
pub use stop::{EpochStats, Epochs, Extras, Pocket, StopReason, StopState};
// Only the GPU backend widens narrow storage on upload.
#[cfg_attr(not(feature = "gpu"), allow(unused_imports))]
pub(crate) use view::check_widened;
pub use view::{sq_norms, DataView, DualRows, TrainView, ValView};

use crate::error::Result;

/// Most weight vectors ("heads") one batch epoch or scoring call handles: the size of the
/// per-row score array in the GPU kernels (`MAX_HEADS` in shaders/batch.wgsl, checked equal by
/// a test). Models with more rows are scored in blocks of this many.
pub const MAX_HEADS: usize = 64;

/// Hardware that runs the primitive steps.
pub trait Backend {
    /// CPU or GPU.
    fn kind(&self) -> BackendKind;
    /// Human-readable device name (CPU model and thread count, or adapter name and API).
    fn device(&self) -> String;
    /// Makes a training set resident (uploads it, for a GPU) for repeated epochs.
    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>>;
    /// As [`Backend::bind`], for one process's share of the rows of a data-parallel run: each
    /// epoch's sums and counts over these rows go through `reduce` (summed over every
    /// process) before the update, so every process applies the same update and takes the
    /// same stop decision. Processes may run different backends: each epoch makes the same
    /// calls, in this order: the update sums (`sum_f32`, `heads * (d + 1)`), the counts
    /// (`sum_f64` of mistakes, criterion, weighted mistakes), with held-out rows their
    /// mistakes (`sum_f64` of one), then the stop (`agreed_stop`).
    fn bind_reduced<'a>(
        &'a self,
        _data: TrainView<'a>,
        _reduce: &'a dyn Reduce,
    ) -> Result<Box<dyn Bound + 'a>> {
        Err(crate::Error::Mpi(format!(
            "the {} backend does not train data-parallel",
            self.device()
        )))
    }
    /// Decision values w_k^T [x_i, bias] for every row and each of the `w.len() / (d + 1)`
    /// weight vectors, row-major (`n * heads`).
    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>>;
    /// The same values as [`Backend::scores`] for many weight rows at once, as a matrix
    /// product whose summation order is the backend's (not bit-identical to `scores` on
    /// non-integer data): the voted perceptron's rows against its steps' rows. By default,
    /// `scores`.
    fn products(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        self.scores(data, w)
    }
    /// Makes rows resident for repeated kernel scoring: `eval` are the rows scored, `sv` the
    /// rows support vectors are drawn from (`None`: the same rows, as in training).
    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>>;
    /// Dual decision values f_i = sum over s of coef_s * (K(sv_idx_s, x_i) + bias^2) for
    /// every row of `eval`, computed on the fly (no Gram matrix), `idx` in ascending order.
    /// `eval.bias` is the bias column's value.
    fn kernel_scores(
        &self,
        eval: DataView<'_>,
        sv: DataView<'_>,
        idx: &[u32],
        coef: &[f32],
        kernel: &Kernel,
    ) -> Result<Vec<f32>> {
        self.bind_dual(eval, Some(sv))?.kscores(idx, coef, kernel)
    }
    /// Binds `rows` for the online perceptron in steps and streams (`setup`). By default the
    /// CPU twin of the GPU's kernels, `CpuSteps`.
    fn bind_steps<'a>(
        &'a self,
        rows: steps::StepRows<'_>,
        setup: steps::StepsSetup,
    ) -> Result<Box<dyn steps::StepsBound + 'a>> {
        Ok(Box::new(steps::CpuSteps::new(rows, setup)?))
    }
}
/// Rows made resident for kernel scoring (see [`Backend::bind_dual`]).
pub trait DualBound {
    /// f_i for every bound eval row, with the support vectors `idx` (ascending rows of the
    /// bound support rows) and their coefficients. The twin of `kscores` in kernel.wgsl.
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>>;
}

/// A training set made resident on a backend.
pub trait Bound {
    /// Runs up to `max_epochs` batch epochs starting from `w` (`heads * (d + 1)` entries),
    /// updating it in place, and stops after the first epoch for which [`StopState::record`]
    /// says so. Returns one [`EpochStats`] per epoch run and the stop, if any. On error `w` is
    /// left as it was; a backend that fails after some of the call's epochs completed may
    /// return those instead, and the failure then answers the next call. The pocket, the
    /// average sum and the stop rules' memory persist across calls on the same bound data.
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs>;
    /// Decision values w_k^T [x_i, bias] for the bound rows, row-major `n * heads`.
    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>>;
    /// The pocket and the average sum kept so far (as asked by the rules used).
    fn extras(&mut self) -> Result<Extras>;
    /// How many epochs a call to `batch_epochs` should ask for: 1 where a call costs nothing
    /// extra (the CPU), more where each call has a fixed cost (a GPU submit and read-back).
    fn epochs_per_call(&self) -> usize {
        1
    }
    /// Runs up to `epochs` batch epochs from `w` (updated) with a timer around every kernel
    /// (where the device has timers), then one epoch with instrumented kernels that count
    /// the words they load and store, and returns both; `None` where the backend has no
    /// kernels to split (the CPU runs one fused pass).
    fn profile(
        &mut self,
        _w: &mut [f32],
        _rule: &BatchRule,
        _epochs: usize,
    ) -> Result<Option<KernelProfile>> {
        Ok(None)
    }
}
