//! Training on real data: the patience rule stops noisy runs early and keeps the best model,
//! separable data still runs to convergence, the validation split is stratified and seeded,
//! scaling round-trips through the model file and is applied at predict time, class and row
//! weights move the decision the expected way, the voted perceptron handles more than two
//! classes, and the GPU equals the CPU for every new rule (integer data).

use crate::common;

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::{Backend, StopReason};
use rosenblatt_core::data::scale::Scaler;
use rosenblatt_core::data::synth::{generate, SynthSpec};
use rosenblatt_core::data::{Dataset, Labels};
use rosenblatt_core::params::{Algo, ClassWeight, Mode, Scale, TrainParams};
use rosenblatt_train::algo::{self, stratified_split, Holdout, Problem};
use rosenblatt_train::model::Model;

/// Generated data with `noise` of the labels flipped (not separable when noise > 0).
fn noisy(n: usize, d: usize, noise: f32, seed: u64) -> Dataset {
    generate(&SynthSpec {
        n,
        d,
        margin: 0.0,
        noise,
        seed,
    })
    .unwrap()
    .data
}

fn wrong(acc: f64, n: usize) -> u64 {
    ((1.0 - acc) * n as f64).round() as u64
}

#[test]
fn patience_stops_a_noisy_run_early_and_keeps_the_best_epoch() {
    let ds = noisy(4000, 10, 0.05, 3);
    let cpu = CpuBackend::new();
    for algo in [Algo::Batch, Algo::Pocket, Algo::Online, Algo::Averaged] {
        let p = TrainParams::for_algo(algo).validate().unwrap();
        let t = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
        let r = &t.report;
        assert_eq!(r.stop_reason, StopReason::Patience, "{algo:?}");
        assert!(r.epochs < 100, "{algo:?}: {} epochs", r.epochs);
        let best = *r.mistakes_per_epoch.iter().min().unwrap();
        assert_eq!(r.mistakes_per_epoch[r.best_epoch - 1], best, "{algo:?}");
        if p.effective_mode() == Mode::Batch {
            // The batch forms keep the weights the best epoch started with: their training
            // mistakes are the fewest of the run.
            assert_eq!(wrong(r.train_accuracy.unwrap(), ds.n), best, "{algo:?}");
        }
        // The same run without patience goes to the epoch limit.
        let all = TrainParams::for_algo(algo)
            .patience(0)
            .epochs(150)
            .validate()
            .unwrap();
        let t2 = algo::train(&ds, &all, &cpu, None, &mut ()).unwrap();
        assert_eq!(t2.report.epochs, 150, "{algo:?}");
        if algo == Algo::Batch {
            // The last iterate of the batch rule on noisy data is much worse than its best.
            assert!(
                t.report.train_accuracy.unwrap() > t2.report.train_accuracy.unwrap(),
                "{} vs {}",
                t.report.train_accuracy.unwrap(),
                t2.report.train_accuracy.unwrap()
            );
        }
    }
}

#[test]
fn separable_data_still_runs_until_no_mistake_by_default() {
    for (n, d, margin, algo) in [
        (2000, 5, 0.05, Algo::Batch),
        (2000, 20, 0.01, Algo::Batch),
        (5000, 50, 0.001, Algo::Batch),
        (1000, 10, 0.05, Algo::Online),
        (1000, 10, 0.05, Algo::Pocket),
    ] {
        let s = common::separable(n, d, margin, 7);
        let p = TrainParams::for_algo(algo).validate().unwrap();
        let t = algo::train(&s.data, &p, &CpuBackend::new(), None, &mut ()).unwrap();
        assert_eq!(
            t.report.stop_reason,
            StopReason::Converged,
            "n {n} d {d} margin {margin} {algo:?}: {:?}",
            t.report.mistakes_per_epoch
        );
    }
}

#[test]
fn the_patience_floor_and_min_improvement_decide_when_to_stop() {
    // 0.5% noise: the pocket's fewest mistakes (25 of 4000) stay under the 1% floor, so the
    // default rule waits until the run has gone as many epochs past its best as it took to
    // reach it (and at least the patience); a floor of 0 stops it after the patience alone.
    let ds = noisy(4000, 10, 0.005, 5);
    let cpu = CpuBackend::new();
    let p = |floor: f32, f: f32| {
        TrainParams::for_algo(Algo::Pocket)
            .epochs(1000)
            .patience_floor(floor)
            .min_improvement(f)
            .validate()
            .unwrap()
    };
    let t = algo::train(&ds, &p(0.01, 0.01), &cpu, None, &mut ()).unwrap();
    assert_eq!(t.report.stop_reason, StopReason::Patience);
    let best = t.report.best_epoch;
    assert!(
        t.report.epochs >= 2 * best && t.report.epochs >= best + 30,
        "stopped at {} with the best at {best}",
        t.report.epochs
    );
    assert!(
        t.report.mistakes_per_epoch.iter().min().copied().unwrap() <= 40,
        "under the floor"
    );
    let floored = t.report.epochs;
    let t = algo::train(&ds, &p(0.0, 0.01), &cpu, None, &mut ()).unwrap();
    assert_eq!(t.report.stop_reason, StopReason::Patience);
    assert!(t.report.epochs <= floored);
    let stopped = t.report.epochs;
    // Asking for a 50% improvement stops sooner.
    let t = algo::train(&ds, &p(0.0, 0.5), &cpu, None, &mut ()).unwrap();
    assert!(
        t.report.epochs < stopped,
        "{} >= {stopped}",
        t.report.epochs
    );
}

#[test]
fn validation_keeps_the_model_of_the_best_validation_epoch() {
    let ds = noisy(3000, 8, 0.1, 11);
    let cpu = CpuBackend::new();
    for algo in [
        Algo::Batch,
        Algo::Pocket,
        Algo::Averaged,
        Algo::Online,
        Algo::Voted,
        Algo::Kernel,
    ] {
        let epochs = if algo == Algo::Kernel { 15 } else { 200 };
        let mut tp = TrainParams::for_algo(algo)
            .epochs(epochs)
            .validation_fraction(Some(0.2));
        if algo == Algo::Averaged {
            tp = tp.mode(Mode::Batch);
        }
        let p = tp.validate().unwrap();
        let t = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
        let r = &t.report;
        assert_eq!(r.n_validation, Some(600), "{algo:?}");
        assert_eq!(r.n, 2400, "{algo:?}");
        let per = r.validation_accuracy_per_epoch.as_ref().unwrap();
        assert_eq!(per.len(), r.epochs, "{algo:?}");
        let top = per.iter().copied().fold(0f64, f64::max);
        assert_eq!(per[r.best_epoch - 1], top, "{algo:?}: best epoch");
        assert!(
            (r.validation_accuracy.unwrap() - top).abs() < 1e-12,
            "{algo:?}: the kept model scores {} on the validation rows, the best epoch {top}",
            r.validation_accuracy.unwrap()
        );
    }
}

#[test]
fn the_validation_split_is_stratified_and_seeded() {
    let names: Vec<&str> = (0..1000)
        .map(|i| match i % 10 {
            0 => "rare",
            1..=3 => "mid",
            _ => "common",
        })
        .collect();
    let labels = Labels::from_names(&names);
    let (keep, held) = stratified_split(&labels, 0.2, 4);
    assert_eq!(keep.len() + held.len(), 1000);
    let count = |rows: &[usize], c: &str| rows.iter().filter(|&&i| names[i] == c).count();
    assert_eq!(count(&held, "rare"), 20);
    assert_eq!(count(&held, "mid"), 60);
    assert_eq!(count(&held, "common"), 120);
    assert_eq!(
        stratified_split(&labels, 0.2, 4),
        (keep.clone(), held.clone())
    );
    assert_ne!(stratified_split(&labels, 0.2, 5).1, held);
    assert!(keep.windows(2).all(|w| w[0] < w[1]) && held.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn scaling_round_trips_through_the_model_file_and_predict_applies_it() {
    // Features on very different scales: 0.05 .. 0.1 and 0 .. 4000.
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let n = 400;
    let mut x = Vec::new();
    let mut names = Vec::new();
    for _ in 0..n {
        let (a, b): (f32, f32) = (rng.random_range(0.05..0.1), rng.random_range(0.0..4000.0));
        x.extend([a, b]);
        names.push(if (a - 0.075) * 40.0 + (b - 2000.0) / 2000.0 > 0.0 {
            "yes"
        } else {
            "no"
        });
    }
    let ds = Dataset::new(x, n, 2, Some(Labels::from_names(&names)), "scales");
    let cpu = CpuBackend::new();
    for scale in [Scale::Standard, Scale::Minmax, Scale::Maxabs] {
        let p = TrainParams::for_algo(Algo::Batch)
            .epochs(300)
            .scale(scale)
            .validate()
            .unwrap();
        let t = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
        assert_eq!(t.model.scaling().unwrap().kind, scale);
        // The same as training on data scaled by hand, without scaling.
        let s = Scaler::fit(scale, &ds.x.values(), ds.n, ds.d).unwrap();
        let mut xs = ds.x.values().to_vec();
        s.apply(&mut xs, Path::new("t")).unwrap();
        let scaled = Dataset::new(xs, n, 2, ds.labels.clone(), "scaled");
        let plain = TrainParams::for_algo(Algo::Batch)
            .epochs(300)
            .validate()
            .unwrap();
        let u = algo::train(&scaled, &plain, &cpu, None, &mut ()).unwrap();
        assert_eq!(t.model.body(), u.model.body(), "{scale:?}");
        assert_eq!(
            t.model.raw_scores(&ds, &cpu).unwrap(),
            u.model.raw_scores(&scaled, &cpu).unwrap(),
            "{scale:?}: predict applies the scaling"
        );
        // Through the file.
        let mut buf = Vec::new();
        t.model.write(&mut buf).unwrap();
        let back =
            Model::from_json(Path::new("m.json"), std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, t.model);
        assert_eq!(
            back.raw_scores(&ds, &cpu).unwrap(),
            t.model.raw_scores(&ds, &cpu).unwrap()
        );
        // In the input's coordinates the hyperplane gives the same decision values.
        let h = back.input_hyperplane().unwrap();
        let raw = back.raw_scores(&ds, &cpu).unwrap();
        for (i, r) in raw.iter().enumerate() {
            let v = h.weights[0] * ds.get(i, 0) + h.weights[1] * ds.get(i, 1) + h.bias;
            assert!(
                (v - r).abs() <= 1e-3 * (1.0 + r.abs()),
                "{scale:?}: {v} vs {r}"
            );
        }
    }
    // Unscaled, the perceptron does much worse here.
    let p = TrainParams::for_algo(Algo::Batch)
        .epochs(300)
        .validate()
        .unwrap();
    let raw = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
    let p = TrainParams::for_algo(Algo::Batch)
        .epochs(300)
        .scale(Scale::Standard)
        .validate()
        .unwrap();
    let scaled = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
    assert!(
        scaled.report.train_accuracy.unwrap() > raw.report.train_accuracy.unwrap() + 0.05,
        "{} vs {}",
        scaled.report.train_accuracy.unwrap(),
        raw.report.train_accuracy.unwrap()
    );
}

#[test]
fn class_weights_move_the_decision_toward_the_weighted_class() {
    // Unbalanced and overlapping: 10% positives.
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let n = 2000;
    let mut x = Vec::new();
    let mut names = Vec::new();
    for i in 0..n {
        let pos = i % 10 == 0;
        let c = if pos { 1.0 } else { -1.0 };
        x.extend([
            c * 0.5 + rng.random_range(-2.0..2.0),
            rng.random_range(-1.0..1.0),
        ]);
        names.push(if pos { "pos" } else { "neg" });
    }
    let ds = Dataset::new(x, n, 2, Some(Labels::from_names(&names)), "unbalanced");
    let cpu = CpuBackend::new();
    let recall = |cw: Option<ClassWeight>, algo: Algo| {
        let p = TrainParams::for_algo(algo)
            .epochs(100)
            .class_weight(cw)
            .validate()
            .unwrap();
        let t = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
        t.model.evaluate(&ds, &cpu).unwrap().recall.unwrap()
    };
    for algo in [Algo::Pocket, Algo::Averaged] {
        let plain = recall(None, algo);
        let balanced = recall(Some(ClassWeight::Balanced), algo);
        let heavy = recall(Some(ClassWeight::Given(vec![("pos".into(), 20.0)])), algo);
        assert!(balanced > plain + 0.1, "{algo:?}: {balanced} vs {plain}");
        assert!(heavy >= balanced, "{algo:?}: {heavy} vs {balanced}");
    }
    // A class the data does not have is refused, naming the classes.
    let p = TrainParams::for_algo(Algo::Batch)
        .class_weight(Some(ClassWeight::Given(vec![("maybe".into(), 2.0)])))
        .validate()
        .unwrap();
    let e = algo::train(&ds, &p, &cpu, None, &mut ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("maybe") && e.contains("neg, pos"), "{e}");
}

#[test]
fn every_new_rule_gives_the_same_model_on_the_gpu_and_the_cpu() {
    let Some(g) = common::gpu() else {
        return;
    };
    let cpu = CpuBackend::new();
    for k in [2, 4] {
        let mut ds = common::integer_classes(500, 6, k, 20 + k as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(k as u64);
        ds.weights = Some((0..ds.n).map(|_| rng.random_range(0..3) as f32).collect());
        let held = common::integer_classes(200, 6, k, 40 + k as u64);
        // Integer class weights keep every sum exact.
        let cw2 = Some(ClassWeight::Given(vec![("c1".into(), 2.0)]));
        for (algo, cw, val, patience) in [
            (Algo::Batch, cw2.clone(), false, 3),
            (Algo::Batch, None, true, 3),
            (Algo::Pocket, cw2.clone(), true, 0),
            (Algo::Averaged, None, true, 4),
            (Algo::Batch, None, false, 2),
        ] {
            let mut tp = TrainParams::for_algo(algo)
                .mode(Mode::Batch)
                .epochs(40)
                .patience(patience)
                .patience_floor(0.0)
                .class_weight(cw.clone());
            if k == 4 && algo == Algo::Batch {
                tp = tp.algo(Algo::Multiclass);
            }
            let p = tp.validate().unwrap();
            let fit = |b: &dyn Backend| {
                let holdout = if val {
                    Holdout::Rows(&held)
                } else {
                    Holdout::FromParams
                };
                let pb = Problem::build(&ds, &p, holdout, None).unwrap();
                algo::fit(pb, &p, b, None, &mut ()).unwrap()
            };
            let (c, gg) = (fit(&cpu), fit(g));
            let what = format!("k {k} {algo:?} {cw:?} validation {val} patience {patience}");
            assert_eq!(
                c.report.mistakes_per_epoch, gg.report.mistakes_per_epoch,
                "{what}"
            );
            assert_eq!(c.report.stop_reason, gg.report.stop_reason, "{what}");
            assert_eq!(c.report.best_epoch, gg.report.best_epoch, "{what}");
            assert_eq!(
                c.report.validation_accuracy_per_epoch, gg.report.validation_accuracy_per_epoch,
                "{what}"
            );
            if algo != Algo::Averaged {
                assert_eq!(c.model.body(), gg.model.body(), "{what}");
            }
        }
    }
}

#[test]
fn the_voted_perceptron_handles_more_than_two_classes() {
    let ds = common::integer_classes(400, 5, 3, 6);
    let p = TrainParams::for_algo(Algo::Voted)
        .epochs(10)
        .validate()
        .unwrap();
    let cpu = CpuBackend::new();
    let t = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
    let v = match t.model.body() {
        rosenblatt_train::model::Body::Voted(v) => v.clone(),
        b => panic!("not voted: {b:?}"),
    };
    assert_eq!(v.heads(), 3);
    assert_eq!(v.rows.weights.len(), 3);
    assert_eq!(
        v.steps.as_ref().unwrap().coef.len(),
        3 * (v.counts.len() - 1)
    );
    let raw = t.model.raw_scores(&ds, &cpu).unwrap();
    assert_eq!(raw.len(), ds.n * 3);
    // Every row's votes add up to the total count.
    let total: u64 = v.counts.iter().sum();
    for r in raw.chunks_exact(3) {
        assert_eq!(r.iter().sum::<f32>(), total as f32);
    }
    // It beats the last vector alone (the plain online multiclass perceptron's model).
    let last = TrainParams::for_algo(Algo::Multiclass)
        .mode(Mode::Online)
        .epochs(10)
        .validate()
        .unwrap();
    let o = algo::train(&ds, &last, &cpu, None, &mut ()).unwrap();
    assert!(t.report.train_accuracy.unwrap() >= o.report.train_accuracy.unwrap() - 0.02);
    // A cap on the vectors stops training with a stop reason, not an error.
    let capped = TrainParams::for_algo(Algo::Voted)
        .epochs(10)
        .validate()
        .unwrap();
    let mut capped = (*capped).clone();
    capped.max_vectors = 30;
    let capped = capped.validate().unwrap();
    let c = algo::train(&ds, &capped, &cpu, None, &mut ()).unwrap();
    assert_eq!(c.report.stop_reason, StopReason::MaxVectors);
    match c.model.body() {
        rosenblatt_train::model::Body::Voted(v) => assert_eq!(v.vectors(), 30),
        b => panic!("not voted: {b:?}"),
    }
}

#[test]
fn cli_weights_validation_scaling_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let run = |args: &[&str]| common::run(p, args);
    let mut text = String::from("a,b,w,label\n");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for i in 0..300 {
        let (a, b): (f32, f32) = (rng.random_range(-1.0..1.0), rng.random_range(0.0..5000.0));
        let y = if a + (b - 2500.0) / 5000.0 > 0.0 {
            1
        } else {
            -1
        };
        text.push_str(&format!("{a},{b},{},{y}\n", 1 + i % 3));
    }
    common::write(p, "d.csv", &text);
    // The hint about feature ranges, unless --scale is given.
    let o = run(&[
        "train",
        "d.csv",
        "--weight-col",
        "w",
        "--backend",
        "cpu",
        "--scale",
        "none",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("--scale standard"),
        "{}",
        common::stderr(&o)
    );
    assert!(
        common::stdout(&o).contains("d = 2"),
        "the weight column is not a feature"
    );
    let o = run(&[
        "train",
        "d.csv",
        "--weight-col",
        "w",
        "--scale",
        "standard",
        "--backend",
        "cpu",
        "--validation-fraction",
        "0.2",
        "-o",
        "m.json",
        "--json",
        "--plot",
        "t.png",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        !common::stderr(&o).contains("hint"),
        "{}",
        common::stderr(&o)
    );
    let r: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(r["n_validation"], 60);
    assert!(r["validation_accuracy"].as_f64().unwrap() > 0.9, "{r}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    assert_eq!(m["version"], 2);
    assert_eq!(m["scaling"]["kind"], "standard");
    let o = run(&["eval", "m.json", "d.csv", "--weight-col", "w", "--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let e: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert!(e["accuracy"].as_f64().unwrap() > 0.9, "{e}");
    // A validation file; and one of another width is refused.
    common::write(
        p,
        "v.csv",
        &text.lines().take(100).collect::<Vec<_>>().join("\n"),
    );
    let o = run(&[
        "train",
        "d.csv",
        "--weight-col",
        "w",
        "--validation",
        "v.csv",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let r: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(r["n_validation"], 99);
    common::write(p, "v1.csv", "a,label\n1,1\n-1,-1\n");
    let o = run(&[
        "train",
        "d.csv",
        "--validation",
        "v1.csv",
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("features"),
        "{}",
        common::stderr(&o)
    );
    // Bad values name the flag, the file, the line or the class.
    let bad = |args: &[&str], want: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains(want),
            "{want:?} not in {}",
            common::stderr(&o)
        );
    };
    bad(
        &["train", "d.csv", "--class-weight", "2=3"],
        "--class-weight",
    );
    bad(&["train", "d.csv", "--class-weight", "oops"], "NAME=WEIGHT");
    bad(
        &["train", "d.csv", "--validation-fraction", "1.5"],
        "--validation-fraction",
    );
    bad(
        &["train", "d.csv", "--min-improvement", "1"],
        "--min-improvement",
    );
    bad(&["train", "d.csv", "--scale", "log"], "log");
    common::write(p, "neg.csv", "a,w,label\n1,2,1\n-1,-3,-1\n");
    bad(
        &["train", "neg.csv", "--weight-col", "w"],
        "line 3, column 2",
    );
    bad(
        &["train", "d.csv", "--weight-col", "nope"],
        "no column named \"nope\"",
    );
    bad(
        &["train", "d.csv", "--sample-weights", "d.csv"],
        "not a NumPy .npy array",
    );
    bad(
        &[
            "train",
            "d.csv",
            "--scale",
            "standard",
            "--animate",
            "a.gif",
        ],
        "--animate",
    );
}

#[test]
fn online_rules_scale_rows_as_they_read_them_with_the_bits_of_a_scaled_copy() {
    // The online rules read X as given and scale each row they visit (no scaled copy of X):
    // the model, its report and its scores are those of training unscaled on a scaled copy
    // made by hand, to the bit, dense and sparse, for every online rule and scaling.
    use rosenblatt_backend::{CsrBuf, MatrixBuf};
    use rosenblatt_core::data::{Dataset, Labels};
    use rosenblatt_core::params::{Algo, Mode, Scale, TrainParams};
    let (n, d) = (300, 12);
    let x: Vec<f32> = (0..n * d)
        .map(|i| {
            let v = ((i * 7919 + 13) % 29) as f32 - 14.0;
            if i % 3 == 0 {
                0.0
            } else {
                v * (1 + i % d) as f32 * 0.37
            }
        })
        .collect();
    let names: Vec<String> = (0..n)
        .map(|r| {
            let s: f32 = (0..d).map(|j| x[r * d + j] * (j as f32 - 5.5)).sum();
            (if s > 0.0 {
                "b"
            } else if s < -40.0 {
                "a"
            } else {
                "c"
            })
            .to_string()
        })
        .collect();
    let two: Vec<String> = names
        .iter()
        .map(|c| if c == "b" { "b" } else { "a" }.to_string())
        .collect();
    let csr = |x: &[f32]| {
        let mut c = CsrBuf::new();
        for r in 0..n {
            for j in 0..d {
                if x[r * d + j] != 0.0 {
                    c.indices.push(j as u32);
                    c.values.push(x[r * d + j]);
                }
            }
            c.indptr.push(c.indices.len());
        }
        MatrixBuf::Csr(c)
    };
    for (algo, scale, sparse, labels) in [
        (Algo::Averaged, Scale::Maxabs, false, &names),
        (Algo::Online, Scale::Standard, false, &two),
        (Algo::Online, Scale::Minmax, false, &names),
        (Algo::PassiveAggressive, Scale::Maxabs, true, &names),
        (Algo::Winnow, Scale::Maxabs, false, &two),
        (Algo::Averaged, Scale::Standard, true, &two),
    ] {
        let case = format!("{algo:?} {scale:?} sparse {sparse}");
        let data = |x: &[f32]| {
            let m = if sparse {
                csr(x)
            } else {
                MatrixBuf::Dense(x.to_vec())
            };
            Dataset::from_matrix(
                m,
                n,
                d,
                Some(Labels::from_names(labels)),
                std::path::PathBuf::from("rows"),
            )
        };
        let p = |s| {
            TrainParams::for_algo(algo)
                .mode(Mode::Online)
                .epochs(4)
                .seed(9)
                .scale(s)
                .validate()
                .unwrap()
        };
        let cpu = CpuBackend::new();
        let on_read = algo::train(&data(&x), &p(scale), &cpu, None, &mut ()).unwrap();
        let sc = on_read.model.scaling().unwrap().clone();
        let mut scaled = MatrixBuf::Dense(x.clone());
        sc.apply_matrix(
            &mut scaled,
            n,
            d,
            std::path::Path::new("rows"),
            rosenblatt_core::data::scale::Overflow::Error,
        )
        .unwrap();
        let scaled: Vec<f32> = scaled.values().into_owned();
        let by_hand = algo::train(&data(&scaled), &p(Scale::None), &cpu, None, &mut ()).unwrap();
        // The model file without its report (which holds the times): every weight and the
        // scaling, written in the shortest form that reads back to the same f32.
        let bits = |m: &rosenblatt_train::model::Model| -> serde_json::Value {
            let mut buf = Vec::new();
            m.write(&mut buf).unwrap();
            let mut v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("training");
            o.remove("scaling");
            o.remove("params");
            v
        };
        assert_eq!(
            bits(&on_read.model),
            bits(&by_hand.model),
            "{case}: weights"
        );
        let (a, b) = (&on_read.report, &by_hand.report);
        assert_eq!(a.mistakes_per_epoch, b.mistakes_per_epoch, "{case}");
        assert_eq!(a.radius.to_bits(), b.radius.to_bits(), "{case}: R");
        assert_eq!(a.train_accuracy, b.train_accuracy, "{case}");
        assert_eq!(a.margin, b.margin, "{case}");
    }
}
