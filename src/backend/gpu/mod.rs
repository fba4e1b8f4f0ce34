//! GPU backend through wgpu: the batch epoch and scoring as WGSL compute kernels
//! (shaders/batch.wgsl) on any Vulkan, Metal, DX12 or GL adapter. The context, shader module,
//! layouts and pipelines are built once per backend; binding a data set uploads it once.

pub mod context;
pub mod kernels;
pub mod resident;

use super::{Backend, BackendKind, BatchRule, Bound, DataView, EpochStats, Extras, TrainView};
use crate::error::Result;
use context::{AdapterQuery, GpuContext};
use kernels::Kernels;
use resident::{Resident, ResidentOptions};

pub use context::{list_adapters, AdapterReport, HOW_TO_GET_ONE};

/// How to open and drive the GPU.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// Which adapter.
    pub adapter: AdapterQuery,
    /// Buffer shaping and test hooks.
    pub resident: ResidentOptions,
}

/// The wgpu backend.
pub struct GpuBackend {
    ctx: GpuContext,
    kernels: Kernels,
    opts: ResidentOptions,
}

impl GpuBackend {
    /// Opens an adapter per `opts` and compiles the kernels.
    pub fn new(opts: &GpuOptions) -> Result<Self> {
        let ctx = GpuContext::new(&opts.adapter)?;
        let kernels = Kernels::new(&ctx)?;
        Ok(GpuBackend {
            ctx,
            kernels,
            opts: opts.resident.clone(),
        })
    }

    /// The context (device, queue, limits).
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Uploads a data set; exposed for benchmarks and tests that inspect the plan.
    pub fn resident(
        &self,
        data: DataView<'_>,
        y: Option<&[f32]>,
        heads: usize,
    ) -> Result<Resident<'_>> {
        Resident::new(&self.ctx, &self.kernels, data, y, heads, &self.opts)
    }
}

impl Backend for GpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }

    fn device(&self) -> String {
        self.ctx.describe()
    }

    fn bind<'a>(&'a self, data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        let r = self.resident(data.data(), Some(data.y), data.heads)?;
        Ok(Box::new(GpuBound { r }))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        if data.n == 0 {
            return Ok(Vec::new());
        }
        let heads = w.len() / (data.d + 1);
        self.resident(data, None, heads)?.scores(w)
    }
}

/// Training data resident on the GPU.
pub struct GpuBound<'a> {
    r: Resident<'a>,
}

impl Bound for GpuBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Vec<EpochStats>> {
        self.r.batch_epochs(w, rule, max_epochs)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        self.r.scores(w)
    }

    fn extras(&mut self) -> Result<Extras> {
        self.r.extras()
    }

    fn epochs_per_call(&self) -> usize {
        self.r.epochs_per_submit()
    }
}
