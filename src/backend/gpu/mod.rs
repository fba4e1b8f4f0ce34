//! GPU backend through wgpu: the batch epoch and scoring as WGSL compute kernels
//! (shaders/batch.wgsl) on any Vulkan, Metal, DX12 or GL adapter. The context, shader module,
//! layouts and pipelines are built once per backend; binding a data set uploads it once.

pub mod context;
pub mod kernels;
pub mod resident;

use super::{
    Backend, BackendKind, BatchRule, Bound, DataView, EpochStats, Extras, Kernel, TrainView,
};
use crate::error::Error;
use crate::error::Result;
use context::{AdapterQuery, GpuContext};
use kernels::{DualKernels, KParams, Kernels};
use resident::{Resident, ResidentOptions};
use wgpu::util::DeviceExt;

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
    dual: std::sync::OnceLock<DualKernels>,
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
            dual: std::sync::OnceLock::new(),
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

impl GpuBackend {
    fn dual(&self) -> Result<&DualKernels> {
        if let Some(k) = self.dual.get() {
            return Ok(k);
        }
        let k = DualKernels::new(&self.ctx)?;
        Ok(self.dual.get_or_init(|| k))
    }

    fn dual_scores(
        &self,
        eval: DataView<'_>,
        sv: DataView<'_>,
        idx: &[u32],
        coef: &[f32],
        kernel: &Kernel,
    ) -> Result<Vec<f32>> {
        let ctx = &self.ctx;
        let dk = self.dual()?;
        let d = eval.d;
        let limit = ctx
            .limits
            .max_storage_buffer_binding_size
            .min(ctx.limits.max_buffer_size);
        for (what, v) in [("data", eval), ("support vectors' data", sv)] {
            let bytes = (v.n * v.d * 4) as u64;
            if bytes > limit {
                return Err(Error::TooLarge(format!(
                    "the kernel perceptron binds the {what} whole: {bytes} bytes, more than the GPU's \
                     {limit}-byte binding limit; use --backend cpu"
                )));
            }
        }
        let m = idx.len();
        let svsq: Vec<f32> = idx
            .iter()
            .map(|&j| {
                let r = &sv.x[j as usize * d..(j as usize + 1) * d];
                super::dot(r, r)
            })
            .collect();
        let (kind, gamma, coef0, degree) = match *kernel {
            Kernel::Linear => (kernel.code(), 0.0, 0.0, 1),
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => (kernel.code(), gamma, coef0, degree),
            Kernel::Rbf { gamma } => (kernel.code(), gamma, 0.0, 1),
        };
        let kp = KParams {
            n: eval.n as u32,
            m: m as u32,
            d: d as u32,
            kind,
            gamma,
            coef0,
            degree,
            bias2: eval.bias * eval.bias,
        };
        let out_bytes = (eval.n * 4) as u64;
        let init = |label: &str, bytes: &[u8], usage: wgpu::BufferUsages| {
            let padded: Vec<u8> = if bytes.is_empty() {
                vec![0; 4]
            } else {
                bytes.to_vec()
            };
            ctx.device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: &padded,
                    usage,
                })
        };
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rosenblatt.kernel_readback"),
            size: out_bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let same = std::ptr::eq(eval.x.as_ptr(), sv.x.as_ptr()) && eval.x.len() == sv.x.len();
        ctx.scoped("kernel perceptron scores", || {
            let st = wgpu::BufferUsages::STORAGE;
            let ub = init(
                "rosenblatt.kparams",
                bytemuck::bytes_of(&kp),
                wgpu::BufferUsages::UNIFORM,
            );
            let xe = init("rosenblatt.kernel_eval", bytemuck::cast_slice(eval.x), st);
            let xs = if same {
                None
            } else {
                Some(init("rosenblatt.kernel_sv", bytemuck::cast_slice(sv.x), st))
            };
            let ib = init("rosenblatt.kernel_idx", bytemuck::cast_slice(idx), st);
            let cb = init("rosenblatt.kernel_coef", bytemuck::cast_slice(coef), st);
            let qb = init("rosenblatt.kernel_svsq", bytemuck::cast_slice(&svsq), st);
            let ob = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rosenblatt.kernel_out"),
                size: out_bytes,
                usage: st | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let e = resident::entire;
            let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("rosenblatt.kernel"),
                layout: &dk.layout,
                entries: &[
                    e(0, &ub),
                    e(1, &xe),
                    e(2, xs.as_ref().unwrap_or(&xe)),
                    e(3, &ib),
                    e(4, &cb),
                    e(5, &qb),
                    e(6, &ob),
                ],
            });
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rosenblatt.kernel"),
                });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rosenblatt.kscores"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&dk.pipeline);
                pass.set_bind_group(0, &bind, &[]);
                let wgs = eval
                    .n
                    .div_ceil(dk.wg as usize)
                    .min(ctx.limits.max_compute_workgroups_per_dimension as usize);
                pass.dispatch_workgroups(wgs.max(1) as u32, 1, 1);
            }
            enc.copy_buffer_to_buffer(&ob, 0, &staging, 0, out_bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = resident::read_back(ctx, &staging)?;
        ctx.check("kernel perceptron scores")?;
        Ok(bytemuck::cast_slice(&bytes).to_vec())
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

    fn kernel_scores(
        &self,
        eval: DataView<'_>,
        sv: DataView<'_>,
        idx: &[u32],
        coef: &[f32],
        kernel: &Kernel,
    ) -> Result<Vec<f32>> {
        if eval.n == 0 {
            return Ok(Vec::new());
        }
        self.dual_scores(eval, sv, idx, coef, kernel)
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
