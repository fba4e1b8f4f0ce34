//! `rosenblatt info` and `rosenblatt bench`: the adapters there are, and the batch epoch timed
//! on each backend.

use rosenblatt_app::bench::{self, BackendBench, BenchReport, BenchSpec};
use rosenblatt_backend::gpu::context::AdapterQuery;
use rosenblatt_backend::gpu::{list_adapters, GpuOptions};

use super::args::{BenchArgs, InfoArgs};

pub fn info(a: InfoArgs) -> anyhow::Result<()> {
    let (adapters, auto) = list_adapters();
    if a.json {
        let v = serde_json::json!({
            "adapters": adapters,
            "auto": auto.map(|i| adapters[i].name.clone()),
            "cpu_threads": rayon::current_num_threads(),
        });
        outln!("{v}");
        return Ok(());
    }
    if adapters.is_empty() {
        outln!("no GPU adapter found; --backend auto uses the CPU.");
        outln!("To get one: {}", rosenblatt_backend::gpu::HOW_TO_GET_ONE);
    }
    for (i, ad) in adapters.iter().enumerate() {
        let mark = if Some(i) == auto {
            "  <- --backend auto picks this one"
        } else {
            ""
        };
        outln!(
            "[{i}] {} ({}, {}){mark}",
            ad.name,
            ad.backend,
            ad.device_type
        );
        outln!("    driver: {} {}", ad.driver, ad.driver_info);
        outln!(
            "    max storage binding {} MiB, max buffer {} MiB, workgroup {} invocations / {} KiB, {} workgroups per dimension",
            ad.max_storage_buffer_binding_size >> 20,
            ad.max_buffer_size >> 20,
            ad.max_compute_invocations_per_workgroup,
            ad.max_compute_workgroup_storage_size >> 10,
            ad.max_compute_workgroups_per_dimension
        );
        if !ad.features.is_empty() {
            outln!("    optional features: {}", ad.features.join(", "));
        }
    }
    if !adapters.is_empty() && auto.is_none() {
        outln!("--backend auto uses the CPU: only software adapters here (slower than the CPU backend); --backend gpu uses them.");
    }
    outln!("CPU backend: {} threads", rayon::current_num_threads());
    Ok(())
}

pub fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let mut spec = bench_spec(&a);
    if a.distributed {
        let w = super::world()?;
        // One backend per process: the GPU with --backend gpu, else the CPU.
        spec.gpu = a.backend == "gpu";
        spec.cpu = !spec.gpu;
        spec.converge = false;
        let first = w.rank() == 0;
        spec.distributed = Some(w);
        if !first {
            // Every process times its share; the first prints.
            return run_or_abort(&spec).map(|_| ());
        }
    }
    if a.json {
    } else if let Some(p) = a.density {
        note!(
            "generating {} x {} sparse rows ({} non-zeros each, {}) and timing {} epochs per \
             backend...",
            a.n,
            a.d,
            ((p * a.d as f64).round() as usize).clamp(1, a.d.max(1)),
            a.storage.name(),
            spec.epochs
        );
    } else {
        note!(
            "generating {} x {} ({:.1} MB of {}) and timing {} epochs per backend...",
            a.n,
            a.d,
            (a.n * a.d * a.storage.bytes()) as f64 / 1e6,
            a.storage.name(),
            spec.epochs
        );
    }
    let r = run_or_abort(&spec)?;
    if a.backend == "gpu" && r.gpu.is_none() {
        anyhow::bail!(rosenblatt::Error::NoGpu(
            r.gpu_skipped.clone().unwrap_or_default()
        ));
    }
    if a.json {
        outln!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    print_report(&r)
}

/// What `bench`'s options ask to measure.
fn bench_spec(a: &BenchArgs) -> BenchSpec {
    BenchSpec {
        n: a.n,
        d: a.d,
        epochs: a.epochs.max(1),
        cpu: a.backend != "gpu",
        gpu: a.backend != "cpu",
        peak_gbs: a.peak_gbs,
        gpu_opts: GpuOptions {
            adapter: AdapterQuery {
                hardware_only: a.backend == "all" && a.adapter.is_none(),
                name: a.adapter.clone(),
                nth: None,
            },
            resident: rosenblatt_backend::gpu::ResidentOptions {
                gpu_memory: a.gpu_memory,
                mapped_staging: a.stream_writes.then_some(false),
                read_in_place: a.stream_copies.then_some(false),
                workgroups: a.workgroups.filter(|&g| g > 0),
                heads_per_thread: a.heads_per_thread.filter(|&k| k > 0),
                rows_per_thread: a.rows_per_thread,
                tile_rows: a.tile_rows,
                two_kernels: a.two_kernels,
                ..Default::default()
            },
            shader_checks: a.shader_checks,
            params_space: a.params_space,
        },
        seed: a.seed,
        converge: !a.no_converge,
        classes: a.classes,
        profile: a.profile,
        storage: a.storage,
        density: a.density,
        distributed: None,
    }
}

/// The benchmark's text report: the epoch timed, then each backend.
fn print_report(r: &BenchReport) -> anyhow::Result<()> {
    let rule = if r.classes > 2 {
        format!("multiclass (argmax) epoch, K = {} heads", r.classes)
    } else {
        "binary batch epoch".to_string()
    };
    match r.nnz {
        Some(nnz) => outln!(
            "{rule}, n = {}, d = {}, sparse: {nnz} non-zeros ({:.4}% of the values), {:.1} MB \
             of X per epoch (CSR: values in {} storage, u32 columns, row starts)",
            r.n,
            r.d,
            100.0 * nnz as f64 / (r.n as f64 * r.d as f64).max(1.0),
            r.bytes_per_epoch as f64 / 1e6,
            r.storage
        ),
        None => outln!(
            "{rule}, n = {}, d = {}: {:.1} MB of X per epoch ({} storage)",
            r.n,
            r.d,
            r.bytes_per_epoch as f64 / 1e6,
            r.storage
        ),
    }
    for b in [&r.cpu, &r.gpu].into_iter().flatten() {
        print_bench(b)?;
    }
    if let Some(why) = &r.gpu_skipped {
        outln!("gpu: not measured ({why})");
    }
    if let Some(s) = r.gpu_speedup {
        outln!("GPU / CPU speed: {s:.2}x (ms per epoch, same data)");
    }
    Ok(())
}

fn print_bench(b: &BackendBench) -> anyhow::Result<()> {
    outln!("{} ({}):", b.backend, b.device);
    outln!(
        "  {:.3} ms/epoch median ({:.3} min), {:.1} epochs/s, {} epochs timed, {} per call",
        b.ms_per_epoch,
        b.ms_per_epoch_min,
        b.epochs_per_second,
        b.epochs_timed,
        b.epochs_per_call
    );
    match (b.roofline_gbs, b.roofline_fraction) {
        (Some(r), Some(f)) => outln!(
            "  {:.2} GB/s effective; roofline {:.2} GB/s ({}): {:.0}% of it",
            b.gbs,
            r,
            b.roofline_source,
            100.0 * f
        ),
        _ => outln!(
            "  {:.2} GB/s effective; roofline {}",
            b.gbs,
            b.roofline_source
        ),
    }
    if let Some(h) = b.streamed_h2d_gbs {
        outln!(
            "  X streamed through the GPU each epoch (--gpu-memory): {:.2} GB/s achieved; the \
             device copies host memory at {h:.2} GB/s (measured), so moving X alone takes \
             {:.3} ms of the epoch",
            b.gbs,
            b.gbs / h * b.ms_per_epoch
        );
        if let Some(w) = b.streamed_wait_fraction {
            outln!(
                "  the kernels run {:.1}% of the streamed epoch and wait {:.1}% (for copies, \
                 writes and submits)",
                100.0 * (1.0 - w),
                100.0 * w
            );
        }
    }
    if let Some(v) = b.nnz_per_second {
        outln!("  {:.1} million non-zeros per second", v / 1e6);
    }
    if let (Some(p), Some(ms)) = (b.processes, b.allreduce_ms_per_epoch) {
        outln!(
            "  {p} processes (this is the first, on its share of the rows): the sums over them \
             take {ms:.3} ms of the epoch"
        );
    }
    match b.peak_gflops {
        Some(p) => outln!(
            "  {:.1} GFLOP/s of scores; arithmetic peak {:.1} GFLOP/s (measured: fused multiply-adds on all cores)",
            b.gflops,
            p
        ),
        None => outln!("  {:.1} GFLOP/s of scores", b.gflops),
    }
    if let (Some(f), Some(by)) = (b.bound_fraction, &b.bound_by) {
        outln!(
            "  bound by the {by} roofline: the epoch runs at {:.0}% of it",
            100.0 * f
        );
    }
    outln!(
        "  mistakes: {:.1}% of the rows per epoch (each adds its row to the sums)",
        100.0 * b.mistake_fraction
    );
    out!(
        "  setup {:.3} s, upload {:.3} s",
        b.setup_seconds,
        b.upload_seconds
    );
    if let Some(o) = b.submit_overhead_ms {
        out!(", per-submit overhead {o:.3} ms");
    }
    outln!();
    if let Some(p) = &b.profile {
        outln!("  epoch: {}", p.plan);
        if let Some(c) = &p.chain {
            outln!(
                "  chain (from the plan): {} steps a workgroup; X in flight {} B a thread, {} KiB \
                 a compute unit ({} workgroups); {} KiB of X a barrier; {:.0}% of lanes idle in \
                 the rule; {} head iterations a row on one lane",
                c.steps_per_workgroup,
                c.x_bytes_in_flight_per_thread,
                c.x_bytes_in_flight_per_cu / 1024,
                rosenblatt_backend::CHAIN_WORKGROUPS_PER_CU,
                c.x_bytes_per_barrier / 1024,
                100.0 * c.idle_lanes_in_rule,
                c.one_lane_work_per_row
            );
        }
        let total: f64 = p.kernels.iter().map(|k| k.1).sum();
        if p.epochs > 0 {
            outln!("  kernels, ms per epoch ({} epochs timed):", p.epochs);
        } else {
            outln!("  kernels: not timed (no timestamp queries on this adapter, or X streams by host writes between the kernels)");
        }
        for (name, ms) in &p.kernels {
            outln!(
                "    {name:<12} {ms:>10.3}  {:>5.1}%",
                100.0 * ms / total.max(1e-12)
            );
        }
        print_traffic(p)?;
    }
    if let Some(n) = &b.profile_note {
        outln!("  kernels: {n}");
    }
    if let (Some(s), Some(e), Some(c)) = (b.converge_seconds, b.converge_epochs, b.converged) {
        outln!(
            "  train to convergence (separable data of the same shape): {s:.3} s, {e} epochs{}",
            if c {
                ""
            } else {
                " (did not converge within 1000)"
            }
        );
    }
    Ok(())
}

/// The profile's counted traffic: words loaded and stored per kernel and category, and X
/// loaded against one read of X.
fn print_traffic(p: &rosenblatt_backend::KernelProfile) -> anyhow::Result<()> {
    use rosenblatt_backend::TRAFFIC_CATEGORIES;
    outln!("  words per epoch, counted by instrumented kernels (loaded / stored):");
    for t in &p.traffic {
        let parts: Vec<String> = TRAFFIC_CATEGORIES
            .iter()
            .enumerate()
            .filter(|&(c, _)| t.loads[c] + t.stores[c] > 0)
            .map(|(c, name)| format!("{name} {} / {}", t.loads[c], t.stores[c]))
            .collect();
        outln!(
            "    {:<12} {}; longest thread {}",
            t.kernel,
            parts.join(", "),
            t.longest_thread
        );
    }
    let x = p.loaded(0);
    let other = p.total_words() - x;
    outln!(
        "  X loaded: {:.3}x one read of X ({} words); everything else: {:.2}% of one read",
        x as f64 / p.x_words.max(1) as f64,
        p.x_words,
        100.0 * other as f64 / p.x_words.max(1) as f64
    );
    Ok(())
}

/// Runs the benchmark; in a data-parallel run an error ends every process (the others may be
/// waiting for this one in a sum).
fn run_or_abort(spec: &BenchSpec) -> anyhow::Result<rosenblatt_app::bench::BenchReport> {
    let r = bench::run(spec)
        .map(|mut r| {
            for b in [r.cpu.as_mut(), r.gpu.as_mut()].into_iter().flatten() {
                b.roofline_source = match b.roofline_source.as_str() {
                    bench::ROOF_GIVEN => "--peak-gbs".to_string(),
                    bench::ROOF_UNKNOWN => "unknown (give --peak-gbs)".to_string(),
                    _ => std::mem::take(&mut b.roofline_source),
                };
            }
            r
        })
        .map_err(anyhow::Error::from);
    if let (Err(e), Some(w)) = (&r, &spec.distributed) {
        if w.size() > 1 {
            note!("error: {}", super::errors::message(e));
            w.abort(super::errors::exit_code(e));
        }
    }
    r
}
