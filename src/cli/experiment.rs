//! `rosenblatt experiment ...`: the theory's claims measured (committee, margin, averaging,
//! complexity), as tables, JSON and pictures.

use rosenblatt_app::plot::{self, Chart, Series};
use rosenblatt_backend::{BackendChoice, BackendKind};
use rosenblatt_core::params::TrainParams;

use super::args::{
    AveragingArgs, CommitteeArgs, ComplexityArgs, ExperimentOut, MarginArgs, TimeArgs,
};
use super::errors::{flag_error, usage};
use super::{check_outputs, select_backend, Voice};

pub fn committee(a: CommitteeArgs) -> anyhow::Result<()> {
    TrainParams::for_algo(rosenblatt::Algo::Batch)
        .lr(a.lr)
        .validate()?;
    let rows = rosenblatt_app::experiment::committee_experiment(&a.p, a.k, a.n, a.lr, a.seed)?;
    if a.json {
        outln!(
            "{}",
            serde_json::json!({ "k": a.k, "n": a.n, "lr": a.lr, "rows": rows })
        );
        return Ok(());
    }
    outln!(
        "committee: p experts vote ±1, the label is the majority of a hidden panel of k = {}; one pass over {} examples",
        a.k, a.n
    );
    outln!(
        "{:>8} {:>20} {:>22} {:>16}",
        "p",
        "perceptron mistakes",
        "bound (p+1)k",
        "Winnow mistakes"
    );
    for r in &rows {
        outln!(
            "{:>8} {:>20} {:>22} {:>16}",
            r.p,
            r.perceptron_mistakes,
            r.perceptron_bound,
            r.winnow_mistakes
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
            outln!(
                "from p = {} to p = {}: perceptron mistakes {:+} (x{:.1}), Winnow mistakes {:+} (x{:.1})",
                first.p,
                last.p,
                dp,
                last.perceptron_mistakes as f64 / first.perceptron_mistakes.max(1) as f64,
                dw,
                last.winnow_mistakes as f64 / first.winnow_mistakes.max(1) as f64,
            );
            outln!(
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

/// Checks the picture's file before the work, draws it after.
fn picture(out: &ExperimentOut, chart: impl FnOnce() -> Chart) -> anyhow::Result<()> {
    let Some(p) = &out.plot else { return Ok(()) };
    plot::chart(&chart(), p, (800, 600))?;
    note!("picture written to {}", p.display());
    Ok(())
}

/// The picture's path is checked before any work.
fn check_picture(out: &ExperimentOut) -> anyhow::Result<()> {
    if let Some(p) = &out.plot {
        plot::image_kind(p).map_err(|e| flag_error(e, "--plot"))?;
        check_outputs(&[Some(p.as_path())], &[])?;
    }
    Ok(())
}

pub fn margin(a: MarginArgs) -> anyhow::Result<()> {
    check_picture(&a.out)?;
    for &m in &a.margins {
        if !(m.is_finite() && m > 0.0 && m < 1.0) {
            return Err(usage(
                "--margins",
                &format!("each margin must be in (0, 1), got {m}"),
            ));
        }
    }
    if a.seeds == 0 || a.n == 0 || a.d == 0 || a.max_epochs == 0 {
        return Err(usage(
            "--seeds/--n/--d/--max-epochs",
            "must each be at least 1",
        ));
    }
    let runs = rosenblatt_app::experiment::margin_experiment(
        &a.margins,
        a.seeds,
        a.n,
        a.d,
        a.max_epochs,
        a.seed,
    )?;
    let held = runs.iter().filter(|r| r.mistakes as f64 <= r.bound).count();
    picture(&a.out, || Chart {
        title: format!(
            "Novikoff's bound: online perceptron, n = {}, d = {}, {} seeds a margin",
            a.n, a.d, a.seeds
        ),
        x_desc: "(R / gamma)^2".into(),
        y_desc: "mistakes until an epoch without one".into(),
        log_x: true,
        log_y: true,
        series: vec![
            Series {
                name: "runs".into(),
                points: runs
                    .iter()
                    .map(|r| (r.bound, r.mistakes.max(1) as f64))
                    .collect(),
                dots: true,
            },
            Series {
                name: "bound: mistakes = (R / gamma)^2".into(),
                points: bound_line(&runs),
                dots: false,
            },
        ],
    })?;
    if a.out.json {
        outln!(
            "{}",
            serde_json::json!({ "n": a.n, "d": a.d, "runs": runs, "bound_held": held == runs.len() })
        );
        return Ok(());
    }
    outln!(
        "online perceptron on separable sets (n = {}, d = {}), {} seeds a margin",
        a.n,
        a.d,
        a.seeds
    );
    outln!(
        "{:>10} {:>10} {:>14} {:>14} {:>14} {:>10}",
        "margin",
        "gamma",
        "median R",
        "max mistakes",
        "min bound",
        "converged"
    );
    for &m in &a.margins {
        let rs: Vec<&rosenblatt_app::experiment::MarginRun> =
            runs.iter().filter(|r| r.requested_margin == m).collect();
        let mut radii: Vec<f64> = rs.iter().map(|r| r.radius).collect();
        radii.sort_by(f64::total_cmp);
        outln!(
            "{:>10} {:>10.5} {:>14.3} {:>14} {:>14.0} {:>7}/{}",
            m,
            rs.iter().map(|r| r.gamma).fold(f64::INFINITY, f64::min),
            radii[radii.len() / 2],
            rs.iter().map(|r| r.mistakes).max().unwrap_or(0),
            rs.iter().map(|r| r.bound).fold(f64::INFINITY, f64::min),
            rs.iter().filter(|r| r.converged).count(),
            rs.len()
        );
    }
    outln!(
        "mistakes <= (R/gamma)^2 in {held} of {} runs{}",
        runs.len(),
        if held == runs.len() {
            ": the bound held every time"
        } else {
            ": the bound FAILED (please report this)"
        }
    );
    Ok(())
}

/// The line mistakes = bound across the runs' range.
fn bound_line(runs: &[rosenblatt_app::experiment::MarginRun]) -> Vec<(f64, f64)> {
    let lo = runs
        .iter()
        .map(|r| r.bound)
        .fold(f64::INFINITY, f64::min)
        .min(
            runs.iter()
                .map(|r| r.mistakes.max(1) as f64)
                .fold(f64::INFINITY, f64::min),
        );
    let hi = runs.iter().map(|r| r.bound).fold(0.0, f64::max);
    vec![(lo, lo), (hi, hi)]
}

pub fn averaging(a: AveragingArgs) -> anyhow::Result<()> {
    check_picture(&a.out)?;
    if a.n < 2 || a.d == 0 || a.epochs == 0 {
        return Err(usage(
            "--n/--d/--epochs",
            "need n >= 2, d >= 1 and epochs >= 1",
        ));
    }
    if !(0.0..=0.5).contains(&a.noise) {
        return Err(usage(
            "--noise",
            &format!("must be in [0, 0.5], got {}", a.noise),
        ));
    }
    let rows =
        rosenblatt_app::experiment::averaging_experiment(a.n, a.d, a.noise, a.epochs, a.seed)?;
    let series = |name: &str, f: fn(&rosenblatt_app::experiment::AveragingRow) -> f64| Series {
        name: name.into(),
        points: rows.iter().map(|r| (r.epoch as f64, f(r))).collect(),
        dots: false,
    };
    picture(&a.out, || Chart {
        title: format!(
            "Test error on noisy data ({}% flipped), n = {}, d = {}",
            a.noise * 100.0,
            a.n,
            a.d
        ),
        x_desc: "epochs".into(),
        y_desc: "test error".into(),
        log_x: false,
        log_y: false,
        series: vec![
            series("last vector (online)", |r| r.last),
            series("pocket (batch)", |r| r.pocket),
            series("averaged (online)", |r| r.averaged),
            series("voted", |r| r.voted),
        ],
    })?;
    if a.out.json {
        outln!(
            "{}",
            serde_json::json!({ "n": a.n, "d": a.d, "noise": a.noise, "rows": rows })
        );
        return Ok(());
    }
    outln!(
        "test error after each epoch count: n = {} training and {} test points, d = {}, {}% of labels flipped",
        a.n, a.n, a.d, a.noise * 100.0
    );
    outln!(
        "{:>6} {:>10} {:>10} {:>10} {:>10}",
        "epochs",
        "last",
        "pocket",
        "averaged",
        "voted"
    );
    for r in &rows {
        outln!(
            "{:>6} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
            r.epoch,
            r.last,
            r.pocket,
            r.averaged,
            r.voted
        );
    }
    Ok(())
}

pub fn complexity(a: ComplexityArgs) -> anyhow::Result<()> {
    check_picture(&a.out)?;
    if a.n.contains(&0) || a.d.contains(&0) || a.reps == 0 {
        return Err(usage("--n/--d/--reps", "must each be at least 1"));
    }
    let sizes: Vec<(usize, usize)> =
        a.n.iter()
            .flat_map(|&n| a.d.iter().map(move |&d| (n, d)))
            .collect();
    let cpu = rosenblatt_backend::cpu::CpuBackend::new();
    let mut backends: Vec<&dyn rosenblatt_backend::Backend> = vec![&cpu];
    let sel = match a.backend.backend {
        BackendChoice::Cpu => None,
        _ => Some(select_backend(&a.backend, Voice::Quiet)?),
    };
    if let Some(s) = sel
        .as_ref()
        .filter(|s| s.backend.kind() == BackendKind::Gpu)
    {
        backends.push(&*s.backend);
    }
    let mut rows = Vec::new();
    for b in &backends {
        rows.extend(rosenblatt_app::experiment::complexity_experiment(
            &sizes, a.reps, *b, a.seed,
        )?);
    }
    let by_device = |dev: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.device == dev)
            .map(|r| ((r.n * r.d) as f64, r.seconds))
            .collect()
    };
    let devices: Vec<String> = backends.iter().map(|b| b.device()).collect();
    let slopes: Vec<Option<f64>> = devices
        .iter()
        .map(|d| rosenblatt_app::experiment::fitted_slope(&by_device(d)))
        .collect();
    picture(&a.out, || Chart {
        title: "Time per batch epoch against n x d".into(),
        x_desc: "n x d".into(),
        y_desc: "seconds per epoch (median)".into(),
        log_x: true,
        log_y: true,
        series: devices
            .iter()
            .zip(&slopes)
            .map(|(d, s)| Series {
                name: match s {
                    Some(s) => format!("{d}: slope {s:.2}"),
                    None => d.clone(),
                },
                points: by_device(d),
                dots: true,
            })
            .collect(),
    })?;
    if a.out.json {
        let fits: Vec<serde_json::Value> = devices
            .iter()
            .zip(&slopes)
            .map(|(d, s)| serde_json::json!({ "device": d, "slope": s }))
            .collect();
        outln!("{}", serde_json::json!({ "rows": rows, "fits": fits }));
        return Ok(());
    }
    outln!(
        "{:>40} {:>9} {:>6} {:>12} {:>14}",
        "device",
        "n",
        "d",
        "n x d",
        "ms per epoch"
    );
    for r in &rows {
        outln!(
            "{:>40} {:>9} {:>6} {:>12} {:>14.3}",
            r.device,
            r.n,
            r.d,
            r.n * r.d,
            r.seconds * 1e3
        );
    }
    for (d, s) in devices.iter().zip(&slopes) {
        match s {
            Some(s) => outln!(
                "{d}: time grows as (n d)^{s:.2} (least squares on log-log; 1 is the lecture's O(n d))"
            ),
            None => outln!("{d}: one size only, no slope"),
        }
    }
    Ok(())
}

pub fn time_to_accuracy(a: TimeArgs) -> anyhow::Result<()> {
    check_picture(&a.out)?;
    if a.epochs.is_empty() || a.epochs.contains(&0) {
        return Err(usage("--epochs", "each budget must be at least 1 epoch"));
    }
    let train = super::load_data(&a.train, &a.data, super::Like::NONE)?;
    let test_args = super::args::DataArgs {
        labels: a.test_labels.clone(),
        ..a.data.clone()
    };
    let test = super::load_data(&a.test, &test_args, super::Like::data(&train))?;
    let cpu = rosenblatt_backend::cpu::CpuBackend::new();
    let sel = match a.backend.backend {
        BackendChoice::Cpu => None,
        _ => Some(select_backend(&a.backend, Voice::Quiet)?),
    };
    let gpu = sel
        .as_ref()
        .filter(|s| s.backend.kind() == BackendKind::Gpu)
        .map(|s| &*s.backend);
    let averaged = TrainParams::for_algo(rosenblatt_core::params::Algo::Averaged);
    let mut rules = vec![rosenblatt_app::experiment::TimedRule {
        name: "CPU: averaged, sequential (train's default)".into(),
        params: averaged.clone(),
        backend: &cpu,
    }];
    match gpu {
        Some(g) => {
            rules.push(rosenblatt_app::experiment::TimedRule {
                name: "GPU: batch".into(),
                params: TrainParams::for_algo(rosenblatt_core::params::Algo::Batch),
                backend: g,
            });
            rules.push(rosenblatt_app::experiment::TimedRule {
                name: "GPU: averaged, steps and streams".into(),
                params: averaged,
                backend: g,
            });
        }
        None => {
            let (b, s) = rosenblatt_core::params::gpu_steps(train.n);
            rules.push(rosenblatt_app::experiment::TimedRule {
                name: format!("CPU: averaged, the GPU's steps and streams (B {b}, S {s})"),
                params: averaged.minibatch(b).streams(s),
                backend: &cpu,
            });
        }
    }
    let points = rosenblatt_app::experiment::time_to_accuracy(&train, &test, &rules, &a.epochs)?;
    picture(&a.out, || Chart {
        title: format!(
            "Test accuracy against training time, n = {}, d = {}",
            train.n, train.d
        ),
        x_desc: "seconds (upload included)".into(),
        y_desc: "test accuracy".into(),
        log_x: true,
        log_y: false,
        series: rules
            .iter()
            .map(|r| Series {
                name: r.name.clone(),
                points: points
                    .iter()
                    .filter(|p| p.rule == r.name)
                    .map(|p| (p.seconds, p.accuracy))
                    .collect(),
                dots: false,
            })
            .collect(),
    })?;
    if a.out.json {
        outln!(
            "{}",
            serde_json::json!({ "n": train.n, "d": train.d, "test_n": test.n, "points": points })
        );
        return Ok(());
    }
    outln!(
        "test accuracy against training time: {} training rows, {} test rows, d = {}",
        train.n,
        test.n,
        train.d
    );
    let w = points
        .iter()
        .map(|p| p.rule.len())
        .max()
        .unwrap_or(4)
        .max(4);
    outln!(
        "{:<w$} {:>7} {:>10} {:>9}",
        "rule",
        "epochs",
        "seconds",
        "accuracy"
    );
    for p in &points {
        outln!(
            "{:<w$} {:>7} {:>10.3} {:>9.4}",
            p.rule,
            p.epochs,
            p.seconds,
            p.accuracy
        );
    }
    if let Some(g) = gpu {
        outln!("GPU: {}", g.device());
    }
    Ok(())
}
