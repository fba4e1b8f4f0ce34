//! Which backend runs: the user's choice and the pick under `auto`. The one place that
//! names the concrete backends.

use serde::{Deserialize, Serialize};

use super::gpu_options::GpuOptions;
use super::{cpu, Backend};
use crate::error::Result;

/// Which kind of hardware a backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The CPU (multithreaded reference).
    Cpu,
    /// A wgpu adapter.
    Gpu,
}

impl BackendKind {
    /// "cpu" or "gpu".
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Gpu => "gpu",
        }
    }
}

/// What the user asked for with `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// A GPU adapter when one exists, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// A GPU adapter, or an error.
    Gpu,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::Gpu),
            _ => Err(format!("unknown backend {s:?} (expected auto, cpu or gpu)")),
        }
    }
}

/// A chosen backend and one line saying which and why (for the CLI to show).
pub struct Selected {
    /// The backend.
    pub backend: Box<dyn Backend>,
    /// Which backend was chosen and why.
    pub note: String,
}

/// Values of X (rows x features) below which `Auto` trains on the CPU without opening a GPU
/// adapter: opening one (building the pipelines) and uploading X cost more than such a job's
/// epochs on the CPU, and on a machine without a GPU probing the software adapters alone
/// costs time and memory (docs/performance.md, "Figures behind the code's choices").
pub const AUTO_GPU_MIN_VALUES: u64 = 1 << 22;

/// `select` for a job of `values` values of X: under `Auto` with no adapter named, fewer
/// than [`AUTO_GPU_MIN_VALUES`] take the CPU at once, no adapter opened.
pub fn select_for(choice: BackendChoice, gpu: &GpuOptions, values: u64) -> Result<Selected> {
    if choice == BackendChoice::Auto && gpu.adapter.name.is_none() && values < AUTO_GPU_MIN_VALUES {
        return Ok(Selected {
            backend: Box::new(cpu::CpuBackend::new()),
            note: format!("backend: cpu (auto: {values} values of X, too few to gain from a GPU)"),
        });
    }
    select(choice, gpu)
}

/// Picks the backend for `choice`. Under `Auto` a software adapter (such as llvmpipe) is
/// passed over for the CPU, which is faster, unless `gpu.adapter.name` names it.
pub fn select(choice: BackendChoice, gpu: &GpuOptions) -> Result<Selected> {
    let cpu = || Box::new(cpu::CpuBackend::new()) as Box<dyn Backend>;
    match choice {
        BackendChoice::Cpu => Ok(Selected {
            backend: cpu(),
            note: "backend: cpu (requested)".into(),
        }),
        BackendChoice::Gpu => {
            let g = open_gpu(gpu)?;
            let note = format!("backend: gpu, {} (requested)", g.device());
            Ok(Selected { backend: g, note })
        }
        BackendChoice::Auto => {
            let mut opts = gpu.clone();
            opts.adapter.hardware_only = opts.adapter.name.is_none();
            match open_gpu(&opts) {
                Ok(g) => {
                    let note = format!(
                        "backend: gpu, {} (auto: a GPU adapter is present)",
                        g.device()
                    );
                    Ok(Selected { backend: g, note })
                }
                Err(e) => Ok(Selected {
                    backend: cpu(),
                    note: format!("backend: cpu (auto: {e})"),
                }),
            }
        }
    }
}

/// The GPU backend on the adapter `opts` asks for.
#[cfg(feature = "gpu")]
fn open_gpu(opts: &GpuOptions) -> Result<Box<dyn Backend>> {
    Ok(Box::new(super::gpu::GpuBackend::new(opts)?))
}

/// No GPU backend in a build without the `gpu` feature: asking for one is an error that
/// says so, and `auto` takes the CPU.
#[cfg(not(feature = "gpu"))]
fn open_gpu(_: &GpuOptions) -> Result<Box<dyn Backend>> {
    Err(crate::Error::NoGpu(
        "this build of rosenblatt has no GPU backend (built without the `gpu` feature)".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the `gpu` feature a GPU asked for is an error naming the build, and `auto`
    /// trains on the CPU; with it, `auto` on a small job still takes the CPU unopened.
    #[test]
    fn a_build_without_a_gpu_backend_says_so_and_auto_takes_the_cpu() {
        let opts = GpuOptions::default();
        let small = select_for(BackendChoice::Auto, &opts, 10).unwrap();
        assert_eq!(small.backend.kind(), BackendKind::Cpu);
        if cfg!(feature = "gpu") {
            return;
        }
        let e = select(BackendChoice::Gpu, &opts)
            .err()
            .expect("no GPU backend");
        assert!(e.to_string().contains("without the `gpu` feature"), "{e}");
        let auto = select(BackendChoice::Auto, &opts).unwrap();
        assert_eq!(auto.backend.kind(), BackendKind::Cpu);
        assert!(
            auto.note.contains("without the `gpu` feature"),
            "{}",
            auto.note
        );
        assert!(crate::list_adapters().0.is_empty());
    }
}
