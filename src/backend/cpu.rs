//! CPU backend: the reference implementation of the batch epoch and of scoring, and a fast
//! fallback. Rows are split into fixed chunks that depend only on (n, d), never on the thread
//! count; each chunk accumulates its own partial sum, and partials are added in chunk order,
//! so results are identical on any number of threads. One pass over X per epoch; all
//! buffers are allocated once in `bind`.

use rayon::prelude::*;

use super::{
    axpy, decision, simd_dispatch, Backend, BackendKind, BatchRule, Bound, DataView, EpochStats,
    TrainView,
};
use crate::error::Result;

/// Rows per chunk: at least ~256 KiB of X per chunk, and at most 64 chunks in all.
pub fn chunk_rows(n: usize, d: usize) -> usize {
    let min_rows = (1usize << 16).div_ceil(d + 1);
    min_rows.max(n.div_ceil(64)).max(1)
}

/// The CPU backend, using rayon's global thread pool.
#[derive(Debug, Default, Clone)]
pub struct CpuBackend;

impl CpuBackend {
    /// Creates the CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        format!("CPU ({} threads)", rayon::current_num_threads())
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        Ok(Box::new(CpuBound::new(data)))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        Ok(cpu_scores(data, w))
    }
}

fn cpu_scores(data: DataView<'_>, w: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; data.n];
    if data.n == 0 {
        return out;
    }
    let rows = chunk_rows(data.n, data.d);
    out.par_chunks_mut(rows).enumerate().for_each(|(c, o)| {
        let start = c * rows;
        chunk_scores_simd(data, w, start, o);
    });
    out
}

/// One chunk's share of an epoch.
#[derive(Debug, Clone)]
struct Partial {
    sum: Vec<f32>,
    mistakes: u64,
    criterion: f64,
}

/// The fused epoch over one chunk of rows: margins, mistakes, criterion, and the sum of y*x
/// over the mistakes, reading each row once (a mistake row is added while it is in L1).
/// Counters live in locals so that stores into `p.sum` cannot force them back to memory.
#[inline(always)]
fn chunk_epoch(v: TrainView<'_>, w: &[f32], start: usize, end: usize, p: &mut Partial) {
    let d = v.d;
    let sum = &mut p.sum[..=d];
    sum.fill(0.0);
    let (mut mistakes, mut criterion) = (0u64, 0f64);
    for i in start..end {
        let row = &v.x[i * d..(i + 1) * d];
        let y = v.y[i];
        let m = y * decision(w, row, v.bias);
        if m <= 0.0 {
            mistakes += 1;
            criterion -= m as f64;
            axpy(y, row, &mut sum[..d]);
            sum[d] += y * v.bias;
        }
    }
    p.mistakes = mistakes;
    p.criterion = criterion;
}

simd_dispatch! {
    fn chunk_epoch_simd(v: TrainView<'_>, w: &[f32], start: usize, end: usize, p: &mut Partial) => chunk_epoch
}

/// Decision values of the rows `start..start + out.len()`.
#[inline(always)]
fn chunk_scores(data: DataView<'_>, w: &[f32], start: usize, out: &mut [f32]) {
    for (k, s) in out.iter_mut().enumerate() {
        let i = start + k;
        *s = decision(w, &data.x[i * data.d..(i + 1) * data.d], data.bias);
    }
}

simd_dispatch! {
    fn chunk_scores_simd(data: DataView<'_>, w: &[f32], start: usize, out: &mut [f32]) => chunk_scores
}

/// Training data bound to the CPU, with the per-chunk buffers of the batch epoch.
pub struct CpuBound<'a> {
    v: TrainView<'a>,
    rows: usize,
    partials: Vec<Partial>,
    total: Vec<f32>,
}

impl<'a> CpuBound<'a> {
    /// Binds `v`, allocating the chunk partials once.
    pub fn new(v: TrainView<'a>) -> Self {
        let rows = chunk_rows(v.n, v.d);
        let chunks = v.n.div_ceil(rows).max(1);
        let p = Partial {
            sum: vec![0.0; v.d + 1],
            mistakes: 0,
            criterion: 0.0,
        };
        CpuBound {
            v,
            rows,
            partials: vec![p; chunks],
            total: vec![0.0; v.d + 1],
        }
    }

    /// One fused epoch with the weights `w`: fills `self.total` with the sum of y*x over the
    /// mistakes and returns (mistakes, criterion).
    fn accumulate(&mut self, w: &[f32]) -> (u64, f64) {
        let v = self.v;
        let rows = self.rows;
        self.partials.par_iter_mut().enumerate().for_each(|(c, p)| {
            let end = ((c + 1) * rows).min(v.n);
            chunk_epoch_simd(v, w, c * rows, end, p);
        });
        self.total.fill(0.0);
        let (mut mistakes, mut criterion) = (0u64, 0f64);
        for p in &self.partials {
            if p.mistakes > 0 {
                axpy(1.0, &p.sum, &mut self.total);
            }
            mistakes += p.mistakes;
            criterion += p.criterion;
        }
        (mistakes, criterion)
    }
}

impl Bound for CpuBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Vec<EpochStats>> {
        let mut out = Vec::with_capacity(max_epochs);
        for _ in 0..max_epochs {
            let (mistakes, criterion) = self.accumulate(w);
            let mut norm2 = 0f64;
            if mistakes > 0 {
                for (wj, sj) in w.iter_mut().zip(&self.total) {
                    let step = rule.eta * sj;
                    norm2 += (step as f64) * (step as f64);
                    *wj += step;
                }
            }
            let e = EpochStats {
                mistakes,
                criterion,
                update_norm: norm2.sqrt(),
            };
            out.push(e);
            if rule.stop(&e).is_some() {
                break;
            }
        }
        Ok(out)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        Ok(cpu_scores(self.v.data(), w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_batch_epoch_with_tie_and_bias() {
        // x: (1, 0) y=+1, (0, 1) y=-1. w = 0: both margins are 0, ties count as mistakes.
        let x = [1.0, 0.0, 0.0, 1.0];
        let y = [1.0, -1.0];
        let v = TrainView {
            x: &x,
            y: &y,
            n: 2,
            d: 2,
            bias: 1.0,
        };
        let cpu = CpuBackend::new();
        let mut b = cpu.bind(v).unwrap();
        let mut w = vec![0.0; 3];
        let rule = BatchRule { eta: 0.5, tol: 0.0 };
        let e = b.batch_epochs(&mut w, &rule, 1).unwrap();
        // sum = (+1)(1,0,1) + (-1)(0,1,1) = (1,-1,0); w = 0.5 * sum.
        assert_eq!(w, vec![0.5, -0.5, 0.0]);
        assert_eq!(e[0].mistakes, 2);
        assert_eq!(e[0].criterion, 0.0);
        assert!((e[0].update_norm - 0.5f64.sqrt()).abs() < 1e-7);
        // Next epoch: margins 0.5 and 0.5, no mistakes -> converged, w unchanged.
        let e = b.batch_epochs(&mut w, &rule, 10).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].mistakes, 0);
        assert_eq!(w, vec![0.5, -0.5, 0.0]);
        assert_eq!(b.scores(&w).unwrap(), vec![0.5, -0.5]);
    }

    #[test]
    fn chunking_depends_on_shape_only() {
        assert_eq!(chunk_rows(10, 3), 16384);
        assert_eq!(chunk_rows(1 << 24, 3), (1 << 24) / 64);
    }
}
