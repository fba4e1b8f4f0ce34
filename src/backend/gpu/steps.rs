//! The online perceptron in steps and streams on the GPU (shaders/steps.wgsl): the `steps`
//! and `mix` pipelines, built once per context, and [`GpuSteps`], rows made resident for a
//! stepped run. An epoch writes the row order and the streams' parts, dispatches one
//! workgroup a stream, then `mix`, and reads back the streams' counts. CPU twin:
//! `backend::steps::CpuSteps`.

use super::batch::{storage, uniform, Access};
use super::buffers::{entire, init_buf, read_back, storage_buf};
use super::context::GpuContext;
use super::mirror::{StepParams, StreamStat};
use crate::backend::steps::{model_of, stream_part, StepRows, StepsBound, StepsSetup};
use crate::backend::RowOutcome;
use crate::error::{Error, Result};

/// Most storage bindings X takes (`x0` .. `x3` in shaders/steps.wgsl).
const X_PARTS: usize = 4;

/// The stepped perceptron's WGSL source.
pub const STEPS_WGSL: &str = include_str!("../../../shaders/steps.wgsl");

/// The `steps` and `mix` pipelines and their layout, built once.
pub struct StepsPipelines {
    layout: wgpu::BindGroupLayout,
    steps: wgpu::ComputePipeline,
    mix: wgpu::ComputePipeline,
    wg: u32,
}

impl StepsPipelines {
    /// Compiles shaders/steps.wgsl for the device's limits.
    pub fn new(ctx: &GpuContext) -> Result<Self> {
        let l = &ctx.limits;
        if l.max_storage_buffers_per_shader_stage < 9 {
            return Err(Error::Gpu(format!(
                "the stepped perceptron binds 9 storage buffers; the device allows {}",
                l.max_storage_buffers_per_shader_stage
            )));
        }
        let wg = 256u32
            .min(l.max_compute_invocations_per_workgroup)
            .min(l.max_compute_workgroup_size_x);
        // sc (MAX_STEP f32) and four WG-long reduction arrays.
        let bytes = (crate::backend::steps::MAX_STEP as u32 + 4 * wg) * 4;
        if bytes > l.max_compute_workgroup_storage_size {
            return Err(Error::Gpu(format!(
                "the stepped perceptron needs {bytes} bytes of workgroup memory; the device has {}",
                l.max_compute_workgroup_storage_size
            )));
        }
        ctx.scoped("compiling shaders/steps.wgsl", || {
            let module = ctx
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("rosenblatt.steps"),
                    source: wgpu::ShaderSource::Wgsl(STEPS_WGSL.into()),
                });
            let layout = ctx
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("rosenblatt.steps_layout"),
                    entries: &[
                        uniform(0),
                        storage(1, Access::Read),
                        storage(2, Access::Read),
                        storage(3, Access::Read),
                        storage(4, Access::ReadWrite),
                        storage(5, Access::ReadWrite),
                        storage(6, Access::ReadWrite),
                        storage(7, Access::Read),
                        storage(8, Access::Read),
                        storage(9, Access::Read),
                    ],
                });
            let pl = ctx
                .device
                .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some("rosenblatt.steps_pipeline_layout"),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
            let constants = [("WG", wg as f64)];
            let pipeline = |entry: &str| {
                ctx.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(entry),
                        layout: Some(&pl),
                        module: &module,
                        entry_point: Some(entry),
                        compilation_options: wgpu::PipelineCompilationOptions {
                            constants: &constants,
                            ..Default::default()
                        },
                        cache: None,
                    })
            };
            StepsPipelines {
                steps: pipeline("steps"),
                mix: pipeline("mix"),
                layout,
                wg,
            }
        })
    }
}

/// Rows resident on the GPU for a stepped online run.
pub struct GpuSteps<'c> {
    ctx: &'c GpuContext,
    pipes: &'c StepsPipelines,
    setup: StepsSetup,
    n: usize,
    len: usize,
    order: wgpu::Buffer,
    w: wgpu::Buffer,
    sums: wgpu::Buffer,
    stat: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind: wgpu::BindGroup,
    /// Each stream's steps so far (kept on the device too).
    steps: Vec<u64>,
    /// Dispatches of `steps` an epoch takes (each stream's steps in runs of `max_steps`).
    dispatches: usize,
}

/// Steps a stream takes in one dispatch: all of them on a hardware adapter; on a software
/// adapter few enough that no invocation runs more than about 45,000 loop iterations
/// (Mesa's llvmpipe and lavapipe end every loop, silently, once an invocation has run 65,535
/// in all: gallivm's loop limiter, see `plan::software_steps`). A step costs a thread its
/// dot products (d + 1 each), the rule (2K a row) and its columns' updates (B (K + 1) + K
/// each). At least one step; below 2^31 / B, so that positions stay within u32.
fn max_steps(ctx: &GpuContext, st: &StepsSetup, d: usize, wg: u32) -> usize {
    let cap = (1usize << 31) / st.step_rows.max(1);
    if ctx.info.device_type != wgpu::DeviceType::Cpu {
        return cap;
    }
    let (wg, b, k) = (wg.max(1) as usize, st.step_rows, st.heads);
    let cost = (b * k).div_ceil(wg) * (d + 1)
        + b.div_ceil(wg) * 2 * k
        + (d + 1).div_ceil(wg) * (b * (k + 1) + k)
        + 4;
    (45_000 / cost).clamp(1, cap)
}

impl<'c> GpuSteps<'c> {
    /// Uploads `rows` (features, labels with the rows' weights) and the starting weights to
    /// every stream; X goes in bindings of at most `max_binding` bytes (default: the device's
    /// limit).
    pub fn new(
        ctx: &'c GpuContext,
        pipes: &'c StepsPipelines,
        max_binding: Option<u64>,
        rows: StepRows<'_>,
        setup: StepsSetup,
    ) -> Result<Self> {
        let StepRows {
            x,
            y,
            weights,
            d,
            bias,
        } = rows;
        setup.check(d)?;
        let n = y.len();
        let len = setup.w0.len();
        let s = setup.streams;
        let limit = super::plan::binding_limit(&ctx.limits, max_binding);
        let xb = (x.len() as u64) * 4;
        let wb = (s as u64) * (len as u64) * 4;
        // X in at most X_PARTS bindings of part_rows rows each.
        let part_rows = (limit / ((d.max(1) as u64) * 4)).min(u32::MAX as u64) as usize;
        let parts = match part_rows {
            0 => usize::MAX,
            p => n.div_ceil(p).max(1),
        };
        if parts > X_PARTS
            || wb > limit
            || n >= 1 << 31
            || s > ctx.limits.max_compute_workgroups_per_dimension as usize
        {
            return Err(Error::TooLarge(format!(
                "a stepped run binds X ({xb} bytes) in at most {X_PARTS} bindings and {s} \
                 streams' weights ({wb} bytes) in one; the GPU binds at most {limit} bytes a \
                 binding and runs {} workgroups",
                ctx.limits.max_compute_workgroups_per_dimension
            )));
        }
        let sp = StepParams {
            n: n as u32,
            d: d as u32,
            heads: setup.heads as u32,
            rule: setup.rule.code(),
            streams: s as u32,
            step_rows: setup.step_rows as u32,
            average: setup.average as u32,
            part_rows: part_rows.max(1) as u32,
            tau: setup.tau,
            eta: setup.eta,
            bias,
            max_steps: max_steps(ctx, &setup, d, pipes.wg) as u32,
            weighted: weights.is_some() as u32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        // Labels, or with row weights (label, weight, weight in the own head) a row.
        let labels: Vec<f32> = match weights {
            None => y.to_vec(),
            Some(wt) => y
                .iter()
                .zip(wt)
                .flat_map(|(&l, w)| [l, w.row, w.own])
                .collect(),
        };
        let st = wgpu::BufferUsages::STORAGE;
        ctx.scoped("uploading the stepped perceptron's rows", || {
            let params = init_buf(
                ctx,
                "rosenblatt.step_params",
                bytemuck::bytes_of(&sp),
                wgpu::BufferUsages::UNIFORM,
            );
            let xbufs: Vec<wgpu::Buffer> = (0..parts)
                .map(|p| {
                    let at = |p: usize| (p * part_rows * d).min(x.len());
                    init_buf(
                        ctx,
                        "rosenblatt.steps_x",
                        nonempty(&x[at(p)..at(p + 1)]),
                        st,
                    )
                })
                .collect();
            let xpart = |p: usize| xbufs.get(p).unwrap_or(&xbufs[0]);
            let ybuf = init_buf(ctx, "rosenblatt.steps_y", nonempty(&labels), st);
            let order = storage_buf(ctx, "rosenblatt.steps_order", (n.max(1) * 4) as u64);
            let w = init_buf(
                ctx,
                "rosenblatt.steps_w",
                bytemuck::cast_slice(&setup.w0.repeat(s)),
                st | wgpu::BufferUsages::COPY_SRC,
            );
            let sums = storage_buf(
                ctx,
                "rosenblatt.steps_sums",
                if setup.average { wb } else { 4 },
            );
            let stat = storage_buf(
                ctx,
                "rosenblatt.steps_stat",
                (s * size_of::<StreamStat>()) as u64,
            );
            let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rosenblatt.steps_readback"),
                size: wb.max((s * size_of::<StreamStat>()) as u64),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("rosenblatt.steps"),
                layout: &pipes.layout,
                entries: &[
                    entire(0, &params),
                    entire(1, xpart(0)),
                    entire(2, &ybuf),
                    entire(3, &order),
                    entire(4, &w),
                    entire(5, &sums),
                    entire(6, &stat),
                    entire(7, xpart(1)),
                    entire(8, xpart(2)),
                    entire(9, xpart(3)),
                ],
            });
            GpuSteps {
                ctx,
                pipes,
                n,
                len,
                order,
                w,
                sums,
                stat,
                staging,
                bind,
                steps: vec![0; s],
                dispatches: {
                    let per_dispatch = sp.max_steps as usize * setup.step_rows;
                    let longest = stream_part(0, n, s).1.max(n.div_ceil(s));
                    longest.div_ceil(per_dispatch.max(1)).max(1)
                },
                setup,
            }
        })
    }

    /// Reads `bytes` bytes of `buf` back.
    fn read(&self, buf: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        let ctx = self.ctx;
        ctx.scoped("reading the stepped perceptron back", || {
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            enc.copy_buffer_to_buffer(buf, 0, &self.staging, 0, bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let mut out = read_back(ctx, &self.staging)?;
        ctx.check("reading the stepped perceptron back")?;
        out.truncate(bytes as usize);
        Ok(out)
    }

    fn all_weights(&self) -> Result<Vec<f32>> {
        let bytes = self.read(&self.w, (self.setup.streams * self.len * 4) as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

/// The bytes of `v`, or four zero bytes for an empty slice (buffers are never empty).
fn nonempty(v: &[f32]) -> &[u8] {
    if v.is_empty() {
        &[0; 4]
    } else {
        bytemuck::cast_slice(v)
    }
}

impl StepsBound for GpuSteps<'_> {
    fn epoch(&mut self, order: &[u32]) -> Result<RowOutcome> {
        let ctx = self.ctx;
        let s = self.setup.streams;
        if order.len() != self.n || order.iter().any(|&i| i as usize >= self.n) {
            return Err(Error::Gpu(format!(
                "an epoch's order of {} rows for {} bound rows",
                order.len(),
                self.n
            )));
        }
        let stats: Vec<StreamStat> = (0..s)
            .map(|k| {
                let (lo, hi) = stream_part(k, self.n, s);
                StreamStat {
                    lo: lo as u32,
                    hi: hi as u32,
                    steps: self.steps[k] as u32,
                    ..StreamStat::default()
                }
            })
            .collect();
        let stat_bytes = (s * size_of::<StreamStat>()) as u64;
        ctx.scoped("running a stepped epoch", || {
            if !order.is_empty() {
                ctx.queue
                    .write_buffer(&self.order, 0, bytemuck::cast_slice(order));
            }
            ctx.queue
                .write_buffer(&self.stat, 0, bytemuck::cast_slice(&stats));
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rosenblatt.steps"),
                });
            // A pass a dispatch: each `steps` goes on where the last left its streams, and
            // `mix` reads every stream's weights once they are all done.
            let mix = (
                "rosenblatt.mix",
                &self.pipes.mix,
                self.len.div_ceil(self.pipes.wg as usize),
            );
            let runs =
                std::iter::repeat_n(("rosenblatt.steps", &self.pipes.steps, s), self.dispatches);
            for (label, pipe, groups) in runs.chain([mix]) {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, &self.bind, &[]);
                pass.set_pipeline(pipe);
                pass.dispatch_workgroups(groups as u32, 1, 1);
            }
            enc.copy_buffer_to_buffer(&self.stat, 0, &self.staging, 0, stat_bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = read_back(ctx, &self.staging)?;
        ctx.check("running a stepped epoch")?;
        let got: Vec<StreamStat> = bytemuck::pod_collect_to_vec(&bytes[..stat_bytes as usize]);
        let mut total = RowOutcome::default();
        for (k, g) in got.iter().enumerate() {
            total += RowOutcome {
                mistakes: g.mistakes as u64,
                criterion: g.criterion as f64,
                weighted: g.weighted as f64,
                wrong_rows: g.wrong_rows as u64,
            };
            self.steps[k] = g.steps as u64;
        }
        Ok(total)
    }

    fn weights(&mut self) -> Result<Vec<f32>> {
        let bytes = self.read(&self.w, (self.len * 4) as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    fn model(&mut self) -> Result<Vec<f32>> {
        let w = self.all_weights()?;
        let sums = match self.setup.average {
            true => {
                let b = self.read(&self.sums, (self.setup.streams * self.len * 4) as u64)?;
                Some(bytemuck::pod_collect_to_vec::<u8, f32>(&b))
            }
            false => None,
        };
        Ok(model_of(&w, sums.as_deref(), &self.steps, self.len))
    }
}
