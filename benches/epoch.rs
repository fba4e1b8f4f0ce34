//! Criterion benches of one batch epoch on the CPU and the GPU across (n, d), with the
//! backend, pipelines and resident data built outside the timed loop. Throughput is the bytes
//! of X read per epoch, so criterion prints GB/s.
//!
//! The GPU group uses a hardware adapter; with none it says so and measures only the CPU.
//! `ROSENBLATT_BENCH_GPU=any` also accepts software adapters (llvmpipe), which are slow.
//! `ROSENBLATT_BENCH_SIZES=10000x32,20000x5000` replaces the default sizes.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::gpu::context::AdapterQuery;
use rosenblatt_backend::gpu::{GpuBackend, GpuOptions};
use rosenblatt_backend::{Backend, BatchRule, TrainView};
use rosenblatt_core::data::synth::{generate, SynthSpec};

fn sizes() -> Vec<(usize, usize)> {
    match std::env::var("ROSENBLATT_BENCH_SIZES") {
        Ok(s) => s
            .split(',')
            .filter_map(|p| {
                let (n, d) = p.split_once('x')?;
                Some((n.trim().parse().ok()?, d.trim().parse().ok()?))
            })
            .collect(),
        Err(_) => vec![
            (10_000, 32),
            (100_000, 64),
            (1_000_000, 64),
            (1_000_000, 256),
            (20_000, 5000),
        ],
    }
}

fn gpu() -> Option<GpuBackend> {
    let any = std::env::var("ROSENBLATT_BENCH_GPU").is_ok_and(|v| v == "any");
    let opts = GpuOptions {
        adapter: AdapterQuery {
            name: None,
            hardware_only: !any,
            nth: None,
        },
        ..Default::default()
    };
    match GpuBackend::new(&opts) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("no GPU adapter for the GPU benches ({e}); measuring the CPU only");
            None
        }
    }
}

fn epoch(c: &mut Criterion) {
    let cpu = CpuBackend::new();
    let gpu = gpu();
    let rule = BatchRule::new(1.0, 0.0);
    let mut group = c.benchmark_group("batch_epoch");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    for (n, d) in sizes() {
        // 10% label noise: every epoch has mistakes, so none stops early.
        let s = generate(&SynthSpec {
            n,
            d,
            margin: 0.0,
            noise: 0.1,
            seed: 3,
        })
        .expect("generate");
        let y = s.data.binary_signs().expect("labels");
        let view = TrainView::new(&s.data.x, &y, n, d, 1.0, 1);
        group.throughput(Throughput::Bytes((n * d * 4) as u64));
        let id = format!("{n}x{d}");
        let mut bound = cpu.bind(view).expect("bind");
        let mut w = vec![0f32; d + 1];
        group.bench_function(BenchmarkId::new("cpu", &id), |b| {
            b.iter(|| bound.batch_epochs(&mut w, &rule, 1).expect("epoch"))
        });
        drop(bound);
        if let Some(g) = &gpu {
            let mut bound = g.bind(view).expect("upload");
            let per = bound.epochs_per_call().min(16);
            let mut w = vec![0f32; d + 1];
            group.bench_function(BenchmarkId::new("gpu", &id), |b| {
                // One submit of `per` epochs per sample; the time reported is per epoch.
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let t = Instant::now();
                        let st = bound.batch_epochs(&mut w, &rule, per).expect("epochs");
                        total += t.elapsed() / st.stats.len().max(1) as u32;
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, epoch);
criterion_main!(benches);
