//! Criterion benches of the loaders: CSV and LIBSVM parsing throughput on one core, in bytes
//! of text per second (the target is at least 100 MB/s). The text is generated in memory.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rosenblatt_core::data::synth::{generate, write_csv, write_libsvm, SynthSpec};
use rosenblatt_core::data::{csv, libsvm, LoadOptions};

fn parse(c: &mut Criterion) {
    let s = generate(&SynthSpec {
        n: 100_000,
        d: 32,
        margin: 0.0,
        noise: 0.0,
        seed: 1,
    })
    .expect("generate");
    let mut csv_text = Vec::new();
    write_csv(&s.data, &mut csv_text).expect("csv");
    let mut svm_text = Vec::new();
    write_libsvm(&s.data, &mut svm_text).expect("libsvm");
    let opts = LoadOptions::default();
    let mut group = c.benchmark_group("parse");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(csv_text.len() as u64));
    group.bench_function("csv_100000x32", |b| {
        b.iter(|| csv::parse(Path::new("bench.csv"), &csv_text, &opts).expect("parse"))
    });
    group.throughput(Throughput::Bytes(svm_text.len() as u64));
    group.bench_function("libsvm_100000x32", |b| {
        b.iter(|| libsvm::parse(Path::new("bench.svm"), &svm_text, &opts).expect("parse"))
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
