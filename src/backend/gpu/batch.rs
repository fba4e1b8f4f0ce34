//! The batch-epoch pipelines (shaders/batch.wgsl): shader module, bind-group layouts and
//! compute pipelines, built once per context. Pipelines are specialised by WGSL `override`
//! constants (WG, TPR, TC) and cached by their values; every value is checked against the
//! device limits (including workgroup memory, which wgpu 30 does not check) before a pipeline
//! is built. The structs the pipelines read and write are in `mirror.rs`.

use std::collections::HashMap;
use std::sync::Mutex;

use super::context::GpuContext;
use crate::backend::Storage;
use crate::error::{Error, Result};

/// The batch pipelines' WGSL source.
pub const BATCH_WGSL: &str = include_str!("../../../shaders/batch.wgsl");

/// The batch shader's entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Entry {
    /// Margins, mistake flags, per-workgroup counts.
    Margins,
    /// Per-chunk partial sums of y x over mistakes.
    Accumulate,
    /// Margins and accumulate in one pass, a workgroup per chunk.
    Fused,
    /// Reduce partials in chunk order, update w.
    Apply,
    /// Reduce many partials in a fixed tree per weight, update w.
    ApplyTree,
    /// Epoch statistics and stop decision.
    Finalize,
    /// Decision values.
    Scores,
    /// Sparse training segments: per-column sums over a CSC copy.
    Gather,
}

impl Entry {
    /// The WGSL entry point's name.
    pub fn name(self) -> &'static str {
        match self {
            Entry::Margins => "margins",
            Entry::Accumulate => "accumulate",
            Entry::Fused => "fused",
            Entry::Apply => "apply",
            Entry::ApplyTree => "apply_tree",
            Entry::Finalize => "finalize",
            Entry::Scores => "scores",
            Entry::Gather => "gather",
        }
    }
}

/// Override values for one pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Workgroup size.
    pub wg: u32,
    /// Threads per row (margins, scores).
    pub tpr: u32,
    /// Columns per tile (accumulate).
    pub tc: u32,
    /// How X is stored ([`Storage::code`]).
    pub storage: u32,
    /// 1 for CSR rows.
    pub sparse: u32,
    /// Threads per column (gather).
    pub tpc: u32,
}

impl Shape {
    /// The shape for `d` features and `heads` weight vectors with workgroup size `wg`: about
    /// 4 columns per thread in the row dot product, and a column tile covering the augmented
    /// rows of all heads (both powers of two).
    pub fn for_features(d: usize, heads: usize, wg: u32) -> Shape {
        let prev_pow2 = |v: usize| {
            if v <= 1 {
                1
            } else {
                1usize << (usize::BITS - 1 - v.leading_zeros())
            }
        };
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
        }
    }

    /// The shape for CSR rows with `nnz` stored values over `n` rows and `d` columns: about
    /// 4 values per thread in a row's dot product (at most 32 threads), and about 4 entries
    /// per thread in a column's sum (at most 32 threads).
    pub fn for_sparse(n: usize, d: usize, nnz: usize, heads: usize, wg: u32) -> Shape {
        let prev_pow2 = |v: usize| {
            if v <= 1 {
                1
            } else {
                1usize << (usize::BITS - 1 - v.leading_zeros())
            }
        };
        let per_row = nnz / n.max(1);
        let per_col = nnz / d.max(1);
        Shape {
            tpr: prev_pow2(per_row / 4).min(32).min(wg as usize) as u32,
            tpc: prev_pow2(per_col / 4).min(32).min(wg as usize) as u32,
            sparse: 1,
            ..Shape::for_features(1, heads, wg)
        }
    }
}

/// Bytes of workgroup memory the batch shader declares for workgroup size `wg`.
pub fn workgroup_bytes(wg: u32) -> u32 {
    3 * 4 * wg + 8
}

/// Largest power-of-two workgroup size <= `want` that the device allows.
pub fn workgroup_size(limits: &wgpu::Limits, want: u32) -> Result<u32> {
    let mut wg = want.next_power_of_two();
    while wg >= 32 {
        if wg <= limits.max_compute_invocations_per_workgroup
            && wg <= limits.max_compute_workgroup_size_x
            && workgroup_bytes(wg) <= limits.max_compute_workgroup_storage_size
        {
            return Ok(wg);
        }
        wg /= 2;
    }
    Err(Error::Gpu(format!(
        "the device allows no workgroup of at least 32 invocations with {} bytes of workgroup memory \
         (limits: {} invocations, {} bytes)",
        workgroup_bytes(32),
        limits.max_compute_invocations_per_workgroup,
        limits.max_compute_workgroup_storage_size
    )))
}

/// Module, layouts and the pipeline cache.
pub struct BatchPipelines {
    module: wgpu::ShaderModule,
    /// Layout of group 0 (shared buffers).
    pub global_layout: wgpu::BindGroupLayout,
    /// Layout of group 1 (one X segment).
    pub segment_layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    cache: Mutex<HashMap<(Entry, Shape), wgpu::ComputePipeline>>,
}

pub(crate) fn storage(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

pub(crate) fn uniform(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

impl BatchPipelines {
    /// Compiles the module and creates the layouts.
    pub fn new(ctx: &GpuContext) -> Result<Self> {
        ctx.scoped("compiling shaders/batch.wgsl", || {
            let module = ctx
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("rosenblatt.batch"),
                    source: wgpu::ShaderSource::Wgsl(BATCH_WGSL.into()),
                });
            let global_layout =
                ctx.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("rosenblatt.global_layout"),
                        entries: &[
                            uniform(0),
                            storage(1, false),
                            storage(2, false),
                            storage(3, false),
                            storage(4, false),
                            storage(5, false),
                            storage(6, false),
                            storage(7, false),
                        ],
                    });
            let segment_layout =
                ctx.device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("rosenblatt.segment_layout"),
                        entries: &[
                            uniform(0),
                            storage(1, true),
                            storage(2, true),
                            storage(3, false),
                            storage(4, true),
                            storage(5, true),
                            storage(6, true),
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
                module,
                global_layout,
                segment_layout,
                pipeline_layout,
                cache: Mutex::new(HashMap::new()),
            }
        })
    }

    /// The pipeline for `entry` specialised to `shape`, built on first use.
    pub fn pipeline(
        &self,
        ctx: &GpuContext,
        entry: Entry,
        shape: Shape,
    ) -> Result<wgpu::ComputePipeline> {
        let l = &ctx.limits;
        if !(shape.tpr.is_power_of_two()
            && shape.tc.is_power_of_two()
            && shape.tpc.is_power_of_two()
            && shape.tpr <= shape.wg
            && shape.tc <= shape.wg
            && shape.tpc <= shape.wg)
            || shape.wg > l.max_compute_invocations_per_workgroup
            || shape.wg > l.max_compute_workgroup_size_x
            || workgroup_bytes(shape.wg) > l.max_compute_workgroup_storage_size
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
        let label = format!("rosenblatt.{}", entry.name());
        let constants = [
            ("WG", shape.wg as f64),
            ("TPR", shape.tpr as f64),
            ("TC", shape.tc as f64),
            ("STORAGE", shape.storage as f64),
            ("SPARSE", shape.sparse as f64),
            ("TPC", shape.tpc as f64),
        ];
        let p = ctx.scoped(&format!("building pipeline {label}"), || {
            ctx.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: Some(&self.pipeline_layout),
                    module: &self.module,
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
            assert!(s.tpr.is_power_of_two() && s.tpr <= 256, "{d}: {s:?}");
            assert!(s.tc.is_power_of_two() && s.tc <= 256, "{d}: {s:?}");
        }
        assert_eq!(Shape::for_features(1, 1, 256).tc, 2);
        assert_eq!(Shape::for_features(1, 3, 256).tc, 8);
        assert_eq!(
            Shape::for_features(64, 1, 256),
            Shape {
                wg: 256,
                tpr: 16,
                tc: 128,
                storage: 0,
                sparse: 0,
                tpc: 1
            }
        );
        assert_eq!(Shape::for_features(5000, 1, 256).tpr, 256);
    }

    #[test]
    fn workgroup_size_respects_memory() {
        let mut l = wgpu::Limits::default();
        assert_eq!(workgroup_size(&l, 256).unwrap(), 256);
        l.max_compute_workgroup_storage_size = 2000;
        assert_eq!(workgroup_size(&l, 256).unwrap(), 128);
        l.max_compute_workgroup_storage_size = 100;
        assert!(workgroup_size(&l, 256).is_err());
    }
}
