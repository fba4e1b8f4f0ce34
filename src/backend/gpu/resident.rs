//! A data set made resident on the GPU: X split by rows into segments that each fit one
//! storage binding, y and a per-row output per segment, and the shared buffers of the batch
//! epoch. Everything is allocated once; an epoch only dispatches, and a submit of many
//! epochs reads back once (the per-epoch stats, the control word and w).

use wgpu::util::DeviceExt;

use super::batch::{workgroup_size, BatchPipelines, Entry, Shape};
use super::context::GpuContext;
use super::mirror::{
    flags, Control, EpochOut, Params, Segment, WgStat, FLAG_HELD_OUT, FLAG_WEIGHTS, ROLE_HELD_OUT,
    ROLE_TRAIN, STOP_CONVERGED, STOP_PATIENCE, STOP_TOLERANCE,
};
use crate::backend::{
    winnow_weights, BatchRule, CsrView, DataView, EpochStats, Epochs, Extras, Features,
    KernelProfile, Matrix, MatrixBuf, Pocket, Reduce, StopReason, StopState, Storage, Update,
    MAX_HEADS,
};
use crate::error::{Error, Result};

/// Sizes chosen for one data set on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Rows per X segment (one storage binding each).
    pub seg_rows: usize,
    /// Rows per `accumulate` chunk.
    pub chunk_rows: usize,
    /// Most `margins` workgroups per segment (they stride over the rows).
    pub margin_wgs_cap: usize,
    /// Pipeline overrides.
    pub shape: Shape,
}

/// Bytes of the control word.
const CTL: usize = size_of::<Control>();

/// Largest partials buffer the plan aims for.
const PARTIALS_BUDGET: u64 = 64 << 20;

/// Plans the buffers for n rows of d features under the device limits, or explains why the
/// data does not fit. `max_binding` overrides the binding limit (tests force it small).
pub fn plan(
    n: usize,
    d: usize,
    heads: usize,
    storage: Storage,
    limits: &wgpu::Limits,
    max_binding: Option<u64>,
) -> Result<Plan> {
    if heads > MAX_HEADS {
        return Err(Error::TooLarge(format!(
            "{heads} classes: the GPU pipelines handle at most {MAX_HEADS}"
        )));
    }
    let binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(max_binding.unwrap_or(u64::MAX))
        .min(1 << 31);
    let len = heads.max(1) as u64 * (d as u64 + 1);
    // Per row, a segment binds d features (in words of packed values) and `heads` outputs.
    let row_bytes = (d as u64 * storage.bytes() as u64).max(heads as u64 * 4);
    if row_bytes > binding || len * 4 > binding.max(limits.max_storage_buffer_binding_size) {
        return Err(Error::TooLarge(format!(
            "one row of {d} features is {row_bytes} bytes, more than the GPU binds at once \
             ({binding} bytes)"
        )));
    }
    let wg = workgroup_size(limits, 256)?;
    let shape = Shape {
        storage: storage.code(),
        ..Shape::for_features(d, heads, wg)
    };
    let per_dim = limits.max_compute_workgroups_per_dimension as u64;
    if len.div_ceil(shape.tc as u64) > per_dim || len.div_ceil(wg as u64) > per_dim {
        return Err(Error::TooLarge(format!(
            "{d} features need more workgroups than the GPU dispatches per dimension ({per_dim})"
        )));
    }
    // A segment's packed rows are padded to a whole word (f32 rows need no padding).
    let pad = if storage == Storage::F32 { 0 } else { 3 };
    let seg_rows = ((binding.saturating_sub(pad) / row_bytes) as usize)
        .min(n)
        .max(1);
    let max_chunks = (PARTIALS_BUDGET.min(binding) / (len * 4)).max(1) as usize;
    // Whole row groups per chunk (WG / TPR rows are scored at once: 256 rows when d < 8), so
    // the fused pass keeps every thread busy.
    let groups = (shape.wg / shape.tpr) as usize;
    let chunk_rows = 64usize
        .max(n.div_ceil(max_chunks))
        .max(seg_rows.div_ceil(per_dim as usize))
        .next_multiple_of(groups);
    let margin_wgs_cap = (per_dim as usize).min(4096);
    Ok(Plan {
        seg_rows,
        chunk_rows,
        margin_wgs_cap,
        shape,
    })
}

struct SegBuf {
    n: usize,
    chunks: usize,
    margin_wgs: usize,
    held_out: bool,
    /// The epoch runs `fused` (one workgroup per chunk) instead of `margins` + `accumulate`.
    fused: bool,
    /// A sparse training segment: `margins` then `gather` (its one partial).
    gather: bool,
    coef: wgpu::Buffer,
    bind: wgpu::BindGroup,
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

/// Above this many chunk partials per weight, the epoch sums them with `apply_tree` (a
/// workgroup per weight, a fixed tree) instead of one thread per weight in chunk order.
pub const TREE_MIN_CHUNKS: usize = 64;

/// Pipelines used by a resident data set.
struct Pipes {
    margins: wgpu::ComputePipeline,
    fused: wgpu::ComputePipeline,
    accumulate: wgpu::ComputePipeline,
    gather: wgpu::ComputePipeline,
    apply: wgpu::ComputePipeline,
    apply_tree: wgpu::ComputePipeline,
    finalize: wgpu::ComputePipeline,
    scores: wgpu::ComputePipeline,
}

/// One segment of streamed X on the host: its values (the caller's bytes) and, for CSR rows,
/// the arrays `segment_arrays` makes (row starts with columns, the column-major copy).
struct StreamSeg<'c> {
    x: &'c [u8],
    csr: Vec<u32>,
    csc: Vec<u32>,
}

/// A device slot of streamed X: one buffer per array of a segment.
struct Slot {
    x: wgpu::Buffer,
    csr: wgpu::Buffer,
    csc: wgpu::Buffer,
}

/// Data and buffers on the GPU for repeated epochs or scoring.
pub struct Resident<'c> {
    ctx: &'c GpuContext,
    /// Streamed X: each segment's arrays on the host, uploaded into slot (segment % 2) before
    /// its kernels run; `None`: X is resident.
    stream: Option<Vec<StreamSeg<'c>>>,
    /// The two device slots of streamed X: values, and for CSR rows the row starts with the
    /// columns and the column-major copy.
    slots: Option<[Slot; 2]>,
    d: usize,
    n: usize,
    /// How X is stored on the device.
    storage: Storage,
    /// Bytes of X (CSR: values, columns and row starts).
    x_bytes: u64,
    /// Stored values of CSR rows (0 for dense rows).
    nnz: u64,
    plan: Plan,
    params: Params,
    params_buf: wgpu::Buffer,
    w_buf: wgpu::Buffer,
    ctl_buf: wgpu::Buffer,
    stats_buf: wgpu::Buffer,
    aux: wgpu::Buffer,
    heads: usize,
    /// Read-back buffer for a submit: control, the epochs' stats, w (sized for the largest).
    readback: wgpu::Buffer,
    /// The data's own `Params::flags` bits (weights, held-out rows).
    data_flags: u32,
    kept_pocket: bool,
    kept_average: bool,
    global: wgpu::BindGroup,
    segs: Vec<SegBuf>,
    pipes: Pipes,
    epochs_per_submit: usize,
    submits: usize,
    fail_after_submits: Option<usize>,
    /// The chunk sums of an epoch (`total_chunks` x `len`) and the workgroups' counts.
    partials: wgpu::Buffer,
    wg_stats: wgpu::Buffer,
    /// In a data-parallel run: the sums across processes (see [`Resident::reduce_with`]), and
    /// the read-back buffer of the chunk sums and counts.
    reduce: Option<&'c dyn Reduce>,
    reduce_staging: Option<wgpu::Buffer>,
}

pub(crate) fn storage_buf(ctx: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(4).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// A buffer holding `data` (4 zero bytes when `data` is empty: wgpu binds no empty buffer).
pub(crate) fn init_buf(
    ctx: &GpuContext,
    label: &str,
    data: &[u8],
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    ctx.device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: if data.is_empty() { &[0; 4] } else { data },
            usage,
        })
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
    /// Whether training segments run the fused one-pass kernel: `None` where the chunks
    /// give enough workgroups, `Some(true)` always, `Some(false)` never (`margins` +
    /// `accumulate`); tests hold every choice to the reference.
    pub fused: Option<bool>,
    /// Most bytes of X to keep on the device: when X (training and held-out rows) is larger,
    /// it streams: two segment slots on the device, each segment uploaded into one while the
    /// other's kernels run, every epoch. `None`: X is resident (it must fit the device).
    pub gpu_memory: Option<u64>,
}

/// Workgroups (chunks) a segment needs for the fused pass when `margins` would launch more:
/// about four per multiprocessor of a 132-SM GPU (a guess until a real GPU measures it).
pub const FUSED_MIN_WGS: usize = 512;

impl<'c> Resident<'c> {
    /// Uploads `rows`: the features and, for training, the labels, weights and held-out rows.
    pub fn new(
        ctx: &'c GpuContext,
        batch: &BatchPipelines,
        rows: Rows<'c>,
        heads: usize,
        opts: &ResidentOptions,
    ) -> Result<Self> {
        let DataView { x, n, d, bias } = rows.data;
        // Held-out rows are bound in the training rows' form and storage (converted, with f32
        // values, in the rare case that a caller gives them otherwise).
        let held_in = rows.held.map(|(h, _)| h);
        let mismatch = held_in
            .is_some_and(|h| h.x.storage() != x.storage() || h.x.is_sparse() != x.is_sparse());
        if mismatch {
            // The training rows are widened to f32 for the held-out rows' sake: within the
            // memory budget (a memory-mapped compact X can be larger than memory).
            crate::backend::check_widened(rows.data)?;
        }
        let train_vals: Option<Vec<f32>> = mismatch.then(|| values_of(x).to_f32().into_owned());
        let held_own: Option<MatrixBuf> = match held_in {
            Some(h) if mismatch => Some(if x.is_sparse() {
                MatrixBuf::Csr(h.x.to_csr(h.n, d))
            } else {
                MatrixBuf::Dense(h.x.to_dense(h.n, d).into_owned())
            }),
            _ => None,
        };
        let x = match &train_vals {
            Some(v) => with_values(x, Features::F32(v)),
            None => x,
        };
        let held_x = match &held_own {
            Some(m) => Some(m.view()),
            None => held_in.map(|h| h.x),
        };
        let heads = heads.max(1);
        if n == 0 || d == 0 {
            return Err(Error::Gpu(
                "the GPU backend needs at least one row and one feature".into(),
            ));
        }
        let held_n = rows.held.map_or(0, |(h, _)| h.n);
        let storage = x.storage();
        let sparse = x.is_sparse();
        let training = rows.y.is_some();
        let plan = match (x, held_x) {
            (Matrix::Csr(c), h) => {
                let nnz = c.nnz() + h.and_then(|h| h.csr()).map_or(0, |h| h.nnz());
                plan_sparse(n + held_n, d, nnz, heads, storage, &ctx.limits)?
            }
            _ => plan(
                n.max(held_n),
                d,
                heads,
                storage,
                &ctx.limits,
                opts.max_binding,
            )?,
        };
        let binding = binding_limit(&ctx.limits, opts.max_binding);
        // X larger than the device memory it may take streams through two segment slots.
        let x_total = x.bytes(n, d) + held_x.map_or(0, |h| h.bytes(held_n, d));
        let streamed = opts.gpu_memory.is_some_and(|b| x_total > b);
        let mut plan = plan;
        let budget = opts.gpu_memory.unwrap_or(0);
        if streamed {
            if mismatch {
                return Err(Error::TooLarge(format!(
                    "X ({x_total} bytes) is more than --gpu-memory allows, and streaming takes \
                     training and held-out rows in one storage and form only"
                )));
            }
            let row_bytes = (d * storage.bytes()) as u64;
            // Whole words per slot (rows in fours): every upload but the last is aligned.
            let slot_rows = ((budget / 2 / row_bytes.max(1)) as usize / 4 * 4).max(4);
            plan.seg_rows = plan.seg_rows.min(slot_rows);
        }
        let shape = plan.shape;
        let pipes = Pipes {
            margins: batch.pipeline(ctx, Entry::Margins, shape)?,
            fused: batch.pipeline(ctx, Entry::Fused, shape)?,
            accumulate: batch.pipeline(ctx, Entry::Accumulate, shape)?,
            gather: batch.pipeline(ctx, Entry::Gather, shape)?,
            apply: batch.pipeline(ctx, Entry::Apply, shape)?,
            apply_tree: batch.pipeline(ctx, Entry::ApplyTree, shape)?,
            finalize: batch.pipeline(ctx, Entry::Finalize, shape)?,
            scores: batch.pipeline(ctx, Entry::Scores, shape)?,
        };
        // Streamed: one epoch a submit (uploads after a stop would be wasted).
        let epochs_per_submit = opts
            .epochs_per_submit
            .unwrap_or(if streamed { 1 } else { 64 })
            .max(1);
        let d_aug = d + 1;
        let len = heads * d_aug;
        let groups = (shape.wg / shape.tpr) as usize;
        let x_bytes = x.bytes(n, d);
        // The row ranges of each role's segments: a fixed number of rows per binding for
        // dense rows; for CSR rows as many as keep each of the segment's buffers in a binding.
        // Streamed CSR: a segment's three arrays (each within a third) fill half the budget.
        let seg_binding = if streamed && sparse {
            binding.min((budget / 6).max(4))
        } else {
            binding
        };
        let ranges = |m: Matrix<'_>, total: usize, gather: bool| -> Result<Vec<(usize, usize)>> {
            match m {
                Matrix::Csr(c) => sparse_segments(c, d, heads, seg_binding, gather),
                Matrix::Dense(_) => Ok((0..total)
                    .step_by(plan.seg_rows.max(1))
                    .map(|a| (a, plan.seg_rows.min(total - a)))
                    .collect()),
            }
        };
        let mut role_ranges = vec![(ROLE_TRAIN, ranges(x, n, training)?)];
        if let Some(hx) = held_x {
            role_ranges.push((ROLE_HELD_OUT, ranges(hx, held_n, false)?));
        }
        ctx.scoped(
            &format!(
                "uploading {n} x {d} ({x_bytes} bytes) to {}",
                ctx.describe()
            ),
            || {
                // Training segments first, then held-out ones (no chunks: never accumulated).
                let mut segs_meta = Vec::new();
                let (mut chunk_base, mut wg_base) = (0usize, 0usize);
                for (role, list) in &role_ranges {
                    let role = *role;
                    for &(start, len) in list {
                        // A sparse training segment sums its rows in one partial (`gather`).
                        let chunks = match role {
                            // (Scoring alone sums nothing.)
                            ROLE_TRAIN if sparse => usize::from(training),
                            ROLE_TRAIN => len.div_ceil(plan.chunk_rows),
                            _ => 0,
                        };
                        let margin_wgs = len.div_ceil(groups).clamp(1, plan.margin_wgs_cap);
                        // One pass over X (`fused`, a workgroup per chunk) where the chunks
                        // give about as many workgroups as `margins` would (at most
                        // FUSED_MIN_WGS needed); else two kernels, X read twice.
                        let fused = role == ROLE_TRAIN
                            && !sparse
                            && opts
                                .fused
                                .unwrap_or(chunks >= margin_wgs.min(FUSED_MIN_WGS));
                        let margin_wgs = if fused { chunks } else { margin_wgs };
                        segs_meta.push((
                            role, start, len, chunks, margin_wgs, chunk_base, wg_base, fused,
                        ));
                        chunk_base += chunks;
                        wg_base += margin_wgs;
                    }
                }
                let real = binding_limit(&ctx.limits, None);
                if sparse && training && (chunk_base * len * 4) as u64 > real {
                    return Err(Error::TooLarge(format!(
                        "{chunk_base} segments of {d} features need {} bytes of partial sums, \
                         more than the GPU binds at once ({real} bytes)",
                        chunk_base * len * 4
                    )));
                }
                let params = Params {
                    d: d as u32,
                    d_aug: d_aug as u32,
                    heads: heads as u32,
                    rule: 0,
                    tau: 0.0,
                    flags: 0,
                    bias,
                    eta: 1.0,
                    tol: 0.0,
                    total_chunks: chunk_base as u32,
                    total_wgs: wg_base as u32,
                    patience: 0,
                    keep_fraction: 1.0,
                    floor: 0.0,
                    _pad0: 0,
                    _pad1: 0,
                };
                let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
                let params_buf = init_buf(
                    ctx,
                    "rosenblatt.params",
                    bytemuck::bytes_of(&params),
                    uniform,
                );
                let w_buf = storage_buf(ctx, "rosenblatt.w", (len * 4) as u64);
                let ctl_init = Control::fresh();
                let ctl_buf = init_buf(
                    ctx,
                    "rosenblatt.control",
                    bytemuck::bytes_of(&ctl_init),
                    wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                );
                let partials =
                    storage_buf(ctx, "rosenblatt.partials", (chunk_base * len * 4) as u64);
                let wg_stats = storage_buf(
                    ctx,
                    "rosenblatt.wg_stats",
                    (wg_base * size_of::<WgStat>()) as u64,
                );
                let sq = storage_buf(ctx, "rosenblatt.sq", (len * 4) as u64);
                let aux = storage_buf(ctx, "rosenblatt.pocket_average", (4 * len * 4) as u64);
                let stats_buf = storage_buf(
                    ctx,
                    "rosenblatt.epoch_stats",
                    (epochs_per_submit * size_of::<EpochOut>()) as u64,
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
                        entire(5, &sq),
                        entire(6, &stats_buf),
                        entire(7, &aux),
                    ],
                });
                // Slot sizes: the largest segment's arrays (dense: rows of values only).
                let (mut x_max, mut csr_max, mut csc_max) =
                    ((plan.seg_rows * d * storage.bytes()) as u64, 0u64, 0u64);
                for &(role, start, len, ..) in &segs_meta {
                    let m = match held_x {
                        Some(h) if role == ROLE_HELD_OUT => h,
                        _ => x,
                    };
                    if let Matrix::Csr(c) = m {
                        let nnz = (c.indptr[start + len] - c.indptr[start]) as u64;
                        x_max = x_max.max(nnz * storage.bytes() as u64);
                        csr_max = csr_max.max((len as u64 + 1 + nnz) * 4);
                        if role == ROLE_TRAIN && training {
                            csc_max = csc_max.max((d as u64 + 1 + 2 * nnz) * 4);
                        }
                    }
                }
                let slots = streamed.then(|| {
                    [0, 1].map(|i| Slot {
                        x: storage_buf(ctx, &format!("rosenblatt.x_slot[{i}]"), x_max),
                        csr: storage_buf(ctx, &format!("rosenblatt.csr_slot[{i}]"), csr_max),
                        csc: storage_buf(ctx, &format!("rosenblatt.csc_slot[{i}]"), csc_max),
                    })
                });
                let mut stream = Vec::new();
                let dummy = [0f32];
                let no_index =
                    init_buf(ctx, "rosenblatt.no_index", &[], wgpu::BufferUsages::STORAGE);
                let segs = segs_meta
                    .iter()
                    .enumerate()
                    .map(
                        |(
                            k,
                            &(role, start, len, chunks, margin_wgs, chunk_base, wg_base, fused),
                        )| {
                            let seg = Segment {
                                n: len as u32,
                                chunk_base: chunk_base as u32,
                                wg_base: wg_base as u32,
                                chunk_rows: plan.chunk_rows as u32,
                                role,
                                _pad0: 0,
                                _pad1: 0,
                                _pad2: 0,
                            };
                            let ubuf = init_buf(
                                ctx,
                                "rosenblatt.segment",
                                bytemuck::bytes_of(&seg),
                                uniform,
                            );
                            let held_out = role == ROLE_HELD_OUT;
                            let (src_x, src_y, src_w) = match (rows.held, held_x) {
                                (Some((_, hy)), Some(hx)) if held_out => (hx, Some(hy), None),
                                _ => (x, rows.y, rows.sw),
                            };
                            let gather = sparse && !held_out && training;
                            let index_buf = |what: &str, v: &[u32]| {
                                if v.is_empty() {
                                    no_index.clone()
                                } else {
                                    init_buf(
                                        ctx,
                                        &format!("rosenblatt.{what}[{k}]"),
                                        bytemuck::cast_slice(v),
                                        wgpu::BufferUsages::STORAGE,
                                    )
                                }
                            };
                            let (xbuf, csr_buf, csc_buf) = match &slots {
                                Some(s) => {
                                    // The caller's rows (never converted when streaming): the
                                    // arrays stay on the host and go to a slot every epoch.
                                    let orig = match rows.held {
                                        Some((h, _)) if held_out => h.x,
                                        _ => rows.data.x,
                                    };
                                    let (xs, csr, csc) =
                                        segment_arrays(orig, start, len, d, gather);
                                    stream.push(StreamSeg {
                                        x: xs.bytes(),
                                        csr,
                                        csc,
                                    });
                                    let s = &s[k % 2];
                                    (s.x.clone(), s.csr.clone(), s.csc.clone())
                                }
                                None => {
                                    let (xs, csr, csc) =
                                        segment_arrays(src_x, start, len, d, gather);
                                    (
                                        init_buf(
                                            ctx,
                                            &format!("rosenblatt.x[{k}]"),
                                            xs.bytes(),
                                            wgpu::BufferUsages::STORAGE,
                                        ),
                                        index_buf("csr", &csr),
                                        index_buf("csc", &csc),
                                    )
                                }
                            };
                            let ys: &[f32] = match src_y {
                                Some(y) => &y[start..start + len],
                                None => &dummy,
                            };
                            let ybuf = init_buf(
                                ctx,
                                &format!("rosenblatt.y[{k}]"),
                                bytemuck::cast_slice(ys),
                                wgpu::BufferUsages::STORAGE,
                            );
                            let ws: &[f32] = match src_w {
                                Some(w) => &w[start..start + len],
                                None => &dummy,
                            };
                            let wbuf = init_buf(
                                ctx,
                                &format!("rosenblatt.sw[{k}]"),
                                bytemuck::cast_slice(ws),
                                wgpu::BufferUsages::STORAGE,
                            );
                            let coef = storage_buf(
                                ctx,
                                &format!("rosenblatt.coef[{k}]"),
                                (len * heads * 4) as u64,
                            );
                            let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                                label: Some("rosenblatt.segment"),
                                layout: &batch.segment_layout,
                                entries: &[
                                    entire(0, &ubuf),
                                    entire(1, &xbuf),
                                    entire(2, &ybuf),
                                    entire(3, &coef),
                                    entire(4, &wbuf),
                                    entire(5, &csr_buf),
                                    entire(6, &csc_buf),
                                ],
                            });
                            SegBuf {
                                n: len,
                                chunks,
                                margin_wgs,
                                held_out,
                                fused,
                                gather,
                                coef,
                                bind,
                            }
                        },
                    )
                    .collect();
                Ok(Resident {
                    ctx,
                    stream: streamed.then_some(stream),
                    slots,
                    d,
                    n,
                    storage,
                    x_bytes,
                    nnz: x.csr().map_or(0, |c| c.nnz() as u64),
                    plan: plan.clone(),
                    params,
                    params_buf,
                    w_buf,
                    ctl_buf,
                    aux,
                    heads,
                    data_flags: if rows.sw.is_some() { FLAG_WEIGHTS } else { 0 }
                        | if rows.held.is_some() {
                            FLAG_HELD_OUT
                        } else {
                            0
                        },
                    readback: ctx.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("rosenblatt.readback"),
                        size: (CTL + epochs_per_submit * size_of::<EpochOut>() + len * 4) as u64,
                        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    }),
                    kept_pocket: false,
                    kept_average: false,
                    stats_buf,
                    global,
                    segs,
                    pipes,
                    epochs_per_submit,
                    submits: 0,
                    fail_after_submits: opts.fail_after_submits,
                    partials,
                    wg_stats,
                    reduce: None,
                    reduce_staging: None,
                })
            },
        )?
    }

    /// Makes this one process's share of a data-parallel run: every epoch stops after the
    /// chunk sums, which are read back, added on the host (chunks in order, as `apply`), summed
    /// over the processes by `reduce` with the workgroups' counts, and written back as the only
    /// chunk and the only workgroup; `apply` and `finalize` then run unchanged on the totals.
    /// One epoch a submit.
    pub fn reduce_with(&mut self, reduce: &'c dyn Reduce) {
        self.reduce = Some(reduce);
        self.epochs_per_submit = 1;
    }

    /// Epochs recorded per submit.
    pub fn epochs_per_submit(&self) -> usize {
        self.epochs_per_submit
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rosenblatt.batch_epochs"),
            })
    }

    /// Streamed X: writes segment `k`'s arrays into its slot, the whole words, then the last
    /// bytes padded to a word (copies move whole words).
    fn upload(&self, k: usize) {
        let (Some(stream), Some(slots)) = (&self.stream, &self.slots) else {
            return;
        };
        let (seg, slot) = (&stream[k], &slots[k % 2]);
        let q = &self.ctx.queue;
        let bytes = seg.x;
        let whole = bytes.len() / 4 * 4;
        if whole > 0 {
            q.write_buffer(&slot.x, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            q.write_buffer(&slot.x, whole as u64, &tail);
        }
        if !seg.csr.is_empty() {
            q.write_buffer(&slot.csr, 0, bytemuck::cast_slice(&seg.csr));
        }
        if !seg.csc.is_empty() {
            q.write_buffer(&slot.csc, 0, bytemuck::cast_slice(&seg.csc));
        }
    }

    fn staging(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        read_back(self.ctx, staging)
    }

    /// Runs up to `k` epochs from `w`, stopping on the GPU per `rule`; updates `w` and returns
    /// the stats of the epochs run and the stop. Submits `epochs_per_submit` epochs at a time.
    pub fn batch_epochs(&mut self, w: &mut [f32], rule: &BatchRule, k: usize) -> Result<Epochs> {
        let mut out = Epochs::default();
        let mut cur = w.to_vec();
        while out.stats.len() < k {
            let kk = self.epochs_per_submit.min(k - out.stats.len());
            let (stats, stop) = self.submit_epochs(&mut cur, rule, kk)?;
            out.stats.extend(stats);
            if stop.is_some() {
                out.stop = stop;
                break;
            }
        }
        w.copy_from_slice(&cur);
        Ok(out)
    }

    /// Writes the rule's parameters, the weights (for a multiplicative update: the log-weights
    /// and the Winnow weights) and a fresh per-submit control word.
    fn upload_rule_and_weights(&mut self, w: &[f32], rule: &BatchRule) {
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
        ctx.queue
            .write_buffer(&self.params_buf, 0, bytemuck::bytes_of(&self.params));
        if rule.update == Update::Multiplicative {
            // w holds log-weights: they go to aux[3 len..], the weights used to w_buf.
            let mut beta = vec![0f32; w.len()];
            winnow_weights(w, &mut beta);
            ctx.queue
                .write_buffer(&self.w_buf, 0, bytemuck::cast_slice(&beta));
            let w_bytes = (w.len() * 4) as u64;
            ctx.queue
                .write_buffer(&self.aux, 3 * w_bytes, bytemuck::cast_slice(w));
        } else {
            ctx.queue
                .write_buffer(&self.w_buf, 0, bytemuck::cast_slice(w));
        }
        ctx.queue
            .write_buffer(&self.ctl_buf, 0, bytemuck::cast_slice(&[0u32, 0u32]));
    }

    /// The dispatches of one epoch, in order: (entry, segment or none, grid).
    fn epoch_dispatches(&self) -> Vec<(Entry, Option<usize>, (u32, u32))> {
        let len = self.heads * (self.d + 1);
        let tiles = len.div_ceil(self.plan.shape.tc as usize) as u32;
        let per_dim = self.ctx.limits.max_compute_workgroups_per_dimension as usize;
        let mut out = Vec::new();
        for (k, seg) in self.segs.iter().enumerate() {
            if seg.fused {
                out.push((Entry::Fused, Some(k), (seg.chunks as u32, 1)));
                continue;
            }
            out.push((Entry::Margins, Some(k), (seg.margin_wgs as u32, 1)));
            if seg.gather {
                let wgs = len.div_ceil((self.plan.shape.wg / self.plan.shape.tpc) as usize);
                out.push((Entry::Gather, Some(k), fold(wgs, per_dim)));
            } else if !seg.held_out {
                out.push((Entry::Accumulate, Some(k), (tiles, seg.chunks as u32)));
            }
        }
        if self.params.total_chunks as usize > TREE_MIN_CHUNKS {
            out.push((Entry::ApplyTree, None, fold(len, per_dim)));
        } else {
            let wgs = len.div_ceil(self.plan.shape.wg as usize) as u32;
            out.push((Entry::Apply, None, (wgs, 1)));
        }
        out.push((Entry::Finalize, None, (1, 1)));
        out
    }

    fn pipe(&self, e: Entry) -> &wgpu::ComputePipeline {
        match e {
            Entry::Margins => &self.pipes.margins,
            Entry::Fused => &self.pipes.fused,
            Entry::Accumulate => &self.pipes.accumulate,
            Entry::Gather => &self.pipes.gather,
            Entry::Apply => &self.pipes.apply,
            Entry::ApplyTree => &self.pipes.apply_tree,
            Entry::Finalize => &self.pipes.finalize,
            Entry::Scores => &self.pipes.scores,
        }
    }

    /// Runs up to `epochs` epochs from `w` with every dispatch in its own compute pass between
    /// two timestamps, and returns each entry point's time per epoch; `None` when the adapter
    /// has no timestamp queries. The bound data's state moves on by the epochs run; `w` is
    /// left as it was.
    pub fn profile(
        &mut self,
        w: &[f32],
        rule: &BatchRule,
        epochs: usize,
    ) -> Result<Option<KernelProfile>> {
        let ctx = self.ctx;
        if !ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY) || self.stream.is_some() {
            return Ok(None);
        }
        let plan = self.epoch_dispatches();
        // wgpu allows 4096 queries in a set; two per dispatch.
        let epochs = epochs
            .min(4096 / (2 * plan.len()))
            .min(self.epochs_per_submit)
            .max(1);
        let count = 2 * plan.len() * epochs;
        let ticks_bytes = (count * 8) as u64;
        let stats_bytes = (epochs * size_of::<EpochOut>()) as u64;
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rosenblatt.profile_resolve"),
            size: ticks_bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = self.staging("rosenblatt.profile_readback", ticks_bytes + stats_bytes);
        ctx.scoped("profiling batch epochs", || {
            self.upload_rule_and_weights(w, rule);
            let qs = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rosenblatt.profile"),
                ty: wgpu::QueryType::Timestamp,
                count: count as u32,
            });
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rosenblatt.profile"),
                });
            let mut q = 0u32;
            for _ in 0..epochs {
                for &(entry, seg, grid) in &plan {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("rosenblatt.profile_pass"),
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &qs,
                            beginning_of_pass_write_index: Some(q),
                            end_of_pass_write_index: Some(q + 1),
                        }),
                    });
                    q += 2;
                    pass.set_bind_group(0, &self.global, &[]);
                    if let Some(k) = seg {
                        pass.set_bind_group(1, &self.segs[k].bind, &[]);
                    } else {
                        pass.set_bind_group(1, &self.segs[0].bind, &[]);
                    }
                    pass.set_pipeline(self.pipe(entry));
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            enc.resolve_query_set(&qs, 0..count as u32, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, ticks_bytes);
            enc.copy_buffer_to_buffer(&self.stats_buf, 0, &staging, ticks_bytes, stats_bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        ctx.check("profiling batch epochs")?;
        let ticks: &[u64] = bytemuck::cast_slice(&bytes[..ticks_bytes as usize]);
        let period = ctx.queue.get_timestamp_period() as f64;
        let mut kernels: Vec<(String, f64)> = Vec::new();
        for (i, &(entry, _, _)) in plan.iter().enumerate() {
            let mut ns = 0f64;
            for e in 0..epochs {
                let at = 2 * (e * plan.len() + i);
                ns += ticks[at + 1].saturating_sub(ticks[at]) as f64 * period;
            }
            let ms = ns / 1e6 / epochs as f64;
            match kernels.iter_mut().find(|(n, _)| n == entry.name()) {
                Some(k) => k.1 += ms,
                None => kernels.push((entry.name().to_string(), ms)),
            }
        }
        let last: EpochOut = bytemuck::pod_read_unaligned(
            &bytes[ticks_bytes as usize + (epochs - 1) * size_of::<EpochOut>()..]
                [..size_of::<EpochOut>()],
        );
        Ok(Some(KernelProfile {
            epochs,
            kernels,
            plan_bytes: self.plan_bytes(last.mistakes as u64),
            x_bytes: self.x_bytes,
        }))
    }

    /// Bytes the epoch's kernels read and write by the plan, with `mistakes` training rows
    /// read again by `accumulate` (an upper bound: a row with a mistake on any head).
    fn plan_bytes(&self, mistakes: u64) -> u64 {
        let (n, d, k) = (self.n as u64, self.d as u64, self.heads as u64);
        let len = k * (d + 1);
        let held: u64 = self
            .segs
            .iter()
            .filter(|s| s.held_out)
            .map(|s| s.n as u64 * (d + 1) * 4)
            .sum();
        let weights = if self.data_flags & FLAG_WEIGHTS != 0 {
            n * 4
        } else {
            0
        };
        let eb = self.storage.bytes() as u64;
        let partials = self.params.total_chunks as u64 * len * 4;
        if self.nnz > 0 {
            // CSR: `margins` reads the values, columns and row starts (and a weight per
            // value); `gather` reads the CSC copy (column starts, rows, positions), the values
            // again and a coefficient per entry.
            let gathers = self.segs.iter().filter(|s| s.gather).count() as u64;
            let margins = self.x_bytes + self.nnz * 4 * k + n * 4 + weights + n * k * 4;
            let gather = gathers * (d + 1) * 4 + self.nnz * (8 + eb + 4 * k);
            return margins + gather + 2 * partials + 6 * len * 4;
        }
        let margins = n * d * eb + n * 4 + weights + n * k * 4 + held;
        // The fused pass reads a chunk's mistake rows again from cache, not memory.
        let fused = self.segs.iter().any(|s| s.fused);
        let again = if fused { 0 } else { mistakes.min(n) * d * eb };
        let accumulate = n * k * 4 + again;
        margins + accumulate + 2 * partials + 6 * len * 4
    }

    /// Records `k` epochs of the dispatches `plan` into `enc`. Streamed X: before a
    /// segment's first kernel, what is recorded goes to the queue and the segment's rows to its
    /// slot (the other slot's segment may still be running); the queue keeps them in order.
    fn record(
        &self,
        enc: &mut wgpu::CommandEncoder,
        plan: &[(Entry, Option<usize>, (u32, u32))],
        k: usize,
    ) {
        if self.stream.is_none() {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("rosenblatt.batch_epochs"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &self.global, &[]);
            if let Some(first) = self.segs.first() {
                // Entries without a segment still need one bound (a plan may start with them).
                pass.set_bind_group(1, &first.bind, &[]);
            }
            for _ in 0..k {
                for &(entry, seg, grid) in plan {
                    if let Some(s) = seg {
                        pass.set_bind_group(1, &self.segs[s].bind, &[]);
                    }
                    pass.set_pipeline(self.pipe(entry));
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            return;
        }
        for _ in 0..k {
            let mut last = None;
            for &(entry, seg, grid) in plan {
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
                pass.set_bind_group(0, &self.global, &[]);
                pass.set_bind_group(1, &self.segs[seg.or(last).unwrap_or(0)].bind, &[]);
                pass.set_pipeline(self.pipe(entry));
                pass.dispatch_workgroups(grid.0, grid.1, 1);
            }
        }
    }

    /// The middle of a data-parallel epoch (`enc` holds its segment kernels): reads back the
    /// chunk sums and the workgroups' counts, adds the chunks in order (as `apply` does) and the
    /// counts, sums both over the processes, and writes the totals back as chunk 0 and
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
            None => self.staging("rosenblatt.reduce_readback", (p_bytes + s_bytes).max(4)),
        };
        ctx.scoped("running batch epochs", || {
            if p_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.partials, 0, &staging, 0, p_bytes);
            }
            if s_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.wg_stats, 0, &staging, p_bytes, s_bytes);
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
        let mut stats = vec![
            WgStat {
                mistakes: 0,
                criterion: 0.0,
                held_out: 0,
                weighted: 0.0,
            };
            wgs.max(1)
        ];
        stats[0] = WgStat {
            mistakes: u32::try_from(counts[0] as u64).unwrap_or(u32::MAX),
            criterion: counts[1] as f32,
            held_out: u32::try_from(counts[2] as u64).unwrap_or(u32::MAX),
            weighted: counts[3] as f32,
        };
        ctx.scoped("running batch epochs", || {
            ctx.queue
                .write_buffer(&self.partials, 0, bytemuck::cast_slice(&chunk0));
            ctx.queue
                .write_buffer(&self.wg_stats, 0, bytemuck::cast_slice(&stats));
        })
    }

    fn submit_epochs(
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
        let len = self.heads * (self.d + 1);
        let stats_bytes = (k * size_of::<EpochOut>()) as u64;
        let w_bytes = (len * 4) as u64;

        let multiplicative = rule.update == Update::Multiplicative;
        let plan = self.epoch_dispatches();
        // A data-parallel epoch stops after the segments' kernels, for the sums over processes.
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
        ctx.scoped("running batch epochs", || {
            enc.copy_buffer_to_buffer(&self.ctl_buf, 0, &self.readback, 0, CTL as u64);
            enc.copy_buffer_to_buffer(&self.stats_buf, 0, &self.readback, CTL as u64, stats_bytes);
            let at = CTL as u64 + stats_bytes;
            if multiplicative {
                enc.copy_buffer_to_buffer(&self.aux, 3 * w_bytes, &self.readback, at, w_bytes);
            } else {
                enc.copy_buffer_to_buffer(&self.w_buf, 0, &self.readback, at, w_bytes);
            }
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&self.readback)?;
        ctx.check("running batch epochs")?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let run = (ctl.epoch as usize).min(k);
        let held = self.data_flags & FLAG_HELD_OUT != 0;
        let weighted = self.data_flags & FLAG_WEIGHTS != 0;
        let stats = (0..run)
            .map(|e| {
                let at = CTL + e * size_of::<EpochOut>();
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
            .collect();
        let wb = &bytes[CTL + stats_bytes as usize..];
        w.copy_from_slice(bytemuck::cast_slice(&wb[..len * 4]));
        let mut stop = match ctl.done {
            STOP_CONVERGED => Some(StopReason::Converged),
            STOP_TOLERANCE => Some(StopReason::Tolerance),
            STOP_PATIENCE => Some(StopReason::Patience),
            _ => None,
        };
        if let Some(r) = self.reduce {
            // (One epoch a submit here.)
            stop = crate::backend::agreed_stop(r, stop);
        }
        Ok((stats, stop))
    }

    /// The pocket (with its figure and epochs), the average sum (with its epochs) and the
    /// stop rules' memory, as kept by the rules used.
    pub fn extras(&mut self) -> Result<Extras> {
        let ctx = self.ctx;
        let len = (self.heads * (self.d + 1) * 4) as u64;
        let staging = self.staging("rosenblatt.extras_readback", CTL as u64 + 2 * len);
        ctx.scoped("reading the pocket and average", || {
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rosenblatt.extras"),
                });
            enc.copy_buffer_to_buffer(&self.ctl_buf, 0, &staging, 0, CTL as u64);
            enc.copy_buffer_to_buffer(&self.aux, len, &staging, CTL as u64, 2 * len);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let floats: &[f32] = bytemuck::cast_slice(&bytes[CTL..]);
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
        let ctx = self.ctx;
        let staging = self.staging(
            "rosenblatt.scores_readback",
            (self.n * self.heads * 4) as u64,
        );
        ctx.scoped("scoring", || {
            ctx.queue
                .write_buffer(&self.w_buf, 0, bytemuck::cast_slice(w));
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rosenblatt.scores"),
                });
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
                pass.set_bind_group(0, &self.global, &[]);
                pass.set_pipeline(&self.pipes.scores);
                pass.set_bind_group(1, &seg.bind, &[]);
                pass.dispatch_workgroups(seg.margin_wgs as u32, 1, 1);
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
        Ok(bytemuck::cast_slice(&bytes).to_vec())
    }
}

/// The binding size the plan works with: the device's storage-binding and buffer limits, a
/// test override, and 2 GiB.
fn binding_limit(limits: &wgpu::Limits, max_binding: Option<u64>) -> u64 {
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(max_binding.unwrap_or(u64::MAX))
        .min(1 << 31)
}

/// Plans CSR rows: `n` rows (training and held-out) with `nnz` stored values over `d` columns.
/// Segments are cut by [`sparse_segments`]; what the plan fixes is the shape and the checks
/// that the weights and a column's start table fit.
fn plan_sparse(
    n: usize,
    d: usize,
    nnz: usize,
    heads: usize,
    storage: Storage,
    limits: &wgpu::Limits,
) -> Result<Plan> {
    if heads > MAX_HEADS {
        return Err(Error::TooLarge(format!(
            "{heads} classes: the GPU pipelines handle at most {MAX_HEADS}"
        )));
    }
    let binding = binding_limit(limits, None);
    let len = heads.max(1) as u64 * (d as u64 + 1);
    if len * 4 > binding || (d as u64 + 1) * 4 > binding {
        return Err(Error::TooLarge(format!(
            "{d} features: the weights or the column table are more than the GPU binds at once \
             ({binding} bytes)"
        )));
    }
    let wg = workgroup_size(limits, 256)?;
    let shape = Shape {
        storage: storage.code(),
        ..Shape::for_sparse(n, d, nnz, heads, wg)
    };
    let per_dim = limits.max_compute_workgroups_per_dimension as u64;
    // `gather` runs WG / TPC columns per workgroup.
    if len.div_ceil((wg / shape.tpc).max(1) as u64) > per_dim * per_dim {
        return Err(Error::TooLarge(format!(
            "{d} features need more workgroups than the GPU dispatches ({per_dim} per dimension)"
        )));
    }
    Ok(Plan {
        seg_rows: 0,
        chunk_rows: n.max(1),
        margin_wgs_cap: (per_dim as usize).min(4096),
        shape,
    })
}

/// Cuts CSR rows into segments (start, rows) whose buffers each fit `binding` bytes: the
/// values, the row starts with the columns, the per-row outputs, and for training segments
/// (`gather`) the column-major copy (column starts, rows, positions). A row that alone does
/// not fit is an error.
fn sparse_segments(
    c: CsrView<'_>,
    d: usize,
    heads: usize,
    binding: u64,
    gather: bool,
) -> Result<Vec<(usize, usize)>> {
    let eb = c.values.storage().bytes() as u64;
    let fits = |rows: u64, nnz: u64| {
        nnz * eb + 3 <= binding
            && (rows + 1 + nnz) * 4 <= binding
            && rows * heads.max(1) as u64 * 4 <= binding
            && (!gather || (d as u64 + 1 + 2 * nnz) * 4 <= binding)
    };
    let mut out = Vec::new();
    let mut start = 0;
    while start < c.n() {
        let mut end = start;
        while end < c.n()
            && fits(
                (end + 1 - start) as u64,
                (c.indptr[end + 1] - c.indptr[start]) as u64,
            )
        {
            end += 1;
        }
        if end == start {
            return Err(Error::TooLarge(format!(
                "row {} has {} stored values, more than the GPU binds at once ({binding} bytes)",
                start + 1,
                c.indptr[start + 1] - c.indptr[start]
            )));
        }
        out.push((start, end - start));
        start = end;
    }
    Ok(out)
}

/// The folded grid for `wgs` workgroups: (x, y) with x at most the per-dimension limit.
fn fold(wgs: usize, per_dim: usize) -> (u32, u32) {
    let per_dim = per_dim.max(1);
    (
        wgs.clamp(1, per_dim) as u32,
        wgs.div_ceil(per_dim).max(1) as u32,
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan for sizes that stress the reduction: 16.7M rows of one feature (the issue's
    /// worst case for a serial sum over chunks), n < the tree's threshold, and d = 1.
    #[test]
    fn plans_keep_every_dispatch_within_the_limits() {
        let l = wgpu::Limits::default();
        let per_dim = l.max_compute_workgroups_per_dimension as usize;
        for (n, d, heads) in [
            (16_777_216, 1, 1),
            (1, 1, 1),
            (4_000, 1, 1),
            (1 << 20, 64, 10),
        ] {
            let p = plan(n, d, heads, Storage::F32, &l, None).unwrap();
            let chunks = n.div_ceil(p.chunk_rows);
            let len = heads * (d + 1);
            assert!(p.chunk_rows >= 64, "{n} x {d}: {p:?}");
            // The partials stay within their budget and each segment's chunk grid fits.
            assert!((chunks * len * 4) as u64 <= PARTIALS_BUDGET.max(64 * len as u64 * 4));
            assert!(p.seg_rows.div_ceil(p.chunk_rows) <= per_dim, "{n} x {d}");
            // Many chunks go through the tree: one workgroup per weight, a grid that fits.
            if chunks > TREE_MIN_CHUNKS {
                assert!(len.min(per_dim) <= per_dim && len.div_ceil(per_dim) <= per_dim);
            }
        }
        // 16.7M x 1: tens of thousands of chunks (their grid within the 65,535 limit, whole
        // groups of 256 rows each), summed by 2 workgroups of a tree each instead of one
        // thread reading them all in turn.
        let p = plan(16_777_216, 1, 1, Storage::F32, &l, None).unwrap();
        let chunks = 16_777_216usize.div_ceil(p.chunk_rows);
        assert!(chunks > 30_000 && chunks <= per_dim, "{chunks} chunks");
        assert_eq!(p.chunk_rows % 256, 0);
    }
}
