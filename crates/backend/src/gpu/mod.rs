//! GPU backend through wgpu on any Vulkan, Metal, DX12 or GL adapter: the batch epoch and
//! scoring (shaders/batch.wgsl, `batch.rs`, `upload.rs` and `resident.rs`) and kernel scoring
//! (shaders/kernel.wgsl, `dual.rs`). The context, shader modules, layouts and pipelines are
//! built once per backend; binding a data set uploads it once.

pub mod batch;
mod buffers;
pub mod context;
pub(crate) mod dual;
pub(crate) mod mirror;
pub mod paths;
pub mod plan;
mod profile;
pub(crate) mod resident;
pub mod steps;
mod upload;

use super::{Backend, BackendKind, BatchRule, Bound, DataView, DualBound, Epochs, Extras};
use crate::error::Result;
use batch::BatchPipelines;
use context::GpuContext;
use dual::{DualPipelines, DualResident};
use resident::Resident;
use upload::Rows;

pub use crate::gpu_options::{GpuOptions, ParamsSpace};
pub use batch::ShaderChecks;
pub use context::{list_adapters, AdapterReport, HOW_TO_GET_ONE};
pub use paths::GpuPath;
pub use plan::Plan;
pub use upload::ResidentOptions;

/// The wgpu backend.
pub struct GpuBackend {
    ctx: GpuContext,
    batch: BatchPipelines,
    dual: std::sync::OnceLock<DualPipelines>,
    steps: std::sync::OnceLock<steps::StepsPipelines>,
    opts: ResidentOptions,
}

impl GpuBackend {
    /// Opens an adapter per `opts` and compiles the batch pipelines (the kernel perceptron's
    /// on first use).
    pub fn new(opts: &GpuOptions) -> Result<Self> {
        let mut ctx = GpuContext::new(&opts.adapter)?;
        if let Some(space) = opts.params_space {
            let have = ctx.limits.max_storage_buffers_per_shader_stage;
            let want = context::PARAMS_STORAGE_BINDINGS;
            if space == ParamsSpace::Storage && have < want {
                return Err(crate::error::Error::Gpu(format!(
                    "{} allows {have} storage buffers a shader stage; parameter blocks in \
                     storage buffers take {want}",
                    ctx.describe()
                )));
            }
            ctx.params = space;
        }
        let checks =
            opts.shader_checks
                .unwrap_or(if ctx.info.device_type == wgpu::DeviceType::Cpu {
                    ShaderChecks::Full
                } else {
                    ShaderChecks::NoLoopCounters
                });
        let batch = BatchPipelines::new(&ctx, checks)?;
        Ok(GpuBackend {
            ctx,
            batch,
            dual: std::sync::OnceLock::new(),
            steps: std::sync::OnceLock::new(),
            opts: opts.resident.clone(),
        })
    }

    /// The context (device, queue, limits).
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// How many storage bindings (segments) `n` rows of `d` features take on this device with
    /// `heads` weight vectors: more than one when X is larger than one binding holds.
    pub fn segments(&self, n: usize, d: usize, heads: usize) -> Result<usize> {
        let plan = plan::plan(
            n,
            d,
            heads,
            super::Storage::F32,
            &self.ctx.limits,
            plan::PlanOptions {
                max_binding: self.opts.max_binding,
                two_kernels: self.opts.two_kernels,
                ..Default::default()
            },
        )?;
        Ok(n.div_ceil(plan.seg_rows))
    }

    /// Host-to-device bandwidth in GB/s (1e9 bytes) as streamed X moves: `bytes` (at most 256
    /// MiB) copied by the queue from a host staging buffer into a device buffer,
    /// three times in one submit after a warm-up copy. What a streamed epoch is bound by when
    /// the kernels are faster.
    pub fn upload_gbs(&self, bytes: u64) -> Result<f64> {
        let size = bytes.clamp(4, 256 << 20) / 4 * 4;
        let ctx = &self.ctx;
        let buf = buffers::storage_buf(ctx, "rosenblatt.h2d_probe", size);
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rosenblatt.h2d_probe_staging"),
            size,
            usage: buffers::host_staging_usage(ctx),
            mapped_at_creation: true,
        });
        if let Ok(mut v) = staging.get_mapped_range_mut(..) {
            v.slice(..).fill(1);
        }
        staging.unmap();
        let wait = || {
            ctx.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(|e| crate::error::Error::Gpu(format!("waiting for the GPU: {e}")))
        };
        let copies = |times: usize| {
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            for _ in 0..times {
                enc.copy_buffer_to_buffer(&staging, 0, &buf, 0, size);
            }
            ctx.queue.submit([enc.finish()]);
        };
        ctx.scoped("timing uploads", || copies(1))?;
        wait()?;
        let t = std::time::Instant::now();
        ctx.scoped("timing uploads", || copies(3))?;
        wait()?;
        Ok(3.0 * size as f64 / t.elapsed().as_secs_f64() / 1e9)
    }

    fn resident<'a>(&'a self, rows: Rows<'a>, heads: usize) -> Result<Resident<'a>> {
        Resident::new(&self.ctx, &self.batch, rows, heads, &self.opts)
    }

    fn steps(&self) -> Result<&steps::StepsPipelines> {
        if let Some(k) = self.steps.get() {
            return Ok(k);
        }
        let k = steps::StepsPipelines::new(&self.ctx)?;
        Ok(self.steps.get_or_init(|| k))
    }

    fn dual(&self) -> Result<&DualPipelines> {
        if let Some(k) = self.dual.get() {
            return Ok(k);
        }
        let k = DualPipelines::new(&self.ctx)?;
        Ok(self.dual.get_or_init(|| k))
    }
}

impl Backend for GpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }

    fn device(&self) -> String {
        self.ctx.describe()
    }

    fn bind<'a>(&'a self, data: super::TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        let r = self.resident(training_rows(data), data.heads)?;
        Ok(Box::new(GpuBound { r }))
    }

    fn bind_reduced<'a>(
        &'a self,
        data: super::TrainView<'a>,
        reduce: &'a dyn super::Reduce,
    ) -> Result<Box<dyn Bound + 'a>> {
        if data.n == 0 {
            // No rows here (more processes than rows): nothing for the GPU, only the sums to
            // take part in, which the CPU's bound does alike.
            static CPU: super::cpu::CpuBackend = super::cpu::CpuBackend;
            return CPU.bind_reduced(data, reduce);
        }
        let mut r = self.resident(training_rows(data), data.heads)?;
        r.reduce_with(reduce)?;
        Ok(Box::new(GpuBound { r }))
    }

    fn scores(&self, data: DataView<'_>, w: &[f32]) -> Result<Vec<f32>> {
        if data.n == 0 {
            return Ok(Vec::new());
        }
        let heads = w.len() / (data.d + 1);
        let rows = Rows {
            data,
            y: None,
            sw: None,
            own: None,
            held: None,
        };
        self.resident(rows, heads)?.scores(w)
    }

    fn bind_dual<'a>(
        &'a self,
        eval: DataView<'a>,
        sv: Option<DataView<'a>>,
    ) -> Result<Box<dyn DualBound + 'a>> {
        Ok(Box::new(DualResident::new(
            &self.ctx,
            self.dual()?,
            eval,
            sv,
        )?))
    }

    fn bind_steps<'a>(
        &'a self,
        rows: super::steps::StepRows<'_>,
        setup: super::steps::StepsSetup,
    ) -> Result<Box<dyn super::steps::StepsBound + 'a>> {
        Ok(Box::new(steps::GpuSteps::new(
            &self.ctx,
            self.steps()?,
            self.opts.max_binding,
            self.opts.subgroups,
            rows,
            setup,
        )?))
    }
}

/// The rows of a training view as the resident buffers take them.
fn training_rows(data: super::TrainView<'_>) -> Rows<'_> {
    Rows {
        data: data.data(),
        y: Some(data.y),
        sw: data.sw,
        own: data.own,
        held: data.val_data().zip(data.val.map(|v| v.y)),
    }
}

/// Training data resident on the GPU.
struct GpuBound<'a> {
    r: Resident<'a>,
}

impl Bound for GpuBound<'_> {
    fn batch_epochs(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        max_epochs: usize,
    ) -> Result<Epochs> {
        self.r.batch_epochs(w, rule, max_epochs)
    }

    fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        self.r.scores(w)
    }

    fn extras(&mut self) -> Result<Extras> {
        self.r.extras()
    }

    fn epochs_per_call(&self) -> usize {
        self.r.epochs_per_call()
    }

    fn profile(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        epochs: usize,
    ) -> Result<Option<super::KernelProfile>> {
        self.r.profile(w, rule, epochs)
    }
}
