//! The online perceptron in steps and streams on the GPU (shaders/steps.wgsl with
//! steps_tree.wgsl, or steps_subgroup.wgsl and subgroups.wgsl): the `steps` and `mix`
//! pipelines, and [`GpuSteps`], rows made resident for a stepped run. An epoch writes the row
//! order and the streams' parts, dispatches one workgroup a stream, then `mix`, and reads back
//! the streams' counts. Where the device has subgroups and the shape fits ([`LanesShape`]),
//! `steps` runs by subgroup lanes, the stream's weights in registers; else by the workgroup's
//! threads. CPU twin: `backend::steps::CpuSteps`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::batch::{storage, Access, LaneSums, SUBGROUPS_WGSL};
use super::buffers::{entire, init_buf, read_back, storage_buf};
use super::context::GpuContext;
use super::mirror::{StepParams, StreamStat};
use super::paths::GpuPath;
use crate::error::{Error, Result};
use crate::steps::{model_of, stream_part, StepRows, StepX, StepsBound, StepsSetup, MAX_STEP};
use crate::{RowOutcome, RowWeight};

/// Most storage bindings X takes (`x0` .. `x3` in shaders/steps.wgsl).
const X_PARTS: usize = 4;

/// The stepped perceptron's common WGSL source.
pub const STEPS_WGSL: &str = include_str!("../../../../shaders/steps.wgsl");
/// Its dense rows (`steps_by_threads` over them).
pub const STEPS_DENSE_WGSL: &str = include_str!("../../../../shaders/steps_dense.wgsl");
/// Its compressed sparse rows (`steps_by_threads` over them, lazily kept sums).
pub const STEPS_CSR_WGSL: &str = include_str!("../../../../shaders/steps_csr.wgsl");
/// Its `steps` entry point by the workgroup's threads (any adapter).
pub const STEPS_TREE_WGSL: &str = include_str!("../../../../shaders/steps_tree.wgsl");
/// Its `steps` entry point by subgroup lanes where planned (adapters with subgroups).
pub const STEPS_SUBGROUP_WGSL: &str = include_str!("../../../../shaders/steps_subgroup.wgsl");

/// The stepped module's source for dense rows: the common part, the rows' part and the entry
/// point's variant.
pub fn steps_source(lanes: LaneSums) -> String {
    match lanes {
        LaneSums::Subgroups => {
            format!("{STEPS_WGSL}\n{STEPS_DENSE_WGSL}\n{STEPS_SUBGROUP_WGSL}\n{SUBGROUPS_WGSL}")
        }
        LaneSums::Tree => format!("{STEPS_WGSL}\n{STEPS_DENSE_WGSL}\n{STEPS_TREE_WGSL}"),
    }
}

/// The stepped module's source for compressed sparse rows (by the workgroup's threads).
pub fn steps_csr_source() -> String {
    format!("{STEPS_WGSL}\n{STEPS_CSR_WGSL}\n{STEPS_TREE_WGSL}")
}

/// Most columns one thread holds by lanes (WGSL `U_MAX`).
pub const LANES_U_MAX: usize = 4;
/// Most heads by lanes (WGSL `KH_MAX`).
pub const LANES_K_MAX: usize = 16;
/// Most threads of a stream's workgroup by lanes: with U_MAX columns and K_MAX heads a
/// thread holds up to 128 floats of weights and sums in registers.
pub const LANES_WG_MAX: u32 = 256;

/// The workgroup of the `steps` pipeline by subgroup lanes (WGSL overrides WG, U, KH, PART):
/// `wg` threads, thread t holding columns t + u wg (u < `u`) of all `heads` heads, and `part`
/// words of workgroup memory for a step's rows' subgroup sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanesShape {
    /// Threads of a stream's workgroup.
    pub wg: u32,
    /// Columns a thread.
    pub u: u32,
    /// Heads, K.
    pub heads: u32,
    /// Words of `part`: rows a step x subgroups of the smallest size x K.
    pub part: u32,
}

impl LanesShape {
    /// The shape for `d` features, `heads` heads and steps of `step_rows` rows on a device
    /// whose subgroups have at least `subgroup_min` lanes and whose workgroups take `limits`;
    /// `None` where lanes do not fit (more than 16 heads, more than 1,024 columns, or too
    /// little workgroup memory). The fewest columns a thread: u = ceil((d + 1) / 256), then
    /// the threads those columns need, a power of two from 64 (so whole subgroups of up to 64
    /// lanes, and the counts' tree halves evenly).
    pub fn plan(
        d: usize,
        heads: usize,
        step_rows: usize,
        subgroup_min: u32,
        limits: &wgpu::Limits,
    ) -> Option<Self> {
        let da = d.checked_add(1)?;
        let wg_max = LANES_WG_MAX
            .min(limits.max_compute_invocations_per_workgroup)
            .min(limits.max_compute_workgroup_size_x) as usize;
        if heads == 0 || heads > LANES_K_MAX || wg_max < 64 {
            return None;
        }
        let u = da.div_ceil(wg_max).max(1);
        if u > LANES_U_MAX {
            return None;
        }
        let wg = da.div_ceil(u).next_power_of_two().clamp(64, wg_max);
        if !wg.is_power_of_two() {
            return None;
        }
        let sgs = subgroup_min.clamp(4, 64) as usize;
        let part = step_rows.checked_mul(wg / sgs)?.checked_mul(heads)?.max(1);
        let shape = LanesShape {
            wg: wg as u32,
            u: u as u32,
            heads: heads as u32,
            part: u32::try_from(part).ok()?,
        };
        (shape.workgroup_bytes() <= u64::from(limits.max_compute_workgroup_storage_size))
            .then_some(shape)
    }

    /// The WGSL override values of the pipeline by lanes.
    pub fn constants(&self) -> [(&'static str, f64); 5] {
        [
            ("WG", self.wg as f64),
            ("LANES", 1.0),
            ("U", self.u as f64),
            ("KH", self.heads as f64),
            ("PART", self.part as f64),
        ]
    }

    /// Workgroup memory of the pipeline, each variable rounded up to 16 bytes: `sc`, the four
    /// count trees, `part` and the subgroup layout's two words.
    pub fn workgroup_bytes(&self) -> u64 {
        let words = |n: u64| (n * 4).next_multiple_of(16);
        words(MAX_STEP as u64) + 4 * words(u64::from(self.wg)) + words(u64::from(self.part)) + 32
    }
}

/// The stepped pipelines and their layouts: for dense rows `mix` and `steps` by threads built
/// once, `steps` by lanes per [`LanesShape`] on first use; for sparse rows `CsrPipelines`
/// on first use.
pub struct StepsPipelines {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    steps: wgpu::ComputePipeline,
    mix: wgpu::ComputePipeline,
    wg: u32,
    lanes_module: OnceLock<wgpu::ShaderModule>,
    lanes: Mutex<HashMap<LanesShape, wgpu::ComputePipeline>>,
    csr: Mutex<Option<CsrPipelines>>,
}

/// The stepped pipelines for compressed sparse rows (shaders/steps_csr.wgsl): binding 9 is
/// the lazily kept sums' steps, written.
#[derive(Clone)]
struct CsrPipelines {
    layout: wgpu::BindGroupLayout,
    steps: wgpu::ComputePipeline,
    mix: wgpu::ComputePipeline,
}

/// The rows a stepped module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepsRows {
    Dense,
    Csr,
}

/// The stepped module's bind group layout and pipeline layout: binding 9 read (dense rows'
/// fourth binding) or read and written (sparse rows' `last`).
fn layouts(ctx: &GpuContext, rows: StepsRows) -> (wgpu::BindGroupLayout, wgpu::PipelineLayout) {
    let last = match rows {
        StepsRows::Csr => Access::ReadWrite,
        StepsRows::Dense => Access::Read,
    };
    let layout = ctx
        .device
        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("rosenblatt.steps_layout"),
            entries: &[
                ctx.params_entry(0),
                storage(1, Access::Read),
                storage(2, Access::Read),
                storage(3, Access::Read),
                storage(4, Access::ReadWrite),
                storage(5, Access::ReadWrite),
                storage(6, Access::ReadWrite),
                storage(7, Access::Read),
                storage(8, Access::Read),
                storage(9, last),
            ],
        });
    let pipeline_layout = ctx
        .device
        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("rosenblatt.steps_pipeline_layout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
    (layout, pipeline_layout)
}

impl StepsPipelines {
    /// Compiles shaders/steps.wgsl (with steps_dense.wgsl and steps_tree.wgsl) for the
    /// device's limits.
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
        let bytes = (MAX_STEP as u32 + 4 * wg) * 4;
        if bytes > l.max_compute_workgroup_storage_size {
            return Err(Error::Gpu(format!(
                "the stepped perceptron needs {bytes} bytes of workgroup memory; the device has {}",
                l.max_compute_workgroup_storage_size
            )));
        }
        ctx.scoped("compiling shaders/steps.wgsl + steps_tree.wgsl", || {
            let module = ctx
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("rosenblatt.steps_tree"),
                    source: wgpu::ShaderSource::Wgsl(
                        ctx.params_source(&steps_source(LaneSums::Tree))
                            .into_owned()
                            .into(),
                    ),
                });
            let (layout, pipeline_layout) = layouts(ctx, StepsRows::Dense);
            let constants = [("WG", wg as f64)];
            let pipeline =
                |entry: &str| compute_pipeline(ctx, &pipeline_layout, &module, entry, &constants);
            StepsPipelines {
                steps: pipeline("steps"),
                mix: pipeline("mix"),
                layout,
                pipeline_layout,
                wg,
                lanes_module: OnceLock::new(),
                lanes: Mutex::new(HashMap::new()),
                csr: Mutex::new(None),
            }
        })
    }

    /// The pipelines for sparse rows (compiled on first use).
    fn csr(&self, ctx: &GpuContext) -> Result<CsrPipelines> {
        let mut held = self.csr.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = held.as_ref() {
            return Ok(p.clone());
        }
        let p = ctx.scoped("compiling shaders/steps.wgsl + steps_csr.wgsl", || {
            let module = ctx
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("rosenblatt.steps_csr"),
                    source: wgpu::ShaderSource::Wgsl(
                        ctx.params_source(&steps_csr_source()).into_owned().into(),
                    ),
                });
            let (layout, pipeline_layout) = layouts(ctx, StepsRows::Csr);
            let constants = [("WG", self.wg as f64)];
            let pipeline =
                |entry: &str| compute_pipeline(ctx, &pipeline_layout, &module, entry, &constants);
            CsrPipelines {
                steps: pipeline("steps"),
                mix: pipeline("mix"),
                layout,
            }
        })?;
        *held = Some(p.clone());
        Ok(p)
    }

    /// The `steps` pipeline by lanes for `shape` (compiled once per shape).
    fn lanes(&self, ctx: &GpuContext, shape: LanesShape) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self
            .lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&shape)
        {
            return Ok(p.clone());
        }
        if !ctx.features.contains(wgpu::Features::SUBGROUP) {
            return Err(Error::Gpu(format!(
                "{} has no subgroup operations",
                ctx.describe()
            )));
        }
        let what = format!("compiling shaders/steps.wgsl + steps_subgroup.wgsl for {shape:?}");
        let p = ctx.scoped(&what, || {
            let module = self.lanes_module.get_or_init(|| {
                ctx.device
                    .create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some("rosenblatt.steps_subgroup"),
                        source: wgpu::ShaderSource::Wgsl(
                            ctx.params_source(&steps_source(LaneSums::Subgroups))
                                .into_owned()
                                .into(),
                        ),
                    })
            });
            let constants = shape.constants();
            compute_pipeline(ctx, &self.pipeline_layout, module, "steps", &constants)
        })?;
        self.lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(shape, p.clone());
        Ok(p)
    }
}

fn compute_pipeline(
    ctx: &GpuContext,
    layout: &wgpu::PipelineLayout,
    module: &wgpu::ShaderModule,
    entry: &str,
    constants: &[(&str, f64)],
) -> wgpu::ComputePipeline {
    ctx.device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(layout),
            module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants,
                ..Default::default()
            },
            cache: None,
        })
}

/// Rows resident on the GPU for a stepped online run.
pub struct GpuSteps<'c> {
    ctx: &'c GpuContext,
    setup: StepsSetup,
    n: usize,
    len: usize,
    order: wgpu::Buffer,
    w: wgpu::Buffer,
    sums: wgpu::Buffer,
    stat: wgpu::Buffer,
    staging: wgpu::Buffer,
    bind: wgpu::BindGroup,
    /// The `steps` pipeline this run dispatches (by lanes where planned), the shape, and
    /// `mix` for the rows' form.
    steps_pipe: wgpu::ComputePipeline,
    mix_pipe: wgpu::ComputePipeline,
    wg: u32,
    lanes: Option<LanesShape>,
    /// The rows are sparse (by threads, lazily kept sums).
    sparse: bool,
    /// Whether the last epoch's streams all ran by lanes (the shader says).
    ran_by_lanes: bool,
    /// Each stream's steps so far (kept on the device too).
    steps: Vec<u64>,
    /// Dispatches of `steps` an epoch takes (each stream's steps in runs of `max_steps`).
    dispatches: usize,
}

/// Steps a stream takes in one dispatch: all of them on a hardware adapter; on a software
/// adapter few enough that no invocation runs more than about 45,000 loop iterations
/// (Mesa's llvmpipe and lavapipe end every loop, silently, once an invocation has run 65,535
/// in all: gallivm's loop limiter, see `plan::software_steps`). By threads a step costs a
/// thread its dot products (`row` + 1 terms each, `row` the longest row's stored values:
/// d for dense rows), the rule (2K a row) and its columns' updates (B (K + 1) + K each;
/// sparse rows: a row at a time, ceil((row + 1) / wg) (K + 1) + 1 each); by lanes its loads,
/// partial sums and updates (2 U + 2 U K + K + 8 per row, rows in chunks of 16, twice where a
/// step has more than 16) and the rule (K S + 3 K a row, S subgroups of at least 4 lanes).
/// At least one step; below 2^31 / B, so that positions stay within u32.
fn max_steps(
    ctx: &GpuContext,
    st: &StepsSetup,
    (row, sparse): (usize, bool),
    wg: u32,
    lanes: Option<LanesShape>,
) -> usize {
    let cap = (1usize << 31) / st.step_rows.max(1);
    if ctx.info.device_type != wgpu::DeviceType::Cpu {
        return cap;
    }
    let (wg, b, k) = (wg.max(1) as usize, st.step_rows, st.heads);
    let cost = match lanes {
        None => {
            let updates = match sparse {
                false => (row + 1).div_ceil(wg) * (b * (k + 1) + k),
                true => b * ((row + 1).div_ceil(wg) * (k + 1) + 1),
            };
            (b * k).div_ceil(wg) * (row + 1) + b.div_ceil(wg) * 2 * k + updates
        }
        Some(l) => {
            let u = l.u as usize;
            let chunks = b.div_ceil(16) * 16 * if b > 16 { 2 } else { 1 };
            chunks * (2 * u + 2 * u * k + k + 8) + b.div_ceil(wg) * (k * wg / 4 + 3 * k) + 2 * u * k
        }
    } + 4;
    // AROW reads and writes the confidences beside the weights.
    let cost = cost * if st.update.keeps_confidence() { 2 } else { 1 };
    (45_000 / cost).clamp(1, cap)
}

/// X's buffers bound at 1, 7, 8 and 9, the pipelines that read them, the longest row's
/// stored values and the threads a stream (for `max_steps`).
struct BoundX {
    buffers: [wgpu::Buffer; 4],
    part_rows: usize,
    steps: wgpu::ComputePipeline,
    mix: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    lanes: Option<LanesShape>,
    wg: u32,
    row: usize,
}

impl<'c> GpuSteps<'c> {
    /// Uploads `rows` (features, labels with the rows' weights) and the starting weights to
    /// every stream; X goes in bindings of at most `max_binding` bytes (default: the device's
    /// limit): dense rows in up to four, sparse rows' values, columns and row starts in one
    /// each.
    /// `subgroups`: `None` by lanes where the device has subgroups and the shape fits (dense
    /// rows), `Some(false)` by threads, `Some(true)` by lanes or an error.
    pub fn new(
        ctx: &'c GpuContext,
        pipes: &'c StepsPipelines,
        max_binding: Option<u64>,
        subgroups: Option<bool>,
        rows: StepRows<'_>,
        setup: StepsSetup,
    ) -> Result<Self> {
        setup.check_gpu(rows.d)?;
        rows.check()?;
        let StepRows {
            x,
            y,
            weights,
            d,
            bias,
        } = rows;
        let n = y.len();
        let len = setup.w0.len();
        let s = setup.streams;
        let limit = super::plan::binding_limit(&ctx.limits, max_binding);
        let wb = (s as u64) * (len as u64) * 4;
        // Labels: with the passive-aggressive rule 4 words a row, with row weights 3.
        let sq = setup.update.needs_sq_norms();
        let y_words: u64 = match (sq, rows.weights) {
            (true, _) => 4,
            (false, Some(_)) => 3,
            (false, None) => 1,
        };
        let groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        if wb > limit
            || n >= 1 << 31
            || (n as u64) * y_words * 4 > limit
            || s > groups
            || len.div_ceil(pipes.wg as usize) > groups
        {
            return Err(Error::TooLarge(format!(
                "a stepped run binds {n} rows' labels and {s} streams' weights of {len} \
                 ({wb} bytes) in one binding each; the GPU binds at most {limit} bytes a \
                 binding and runs {groups} workgroups a dispatch"
            )));
        }
        let bound = match x {
            StepX::Dense(x) => Self::dense_x(ctx, pipes, (limit, subgroups), x, (n, d), &setup)?,
            StepX::Csr {
                indptr,
                indices,
                values,
            } => {
                if subgroups == Some(true) {
                    return Err(Error::Gpu(
                        "sparse rows' steps run by the workgroup's threads, not by lanes".into(),
                    ));
                }
                let (a, b) = (indptr[0], indptr[n]);
                let nnz = b - a;
                let bytes = (nnz as u64) * 4;
                if bytes > limit || nnz >= 1 << 31 || (n as u64 + 1) * 4 > limit {
                    return Err(Error::TooLarge(format!(
                        "a stepped run binds sparse rows' {nnz} values ({bytes} bytes) in one \
                         binding; the GPU binds at most {limit} bytes a binding"
                    )));
                }
                let p = pipes.csr(ctx)?;
                let starts: Vec<u32> = indptr.iter().map(|&i| (i - a) as u32).collect();
                let st = wgpu::BufferUsages::STORAGE;
                let last_bytes = if setup.average { s * len * 4 } else { 4 };
                let buffers =
                    ctx.scoped("uploading the stepped perceptron's sparse rows", || {
                        [
                            init_buf(ctx, "rosenblatt.steps_xv", nonempty(&values[a..b]), st),
                            init_buf(ctx, "rosenblatt.steps_xj", nonempty(&indices[a..b]), st),
                            init_buf(ctx, "rosenblatt.steps_xp", nonempty(&starts), st),
                            storage_buf(ctx, "rosenblatt.steps_last", last_bytes as u64),
                        ]
                    })?;
                BoundX {
                    buffers,
                    part_rows: n.max(1),
                    steps: p.steps,
                    mix: p.mix,
                    layout: p.layout,
                    lanes: None,
                    wg: pipes.wg,
                    row: indptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
                }
            }
        };
        let sp = StepParams {
            n: n as u32,
            d: d as u32,
            heads: setup.heads as u32,
            rule: setup.rule.code(),
            streams: s as u32,
            step_rows: setup.step_rows as u32,
            average: setup.average as u32,
            part_rows: bound.part_rows.max(1) as u32,
            tau: setup.tau,
            eta: setup.eta,
            bias,
            max_steps: max_steps(
                ctx,
                &setup,
                (bound.row, matches!(x, StepX::Csr { .. })),
                bound.wg,
                bound.lanes,
            ) as u32,
            weighted: match (sq, weights) {
                (true, _) => 2,
                (false, Some(_)) => 1,
                (false, None) => 0,
            },
            update: setup.update.code().0,
            update_c: setup.update.code().1,
            _pad2: 0,
        };
        // Labels, or with row weights (label, weight, weight in the own head) a row, and for
        // the passive-aggressive rule the row's squared norm after them.
        let weight = |i: usize| weights.map_or(RowWeight::ONE, |w| w[i]);
        let labels: Vec<f32> = match sp.weighted {
            0 => y.to_vec(),
            1 => (0..n)
                .flat_map(|i| [y[i], weight(i).row, weight(i).own])
                .collect(),
            _ => {
                let sq = rows.sq_norms();
                (0..n)
                    .flat_map(|i| [y[i], weight(i).row, weight(i).own, sq[i]])
                    .collect()
            }
        };
        let st = wgpu::BufferUsages::STORAGE;
        ctx.scoped("uploading the stepped perceptron's rows", || {
            let params = init_buf(
                ctx,
                "rosenblatt.step_params",
                bytemuck::bytes_of(&sp),
                ctx.params_usage(),
            );
            let ybuf = init_buf(ctx, "rosenblatt.steps_y", nonempty(&labels), st);
            let order = storage_buf(ctx, "rosenblatt.steps_order", (n.max(1) * 4) as u64);
            let w = init_buf(
                ctx,
                "rosenblatt.steps_w",
                bytemuck::cast_slice(&setup.w0.repeat(s)),
                st | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            );
            // The sums of the weights (averaging, from 0), or AROW's confidences (from 1).
            let sums = match setup.update.keeps_confidence() {
                true => init_buf(
                    ctx,
                    "rosenblatt.steps_confidence",
                    bytemuck::cast_slice(&vec![1f32; s * len]),
                    st,
                ),
                false => storage_buf(
                    ctx,
                    "rosenblatt.steps_sums",
                    if setup.average { wb } else { 4 },
                ),
            };
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
            let [x0, x7, x8, x9] = &bound.buffers;
            let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("rosenblatt.steps"),
                layout: &bound.layout,
                entries: &[
                    entire(0, &params),
                    entire(1, x0),
                    entire(2, &ybuf),
                    entire(3, &order),
                    entire(4, &w),
                    entire(5, &sums),
                    entire(6, &stat),
                    entire(7, x7),
                    entire(8, x8),
                    entire(9, x9),
                ],
            });
            GpuSteps {
                ctx,
                n,
                len,
                order,
                w,
                sums,
                stat,
                staging,
                bind,
                steps_pipe: bound.steps,
                mix_pipe: bound.mix,
                wg: pipes.wg,
                lanes: bound.lanes,
                sparse: matches!(x, StepX::Csr { .. }),
                ran_by_lanes: false,
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

    /// Dense X (`n` rows of `d`) in at most `X_PARTS` bindings of `part_rows` rows each, and
    /// the `steps` pipeline by lanes or by threads.
    fn dense_x(
        ctx: &GpuContext,
        pipes: &StepsPipelines,
        (limit, subgroups): (u64, Option<bool>),
        x: &[f32],
        (n, d): (usize, usize),
        setup: &StepsSetup,
    ) -> Result<BoundX> {
        let xb = (x.len() as u64) * 4;
        let part_rows = (limit / ((d.max(1) as u64) * 4)).min(u32::MAX as u64) as usize;
        let parts = match part_rows {
            0 => usize::MAX,
            p => n.div_ceil(p).max(1),
        };
        if parts > X_PARTS {
            return Err(Error::TooLarge(format!(
                "a stepped run binds X ({xb} bytes) in at most {X_PARTS} bindings; the GPU \
                 binds at most {limit} bytes a binding"
            )));
        }
        let has_subgroups = ctx.features.contains(wgpu::Features::SUBGROUP);
        // AROW's confidences live in storage: its steps go by the workgroup's threads.
        let arow = setup.update.keeps_confidence();
        let lanes = match subgroups {
            Some(false) => None,
            _ if arow => None,
            _ if !has_subgroups && subgroups.is_none() => None,
            _ => LanesShape::plan(
                d,
                setup.heads,
                setup.step_rows,
                ctx.info.subgroup_min_size,
                &ctx.limits,
            ),
        };
        if subgroups == Some(true) && arow {
            return Err(Error::Gpu(
                "AROW's steps run by the workgroup's threads, not by lanes".into(),
            ));
        }
        if subgroups == Some(true) && lanes.is_none() {
            return Err(Error::Gpu(format!(
                "steps of {} rows, {} heads and {d} features do not fit subgroup lanes on {}",
                setup.step_rows,
                setup.heads,
                ctx.describe()
            )));
        }
        let (steps, wg) = match lanes {
            Some(l) => (pipes.lanes(ctx, l)?, l.wg),
            None => (pipes.steps.clone(), pipes.wg),
        };
        let st = wgpu::BufferUsages::STORAGE;
        let buffers = ctx.scoped("uploading the stepped perceptron's rows", || {
            let at = |p: usize| (p * part_rows * d).min(x.len());
            let part = |p: usize| {
                init_buf(
                    ctx,
                    "rosenblatt.steps_x",
                    nonempty(&x[at(p)..at(p + 1)]),
                    st,
                )
            };
            // Bindings past X's parts hold its first.
            let first = part(0);
            let [b1, b2, b3] = [1, 2, 3].map(|p| if p < parts { part(p) } else { first.clone() });
            [first, b1, b2, b3]
        })?;
        Ok(BoundX {
            buffers,
            part_rows,
            steps,
            mix: pipes.mix.clone(),
            layout: pipes.layout.clone(),
            lanes,
            wg,
            row: d,
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
fn nonempty<T: bytemuck::Pod>(v: &[T]) -> &[u8] {
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
                &self.mix_pipe,
                self.len.div_ceil(self.wg as usize),
            );
            let runs =
                std::iter::repeat_n(("rosenblatt.steps", &self.steps_pipe, s), self.dispatches);
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
        self.ran_by_lanes = !got.is_empty() && got.iter().all(|g| g.lanes != 0);
        ctx.ran(match (self.sparse, self.ran_by_lanes) {
            (true, _) => GpuPath::SteppedSparse,
            (false, true) => GpuPath::SteppedLanes,
            (false, false) => GpuPath::SteppedThreads,
        });
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

    fn set_weights(&mut self, w: &[f32]) -> Result<()> {
        crate::steps::check_len(w, self.len)?;
        let all = w.repeat(self.setup.streams);
        let ctx = self.ctx;
        ctx.scoped("writing the stepped perceptron's weights", || {
            ctx.queue
                .write_buffer(&self.w, 0, bytemuck::cast_slice(&all));
        })
    }

    fn plan(&self) -> String {
        if self.sparse {
            return "by the workgroup's threads, sparse rows' updates a row at a time".into();
        }
        match (self.lanes, self.ran_by_lanes) {
            (Some(l), true) => format!(
                "by subgroup lanes: {} threads a stream, {} columns of {} heads a thread in \
                 registers",
                l.wg, l.u, l.heads
            ),
            (Some(_), false) => {
                "by the workgroup's threads (its subgroups did not allow lanes)".into()
            }
            (None, _) => "by the workgroup's threads, the weights in memory".into(),
        }
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
