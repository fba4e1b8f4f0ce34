//! The hardware a run may use, with the GPU-to-CPU fallback written once
//! ([`Backends::resume`]).

use crate::backend::{Backend, BackendKind, EpochStats};
use crate::error::{Error, Result};
use crate::report::Ran;

/// The hardware a run may use: a primary backend and, for a GPU primary, an optional fallback
/// that takes over when the GPU fails.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    /// Where the epochs run.
    pub primary: &'a dyn Backend,
    /// Where they continue if the primary is a GPU and fails.
    pub fallback: Option<&'a dyn Backend>,
}

/// Training state that survives a failed backend: the algorithm's own state (weights,
/// counts) and the statistics of the epochs completed so far.
#[derive(Debug, Clone)]
pub struct Checkpoint<S> {
    /// The algorithm's state after the last completed epoch.
    pub state: S,
    /// One entry per completed epoch.
    pub stats: Vec<EpochStats>,
}

impl<'a> Backends<'a> {
    /// Runs `f` on the primary backend with the training state `cp`. If the primary is a GPU
    /// and fails with a GPU or size error and there is a fallback, runs `f` again on the
    /// fallback with the state as the failure left it (the last completed epoch), and says
    /// so in the returned [`Ran`].
    pub fn resume<S, T>(
        &self,
        cp: &mut Checkpoint<S>,
        mut f: impl FnMut(&dyn Backend, &mut Checkpoint<S>) -> Result<T>,
    ) -> Result<(T, Ran)> {
        let primary = self.primary;
        match (f(primary, cp), self.fallback) {
            (Ok(t), _) => Ok((t, Ran::on(primary))),
            (Err(e @ (Error::Gpu(_) | Error::TooLarge(_))), Some(fb))
                if primary.kind() == BackendKind::Gpu =>
            {
                let note = format!(
                    "GPU failed after {} epochs ({e}); finished on {}",
                    cp.stats.len(),
                    fb.device()
                );
                let t = f(fb, cp)?;
                Ok((
                    t,
                    Ran {
                        fallback: Some(note),
                        ..Ran::on(fb)
                    },
                ))
            }
            (Err(e), _) => Err(e),
        }
    }
}
