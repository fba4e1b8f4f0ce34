//! Plain CPU twins of every WGSL entry point, with the same names, one file a shader file of
//! the same name: batch_register.rs (`epoch`, `scores`: shaders/batch_register.wgsl with its
//! lane sums), batch_two_kernels.rs (`margins`, `accumulate`, `gather`), batch_update.rs
//! (`apply`, `fold`, `finalize`) and kernel.rs (`kscores`: shaders/kernel.wgsl); the shared
//! part (shaders/batch.wgsl: `row_score`) is here.
//! Each is the shader's rule written as a sequential loop, with no SIMD, no threads and no
//! blocking, so it is easy to check by reading. [`ReferenceBackend`] chains them into a
//! [`Backend`]; tests hold the fast CPU backend (cpu.rs) and the GPU to it: bit-identical on
//! integer-valued data (every sum is exact below 2^24), within float tolerance otherwise.
//!
//! The state a resident data set keeps on the GPU (weights, pocket, average sum, log-weights,
//! the fewest mistakes seen, the stop word) is [`EpochState`] here.

use super::{
    cpu::chunk_rows, winnow_weights, Backend, BackendKind, BatchRule, Bound, DataView, DualBound,
    DualRows, Epochs, Extras, Kernel, Pocket, Row, TrainView, Update,
};
use crate::error::Result;

mod batch_register;
mod batch_two_kernels;
mod batch_update;
mod kernel;

pub use batch_register::{epoch, scores};
pub use batch_two_kernels::{accumulate, gather, margins, Margins};
pub use batch_update::{apply, finalize, fold, EpochState};
pub use kernel::kscores;

/// a . b summed in index order.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (x, y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

/// w_k . [x, bias]: the features in column order (a sparse row: its non-zeros in column
/// order), then the bias term; the twin of `row_score` in batch.wgsl.
pub fn row_score(w: &[f32], row: Row<'_>, bias: f32) -> f32 {
    let d = w.len() - 1;
    row.dot_seq(&w[..d]) + w[d] * bias
}

/// The reference twins as a backend: slow (one thread, no SIMD), plain, and the standard the
/// other backends are tested against.
#[derive(Debug, Default, Clone)]
pub struct ReferenceBackend;

impl Backend for ReferenceBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn device(&self) -> String {
        "CPU (reference, 1 thread)".into()
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        let len = data.heads.max(1) * (data.d + 1);
        Ok(Box::new(ReferenceBound {
            v: data,
            st: EpochState::new(len),
            coef: vec![0.0; data.n * data.heads.max(1)],
            kept: (false, false),
        }))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        Ok(scores(data, w))
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        Ok(Box::new(ReferenceDual(DualRows::new(eval, sv)?)))
    }
}

/// Training data bound to the reference backend.
struct ReferenceBound<'a> {
    v: TrainView<'a>,
    st: EpochState,
    coef: Vec<f32>,
    /// Whether a pocket / an average sum was kept by any rule used.
    kept: (bool, bool),
}

impl Bound for ReferenceBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs> {
        let st = &mut self.st;
        self.kept.0 |= rule.keep.pocket();
        self.kept.1 |= rule.keep.average();
        match rule.update {
            Update::Multiplicative => {
                st.logw.copy_from_slice(w);
                winnow_weights(w, &mut st.w);
            }
            Update::Additive => st.w.copy_from_slice(w),
        }
        let rows = chunk_rows(self.v.n, self.v.d);
        let mut out = Epochs::default();
        for _ in 0..max_epochs {
            let wv = st.held_out_weights(rule).to_vec();
            let (m, partials) = if self.v.x.is_sparse() {
                let m = margins(self.v, &st.w, &wv, rule, &mut self.coef);
                (m, gather(self.v, &self.coef))
            } else {
                epoch(self.v, &st.w, &wv, rule, rows, &mut self.coef)
            };
            let sq = apply(&partials, rule, st);
            let (e, stop) = finalize(m, &sq, rule, st);
            out.stats.push(e);
            if stop.is_some() {
                out.stop = stop;
                break;
            }
        }
        w.copy_from_slice(match rule.update {
            Update::Multiplicative => &st.logw,
            Update::Additive => &st.w,
        });
        Ok(out)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        Ok(scores(self.v.data(), w))
    }

    fn extras(&mut self) -> Result<Extras> {
        let st = &self.st;
        Ok(Extras {
            pocket: (self.kept.0 && st.stop.epochs > 0).then(|| Pocket {
                w: st.pocket.clone(),
                figure: st.stop.best,
                updates: st.pocket_updates,
            }),
            average: self.kept.1.then(|| (st.average_sum.clone(), st.updates)),
            stop: st.stop,
        })
    }
}

/// Rows bound to the reference backend for kernel scoring.
struct ReferenceDual<'a>(DualRows<'a>);

impl DualBound for ReferenceDual<'_> {
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>> {
        let r = &self.0;
        Ok(kscores(r.eval, r.sv, &r.sq, idx, coef, kernel))
    }
}
