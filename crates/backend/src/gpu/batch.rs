//! The batch-epoch pipelines (shaders/batch*.wgsl with batch_tree.wgsl or batch_subgroup.wgsl
//! appended): shader modules, bind-group layouts and compute pipelines, built once per
//! context. Pipelines are specialised by WGSL `override` constants ([`Shape`]) and cached by
//! their values; every shape is checked against the device limits (including workgroup
//! memory, which wgpu 30 does not check) before a pipeline is built. The structs the
//! pipelines read and write are in `mirror.rs`; the choice of shape is `plan.rs`.

pub use crate::gpu_options::ShaderChecks;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::context::GpuContext;
use crate::error::{Error, Result};
use crate::Storage;

/// The batch module's shared part: parameters, bindings, storage access and the rule.
pub const BATCH_WGSL: &str = include_str!("../../../../shaders/batch.wgsl");
/// The batch module's stages, joined after the shared part in this order: the register pass,
/// the two-kernel and sparse paths, the update and the stop.
pub const BATCH_STAGES_WGSL: [&str; 3] = [
    include_str!("../../../../shaders/batch_register.wgsl"),
    include_str!("../../../../shaders/batch_two_kernels.wgsl"),
    include_str!("../../../../shaders/batch_update.wgsl"),
];
/// The entry points and lane sums for adapters without subgroups.
pub const BATCH_TREE_WGSL: &str = include_str!("../../../../shaders/batch_tree.wgsl");
/// The entry points and lane sums for adapters with subgroups.
pub const BATCH_SUBGROUP_WGSL: &str = include_str!("../../../../shaders/batch_subgroup.wgsl");
/// Subgroup helpers shared by the modules that sum lanes by shuffles (the layout check and
/// the recursive halving).
pub const SUBGROUPS_WGSL: &str = include_str!("../../../../shaders/subgroups.wgsl");

/// How a module's threads sum their lanes: which variant of a module is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaneSums {
    /// A tree in workgroup memory (any adapter).
    Tree,
    /// Subgroup shuffles (adapters with subgroup operations).
    Subgroups,
}

impl LaneSums {
    /// Both variants, the tree first.
    pub const ALL: [LaneSums; 2] = [LaneSums::Tree, LaneSums::Subgroups];

    /// The variant a shape's entry points are built from.
    pub fn of(shape: &Shape) -> LaneSums {
        match shape.subgroups {
            true => LaneSums::Subgroups,
            false => LaneSums::Tree,
        }
    }

    /// Whether this variant needs subgroup operations.
    pub fn needs_subgroups(self) -> bool {
        self == LaneSums::Subgroups
    }
}

/// The batch module's source: the shared part, the stages, and the lane-sum variant (with the
/// shared subgroup helpers).
pub fn batch_source(lanes: LaneSums) -> String {
    let [register, two_kernels, update] = BATCH_STAGES_WGSL;
    let common = format!("{BATCH_WGSL}\n{register}\n{two_kernels}\n{update}");
    match lanes {
        LaneSums::Subgroups => format!("{common}\n{BATCH_SUBGROUP_WGSL}\n{SUBGROUPS_WGSL}"),
        LaneSums::Tree => format!("{common}\n{BATCH_TREE_WGSL}"),
    }
}

/// Most units (4 values) of a row one thread holds in the register pass (WGSL `V_MAX`).
pub const V_MAX: u32 = 8;
/// Most heads one thread holds in the register pass (WGSL `KT_MAX`).
pub const KT_MAX: u32 = 12;
/// Most weight and accumulator units per thread, KT x V (WGSL `KV_MAX`): with the row, at
/// most 4 (2 KV_MAX + V_MAX) = 128 floats of registers.
pub const KV_MAX: u32 = 12;
/// Most rows one thread of the register pass loads before it uses the first (WGSL `RT_MAX`):
/// 1, 2 or 4, so that a thread's rows of a step share one word of labels.
pub const RT_MAX: u32 = 4;

/// Rows a tile per row group that `rows_by_tile` (batch_subgroup.wgsl) is written for.
pub const TT_CHOICES: [u32; 3] = [4, 8, 16];

/// The batch shader's entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Entry {
    /// Scores, coefficients into `coef`, per-workgroup counts (the two-kernel path).
    Margins,
    /// Per-chunk partial sums of coef x over dense rows (the two-kernel path).
    Accumulate,
    /// Per-column partial sums over a CSC copy (CSR rows).
    Gather,
    /// The register pass: one read of X, one partial per workgroup.
    Epoch,
    /// Sums the partials per weight in a fixed order, updates w.
    Apply,
    /// Epoch statistics and the stop decision.
    Finalize,
    /// Decision values.
    Scores,
    /// One process of a data-parallel run: the partials summed into the first chunk (the
    /// host reads back and all-reduces K (d + 1) sums, not every chunk's).
    Fold,
}

impl Entry {
    /// Every entry point, in the order of their counter codes.
    pub const ALL: [Entry; 8] = [
        Entry::Margins,
        Entry::Accumulate,
        Entry::Gather,
        Entry::Epoch,
        Entry::Apply,
        Entry::Finalize,
        Entry::Scores,
        Entry::Fold,
    ];

    /// The WGSL entry point's name.
    pub fn name(self) -> &'static str {
        match self {
            Entry::Margins => "margins",
            Entry::Accumulate => "accumulate",
            Entry::Gather => "gather",
            Entry::Epoch => "epoch",
            Entry::Apply => "apply",
            Entry::Finalize => "finalize",
            Entry::Scores => "scores",
            Entry::Fold => "fold",
        }
    }

    /// The entry's index in the traffic counters (WGSL `E_*`).
    pub fn code(self) -> u32 {
        Entry::ALL.iter().position(|&e| e == self).unwrap_or(0) as u32
    }
}

/// `gather` sums a column with TPC threads, `margins` scores a row with TPR, unless each would
/// walk more than this many entries; such a long column or row gets a whole workgroup
/// (`LONG_WALK` in batch.wgsl).
pub const LONG_WALK: usize = 64;

/// At most this many workgroups of `margins` take a segment's long rows (`LONG_WGS` in
/// batch.wgsl).
pub const LONG_WGS: usize = 1024;

/// Override values for one pipeline, and which module it is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Workgroup size.
    pub wg: u32,
    /// Threads per row (the register pass, margins, scores).
    pub tpr: u32,
    /// Columns per tile (accumulate).
    pub tc: u32,
    /// How X is stored ([`Storage::code`]).
    pub storage: u32,
    /// 1 for CSR rows.
    pub sparse: u32,
    /// Threads per column (gather).
    pub tpc: u32,
    /// Register pass: units of a row per thread (0: the two-kernel path).
    pub v: u32,
    /// Register pass: heads per thread.
    pub kt: u32,
    /// Register pass: units staged in workgroup memory (1 when one head block holds a row).
    pub xs: u32,
    /// The instrumented variant (counts the words each kernel loads and stores).
    pub count: bool,
    /// Lane sums by subgroup shuffles (batch_subgroup.wgsl) rather than a workgroup tree.
    pub subgroups: bool,
    /// Register pass with subgroups: rows each thread loads before it uses the first, the
    /// rule on every lane, no barrier in the row loop (`rows_in_flight`); 0: by steps.
    pub rt: u32,
    /// Register pass with subgroups where a row spans several of them: rows a tile per row
    /// group, the rule on every lane, two barriers a tile (`rows_by_tile`); 0: off.
    pub tt: u32,
}

impl Shape {
    /// The two-kernel shape for `d` features and `heads` weight vectors with workgroup size
    /// `wg`: about 4 columns per thread in the row dot product, and a column tile covering the
    /// augmented rows of all heads (both powers of two).
    pub fn for_features(d: usize, heads: usize, wg: u32) -> Shape {
        let tpr = prev_pow2(d / 4).min(wg as usize) as u32;
        let tc = (heads.max(1) * (d + 1))
            .next_power_of_two()
            .min(wg as usize) as u32;
        Shape {
            wg,
            tpr,
            tc,
            storage: Storage::F32.code(),
            sparse: 0,
            tpc: 1,
            v: 0,
            kt: 1,
            xs: 1,
            count: false,
            subgroups: false,
            rt: 0,
            tt: 0,
        }
    }

    /// The shape for CSR rows with `nnz` stored values over `n` rows and `d` columns: about
    /// 4 values per thread in a row's dot product (at most 32 threads), and about 4 entries
    /// per thread in a column's sum (at most 32 threads).
    pub fn for_sparse(n: usize, d: usize, nnz: usize, heads: usize, wg: u32) -> Shape {
        let per_row = nnz / n.max(1);
        let per_col = nnz / d.max(1);
        Shape {
            tpr: prev_pow2(per_row / 4).min(32).min(wg as usize) as u32,
            tpc: prev_pow2(per_col / 4).min(32).min(wg as usize) as u32,
            sparse: 1,
            ..Shape::for_features(1, heads, wg)
        }
    }

    /// Bytes of workgroup memory the module declares for this shape (every variable, as if
    /// one entry point used them all, each rounded up to 16 bytes): the reductions (three of
    /// WG words, two flags), the lane sums (WG KT), two sets of row-group scores
    /// (2 (WG / TPR) KT), labels and row weights (two sets of WG / TPR each), the staged units
    /// (16 XS), and the subgroup check (two words). Tests hold this to naga's layout of every
    /// specialised module.
    pub fn workgroup_bytes(&self) -> u32 {
        let rows = self.wg / self.tpr.max(1);
        let words = [
            self.wg,
            self.wg,
            self.wg,
            1,
            1,
            self.wg * self.kt,
            2 * rows * self.kt,
            2 * rows,
            2 * rows,
            4 * self.xs,
        ];
        let sub = if self.subgroups { [1, 1] } else { [0, 0] };
        words
            .iter()
            .chain(&sub)
            .map(|w| (4 * w).next_multiple_of(16))
            .sum()
    }

    /// The override constants, as wgpu and naga take them.
    pub fn constants(&self) -> [(&'static str, f64); 12] {
        [
            ("WG", self.wg as f64),
            ("TPR", self.tpr as f64),
            ("TC", self.tc as f64),
            ("STORAGE", self.storage as f64),
            ("SPARSE", self.sparse as f64),
            ("TPC", self.tpc as f64),
            ("V", self.v as f64),
            ("KT", self.kt as f64),
            ("XS", self.xs as f64),
            ("COUNT", u32::from(self.count) as f64),
            ("RT", self.rt as f64),
            ("TT", self.tt as f64),
        ]
    }

    /// Whether the values are in range for the shader (powers of two within the workgroup,
    /// register pass within its per-thread arrays).
    pub fn is_valid(&self) -> bool {
        let pow2_within = |v: u32| v.is_power_of_two() && v <= self.wg;
        pow2_within(self.tpr)
            && pow2_within(self.tc)
            && pow2_within(self.tpc)
            && self.wg >= 32
            && self.v <= V_MAX
            && (1..=KT_MAX).contains(&self.kt)
            && self.kt * self.v <= KV_MAX
            && self.xs >= 1
            && (self.rt == 0
                || (self.rt.is_power_of_two()
                    && self.rt <= RT_MAX
                    && self.v > 0
                    && self.xs == 1
                    && self.subgroups))
            && (self.tt == 0
                || (TT_CHOICES.contains(&self.tt)
                    && self.rt == 0
                    && self.v > 0
                    && self.xs == 1
                    && self.subgroups))
    }
}

/// The largest power of two <= v (1 for v <= 1).
fn prev_pow2(v: usize) -> usize {
    if v <= 1 {
        1
    } else {
        1usize << (usize::BITS - 1 - v.leading_zeros())
    }
}

/// The workgroup size: `want` (256), or half of it where the device allows no more
/// invocations or workgroup memory (Vulkan and OpenGL ES 3.1 promise 128 invocations and
/// 16 KiB), with the two-kernel path's workgroup memory at its largest (one thread per row).
pub fn workgroup_size(limits: &wgpu::Limits, want: u32) -> Result<u32> {
    let bytes = |wg: u32| {
        Shape {
            tpr: 1,
            ..Shape::for_features(1, 1, wg)
        }
        .workgroup_bytes()
    };
    let want = want.next_power_of_two();
    for wg in [want, want / 2] {
        if wg <= limits.max_compute_invocations_per_workgroup
            && wg <= limits.max_compute_workgroup_size_x
            && bytes(wg) <= limits.max_compute_workgroup_storage_size
        {
            return Ok(wg);
        }
    }
    Err(Error::Gpu(format!(
        "the device allows no workgroup of {} invocations with {} bytes of workgroup memory \
         (limits: {} invocations, {} bytes)",
        want / 2,
        bytes(want / 2),
        limits.max_compute_invocations_per_workgroup,
        limits.max_compute_workgroup_storage_size
    )))
}

impl ShaderChecks {
    /// The checks for `create_shader_module_trusted`, or `None` for the checked default.
    fn runtime_checks(self) -> Option<wgpu::ShaderRuntimeChecks> {
        match self {
            ShaderChecks::Full => None,
            ShaderChecks::NoLoopCounters => {
                let mut c = wgpu::ShaderRuntimeChecks::checked();
                c.force_loop_bounding = false;
                Some(c)
            }
            ShaderChecks::None => Some(wgpu::ShaderRuntimeChecks::unchecked()),
        }
    }
}

/// Modules, layouts and the pipeline cache.
pub struct BatchPipelines {
    /// The tree module, and the subgroup module (built on first use).
    modules: [OnceLock<wgpu::ShaderModule>; 2],
    /// Layout of group 0 (shared buffers).
    pub global_layout: wgpu::BindGroupLayout,
    /// Layout of group 1 (one X segment).
    pub segment_layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    cache: Mutex<HashMap<(Entry, Shape), wgpu::ComputePipeline>>,
    /// Which of naga's runtime checks the modules keep ([`GpuOptions::shader_checks`](super::GpuOptions)).
    checks: ShaderChecks,
}

/// How a shader uses a storage buffer binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Loads only (`var<storage, read>`).
    Read,
    /// Loads and stores (`var<storage, read_write>`).
    ReadWrite,
}

pub(crate) fn storage(binding: u32, access: Access) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage {
                read_only: access == Access::Read,
            },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

impl BatchPipelines {
    /// Compiles the tree module and creates the layouts, with `checks`.
    pub fn new(ctx: &GpuContext, checks: ShaderChecks) -> Result<Self> {
        let me = ctx.scoped("creating the batch layouts", || {
            let global_layout =
                ctx.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("rosenblatt.global_layout"),
                        entries: &[
                            ctx.params_entry(0),
                            storage(1, Access::ReadWrite),
                            storage(2, Access::ReadWrite),
                            storage(3, Access::ReadWrite),
                            storage(4, Access::ReadWrite),
                            storage(5, Access::ReadWrite),
                            storage(6, Access::ReadWrite),
                            storage(7, Access::ReadWrite),
                        ],
                    });
            let segment_layout =
                ctx.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("rosenblatt.segment_layout"),
                        entries: &[
                            ctx.params_entry(0),
                            storage(1, Access::Read),
                            storage(2, Access::Read),
                            storage(3, Access::ReadWrite),
                            storage(4, Access::Read),
                            storage(5, Access::Read),
                            storage(6, Access::Read),
                            storage(7, Access::Read),
                            storage(8, Access::Read),
                        ],
                    });
            let pipeline_layout =
                ctx.device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some("rosenblatt.pipeline_layout"),
                        bind_group_layouts: &[Some(&global_layout), Some(&segment_layout)],
                        immediate_size: 0,
                    });
            BatchPipelines {
                modules: [OnceLock::new(), OnceLock::new()],
                global_layout,
                segment_layout,
                pipeline_layout,
                cache: Mutex::new(HashMap::new()),
                checks,
            }
        })?;
        me.module(ctx, LaneSums::Tree)?;
        Ok(me)
    }

    /// The module with lane sums by subgroups or by the tree, compiled on first use.
    fn module(&self, ctx: &GpuContext, lanes: LaneSums) -> Result<&wgpu::ShaderModule> {
        let slot = &self.modules[lanes as usize];
        if let Some(m) = slot.get() {
            return Ok(m);
        }
        if lanes.needs_subgroups() && !ctx.features.contains(wgpu::Features::SUBGROUP) {
            return Err(Error::Gpu(format!(
                "{} has no subgroup operations",
                ctx.describe()
            )));
        }
        let name = match lanes {
            LaneSums::Subgroups => "batch_subgroup",
            LaneSums::Tree => "batch_tree",
        };
        let m = ctx.scoped(
            &format!("compiling shaders/batch*.wgsl + {name}.wgsl"),
            || {
                let desc = wgpu::ShaderModuleDescriptor {
                    label: Some(&format!("rosenblatt.{name}")),
                    source: wgpu::ShaderSource::Wgsl(
                        ctx.params_source(&batch_source(lanes)).into_owned().into(),
                    ),
                };
                match self.checks.runtime_checks() {
                    // SAFETY: NoLoopCounters (a GPU's default) drops only the loop counters:
                    // every loop of the batch module runs to a bound that is a constant or a
                    // size the host set and checked against the bindings, by a positive step
                    // (the header of shaders/batch.wgsl); the bounds checks stay. None drops
                    // them too and is a measurement option only (`bench --shader-checks`).
                    Some(checks) => unsafe {
                        ctx.device.create_shader_module_trusted(desc, checks)
                    },
                    None => ctx.device.create_shader_module(desc),
                }
            },
        )?;
        Ok(slot.get_or_init(|| m))
    }

    /// The pipeline for `entry` specialised to `shape`, built on first use.
    pub fn pipeline(
        &self,
        ctx: &GpuContext,
        entry: Entry,
        shape: Shape,
    ) -> Result<wgpu::ComputePipeline> {
        let l = &ctx.limits;
        if !shape.is_valid()
            || shape.wg > l.max_compute_invocations_per_workgroup
            || shape.wg > l.max_compute_workgroup_size_x
            || shape.workgroup_bytes() > l.max_compute_workgroup_storage_size
        {
            return Err(Error::Gpu(format!(
                "kernel shape {shape:?} does not fit the device limits ({} invocations, {} bytes of workgroup memory)",
                l.max_compute_invocations_per_workgroup, l.max_compute_workgroup_storage_size
            )));
        }
        // A panic while the lock was held (wgpu's GL backend panics when its context lock
        // times out) leaves the map as it was: keep using it.
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = cache.get(&(entry, shape)) {
            return Ok(p.clone());
        }
        let module = self.module(ctx, LaneSums::of(&shape))?;
        let label = format!("rosenblatt.{}", entry.name());
        let constants = shape.constants();
        let p = ctx.scoped(&format!("building pipeline {label}"), || {
            ctx.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: Some(&self.pipeline_layout),
                    module,
                    entry_point: Some(entry.name()),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &constants,
                        ..Default::default()
                    },
                    cache: None,
                })
        })?;
        cache.insert((entry, shape), p.clone());
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_powers_of_two_within_the_workgroup() {
        for d in [1, 2, 3, 63, 64, 65, 257, 5000, 100_000] {
            let s = Shape::for_features(d, 1 + d % 3, 256);
            assert!(s.is_valid(), "{d}: {s:?}");
        }
        assert_eq!(Shape::for_features(1, 1, 256).tc, 2);
        assert_eq!(Shape::for_features(1, 3, 256).tc, 8);
        let s = Shape::for_features(64, 1, 256);
        assert_eq!((s.tpr, s.tc, s.v), (16, 128, 0));
        assert_eq!(Shape::for_features(5000, 1, 256).tpr, 256);
    }

    #[test]
    fn workgroup_size_respects_memory() {
        let mut l = wgpu::Limits::default();
        assert_eq!(workgroup_size(&l, 256).unwrap(), 256);
        l.max_compute_workgroup_storage_size = 8000;
        assert_eq!(workgroup_size(&l, 256).unwrap(), 128);
        l.max_compute_workgroup_storage_size = 100;
        assert!(workgroup_size(&l, 256).is_err());
        l.max_compute_workgroup_storage_size = 16384;
        l.max_compute_invocations_per_workgroup = 64;
        assert!(workgroup_size(&l, 256).is_err());
    }

    #[test]
    fn entry_codes_follow_the_list() {
        for (i, e) in Entry::ALL.iter().enumerate() {
            assert_eq!(e.code() as usize, i);
        }
    }
}
