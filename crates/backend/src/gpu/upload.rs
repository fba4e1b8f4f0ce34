//! How rows become a resident set, in three steps: the plan (plan.rs) for the rows and the
//! device, the segments' layout ([`SegMeta`]: rows, partials and workgroups of each, before
//! any buffer exists), then the buffers and bind groups ([`Layout::upload`]).

use super::batch::{BatchPipelines, Entry, KT_MAX, LONG_WALK, LONG_WGS};
use super::buffers::{dense_buf, entire, host_staging_usage, init_buf, label_bytes, storage_buf};
use super::context::GpuContext;
use super::mirror::{Control, EpochOut, Params, Segment, WgStat, ROLE_HELD_OUT, ROLE_TRAIN};
use super::plan::{
    binding_limit, device_workgroups, grid_floor, padded, plan, plan_sparse, rows_in_flight,
    rows_per_step, segment_grid, software_steps, sparse_segments, tile_rows, tpr_target, Plan,
    PlanOptions, SegUse, GL_KT_CAP, TARGET_TPR,
};
use crate::error::{Error, Result};
pub use crate::gpu_options::ResidentOptions;
use crate::{
    CsrView, DataView, Features, Matrix, MatrixBuf, Storage, MAX_HEADS, TRAFFIC_CATEGORIES,
};

/// Bytes of the control word.
pub(super) const CTL: usize = size_of::<Control>();

/// Submits in flight at once while training (each with its own read-back buffer).
pub(super) const IN_FLIGHT: usize = 2;

/// Words of the traffic counters: [entry][category][load, store] as (low, high) pairs, then
/// per entry the most words one thread loaded.
pub(super) const COUNTER_WORDS: usize =
    Entry::ALL.len() * TRAFFIC_CATEGORIES.len() * 2 * 2 + Entry::ALL.len();

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
    /// Its long columns, each summed by a workgroup of its own in `gather`.
    pub(super) long_cols: usize,
    pub(super) coef: wgpu::Buffer,
    pub(super) bind: wgpu::BindGroup,
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
    /// One-vs-rest class factors ([`TrainView::own`](crate::TrainView::own)).
    pub own: Option<&'a [f32]>,
    /// Held-out rows and their labels.
    pub held: Option<(DataView<'a>, &'a [f32])>,
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

/// Bytes of staging that one submit of mapped streaming should move at least: epochs per
/// submit are this over X's staged bytes (1 to 64).
const MAPPED_SUBMIT_BYTES: u64 = 4 << 30;

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
    /// CSR: its long rows (scored by the last workgroups of `margins`).
    long_rows: usize,
}

/// One segment of streamed X on the host: its values (the caller's bytes: dense rows of
/// `d` values, padded on upload) and, for CSR rows, the arrays `segment_arrays` makes (row
/// starts with columns, the column-major copy).
pub(super) struct StreamSeg<'c> {
    pub(super) x: &'c [u8],
    pub(super) dense_rows: Option<usize>,
    pub(super) csr: Vec<u32>,
    pub(super) csc: Vec<u32>,
}

/// A segment of streamed X in host staging buffers ([`host_staging_usage`]),
/// filled once at bind time: every epoch the queue copies them into the segment's slot, by
/// commands recorded with the kernels, so no host work stands between epochs.
pub(super) struct MappedSeg {
    pub(super) x: wgpu::Buffer,
    pub(super) csr: Option<wgpu::Buffer>,
    pub(super) csc: Option<wgpu::Buffer>,
}

/// Where streamed X comes from each epoch.
pub(super) enum Feed<'c> {
    /// The host's arrays, written into the segment's slot (`write_buffer`) before its
    /// kernels: a submit per segment and one epoch a submit. Used where the host cannot hold
    /// a staged copy of X.
    Writes(Vec<StreamSeg<'c>>),
    /// Staged copies ([`MappedSeg`]).
    Mapped(Vec<MappedSeg>),
    /// Staging bound as the segments' own arrays, which the kernels read in place.
    InPlace(Vec<MappedSeg>),
}

impl Feed<'_> {
    /// Bytes one epoch moves to the device.
    pub(super) fn epoch_bytes(&self) -> u64 {
        match self {
            Feed::Writes(v) => v
                .iter()
                .map(|s| (s.x.len() + 4 * (s.csr.len() + s.csc.len())) as u64)
                .sum(),
            Feed::Mapped(v) | Feed::InPlace(v) => v
                .iter()
                .map(|m| {
                    m.x.size()
                        + m.csr.as_ref().map_or(0, |b| b.size())
                        + m.csc.as_ref().map_or(0, |b| b.size())
                })
                .sum(),
        }
    }
}

/// Pieces of this many bytes are copied into staging by the threads of the pool.
const COPY_PIECE: usize = 4 << 20;

/// How the kernels reach a staging buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Staging {
    /// Copied into the segment's slot on the device each epoch.
    Copied,
    /// Bound as the segment's own array and read in place.
    InPlace,
}

/// A staging buffer of `len` bytes (rounded up to 4) for copies to the device, written once
/// by `fill` while mapped at creation (zeros elsewhere).
fn staging_filled(
    ctx: &GpuContext,
    label: &str,
    len: usize,
    staging: Staging,
    fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
) -> wgpu::Buffer {
    let usage = match staging {
        Staging::InPlace => host_staging_usage(ctx) | wgpu::BufferUsages::STORAGE,
        Staging::Copied => host_staging_usage(ctx),
    };
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (len as u64).max(16).next_multiple_of(16),
        usage,
        mapped_at_creation: true,
    });
    if len > 0 {
        // (A buffer mapped at creation always maps.)
        if let Ok(mut view) = buf.get_mapped_range_mut(..) {
            fill(view.slice(..len));
        }
    }
    buf.unmap();
    buf
}

/// Copies `src` into `dst` (of `src`'s length or more): rows of `row` bytes to rows of `prow`
/// bytes (`row == prow`: one run), in pieces of about [`COPY_PIECE`] bytes on the pool's
/// threads (one thread copies host memory at a few GB/s; the staging is written once, at
/// bind time, but for all of X).
fn par_rows(mut dst: wgpu::WriteOnly<'_, [u8]>, src: &[u8], row: usize, prow: usize) {
    use rayon::prelude::*;
    let (row, prow) = if row == prow || row == 0 {
        (1, 1)
    } else {
        (row, prow)
    };
    let rows = src.len() / row;
    assert!(rows * prow <= dst.len() && rows * row == src.len());
    let base = Base(dst.as_raw_ptr().cast::<u8>().as_ptr());
    let per = (COPY_PIECE / prow).max(1);
    (0..rows.div_ceil(per)).into_par_iter().for_each(|p| {
        let base = &base;
        for r in p * per..((p + 1) * per).min(rows) {
            let from = &src[r * row..(r + 1) * row];
            // SAFETY: `dst` is a write mapping of at least rows * prow bytes, borrowed
            // mutably for this call; each row r writes only its bytes r * prow .. r * prow +
            // row, so the pieces write disjoint bytes, and only write.
            unsafe {
                std::ptr::copy_nonoverlapping(from.as_ptr(), base.0.add(r * prow), row);
            }
        }
    });
}

/// The start of a write mapping that the pool's threads write disjoint parts of.
struct Base(*mut u8);
// SAFETY: the threads write disjoint bytes (see `par_rows`) while the mapping is borrowed.
unsafe impl Sync for Base {}

/// Segment `k`'s host arrays staged ([`MappedSeg`]); dense rows padded to units of 4 values.
fn mapped_seg(
    ctx: &GpuContext,
    k: usize,
    seg: &StreamSeg<'_>,
    d: usize,
    storage: Storage,
    staging: Staging,
) -> MappedSeg {
    let label = |what: &str| format!("rosenblatt.{what}_staged[{k}]");
    let x = match seg.dense_rows {
        Some(rows) => {
            let eb = storage.bytes();
            let (row, prow) = (d * eb, padded(d) * eb);
            staging_filled(ctx, &label("x"), rows * prow, staging, |v| {
                par_rows(v, seg.x, row, prow)
            })
        }
        None => staging_filled(ctx, &label("x"), seg.x.len(), staging, |v| {
            par_rows(v, seg.x, 0, 0)
        }),
    };
    let words = |what: &str, v: &[u32]| {
        (!v.is_empty()).then(|| {
            let b: &[u8] = bytemuck::cast_slice(v);
            staging_filled(ctx, &label(what), b.len(), staging, |w| {
                par_rows(w, b, 0, 0)
            })
        })
    };
    MappedSeg {
        x,
        csr: words("csr", &seg.csr),
        csc: words("csc", &seg.csc),
    }
}

/// A device slot of streamed X: one buffer per array of a segment.
pub(super) struct Slot {
    pub(super) x: wgpu::Buffer,
    pub(super) csr: wgpu::Buffer,
    pub(super) csc: wgpu::Buffer,
}

/// The rows of `x` to upload: the caller's, or f32 copies where training and held-out rows
/// differ in storage or form (the rare case; streaming refuses it).
pub(super) struct Prepared<'a> {
    pub(super) x: Matrix<'a>,
    pub(super) held_x: Option<Matrix<'a>>,
    pub(super) mismatch: bool,
}

pub(super) fn prepare<'a>(
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
    crate::check_widened(rows.data)?;
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
pub(super) struct Sizes<'a> {
    pub(super) x: Matrix<'a>,
    pub(super) held_x: Option<Matrix<'a>>,
    pub(super) n: usize,
    pub(super) held_n: usize,
    pub(super) d: usize,
    pub(super) heads: usize,
}

/// The plan for these rows on this device.
fn make_plan(
    ctx: &GpuContext,
    s: Sizes<'_>,
    opts: &ResidentOptions,
    tpr_target: usize,
) -> Result<Plan> {
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
                tpr_target,
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
    seg_use: SegUse,
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
    let ranges = |m: Matrix<'_>, total: usize, seg_use: SegUse| -> Result<Vec<(usize, usize)>> {
        match m {
            Matrix::Csr(c) => sparse_segments(c, d, heads, seg_binding, seg_use),
            Matrix::Dense(_) => Ok((0..total)
                .step_by(plan.seg_rows.max(1))
                .map(|a| (a, plan.seg_rows.min(total - a)))
                .collect()),
        }
    };
    let sparse = x.is_sparse();
    let mut roles = vec![(ROLE_TRAIN, x, ranges(x, n, seg_use)?)];
    if let Some(hx) = held_x {
        roles.push((ROLE_HELD_OUT, hx, ranges(hx, held_n, SegUse::Scoring)?));
    }
    let step = rows_per_step(&plan.shape, heads);
    let groups = (plan.shape.wg / plan.shape.tpr) as usize;
    let mut out = Vec::new();
    let (mut chunk_base, mut wg_base) = (0usize, 0usize);
    for (role, m, list) in roles {
        for (start, rows) in list {
            let train = role == ROLE_TRAIN && seg_use == SegUse::Training;
            let (chunks, wgs, chunk_rows, long_rows) = if plan.register_pass() {
                let words = x_words(m, rows, d).max(1);
                let (g, run) = match opts.workgroups {
                    Some(g) => segment_grid(rows, words, None, (g, 1), step, plan.max_steps),
                    None => segment_grid(
                        rows,
                        words,
                        train.then_some(len),
                        (plan.grid, grid_floor(plan.grid, plan.max_steps)),
                        step,
                        plan.max_steps,
                    ),
                };
                (if train { g } else { 0 }, g, run, 0)
            } else {
                // A sparse training segment sums its rows in one partial (`gather`).
                let chunks = match () {
                    _ if !train => 0,
                    _ if sparse => 1,
                    _ => rows.div_ceil(plan.chunk_rows),
                };
                // Long CSR rows get the last workgroups (at most LONG_WGS) of `margins`.
                let long = long_rows(m, start, rows, long_row_over(plan)).len();
                let wgs = rows.div_ceil(groups).clamp(1, plan.margin_wgs_cap) + long.min(LONG_WGS);
                let chunk_rows = if sparse { rows.max(1) } else { plan.chunk_rows };
                (chunks, wgs, chunk_rows, long)
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
                long_rows,
            });
            chunk_base += chunks;
            wg_base += wgs;
        }
    }
    Ok(out)
}

/// 32-bit words of `rows` rows of `m` as the device stores them: dense rows padded to whole
/// units of 4 values, CSR values as they are (whole words).
pub(super) fn x_words(m: Matrix<'_>, rows: usize, d: usize) -> u64 {
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
    let block = ctx.params_usage() | wgpu::BufferUsages::COPY_DST;
    let params_buf = init_buf(ctx, "rosenblatt.params", bytemuck::bytes_of(params), block);
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
        let (a, b, c) = seg_bytes(m, src, d);
        (x_max, csr_max, csc_max) = (x_max.max(a), csr_max.max(b), csc_max.max(c));
    }
    [0, 1].map(|i| Slot {
        x: storage_buf(ctx, &format!("rosenblatt.x_slot[{i}]"), x_max),
        csr: storage_buf(ctx, &format!("rosenblatt.csr_slot[{i}]"), csr_max),
        csc: storage_buf(ctx, &format!("rosenblatt.csc_slot[{i}]"), csc_max),
    })
}

/// The most bytes of segment `m`'s X, CSR and CSC arrays, its rows taken from `src`.
fn seg_bytes(m: &SegMeta, src: Matrix<'_>, d: usize) -> (u64, u64, u64) {
    let eb = src.storage().bytes() as u64;
    match src {
        Matrix::Dense(_) => ((m.n * padded(d)) as u64 * eb, 0, 0),
        Matrix::Csr(c) => {
            let nnz = (c.indptr[m.start + m.n] - c.indptr[m.start]) as u64;
            // Row starts, columns, and at most n long rows with their count.
            let csr = (2 * (m.n as u64 + 1) + nnz) * 4;
            // Column starts, rows, values, and at most d long columns with their count.
            let csc = match m.role == ROLE_TRAIN {
                true => (2 * (d as u64 + 1) + 2 * nnz) * 4,
                false => 0,
            };
            (nnz * eb, csr, csc)
        }
    }
}

/// What a segment's own buffers hold besides X: its rows' labels and weights, and the shape
/// of its outputs.
struct SegRows<'a> {
    /// The rows' labels (none for scoring).
    y: Option<&'a [f32]>,
    /// The rows' weights.
    sw: Option<&'a [f32]>,
    /// Weight vectors scored.
    heads: usize,
    /// Sparse training by gather: the long columns' count.
    gather: Option<usize>,
}

/// A segment's own buffers (its parameter block, labels, row weights, outputs) and bind group; `arrays`
/// are its X, CSR and CSC buffers. X is bound as words, pairs and quadruples (bindings 1, 7, 8).
fn segment_buffers(
    ctx: &GpuContext,
    batch: &BatchPipelines,
    (k, m): (usize, &SegMeta),
    arrays: [&wgpu::Buffer; 3],
    rows: SegRows<'_>,
) -> SegBuf {
    let SegRows {
        y,
        sw,
        heads,
        gather,
    } = rows;
    let long_cols = gather.unwrap_or(0);
    let gather = gather.is_some();
    let seg = Segment {
        n: m.n as u32,
        chunk_base: m.chunk_base as u32,
        wg_base: m.wg_base as u32,
        chunk_rows: m.chunk_rows as u32,
        role: m.role,
        wgs: m.wgs as u32,
        long_cols: long_cols as u32,
        long_rows: m.long_rows as u32,
    };
    let block = ctx.params_usage() | wgpu::BufferUsages::COPY_DST;
    let ubuf = init_buf(ctx, "rosenblatt.segment", bytemuck::bytes_of(&seg), block);
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
    // Sparse training: the `margins` workgroups' per-head bias sums after the coefficients.
    let bias_sums = if gather { m.wgs * heads } else { 0 };
    let coef = storage_buf(
        ctx,
        &format!("rosenblatt.coef[{k}]"),
        ((m.n * heads + bias_sums) * 4) as u64,
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
        long_cols,
        coef,
        bind,
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
/// and for a training segment (`gather`: the length over which a column is long) the CSC
/// copy: column starts, the row of each entry and its value (f32 bits), rows ascending within
/// a column, then the number of long columns and their indices. Dense rows give empty index
/// arrays.
fn segment_arrays<'a>(
    m: Matrix<'a>,
    start: usize,
    len: usize,
    d: usize,
    long_row_over: usize,
    gather: Option<usize>,
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
    let long = long_rows(m, start, len, long_row_over);
    csr.push(long.len() as u32);
    csr.extend_from_slice(&long);
    let mut csc = Vec::new();
    if let Some(long_over) = gather {
        // [column starts | row of each entry | its value as f32 bits], column by column, then
        // the long columns (more than `long_over` entries): their count and indices.
        let values = c.values.slice(base..end);
        csc = vec![0u32; d + 1 + 2 * nnz];
        for &j in &c.indices[base..end] {
            csc[j as usize + 1] += 1;
        }
        for j in 0..d {
            csc[j + 1] += csc[j];
        }
        let mut next: Vec<u32> = csc[..d].to_vec();
        let (rows_at, vals_at) = (d + 1, d + 1 + nnz);
        for r in 0..len {
            for p in c.indptr[start + r]..c.indptr[start + r + 1] {
                let j = c.indices[p] as usize;
                let q = next[j] as usize;
                csc[rows_at + q] = r as u32;
                csc[vals_at + q] = values.get(p - base).to_bits();
                next[j] += 1;
            }
        }
        let long: Vec<u32> = (0..d)
            .filter(|&j| (csc[j + 1] - csc[j]) as usize > long_over)
            .map(|j| j as u32)
            .collect();
        csc.push(long.len() as u32);
        csc.extend_from_slice(&long);
    }
    (c.values.slice(base..end), csr, csc)
}

/// Checks the rows the GPU takes: at least one row and one feature, and labels -1, +1 or a
/// class index below 64.
pub(super) fn check_rows(rows: Rows<'_>) -> Result<()> {
    let DataView { n, d, .. } = rows.data;
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
    Ok(())
}

/// A resident set before any buffer exists: the rows, the plan, whether X streams, the
/// segments and the epoch's parameters.
pub(super) struct Layout<'a> {
    pub(super) sizes: Sizes<'a>,
    pub(super) plan: Plan,
    streamed: bool,
    /// Streamed from staging ([`Feed::Mapped`]), and read in place ([`Feed::InPlace`]).
    mapped: bool,
    in_place: bool,
    training: bool,
    metas: Vec<SegMeta>,
    pub(super) params: Params,
    pub(super) epochs_per_submit: usize,
}

/// The buffers of a resident set ([`Layout::upload`]).
pub(super) struct Uploaded<'c> {
    pub(super) shared: Shared,
    /// Streamed X: the two device slots, and where each segment comes from.
    pub(super) slots: Option<[Slot; 2]>,
    pub(super) stream: Option<Feed<'c>>,
    pub(super) segs: Vec<SegBuf>,
    pub(super) readbacks: [wgpu::Buffer; IN_FLIGHT],
}

impl<'a> Layout<'a> {
    /// Lays out `prep`, the rows of `rows` to upload, for `heads` heads.
    pub(super) fn new(
        ctx: &GpuContext,
        batch: &BatchPipelines,
        rows: Rows<'_>,
        prep: &Prepared<'a>,
        heads: usize,
        opts: &ResidentOptions,
    ) -> Result<Self> {
        let DataView { n, d, bias, .. } = rows.data;
        let (x, held_x) = (prep.x, prep.held_x);
        let held_n = rows.held.map_or(0, |(h, _)| h.n);
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
        let plan = plan_for(ctx, batch, sizes, opts, streamed.then_some(budget))?;
        let binding = binding_limit(&ctx.limits, opts.max_binding);
        let seg_binding = if streamed && sparse {
            // A streamed CSR segment's three arrays (each within a third) fill half the budget.
            binding.min((budget / 6).max(4))
        } else {
            binding
        };
        let seg_use = match training {
            true => SegUse::Training,
            false => SegUse::Scoring,
        };
        let metas = layout_segments(&plan, sizes, seg_use, seg_binding, opts)?;
        // Streaming from staging holds a second copy of X (with its index arrays) in host
        // memory: where half the budget holds it.
        let staged: u64 = (metas.iter())
            .map(|m| {
                let src = match held_x {
                    Some(h) if m.role == ROLE_HELD_OUT => h,
                    _ => x,
                };
                let (a, b, c) = seg_bytes(m, src, d);
                a + b + c
            })
            .sum();
        let mapped = streamed
            && opts
                .mapped_staging
                .unwrap_or(staged <= crate::limits::budget() / 2);
        // In place: the register pass (X read once an epoch, in order) where staging binds as
        // storage. Dense rows read in place are faster than copied; CSR rows are slower (their
        // kernels' scattered reads go slower over the bus), so sparse rows are copied
        // (docs/performance.md, "Figures behind the code's choices").
        let in_place = mapped
            && ctx
                .features
                .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
            && plan.register_pass()
            && opts.read_in_place != Some(false);
        let epochs_per_submit = opts
            .epochs_per_submit
            .unwrap_or(match (streamed, mapped) {
                (false, _) => 64,
                (true, false) => 1,
                (true, true) => (MAPPED_SUBMIT_BYTES / staged.max(1)).clamp(1, 64) as usize,
            })
            .max(1);
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
            own: own_factors(rows.own),
        };
        Ok(Layout {
            sizes,
            plan,
            streamed,
            mapped,
            in_place,
            training,
            metas,
            params,
            epochs_per_submit,
        })
    }

    /// Makes the buffers and bind groups: the shared ones, each segment's (streaming: the two
    /// slots, and each segment's arrays kept on the host from `rows`), the read-back buffers.
    pub(super) fn upload<'c>(
        &self,
        ctx: &GpuContext,
        batch: &BatchPipelines,
        rows: Rows<'c>,
    ) -> Uploaded<'c> {
        let Sizes {
            x,
            held_x,
            d,
            heads,
            ..
        } = self.sizes;
        let p = &self.params;
        let shared = shared_buffers(ctx, batch, p, p.total_chunks as usize, p.total_wgs as usize);
        let slots = self
            .streamed
            .then(|| stream_slots(ctx, &self.metas, &self.plan, x, held_x, d));
        let (mut stream, mut placed) = (Vec::new(), Vec::new());
        let segs = (self.metas.iter().enumerate())
            .map(|(k, m)| {
                let (seg, host, bound) =
                    self.upload_segment(ctx, batch, rows, k, m, slots.as_ref());
                stream.extend(host);
                placed.extend(bound);
                seg
            })
            .collect();
        let readback_bytes =
            CTL + self.epochs_per_submit * size_of::<EpochOut>() + heads * (d + 1) * 4;
        let readbacks = [0, 1].map(|i| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("rosenblatt.readback[{i}]")),
                size: readback_bytes as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let storage = x.storage();
        let stream = match (self.streamed, self.mapped, self.in_place) {
            (false, _, _) => None,
            (true, false, _) => Some(Feed::Writes(stream)),
            (true, true, true) => Some(Feed::InPlace(placed)),
            (true, true, false) => Some(Feed::Mapped(
                (stream.iter().enumerate())
                    .map(|(k, sg)| mapped_seg(ctx, k, sg, d, storage, Staging::Copied))
                    .collect(),
            )),
        };
        Uploaded {
            shared,
            slots,
            stream,
            segs,
            readbacks,
        }
    }

    /// Segment `k`'s buffers and bind group; streaming, its X arrays stay on the host (the
    /// caller's rows, never converted when streaming) and it binds slot `k % 2`.
    fn upload_segment<'c>(
        &self,
        ctx: &GpuContext,
        batch: &BatchPipelines,
        rows: Rows<'c>,
        k: usize,
        m: &SegMeta,
        slots: Option<&[Slot; 2]>,
    ) -> (SegBuf, Option<StreamSeg<'c>>, Option<MappedSeg>) {
        let Sizes {
            x,
            held_x,
            d,
            heads,
            ..
        } = self.sizes;
        let held_out = m.role == ROLE_HELD_OUT;
        let gather = x.is_sparse() && !held_out && self.training;
        let long_over = gather.then_some(LONG_WALK * self.plan.shape.tpc as usize);
        let (mut host, mut bound) = (None, None);
        let ((xbuf, csr, csc), long_cols) = match slots {
            Some(s) => {
                let orig = match rows.held {
                    Some((h, _)) if held_out => h.x,
                    _ => rows.data.x,
                };
                let (xs, csr, csc) =
                    segment_arrays(orig, m.start, m.n, d, long_row_over(&self.plan), long_over);
                let long_cols = long_count(&csc, d);
                let seg = StreamSeg {
                    x: xs.bytes(),
                    dense_rows: (!orig.is_sparse()).then_some(m.n),
                    csr,
                    csc,
                };
                if self.in_place {
                    // The staging is the segment's arrays (an empty one: a word of zeros).
                    let ms = mapped_seg(ctx, k, &seg, d, orig.storage(), Staging::InPlace);
                    let none = |what| storage_buf(ctx, &format!("rosenblatt.{what}[{k}]"), 16);
                    let arrays = (
                        ms.x.clone(),
                        ms.csr.clone().unwrap_or_else(|| none("csr")),
                        ms.csc.clone().unwrap_or_else(|| none("csc")),
                    );
                    bound = Some(ms);
                    (arrays, long_cols)
                } else {
                    host = Some(seg);
                    let s = &s[k % 2];
                    ((s.x.clone(), s.csr.clone(), s.csc.clone()), long_cols)
                }
            }
            None => {
                let src = match held_x {
                    Some(h) if held_out => h,
                    _ => x,
                };
                resident_arrays(ctx, k, m, src, d, long_row_over(&self.plan), long_over)
            }
        };
        let (ys, ws) = match (rows.held, held_out) {
            (Some((_, hy)), true) => (Some(hy), None),
            _ => (rows.y, rows.sw),
        };
        let range = m.start..m.start + m.n;
        let seg = segment_buffers(
            ctx,
            batch,
            (k, m),
            [&xbuf, &csr, &csc],
            SegRows {
                y: ys.map(|y| &y[range.clone()]),
                sw: ws.map(|w| &w[range.clone()]),
                heads,
                gather: gather.then_some(long_cols),
            },
        );
        (seg, host, bound)
    }
}

/// A resident segment's X, CSR and CSC buffers (dense rows: padded, and empty index arrays).
fn resident_arrays(
    ctx: &GpuContext,
    k: usize,
    m: &SegMeta,
    src: Matrix<'_>,
    d: usize,
    long_row_over: usize,
    gather: Option<usize>,
) -> ((wgpu::Buffer, wgpu::Buffer, wgpu::Buffer), usize) {
    let (xs, csr, csc) = segment_arrays(src, m.start, m.n, d, long_row_over, gather);
    let long = long_count(&csc, d);
    let label = format!("rosenblatt.x[{k}]");
    let xbuf = if src.is_sparse() {
        init_buf(ctx, &label, xs.bytes(), wgpu::BufferUsages::STORAGE)
    } else {
        dense_buf(ctx, &label, xs.bytes(), m.n, d, src.storage())
    };
    let index = |what: &str, v: &[u32]| {
        init_buf(
            ctx,
            &format!("rosenblatt.{what}[{k}]"),
            bytemuck::cast_slice(v),
            wgpu::BufferUsages::STORAGE,
        )
    };
    ((xbuf, index("csr", &csr), index("csc", &csc)), long)
}

/// The rows of CSR `m` in `start .. start + len` (numbered from `start`) with more than
/// `over` entries: those `margins` scores with whole workgroups. None for dense rows.
fn long_rows(m: Matrix<'_>, start: usize, len: usize, over: usize) -> Vec<u32> {
    match m {
        Matrix::Csr(c) => (0..len)
            .filter(|&r| c.indptr[start + r + 1] - c.indptr[start + r] > over)
            .map(|r| r as u32)
            .collect(),
        Matrix::Dense(_) => Vec::new(),
    }
}

/// The length over which a CSR row is long for `plan` (LONG_WALK entries for each thread of
/// its row group).
fn long_row_over(plan: &Plan) -> usize {
    LONG_WALK * plan.shape.tpr as usize
}

/// The number of long columns a CSC copy lists (0 without one).
fn long_count(csc: &[u32], d: usize) -> usize {
    match csc.get(d) {
        Some(&nnz) => csc[d + 1 + 2 * nnz as usize] as usize,
        None => 0,
    }
}

/// The plan for these rows on this device ([`make_plan`]), with the software adapters' step
/// limit, streamed dense segments within half of `stream_budget`, and subgroup lane sums
/// where they serve. Every pipeline it uses is built now, so that a shape the device refuses
/// is an error at bind time.
fn plan_for(
    ctx: &GpuContext,
    batch: &BatchPipelines,
    s: Sizes<'_>,
    opts: &ResidentOptions,
    stream_budget: Option<u64>,
) -> Result<Plan> {
    // Subgroup lane sums on GPUs that have them; software adapters run the tree, which is
    // faster there (docs/performance.md, "GPU": "Software adapters run the workgroup tree").
    let subgroups = opts.subgroups.unwrap_or_else(|| {
        ctx.features.contains(wgpu::Features::SUBGROUP)
            && ctx.info.device_type != wgpu::DeviceType::Cpu
    });
    // With subgroups, rows of at most one subgroup's lanes: then rows can be in flight.
    let tpr_target = if subgroups {
        tpr_target(ctx.info.subgroup_min_size)
    } else {
        TARGET_TPR
    };
    let mut plan = make_plan(ctx, s, opts, tpr_target)?;
    plan.shape.subgroups = subgroups && plan.register_pass();
    plan.shape.rt = rows_in_flight(
        &plan.shape,
        s.heads,
        tpr_target,
        s.x.storage(),
        opts.rows_per_thread,
    );
    plan.shape.tt = tile_rows(
        &plan.shape,
        s.heads,
        tpr_target,
        ctx.info.subgroup_min_size,
        opts.tile_rows,
    );
    if ctx.info.device_type == wgpu::DeviceType::Cpu {
        // Mesa's loop limit counts iterations per row whatever the step: steps of RT (or TT)
        // times the rows, RT (TT) times fewer of them.
        let steps = opts.software_steps.unwrap_or(software_steps(s.heads));
        let per_step = plan.shape.rt.max(plan.shape.tt).max(1) as usize;
        plan.max_steps = Some((steps / per_step).max(1));
    }
    if let (Some(budget), Matrix::Dense(_)) = (stream_budget, s.x) {
        let row_bytes = (padded(s.d) * s.x.storage().bytes()) as u64;
        plan.seg_rows = plan
            .seg_rows
            .min(((budget / 2 / row_bytes.max(1)) as usize).max(1));
    }
    for e in plan_entries(&plan) {
        batch.pipeline(ctx, e, plan.shape)?;
    }
    Ok(plan)
}

/// The one-vs-rest class factors as `Params::own` holds them: `own` and 1 after it (1 for
/// every head without class weights).
fn own_factors(own: Option<&[f32]>) -> [f32; MAX_HEADS] {
    let mut f = [1f32; MAX_HEADS];
    for (o, &v) in f.iter_mut().zip(own.unwrap_or(&[])) {
        *o = v;
    }
    f
}
