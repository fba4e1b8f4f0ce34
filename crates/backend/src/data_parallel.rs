//! The backends' side of data-parallel runs: a backend whose epochs sum through a
//! [`Reduce`] ([`Distributed`]) and the stop every process takes.

use super::{Backend, BackendKind, Bound, DataView, DualBound, StopReason, TrainView};
use crate::error::Result;
use crate::reduce::Reduce;

/// The stop every process of a data-parallel run takes after an epoch: each decided from the
/// same sums, but the tolerance rule compares an update norm that backends of different kinds
/// compute in different precision, so a stop anywhere is a stop everywhere (one more sum per
/// epoch, which every backend's bound makes at the same point).
pub(crate) fn agreed_stop(r: &dyn Reduce, stop: Option<StopReason>) -> Option<StopReason> {
    const ORDER: [StopReason; 3] = [
        StopReason::Converged,
        StopReason::Tolerance,
        StopReason::Patience,
    ];
    let code = stop
        .and_then(|s| ORDER.iter().position(|&o| o == s))
        .map_or(0, |k| k + 1);
    match r.max_f64(code as f64) as usize {
        0 => None,
        k => ORDER.get(k - 1).copied(),
    }
}

/// A backend for one process of a data-parallel run: training binds through
/// [`Backend::bind_reduced`] with `reduce`; scoring is the backend's own.
pub struct Distributed<R: Reduce> {
    /// This process's backend (its CPU or its GPU).
    pub backend: Box<dyn Backend>,
    /// The sums across processes.
    pub reduce: R,
}

impl<R: Reduce> Backend for Distributed<R> {
    fn kind(&self) -> BackendKind {
        self.backend.kind()
    }

    fn device(&self) -> String {
        format!(
            "{}, process {} of {}",
            self.backend.device(),
            self.reduce.rank() + 1,
            self.reduce.size()
        )
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        self.backend.bind_reduced(data, &self.reduce)
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        self.backend.scores(data, w)
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        self.backend.bind_dual(eval, sv)
    }
}
