//! Measurements behind `rosenblatt bench`: milliseconds per batch epoch (median, warm-up
//! excluded), effective bandwidth against a roofline (the CPU's measured in the same run by
//! a plain all-cores read of X; the GPU's from `--peak-gbs` or a table of known devices),
//! setup and upload time, time to converge, and the GPU/CPU ratio. Returns figures; the CLI
//! prints them.

use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::algo;
use crate::backend::cpu::{chunk_rows, CpuBackend};
use crate::backend::gpu::{GpuBackend, GpuOptions};
use crate::backend::{
    sum_simd, Backend, BatchRule, Bound, FeatureBuf, HeadRule, KernelProfile, Matrix, MatrixBuf,
    Reduce, Storage, TrainView,
};
use crate::data::synth::{
    generate, generate_classes, generate_sparse, generate_sparse_classes, SynthSpec,
};
use crate::data::Dataset;
use crate::error::{Error, Param, Result};
use crate::params::TrainParams;
use crate::report::TrainReport;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    /// Rows.
    pub n: usize,
    /// Features.
    pub d: usize,
    /// Epochs to time (after one warm-up).
    pub epochs: usize,
    /// Measure the CPU backend.
    pub cpu: bool,
    /// Measure the GPU backend.
    pub gpu: bool,
    /// GPU peak memory bandwidth in GB/s, overriding the built-in table.
    pub peak_gbs: Option<f64>,
    /// GPU adapter options.
    pub gpu_opts: GpuOptions,
    /// Seed for the generated data.
    pub seed: u64,
    /// Also time training to convergence on separable data of the same shape.
    pub converge: bool,
    /// Classes: 1 or 2 times the binary epoch; K > 2 the multiclass (argmax) epoch with K
    /// heads on generated K-class data.
    pub classes: usize,
    /// Also time each kernel of the epoch (GPU timestamp queries, where the adapter has them).
    pub profile: bool,
    /// How X is stored: f32 times the generated floats; a compact storage times them
    /// quantized to values it holds exactly (u8: 0..=255, i8: -127..=127, f16: rounded). The
    /// time to converge is measured on the f32 separable data either way.
    pub storage: Storage,
    /// Sparse rows: this share of the d features non-zero in each row (CSR), binary rule
    /// only; `None`: dense rows.
    pub density: Option<f64>,
    /// A data-parallel run: this process times the CPU epoch over its share of the rows, the
    /// sums going through this (no GPU, no time to converge).
    pub distributed: Option<std::rc::Rc<dyn Reduce>>,
}

/// A [`Reduce`] that times its sums (for `bench --distributed`).
#[derive(Debug)]
struct TimedReduce {
    inner: std::rc::Rc<dyn Reduce>,
    seconds: std::cell::Cell<f64>,
    epochs: std::cell::Cell<u64>,
}

impl TimedReduce {
    fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.seconds
            .set(self.seconds.get() + t.elapsed().as_secs_f64());
        out
    }
}

impl Reduce for TimedReduce {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn local_rank(&self) -> usize {
        self.inner.local_rank()
    }
    fn sum_f32(&self, v: &mut [f32]) {
        // One per epoch: the update sums.
        self.epochs.set(self.epochs.get() + 1);
        self.timed(|| self.inner.sum_f32(v))
    }
    fn sum_f64(&self, v: &mut [f64]) {
        self.timed(|| self.inner.sum_f64(v))
    }
    fn max_f64(&self, v: f64) -> f64 {
        self.timed(|| self.inner.max_f64(v))
    }
    fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
        self.timed(|| self.inner.gather_f32(local))
    }
    fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
        self.timed(|| self.inner.gather_u8(local))
    }
}

impl Default for BenchSpec {
    /// The command's defaults: 1,000,000 x 64, 20 epochs, both backends, binary, f32.
    fn default() -> Self {
        BenchSpec {
            n: 1_000_000,
            d: 64,
            epochs: 20,
            cpu: true,
            gpu: true,
            peak_gbs: None,
            gpu_opts: GpuOptions::default(),
            seed: 7,
            converge: true,
            classes: 2,
            profile: false,
            storage: Storage::F32,
            density: None,
            distributed: None,
        }
    }
}

/// Figures for one backend.
#[derive(Debug, Clone, Serialize)]
pub struct BackendBench {
    /// "cpu" or "gpu".
    pub backend: String,
    /// Device name.
    pub device: String,
    /// Median milliseconds per epoch.
    pub ms_per_epoch: f64,
    /// Fastest epoch, milliseconds.
    pub ms_per_epoch_min: f64,
    /// 1000 / ms_per_epoch.
    pub epochs_per_second: f64,
    /// Bytes of X per epoch (in the storage used) / median epoch time, in GB/s (1e9 bytes).
    pub gbs: f64,
    /// Sparse rows: stored (non-zero) values scored per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nnz_per_second: Option<f64>,
    /// Floating-point operations of the epoch's scores (2 * heads * (d + 1) * n, or 2 * heads
    /// * (non-zeros + n) for sparse rows) per second, in GFLOP/s.
    pub gflops: f64,
    /// The training rows that were mistakes, per timed epoch, as a fraction of the rows:
    /// each adds its row to the sums (under the argmax rule, to two heads' sums), work that
    /// the figures above include.
    pub mistake_fraction: f64,
    /// CPU: the measured arithmetic peak (all cores, fused multiply-adds as the kernels use
    /// them), in GFLOP/s.
    pub peak_gflops: Option<f64>,
    /// The epoch's time at the binding roofline (the slower of reading X at the read roofline
    /// and computing at the arithmetic peak) / the epoch's time.
    pub bound_fraction: Option<f64>,
    /// Which roofline binds: "read" or "compute".
    pub bound_by: Option<String>,
    /// Roofline in GB/s, when known.
    pub roofline_gbs: Option<f64>,
    /// Where the roofline comes from: [`ROOF_GIVEN`] (`BenchSpec::peak_gbs`), "table: DEVICE",
    /// a measurement's description, or [`ROOF_UNKNOWN`].
    pub roofline_source: String,
    /// gbs / roofline_gbs.
    pub roofline_fraction: Option<f64>,
    /// GPU: X streamed through `gpu_memory` bytes of the device each epoch, and the measured
    /// host-to-device bandwidth (GB/s) that bounds such an epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streamed_h2d_gbs: Option<f64>,
    /// Streamed X with a kernel profile: the share of the epoch when no kernel runs (1 -
    /// the kernels' milliseconds over the epoch's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streamed_wait_fraction: Option<f64>,
    /// A data-parallel run: the processes, and the milliseconds per epoch spent summing over
    /// them (the all-gather of the update and the counts, and the additions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// See `processes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allreduce_ms_per_epoch: Option<f64>,
    /// Backend creation (device, pipelines), seconds.
    pub setup_seconds: f64,
    /// Binding the data (upload for the GPU), seconds.
    pub upload_seconds: f64,
    /// GPU: one submit of a single epoch minus the median epoch, milliseconds (dispatch,
    /// submit and read-back cost).
    pub submit_overhead_ms: Option<f64>,
    /// Epochs per call used for timing (GPU: per submit).
    pub epochs_per_call: usize,
    /// Epochs timed.
    pub epochs_timed: usize,
    /// Seconds to train to convergence on separable data (bind + epochs + scoring).
    pub converge_seconds: Option<f64>,
    /// Epochs that took.
    pub converge_epochs: Option<usize>,
    /// Whether it converged within the epoch limit.
    pub converged: Option<bool>,
    /// With `profile`: each kernel's time per epoch and the words it loads and stores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<KernelProfile>,
    /// With `profile`, when the kernels could not be timed or counted: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_note: Option<String>,
}

/// The whole measurement.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Rows.
    pub n: usize,
    /// Features.
    pub d: usize,
    /// Classes (heads: 1 for two classes).
    pub classes: usize,
    /// How X is stored.
    pub storage: String,
    /// Bytes of X read per epoch in that storage (n * d * bytes per value; sparse rows: the
    /// values, their columns and the row starts).
    pub bytes_per_epoch: u64,
    /// Sparse rows: the share of non-zero features asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub density: Option<f64>,
    /// Sparse rows: the stored values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nnz: Option<u64>,
    /// CPU figures.
    pub cpu: Option<BackendBench>,
    /// GPU figures.
    pub gpu: Option<BackendBench>,
    /// Why the GPU was not measured.
    pub gpu_skipped: Option<String>,
    /// CPU ms per epoch / GPU ms per epoch.
    pub gpu_speedup: Option<f64>,
}

/// Known peak memory bandwidths (GB/s) by adapter-name fragment, most specific first.
pub const KNOWN_PEAKS: [(&str, f64); 10] = [
    ("H100 PCIe", 2000.0),
    ("H100 NVL", 3900.0),
    ("H100", 3350.0),
    ("H200", 4800.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100", 1555.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
    ("L40S", 864.0),
    ("L4", 300.0),
];

/// Peak bandwidth for an adapter name from [`KNOWN_PEAKS`].
pub fn known_peak(name: &str) -> Option<(f64, &'static str)> {
    let lower = name.to_lowercase();
    KNOWN_PEAKS
        .iter()
        .find(|(k, _)| lower.contains(&k.to_lowercase()))
        .map(|(k, v)| (*v, *k))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One plain all-cores read of X (a sum with 16 lanes, AVX2 where the CPU has it), with the
/// CPU backend's chunking and threads: the CPU roofline's kernel. Returns seconds.
pub fn cpu_read_pass(x: &[f32], d: usize) -> f64 {
    let rows = chunk_rows(x.len() / d.max(1), d);
    let s = Instant::now();
    std::hint::black_box(x.par_chunks(rows * d).map(sum_simd).sum::<f32>());
    s.elapsed().as_secs_f64()
}

/// What [`time_epochs`] measured.
struct Timed {
    /// The per-epoch seconds of each call.
    seconds: Vec<f64>,
    /// The seconds of the probe run just before each call.
    probes: Vec<f64>,
    /// The timed epochs' mistakes (training rows), summed, and the epochs.
    mistakes: u64,
    epochs: usize,
}

/// Times `epochs` epochs on `bound`, `per_call` per call, after one warm-up call, running
/// `probe` just before each call (so a roofline and the epochs are measured under the same
/// conditions).
fn time_epochs(
    bound: &mut dyn Bound,
    view: &TrainView<'_>,
    epochs: usize,
    per_call: usize,
    probe: Option<&dyn Fn() -> f64>,
) -> Result<Timed> {
    let rule = bench_rule(view.heads);
    let mut w = vec![0f32; view.heads * (view.d + 1)];
    bound.batch_epochs(&mut w, &rule, per_call)?;
    let calls = epochs.div_ceil(per_call).max(3);
    let mut t = Timed {
        seconds: Vec::with_capacity(calls),
        probes: Vec::new(),
        mistakes: 0,
        epochs: 0,
    };
    for _ in 0..calls {
        if let Some(p) = probe {
            t.probes.push(p());
        }
        let s = Instant::now();
        let stats = bound.batch_epochs(&mut w, &rule, per_call)?;
        t.seconds
            .push(s.elapsed().as_secs_f64() / stats.stats.len().max(1) as f64);
        t.mistakes += stats.stats.iter().map(|e| e.mistakes).sum::<u64>();
        t.epochs += stats.stats.len();
    }
    Ok(t)
}

/// The rule timed: the binary rule for one head, the multiclass argmax rule for more.
fn bench_rule(heads: usize) -> BatchRule {
    BatchRule {
        rule: if heads > 1 {
            HeadRule::MulticlassArgmax
        } else {
            HeadRule::Binary
        },
        ..BatchRule::new(1.0, 0.0)
    }
}

/// The CPU's arithmetic peak in GFLOP/s as the kernels compute (fused multiply-adds, 8-wide
/// with AVX2, each counted as two operations): independent chains held in registers, on
/// every thread of the pool, the best of five runs of about 8 ms each (a peak is what the
/// cores can do; a shared host only ever slows a run down).
pub fn peak_gflops() -> f64 {
    let threads = rayon::current_num_threads();
    let iters: u64 = 4_000_000;
    let chains = crate::backend::simd::PROBE_CHAINS as f64;
    (0..5)
        .map(|_| {
            let s = Instant::now();
            let total: f64 = (0..threads)
                .into_par_iter()
                .map(|t| crate::backend::simd::flops_probe(iters, t as f32))
                .sum();
            let secs = s.elapsed().as_secs_f64();
            std::hint::black_box(total);
            // Each iteration: the chains x 8 lanes x (1 multiply + 1 add, fused).
            threads as f64 * iters as f64 * chains * 8.0 * 2.0 / secs / 1e9
        })
        .fold(0.0, f64::max)
}

/// Where a backend's roofline comes from.
/// [`BackendBench::roofline_source`] of a roofline the caller gave (`BenchSpec::peak_gbs`).
pub const ROOF_GIVEN: &str = "given";
/// [`BackendBench::roofline_source`] where the device's bandwidth is not known.
pub const ROOF_UNKNOWN: &str = "unknown";

enum Roof<'a> {
    /// Measured by this read pass, interleaved with the epochs.
    Measured(&'a dyn Fn() -> f64),
    /// Given, with its source.
    Given(Option<f64>, String),
}

/// How one backend is measured, besides the spec.
struct Measure<'a> {
    /// Seconds the backend took to start (adapter and device), reported as they are.
    setup_seconds: f64,
    /// Epochs in each backend call (the GPU records many per submit).
    per_call: usize,
    /// The roofline the bandwidth is compared with.
    roof: Roof<'a>,
    /// Separable data of the same shape, to time convergence on.
    separable: Option<&'a Dataset>,
    /// Also time a one-epoch call against a many-epoch one (the submit overhead).
    submit_overhead: bool,
}

fn measure(
    backend: &dyn Backend,
    view: TrainView<'_>,
    spec: &BenchSpec,
    how: Measure<'_>,
) -> Result<BackendBench> {
    let Measure {
        setup_seconds,
        per_call,
        roof,
        separable,
        submit_overhead: overhead,
    } = how;
    let t = Instant::now();
    let mut bound = backend.bind(view)?;
    let upload_seconds = t.elapsed().as_secs_f64();
    let probe = match roof {
        Roof::Measured(p) => {
            p();
            Some(p)
        }
        Roof::Given(..) => None,
    };
    let timed = time_epochs(&mut *bound, &view, spec.epochs, per_call, probe)?;
    let mistake_fraction = timed.mistakes as f64 / (timed.epochs.max(1) * view.n.max(1)) as f64;
    let epochs_timed = timed.epochs;
    let (mut times, mut probes) = (timed.seconds, timed.probes);
    let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
    let med = median(&mut times);
    let (profile, profile_note) = if spec.profile {
        profile_of(backend, &mut *bound, &view, spec.epochs)?
    } else {
        (None, None)
    };
    let submit_overhead_ms = if overhead {
        let mut one = time_epochs(&mut *bound, &view, 3, 1, None)?.seconds;
        Some(((median(&mut one) - med) * 1e3).max(0.0))
    } else {
        None
    };
    drop(bound);
    let bytes = view.x.bytes(view.n, view.d) as f64;
    let stored = view.x.stored(view.n, view.d);
    // The read pass reads the stored values as f32: its GB/s are the roofline whatever the
    // storage.
    let probe_bytes = (stored * 4) as f64;
    let gbs = bytes / med / 1e9;
    let flops = if view.x.is_sparse() {
        2.0 * view.heads as f64 * (stored + view.n) as f64
    } else {
        2.0 * view.heads as f64 * (view.d + 1) as f64 * view.n as f64
    };
    let peak_gflops = match roof {
        Roof::Measured(_) => Some(peak_gflops()),
        Roof::Given(..) => None,
    };
    let roofline = match roof {
        Roof::Measured(_) => (
            Some(probe_bytes / median(&mut probes) / 1e9),
            "measured: all-cores read of X, interleaved with the epochs".to_string(),
        ),
        Roof::Given(r, src) => (r, src),
    };
    let (converge_seconds, converge_epochs, converged) = match separable {
        Some(ds) => {
            let r = converge(ds, backend)?;
            (Some(r.seconds), Some(r.epochs), Some(r.converged))
        }
        None => (None, None, None),
    };
    let bound_by = bound_by(bytes, flops, med, roofline.0, peak_gflops);
    Ok(BackendBench {
        backend: backend.kind().name().into(),
        device: backend.device(),
        ms_per_epoch: med * 1e3,
        ms_per_epoch_min: min * 1e3,
        epochs_per_second: 1.0 / med,
        gbs,
        nnz_per_second: view.x.is_sparse().then(|| stored as f64 / med),
        gflops: flops / med / 1e9,
        mistake_fraction,
        peak_gflops,
        bound_fraction: bound_by.map(|b| b.0),
        bound_by: bound_by.map(|b| b.1.to_string()),
        roofline_gbs: roofline.0,
        roofline_source: roofline.1,
        roofline_fraction: roofline.0.map(|r| gbs / r),
        processes: None,
        allreduce_ms_per_epoch: None,
        streamed_h2d_gbs: None,
        streamed_wait_fraction: None,
        setup_seconds,
        upload_seconds,
        submit_overhead_ms,
        epochs_per_call: per_call,
        epochs_timed,
        converge_seconds,
        converge_epochs,
        converged,
        profile,
        profile_note,
    })
}

/// The kernels' times and counted words over `epochs` epochs (`bench --profile`), or why
/// there are none.
fn profile_of(
    backend: &dyn Backend,
    bound: &mut dyn Bound,
    view: &TrainView<'_>,
    epochs: usize,
) -> Result<(Option<KernelProfile>, Option<String>)> {
    let mut w = vec![0f32; view.heads * (view.d + 1)];
    Ok(
        match bound.profile(&mut w, &bench_rule(view.heads), epochs)? {
            Some(p) if p.epochs == 0 => (
                Some(p),
                Some("not timed: no timestamp queries on the adapter, or X streams by host writes (words counted)".into()),
            ),
            Some(p) => (Some(p), None),
            None => (
                None,
                Some(match backend.kind() {
                    crate::backend::BackendKind::Cpu => {
                        "the CPU runs one fused pass per epoch: nothing to split".to_string()
                    }
                    crate::backend::BackendKind::Gpu => {
                        "not available for one process of a data-parallel run".to_string()
                    }
                }),
            ),
        },
    )
}

/// Trains the separable `ds` to convergence (at most 1,000 epochs). Sparse rows go through
/// the origin (no bias: with a few non-zeros per row the bias column would dominate the
/// batch sums).
fn converge(ds: &Dataset, backend: &dyn Backend) -> Result<TrainReport> {
    let p = TrainParams::for_algo(crate::params::Algo::Batch)
        .epochs(1000)
        .fit_bias(!ds.is_sparse())
        .validate()?;
    Ok(algo::train(ds, &p, backend, None, &mut ())?.report)
}

/// The share of the epoch's time the slower of the read (`bytes` at the roofline's GB/s)
/// and the arithmetic (`flops` at the peak GFLOP/s) takes, and which one it is.
fn bound_by(
    bytes: f64,
    flops: f64,
    seconds: f64,
    roof_gbs: Option<f64>,
    peak_gflops: Option<f64>,
) -> Option<(f64, &'static str)> {
    match (roof_gbs, peak_gflops) {
        (Some(r), Some(p)) => {
            let (read, compute) = (bytes / (r * 1e9), flops / (p * 1e9));
            Some(if read >= compute {
                (read / seconds, "read")
            } else {
                (compute / seconds, "compute")
            })
        }
        (Some(r), None) => Some((bytes / (r * 1e9) / seconds, "read")),
        _ => None,
    }
}

/// Maps generated floats onto values `storage` holds exactly: the largest |x| to 127 (i8) or
/// 255 (u8, shifted to 0..=255 around 128) and rounded, or rounded to f16; f32 is left as is.
fn quantize(x: &mut [f32], storage: Storage) {
    let top = x
        .iter()
        .fold(0f32, |m, v| m.max(v.abs()))
        .max(f32::MIN_POSITIVE);
    for v in x.iter_mut() {
        *v = match storage {
            Storage::F32 => *v,
            Storage::F16 => {
                let h = half::f16::from_f32(*v);
                if h.is_normal() {
                    h.to_f32()
                } else {
                    0.0
                }
            }
            Storage::U8 => (*v / top * 127.0 + 128.0).round().clamp(0.0, 255.0),
            Storage::I8 => (*v / top * 127.0).round().clamp(-127.0, 127.0) + 0.0,
        };
    }
}

/// Most epochs a benchmark times.
pub const MAX_BENCH_EPOCHS: usize = 1_000_000;

/// Generates the data and measures the requested backends.
pub fn run(spec: &BenchSpec) -> Result<BenchReport> {
    let heads = check_spec(spec)?;
    let (noisy, y) = noisy_data(spec, heads)?;
    let packed = FeatureBuf::pack(&noisy.x.values(), spec.storage).map_err(|i| {
        Error::data(
            "<bench>",
            format!("value {} is not held exactly", noisy.x.value(i)),
        )
    })?;
    let x = match noisy.x.csr() {
        Some(c) => Matrix::Csr(c.view_with(packed.view())),
        None => Matrix::Dense(packed.view()),
    };
    let view = TrainView::new(x, &y, spec.n, spec.d, 1.0, heads);
    let mut report = BenchReport {
        n: spec.n,
        d: spec.d,
        classes: spec.classes.max(2),
        storage: spec.storage.name().to_string(),
        bytes_per_epoch: view.x.bytes(spec.n, spec.d),
        density: spec.density,
        nnz: view
            .x
            .is_sparse()
            .then(|| view.x.stored(spec.n, spec.d) as u64),
        cpu: None,
        gpu: None,
        gpu_skipped: None,
        gpu_speedup: None,
    };
    if let Some(r) = &spec.distributed {
        let b = measure_share(spec, r, &noisy, view)?;
        if spec.gpu {
            report.gpu = Some(b);
        } else {
            report.cpu = Some(b);
        }
        return Ok(report);
    }
    let separable = separable_data(spec, heads)?;
    if spec.cpu {
        let cpu = CpuBackend::new();
        let x = noisy.x.values();
        let probe = || cpu_read_pass(&x, spec.d);
        let how = Measure {
            setup_seconds: 0.0,
            per_call: 1,
            roof: Roof::Measured(&probe),
            separable: separable.as_ref(),
            submit_overhead: false,
        };
        report.cpu = Some(measure(&cpu, view, spec, how)?);
    }
    if spec.gpu {
        match measure_gpu(spec, view, separable.as_ref())? {
            Ok(b) => report.gpu = Some(b),
            Err(why) => report.gpu_skipped = Some(why),
        }
    }
    if let (Some(c), Some(g)) = (&report.cpu, &report.gpu) {
        report.gpu_speedup = Some(c.ms_per_epoch / g.ms_per_epoch);
    }
    Ok(report)
}

/// Checks the spec; returns the heads of its epoch (1 for two classes).
fn check_spec(spec: &BenchSpec) -> Result<usize> {
    if !(1..=MAX_BENCH_EPOCHS).contains(&spec.epochs) {
        return Err(Error::param(
            Param::Epochs,
            spec.epochs,
            format!("must be between 1 and {MAX_BENCH_EPOCHS} for a benchmark"),
        ));
    }
    let heads = if spec.classes > 2 { spec.classes } else { 1 };
    if heads > crate::backend::MAX_HEADS {
        return Err(Error::data(
            "<bench>",
            format!(
                "{heads} classes: the benchmark's multiclass epoch takes at most {}",
                crate::backend::MAX_HEADS
            ),
        ));
    }
    Ok(heads)
}

/// The timed data: non-separable (10% label noise), so every epoch has mistakes and none
/// stops early; its values mapped onto the storage's (see [`quantize`]); and the labels as
/// the epoch takes them (±1, or class indices).
fn noisy_data(spec: &BenchSpec, heads: usize) -> Result<(Dataset, Vec<f32>)> {
    let synth = SynthSpec {
        n: spec.n,
        d: spec.d,
        margin: 0.0,
        noise: 0.1,
        seed: spec.seed,
    };
    let (mut ds, y) = if heads > 1 {
        let ds = match spec.density {
            Some(p) => generate_sparse_classes(spec.n, spec.d, heads, p, 0.1, spec.seed)?,
            None => generate_classes(spec.n, spec.d, heads, 0.1, spec.seed)?,
        };
        let y = (ds.require_labels()?.index.iter())
            .map(|&c| c as f32)
            .collect();
        (ds, y)
    } else {
        let ds = match spec.density {
            Some(p) => generate_sparse(&synth, p)?.data,
            None => generate(&synth)?.data,
        };
        let y = ds.binary_signs()?;
        (ds, y)
    };
    if spec.density.is_some() {
        contradict(&mut ds);
    }
    if let Some(v) = ds.x.values_mut() {
        quantize(v, spec.storage);
    }
    let y = match (heads > 1, spec.density) {
        (_, None) => y,
        (true, Some(_)) => (ds.require_labels()?.index.iter())
            .map(|&c| c as f32)
            .collect(),
        (false, Some(_)) => ds.binary_signs()?,
    };
    Ok((ds, y))
}

/// Every [`TWIN_EVERY`]th row of sparse data becomes a copy of the row before it with
/// another label. Label noise alone does not keep sparse rows from being separated: with d
/// much larger than the non-zeros of n rows (100,000 x 4,000,000 with 40 a row) nearly every
/// labelling is separable, the epochs reach no mistakes, the rule stops, and each timed call
/// ran one epoch, so the bench timed a call's fixed costs (the weights written and read
/// back) instead of epochs. No weight classifies a row and its contradicting twin both
/// right, so every epoch has mistakes and runs.
fn contradict(ds: &mut Dataset) {
    let Some(labels) = ds.labels.as_mut() else {
        return;
    };
    let classes = labels.classes.len().max(1) as u32;
    let MatrixBuf::Csr(c) = &mut ds.x else {
        return;
    };
    let mut out = crate::backend::CsrBuf::new();
    out.indices.reserve(c.indices.len());
    out.values.reserve(c.values.len());
    for i in 0..ds.n {
        let src = if i % TWIN_EVERY == TWIN_EVERY - 1 {
            i - 1
        } else {
            i
        };
        let (a, b) = (c.indptr[src], c.indptr[src + 1]);
        out.indices.extend_from_slice(&c.indices[a..b]);
        out.values.extend_from_slice(&c.values[a..b]);
        out.indptr.push(out.values.len());
        if src != i {
            labels.index[i] = (labels.index[src] + 1) % classes;
        }
    }
    *c = out;
}

/// One row in this many of the sparse bench data contradicts the row before it.
const TWIN_EVERY: usize = 10;

/// Separable data of the spec's shape to time convergence on (`--converge`, two classes).
fn separable_data(spec: &BenchSpec, heads: usize) -> Result<Option<Dataset>> {
    if !spec.converge || heads > 1 {
        return Ok(None);
    }
    let synth = |margin| SynthSpec {
        n: spec.n,
        d: spec.d,
        margin,
        noise: 0.0,
        seed: spec.seed + 1,
    };
    Ok(Some(match spec.density {
        Some(p) => generate_sparse(&synth(0.1 * (p.clamp(0.0, 1.0) / 3.0).sqrt() as f32), p)?.data,
        None => generate(&synth(0.05))?.data,
    }))
}

/// The GPU measured, or why there is none to measure.
fn measure_gpu(
    spec: &BenchSpec,
    view: TrainView<'_>,
    separable: Option<&Dataset>,
) -> Result<std::result::Result<BackendBench, String>> {
    let t = Instant::now();
    let g = match GpuBackend::new(&spec.gpu_opts) {
        Ok(g) => g,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let setup = t.elapsed().as_secs_f64();
    let roof = match (spec.peak_gbs, known_peak(&g.context().info.name)) {
        (Some(p), _) => Roof::Given(Some(p), ROOF_GIVEN.to_string()),
        (None, Some((p, k))) => Roof::Given(Some(p), format!("table: {k}")),
        (None, None) => Roof::Given(None, ROOF_UNKNOWN.to_string()),
    };
    let x_bytes = view.x.bytes(view.n, view.d);
    let streamed = (spec.gpu_opts.resident.gpu_memory).is_some_and(|m| x_bytes > m);
    // Streamed X: the host-to-device bandwidth next to the epoch.
    let per_call = spec.epochs.clamp(1, 64);
    let how = Measure {
        setup_seconds: setup,
        per_call,
        roof,
        separable,
        submit_overhead: true,
    };
    let mut b = measure(&g, view, spec, how)?;
    if streamed {
        b.streamed_h2d_gbs = Some(g.upload_gbs(x_bytes)?);
        b.streamed_wait_fraction = (b.profile.as_ref())
            .map(|p| p.kernels.iter().map(|k| k.1).sum::<f64>())
            .filter(|&k| k > 0.0)
            .map(|k| (1.0 - k / b.ms_per_epoch).clamp(0.0, 1.0));
    }
    Ok(Ok(b))
}

/// One process of a data-parallel benchmark: its rows timed with the sums over all processes,
/// on its CPU, or with `gpu` on a GPU of its machine (by local rank, as `train --distributed`
/// picks them).
fn measure_share(
    spec: &BenchSpec,
    r: &std::rc::Rc<dyn Reduce>,
    noisy: &Dataset,
    view: TrainView<'_>,
) -> Result<BackendBench> {
    let rows = algo::Shard::rows_of(spec.n, r.rank(), r.size());
    let shard = TrainView {
        x: view.x.rows(rows.clone(), spec.d),
        y: &view.y[rows.clone()],
        n: rows.len(),
        ..view
    };
    let own: Box<dyn Backend> = if spec.gpu {
        let mut opts = spec.gpu_opts.clone();
        opts.adapter.nth = Some(r.local_rank());
        Box::new(GpuBackend::new(&opts)?)
    } else {
        Box::new(CpuBackend::new())
    };
    let backend = crate::backend::Distributed {
        backend: own,
        reduce: TimedReduce {
            inner: r.clone(),
            seconds: 0.0.into(),
            epochs: 0.into(),
        },
    };
    let x = match noisy.x.csr() {
        Some(c) => &c.values[c.indptr[rows.start]..c.indptr[rows.end]],
        None => &noisy.x.values()[rows.start * spec.d..rows.end * spec.d],
    };
    let probe = || cpu_read_pass(x, spec.d);
    let roof = if spec.gpu {
        Roof::Given(spec.peak_gbs, ROOF_GIVEN.to_string())
    } else {
        Roof::Measured(&probe)
    };
    let how = Measure {
        setup_seconds: 0.0,
        per_call: 1,
        roof,
        separable: None,
        submit_overhead: false,
    };
    let mut b = measure(&backend, shard, spec, how)?;
    // The mistakes are counted over every process's rows.
    b.mistake_fraction *= shard.n as f64 / spec.n.max(1) as f64;
    let t = &backend.reduce;
    b.processes = Some(r.size());
    b.allreduce_ms_per_epoch = Some(1e3 * t.seconds.get() / t.epochs.get().max(1) as f64);
    Ok(b)
}
