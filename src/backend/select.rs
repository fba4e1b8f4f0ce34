//! Which backend runs: the user's choice and the pick under `auto`. The one place that
//! names the concrete backends.

use serde::{Deserialize, Serialize};

use super::{cpu, gpu, Backend};
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

/// Picks the backend for `choice`. Under `Auto` a software adapter (such as llvmpipe) is
/// passed over for the CPU, which is faster, unless `gpu.adapter.name` names it.
pub fn select(choice: BackendChoice, gpu: &gpu::GpuOptions) -> Result<Selected> {
    let cpu = || Box::new(cpu::CpuBackend::new()) as Box<dyn Backend>;
    match choice {
        BackendChoice::Cpu => Ok(Selected {
            backend: cpu(),
            note: "backend: cpu (requested)".into(),
        }),
        BackendChoice::Gpu => {
            let g = gpu::GpuBackend::new(gpu)?;
            let note = format!("backend: gpu, {} (requested)", g.device());
            Ok(Selected {
                backend: Box::new(g),
                note,
            })
        }
        BackendChoice::Auto => {
            let mut opts = gpu.clone();
            opts.adapter.hardware_only = opts.adapter.name.is_none();
            match gpu::GpuBackend::new(&opts) {
                Ok(g) => {
                    let note = format!(
                        "backend: gpu, {} (auto: a GPU adapter is present)",
                        g.device()
                    );
                    Ok(Selected {
                        backend: Box::new(g),
                        note,
                    })
                }
                Err(e) => Ok(Selected {
                    backend: cpu(),
                    note: format!("backend: cpu (auto: {e})"),
                }),
            }
        }
    }
}
