//! How to open and drive a GPU: the options and reports the library's users and the command
//! line name, free of wgpu, so they exist in a build without the `gpu` feature (where asking
//! for a GPU is an error that says so, and `auto` runs on the CPU).

use serde::Serialize;

/// How to pick an adapter.
#[derive(Debug, Clone, Default)]
pub struct AdapterQuery {
    /// Case-insensitive substring of the adapter name; `None` picks the best one.
    pub name: Option<String>,
    /// Refuse software adapters (such as llvmpipe) unless named explicitly.
    pub hardware_only: bool,
    /// One of several processes on a machine (a data-parallel run): take the adapter at this
    /// index, modulo their number, among those matching `name` or, without a name, among those
    /// of the best adapter's API and type (so N processes spread over the machine's GPUs).
    pub nth: Option<usize>,
}

/// What `rosenblatt info` shows about an adapter.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterReport {
    /// Adapter name.
    pub name: String,
    /// Graphics API (Vulkan, Metal, Dx12, Gl).
    pub backend: String,
    /// Discrete, integrated, virtual, CPU (software) or other.
    pub device_type: String,
    /// Driver name.
    pub driver: String,
    /// Driver details (version).
    pub driver_info: String,
    /// Largest storage-buffer binding, bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer, bytes.
    pub max_buffer_size: u64,
    /// Largest workgroup (invocations).
    pub max_compute_invocations_per_workgroup: u32,
    /// Workgroup memory, bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Optional features rosenblatt can use that this adapter offers.
    pub features: Vec<String>,
}

/// How to get an adapter, for error messages.
pub const HOW_TO_GET_ONE: &str = "install a GPU driver with Vulkan, Metal, DX12 or OpenGL ES 3.1 \
support; for a software adapter (slow, for testing) install Mesa's lavapipe, e.g. \
`apt-get install mesa-vulkan-drivers`";

/// How to open and drive the GPU.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// Which adapter.
    pub adapter: AdapterQuery,
    /// Buffer shaping and test hooks.
    pub resident: ResidentOptions,
    /// Which of naga's runtime checks the batch modules keep. `None`: every check on a
    /// software adapter (where the tests run), every check but the loop counters on a
    /// hardware adapter (their cost: ShaderChecks; why dropping them is sound: the batch
    /// module's loops, docs in shaders/batch.wgsl).
    pub shader_checks: Option<ShaderChecks>,
    /// How the kernels read their parameter blocks (sizes, the rule, a segment's place).
    /// `None`: storage on a software adapter with enough storage bindings, uniform elsewhere
    /// ([`ParamsSpace`]).
    pub params_space: Option<ParamsSpace>,
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
    /// compute unit (`plan::device_workgroups`), fewer where the partial sums would take more
    /// than 2% of one read of X; tests vary it to show that results do not depend on it.
    pub workgroups: Option<usize>,
    /// Most heads one thread of the register pass holds (default: 12, and 1 on OpenGL, where
    /// Mesa compiles several heads per thread slowly; see plan::GL_KT_CAP). Tests set 1 to
    /// run the head blocks' shared rows on every adapter.
    pub heads_per_thread: Option<u32>,
    /// Test hook: the most steps of rows a workgroup of the register pass runs on a software
    /// adapter (default `plan::software_steps`; tests measure Mesa's loop limit with it).
    pub software_steps: Option<usize>,
    /// Rows each thread of the register pass loads before it uses the first, where rows can
    /// be in flight (subgroups, one head block, a row within a subgroup): `None` for
    /// `plan::rows_per_thread` (64 bytes a thread), `Some(0)` never (the loop by steps); other
    /// values are rounded to a power of two, at most RT_MAX (`bench` sweeps it).
    pub rows_per_thread: Option<u32>,
    /// Rows a tile per row group where one head block holds a row that spans several
    /// subgroups (`rows_by_tile`): `None` for `plan::tile_rows`'s choice, `Some(0)` never (the
    /// loop by steps); other values are rounded to one of TT_CHOICES (`bench` sweeps it).
    pub tile_rows: Option<u32>,
    /// Lane sums by subgroup operations: `None` on a GPU that has them (software adapters
    /// run the workgroup tree, faster there), `Some(false)` never, `Some(true)` always (an
    /// error without them).
    pub subgroups: Option<bool>,
    /// Most bytes of X to keep on the device: when X (training and held-out rows) is larger,
    /// it streams: two segment slots on the device, each segment uploaded into one while the
    /// other's kernels run, every epoch. `None`: X is resident (it must fit the device).
    pub gpu_memory: Option<u64>,
    /// Streamed X from host-visible staging buffers filled once (copies recorded with the
    /// kernels, several epochs a submit): `None` where half the host memory budget holds
    /// them, `Some(false)` never (each segment written from the host before its kernels,
    /// one epoch a submit), `Some(true)` always.
    pub mapped_staging: Option<bool>,
    /// Staged X read in place by the kernels, over the bus, instead of copied into the device
    /// slots each epoch: the transfer then runs while the kernels compute. For the register
    /// pass (dense rows read once an epoch, in order) where the staging may be bound as
    /// storage (Vulkan), unless `Some(false)`. CSR rows are always copied.
    pub read_in_place: Option<bool>,
}

/// The address space of the kernels' parameter blocks (`P` and `S` of shaders/batch.wgsl,
/// `P` of shaders/steps.wgsl, `K` of shaders/kernel.wgsl): a few words every thread reads,
/// which the host writes before the dispatches.
///
/// Both run the same code on the same values. Uniform buffers are what GPUs read such blocks
/// through fastest (a constant cache). Mesa's software Vulkan (lavapipe) specialises a compute
/// shader to the values of the uniform buffer its loops read, and compiled and kept a new copy
/// of the sparse kernels at each dispatch, which storage blocks avoid (docs/performance.md,
/// "Figures behind the code's choices").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamsSpace {
    /// `var<uniform>` (hardware adapters' default).
    Uniform,
    /// `var<storage, read>` (software adapters' default).
    Storage,
}

impl ParamsSpace {
    /// The setting's name: uniform, storage.
    pub fn name(self) -> &'static str {
        match self {
            ParamsSpace::Uniform => "uniform",
            ParamsSpace::Storage => "storage",
        }
    }
}

impl std::str::FromStr for ParamsSpace {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [ParamsSpace::Uniform, ParamsSpace::Storage]
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown parameter space {s:?} (uniform, storage)"))
    }
}

/// Which of naga's runtime checks the batch modules are built with. wgpu's default
/// (`create_shader_module`) clamps every index into a local array, guards every integer
/// division and adds a 64-bit counter to every loop (so that no loop runs forever), which
/// also keeps compilers from unrolling the loops over the per-thread arrays; buffer accesses
/// are bounded by the driver where it offers robust buffer access (Vulkan), else clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShaderChecks {
    /// Every check (wgpu's default).
    #[default]
    Full,
    /// Every check but the loop counters: the bounds checks stay.
    NoLoopCounters,
    /// None of naga's checks (the driver's robust buffer access, where enabled, remains).
    None,
}

impl ShaderChecks {
    /// The setting's name: full, no-loop-counters, none.
    pub fn name(self) -> &'static str {
        match self {
            ShaderChecks::Full => "full",
            ShaderChecks::NoLoopCounters => "no-loop-counters",
            ShaderChecks::None => "none",
        }
    }
}

impl std::str::FromStr for ShaderChecks {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [
            ShaderChecks::Full,
            ShaderChecks::NoLoopCounters,
            ShaderChecks::None,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| format!("unknown shader checks {s:?} (full, no-loop-counters, none)"))
    }
}

/// Every adapter with compute shaders, best first, and the index `auto` would pick: none in
/// a build without the `gpu` feature.
#[cfg(not(feature = "gpu"))]
pub fn list_adapters() -> (Vec<AdapterReport>, Option<usize>) {
    (Vec::new(), None)
}
