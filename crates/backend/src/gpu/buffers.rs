//! Buffers on the device: storage buffers, buffers made from host bytes (dense rows padded to
//! whole units of 4 values, labels as bytes), bind group entries and read-backs.

use super::context::GpuContext;
use super::plan::padded;
use crate::error::{Error, Result};
use crate::Storage;

/// A zeroed storage buffer of `size` bytes (at least 16, a multiple of 16) that copies both
/// ways.
pub(crate) fn storage_buf(ctx: &GpuContext, label: &str, size: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16).next_multiple_of(16),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The usage of a staging buffer that the queue copies from, filled once by the host while
/// mapped at creation, that should lie in host memory: streamed X is there because device
/// memory is short. On Vulkan wgpu places MAP_WRITE buffers by preferring memory that is
/// both device-local and host-visible, which on a GPU with a resizable BAR is device memory
/// (its "staging" copied faster than any PCIe link moves, and took the device memory
/// `--gpu-memory` limits; docs/performance.md, "Figures behind the code's choices"); a
/// MAP_READ buffer goes to host-cached memory, which is the host's. Where MAP_READ may be a
/// copy source (the device was opened with MAPPABLE_PRIMARY_BUFFERS, on Vulkan) that is the
/// usage; otherwise MAP_WRITE, which on the other APIs is upload memory on the host.
pub(super) fn host_staging_usage(ctx: &GpuContext) -> wgpu::BufferUsages {
    use wgpu::BufferUsages as U;
    match ctx
        .features
        .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
    {
        true => U::MAP_READ | U::COPY_SRC,
        false => U::MAP_WRITE | U::COPY_SRC,
    }
}

/// A buffer holding `data`, zero-padded to a multiple of 16 bytes (at least 16: wgpu binds
/// no empty buffer, and X is also bound as vec4 words).
pub(crate) fn init_buf(
    ctx: &GpuContext,
    label: &str,
    data: &[u8],
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    filled_buf(ctx, label, data.len(), usage, |view| {
        view.slice(..data.len()).copy_from_slice(data)
    })
}

/// A mapped-at-creation buffer of `len` bytes (rounded up to 16; zeros) written by `fill`.
fn filled_buf(
    ctx: &GpuContext,
    label: &str,
    len: usize,
    usage: wgpu::BufferUsages,
    fill: impl FnOnce(&mut wgpu::BufferViewMut),
) -> wgpu::Buffer {
    let size = (len as u64).max(16).next_multiple_of(16);
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: true,
    });
    if len > 0 {
        // (A buffer mapped at creation always maps.)
        if let Ok(mut view) = buf.get_mapped_range_mut(..) {
            fill(&mut view);
        }
    }
    buf.unmap();
    buf
}

/// All of `b`, bound at `binding`.
pub(crate) fn entire(binding: u32, b: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: b.as_entire_binding(),
    }
}

/// Labels as the shaders read them: one signed byte a row, four to a word (-1/+1, or the
/// class index, below MAX_HEADS = 64).
pub(super) fn label_bytes(y: &[f32]) -> Vec<u8> {
    y.iter().map(|&v| v as i8 as u8).collect()
}

/// A buffer of `rows` dense rows of `d` values (`bytes`, row-major) with each row padded with
/// zeros to whole units of 4 values.
pub(super) fn dense_buf(
    ctx: &GpuContext,
    label: &str,
    bytes: &[u8],
    rows: usize,
    d: usize,
    storage: Storage,
) -> wgpu::Buffer {
    let eb = storage.bytes();
    let (row, prow) = (d * eb, padded(d) * eb);
    filled_buf(
        ctx,
        label,
        rows * prow,
        wgpu::BufferUsages::STORAGE,
        |view| {
            if row == prow {
                view.slice(..bytes.len()).copy_from_slice(bytes);
            } else {
                for (r, src) in bytes.chunks_exact(row).enumerate() {
                    view.slice(r * prow..r * prow + row).copy_from_slice(src);
                }
            }
        },
    )
}

/// Streamed dense rows into a slot, each padded to whole units of 4 values.
pub(super) fn write_dense(
    q: &wgpu::Queue,
    buf: &wgpu::Buffer,
    bytes: &[u8],
    rows: usize,
    d: usize,
    storage: Storage,
) {
    let eb = storage.bytes();
    let (row, prow) = (d * eb, padded(d) * eb);
    if row == prow && bytes.len().is_multiple_of(4) {
        q.write_buffer(buf, 0, bytes);
        return;
    }
    let len = (rows * prow).next_multiple_of(4) as u64;
    let Some(size) = wgpu::BufferSize::new(len) else {
        return;
    };
    if let Some(mut view) = q.write_buffer_with(buf, 0, size) {
        view.slice(..).fill(0);
        for (r, src) in bytes.chunks_exact(row).enumerate() {
            view.slice(r * prow..r * prow + row).copy_from_slice(src);
        }
    }
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
