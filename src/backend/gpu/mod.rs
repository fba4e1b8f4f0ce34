//! GPU backend through wgpu. Not built yet: creating it always fails with a clear message,
//! so `--backend gpu` is an error and `--backend auto` uses the CPU.

use super::{Backend, BackendKind, Bound, DataView, TrainView};
use crate::error::{Error, Result};

/// The wgpu backend.
pub struct GpuBackend {
    _private: (),
}

impl GpuBackend {
    /// Opens a GPU adapter whose name contains `adapter` (case-insensitive), or any.
    pub fn new(_adapter: Option<&str>) -> Result<Self> {
        Err(Error::NoGpu(
            "the GPU backend is not available in this build yet; use --backend cpu".into(),
        ))
    }
}

impl Backend for GpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }
    fn device(&self) -> String {
        String::new()
    }
    fn bind<'a>(&'a self, _data: TrainView<'a>) -> Result<Box<dyn Bound + 'a>> {
        Err(Error::NoGpu("GPU backend unavailable".into()))
    }
    fn scores(&self, _data: DataView<'_>, _w: &[f32]) -> Result<Vec<f32>> {
        Err(Error::NoGpu("GPU backend unavailable".into()))
    }
}
