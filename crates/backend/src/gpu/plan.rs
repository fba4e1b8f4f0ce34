//! How a data set is laid out on one device: which kernels run the epoch (the register pass,
//! or the two-kernel path for CSR rows and rows too wide for it), their [`Shape`], rows per
//! storage binding, and the persistent grid (workgroups per segment, rows per workgroup).
//! Everything here is arithmetic on sizes and limits, tested without a GPU.

use super::batch::{workgroup_size, Shape, KT_MAX, KV_MAX, RT_MAX, TT_CHOICES, V_MAX};
use crate::error::{Error, Result};
use crate::{Chain, CsrView, Storage, CHAIN_WORKGROUPS_PER_CU, MAX_HEADS};

/// Largest partials buffer the two-kernel path aims for.
pub const PARTIALS_BUDGET: u64 = 64 << 20;

/// Share of one read of X that the register pass lets its partial sums take, written and
/// read back (2% = 1% each way).
pub const PARTIAL_SHARE: f64 = 0.02;

/// Rows a thread group of the register pass aims to cover with one subgroup (TPR <= 32 where
/// the registers allow: the lane sums then need no barrier on subgroup hardware). With
/// subgroups the planner aims for the adapter's smallest subgroup where that is less
/// ([`PlanOptions::tpr_target`]), so that rows can be in flight ([`rows_per_thread`]).
pub const TARGET_TPR: usize = 32;

/// Bytes of X each thread of the register pass aims to have in flight with rows in flight:
/// Little's law (bandwidth times latency) sets the bytes a compute unit of a large GPU needs
/// in flight, and such a unit runs about 1,000 threads of the persistent grid (4 workgroups
/// of 256; docs/performance.md, "Figures behind the code's choices").
pub const FLIGHT_BYTES: usize = 64;

/// Rows each thread loads before it uses the first (the register pass with subgroups, one
/// head block): enough for [`FLIGHT_BYTES`] with V units of `storage` a row, a power of two
/// within RT_MAX.
pub fn rows_per_thread(v: u32, storage: Storage) -> u32 {
    let unit = 4 * storage.bytes() * v.max(1) as usize;
    (FLIGHT_BYTES.div_ceil(unit).next_power_of_two() as u32).clamp(1, RT_MAX)
}

/// Sizes chosen for one data set on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Rows per X segment (one storage binding each).
    pub seg_rows: usize,
    /// Two-kernel path: rows per `accumulate` chunk.
    pub chunk_rows: usize,
    /// Two-kernel path: most `margins` workgroups per segment (they stride over the rows).
    pub margin_wgs_cap: usize,
    /// Register pass: most workgroups per segment (the persistent grid).
    pub grid: usize,
    /// Register pass: most steps of rows per workgroup (software adapters; see
    /// [`software_steps`]), `None`: no limit.
    pub max_steps: Option<usize>,
    /// Pipeline overrides (`shape.v > 0`: the register pass).
    pub shape: Shape,
}

impl Plan {
    /// Whether the epoch is the register pass (one read of X).
    pub fn register_pass(&self) -> bool {
        self.shape.v > 0
    }
}

/// The register pass's layout of one workgroup for some d, K and workgroup size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Threads per row.
    pub tpr: u32,
    /// Units (4 values) of the row per thread.
    pub v: u32,
    /// Heads per thread.
    pub kt: u32,
    /// Head blocks (threads groups sharing a row).
    pub hb: u32,
    /// Rows per step (row groups).
    pub rg: u32,
    /// Units staged in workgroup memory: WG / 2 x V when hb > 1 (rg TPR V <= WG V / hb),
    /// else 1.
    pub xs: u32,
}

/// The register pass's layout for rows of `d` features and `heads` heads in workgroups of
/// `wg` threads with at most `wg_bytes` bytes of workgroup memory and at most `kt_cap`
/// heads per thread: the first of [`register_candidates`] that fits, or `None` where none
/// does (the K x V accumulators and weights of a row exceed the per-thread budget with
/// hb TPR <= wg).
pub fn register_layout(
    d: usize,
    heads: usize,
    wg: u32,
    wg_bytes: u32,
    kt_cap: u32,
) -> Option<Layout> {
    register_layout_for(d, heads, wg, wg_bytes, kt_cap, TARGET_TPR)
}

/// [`register_layout`] aiming for at most `tpr_target` threads a row.
pub fn register_layout_for(
    d: usize,
    heads: usize,
    wg: u32,
    wg_bytes: u32,
    kt_cap: u32,
    tpr_target: usize,
) -> Option<Layout> {
    register_candidates(d, heads, wg, kt_cap, tpr_target)
        .find(|l| l.shape(wg, Storage::F32).workgroup_bytes() <= wg_bytes)
}

/// The register pass's layouts for rows of `d` features and `heads` heads in workgroups of
/// `wg` threads, in the order of preference: the fewest head blocks first (hb = 1 needs no
/// staging), each with the fewest units V (a power of two) that let TPR <= `tpr_target`
/// within the per-thread budget (KT V <= KV_MAX, V <= V_MAX, KT <= `kt_cap`) and hb TPR <= wg.
pub fn register_candidates(
    d: usize,
    heads: usize,
    wg: u32,
    kt_cap: u32,
    tpr_target: usize,
) -> impl Iterator<Item = Layout> {
    let tpr_target = tpr_target.clamp(1, TARGET_TPR);
    let units = d.div_ceil(4).max(1);
    let heads = heads.max(1);
    let kt_cap = kt_cap.clamp(1, KT_MAX) as usize;
    (1..=heads).filter_map(move |hb| {
        let kt = heads.div_ceil(hb);
        if kt > kt_cap || (hb > 1 && (hb - 1) * kt >= heads) {
            return None;
        }
        let v_cap = (V_MAX as usize).min(KV_MAX as usize / kt);
        if v_cap == 0 {
            return None;
        }
        // Powers of two (so that XS is one too): few distinct pipelines.
        let v_cap = 1 << v_cap.ilog2();
        let v = units
            .div_ceil(tpr_target)
            .next_power_of_two()
            .clamp(1, v_cap);
        let tpr = units.div_ceil(v).next_power_of_two();
        if hb * tpr > wg as usize {
            return None;
        }
        // Row groups: a power of two (so that XS is one too), the rest of the threads idle.
        let rg = 1 << (wg as usize / (hb * tpr)).ilog2();
        Some(Layout {
            tpr: tpr as u32,
            v: v as u32,
            kt: kt as u32,
            hb: hb as u32,
            rg: rg as u32,
            // Staging for any row groups of half the workgroup (hb >= 2): one size per V.
            xs: if hb > 1 {
                (wg as usize / 2 * v) as u32
            } else {
                1
            },
        })
    })
}

impl Layout {
    /// The pipeline shape of this layout (the two-kernel path's overrides, which its entry
    /// points do not read, at 1).
    pub fn shape(&self, wg: u32, storage: Storage) -> Shape {
        Shape {
            tpr: self.tpr,
            tc: 1,
            v: self.v,
            kt: self.kt,
            xs: self.xs,
            storage: storage.code(),
            ..Shape::for_features(1, 1, wg)
        }
    }
}

/// Most heads per thread on OpenGL: Mesa's GLSL path compiles a register pass with several
/// heads per thread very slowly (far more slowly than Vulkan's path from SPIR-V), one head
/// per thread quickly (docs/performance.md, "Figures behind the code's choices"); so on GL
/// the heads go one per thread group (HB = K), and rows too wide for that take the
/// two-kernel path.
pub const GL_KT_CAP: u32 = 1;

/// Workgroup sizes the planner can choose ([`workgroup_size`]: 256, or 128 where the device
/// allows no more, the least Vulkan and OpenGL ES 3.1 promise).
pub const WORKGROUP_SIZES: [u32; 2] = [128, 256];

/// Every pipeline shape the planner can choose, on any device: the register pass's layouts
/// for every row width (in units of 4 values, up to the widest it takes), head count and
/// workgroup size that some workgroup-memory limit selects (a candidate is chosen when the
/// limit is below every earlier candidate's bytes and at least its own), with and without
/// subgroup lane sums; the two-kernel path's and CSR rows' shapes for every threads-per-row,
/// tile and threads-per-column value; each for every storage and with and without the
/// traffic counters. Tests translate every one to SPIR-V, MSL and HLSL.
pub fn reachable_shapes() -> Vec<Shape> {
    let mut base = std::collections::BTreeSet::new();
    let key = |s: &Shape| {
        (
            s.wg,
            s.tpr,
            s.tc,
            s.sparse,
            s.tpc,
            s.v,
            s.kt,
            s.xs,
            s.subgroups,
            s.rt,
            s.tt,
        )
    };
    // Rows in flight (marked rt = 1 below): RT by the storage; tiles (marked with the most
    // rows that fit) the storage's default within that.
    let with_rt = |s: Shape, st: Storage| Shape {
        rt: if s.rt > 0 {
            rows_per_thread(s.v, st)
        } else {
            0
        },
        tt: s.tt.min(tile_default(s.v, st.code())),
        ..s
    };
    let mut shapes = Vec::new();
    let mut add = |s: Shape| {
        if base.insert(key(&s)) {
            shapes.push(s);
        }
    };
    let widest = (V_MAX * 256) as usize;
    for (wg, kt_cap, target) in WORKGROUP_SIZES.iter().flat_map(|&wg| {
        TPR_TARGETS
            .iter()
            .flat_map(move |&t| [(wg, KT_MAX, t), (wg, GL_KT_CAP, t)])
    }) {
        for heads in 1..=MAX_HEADS {
            for units in 1..=widest {
                let mut below = u32::MAX;
                for l in register_candidates(4 * units, heads, wg, kt_cap, target) {
                    let shape = l.shape(wg, Storage::F32);
                    let bytes = shape.workgroup_bytes();
                    if bytes < below {
                        below = bytes;
                        for subgroups in [false, true] {
                            add(Shape { subgroups, ..shape });
                        }
                        if in_flight(&shape, heads, target) {
                            add(Shape {
                                subgroups: true,
                                rt: 1,
                                ..shape
                            });
                        }
                        let sub = Shape {
                            subgroups: true,
                            ..shape
                        };
                        // Tiles: marked with the most rows that fit (each storage's own
                        // default is taken below).
                        if tile_rows(&sub, heads, target, target as u32, None) > 0 {
                            let tt = tile_rows(&sub, heads, target, target as u32, Some(16));
                            add(Shape { tt, ..sub });
                        }
                    }
                }
            }
        }
    }
    for wg in WORKGROUP_SIZES {
        let pow2 = |max: u32| (0..=max.ilog2()).map(|i| 1u32 << i);
        for tpr in pow2(wg) {
            for tc in pow2(wg).filter(|&t| t >= 2) {
                add(Shape {
                    tpr,
                    tc,
                    ..Shape::for_features(1, 1, wg)
                });
            }
        }
        for tpr in pow2(wg.min(32)) {
            for tpc in pow2(wg.min(32)) {
                add(Shape {
                    tpr,
                    tpc,
                    tc: 1,
                    sparse: 1,
                    ..Shape::for_features(1, 1, wg)
                });
            }
        }
    }
    let storages = [Storage::F32, Storage::F16, Storage::U8, Storage::I8];
    shapes
        .iter()
        .flat_map(|s| {
            storages.iter().flat_map(move |&st| {
                [false, true].map(|count| Shape {
                    storage: st.code(),
                    count,
                    ..with_rt(*s, st)
                })
            })
        })
        .collect()
}

/// The threads a row the planner aims for on an adapter whose smallest subgroup has
/// `subgroup_min` lanes: the largest of [`TPR_TARGETS`] within it, else the smallest.
pub fn tpr_target(subgroup_min: u32) -> usize {
    TPR_TARGETS
        .iter()
        .rev()
        .find(|&&t| t <= subgroup_min as usize)
        .copied()
        .unwrap_or(TPR_TARGETS[0])
}

/// Whether the register pass with `shape` (lane sums by subgroups) has rows in flight: one
/// head block (KT >= K) and at most `tpr_target` threads a row (the smallest subgroup, at
/// most 32), so that a row's lanes lie in one subgroup.
pub fn in_flight(shape: &Shape, heads: usize, tpr_target: usize) -> bool {
    shape.v > 0
        && shape.xs == 1
        && shape.kt as usize >= heads.max(1)
        && shape.tpr as usize <= tpr_target.min(TARGET_TPR)
}

/// Rows in flight for a register-pass `shape` whose lane sums use subgroups: `requested`
/// (0: off; rounded to a power of two within RT_MAX), else [`rows_per_thread`], where
/// [`in_flight`] allows it; 0 otherwise.
pub fn rows_in_flight(
    shape: &Shape,
    heads: usize,
    tpr_target: usize,
    storage: Storage,
    requested: Option<u32>,
) -> u32 {
    if !shape.subgroups || !in_flight(shape, heads, tpr_target) {
        return 0;
    }
    match requested.unwrap_or_else(|| rows_per_thread(shape.v, storage)) {
        0 => 0,
        rt => rt.next_power_of_two().min(RT_MAX),
    }
}

/// Rows a tile for a register-pass `shape` whose lane sums use subgroups and whose rows span
/// several subgroups (one head block, more than `tpr_target` threads a row, as K = 10 at
/// d = 784: 256 threads a row, one unit each): `requested` (0: off; else the largest of
/// TT_CHOICES at or below it, at least 4), else, with one unit a thread, 16 rows for X in f32,
/// 8 in f16 and 4 in bytes; 0 (the loop by steps) with more units a thread: the fastest on a
/// GPU (docs/performance.md, "Tiles of rows"; with two units a thread, as K = 4, tiles ran
/// slower than steps). The shader needs TT (WG / sgs + WG / TPR) <= WG words
/// a head of `redk`: fewer rows where the adapter's smallest subgroup, `subgroup_min`, leaves
/// less, none where even 4 do not fit. 0 too where tiles do not apply (rows in flight, or no
/// subgroups).
pub fn tile_rows(
    shape: &Shape,
    heads: usize,
    tpr_target: usize,
    subgroup_min: u32,
    requested: Option<u32>,
) -> u32 {
    let applies = shape.subgroups
        && shape.v > 0
        && shape.xs == 1
        && shape.rt == 0
        && shape.kt as usize >= heads.max(1)
        && shape.tpr as usize > tpr_target.min(TARGET_TPR);
    if !applies {
        return 0;
    }
    let default = tile_default(shape.v, shape.storage);
    let (wg, tpr, sgs) = (shape.wg, shape.tpr, subgroup_min.max(1));
    let fits = |t: u32| tpr > sgs && t * (wg / sgs + wg / tpr) <= wg;
    match requested.unwrap_or(default) {
        0 => 0,
        t => TT_CHOICES
            .iter()
            .rev()
            .copied()
            .find(|&c| c <= t.max(TT_CHOICES[0]) && fits(c))
            .unwrap_or(0),
    }
}

/// The rows a tile [`tile_rows`] takes by default with `v` units a thread and X stored as
/// `storage` ([`Storage::code`]), before the workgroup-memory fit: 16 f32, 8 f16, 4 bytes
/// with one unit; 0 with more.
pub fn tile_default(v: u32, storage: u32) -> u32 {
    match v {
        1 if storage == Storage::F32.code() => 16,
        1 if storage == Storage::F16.code() => 8,
        1 => 4,
        _ => 0,
    }
}

/// The threads-a-row targets the planner can aim for ([`tpr_target`]): [`TARGET_TPR`] where
/// the adapter's subgroups have 32 lanes or more, else 8 (lavapipe, Intel GPUs; rows of a
/// 4-lane subgroup, as on WARP, then take the loop by steps at run time). Few targets keep
/// few pipeline shapes for the tests to translate.
pub const TPR_TARGETS: [usize; 2] = [8, 32];

/// Rows per step of the register pass with `shape` and `heads` heads: the largest power of
/// two <= WG / (HB TPR) (the shader's `rgs`), times the rows each thread has in flight (RT)
/// or the rows a tile per row group (TT).
pub fn rows_per_step(shape: &Shape, heads: usize) -> usize {
    let hb = heads.max(1).div_ceil(shape.kt.max(1) as usize);
    let rg = (shape.wg as usize / (hb * shape.tpr.max(1) as usize)).max(1);
    (1 << rg.ilog2()) * shape.rt.max(shape.tt).max(1) as usize
}

/// The register pass's chain of dependent steps ([`Chain`]) for `shape` with `heads` heads
/// over rows of `d` features in `storage`, a workgroup running `run_rows` rows; subgroups,
/// where the shape uses them, are taken to be at least 32 lanes wide where TPR is (as on
/// NVIDIA and AMD GPUs). `None` for the two-kernel path.
pub fn chain(
    shape: &Shape,
    heads: usize,
    d: usize,
    storage: Storage,
    run_rows: usize,
) -> Option<Chain> {
    if shape.v == 0 {
        return None;
    }
    let wg = shape.wg as usize;
    let tpr = shape.tpr.max(1) as usize;
    let v = shape.v as usize;
    let heads = heads.max(1);
    let hbs = heads.div_ceil(shape.kt.max(1) as usize);
    let step = rows_per_step(shape, heads);
    let row_bytes = padded(d) * storage.bytes();
    let unit_bytes = 4 * storage.bytes();
    let log2 = |x: usize| x.max(1).ilog2() as usize;
    // Barriers outside the row loop: the stop flag, the subgroup check, the weights handed
    // from row group 0 to the others and the sums back (each 4V + 1 rounds of two), and the
    // statistics' tree.
    let rounds = 4 * v + 1;
    let spread = if wg / (hbs * tpr) > 1 {
        2 * rounds + 1
    } else {
        0
    };
    let fixed = 1 + if shape.subgroups { 3 } else { 0 } + 2 * spread + log2(wg) + 2;
    let in_flight = shape.rt > 0;
    let (per_thread, per_barrier, idle, one_lane) = if in_flight {
        let per_thread = shape.rt as usize * v * unit_bytes;
        (per_thread, run_rows * row_bytes / fixed.max(1), 0.0, 0)
    } else if shape.tt > 0 {
        // Tiles: every thread holds its units of TT rows; three barriers a tile of `step`
        // rows (sums, scores, coefficients); the rule on one thread a row, the tile's rows at
        // once (the K heads' loop on one lane, once a tile on the workgroup's path).
        let per_thread = shape.tt as usize * v * unit_bytes;
        (
            per_thread,
            step * row_bytes / 3,
            1.0 - step as f64 / wg as f64,
            heads,
        )
    } else {
        // Per step: the scores' barrier and the coefficients' (train), two more when head
        // blocks share the row through workgroup memory, and the lane sums' tree where a row
        // spans several subgroups or there are no subgroups.
        let sums = if shape.subgroups && tpr <= 32 {
            0
        } else if shape.subgroups {
            1 + log2(tpr / 32)
        } else {
            1 + log2(tpr)
        };
        let per_step = 2 + if hbs > 1 { 2 } else { 0 } + sums;
        let rows = step;
        (
            v * unit_bytes,
            rows * row_bytes / per_step,
            1.0 - rows as f64 / wg as f64,
            heads,
        )
    };
    Some(Chain {
        steps_per_workgroup: run_rows.div_ceil(step.max(1)),
        x_bytes_in_flight_per_thread: per_thread,
        x_bytes_in_flight_per_cu: per_thread * wg * CHAIN_WORKGROUPS_PER_CU,
        x_bytes_per_barrier: per_barrier,
        idle_lanes_in_rule: idle,
        one_lane_work_per_row: one_lane,
    })
}

/// Values per dense row on the device: d padded to whole units of 4.
pub fn padded(d: usize) -> usize {
    d.div_ceil(4) * 4
}

/// Workgroups the persistent grid aims for on this adapter: a few per compute unit. wgpu
/// gives no count of compute units, so: 4 per thread of a CPU adapter (a software rasterizer
/// runs a workgroup on one thread), 512 on a discrete GPU (4 per SM of a 128-SM GPU such as
/// an H100 with 132), 64 on an integrated GPU, 128 otherwise.
pub fn device_workgroups(info: &wgpu::AdapterInfo) -> usize {
    match info.device_type {
        wgpu::DeviceType::Cpu => {
            4 * std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        }
        wgpu::DeviceType::DiscreteGpu => 512,
        wgpu::DeviceType::IntegratedGpu => 64,
        _ => 128,
    }
}

/// The persistent grid of one segment of `n` rows with `x_words` words of X: at most `grid`
/// workgroups, at most one per step of rows, and (training: `len` sums per partial) few
/// enough that the partials written and read take at most [`PARTIAL_SHARE`] of one read of
/// X, unless that leaves fewer than `floor` workgroups; but at least enough that no
/// workgroup runs more than `max_steps` steps. Returns (workgroups, rows per workgroup: a
/// multiple of 4, as the labels are packed four to a word), every workgroup with at least one
/// row.
///
/// The floor is half the device's grid on a GPU ([`grid_floor`]): the share alone left a
/// large GPU fewer workgroups than compute units for K = 10 at 60,000 x 784, and its epoch
/// several times slower than with the floor (docs/performance.md, "The persistent grid, fixed
/// the same day").
pub fn segment_grid(
    n: usize,
    x_words: u64,
    len: Option<usize>,
    (grid, floor): (usize, usize),
    step: usize,
    max_steps: Option<usize>,
) -> (usize, usize) {
    let step = step.max(1);
    let mut g = grid.min(n.div_ceil(step)).max(1);
    if let Some(len) = len {
        let share = (x_words as f64 * PARTIAL_SHARE / (2.0 * len.max(1) as f64)) as usize;
        g = g.min(share.max(floor).max(1));
    }
    let mut run = n.div_ceil(g).next_multiple_of(4).max(4);
    if let Some(steps) = max_steps {
        // Whole words of labels per run: a multiple of 4 rows (and of the step).
        run = run.min((steps.max(1) * step / 4 * 4).max(4));
    }
    (n.div_ceil(run).max(1), run)
}

/// The fewest workgroups the partial-share cap of [`segment_grid`] may leave: half the
/// device's `grid` on a GPU (fewer leave compute units idle), 1 on a software adapter (with
/// `max_steps`; a workgroup there runs on one CPU thread, so the share alone decides).
pub fn grid_floor(grid: usize, max_steps: Option<usize>) -> usize {
    match max_steps {
        Some(_) => 1,
        None => grid / 2,
    }
}

/// Most steps of rows per workgroup of the register pass on a software adapter with `heads`
/// heads. Mesa's llvmpipe and lavapipe end every loop, silently, once a shader invocation
/// has run 65,535 loop iterations in all (gallivm's loop limiter,
/// LP_MAX_TGSI_LOOP_ITERATIONS); a step costs 2K + 11 to 2K + 18 iterations (the rule's two
/// loops over the K scores and the loops the compiler does not unroll), measured on
/// lavapipe for K = 1 to 64 (`tests/it/traffic.rs` keeps a check: K = 10 at d = 784 broke
/// after 1,720 steps in one workgroup, K = 64 at d = 64 after 456). Workgroups stop at
/// about 70% of that.
pub fn software_steps(heads: usize) -> usize {
    48_000 / (2 * heads.max(1) + 20)
}

/// The binding size the plan works with: the device's storage-binding and buffer limits, a
/// test override, and 2 GiB.
pub fn binding_limit(limits: &wgpu::Limits, max_binding: Option<u64>) -> u64 {
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(max_binding.unwrap_or(u64::MAX))
        .min(1 << 31)
}

fn check_heads(heads: usize) -> Result<()> {
    if heads > MAX_HEADS {
        return Err(Error::TooLarge(format!(
            "{heads} classes: the GPU pipelines handle at most {MAX_HEADS}"
        )));
    }
    Ok(())
}

/// What shapes a dense plan besides the data and the device limits.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Override of the binding limit (tests force it small).
    pub max_binding: Option<u64>,
    /// The persistent grid's size (workgroups per segment at most).
    pub grid: usize,
    /// Take the two-kernel path even where the register pass fits.
    pub two_kernels: bool,
    /// Most heads per thread of the register pass ([`GL_KT_CAP`] on OpenGL).
    pub kt_cap: u32,
    /// Most threads a row the register pass aims for ([`TARGET_TPR`]; the adapter's smallest
    /// subgroup where lane sums use subgroups and it is less).
    pub tpr_target: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            max_binding: None,
            grid: 1,
            two_kernels: false,
            kt_cap: KT_MAX,
            tpr_target: TARGET_TPR,
        }
    }
}

/// Plans dense rows: n rows of d features and `heads` heads under the device limits (the
/// register pass where it fits, unless `opts.two_kernels`), or explains why the data does
/// not fit.
pub fn plan(
    n: usize,
    d: usize,
    heads: usize,
    storage: Storage,
    limits: &wgpu::Limits,
    opts: PlanOptions,
) -> Result<Plan> {
    check_heads(heads)?;
    let binding = binding_limit(limits, opts.max_binding);
    let len = heads.max(1) as u64 * (d as u64 + 1);
    // Per row, a segment binds d features padded to whole units and `heads` outputs.
    let row_bytes = (padded(d) as u64 * storage.bytes() as u64).max(heads as u64 * 4);
    if row_bytes > binding || len * 4 > binding.max(limits.max_storage_buffer_binding_size) {
        return Err(Error::TooLarge(format!(
            "one row of {d} features is {row_bytes} bytes, more than the GPU binds at once \
             ({binding} bytes)"
        )));
    }
    let wg = workgroup_size(limits, 256)?;
    let per_dim = limits.max_compute_workgroups_per_dimension as u64;
    if len.div_ceil(32) > per_dim * per_dim || len.div_ceil(wg as u64) > per_dim {
        return Err(Error::TooLarge(format!(
            "{d} features need more workgroups than the GPU dispatches per dimension ({per_dim})"
        )));
    }
    let seg_rows = ((binding / row_bytes) as usize).min(n).max(1);
    let layout = register_layout_for(
        d,
        heads,
        wg,
        limits.max_compute_workgroup_storage_size,
        opts.kt_cap,
        opts.tpr_target,
    )
    .filter(|_| !opts.two_kernels);
    let shape = match layout {
        Some(l) => l.shape(wg, storage),
        None => {
            let two = Shape {
                storage: storage.code(),
                ..Shape::for_features(d, heads, wg)
            };
            if len.div_ceil(two.tc as u64) > per_dim {
                return Err(Error::TooLarge(format!(
                    "{d} features need more workgroups than the GPU dispatches per dimension \
                     ({per_dim})"
                )));
            }
            two
        }
    };
    let max_chunks = (PARTIALS_BUDGET.min(binding) / (len * 4)).max(1) as usize;
    // Whole row groups per chunk (WG / TPR rows are scored at once).
    let groups = (shape.wg / shape.tpr) as usize;
    let chunk_rows = 64usize
        .max(n.div_ceil(max_chunks))
        .max(seg_rows.div_ceil(per_dim as usize))
        .next_multiple_of(groups);
    Ok(Plan {
        seg_rows,
        chunk_rows,
        margin_wgs_cap: (per_dim as usize).min(4096),
        grid: opts.grid.max(1),
        max_steps: None,
        shape,
    })
}

/// Plans CSR rows: `n` rows (training and held-out) with `nnz` stored values over `d` columns.
/// Segments are cut by [`sparse_segments`]; what the plan fixes is the shape and the checks
/// that the weights and a column's start table fit.
pub fn plan_sparse(
    n: usize,
    d: usize,
    nnz: usize,
    heads: usize,
    storage: Storage,
    limits: &wgpu::Limits,
) -> Result<Plan> {
    check_heads(heads)?;
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
        tc: 1,
        ..Shape::for_sparse(n, d, nnz, heads, wg)
    };
    let per_dim = limits.max_compute_workgroups_per_dimension as u64;
    // `gather` runs WG / TPC columns (of d + 1) per workgroup; `apply` AJ = 32 weights per
    // workgroup.
    if (d as u64 + 1).div_ceil((wg / shape.tpc).max(1) as u64) > per_dim * per_dim
        || len.div_ceil(32) > per_dim * per_dim
    {
        return Err(Error::TooLarge(format!(
            "{d} features need more workgroups than the GPU dispatches ({per_dim} per dimension)"
        )));
    }
    Ok(Plan {
        seg_rows: 0,
        chunk_rows: n.max(1),
        // The long rows' workgroups come after: the grid stays within one dimension.
        margin_wgs_cap: (per_dim as usize)
            .saturating_sub(super::batch::LONG_WGS)
            .clamp(1, MARGIN_WGS_CAP),
        grid: 1,
        max_steps: None,
        shape,
    })
}

/// Most workgroups of `margins` over a CSR segment's short rows (the long rows' come after,
/// at most `LONG_WGS`).
pub const MARGIN_WGS_CAP: usize = 4096;

/// What a segment's rows are for: training segments of sparse rows also hold what the
/// gather needs (the margins workgroups' bias sums and a column-major copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegUse {
    /// Rows trained on.
    Training,
    /// Rows only scored (held-out rows, prediction).
    Scoring,
}

/// Cuts CSR rows into segments (start, rows) whose buffers each fit `binding` bytes: the
/// values, the row starts with the columns and the list of long rows (at most one word a row
/// and its count), the per-row outputs with, for training segments, the margins workgroups'
/// bias sums (K for each of at most 2 rows + 1 workgroups), and for training segments the
/// column-major copy (column starts, rows, values, the list of long columns).
/// A row that alone does not fit is an error.
pub fn sparse_segments(
    c: CsrView<'_>,
    d: usize,
    heads: usize,
    binding: u64,
    seg_use: SegUse,
) -> Result<Vec<(usize, usize)>> {
    let gather = seg_use == SegUse::Training;
    let eb = c.values.storage().bytes() as u64;
    let k = heads.max(1) as u64;
    let d1 = d as u64 + 1;
    let fits = |rows: u64, nnz: u64| {
        // A training segment's margins workgroups, whose bias sums follow the coefficients:
        // at most one a row of short rows (plus one) and one a long row.
        let bias_sums = if gather { (2 * rows + 1) * k } else { 0 };
        nnz * eb + 3 <= binding
            && (2 * (rows + 1) + nnz) * 4 <= binding
            && (rows * k + bias_sums) * 4 <= binding
            && (!gather || (2 * d1 + 2 * nnz) * 4 <= binding)
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
pub fn fold(wgs: usize, per_dim: usize) -> (u32, u32) {
    let per_dim = per_dim.max(1);
    (
        wgs.clamp(1, per_dim) as u32,
        wgs.div_ceil(per_dim).max(1) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES_32K: u32 = 32 << 10;

    #[test]
    fn the_register_pass_covers_the_shapes_of_the_issue() {
        // One head at 64 and 784 features; 3 and 10 heads at 784; 64 heads at 64.
        let l = register_layout(64, 1, 256, BYTES_32K, KT_MAX).unwrap();
        assert_eq!((l.tpr, l.v, l.kt, l.hb, l.rg), (16, 1, 1, 1, 16));
        let l = register_layout(784, 1, 256, BYTES_32K, KT_MAX).unwrap();
        assert_eq!((l.tpr, l.v, l.rg), (32, 8, 8));
        let l = register_layout(784, 3, 256, BYTES_32K, KT_MAX).unwrap();
        assert_eq!((l.tpr, l.v, l.kt, l.hb), (64, 4, 3, 1));
        let l = register_layout(784, 10, 256, BYTES_32K, KT_MAX).unwrap();
        assert_eq!((l.tpr, l.v, l.kt, l.hb, l.rg), (256, 1, 10, 1, 1));
        let l = register_layout(64, 64, 256, BYTES_32K, KT_MAX).unwrap();
        assert!(
            l.hb > 1 && l.kt as usize * l.hb as usize >= 64 && l.xs > 1,
            "{l:?}"
        );
        // Rows whose K accumulators and weights exceed a workgroup's registers.
        assert!(register_layout(4096, 10, 256, BYTES_32K, KT_MAX).is_none());
        assert!(register_layout(20_000, 1, 256, BYTES_32K, KT_MAX).is_none());
        // OpenGL: one head per thread, heads over thread groups; K = 10 at d = 784 does not fit.
        let l = register_layout(64, 10, 256, BYTES_32K, GL_KT_CAP).unwrap();
        assert_eq!((l.kt, l.hb), (1, 10));
        assert!(register_layout(784, 10, 256, BYTES_32K, GL_KT_CAP).is_none());
    }

    /// The plan of `n` x `d` rows with `heads` heads on a GPU with 32-lane subgroups and the
    /// default grid (as chosen for an H200), its run of rows per workgroup, and its chain.
    fn gpu_chain(
        n: usize,
        d: usize,
        heads: usize,
        st: Storage,
        rt: Option<u32>,
        tt: Option<u32>,
    ) -> (Shape, Chain) {
        let l = wgpu::Limits {
            max_compute_workgroup_storage_size: 48 << 10,
            max_storage_buffer_binding_size: (2u64 << 30) - 1,
            max_buffer_size: (4u64 << 30) - 1,
            ..Default::default()
        };
        let opts = PlanOptions {
            grid: 512,
            ..Default::default()
        };
        let mut shape = plan(n, d, heads, st, &l, opts).unwrap().shape;
        shape.subgroups = true;
        shape.rt = rows_in_flight(&shape, heads, 32, st, rt);
        shape.tt = tile_rows(&shape, heads, 32, 32, tt);
        let words = (n * padded(d) * st.bytes() / 4) as u64;
        let step = rows_per_step(&shape, heads);
        let (_, run) = segment_grid(n, words, Some(heads * (d + 1)), (512, 256), step, None);
        (shape, chain(&shape, heads, d, st, run).unwrap())
    }

    #[test]
    fn the_chain_model_flags_the_serial_loops_and_passes_rows_in_flight() {
        // Binary 4,194,304 x 64 f32 on an H200-like GPU. By steps (the loop before rows in
        // flight): 16 KiB of X in flight per compute unit, ~2 KiB of X per barrier, 15 of 16
        // lanes idle while one applies the rule: what the issue read off the kernel. Rows in
        // flight (4 a thread, faster: docs/performance.md, "GPU kernels IV"): 64 KiB, no
        // barrier in the loop, the rule on every lane.
        let (_, by_steps) = gpu_chain(4_194_304, 64, 1, Storage::F32, Some(0), None);
        assert_eq!(by_steps.x_bytes_in_flight_per_cu, 16 << 10);
        assert!(by_steps.x_bytes_per_barrier < 32 << 10, "{by_steps:?}");
        assert_eq!(by_steps.one_lane_work_per_row, 1);
        assert!(by_steps.idle_lanes_in_rule > 0.9);
        let (s, c) = gpu_chain(4_194_304, 64, 1, Storage::F32, None, None);
        assert_eq!((s.tpr, s.v, s.rt), (16, 1, 4), "{s:?}");
        assert!(c.x_bytes_in_flight_per_cu >= 32 << 10, "{c:?}");
        assert!(c.x_bytes_per_barrier >= 32 << 10, "{c:?}");
        assert_eq!((c.one_lane_work_per_row, c.idle_lanes_in_rule), (0, 0.0));
        assert_eq!(c.steps_per_workgroup, 128);
        // u8: the rule on every lane and no barrier in the loop, but 4 rows of 16 bytes a
        // thread are 16 KiB a compute unit (RT_MAX = 4: one word of labels a step).
        let (_, c) = gpu_chain(4_194_304, 64, 1, Storage::U8, None, None);
        assert!(
            c.x_bytes_per_barrier >= 8 << 10 && c.one_lane_work_per_row == 0,
            "{c:?}"
        );
        assert_eq!(c.x_bytes_in_flight_per_cu, 16 << 10);
        // K = 10 at 60,000 x 784 (a row across the workgroup). By steps, one row a step: the
        // model flags it (one lane runs the ten heads' rule while 255 wait).
        let (s, c) = gpu_chain(60_000, 784, 10, Storage::F32, None, Some(0));
        assert_eq!((s.tpr, s.rt, s.tt), (256, 0, 0));
        assert_eq!(c.one_lane_work_per_row, 10);
        assert!(c.x_bytes_per_barrier < 1 << 10 && c.x_bytes_in_flight_per_cu < 32 << 10);
        // By tiles of 16 rows (the default for f32 with one unit a thread): 256 B of X a
        // thread in flight, 16 x 3,136 bytes of X per three barriers, the rule on one lane a
        // row but for the tile's 16 rows at once (240 of 256 lanes idle meanwhile, once a
        // tile). The issue's "no one-lane loop over the heads" is not met:
        // the rule on every lane ran slower (docs/performance.md, "Tiles of rows").
        let (s, c) = gpu_chain(60_000, 784, 10, Storage::F32, None, None);
        assert_eq!((s.tpr, s.v, s.rt, s.tt), (256, 1, 0, 16));
        assert_eq!(c.one_lane_work_per_row, 10);
        assert_eq!(c.idle_lanes_in_rule, 1.0 - 16.0 / 256.0);
        assert_eq!(c.x_bytes_in_flight_per_thread, 256);
        assert!(c.x_bytes_in_flight_per_cu >= 32 << 10, "{c:?}");
        assert_eq!(c.x_bytes_per_barrier, 16 * 3136 / 3);
        assert_eq!(c.steps_per_workgroup, 15);
        // Bytes: 4 rows a tile (16 ran slower: docs/performance.md, "Tiles of rows").
        let (s, c) = gpu_chain(60_000, 784, 10, Storage::U8, None, None);
        assert_eq!(s.tt, 4);
        assert_eq!(c.x_bytes_per_barrier, 4 * 784 / 3);
        // K = 4 (two units and 128 threads a row): by steps, where tiles ran slower.
        let (s, _) = gpu_chain(60_000, 784, 4, Storage::F32, None, None);
        assert_eq!((s.tpr, s.v, s.tt), (128, 2, 0));
        let (s, c) = gpu_chain(60_000, 784, 4, Storage::F32, None, Some(8));
        assert_eq!((s.tt, c.one_lane_work_per_row), (8, 4));
        // Tiles only where a row spans subgroups with one head block; never with rows in
        // flight.
        let (s, _) = gpu_chain(4_194_304, 64, 1, Storage::F32, None, Some(8));
        assert_eq!((s.rt, s.tt), (4, 0));
    }

    #[test]
    fn rows_in_flight_need_subgroups_one_head_block_and_a_row_within_a_subgroup() {
        let l = wgpu::Limits::default();
        let opts = PlanOptions {
            grid: 8,
            ..Default::default()
        };
        let mut s = plan(1000, 64, 1, Storage::F32, &l, opts).unwrap().shape;
        assert_eq!(
            rows_in_flight(&s, 1, 32, Storage::F32, None),
            0,
            "no subgroups"
        );
        s.subgroups = true;
        assert_eq!(rows_in_flight(&s, 1, 32, Storage::F32, None), 4);
        assert_eq!(rows_in_flight(&s, 1, 32, Storage::U8, None), 4);
        assert_eq!(rows_in_flight(&s, 1, 32, Storage::F32, Some(3)), 4);
        assert_eq!(rows_in_flight(&s, 1, 32, Storage::F32, Some(0)), 0);
        // TPR 16 > a subgroup of 8 (lavapipe): the planner aims for TPR 8 there instead.
        assert_eq!(rows_in_flight(&s, 1, 8, Storage::F32, None), 0);
        let opts8 = PlanOptions {
            tpr_target: 8,
            ..opts
        };
        let mut s8 = plan(1000, 64, 1, Storage::F32, &l, opts8).unwrap().shape;
        s8.subgroups = true;
        assert_eq!((s8.tpr, s8.v), (8, 2));
        assert_eq!(rows_in_flight(&s8, 1, 8, Storage::F32, None), 2);
        // Head blocks sharing a row through workgroup memory: by steps.
        let mut h = plan(1000, 64, 64, Storage::F32, &l, opts).unwrap().shape;
        h.subgroups = true;
        assert!(h.xs > 1);
        assert_eq!(rows_in_flight(&h, 64, 32, Storage::F32, None), 0);
        assert_eq!(rows_per_thread(8, Storage::F32), 1);
        let targets: Vec<usize> = [4, 8, 16, 32, 64, 128].map(tpr_target).to_vec();
        assert_eq!(targets, [8, 8, 8, 32, 32, 32]);
        assert!(Shape { rt: 4, ..s }.is_valid() && !Shape { rt: 3, ..s }.is_valid());
    }

    #[test]
    fn every_layout_is_a_valid_shape_within_its_workgroup() {
        for heads in [1, 2, 3, 5, 10, 12, 13, 24, 64] {
            for d in [1, 2, 3, 4, 5, 7, 31, 64, 100, 257, 784, 1000, 2048, 8192] {
                for wg in [128, 256] {
                    let Some(l) = register_layout(d, heads, wg, BYTES_32K, KT_MAX) else {
                        continue;
                    };
                    let s = l.shape(wg, Storage::U8);
                    assert!(s.is_valid(), "d={d} K={heads} wg={wg}: {l:?}");
                    assert!(s.workgroup_bytes() <= BYTES_32K);
                    assert!(l.hb * l.tpr * l.rg <= wg && l.rg >= 1);
                    assert!(l.kt * l.hb >= heads as u32 && (l.hb - 1) * l.kt < heads as u32);
                    assert!((l.tpr * l.v * 4) as usize >= d, "d={d} K={heads}: {l:?}");
                    assert_eq!(rows_per_step(&s, heads), l.rg as usize);
                }
            }
        }
    }

    #[test]
    fn reachable_shapes_are_valid_and_include_what_plans_choose() {
        let all = reachable_shapes();
        assert!(all.iter().all(Shape::is_valid));
        let l = wgpu::Limits::default();
        for (n, d, heads) in [(100, 784, 10), (100, 64, 1), (100, 100_000, 1), (5, 3, 64)] {
            for st in [Storage::F32, Storage::U8] {
                let opts = PlanOptions {
                    grid: 8,
                    ..Default::default()
                };
                let p = plan(n, d, heads, st, &l, opts).unwrap();
                for subgroups in [false, p.register_pass()] {
                    let s = Shape {
                        subgroups,
                        ..p.shape
                    };
                    assert!(all.contains(&s), "{s:?}");
                }
                // Rows in flight, with the planner aiming for a subgroup of 32 or of 8.
                for target in [32, 8] {
                    let opts = PlanOptions {
                        tpr_target: target,
                        ..opts
                    };
                    let p = plan(n, d, heads, st, &l, opts).unwrap();
                    let mut s = Shape {
                        subgroups: p.register_pass(),
                        ..p.shape
                    };
                    s.rt = rows_in_flight(&s, heads, target, st, None);
                    assert!(all.contains(&s), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn the_grid_keeps_partials_within_their_share() {
        // 60,000 x 784, K = 10: 47 M words of X; at most 1% of them written as partials.
        let len = 10 * 785;
        let x = 60_000u64 * 784;
        let (g, run) = segment_grid(60_000, x, Some(len), (512, 1), 1, None);
        assert!(
            2 * (g * len) as u64 <= (x as f64 * PARTIAL_SHARE) as u64 + 1,
            "{g}"
        );
        assert!(g * run >= 60_000 && (g - 1) * run < 60_000);
        // A software adapter: at most software_steps(10) steps a workgroup, whatever the share.
        let (g, run) = segment_grid(60_000, x, Some(len), (512, 1), 1, Some(software_steps(10)));
        assert!(
            run <= software_steps(10) && g * run >= 60_000,
            "{g} x {run}"
        );
        // 1,048,576 x 64, K = 1: the device's grid.
        let (g, _) = segment_grid(1 << 20, 1 << 26, Some(65), (512, 256), 16, None);
        assert_eq!(g, 512);
        // Few rows: one workgroup per step of rows at most; held-out rows have no partials.
        assert_eq!(
            segment_grid(10, 640, Some(65), (512, 256), 16, None),
            (1, 12)
        );
        assert_eq!(segment_grid(100, 6400, None, (8, 1), 4, None), (7, 16));
        assert_eq!(segment_grid(1, 64, None, (8, 1), 4, None), (1, 4));
        // On a GPU the share never leaves fewer than half the device's grid: 60,000 x 784 at
        // K = 10 takes 255 workgroups (the share alone: 59), and the share still binds
        // above the floor (300,000 rows: 299).
        assert_eq!(grid_floor(512, None), 256);
        assert_eq!(grid_floor(8, Some(100)), 1);
        let (g, _) = segment_grid(60_000, x, Some(len), (512, 256), 1, None);
        // (255: 256 runs of a whole number of label words cover the rows in 255.)
        assert!((255..=256).contains(&g), "{g}");
        let (g, _) = segment_grid(300_000, 5 * x, Some(len), (512, 256), 1, None);
        assert!(
            g > 256 && g < 512 && 2 * (g * len) as u64 <= (5 * x) as f64 as u64 / 50 + 1,
            "{g}"
        );
    }

    #[test]
    fn plans_keep_every_dispatch_within_the_limits() {
        let l = wgpu::Limits::default();
        let per_dim = l.max_compute_workgroups_per_dimension as usize;
        for (n, d, heads) in [
            (16_777_216, 1, 1),
            (1, 1, 1),
            (4_000, 1, 1),
            (1 << 20, 64, 10),
            (1000, 20_000, 3),
        ] {
            for two in [false, true] {
                let opts = PlanOptions {
                    grid: 512,
                    two_kernels: two,
                    ..Default::default()
                };
                let p = plan(n, d, heads, Storage::F32, &l, opts).unwrap();
                let chunks = n.div_ceil(p.chunk_rows);
                let len = heads * (d + 1);
                assert!(p.chunk_rows >= 64, "{n} x {d}: {p:?}");
                assert!((chunks * len * 4) as u64 <= PARTIALS_BUDGET.max(64 * len as u64 * 4));
                assert!(p.seg_rows.div_ceil(p.chunk_rows) <= per_dim, "{n} x {d}");
                assert_eq!(p.register_pass(), !two && d < 20_000, "{n} x {d} x {heads}");
            }
        }
    }
}
