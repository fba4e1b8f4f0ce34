//! A data set made resident on the GPU: X split by rows into segments that each fit one
//! storage binding (dense rows padded to whole units of 4 values), y and a per-row output per
//! segment, and the shared buffers of the batch epoch. Everything is allocated once; an epoch
//! only dispatches. Epochs go 64 to a submit with two submits in flight, each with its own
//! read-back buffer (the per-epoch stats, the control word and w), so the host reads one
//! while the GPU runs the next. Building one is three steps: the plan (plan.rs), the
//! segments' layout ([`SegMeta`]), then the buffers and bind groups.

use std::collections::VecDeque;

use super::batch::{BatchPipelines, Entry, Shape, KT_MAX};
use super::context::GpuContext;
use super::mirror::{
    flags, Control, EpochOut, Params, Segment, WgStat, FLAG_HELD_OUT, FLAG_WEIGHTS, ROLE_HELD_OUT,
    ROLE_TRAIN, STOP_CONVERGED, STOP_PATIENCE, STOP_TOLERANCE,
};
use super::plan::{
    binding_limit, device_workgroups, fold, padded, plan, plan_sparse, rows_per_step, segment_grid,
    software_steps, sparse_segments, Plan, PlanOptions, GL_KT_CAP,
};
use crate::backend::{
    winnow_weights, BatchRule, CsrView, DataView, EpochStats, Epochs, Extras, Features, Matrix,
    MatrixBuf, Pocket, Reduce, StopReason, StopState, Storage, Update, TRAFFIC_CATEGORIES,
};
use crate::error::{Error, Result};

/// Bytes of the control word.
pub(super) const CTL: usize = size_of::<Control>();

/// Submits in flight at once while training (each with its own read-back buffer).
const IN_FLIGHT: usize = 2;

/// Submits per call to [`Resident::batch_epochs`] that the host asks for (the caller reports
/// progress between calls).
const SUBMITS_PER_CALL: usize = 4;

/// Words of the traffic counters: [entry][category][load, store] as (low, high) pairs.
pub(super) const COUNTER_WORDS: usize = Entry::ALL.len() * TRAFFIC_CATEGORIES.len() * 2 * 2;

/// One segment of X on the device.
pub(super) struct SegBuf {
    pub(super) n: usize,
    pub(super) held_out: bool,
    /// Partials this segment's training kernels write.
    pub(super) chunks: usize,
    /// Workgroups of `epoch`/`scores` (register pass) or of `margins`/`scores`.
    pub(super) wgs: usize,
    /// A sparse training segment: `margins` then `gather` (its one partial).
    pub(super) gather: bool,
    coef: wgpu::Buffer,
    pub(super) bind: wgpu::BindGroup,
}

/// Where a segment's rows go, before any buffer exists.
struct SegMeta {
    role: u32,
    start: usize,
    n: usize,
    /// Partials it writes, and the first of them.
    chunks: usize,
    chunk_base: usize,
    /// Workgroups of its row kernels, and the first of their `wg_stats` entries.
    wgs: usize,
    wg_base: usize,
    /// Rows per workgroup (register pass) or per `accumulate` chunk.
    chunk_rows: usize,
}

/// Rows to make resident: the features, and for training the labels, the per-row weights and
/// the held-out rows with their labels.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// The (training) rows.
    pub data: DataView<'a>,
    /// Their labels, for training.
    pub y: Option<&'a [f32]>,
    /// Their weights, when not all 1.
    pub sw: Option<&'a [f32]>,
    /// Held-out rows and their labels.
    pub held: Option<(DataView<'a>, &'a [f32])>,
}

/// One segment of streamed X on the host: its values (the caller's bytes: dense rows of
/// `d` values, padded on upload) and, for CSR rows, the arrays `segment_arrays` makes (row
/// starts with columns, the column-major copy).
struct StreamSeg<'c> {
    x: &'c [u8],
    dense_rows: Option<usize>,
    csr: Vec<u32>,
    csc: Vec<u32>,
}

/// A device slot of streamed X: one buffer per array of a segment.
struct Slot {
    x: wgpu::Buffer,
    csr: wgpu::Buffer,
    csc: wgpu::Buffer,
}

/// The buffers every segment's kernels share (bind group 0).
pub(super) struct Shared {
    pub(super) params_buf: wgpu::Buffer,
    pub(super) w_buf: wgpu::Buffer,
    pub(super) ctl_buf: wgpu::Buffer,
    pub(super) partials: wgpu::Buffer,
    pub(super) wg_stats: wgpu::Buffer,
    pub(super) counters: wgpu::Buffer,
    pub(super) stats_buf: wgpu::Buffer,
    pub(super) aux: wgpu::Buffer,
    pub(super) global: wgpu::BindGroup,
}

/// A submit of training epochs in flight: its read-back buffer and the epochs it covers.
struct InFlight {
    slot: usize,
    first: usize,
    epochs: usize,
    index: wgpu::SubmissionIndex,
    mapped: std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// Data and buffers on the GPU for repeated epochs or scoring.
pub struct Resident<'c> {
    pub(super) ctx: &'c GpuContext,
    pub(super) batch: &'c BatchPipelines,
    /// Streamed X: each segment's arrays on the host, uploaded into slot (segment % 2) before
    /// its kernels run; `None`: X is resident.
    stream: Option<Vec<StreamSeg<'c>>>,
    slots: Option<[Slot; 2]>,
    pub(super) d: usize,
    n: usize,
    storage: Storage,
    /// 32-bit words of X as the device stores it (dense rows padded; CSR: the values).
    pub(super) x_words: u64,
    pub(super) plan: Plan,
    pub(super) params: Params,
    pub(super) shared: Shared,
    pub(super) heads: usize,
    /// Read-back buffers of the submits in flight: control, the epochs' stats, w.
    readbacks: [wgpu::Buffer; IN_FLIGHT],
    /// The data's own `Params::flags` bits (weights, held-out rows).
    data_flags: u32,
    kept_pocket: bool,
    kept_average: bool,
    pub(super) segs: Vec<SegBuf>,
    epochs_per_submit: usize,
    submits: usize,
    fail_after_submits: Option<usize>,
    /// In a data-parallel run: the sums across processes (see [`Resident::reduce_with`]), and
    /// the read-back buffer of the partials and counts.
    reduce: Option<&'c dyn Reduce>,
    reduce_staging: Option<wgpu::Buffer>,
    /// A failure after some of a call's epochs had completed: that call returned them, and
    /// the next use of the data returns this.
    failed: Option<Error>,
}

pub(crate) fn storage_buf(ctx: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16).next_multiple_of(16),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// A buffer holding `data`, zero-padded to a multiple of 16 bytes (at least 16: wgpu binds
/// no empty buffer, and X is also bound as vec4 words).
pub(crate) fn init_buf(
    ctx: &GpuContext,
    label: &str,
    data: &[u8],
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    filled_buf(ctx, label, data.len(), usage, |view| {
        view.slice(..data.len()).copy_from_slice(data)
    })
}

/// A mapped-at-creation buffer of `len` bytes (rounded up to 16; zeros) written by `fill`.
fn filled_buf(
    ctx: &GpuContext,
    label: &str,
    len: usize,
    usage: wgpu::BufferUsages,
    fill: impl FnOnce(&mut wgpu::BufferViewMut),
) -> wgpu::Buffer {
    let size = (len as u64).max(16).next_multiple_of(16);
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: true,
    });
    if len > 0 {
        // (A buffer mapped at creation always maps.)
        if let Ok(mut view) = buf.get_mapped_range_mut(..) {
            fill(&mut view);
        }
    }
    buf.unmap();
    buf
}

pub(crate) fn entire(binding: u32, b: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: b.as_entire_binding(),
    }
}

/// Options that shape the GPU work.
#[derive(Debug, Clone, Default)]
pub struct ResidentOptions {
    /// Override of the storage-binding limit, to exercise the split path in tests.
    pub max_binding: Option<u64>,
    /// Epochs per submit (default 64).
    pub epochs_per_submit: Option<usize>,
    /// Test hook: destroy the device after this many training submits, so the next one fails
    /// as a lost device would.
    pub fail_after_submits: Option<usize>,
    /// Dense rows take the two-kernel path (`margins` + `accumulate`, X read twice) even
    /// where the register pass fits; tests hold both paths to the reference.
    pub two_kernels: bool,
    /// Workgroups of the register pass's persistent grid per segment. `None`: a few per
    /// compute unit ([`device_workgroups`]), fewer where the partial sums would take more
    /// than 2% of one read of X; tests vary it to show that results do not depend on it.
    pub workgroups: Option<usize>,
    /// Most heads one thread of the register pass holds (default: 12, and 1 on OpenGL, where
    /// Mesa compiles several heads per thread slowly; see plan::GL_KT_CAP). Tests set 1 to
    /// run the head blocks' shared rows on every adapter.
    pub heads_per_thread: Option<u32>,
    /// Test hook: the most steps of rows a workgroup of the register pass runs on a software
    /// adapter (default [`software_steps`]; tests measure Mesa's loop limit with it).
    pub software_steps: Option<usize>,
    /// Lane sums by subgroup operations: `None` on a GPU that has them (software adapters
    /// run the workgroup tree, faster there), `Some(false)` never, `Some(true)` always (an
    /// error without them).
    pub subgroups: Option<bool>,
    /// Most bytes of X to keep on the device: when X (training and held-out rows) is larger,
    /// it streams: two segment slots on the device, each segment uploaded into one while the
    /// other's kernels run, every epoch. `None`: X is resident (it must fit the device).
    pub gpu_memory: Option<u64>,
}

/// The rows of `x` to upload: the caller's, or f32 copies where training and held-out rows
/// differ in storage or form (the rare case; streaming refuses it).
struct Prepared<'a> {
    x: Matrix<'a>,
    held_x: Option<Matrix<'a>>,
    mismatch: bool,
}

fn prepare<'a>(
    rows: Rows<'a>,
    train_vals: &'a mut Option<Vec<f32>>,
    held_own: &'a mut Option<MatrixBuf>,
) -> Result<Prepared<'a>> {
    let DataView { x, d, .. } = rows.data;
    let held_in = rows.held.map(|(h, _)| h);
    let mismatch =
        held_in.is_some_and(|h| h.x.storage() != x.storage() || h.x.is_sparse() != x.is_sparse());
    if !mismatch {
        return Ok(Prepared {
            x,
            held_x: held_in.map(|h| h.x),
            mismatch,
        });
    }
    // The training rows are widened to f32 for the held-out rows' sake: within the memory
    // budget (a memory-mapped compact X can be larger than memory).
    crate::backend::check_widened(rows.data)?;
    let h = held_in.expect("a mismatch has held-out rows");
    *train_vals = Some(values_of(x).to_f32().into_owned());
    *held_own = Some(if x.is_sparse() {
        MatrixBuf::Csr(h.x.to_csr(h.n, d))
    } else {
        MatrixBuf::Dense(h.x.to_dense(h.n, d).into_owned())
    });
    let (train_vals, held_own): (&'a Option<Vec<f32>>, &'a Option<MatrixBuf>) =
        (train_vals, held_own);
    Ok(Prepared {
        x: with_values(x, Features::F32(train_vals.as_deref().unwrap_or(&[]))),
        held_x: held_own.as_ref().map(|m| m.view()),
        mismatch,
    })
}

impl<'c> Resident<'c> {
    /// Uploads `rows`: the features and, for training, the labels, weights and held-out rows.
    pub fn new(
        ctx: &'c GpuContext,
        batch: &'c BatchPipelines,
        rows: Rows<'c>,
        heads: usize,
        opts: &ResidentOptions,
    ) -> Result<Self> {
        let DataView { n, d, bias, .. } = rows.data;
        let heads = heads.max(1);
        if n == 0 || d == 0 {
            return Err(Error::Gpu(
                "the GPU backend needs at least one row and one feature".into(),
            ));
        }
        let labels = rows.y.into_iter().chain(rows.held.map(|(_, y)| y));
        if let Some(v) = labels
            .flatten()
            .find(|&&v| v != v.round() || !(-1.0..64.0).contains(&v))
        {
            return Err(Error::Gpu(format!(
                "label {v}: the GPU takes -1, +1 or a class index below 64"
            )));
        }
        let (mut train_vals, mut held_own) = (None, None);
        let prep = prepare(rows, &mut train_vals, &mut held_own)?;
        let (x, held_x) = (prep.x, prep.held_x);
        let held_n = rows.held.map_or(0, |(h, _)| h.n);
        let storage = x.storage();
        let sparse = x.is_sparse();
        let training = rows.y.is_some();
        // X larger than the device memory it may take streams through two segment slots.
        let x_total = x.bytes(n, d) + held_x.map_or(0, |h| h.bytes(held_n, d));
        let streamed = opts.gpu_memory.is_some_and(|b| x_total > b);
        if streamed && prep.mismatch {
            return Err(Error::TooLarge(format!(
                "X ({x_total} bytes) is more than the GPU memory allowed, and streaming takes \
                 training and held-out rows in one storage and form only"
            )));
        }
        let budget = opts.gpu_memory.unwrap_or(0);
        let sizes = Sizes {
            x,
            held_x,
            n,
            held_n,
            d,
            heads,
        };
        let mut plan = make_plan(ctx, sizes, opts)?;
        if ctx.info.device_type == wgpu::DeviceType::Cpu {
            plan.max_steps = Some(opts.software_steps.unwrap_or(software_steps(heads)));
        }
        if streamed && !sparse {
            let row_bytes = (padded(d) * storage.bytes()) as u64;
            plan.seg_rows = plan
                .seg_rows
                .min(((budget / 2 / row_bytes.max(1)) as usize).max(1));
        }
        // Subgroup lane sums on GPUs that have them; software adapters run the tree, which is
        // faster there (lavapipe, 65,536 x 64: 77 ms an epoch against 112).
        let subgroups = match opts.subgroups {
            Some(s) => s,
            None => {
                ctx.features.contains(wgpu::Features::SUBGROUP)
                    && ctx.info.device_type != wgpu::DeviceType::Cpu
            }
        };
        plan.shape.subgroups = subgroups && plan.register_pass();
        // Every pipeline the plan uses is built now, so that a shape the device refuses is an
        // error at bind time.
        for e in plan_entries(&plan) {
            batch.pipeline(ctx, e, plan.shape)?;
        }
        let epochs_per_submit = opts
            .epochs_per_submit
            .unwrap_or(if streamed { 1 } else { 64 })
            .max(1);
        let binding = binding_limit(&ctx.limits, opts.max_binding);
        let seg_binding = if streamed && sparse {
            // A streamed CSR segment's three arrays (each within a third) fill half the budget.
            binding.min((budget / 6).max(4))
        } else {
            binding
        };
        let metas = layout_segments(&plan, sizes, training, seg_binding, opts)?;
        let len = heads * (d + 1);
        let total_chunks: usize = metas.iter().map(|m| m.chunks).sum();
        let total_wgs: usize = metas.iter().map(|m| m.wgs).sum();
        if sparse && training && (total_chunks * len * 4) as u64 > binding_limit(&ctx.limits, None)
        {
            return Err(Error::TooLarge(format!(
                "{total_chunks} segments of {d} features need {} bytes of partial sums, more \
                 than the GPU binds at once",
                total_chunks * len * 4
            )));
        }
        let params = Params {
            d: d as u32,
            d_aug: (d + 1) as u32,
            heads: heads as u32,
            rule: 0,
            tau: 0.0,
            flags: 0,
            bias,
            eta: 1.0,
            tol: 0.0,
            total_chunks: total_chunks as u32,
            total_wgs: total_wgs as u32,
            patience: 0,
            keep_fraction: 1.0,
            floor: 0.0,
            units: d.div_ceil(4) as u32,
            ring: (IN_FLIGHT * epochs_per_submit) as u32,
        };
        let x_bytes = x.bytes(n, d);
        ctx.scoped(
            &format!(
                "uploading {n} x {d} ({x_bytes} bytes) to {}",
                ctx.describe()
            ),
            || {
                let shared = shared_buffers(ctx, batch, &params, total_chunks, total_wgs);
                let slots = streamed.then(|| stream_slots(ctx, &metas, &plan, x, held_x, d));
                let mut stream = Vec::new();
                let segs = metas
                    .iter()
                    .enumerate()
                    .map(|(k, m)| {
                        let held_out = m.role == ROLE_HELD_OUT;
                        let src = match held_x {
                            Some(h) if held_out => h,
                            _ => x,
                        };
                        let gather = sparse && !held_out && training;
                        let (xbuf, csr, csc) = match &slots {
                            Some(s) => {
                                // The caller's rows (never converted when streaming): the
                                // arrays stay on the host and go to a slot every epoch.
                                let orig = match rows.held {
                                    Some((h, _)) if held_out => h.x,
                                    _ => rows.data.x,
                                };
                                let (xs, csr, csc) = segment_arrays(orig, m.start, m.n, d, gather);
                                stream.push(StreamSeg {
                                    x: xs.bytes(),
                                    dense_rows: (!sparse).then_some(m.n),
                                    csr,
                                    csc,
                                });
                                let s = &s[k % 2];
                                (s.x.clone(), s.csr.clone(), s.csc.clone())
                            }
                            None => {
                                let (xs, csr, csc) = segment_arrays(src, m.start, m.n, d, gather);
                                let label = format!("rosenblatt.x[{k}]");
                                let xbuf = if sparse {
                                    init_buf(ctx, &label, xs.bytes(), wgpu::BufferUsages::STORAGE)
                                } else {
                                    dense_buf(ctx, &label, xs.bytes(), m.n, d, storage)
                                };
                                let index = |what: &str, v: &[u32]| {
                                    init_buf(
                                        ctx,
                                        &format!("rosenblatt.{what}[{k}]"),
                                        bytemuck::cast_slice(v),
                                        wgpu::BufferUsages::STORAGE,
                                    )
                                };
                                (xbuf, index("csr", &csr), index("csc", &csc))
                            }
                        };
                        let (ys, ws) = match (rows.held, held_out) {
                            (Some((_, hy)), true) => (Some(hy), None),
                            _ => (rows.y, rows.sw),
                        };
                        let range = m.start..m.start + m.n;
                        segment_buffers(
                            ctx,
                            batch,
                            k,
                            m,
                            [&xbuf, &csr, &csc],
                            ys.map(|y| &y[range.clone()]),
                            ws.map(|w| &w[range.clone()]),
                            heads,
                            gather,
                        )
                    })
                    .collect();
                let readback_bytes = CTL + epochs_per_submit * size_of::<EpochOut>() + len * 4;
                let readbacks = [0, 1].map(|i| {
                    ctx.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(&format!("rosenblatt.readback[{i}]")),
                        size: readback_bytes as u64,
                        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                });
                Ok(Resident {
                    ctx,
                    batch,
                    stream: streamed.then_some(stream),
                    slots,
                    d,
                    n,
                    storage,
                    x_words: x_words(x, n, d) + held_x.map_or(0, |h| x_words(h, held_n, d)),
                    plan: plan.clone(),
                    params,
                    shared,
                    heads,
                    readbacks,
                    data_flags: if rows.sw.is_some() { FLAG_WEIGHTS } else { 0 }
                        | if rows.held.is_some() {
                            FLAG_HELD_OUT
                        } else {
                            0
                        },
                    kept_pocket: false,
                    kept_average: false,
                    segs,
                    epochs_per_submit,
                    submits: 0,
                    fail_after_submits: opts.fail_after_submits,
                    reduce: None,
                    reduce_staging: None,
                    failed: None,
                })
            },
        )?
    }

    /// Makes this one process's share of a data-parallel run: every epoch stops after the
    /// segments' kernels; the partials are read back, added on the host (in order, as
    /// `apply`), summed over the processes by `reduce` with the workgroups' counts, and
    /// written back as the only partial and the only workgroup; `apply` and `finalize` then
    /// run unchanged on the totals. One epoch a submit.
    pub fn reduce_with(&mut self, reduce: &'c dyn Reduce) {
        self.reduce = Some(reduce);
        self.epochs_per_submit = 1;
    }

    /// Epochs a caller should ask of [`Resident::batch_epochs`] at once: several submits'
    /// worth where submits are pipelined (two in flight), one submit's otherwise.
    pub fn epochs_per_call(&self) -> usize {
        if self.pipelined() {
            SUBMITS_PER_CALL * self.epochs_per_submit
        } else {
            self.epochs_per_submit
        }
    }

    /// Whether training submits overlap (resident X, one process).
    fn pipelined(&self) -> bool {
        self.stream.is_none() && self.reduce.is_none()
    }

    /// Whether this is one process of a data-parallel run.
    pub(super) fn has_reduce(&self) -> bool {
        self.reduce.is_some()
    }

    /// Whether X streams through two device slots.
    pub(super) fn is_streamed(&self) -> bool {
        self.stream.is_some()
    }

    /// Epochs recorded per submit.
    pub(super) fn epochs_per_submit_count(&self) -> usize {
        self.epochs_per_submit
    }

    /// How the epoch runs, for reports.
    pub fn describe_plan(&self) -> String {
        let s = &self.plan.shape;
        let wgs: usize = self
            .segs
            .iter()
            .filter(|g| !g.held_out)
            .map(|g| g.wgs)
            .sum();
        if self.plan.register_pass() {
            format!(
                "register pass (one read of X): {} threads per row, {} units of 4 values and \
                 {} heads per thread, {} rows per step, {} workgroup(s) over {} segment(s), \
                 lane sums by {}",
                s.tpr,
                s.v,
                s.kt,
                rows_per_step(s, self.heads),
                wgs,
                self.segs.len(),
                if s.subgroups {
                    "subgroups"
                } else {
                    "a workgroup tree"
                }
            )
        } else if s.sparse != 0 {
            "CSR rows: margins then gather (values read twice)".into()
        } else {
            format!(
                "two kernels (margins then accumulate, X read twice): the K x V registers of \
                 a row exceed the register pass's budget, or on OpenGL (one head per thread) \
                 its K thread groups a workgroup ({} heads, {} features)",
                self.heads, self.d
            )
        }
    }

    pub(super) fn encoder(&self) -> wgpu::CommandEncoder {
        self.ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rosenblatt.batch_epochs"),
            })
    }

    /// Streamed X: writes segment `k`'s arrays into its slot (dense rows padded to units).
    pub(super) fn upload(&self, k: usize) {
        let (Some(stream), Some(slots)) = (&self.stream, &self.slots) else {
            return;
        };
        let (seg, slot) = (&stream[k], &slots[k % 2]);
        let q = &self.ctx.queue;
        match seg.dense_rows {
            Some(rows) => write_dense(q, &slot.x, seg.x, rows, self.d, self.storage),
            None => {
                let len = seg.x.len().next_multiple_of(4);
                if let Some(size) = wgpu::BufferSize::new(len as u64) {
                    if let Some(mut view) = q.write_buffer_with(&slot.x, 0, size) {
                        let mut all = view.slice(..);
                        all.fill(0);
                        view.slice(..seg.x.len()).copy_from_slice(seg.x);
                    }
                }
            }
        }
        if !seg.csr.is_empty() {
            q.write_buffer(&slot.csr, 0, bytemuck::cast_slice(&seg.csr));
        }
        if !seg.csc.is_empty() {
            q.write_buffer(&slot.csc, 0, bytemuck::cast_slice(&seg.csc));
        }
    }

    pub(super) fn staging(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    pub(super) fn read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        read_back(self.ctx, staging)
    }

    /// Runs up to `k` epochs from `w`, stopping on the GPU per `rule`; updates `w` and returns
    /// the stats of the epochs run and the stop. Resident X: submits of `epochs_per_submit`
    /// epochs, two in flight (the GPU has the next while the host reads one back; a submit
    /// queued behind a stop finds `done` set and costs one load per workgroup per dispatch).
    pub fn batch_epochs(&mut self, w: &mut [f32], rule: &BatchRule, k: usize) -> Result<Epochs> {
        let mut out = Epochs::default();
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if k == 0 {
            return Ok(out);
        }
        if !self.pipelined() {
            let mut cur = w.to_vec();
            while out.stats.len() < k {
                let kk = self.epochs_per_submit.min(k - out.stats.len());
                let (stats, stop) = self.submit_sequential(&mut cur, rule, kk)?;
                out.stats.extend(stats);
                if stop.is_some() {
                    out.stop = stop;
                    break;
                }
            }
            w.copy_from_slice(&cur);
            return Ok(out);
        }
        let ctx = self.ctx;
        ctx.scoped("running batch epochs", || {
            self.upload_rule_and_weights(w, rule)
        })?;
        let mut pending: VecDeque<InFlight> = VecDeque::new();
        let mut next = 0;
        let mut last_w: Option<Vec<f32>> = None;
        let mut result = Ok(());
        loop {
            // (The lost-device test hook fires only with nothing in flight, so that the
            // epochs before it are read back, as after a real loss between two submits.)
            while next < k
                && pending.len() < IN_FLIGHT
                && (pending.is_empty() || self.fail_after_submits != Some(self.submits))
            {
                let e = self.epochs_per_submit.min(k - next);
                let slot = (self.submits) % IN_FLIGHT;
                match self.submit(rule, next, e, slot) {
                    Ok(s) => pending.push_back(s),
                    Err(err) => {
                        result = Err(err);
                        break;
                    }
                }
                next += e;
            }
            if result.is_err() {
                break;
            }
            let Some(f) = pending.pop_front() else {
                break;
            };
            match self.finish(f) {
                Ok((stats, stop, wv)) => {
                    out.stats.extend(stats);
                    last_w = Some(wv);
                    if stop.is_some() {
                        out.stop = stop;
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // Submits queued behind a stop or an error ran nothing that matters; wait for them so
        // that their read-back buffers are free.
        for f in pending.drain(..) {
            if self.wait(&f).is_ok() {
                self.readbacks[f.slot].unmap();
            }
        }
        if let Err(e) = result {
            if out.stats.is_empty() {
                return Err(e);
            }
            // The epochs read back stand (the caller keeps them as its checkpoint); the
            // failure is the answer to the next call.
            self.failed = Some(e);
        }
        if let Some(v) = last_w {
            w.copy_from_slice(&v);
        }
        Ok(out)
    }

    /// Records `epochs` epochs (the call's epochs `first`..) and their read-back into
    /// read-back slot `slot`, submits, and starts mapping the read-back.
    fn submit(
        &mut self,
        rule: &BatchRule,
        first: usize,
        epochs: usize,
        slot: usize,
    ) -> Result<InFlight> {
        if self.fail_after_submits == Some(self.submits) {
            self.ctx.device.destroy();
        }
        self.submits += 1;
        let ctx = self.ctx;
        let plan = self.epoch_dispatches();
        let rb = &self.readbacks[slot];
        let index = ctx.scoped("running batch epochs", || {
            let mut enc = self.encoder();
            self.record(&mut enc, &plan, epochs);
            self.copy_results(&mut enc, rule, rb, first, epochs);
            ctx.queue.submit([enc.finish()])
        })?;
        let (tx, rx) = std::sync::mpsc::channel();
        rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        Ok(InFlight {
            slot,
            first,
            epochs,
            index,
            mapped: rx,
        })
    }

    /// Copies the control word, the stats of epochs `first..first + epochs` (stats ring
    /// entries) and the weights (log-weights for Winnow) into `rb`.
    fn copy_results(
        &self,
        enc: &mut wgpu::CommandEncoder,
        rule: &BatchRule,
        rb: &wgpu::Buffer,
        first: usize,
        epochs: usize,
    ) {
        let sh = &self.shared;
        let w_bytes = (self.heads * (self.d + 1) * 4) as u64;
        let one = size_of::<EpochOut>() as u64;
        let at = (first % self.params.ring as usize) as u64 * one;
        let stats_bytes = epochs as u64 * one;
        enc.copy_buffer_to_buffer(&sh.ctl_buf, 0, rb, 0, CTL as u64);
        enc.copy_buffer_to_buffer(&sh.stats_buf, at, rb, CTL as u64, stats_bytes);
        let to = CTL as u64 + stats_bytes;
        if rule.update == Update::Multiplicative {
            enc.copy_buffer_to_buffer(&sh.aux, 3 * w_bytes, rb, to, w_bytes);
        } else {
            enc.copy_buffer_to_buffer(&sh.w_buf, 0, rb, to, w_bytes);
        }
    }

    /// Waits for a submit and its read-back mapping.
    fn wait(&self, f: &InFlight) -> Result<()> {
        self.ctx
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(f.index.clone()),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        f.mapped
            .recv()
            .map_err(|_| Error::Gpu("the GPU never answered the read-back".into()))?
            .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))
    }

    /// Waits for a submit and decodes its read-back: the stats of the epochs it ran, the
    /// stop, and the weights after them.
    fn finish(&self, f: InFlight) -> Result<(Vec<EpochStats>, Option<StopReason>, Vec<f32>)> {
        self.wait(&f)?;
        let rb = &self.readbacks[f.slot];
        let bytes = rb
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))
            .map(|m| m.to_vec());
        rb.unmap();
        let bytes = bytes?;
        self.ctx.check("running batch epochs")?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let run = (ctl.epoch as usize).saturating_sub(f.first).min(f.epochs);
        let stats = self.decode_stats(&bytes[CTL..], run);
        let len = self.heads * (self.d + 1);
        let at = CTL + f.epochs * size_of::<EpochOut>();
        let w: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[at..at + len * 4]);
        Ok((stats, stop_of(&ctl), w))
    }

    fn decode_stats(&self, bytes: &[u8], run: usize) -> Vec<EpochStats> {
        let held = self.data_flags & FLAG_HELD_OUT != 0;
        let weighted = self.data_flags & FLAG_WEIGHTS != 0;
        (0..run)
            .map(|e| {
                let at = e * size_of::<EpochOut>();
                let o: EpochOut =
                    bytemuck::pod_read_unaligned(&bytes[at..at + size_of::<EpochOut>()]);
                EpochStats {
                    mistakes: o.mistakes as u64,
                    criterion: o.criterion as f64,
                    update_norm: o.update_norm as f64,
                    val_mistakes: held.then_some(o.held_out as u64),
                    weighted: weighted.then_some(o.weighted as f64),
                }
            })
            .collect()
    }

    /// Writes the rule's parameters, the weights (for a multiplicative update: the log-weights
    /// and the Winnow weights) and a fresh per-call control word.
    pub(super) fn upload_rule_and_weights(&mut self, w: &[f32], rule: &BatchRule) {
        let ctx = self.ctx;
        self.kept_pocket |= rule.keep.pocket();
        self.kept_average |= rule.keep.average();
        self.params.eta = rule.eta;
        self.params.tol = rule.tol;
        self.params.tau = rule.tau;
        self.params.rule = rule.rule.code();
        self.params.flags = flags(rule) | self.data_flags;
        self.params.patience = rule.patience.epochs;
        self.params.keep_fraction = rule.patience.keep_fraction;
        self.params.floor = rule.patience.floor;
        let sh = &self.shared;
        ctx.queue
            .write_buffer(&sh.params_buf, 0, bytemuck::bytes_of(&self.params));
        if rule.update == Update::Multiplicative {
            // w holds log-weights: they go to aux[3 len..], the weights used to w_buf.
            let mut beta = vec![0f32; w.len()];
            winnow_weights(w, &mut beta);
            ctx.queue
                .write_buffer(&sh.w_buf, 0, bytemuck::cast_slice(&beta));
            let w_bytes = (w.len() * 4) as u64;
            ctx.queue
                .write_buffer(&sh.aux, 3 * w_bytes, bytemuck::cast_slice(w));
        } else {
            ctx.queue
                .write_buffer(&sh.w_buf, 0, bytemuck::cast_slice(w));
        }
        ctx.queue
            .write_buffer(&sh.ctl_buf, 0, bytemuck::cast_slice(&[0u32, 0u32]));
    }

    /// The dispatches of one epoch, in order: (entry, segment or none, grid).
    pub(super) fn epoch_dispatches(&self) -> Vec<(Entry, Option<usize>, (u32, u32))> {
        let len = self.heads * (self.d + 1);
        let shape = &self.plan.shape;
        let tiles = len.div_ceil(shape.tc as usize) as u32;
        let per_dim = self.ctx.limits.max_compute_workgroups_per_dimension as usize;
        let mut out = Vec::new();
        for (k, seg) in self.segs.iter().enumerate() {
            if self.plan.register_pass() {
                out.push((Entry::Epoch, Some(k), (seg.wgs as u32, 1)));
                continue;
            }
            out.push((Entry::Margins, Some(k), (seg.wgs as u32, 1)));
            if seg.gather {
                let wgs = len.div_ceil((shape.wg / shape.tpc) as usize);
                out.push((Entry::Gather, Some(k), fold(wgs, per_dim)));
            } else if !seg.held_out {
                out.push((Entry::Accumulate, Some(k), (tiles, seg.chunks as u32)));
            }
        }
        out.push((Entry::Apply, None, fold(len.div_ceil(32), per_dim)));
        out.push((Entry::Finalize, None, (1, 1)));
        out
    }

    /// Records `k` epochs of the dispatches `plan` with pipelines of `shape` into `enc`.
    /// Streamed X: before a segment's first kernel, what is recorded goes to the queue and the
    /// segment's rows to its slot (the other slot's segment may still be running); the queue
    /// keeps them in order.
    pub(super) fn record_with(
        &self,
        enc: &mut wgpu::CommandEncoder,
        plan: &[(Entry, Option<usize>, (u32, u32))],
        k: usize,
        shape: Shape,
    ) -> Result<()> {
        let pipes: Vec<wgpu::ComputePipeline> = plan
            .iter()
            .map(|&(e, _, _)| self.batch.pipeline(self.ctx, e, shape))
            .collect::<Result<_>>()?;
        let global = &self.shared.global;
        if self.stream.is_none() {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("rosenblatt.batch_epochs"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, global, &[]);
            if let Some(first) = self.segs.first() {
                // Entries without a segment still need one bound (a plan may start with them).
                pass.set_bind_group(1, &first.bind, &[]);
            }
            for _ in 0..k {
                for (&(_, seg, grid), pipe) in plan.iter().zip(&pipes) {
                    if let Some(s) = seg {
                        pass.set_bind_group(1, &self.segs[s].bind, &[]);
                    }
                    pass.set_pipeline(pipe);
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            return Ok(());
        }
        for _ in 0..k {
            let mut last = None;
            for (&(_, seg, grid), pipe) in plan.iter().zip(&pipes) {
                if let Some(s) = seg.filter(|&s| last != Some(s)) {
                    let done = std::mem::replace(enc, self.encoder());
                    self.ctx.queue.submit([done.finish()]);
                    self.upload(s);
                    last = Some(s);
                }
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rosenblatt.batch_epochs"),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, global, &[]);
                pass.set_bind_group(1, &self.segs[seg.or(last).unwrap_or(0)].bind, &[]);
                pass.set_pipeline(pipe);
                pass.dispatch_workgroups(grid.0, grid.1, 1);
            }
        }
        Ok(())
    }

    fn record(
        &self,
        enc: &mut wgpu::CommandEncoder,
        plan: &[(Entry, Option<usize>, (u32, u32))],
        k: usize,
    ) {
        // Every pipeline of the plan was built at bind time: this cannot fail.
        let _ = self.record_with(enc, plan, k, self.plan.shape);
    }

    /// `k` epochs in one submit, waited for (streamed X; or one process of a data-parallel
    /// run, one epoch that stops after the segments' kernels for the sums over processes).
    fn submit_sequential(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        k: usize,
    ) -> Result<(Vec<EpochStats>, Option<StopReason>)> {
        if self.fail_after_submits == Some(self.submits) {
            self.ctx.device.destroy();
        }
        self.submits += 1;
        let ctx = self.ctx;
        let plan = self.epoch_dispatches();
        let (local, global) = match self.reduce {
            Some(_) => plan.split_at(plan.iter().position(|p| p.1.is_none()).unwrap_or(0)),
            None => (&plan[..], &[][..]),
        };
        let mut enc = ctx.scoped("running batch epochs", || {
            self.upload_rule_and_weights(w, rule);
            let mut enc = self.encoder();
            self.record(&mut enc, local, k);
            enc
        })?;
        if let Some(r) = self.reduce {
            self.reduce_epoch(enc, r)?;
            enc = ctx.scoped("running batch epochs", || {
                let mut enc = self.encoder();
                self.record(&mut enc, global, k);
                enc
            })?;
        }
        let rb = &self.readbacks[0];
        ctx.scoped("running batch epochs", || {
            self.copy_results(&mut enc, rule, rb, 0, k);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(rb)?;
        ctx.check("running batch epochs")?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let stats = self.decode_stats(&bytes[CTL..], (ctl.epoch as usize).min(k));
        let len = self.heads * (self.d + 1);
        let at = CTL + k * size_of::<EpochOut>();
        w.copy_from_slice(bytemuck::cast_slice(&bytes[at..at + len * 4]));
        let mut stop = stop_of(&ctl);
        if let Some(r) = self.reduce {
            stop = crate::backend::agreed_stop(r, stop);
        }
        Ok((stats, stop))
    }

    /// The pocket (with its figure and epochs), the average sum (with its epochs) and the
    /// stop rules' memory, as kept by the rules used.
    pub fn extras(&mut self) -> Result<Extras> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let ctx = self.ctx;
        let len = (self.heads * (self.d + 1) * 4) as u64;
        let staging = self.staging("rosenblatt.extras_readback", CTL as u64 + 2 * len);
        ctx.scoped("reading the pocket and average", || {
            let mut enc = self.encoder();
            enc.copy_buffer_to_buffer(&self.shared.ctl_buf, 0, &staging, 0, CTL as u64);
            enc.copy_buffer_to_buffer(&self.shared.aux, len, &staging, CTL as u64, 2 * len);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let floats: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[CTL..]);
        let (pocket, avg) = floats.split_at(floats.len() / 2);
        Ok(Extras {
            pocket: (self.kept_pocket && ctl.epochs > 0).then(|| Pocket {
                w: pocket.to_vec(),
                figure: ctl.best,
                updates: ctl.pocket_updates as u64,
            }),
            average: self
                .kept_average
                .then(|| (avg.to_vec(), ctl.updates as u64)),
            stop: StopState {
                best: ctl.best,
                best_epoch: ctl.best_epoch,
                reference: ctl.reference,
                wait: ctl.wait,
                epochs: ctl.epochs,
            },
        })
    }

    /// Scores w_k . [x_i, bias] for every resident row, `heads` per row.
    pub fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let ctx = self.ctx;
        let staging = self.staging(
            "rosenblatt.scores_readback",
            (self.n * self.heads * 4) as u64,
        );
        let pipe = self.batch.pipeline(ctx, Entry::Scores, self.plan.shape)?;
        ctx.scoped("scoring", || {
            ctx.queue
                .write_buffer(&self.shared.w_buf, 0, bytemuck::cast_slice(w));
            let mut enc = self.encoder();
            for (k, seg) in self.segs.iter().enumerate().filter(|(_, s)| !s.held_out) {
                if self.stream.is_some() {
                    // Streamed X: this segment's rows into its slot first.
                    let done = std::mem::replace(&mut enc, self.encoder());
                    ctx.queue.submit([done.finish()]);
                    self.upload(k);
                }
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rosenblatt.scores"),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, &self.shared.global, &[]);
                pass.set_pipeline(&pipe);
                pass.set_bind_group(1, &seg.bind, &[]);
                pass.dispatch_workgroups(seg.wgs as u32, 1, 1);
            }
            let mut off = 0u64;
            for seg in self.segs.iter().filter(|s| !s.held_out) {
                let len = (seg.n * self.heads * 4) as u64;
                enc.copy_buffer_to_buffer(&seg.coef, 0, &staging, off, len);
                off += len;
            }
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        ctx.check("scoring")?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The middle of a data-parallel epoch (`enc` holds its segment kernels): reads back the
    /// partials and the workgroups' counts, adds the partials in order (as `apply` does) and
    /// the counts, sums both over the processes, and writes the totals back as partial 0 and
    /// workgroup 0 (the rest zero), for `apply` and `finalize`.
    fn reduce_epoch(&mut self, mut enc: wgpu::CommandEncoder, r: &dyn Reduce) -> Result<()> {
        let ctx = self.ctx;
        let len = self.heads * (self.d + 1);
        let chunks = self.params.total_chunks as usize;
        let wgs = self.params.total_wgs as usize;
        let (p_bytes, s_bytes) = (
            (chunks * len * 4) as u64,
            (wgs * size_of::<WgStat>()) as u64,
        );
        let staging = match self.reduce_staging.take() {
            Some(b) => b,
            None => self.staging("rosenblatt.reduce_readback", p_bytes + s_bytes),
        };
        ctx.scoped("running batch epochs", || {
            if p_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.shared.partials, 0, &staging, 0, p_bytes);
            }
            if s_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.shared.wg_stats, 0, &staging, p_bytes, s_bytes);
            }
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        self.reduce_staging = Some(staging);
        ctx.check("running batch epochs")?;
        // (Copied out: a byte vector's start need not be aligned for f32.)
        let partials: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[..p_bytes as usize]);
        let mut total = vec![0f32; len];
        for c in partials.chunks_exact(len.max(1)) {
            for (t, v) in total.iter_mut().zip(c) {
                *t += v;
            }
        }
        let mut counts = [0f64; 4];
        for st in bytes[p_bytes as usize..(p_bytes + s_bytes) as usize]
            .chunks_exact(size_of::<WgStat>())
            .map(bytemuck::pod_read_unaligned::<WgStat>)
        {
            counts[0] += st.mistakes as f64;
            counts[1] += st.criterion as f64;
            counts[2] += st.held_out as f64;
            counts[3] += st.weighted as f64;
        }
        // The same sums, in the same order, as the CPU's bound (a process without rows takes
        // part through that): the update sums, the counts, the held-out mistakes.
        r.sum_f32(&mut total);
        let mut c = [counts[0], counts[1], counts[3]];
        r.sum_f64(&mut c);
        (counts[0], counts[1], counts[3]) = (c[0], c[1], c[2]);
        if self.data_flags & FLAG_HELD_OUT != 0 {
            let mut h = [counts[2]];
            r.sum_f64(&mut h);
            counts[2] = h[0];
        }
        let mut chunk0 = vec![0f32; chunks.max(1) * len];
        chunk0[..len].copy_from_slice(&total);
        let zero = WgStat {
            mistakes: 0,
            criterion: 0.0,
            held_out: 0,
            weighted: 0.0,
        };
        let mut stats = vec![zero; wgs.max(1)];
        stats[0] = WgStat {
            mistakes: u32::try_from(counts[0] as u64).unwrap_or(u32::MAX),
            criterion: counts[1] as f32,
            held_out: u32::try_from(counts[2] as u64).unwrap_or(u32::MAX),
            weighted: counts[3] as f32,
        };
        ctx.scoped("running batch epochs", || {
            ctx.queue
                .write_buffer(&self.shared.partials, 0, bytemuck::cast_slice(&chunk0));
            ctx.queue
                .write_buffer(&self.shared.wg_stats, 0, bytemuck::cast_slice(&stats));
        })
    }
}

/// The stop the control word records.
fn stop_of(ctl: &Control) -> Option<StopReason> {
    match ctl.done {
        STOP_CONVERGED => Some(StopReason::Converged),
        STOP_TOLERANCE => Some(StopReason::Tolerance),
        STOP_PATIENCE => Some(StopReason::Patience),
        _ => None,
    }
}

/// The entry points a plan's epochs and scoring use.
fn plan_entries(plan: &Plan) -> Vec<Entry> {
    let mut v = if plan.register_pass() {
        vec![Entry::Epoch]
    } else if plan.shape.sparse != 0 {
        vec![Entry::Margins, Entry::Gather]
    } else {
        vec![Entry::Margins, Entry::Accumulate]
    };
    v.extend([Entry::Apply, Entry::Finalize, Entry::Scores]);
    v
}

/// The rows a resident set is built from: training rows, held-out rows, their sizes.
#[derive(Clone, Copy)]
struct Sizes<'a> {
    x: Matrix<'a>,
    held_x: Option<Matrix<'a>>,
    n: usize,
    held_n: usize,
    d: usize,
    heads: usize,
}

/// The plan for these rows on this device.
fn make_plan(ctx: &GpuContext, s: Sizes<'_>, opts: &ResidentOptions) -> Result<Plan> {
    let Sizes {
        x,
        held_x,
        n,
        held_n,
        d,
        heads,
    } = s;
    let storage = x.storage();
    match x {
        Matrix::Csr(c) => {
            let nnz = c.nnz() + held_x.and_then(|h| h.csr()).map_or(0, |h| h.nnz());
            plan_sparse(n + held_n, d, nnz, heads, storage, &ctx.limits)
        }
        Matrix::Dense(_) => plan(
            n.max(held_n),
            d,
            heads,
            storage,
            &ctx.limits,
            PlanOptions {
                max_binding: opts.max_binding,
                grid: opts
                    .workgroups
                    .unwrap_or_else(|| device_workgroups(&ctx.info)),
                two_kernels: opts.two_kernels,
                kt_cap: opts
                    .heads_per_thread
                    .unwrap_or(if ctx.info.backend == wgpu::Backend::Gl {
                        GL_KT_CAP
                    } else {
                        KT_MAX
                    }),
            },
        ),
    }
}

/// The segments of the training rows then the held-out rows: their rows, partials and
/// workgroups. Dense rows: a fixed number of rows per binding; the register pass's grid per
/// segment ([`segment_grid`]). CSR rows: as many rows as keep each buffer within a binding.
fn layout_segments(
    plan: &Plan,
    s: Sizes<'_>,
    training: bool,
    seg_binding: u64,
    opts: &ResidentOptions,
) -> Result<Vec<SegMeta>> {
    let Sizes {
        x,
        held_x,
        n,
        held_n,
        d,
        heads,
    } = s;
    let len = heads * (d + 1);
    let ranges = |m: Matrix<'_>, total: usize, gather: bool| -> Result<Vec<(usize, usize)>> {
        match m {
            Matrix::Csr(c) => sparse_segments(c, d, heads, seg_binding, gather),
            Matrix::Dense(_) => Ok((0..total)
                .step_by(plan.seg_rows.max(1))
                .map(|a| (a, plan.seg_rows.min(total - a)))
                .collect()),
        }
    };
    let sparse = x.is_sparse();
    let mut roles = vec![(ROLE_TRAIN, x, ranges(x, n, training)?)];
    if let Some(hx) = held_x {
        roles.push((ROLE_HELD_OUT, hx, ranges(hx, held_n, false)?));
    }
    let step = rows_per_step(&plan.shape, heads);
    let groups = (plan.shape.wg / plan.shape.tpr) as usize;
    let mut out = Vec::new();
    let (mut chunk_base, mut wg_base) = (0usize, 0usize);
    for (role, m, list) in roles {
        for (start, rows) in list {
            let train = role == ROLE_TRAIN && training;
            let (chunks, wgs, chunk_rows) = if plan.register_pass() {
                let words = x_words(m, rows, d).max(1);
                let (g, run) = match opts.workgroups {
                    Some(g) => segment_grid(rows, words, None, g, step, plan.max_steps),
                    None => segment_grid(
                        rows,
                        words,
                        train.then_some(len),
                        plan.grid,
                        step,
                        plan.max_steps,
                    ),
                };
                (if train { g } else { 0 }, g, run)
            } else {
                // A sparse training segment sums its rows in one partial (`gather`).
                let chunks = match () {
                    _ if !train => 0,
                    _ if sparse => 1,
                    _ => rows.div_ceil(plan.chunk_rows),
                };
                let wgs = rows.div_ceil(groups).clamp(1, plan.margin_wgs_cap);
                let chunk_rows = if sparse { rows.max(1) } else { plan.chunk_rows };
                (chunks, wgs, chunk_rows)
            };
            out.push(SegMeta {
                role,
                start,
                n: rows,
                chunks,
                chunk_base,
                wgs,
                wg_base,
                chunk_rows,
            });
            chunk_base += chunks;
            wg_base += wgs;
        }
    }
    Ok(out)
}

/// 32-bit words of `rows` rows of `m` as the device stores them: dense rows padded to whole
/// units of 4 values, CSR values as they are (whole words).
fn x_words(m: Matrix<'_>, rows: usize, d: usize) -> u64 {
    let eb = m.storage().bytes() as u64;
    match m.csr() {
        Some(c) => (c.nnz() as u64 * eb).div_ceil(4),
        None => rows as u64 * padded(d) as u64 * eb / 4,
    }
}

/// The buffers the segments share and their bind group.
fn shared_buffers(
    ctx: &GpuContext,
    batch: &BatchPipelines,
    params: &Params,
    total_chunks: usize,
    total_wgs: usize,
) -> Shared {
    let len = (params.heads * params.d_aug) as usize;
    let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
    let params_buf = init_buf(
        ctx,
        "rosenblatt.params",
        bytemuck::bytes_of(params),
        uniform,
    );
    let w_buf = storage_buf(ctx, "rosenblatt.w", (len * 4) as u64);
    let ctl_buf = init_buf(
        ctx,
        "rosenblatt.control",
        bytemuck::bytes_of(&Control::fresh()),
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
    );
    let partials = storage_buf(ctx, "rosenblatt.partials", (total_chunks * len * 4) as u64);
    let wg_stats = storage_buf(
        ctx,
        "rosenblatt.wg_stats",
        (total_wgs * size_of::<WgStat>()) as u64,
    );
    let counters = storage_buf(ctx, "rosenblatt.counters", (COUNTER_WORDS * 4) as u64);
    let aux = storage_buf(ctx, "rosenblatt.aux", (5 * len * 4) as u64);
    let stats_buf = storage_buf(
        ctx,
        "rosenblatt.epoch_stats",
        (params.ring as usize * size_of::<EpochOut>()) as u64,
    );
    let global = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("rosenblatt.global"),
        layout: &batch.global_layout,
        entries: &[
            entire(0, &params_buf),
            entire(1, &w_buf),
            entire(2, &ctl_buf),
            entire(3, &partials),
            entire(4, &wg_stats),
            entire(5, &counters),
            entire(6, &stats_buf),
            entire(7, &aux),
        ],
    });
    Shared {
        params_buf,
        w_buf,
        ctl_buf,
        partials,
        wg_stats,
        counters,
        stats_buf,
        aux,
        global,
    }
}

/// The two device slots of streamed X, each sized for the largest segment's arrays.
fn stream_slots(
    ctx: &GpuContext,
    metas: &[SegMeta],
    plan: &Plan,
    x: Matrix<'_>,
    held_x: Option<Matrix<'_>>,
    d: usize,
) -> [Slot; 2] {
    let eb = x.storage().bytes() as u64;
    let (mut x_max, mut csr_max, mut csc_max) =
        ((plan.seg_rows * padded(d)) as u64 * eb, 0u64, 0u64);
    for m in metas {
        let src = match held_x {
            Some(h) if m.role == ROLE_HELD_OUT => h,
            _ => x,
        };
        if let Matrix::Csr(c) = src {
            let nnz = (c.indptr[m.start + m.n] - c.indptr[m.start]) as u64;
            x_max = x_max.max(nnz * eb);
            csr_max = csr_max.max((m.n as u64 + 1 + nnz) * 4);
            if m.role == ROLE_TRAIN {
                csc_max = csc_max.max((d as u64 + 1 + 2 * nnz) * 4);
            }
        }
    }
    [0, 1].map(|i| Slot {
        x: storage_buf(ctx, &format!("rosenblatt.x_slot[{i}]"), x_max),
        csr: storage_buf(ctx, &format!("rosenblatt.csr_slot[{i}]"), csr_max),
        csc: storage_buf(ctx, &format!("rosenblatt.csc_slot[{i}]"), csc_max),
    })
}

/// A segment's own buffers (its uniform, labels, row weights, outputs) and bind group; `arrays`
/// are its X, CSR and CSC buffers. X is bound as words, pairs and quadruples (bindings 1, 7, 8).
#[allow(clippy::too_many_arguments)]
fn segment_buffers(
    ctx: &GpuContext,
    batch: &BatchPipelines,
    k: usize,
    m: &SegMeta,
    arrays: [&wgpu::Buffer; 3],
    y: Option<&[f32]>,
    sw: Option<&[f32]>,
    heads: usize,
    gather: bool,
) -> SegBuf {
    let seg = Segment {
        n: m.n as u32,
        chunk_base: m.chunk_base as u32,
        wg_base: m.wg_base as u32,
        chunk_rows: m.chunk_rows as u32,
        role: m.role,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
    let ubuf = init_buf(ctx, "rosenblatt.segment", bytemuck::bytes_of(&seg), uniform);
    let rows_buf = |what: &str, v: Option<&[f32]>| {
        init_buf(
            ctx,
            &format!("rosenblatt.{what}[{k}]"),
            bytemuck::cast_slice(v.unwrap_or(&[])),
            wgpu::BufferUsages::STORAGE,
        )
    };
    let ybuf = init_buf(
        ctx,
        &format!("rosenblatt.y[{k}]"),
        &label_bytes(y.unwrap_or(&[])),
        wgpu::BufferUsages::STORAGE,
    );
    let wbuf = rows_buf("sw", sw);
    let coef = storage_buf(
        ctx,
        &format!("rosenblatt.coef[{k}]"),
        (m.n * heads * 4) as u64,
    );
    let [xbuf, csr, csc] = arrays;
    let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("rosenblatt.segment"),
        layout: &batch.segment_layout,
        entries: &[
            entire(0, &ubuf),
            entire(1, xbuf),
            entire(2, &ybuf),
            entire(3, &coef),
            entire(4, &wbuf),
            entire(5, csr),
            entire(6, csc),
            entire(7, xbuf),
            entire(8, xbuf),
        ],
    });
    SegBuf {
        n: m.n,
        held_out: m.role == ROLE_HELD_OUT,
        chunks: m.chunks,
        wgs: m.wgs,
        gather,
        coef,
        bind,
    }
}

/// Labels as the shaders read them: one signed byte a row, four to a word (-1/+1, or the
/// class index, below MAX_HEADS = 64).
fn label_bytes(y: &[f32]) -> Vec<u8> {
    y.iter().map(|&v| v as i8 as u8).collect()
}

/// A buffer of `rows` dense rows of `d` values (`bytes`, row-major) with each row padded with
/// zeros to whole units of 4 values.
fn dense_buf(
    ctx: &GpuContext,
    label: &str,
    bytes: &[u8],
    rows: usize,
    d: usize,
    storage: Storage,
) -> wgpu::Buffer {
    let eb = storage.bytes();
    let (row, prow) = (d * eb, padded(d) * eb);
    filled_buf(
        ctx,
        label,
        rows * prow,
        wgpu::BufferUsages::STORAGE,
        |view| {
            if row == prow {
                view.slice(..bytes.len()).copy_from_slice(bytes);
            } else {
                for (r, src) in bytes.chunks_exact(row).enumerate() {
                    view.slice(r * prow..r * prow + row).copy_from_slice(src);
                }
            }
        },
    )
}

/// Streamed dense rows into a slot, each padded to whole units of 4 values.
fn write_dense(
    q: &wgpu::Queue,
    buf: &wgpu::Buffer,
    bytes: &[u8],
    rows: usize,
    d: usize,
    storage: Storage,
) {
    let eb = storage.bytes();
    let (row, prow) = (d * eb, padded(d) * eb);
    if row == prow && bytes.len().is_multiple_of(4) {
        q.write_buffer(buf, 0, bytes);
        return;
    }
    let len = (rows * prow).next_multiple_of(4) as u64;
    let Some(size) = wgpu::BufferSize::new(len) else {
        return;
    };
    if let Some(mut view) = q.write_buffer_with(buf, 0, size) {
        view.slice(..).fill(0);
        for (r, src) in bytes.chunks_exact(row).enumerate() {
            view.slice(r * prow..r * prow + row).copy_from_slice(src);
        }
    }
}

/// The stored values of `m` (all of them when dense, the non-zeros when CSR).
fn values_of(m: Matrix<'_>) -> Features<'_> {
    match m {
        Matrix::Dense(f) => f,
        Matrix::Csr(c) => c.values,
    }
}

/// `m` with its stored values replaced by `v` (the same number of them).
fn with_values<'a>(m: Matrix<'a>, v: Features<'a>) -> Matrix<'a> {
    match m {
        Matrix::Dense(_) => Matrix::Dense(v),
        Matrix::Csr(c) => Matrix::Csr(CsrView { values: v, ..c }),
    }
}

/// A segment's arrays: its values, and for CSR rows the row starts (from 0) with the columns,
/// and for a training segment (`gather`) the CSC copy: column starts, the row of each entry
/// and its position among the segment's values, rows ascending within a column. Dense rows
/// give empty index arrays.
fn segment_arrays<'a>(
    m: Matrix<'a>,
    start: usize,
    len: usize,
    d: usize,
    gather: bool,
) -> (Features<'a>, Vec<u32>, Vec<u32>) {
    let c = match m {
        Matrix::Dense(f) => {
            return (
                f.slice(start * d..(start + len) * d),
                Vec::new(),
                Vec::new(),
            )
        }
        Matrix::Csr(c) => c,
    };
    let base = c.indptr[start];
    let end = c.indptr[start + len];
    let nnz = end - base;
    let mut csr = Vec::with_capacity(len + 1 + nnz);
    csr.extend(
        c.indptr[start..=start + len]
            .iter()
            .map(|&p| (p - base) as u32),
    );
    csr.extend_from_slice(&c.indices[base..end]);
    let mut csc = Vec::new();
    if gather {
        csc = vec![0u32; d + 1 + 2 * nnz];
        for &j in &c.indices[base..end] {
            csc[j as usize + 1] += 1;
        }
        for j in 0..d {
            csc[j + 1] += csc[j];
        }
        let mut next: Vec<u32> = csc[..d].to_vec();
        let (rows_at, pos_at) = (d + 1, d + 1 + nnz);
        for r in 0..len {
            for p in c.indptr[start + r]..c.indptr[start + r + 1] {
                let j = c.indices[p] as usize;
                let q = next[j] as usize;
                csc[rows_at + q] = r as u32;
                csc[pos_at + q] = (p - base) as u32;
                next[j] += 1;
            }
        }
    }
    (c.values.slice(base..end), csr, csc)
}

/// Maps a staging buffer, waits for the GPU and returns its bytes.
pub fn read_back(ctx: &GpuContext, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
    let slice = staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
    rx.recv()
        .map_err(|_| Error::Gpu("the GPU never answered the read-back".into()))?
        .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))?;
    let bytes = slice
        .get_mapped_range()
        .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))?
        .to_vec();
    staging.unmap();
    Ok(bytes)
}
