//! The `bench` command and module report what they promise (behaviour only: no timing is
//! asserted), and the AVX2 and baseline CPU code paths give bit-identical models.

use crate::common;

use rosenblatt_app::bench::{self, known_peak, BenchSpec};
use rosenblatt_backend::Storage;

#[test]
fn cpu_bench_reports_every_figure() {
    let spec = BenchSpec {
        n: 20_000,
        d: 16,
        epochs: 4,
        gpu: false,
        seed: 1,
        profile: true,
        ..Default::default()
    };
    let r = bench::run(&spec).unwrap();
    assert_eq!(r.bytes_per_epoch, 20_000 * 16 * 4);
    let c = r.cpu.expect("cpu measured");
    assert!(c.ms_per_epoch > 0.0 && c.ms_per_epoch_min <= c.ms_per_epoch);
    assert!((c.epochs_per_second * c.ms_per_epoch / 1e3 - 1.0).abs() < 1e-9);
    assert!(c.roofline_gbs.unwrap() > 0.0);
    assert!((c.roofline_fraction.unwrap() - c.gbs / c.roofline_gbs.unwrap()).abs() < 1e-12);
    assert!(c.epochs_timed >= 4);
    assert_eq!(c.converged, Some(true));
    assert!(c.converge_epochs.unwrap() >= 1);
    assert!(r.gpu.is_none() && r.gpu_speedup.is_none());
    // The arithmetic side: GFLOP/s of the scores against the measured peak, and which
    // roofline binds.
    assert!((c.gflops - 2.0 * 17.0 * 20_000.0 / c.ms_per_epoch / 1e6).abs() < 1e-6 * c.gflops);
    assert!(c.peak_gflops.unwrap() > 0.0);
    assert!(matches!(c.bound_by.as_deref(), Some("read" | "compute")));
    assert!(c.bound_fraction.unwrap() > 0.0);
    // The timed data have 10% label noise: every epoch has mistakes, and not every row is one.
    assert!(
        c.mistake_fraction > 0.0 && c.mistake_fraction < 1.0,
        "{}",
        c.mistake_fraction
    );
    // The CPU's epoch is one fused pass: --profile says so instead of timing kernels.
    assert!(c.profile.is_none());
    assert!(c
        .profile_note
        .as_deref()
        .unwrap()
        .contains("one fused pass"));
}

#[test]
fn bench_times_the_multiclass_epoch_with_k_heads() {
    let spec = BenchSpec {
        n: 3000,
        d: 20,
        epochs: 3,
        gpu: false,
        seed: 1,
        classes: 10,
        ..Default::default()
    };
    let r = bench::run(&spec).unwrap();
    assert_eq!(r.classes, 10);
    let c = r.cpu.expect("cpu measured");
    // Ten heads of 21 weights per row.
    assert!((c.gflops - 2.0 * 10.0 * 21.0 * 3000.0 / c.ms_per_epoch / 1e6).abs() < 1e-6 * c.gflops);
    assert_eq!(c.converged, None, "no convergence run for K classes");
    // A fraction of the rows, not of rows x heads: this seed's epochs make 57% of the rows
    // mistakes (5.7% of rows x heads).
    assert!(
        c.mistake_fraction > 0.2 && c.mistake_fraction < 1.0,
        "{}",
        c.mistake_fraction
    );
    let e = bench::run(&BenchSpec {
        classes: 65,
        ..spec
    })
    .unwrap_err();
    assert!(e.to_string().contains("at most 64"), "{e}");
}

#[test]
fn known_devices_have_peaks() {
    assert_eq!(known_peak("NVIDIA H100 80GB HBM3").unwrap().0, 3350.0);
    assert_eq!(known_peak("NVIDIA H100 PCIe").unwrap().0, 2000.0);
    assert_eq!(known_peak("NVIDIA H200").unwrap().0, 4800.0);
    assert!(known_peak("llvmpipe (LLVM 15.0.6, 256 bits)").is_none());
}

#[test]
fn bench_json_has_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let o = common::run(
        dir.path(),
        &[
            "bench",
            "--n",
            "5000",
            "--d",
            "8",
            "--epochs",
            "3",
            "--backend",
            "cpu",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    for key in [
        "ms_per_epoch",
        "epochs_per_second",
        "gbs",
        "roofline_gbs",
        "roofline_fraction",
        "setup_seconds",
        "upload_seconds",
        "converge_seconds",
        "converge_epochs",
        "mistake_fraction",
    ] {
        assert!(v["cpu"].get(key).is_some(), "missing cpu.{key}: {v}");
    }
    assert_eq!(v["n"], 5000);
    // Text output names the roofline and the ratio.
    let o = common::run(
        dir.path(),
        &[
            "bench",
            "--n",
            "5000",
            "--d",
            "8",
            "--epochs",
            "3",
            "--backend",
            "cpu",
        ],
    );
    let out = common::stdout(&o);
    assert!(
        out.contains("ms/epoch") && out.contains("GB/s") && out.contains("% of it"),
        "{out}"
    );
}

#[test]
fn simd_and_baseline_cpu_paths_agree_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(common::run(
        p,
        &["gen", "--n", "3000", "--d", "37", "--noise", "0.05", "-o", "d.csv"]
    )
    .status
    .success());
    let train = |simd: bool, out: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rosenblatt"));
        c.args([
            "train",
            "d.csv",
            "--backend",
            "cpu",
            "--epochs",
            "40",
            "-o",
            out,
        ])
        .current_dir(p);
        if !simd {
            c.env("ROSENBLATT_NO_SIMD", "1");
        }
        assert!(c.output().unwrap().status.success());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.join(out)).unwrap()).unwrap();
        (
            v["weights"].clone(),
            v["bias"].clone(),
            v["training"]["mistakes_per_epoch"].clone(),
        )
    };
    assert_eq!(train(true, "a.json"), train(false, "b.json"));
}

#[test]
fn gpu_profile_times_each_kernel_or_says_why_not() {
    if common::gpu().is_none() {
        return;
    }
    let spec = BenchSpec {
        n: 5_000,
        d: 8,
        epochs: 2,
        cpu: false,
        peak_gbs: Some(1.0),
        seed: 1,
        converge: false,
        classes: 3,
        profile: true,
        ..Default::default()
    };
    let r = bench::run(&spec).unwrap();
    let g = r.gpu.expect("gpu measured");
    let p = g.profile.as_ref().expect("a GPU profile");
    // The register pass, the ordered sum of the partials, the stop: timed where the adapter
    // has timestamp queries, counted everywhere.
    let names: Vec<&str> = p.traffic.iter().map(|t| t.kernel.as_str()).collect();
    assert_eq!(names, ["epoch", "apply", "finalize"]);
    assert!(p.plan.starts_with("register pass"), "{}", p.plan);
    if p.epochs > 0 {
        let timed: Vec<&str> = p.kernels.iter().map(|k| k.0.as_str()).collect();
        assert_eq!(timed, names);
        assert!(p.kernels.iter().all(|k| k.1 >= 0.0));
    } else {
        assert!(g
            .profile_note
            .as_ref()
            .is_some_and(|n| n.contains("timestamp")));
    }
    // One read of X (8 features: whole units, no padding), and the labels once (a byte each).
    assert_eq!(p.x_words, 5_000 * 8);
    assert_eq!(p.loaded(0), p.x_words);
    assert_eq!(p.loaded(2), 5_000 / 4);
    assert_eq!(p.stored(0), 0);
}

#[test]
fn bench_reads_the_bytes_of_the_storage_it_is_given() {
    for (storage, bytes) in [(Storage::U8, 1), (Storage::I8, 1), (Storage::F16, 2)] {
        let spec = BenchSpec {
            n: 5_000,
            d: 12,
            epochs: 2,
            gpu: false,
            seed: 3,
            converge: false,
            storage,
            ..Default::default()
        };
        let r = bench::run(&spec).unwrap();
        assert_eq!(r.storage, storage.name());
        assert_eq!(r.bytes_per_epoch, 5_000 * 12 * bytes);
        let c = r.cpu.expect("cpu measured");
        // GB/s count the bytes of the storage actually read.
        let gbs = (5_000 * 12 * bytes) as f64 / (c.ms_per_epoch / 1e3) / 1e9;
        assert!((c.gbs - gbs).abs() < 1e-9 * gbs.max(1.0), "{storage:?}");
    }
    let o = common::run(
        std::path::Path::new("."),
        &[
            "bench",
            "--backend",
            "cpu",
            "--n",
            "2000",
            "--d",
            "8",
            "--epochs",
            "2",
            "--no-converge",
            "--storage",
            "u8",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("u8 storage"),
        "{}",
        common::stdout(&o)
    );
}

#[test]
fn bench_times_the_sparse_epoch_with_k_heads_on_both_backends() {
    // Sparse rows in 4 classes (was refused with a garbled message): the CPU and, where there
    // is an adapter, the GPU time the K-head epoch, with non-zeros per second and, on the GPU,
    // the words its kernels load (the sparse plan reads X more than once: issue 31).
    let gpu = common::gpu().is_some();
    let spec = BenchSpec {
        n: 2_000,
        d: 5_000,
        epochs: 2,
        gpu,
        peak_gbs: Some(1.0),
        seed: 3,
        converge: false,
        classes: 4,
        density: Some(0.002),
        profile: true,
        ..Default::default()
    };
    let r = bench::run(&spec).unwrap();
    assert_eq!(r.classes, 4);
    assert_eq!(r.nnz, Some(2_000 * 10));
    let c = r.cpu.as_ref().expect("cpu measured");
    assert!(c.nnz_per_second.unwrap() > 0.0);
    // 10% of the labels are noise: every epoch has mistakes, not all rows.
    assert!(c.mistake_fraction > 0.0 && c.mistake_fraction < 1.0);
    if spec.gpu {
        let g = r.gpu.as_ref().expect("gpu measured");
        assert!(g.nnz_per_second.unwrap() > 0.0);
        let p = g.profile.as_ref().expect("a GPU profile");
        assert_eq!(p.x_words, 2_000 * 10);
        // Every value is read at least once by the counted kernels.
        assert!(p.loaded(0) >= p.x_words);
        assert!(g.mistake_fraction > 0.0 && g.mistake_fraction < 1.0);
    }
}

#[test]
fn sparse_bench_data_wider_than_its_rows_has_mistakes_in_every_timed_epoch() {
    // 1,000 rows of 40 non-zeros among 40,000 features: label noise alone leaves them
    // separable, the rule stopped after a few epochs and each timed call ran one epoch (on
    // an H200 that timed a call's fixed costs as 16 ms "epochs"). Every tenth row now
    // contradicts the one before it: at least a tenth of the rows are mistakes, and every
    // epoch asked runs.
    let gpu = common::gpu().is_some();
    let spec = BenchSpec {
        n: 1_000,
        d: 40_000,
        epochs: 8,
        gpu,
        peak_gbs: Some(1.0),
        seed: 7,
        converge: false,
        density: Some(0.001),
        ..Default::default()
    };
    let r = bench::run(&spec).unwrap();
    let c = r.cpu.as_ref().expect("cpu measured");
    assert!(c.mistake_fraction >= 0.1, "{}", c.mistake_fraction);
    if spec.gpu {
        let g = r.gpu.as_ref().expect("gpu measured");
        assert!(g.mistake_fraction >= 0.1, "{}", g.mistake_fraction);
        assert_eq!(g.epochs_timed % g.epochs_per_call, 0);
        assert!(
            g.epochs_timed >= 3 * g.epochs_per_call,
            "{}",
            g.epochs_timed
        );
    }
}

#[test]
fn bench_streams_x_from_staging_or_by_writes_and_reports_the_copy_rate() {
    // X of 5 MB through 64 KiB of device memory: from host staging filled once (several
    // epochs a submit, the kernels timed between the copies) and by host writes before each
    // segment (one epoch a submit); both report the measured copy rate.
    let Some(gpu) = common::gpu() else {
        return;
    };
    let timestamps = gpu
        .context()
        .features
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    for (writes, says) in [(false, "host staging filled once"), (true, "host writes")] {
        let mut spec = BenchSpec {
            n: 20_000,
            d: 64,
            epochs: 4,
            cpu: false,
            gpu: true,
            peak_gbs: Some(1.0),
            converge: false,
            profile: true,
            ..Default::default()
        };
        spec.gpu_opts.resident.gpu_memory = Some(64 << 10);
        spec.gpu_opts.resident.mapped_staging = Some(!writes);
        let r = bench::run(&spec).unwrap();
        let g = r.gpu.as_ref().expect("gpu measured");
        assert!(g.streamed_h2d_gbs.unwrap() > 0.0);
        let p = g.profile.as_ref().expect("a profile");
        assert!(p.plan.contains(says), "{}", p.plan);
        assert_eq!(p.loaded(0), p.x_words, "X read once: {}", p.plan);
        // Kernel times (and so the share of the epoch they wait) only between copies.
        assert_eq!(
            g.streamed_wait_fraction.is_some(),
            timestamps && !writes,
            "{:?}",
            g.streamed_wait_fraction
        );
        assert_eq!(g.epochs_timed, 12);
    }
}

/// `bench --params-space` measures the kernels with their parameter blocks in uniform or in
/// storage buffers: the same epochs either way (the same code on the same values); an unknown
/// space is a usage error naming the choices.
#[test]
fn bench_takes_either_parameter_space() {
    let dir = tempfile::tempdir().unwrap();
    let bad = common::run(dir.path(), &["bench", "--params-space", "constant"]);
    assert_eq!(bad.status.code(), Some(2), "{}", common::stderr(&bad));
    assert!(
        common::stderr(&bad).contains("uniform, storage"),
        "{}",
        common::stderr(&bad)
    );
    if common::gpu().is_none() {
        return;
    }
    let fraction = |space: &str| {
        let o = common::run(
            dir.path(),
            &[
                "bench",
                "--n",
                "3000",
                "--d",
                "8",
                "--epochs",
                "3",
                "--backend",
                "gpu",
                "--params-space",
                space,
                "--json",
            ],
        );
        assert!(o.status.success(), "{space}: {}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
        v["gpu"]["mistake_fraction"].clone()
    };
    let uniform = fraction("uniform");
    assert!(uniform.is_number(), "{uniform}");
    let g = common::gpu().unwrap();
    let bindings = rosenblatt_backend::gpu::context::PARAMS_STORAGE_BINDINGS;
    if g.context().limits.max_storage_buffers_per_shader_stage < bindings {
        // OpenGL's 16 storage buffers a stage: storage blocks are refused, saying why.
        let o = common::run(
            dir.path(),
            &[
                "bench",
                "--n",
                "300",
                "--d",
                "8",
                "--backend",
                "gpu",
                "--params-space",
                "storage",
            ],
        );
        let e = common::stderr(&o);
        assert!(!o.status.success() && e.contains("storage buffers"), "{e}");
        return;
    }
    assert_eq!(uniform, fraction("storage"));
}
