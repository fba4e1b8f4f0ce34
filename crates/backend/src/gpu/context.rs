//! The GPU context: instance (all backends, `WGPU_BACKEND` honoured), adapter choice,
//! device and queue, built once. Errors the device reports outside an error scope and
//! device loss are captured into the context and turned into [`Error::Gpu`], never panics.

use std::sync::{Arc, Mutex};

use super::paths::{GpuPath, PathCounts};
use crate::error::{Error, Result};
pub use crate::gpu_options::{AdapterQuery, AdapterReport, ParamsSpace, HOW_TO_GET_ONE};

fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let t = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let b = match info.backend {
        wgpu::Backend::Vulkan => 0,
        wgpu::Backend::Metal => 1,
        wgpu::Backend::Dx12 => 2,
        wgpu::Backend::Gl => 3,
        _ => 4,
    };
    (t, b)
}

fn is_software(info: &wgpu::AdapterInfo) -> bool {
    info.device_type == wgpu::DeviceType::Cpu
}

/// Storage bindings a stage the batch pipelines take with their parameter blocks in storage
/// buffers (15 for the data and state, 2 blocks): software adapters with fewer (Mesa's
/// OpenGL) keep the blocks uniform.
pub const PARAMS_STORAGE_BINDINGS: u32 = 17;

/// `src` (WGSL, whose only uniform bindings are parameter blocks) with its parameter blocks
/// in `space`: `var<uniform>` as written, or `var<storage, read>`.
pub fn params_source(src: &str, space: ParamsSpace) -> std::borrow::Cow<'_, str> {
    match space {
        ParamsSpace::Uniform => src.into(),
        ParamsSpace::Storage => src.replace("var<uniform>", "var<storage, read>").into(),
    }
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?})", info.name, info.backend)
}

/// Optional features that speed things up or measure where present; nothing requires them.
const OPTIONAL: [(wgpu::Features, &str); 4] = [
    (wgpu::Features::SUBGROUP, "subgroup"),
    (wgpu::Features::SHADER_F16, "shader-f16"),
    (wgpu::Features::SHADER_FLOAT32_ATOMIC, "float32-atomic"),
    (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
];

/// On Vulkan, buffers mapped for reading may also be copy sources where the adapter allows
/// it: streamed X's staging then lies in host memory (see `buffers::host_staging_usage`).
fn host_staging_feature(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> wgpu::Features {
    let f = wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
    match info.backend == wgpu::Backend::Vulkan && adapter.features().contains(f) {
        true => f,
        false => wgpu::Features::empty(),
    }
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle().with_env())
}

fn adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let mut list = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    list.retain(|a| {
        let f = a.get_downlevel_capabilities().flags;
        f.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
    });
    list.sort_by_key(|a| rank(&a.get_info()));
    list
}

/// Every adapter with compute shaders, best first, and the index `auto` would pick.
pub fn list_adapters() -> (Vec<AdapterReport>, Option<usize>) {
    let inst = instance();
    let list = adapters(&inst);
    let auto = list.iter().position(|a| !is_software(&a.get_info()));
    let reports = list
        .iter()
        .map(|a| {
            let i = a.get_info();
            let l = a.limits();
            let f = a.features();
            AdapterReport {
                name: i.name.clone(),
                backend: format!("{:?}", i.backend),
                device_type: format!("{:?}", i.device_type),
                driver: i.driver.clone(),
                driver_info: i.driver_info.clone(),
                max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
                max_buffer_size: l.max_buffer_size,
                max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
                max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
                max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
                features: OPTIONAL
                    .iter()
                    .filter(|(feat, _)| f.contains(*feat))
                    .map(|(_, n)| n.to_string())
                    .collect(),
            }
        })
        .collect();
    (reports, auto)
}

/// Instance, adapter, device and queue, plus errors captured outside error scopes.
pub struct GpuContext {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Adapter information.
    pub info: wgpu::AdapterInfo,
    /// The device's limits (the adapter's, requested in full).
    pub limits: wgpu::Limits,
    /// Optional features enabled on the device.
    pub features: wgpu::Features,
    /// How the kernels read their parameter blocks: storage on a software adapter that has
    /// [`PARAMS_STORAGE_BINDINGS`], uniform elsewhere, unless the backend's options say
    /// ([`ParamsSpace`]).
    pub params: ParamsSpace,
    captured: Arc<Mutex<Vec<String>>>,
    /// Work recorded by path ([`GpuPath`]), for the tests that prove every path runs.
    ran: PathCounts,
}

impl GpuContext {
    /// Opens the adapter matching `q` and creates a device with the adapter's limits.
    pub fn new(q: &AdapterQuery) -> Result<Self> {
        let inst = instance();
        let list = adapters(&inst);
        if list.is_empty() {
            return Err(Error::NoGpu(format!(
                "no GPU adapter found; {HOW_TO_GET_ONE}"
            )));
        }
        let same_kind = |a: &wgpu::Adapter| {
            let (i, b) = (a.get_info(), list[0].get_info());
            i.backend == b.backend && i.device_type == b.device_type
        };
        let adapter = match &q.name {
            Some(want) => {
                let w = want.to_lowercase();
                let matching: Vec<&wgpu::Adapter> = list
                    .iter()
                    .filter(|a| a.get_info().name.to_lowercase().contains(&w))
                    .collect();
                if matching.is_empty() {
                    let names: Vec<String> = list.iter().map(|a| describe(&a.get_info())).collect();
                    return Err(Error::NoGpu(format!(
                        "no GPU adapter matches {want:?}; available: {}",
                        names.join(", ")
                    )));
                }
                matching[q.nth.unwrap_or(0) % matching.len()]
            }
            None => {
                let best = &list[0];
                if q.hardware_only && is_software(&best.get_info()) {
                    let names: Vec<String> = list.iter().map(|a| describe(&a.get_info())).collect();
                    return Err(Error::NoGpu(format!(
                        "only software GPU adapters ({}), which are slower than the CPU backend; \
                         asking for the GPU backend by name uses them",
                        names.join(", ")
                    )));
                }
                let alike: Vec<&wgpu::Adapter> = list.iter().filter(|a| same_kind(a)).collect();
                alike[q.nth.unwrap_or(0) % alike.len()]
            }
        };
        let info = adapter.get_info();
        let limits = adapter.limits();
        let features = OPTIONAL
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| adapter.features().contains(*f))
            .fold(wgpu::Features::empty(), |a, f| a | f)
            | host_staging_feature(adapter, &info);
        let desc = wgpu::DeviceDescriptor {
            label: Some("rosenblatt.device"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| Error::Gpu(format!("cannot open {}: {e}", describe(&info))))?;
        let captured = Arc::new(Mutex::new(Vec::new()));
        let sink = captured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let sink = captured.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut v) = sink.lock() {
                v.push(format!("device lost ({reason:?}): {msg}"));
            }
        });
        let storage_fits = limits.max_storage_buffers_per_shader_stage >= PARAMS_STORAGE_BINDINGS;
        let params = if is_software(&info) && storage_fits {
            ParamsSpace::Storage
        } else {
            ParamsSpace::Uniform
        };
        Ok(GpuContext {
            device,
            queue,
            info,
            limits,
            features,
            params,
            captured,
            ran: PathCounts::default(),
        })
    }

    /// `src` (WGSL) with its parameter blocks in the context's [`ParamsSpace`].
    pub(crate) fn params_source<'a>(&self, src: &'a str) -> std::borrow::Cow<'a, str> {
        params_source(src, self.params)
    }

    /// The layout entry of a parameter block at `binding`, in the context's [`ParamsSpace`].
    pub(crate) fn params_entry(&self, binding: u32) -> wgpu::BindGroupLayoutEntry {
        let ty = match self.params {
            ParamsSpace::Uniform => wgpu::BufferBindingType::Uniform,
            ParamsSpace::Storage => wgpu::BufferBindingType::Storage { read_only: true },
        };
        wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }
    }

    /// The usage a parameter block's buffer needs to be bound as [`Self::params_entry`] binds it.
    pub(crate) fn params_usage(&self) -> wgpu::BufferUsages {
        match self.params {
            ParamsSpace::Uniform => wgpu::BufferUsages::UNIFORM,
            ParamsSpace::Storage => wgpu::BufferUsages::STORAGE,
        }
    }

    /// Counts work recorded on `path`, and on the parameter space its kernels read.
    pub(crate) fn ran(&self, path: GpuPath) {
        self.ran.add(path);
        self.ran.add(GpuPath::of_params(self.params));
    }

    /// The paths this context has run work on, with how often each was recorded.
    pub fn paths_run(&self) -> Vec<(GpuPath, u64)> {
        self.ran.snapshot()
    }

    /// "name (API)".
    pub fn describe(&self) -> String {
        describe(&self.info)
    }

    /// Runs `f` inside error scopes for validation, out-of-memory and internal errors, and
    /// returns the first error any of them (or the uncaptured-error handler) saw.
    pub fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        let v = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let m = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let i = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let out = f();
        let errs = [
            pollster::block_on(i.pop()),
            pollster::block_on(m.pop()),
            pollster::block_on(v.pop()),
        ];
        if let Some(e) = errs.into_iter().flatten().next() {
            return Err(match e {
                wgpu::Error::OutOfMemory { .. } => Error::TooLarge(format!(
                    "{what}: the GPU ({}) ran out of memory",
                    self.describe()
                )),
                other => Error::Gpu(format!("{what}: {other}")),
            });
        }
        self.check(what)?;
        Ok(out)
    }

    /// Returns an error if the device reported one outside a scope (or was lost).
    pub fn check(&self, what: &str) -> Result<()> {
        let mut v = self
            .captured
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(first) = v.first().cloned() {
            v.clear();
            return Err(Error::Gpu(format!("{what}: {first}")));
        }
        Ok(())
    }
}
