//! The kernel (dual) perceptron on the GPU (shaders/kernel.wgsl): the `kscores` pipeline,
//! built once per context, and [`DualResident`], rows made resident for repeated scoring. The
//! rows, their squared norms, and buffers for the largest support set are uploaded and bound
//! once; a call writes only the support indices, their coefficients and the kernel, then
//! dispatches and reads back. Its CPU twin is `reference::kscores`.

use super::batch::{storage, Access};
use super::buffers::{entire, init_buf, read_back, storage_buf};
use super::context::GpuContext;
use super::mirror::{KParams, KERNEL_TILE_BYTES};
use super::paths::GpuPath;
use crate::error::{Error, Result};
use crate::{sq_norms, DataView, DualBound, Kernel};

/// The dual-perceptron shader's WGSL source.
pub const KERNEL_WGSL: &str = include_str!("../../../../shaders/kernel.wgsl");

/// The dual-perceptron scoring pipeline and its layout, built once.
pub struct DualPipelines {
    /// Layout of its one bind group.
    pub layout: wgpu::BindGroupLayout,
    /// The `kscores` pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its workgroup size.
    pub wg: u32,
}

impl DualPipelines {
    /// Compiles shaders/kernel.wgsl for the device's limits.
    pub fn new(ctx: &GpuContext) -> Result<Self> {
        let l = &ctx.limits;
        if KERNEL_TILE_BYTES > l.max_compute_workgroup_storage_size {
            return Err(Error::Gpu(format!(
                "the kernel perceptron needs {KERNEL_TILE_BYTES} bytes of workgroup memory; the device has {}",
                l.max_compute_workgroup_storage_size
            )));
        }
        let wg = 256u32
            .min(l.max_compute_invocations_per_workgroup)
            .min(l.max_compute_workgroup_size_x);
        ctx.scoped("compiling shaders/kernel.wgsl", || {
            let module = ctx
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("rosenblatt.kernel"),
                    source: wgpu::ShaderSource::Wgsl(ctx.params_source(KERNEL_WGSL)),
                });
            let layout = ctx
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("rosenblatt.kernel_layout"),
                    entries: &[
                        ctx.params_entry(0),
                        storage(1, Access::Read),
                        storage(2, Access::Read),
                        storage(3, Access::Read),
                        storage(4, Access::Read),
                        storage(5, Access::Read),
                        storage(6, Access::ReadWrite),
                    ],
                });
            let pl = ctx
                .device
                .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some("rosenblatt.kernel_pipeline_layout"),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
            let constants = [("WG", wg as f64)];
            let pipeline = ctx
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some("rosenblatt.kscores"),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("kscores"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &constants,
                        ..Default::default()
                    },
                    cache: None,
                });
            DualPipelines {
                layout,
                pipeline,
                wg,
            }
        })
    }
}

/// Rows resident on the GPU for kernel scoring, with every buffer and the bind group made once.
pub struct DualResident<'c> {
    ctx: &'c GpuContext,
    pipes: &'c DualPipelines,
    n: usize,
    m_max: usize,
    d: u32,
    bias2: f32,
    params: wgpu::Buffer,
    idx: wgpu::Buffer,
    coef: wgpu::Buffer,
    out: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind: wgpu::BindGroup,
}

impl<'c> DualResident<'c> {
    /// Uploads `eval` (the rows scored) and `sv` (the rows support vectors are drawn from;
    /// `None`: the same rows, uploaded once).
    pub fn new(
        ctx: &'c GpuContext,
        pipes: &'c DualPipelines,
        eval: DataView<'_>,
        sv: Option<DataView<'_>>,
    ) -> Result<Self> {
        let limit = ctx
            .limits
            .max_storage_buffer_binding_size
            .min(ctx.limits.max_buffer_size);
        let svv = sv.unwrap_or(eval);
        for (what, v) in [("data", eval), ("support vectors' data", svv)] {
            let bytes = (v.n as u64) * (v.d as u64) * 4;
            if bytes > limit {
                return Err(Error::TooLarge(format!(
                    "the kernel perceptron binds the {what} whole: {bytes} bytes, more than the GPU's \
                     {limit}-byte binding limit"
                )));
            }
        }
        // The rows go up as f32: a compact copy is widened first, within the memory budget.
        crate::check_widened(eval)?;
        if let Some(s) = sv {
            crate::check_widened(s)?;
        }
        let st = wgpu::BufferUsages::STORAGE;
        let dst = wgpu::BufferUsages::COPY_DST;
        ctx.scoped("uploading the kernel perceptron's rows", || {
            let xe = init_buf(
                ctx,
                "rosenblatt.kernel_eval",
                bytemuck::cast_slice(&eval.x.to_dense(eval.n, eval.d)),
                st,
            );
            let xs = sv.map(|sv| {
                init_buf(
                    ctx,
                    "rosenblatt.kernel_sv",
                    bytemuck::cast_slice(&sv.x.to_dense(sv.n, sv.d)),
                    st,
                )
            });
            let sq = init_buf(
                ctx,
                "rosenblatt.kernel_svsq",
                bytemuck::cast_slice(&sq_norms(svv)),
                st,
            );
            let params = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rosenblatt.kparams"),
                size: size_of::<KParams>() as u64,
                usage: ctx.params_usage() | dst,
                mapped_at_creation: false,
            });
            let idx = storage_buf(ctx, "rosenblatt.kernel_idx", (svv.n * 4) as u64);
            let coef = storage_buf(ctx, "rosenblatt.kernel_coef", (svv.n * 4) as u64);
            let out = storage_buf(ctx, "rosenblatt.kernel_out", (eval.n * 4) as u64);
            let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rosenblatt.kernel_readback"),
                size: ((eval.n * 4) as u64).max(4),
                usage: wgpu::BufferUsages::MAP_READ | dst,
                mapped_at_creation: false,
            });
            let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("rosenblatt.kernel"),
                layout: &pipes.layout,
                entries: &[
                    entire(0, &params),
                    entire(1, &xe),
                    entire(2, xs.as_ref().unwrap_or(&xe)),
                    entire(3, &idx),
                    entire(4, &coef),
                    entire(5, &sq),
                    entire(6, &out),
                ],
            });
            DualResident {
                ctx,
                pipes,
                n: eval.n,
                m_max: svv.n,
                d: eval.d as u32,
                bias2: eval.bias * eval.bias,
                params,
                idx,
                coef,
                out,
                staging,
                bind,
            }
        })
    }
}

impl DualBound for DualResident<'_> {
    fn kscores(&mut self, idx: &[u32], coef: &[f32], kernel: &Kernel) -> Result<Vec<f32>> {
        let ctx = self.ctx;
        if self.n == 0 {
            return Ok(Vec::new());
        }
        let m = idx.len().min(coef.len());
        if m > self.m_max || idx[..m].iter().any(|&j| j as usize >= self.m_max) {
            return Err(Error::Gpu(format!(
                "{m} support indices for {} resident rows",
                self.m_max
            )));
        }
        let (gamma, coef0, degree) = match *kernel {
            Kernel::Linear => (0.0, 0.0, 1),
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => (gamma, coef0, degree),
            Kernel::Rbf { gamma } => (gamma, 0.0, 1),
        };
        let kp = KParams {
            n: self.n as u32,
            m: m as u32,
            d: self.d,
            kind: kernel.code(),
            gamma,
            coef0,
            degree,
            bias2: self.bias2,
        };
        let out_bytes = (self.n * 4) as u64;
        ctx.scoped("kernel perceptron scores", || {
            ctx.queue
                .write_buffer(&self.params, 0, bytemuck::bytes_of(&kp));
            if m > 0 {
                ctx.queue
                    .write_buffer(&self.idx, 0, bytemuck::cast_slice(&idx[..m]));
                ctx.queue
                    .write_buffer(&self.coef, 0, bytemuck::cast_slice(&coef[..m]));
            }
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
                pass.set_pipeline(&self.pipes.pipeline);
                pass.set_bind_group(0, &self.bind, &[]);
                let wgs = self
                    .n
                    .div_ceil(self.pipes.wg as usize)
                    .min(ctx.limits.max_compute_workgroups_per_dimension as usize);
                pass.dispatch_workgroups(wgs.max(1) as u32, 1, 1);
            }
            ctx.ran(GpuPath::KernelPerceptron);
            enc.copy_buffer_to_buffer(&self.out, 0, &self.staging, 0, out_bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = read_back(ctx, &self.staging)?;
        ctx.check("kernel perceptron scores")?;
        Ok(bytemuck::cast_slice(&bytes[..out_bytes as usize]).to_vec())
    }
}
