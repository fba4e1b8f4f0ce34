//! Data-parallel training over MPI (feature `mpi`): [`Mpi`] is the [`Reduce`] the batch epoch
//! calls, so the processes of `mpirun -np N rosenblatt train --distributed` each sum their own
//! rows and one all-gather per epoch gives every process the single-process update. Sums are
//! added in rank order after the gather (not by MPI's reduction, whose order is the
//! implementation's), so the result does not depend on scheduling and equals the
//! one-process run wherever the sums are exact (integer data).

use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::backend::Reduce;
use crate::error::{Error, Result};

/// The MPI world this process belongs to.
pub struct Mpi {
    world: SimpleCommunicator,
    /// This process's index among those on its machine.
    local: usize,
    // Dropped last: finalizes MPI.
    _universe: Universe,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mpi {{ rank {} of {} }}", self.rank(), self.size())
    }
}

impl Mpi {
    /// Initializes MPI (once per process).
    pub fn init() -> Result<Mpi> {
        let universe = mpi::initialize()
            .ok_or_else(|| Error::Mpi("already initialized in this process".into()))?;
        let world = universe.world();
        let local = world.split_shared(world.rank()).rank() as usize;
        Ok(Mpi {
            world,
            local,
            _universe: universe,
        })
    }

    /// Every process's `v`, concatenated in rank order.
    fn all<T: Equivalence + Copy + Default>(&self, v: &[T]) -> Vec<T> {
        let mut out = vec![T::default(); v.len() * self.size()];
        self.world.all_gather_into(v, &mut out[..]);
        out
    }
}

impl Reduce for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn local_rank(&self) -> usize {
        self.local
    }

    fn sum_f32(&self, v: &mut [f32]) {
        let all = self.all(v);
        v.fill(0.0);
        for part in all.chunks_exact(v.len().max(1)) {
            for (a, b) in v.iter_mut().zip(part) {
                *a += b;
            }
        }
    }

    fn sum_f64(&self, v: &mut [f64]) {
        let all = self.all(v);
        v.fill(0.0);
        for part in all.chunks_exact(v.len().max(1)) {
            for (a, b) in v.iter_mut().zip(part) {
                *a += b;
            }
        }
    }

    fn max_f64(&self, v: f64) -> f64 {
        self.all(&[v]).into_iter().fold(f64::NEG_INFINITY, f64::max)
    }

    fn abort(&self, code: i32) {
        if self.size() > 1 {
            self.world.abort(code)
        }
    }

    fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
        self.gather_var(local)
    }

    fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
        self.gather_var(local)
    }
}

impl Mpi {
    /// Every process's `local` (of any length), concatenated in rank order.
    fn gather_var<T: Equivalence + Copy + Default>(&self, local: &[T]) -> Vec<T> {
        let counts: Vec<i32> = self.all(&[local.len() as i32]);
        let displs: Vec<i32> = counts
            .iter()
            .scan(0i32, |at, &c| {
                let d = *at;
                *at += c;
                Some(d)
            })
            .collect();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut out = vec![T::default(); total];
        {
            let mut part = PartitionMut::new(&mut out[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(local, &mut part);
        }
        out
    }
}
