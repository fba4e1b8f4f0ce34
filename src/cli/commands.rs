//! The `train`, `predict`, `eval` and `gen` commands.

use rosenblatt::algo::{self, TrainReport};
use rosenblatt::backend::cpu::CpuBackend;
use rosenblatt::backend::gpu::context::AdapterQuery;
use rosenblatt::backend::gpu::{list_adapters, GpuOptions};
use rosenblatt::backend::{Backend, BackendChoice, BackendKind, Kernel};
use rosenblatt::bench::{self, BackendBench, BenchSpec};
use rosenblatt::data::synth::{self, SynthSpec};
use rosenblatt::data::Format;
use rosenblatt::model::ModelKind;
use rosenblatt::model::{Evaluation, Model};
use rosenblatt::params::TrainParams;
use rosenblatt::params::{Algo, Mode};

use super::{
    load_data, select_backend, write_atomic, write_output, Bar, BenchArgs, CommitteeArgs, EvalArgs,
    GenArgs, InfoArgs, PlotModelArgs, PlotTrainingArgs, PredictArgs, TrainArgs,
};

pub fn train(a: TrainArgs) -> anyhow::Result<()> {
    let params = TrainParams {
        algo: a.algo,
        epochs: a.epochs,
        lr: a.lr,
        tol: a.tol,
        seed: a.seed,
        fit_bias: !a.no_bias,
        init: a.init,
        shuffle: !a.no_shuffle,
        mode: a.mode,
        margin_threshold: a.margin_threshold,
        multiclass_update: a.multiclass_update,
        multiclass: a.multiclass,
        max_vectors: a.max_vectors,
        kernel: (a.algo == rosenblatt::params::Algo::Kernel).then_some(match a.kernel.as_str() {
            "poly" => Kernel::Poly {
                degree: a.degree,
                gamma: a.gamma,
                coef0: a.coef0,
            },
            "rbf" => Kernel::Rbf { gamma: a.gamma },
            _ => Kernel::Linear,
        }),
    }
    .validate()?;
    let ds = load_data(&a.data, &a.data_args, None)?;
    for p in [&a.plot, &a.animate].into_iter().flatten() {
        rosenblatt::plot::image_kind(p)?;
    }
    if let Some(anim) = &a.animate {
        let why = if rosenblatt::plot::image_kind(anim)? != rosenblatt::plot::ImageKind::Gif {
            Some("must end in .gif")
        } else if ds.d != 2 {
            Some("needs 2-D data")
        } else if matches!(params.algo, Algo::Voted | Algo::Kernel | Algo::Multiclass)
            || ds.labels.as_ref().is_some_and(|l| l.classes.len() != 2)
        {
            Some("needs a binary linear model (not voted, kernel or multiclass)")
        } else {
            None
        };
        if let Some(reason) = why {
            anyhow::bail!(rosenblatt::Error::InvalidParam {
                name: "--animate",
                value: anim.display().to_string(),
                reason,
            });
        }
    }
    let sel = select_backend(&a.backend, a.json)?;
    if params.effective_mode() == Mode::Online && sel.backend.kind() == BackendKind::Gpu {
        eprintln!(
            "note: --algo {} is online (one update per mistake, sequential); it runs on the CPU",
            params.algo.name()
        );
    }
    let cpu = CpuBackend::new();
    let mut bar = Bar::new(!a.json);
    if a.animate.is_some() {
        bar.snapshots = Some(vec![(
            0,
            rosenblatt::algo::initial_weights(ds.d, 1, &params),
        )]);
    }
    // Under auto, a GPU failure mid-training finishes on the CPU; an explicit gpu fails.
    let fallback: Option<&dyn Backend> = (a.backend.backend == BackendChoice::Auto).then_some(&cpu);
    let trained = algo::train(&ds, &params, &*sel.backend, fallback, &mut bar);
    bar.finish();
    let trained = trained?;
    if let Some(note) = &trained.report.fallback {
        eprintln!("warning: {note}");
    }
    if let Some(out) = &a.output {
        write_atomic(out, |w| trained.model.write(w))?;
    }
    if let Some(p) = &a.plot {
        rosenblatt::plot::training(&trained.report, p, (800, 600))?;
    }
    if let (Some(p), Some(frames)) = (&a.animate, bar.snapshots.take()) {
        rosenblatt::plot::animate(&ds, &frames, params.effective_mode() == Mode::Online, p)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&trained.report)?);
    } else {
        print_report(&trained.report, trained.model.kind);
        for (what, f) in [
            ("model", &a.output),
            ("training plot", &a.plot),
            ("animation", &a.animate),
        ] {
            if let Some(f) = f {
                println!("{what} written to {}", f.display());
            }
        }
    }
    Ok(())
}

/// Mistakes per epoch, shortened in the middle when long.
pub fn epoch_list(m: &[u64]) -> String {
    let show = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    if m.len() <= 12 {
        show(m)
    } else {
        format!("{} ... {}", show(&m[..6]), show(&m[m.len() - 4..]))
    }
}

pub fn print_report(r: &TrainReport, kind: ModelKind) {
    println!(
        "{} perceptron on {} ({}): n = {}, d = {}",
        r.algo, r.backend, r.device, r.n, r.d
    );
    let why = match r.stop_reason.name() {
        "converged" => "converged: an epoch with no mistake",
        "tolerance" => "stopped: update norm under --tol",
        _ => "stopped at --epochs without converging",
    };
    println!("  epochs:            {} ({why})", r.epochs);
    println!("  training accuracy: {:.2}%", 100.0 * r.train_accuracy);
    println!(
        "  mistakes:          {} in all; per epoch: {}",
        r.total_mistakes,
        epoch_list(&r.mistakes_per_epoch)
    );
    match (r.margin, r.mistake_bound) {
        (Some(g), Some(b)) => println!(
            "  Novikoff:          R = {:.4}, achieved margin gamma = {:.4e}, (R/gamma)^2 = {:.4e}",
            r.radius, g, b
        ),
        _ if matches!(kind, ModelKind::Binary | ModelKind::Kernel) => println!(
            "  Novikoff:          R = {:.4}; no positive margin (the data is not separated), so no bound",
            r.radius
        ),
        _ => println!(
            "  Novikoff:          R = {:.4}; a {} model has no single separating hyperplane, so no margin or bound",
            r.radius,
            format!("{kind:?}").to_lowercase()
        ),
    }
    println!("  time:              {:.3} s", r.seconds);
}

pub fn predict(a: PredictArgs) -> anyhow::Result<()> {
    let model = Model::load(&a.model)?;
    let ds = load_data(&a.data, &a.data_args, Some(model.n_features))?;
    model.check_features(&ds)?;
    let sel = select_backend(&a.backend, true)?;
    let raw = model.raw_scores(&ds, &*sel.backend)?;
    let pred = model.predict(&raw);
    let per_class = matches!(model.kind, ModelKind::Multiclass | ModelKind::Ovr);
    let values = if per_class {
        raw
    } else {
        model.decision_values(&raw)
    };
    let width = if per_class { model.heads() } else { 1 };
    write_output(a.output.as_deref(), |w| {
        for (p, s) in pred.iter().zip(values.chunks_exact(width)) {
            let name = &model.classes[*p as usize];
            if a.margins {
                let s: Vec<String> = s.iter().map(f32::to_string).collect();
                writeln!(w, "{name}\t{}", s.join("\t"))?;
            } else {
                writeln!(w, "{name}")?;
            }
        }
        Ok(())
    })
}

pub fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let model = Model::load(&a.model)?;
    let ds = load_data(&a.data, &a.data_args, None)?;
    model.check_features(&ds)?;
    let sel = select_backend(&a.backend, true)?;
    let ev = model.evaluate(&ds, &*sel.backend)?;
    if a.json {
        println!("{}", serde_json::to_string(&ev)?);
    } else {
        print_eval(&ev);
    }
    Ok(())
}

fn print_eval(ev: &Evaluation) {
    println!("n = {}, accuracy = {:.2}%", ev.n, 100.0 * ev.accuracy);
    if let (Some(p), Some(r), Some(f)) = (ev.precision, ev.recall, ev.f1) {
        println!(
            "positive class {:?}: precision {:.4}, recall {:.4}, F1 {:.4}",
            ev.confusion.classes[1], p, r, f
        );
    }
    match ev.auc {
        Some(a) => println!("AUC (from the decision values) = {a:.4}"),
        None if ev.precision.is_some() => println!("AUC: undefined (the data has one class only)"),
        None => {}
    }
    println!("confusion matrix (rows: true class, columns: predicted):");
    let c = &ev.confusion.classes;
    let w = c.iter().map(String::len).max().unwrap_or(1).max(8);
    print!("  {:>w$}", "");
    for name in c {
        print!(" {name:>w$}");
    }
    println!();
    for (name, row) in c.iter().zip(&ev.confusion.matrix) {
        print!("  {name:>w$}");
        for v in row {
            print!(" {v:>w$}");
        }
        println!();
    }
    if ev.precision.is_none() {
        println!("per class:");
        println!(
            "  {:>w$} {:>9} {:>9} {:>9} {:>8}",
            "class",
            "precision",
            "recall",
            "F1",
            "support",
            w = w
        );
        for m in &ev.per_class {
            println!(
                "  {:>w$} {:>9.4} {:>9.4} {:>9.4} {:>8}",
                m.class,
                m.precision,
                m.recall,
                m.f1,
                m.support,
                w = w
            );
        }
        println!(
            "  {:>w$} {:>9.4} {:>9.4} {:>9.4}",
            "macro",
            ev.macro_precision,
            ev.macro_recall,
            ev.macro_f1,
            w = w
        );
    }
}

pub fn gen(a: GenArgs) -> anyhow::Result<()> {
    let data = if a.kind == "committee" {
        synth::committee(a.n, a.p.unwrap_or(0), a.k, a.seed)?.0
    } else {
        let spec = SynthSpec {
            n: a.n,
            d: a.d.unwrap_or(0),
            margin: a.margin,
            noise: a.noise,
            seed: a.seed,
        };
        synth::generate(&spec)?.data
    };
    write_output(a.output.as_deref(), |w| match a.format {
        Format::Libsvm => synth::write_libsvm(&data, w),
        _ => synth::write_csv(&data, w),
    })
}

pub fn info(a: InfoArgs) -> anyhow::Result<()> {
    let (adapters, auto) = list_adapters();
    if a.json {
        let v = serde_json::json!({
            "adapters": adapters,
            "auto": auto.map(|i| adapters[i].name.clone()),
            "cpu_threads": rayon::current_num_threads(),
        });
        println!("{v}");
        return Ok(());
    }
    if adapters.is_empty() {
        println!("no GPU adapter found; --backend auto uses the CPU.");
        println!("To get one: {}", rosenblatt::backend::gpu::HOW_TO_GET_ONE);
    }
    for (i, ad) in adapters.iter().enumerate() {
        let mark = if Some(i) == auto {
            "  <- --backend auto picks this one"
        } else {
            ""
        };
        println!(
            "[{i}] {} ({}, {}){mark}",
            ad.name, ad.backend, ad.device_type
        );
        println!("    driver: {} {}", ad.driver, ad.driver_info);
        println!(
            "    max storage binding {} MiB, max buffer {} MiB, workgroup {} invocations / {} KiB, {} workgroups per dimension",
            ad.max_storage_buffer_binding_size >> 20,
            ad.max_buffer_size >> 20,
            ad.max_compute_invocations_per_workgroup,
            ad.max_compute_workgroup_storage_size >> 10,
            ad.max_compute_workgroups_per_dimension
        );
        if !ad.features.is_empty() {
            println!("    optional features: {}", ad.features.join(", "));
        }
    }
    if !adapters.is_empty() && auto.is_none() {
        println!("--backend auto uses the CPU: only software adapters here (slower than the CPU backend); --backend gpu uses them.");
    }
    println!("CPU backend: {} threads", rayon::current_num_threads());
    Ok(())
}

pub fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let spec = BenchSpec {
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
            },
            ..Default::default()
        },
        seed: a.seed,
        converge: !a.no_converge,
    };
    if !a.json {
        eprintln!(
            "generating {} x {} ({:.1} MB of f32) and timing {} epochs per backend...",
            a.n,
            a.d,
            (a.n * a.d * 4) as f64 / 1e6,
            spec.epochs
        );
    }
    let r = bench::run(&spec)?;
    if a.backend == "gpu" && r.gpu.is_none() {
        anyhow::bail!(rosenblatt::Error::NoGpu(
            r.gpu_skipped.clone().unwrap_or_default()
        ));
    }
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "batch epoch, n = {}, d = {}: {:.1} MB of X per epoch",
        r.n,
        r.d,
        r.bytes_per_epoch as f64 / 1e6
    );
    for b in [&r.cpu, &r.gpu].into_iter().flatten() {
        print_bench(b);
    }
    if let Some(why) = &r.gpu_skipped {
        println!("gpu: not measured ({why})");
    }
    if let Some(s) = r.gpu_speedup {
        println!("GPU / CPU speed: {s:.2}x (ms per epoch, same data)");
    }
    Ok(())
}

fn print_bench(b: &BackendBench) {
    println!("{} ({}):", b.backend, b.device);
    println!(
        "  {:.3} ms/epoch median ({:.3} min), {:.1} epochs/s, {} epochs timed, {} per call",
        b.ms_per_epoch, b.ms_per_epoch_min, b.epochs_per_second, b.epochs_timed, b.epochs_per_call
    );
    match (b.roofline_gbs, b.roofline_fraction) {
        (Some(r), Some(f)) => println!(
            "  {:.2} GB/s effective; roofline {:.2} GB/s ({}): {:.0}% of it",
            b.gbs,
            r,
            b.roofline_source,
            100.0 * f
        ),
        _ => println!(
            "  {:.2} GB/s effective; roofline {}",
            b.gbs, b.roofline_source
        ),
    }
    print!(
        "  setup {:.3} s, upload {:.3} s",
        b.setup_seconds, b.upload_seconds
    );
    if let Some(o) = b.submit_overhead_ms {
        print!(", per-submit overhead {o:.3} ms");
    }
    println!();
    if let (Some(s), Some(e), Some(c)) = (b.converge_seconds, b.converge_epochs, b.converged) {
        println!(
            "  train to convergence (separable, margin 0.05): {s:.3} s, {e} epochs{}",
            if c {
                ""
            } else {
                " (did not converge within 1000)"
            }
        );
    }
}

pub fn committee(a: CommitteeArgs) -> anyhow::Result<()> {
    TrainParams::default().lr(a.lr).validate()?;
    let rows = rosenblatt::experiment::committee_experiment(&a.p, a.k, a.n, a.lr, a.seed)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "k": a.k, "n": a.n, "lr": a.lr, "rows": rows })
        );
        return Ok(());
    }
    println!(
        "committee: p experts vote ±1, the label is the majority of a hidden panel of k = {}; one pass over {} examples",
        a.k, a.n
    );
    println!(
        "{:>8} {:>20} {:>22} {:>16}",
        "p", "perceptron mistakes", "bound (p+1)k", "Winnow mistakes"
    );
    for r in &rows {
        println!(
            "{:>8} {:>20} {:>22} {:>16}",
            r.p, r.perceptron_mistakes, r.perceptron_bound, r.winnow_mistakes
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        if rows.len() > 1 {
            let more = |a: u64, b: u64| b as i64 - a as i64;
            let (dp, dw) = (
                more(first.perceptron_mistakes, last.perceptron_mistakes),
                more(first.winnow_mistakes, last.winnow_mistakes),
            );
            let holds = last.winnow_mistakes < last.perceptron_mistakes && dw < dp;
            println!(
                "from p = {} to p = {}: perceptron mistakes {:+} (x{:.1}), Winnow mistakes {:+} (x{:.1})",
                first.p,
                last.p,
                dp,
                last.perceptron_mistakes as f64 / first.perceptron_mistakes.max(1) as f64,
                dw,
                last.winnow_mistakes as f64 / first.winnow_mistakes.max(1) as f64,
            );
            println!(
                "{}",
                if holds {
                    "-> Winnow makes fewer mistakes and they grow more slowly with p, as the lecture notes claim"
                } else {
                    "-> the claim that Winnow's mistakes grow more slowly with p does NOT hold here"
                }
            );
        }
    }
    Ok(())
}

fn plot_inputs(a: &PlotModelArgs) -> anyhow::Result<(Model, rosenblatt::data::Dataset)> {
    rosenblatt::plot::image_kind(&a.output)?;
    let model = Model::load(&a.model)?;
    let ds = load_data(&a.data, &a.data_args.clone().into(), Some(model.n_features))?;
    model.check_features(&ds)?;
    Ok((model, ds))
}

pub fn plot_boundary(a: PlotModelArgs) -> anyhow::Result<()> {
    let (model, ds) = plot_inputs(&a)?;
    let features = match a.features.as_deref() {
        Some([i, j]) if *i >= 1 && *j >= 1 => Some((i - 1, j - 1)),
        Some(f) => anyhow::bail!(rosenblatt::Error::InvalidParam {
            name: "--features",
            value: format!("{f:?}"),
            reason: "must be two 1-based feature numbers, e.g. --features 1,3",
        }),
        None => None,
    };
    let sel = select_backend(&a.backend, true)?;
    rosenblatt::plot::boundary(
        &model,
        &ds,
        &*sel.backend,
        features,
        &a.output,
        (a.size.width, a.size.height),
    )?;
    println!("boundary plot written to {}", a.output.display());
    Ok(())
}

pub fn plot_training(a: PlotTrainingArgs) -> anyhow::Result<()> {
    rosenblatt::plot::image_kind(&a.output)?;
    let report = rosenblatt::plot::load_report(&a.run)?;
    rosenblatt::plot::training(&report, &a.output, (a.size.width, a.size.height))?;
    println!("training plot written to {}", a.output.display());
    Ok(())
}

pub fn plot_roc(a: PlotModelArgs) -> anyhow::Result<()> {
    let (model, ds) = plot_inputs(&a)?;
    let sel = select_backend(&a.backend, true)?;
    rosenblatt::plot::roc(
        &model,
        &ds,
        &*sel.backend,
        &a.output,
        (a.size.width, a.size.height),
    )?;
    println!("ROC plot written to {}", a.output.display());
    Ok(())
}
