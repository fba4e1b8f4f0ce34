//! The perceptron family learns what it should: multiclass on a real data set (scikit-learn's
//! digits), pocket beats the last iterate on noisy data, averaged and voted generalise at
//! least as well as the last iterate, a margin threshold widens the margin, Winnow beats the
//! perceptron on committees with many experts, and every model kind survives save and load.

use crate::common;
use crate::common::train;

use std::path::Path;

use rosenblatt_app::experiment::committee_experiment;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::{self, Dataset};
use rosenblatt_core::params::{Algo, Mode, MulticlassStrategy, MulticlassUpdate, TrainParams};
use rosenblatt_train::model::{Body, Model, ModelKind};

fn accuracy(m: &Model, ds: &Dataset) -> f64 {
    m.evaluate(ds, &CpuBackend::new()).unwrap().accuracy
}

#[test]
fn multiclass_reaches_high_accuracy_on_digits() {
    let (tr, te) = common::digits();
    // Picked automatically for 10 classes, with the default (argmax) update.
    let t = train(&tr, TrainParams::for_algo(Algo::Online).epochs(200));
    assert_eq!(t.model.kind(), ModelKind::Multiclass);
    assert_eq!(t.model.classes().len(), 10);
    assert!(
        accuracy(&t.model, &te) >= 0.95,
        "online argmax held-out {}",
        accuracy(&t.model, &te)
    );
    for (algo, mode, update, strategy, min) in [
        (
            Algo::Multiclass,
            Mode::Batch,
            MulticlassUpdate::Argmax,
            MulticlassStrategy::Direct,
            0.93,
        ),
        (
            Algo::Multiclass,
            Mode::Batch,
            MulticlassUpdate::All,
            MulticlassStrategy::Direct,
            0.92,
        ),
        (
            Algo::Multiclass,
            Mode::Online,
            MulticlassUpdate::All,
            MulticlassStrategy::Direct,
            0.90,
        ),
        (
            Algo::Batch,
            Mode::Batch,
            MulticlassUpdate::Argmax,
            MulticlassStrategy::Ovr,
            0.92,
        ),
        (
            Algo::Averaged,
            Mode::Online,
            MulticlassUpdate::Argmax,
            MulticlassStrategy::Direct,
            0.95,
        ),
        (
            Algo::Pocket,
            Mode::Batch,
            MulticlassUpdate::Argmax,
            MulticlassStrategy::Direct,
            0.93,
        ),
    ] {
        let p = TrainParams::for_algo(algo)
            .mode(mode)
            .multiclass_update(update)
            .multiclass(strategy)
            .epochs(200);
        let t = train(&tr, p);
        let acc = accuracy(&t.model, &te);
        assert!(
            acc >= min,
            "{algo:?} {mode:?} {update:?} {strategy:?}: held-out {acc}"
        );
        let want = if strategy == MulticlassStrategy::Ovr {
            ModelKind::Ovr
        } else {
            ModelKind::Multiclass
        };
        assert_eq!(t.model.kind(), want);
    }
}

/// 2,000 training and 2,000 held-out points with 10% label noise.
fn noisy(seed: u64) -> (Dataset, Dataset) {
    let s = rosenblatt_core::data::synth::generate(&rosenblatt_core::data::synth::SynthSpec {
        n: 4000,
        d: 20,
        margin: 0.1,
        noise: 0.1,
        seed,
    })
    .unwrap();
    let half = |lo: usize| {
        let l = s.data.labels.as_ref().unwrap();
        let names: Vec<&str> = (lo..lo + 2000)
            .map(|i| l.classes[l.index[i] as usize].as_str())
            .collect();
        Dataset::new(
            s.data.x.values()[lo * 20..(lo + 2000) * 20].to_vec(),
            2000,
            20,
            Some(data::Labels::from_names(&names)),
            "noisy",
        )
    };
    (half(0), half(2000))
}

#[test]
fn pocket_beats_the_last_iterate_on_noisy_data() {
    for seed in 1..=5 {
        let (tr, _) = noisy(seed);
        let last = train(
            &tr,
            TrainParams::for_algo(Algo::Batch).epochs(20).seed(seed),
        );
        let pocket = train(
            &tr,
            TrainParams::for_algo(Algo::Pocket).epochs(20).seed(seed),
        );
        assert!(!last.report.converged);
        let fewest = *last.report.mistakes_per_epoch.iter().min().unwrap();
        let pocket_mistakes =
            ((1.0 - pocket.report.train_accuracy.unwrap()) * 2000.0).round() as u64;
        assert_eq!(
            pocket_mistakes, fewest,
            "seed {seed}: the pocket holds the best epoch's weights"
        );
        assert!(
            pocket.report.train_accuracy.unwrap() >= last.report.train_accuracy.unwrap(),
            "seed {seed}: pocket {} < last {}",
            pocket.report.train_accuracy.unwrap(),
            last.report.train_accuracy.unwrap()
        );
    }
}

#[test]
fn averaged_and_voted_generalise_at_least_as_well_as_the_last_iterate() {
    for seed in 1..=5 {
        let (tr, te) = noisy(seed);
        let p = |a| TrainParams::for_algo(a).epochs(20).seed(seed);
        let last = accuracy(&train(&tr, p(Algo::Online)).model, &te);
        let avg = train(&tr, p(Algo::Averaged));
        let voted = train(&tr, p(Algo::Voted));
        assert_eq!(voted.model.kind(), ModelKind::Voted);
        let Body::Voted(vv) = voted.model.body() else {
            panic!("not a voted model")
        };
        assert!(vv.vectors() > 1);
        let (a, v) = (accuracy(&avg.model, &te), accuracy(&voted.model, &te));
        assert!(
            a >= last && v >= last,
            "seed {seed}: last {last}, averaged {a}, voted {v}"
        );
        // The batch form of averaging also improves on its last iterate.
        let lb = accuracy(&train(&tr, p(Algo::Batch)).model, &te);
        let ab = accuracy(&train(&tr, p(Algo::Averaged).mode(Mode::Batch)).model, &te);
        assert!(
            ab >= lb,
            "seed {seed}: batch last {lb}, batch averaged {ab}"
        );
    }
}

#[test]
fn averaged_and_voted_by_hand() {
    // Rows (1, 0) -> +1 and (0, 1) -> -1, file order, eta 1, bias.
    // Step 1: w = 0, tie -> mistake, w = (1, 0, 1). Step 2: w.x = 1 -> mistake, w = (1, -1, 0).
    // Epoch 2: no mistakes; 4 steps in all. Averaged over the 4 steps' weights:
    // ((1,0,1) + (1,-1,0) + (1,-1,0) + (1,-1,0)) / 4 = (1, -0.75, 0.25).
    let ds = Dataset::new(
        vec![1.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    let t = train(&ds, TrainParams::for_algo(Algo::Averaged).shuffle(false));
    assert_eq!(t.model.hyperplane().unwrap().weights, vec![1.0, -0.75]);
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.25);
    // Voted: (1,0,1) survived 1 step, (1,-1,0) survived 3 (its own step and epoch 2).
    let t = train(&ds, TrainParams::for_algo(Algo::Voted).shuffle(false));
    let Body::Voted(v) = t.model.body() else {
        panic!("not a voted model")
    };
    // Kept as the first vector (0, 0, 0; it never voted: the first row was a mistake) and two
    // steps: row 0 with +1, row 1 with -1.
    let steps = v.steps.as_ref().expect("kept as steps");
    assert_eq!(v.counts, vec![0, 1, 3]);
    assert_eq!(steps.rows, vec![0, 1]);
    assert_eq!(steps.coef, vec![1.0, -1.0]);
    let every = v.every_vector(2, 1.0);
    assert_eq!(every.rows.weights, vec![vec![1.0, 0.0], vec![1.0, -1.0]]);
    assert_eq!(every.rows.bias, vec![1.0, 0.0]);
    assert_eq!(every.counts, vec![1, 3]);
}

#[test]
fn a_margin_threshold_widens_the_margin() {
    let s = common::separable(1000, 5, 0.1, 3);
    let m0 = train(&s.data, TrainParams::for_algo(Algo::Online).epochs(5000));
    let m1 = train(
        &s.data,
        TrainParams::for_algo(Algo::Online)
            .epochs(5000)
            .margin_threshold(2.0),
    );
    assert!(m0.report.converged && m1.report.converged);
    let (g0, g1) = (m0.report.margin.unwrap(), m1.report.margin.unwrap());
    assert!(g1 > g0, "tau = 2 margin {g1} <= tau = 0 margin {g0}");
}

#[test]
fn winnow_beats_the_perceptron_with_many_experts() {
    let rows = committee_experiment(&[100, 10_000], 5, 1500, 1.0, 7).unwrap();
    let big = &rows[1];
    assert_eq!(big.perceptron_bound, 10_001 * 5);
    assert!(
        big.winnow_mistakes < big.perceptron_mistakes,
        "p = 10000: Winnow {} vs perceptron {}",
        big.winnow_mistakes,
        big.perceptron_mistakes
    );
    // From p = 100 to p = 10000, Winnow's mistakes grow by far less.
    let more = |a: u64, b: u64| b as i64 - a as i64;
    assert!(
        more(rows[0].winnow_mistakes, big.winnow_mistakes) * 3
            < more(rows[0].perceptron_mistakes, big.perceptron_mistakes),
        "{rows:?}"
    );
}

#[test]
fn winnow_stays_finite_under_many_updates() {
    // Non-separable committee-like data and many epochs: log-space weights never overflow.
    let (ds, _) = rosenblatt_core::data::synth::committee(500, 50, 5, 2).unwrap();
    let mut noisy = ds.clone();
    let l = noisy.labels.as_mut().unwrap();
    for i in (0..500).step_by(7) {
        l.index[i] = 1 - l.index[i];
    }
    let t = train(&noisy, TrainParams::for_algo(Algo::Winnow).epochs(300));
    assert!(t
        .model
        .hyperplane()
        .unwrap()
        .weights
        .iter()
        .all(|w| w.is_finite() && *w >= 0.0 && *w <= 1.0));
    assert_eq!(
        t.model
            .hyperplane()
            .unwrap()
            .weights
            .iter()
            .copied()
            .fold(0f32, f32::max),
        1.0
    );
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.0);
    assert!(t.report.total_mistakes > 1000);
}

#[test]
fn every_model_kind_round_trips_through_its_file() {
    let (tr, te) = common::digits();
    let (ntr, nte) = noisy(9);
    let (committee, _) = rosenblatt_core::data::synth::committee(300, 40, 3, 1).unwrap();
    let cases: Vec<(&Dataset, &Dataset, TrainParams)> = vec![
        (&ntr, &nte, TrainParams::for_algo(Algo::Batch).epochs(5)),
        (&ntr, &nte, TrainParams::for_algo(Algo::Online).epochs(5)),
        (&ntr, &nte, TrainParams::for_algo(Algo::Pocket).epochs(5)),
        (&ntr, &nte, TrainParams::for_algo(Algo::Averaged).epochs(5)),
        (&ntr, &nte, TrainParams::for_algo(Algo::Voted).epochs(5)),
        (
            &committee,
            &committee,
            TrainParams::for_algo(Algo::Winnow).epochs(5),
        ),
        (&tr, &te, TrainParams::for_algo(Algo::Multiclass).epochs(5)),
        (
            &tr,
            &te,
            TrainParams::for_algo(Algo::Batch)
                .multiclass(MulticlassStrategy::Ovr)
                .epochs(5),
        ),
    ];
    let cpu = CpuBackend::new();
    for (train_set, test_set, p) in cases {
        let what = format!("{:?}", p.algo);
        let t = train(train_set, p);
        let mut buf = Vec::new();
        t.model.write(&mut buf).unwrap();
        let back =
            Model::from_json(Path::new("m.json"), std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, t.model, "{what}");
        assert_eq!(
            back.predict(&back.raw_scores(test_set, &cpu).unwrap()),
            t.model
                .predict(&t.model.raw_scores(test_set, &cpu).unwrap()),
            "{what}"
        );
        assert_eq!(
            back.evaluate(test_set, &cpu).unwrap(),
            t.model.evaluate(test_set, &cpu).unwrap()
        );
    }
}

#[test]
fn cli_family_options_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv"),
        p.join("digits.csv"),
    )
    .unwrap();
    let o = common::run(
        p,
        &[
            "train",
            "digits.csv",
            "--algo",
            "online",
            "-o",
            "m.json",
            "--json",
            "--epochs",
            "30",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert!(v["train_accuracy"].as_f64().unwrap() > 0.95);
    assert!(
        v["margin"].is_null(),
        "no single-hyperplane margin for multiclass"
    );
    let o = common::run(p, &["predict", "m.json", "digits.csv", "--margins"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let first = common::stdout(&o).lines().next().unwrap().to_string();
    assert_eq!(
        first.split('\t').count(),
        11,
        "label and 10 class scores: {first}"
    );
    let o = common::run(p, &["eval", "m.json", "digits.csv", "--json"]);
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(v["confusion"]["matrix"].as_array().unwrap().len(), 10);

    // The voted perceptron of 10 classes: each vector is 10 rows and votes for its argmax.
    let o = common::run(
        p,
        &[
            "train",
            "digits.csv",
            "--algo",
            "voted",
            "--epochs",
            "5",
            "-o",
            "v.json",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert!(v["train_accuracy"].as_f64().unwrap() > 0.95, "{v}");
    let o = common::run(p, &["predict", "v.json", "digits.csv", "--margins"]);
    let first = common::stdout(&o).lines().next().unwrap().to_string();
    assert_eq!(
        first.split('\t').count(),
        11,
        "label and 10 vote totals: {first}"
    );
    let o = common::run(p, &["train", "digits.csv", "--algo", "winnow"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("10 classes"),
        "{}",
        common::stderr(&o)
    );
    let o = common::run(
        p,
        &["train", "digits.csv", "--algo", "voted", "--mode", "batch"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("--mode"),
        "{}",
        common::stderr(&o)
    );
    let o = common::run(p, &["train", "digits.csv", "--margin-threshold", "-1"]);
    assert_eq!(o.status.code(), Some(2));

    let o = common::run(
        p,
        &[
            "gen",
            "--kind",
            "committee",
            "--n",
            "20",
            "--p",
            "9",
            "--k",
            "3",
            "-o",
            "c.csv",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = std::fs::read_to_string(p.join("c.csv")).unwrap();
    assert_eq!(text.lines().count(), 21);
    assert!(text
        .lines()
        .skip(1)
        .all(|l| l.split(',').take(9).all(|v| v == "1" || v == "-1")));
    let o = common::run(
        p,
        &[
            "gen",
            "--kind",
            "committee",
            "--n",
            "20",
            "--p",
            "9",
            "--k",
            "4",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = common::run(p, &["train", "c.csv", "--algo", "winnow", "--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));

    let o = common::run(
        p,
        &["experiment", "committee", "--p", "50,500", "--n", "500"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = common::stdout(&o);
    assert!(out.contains("Winnow") && out.contains("500"), "{out}");
    let o = common::run(
        p,
        &[
            "experiment",
            "committee",
            "--p",
            "50,500",
            "--n",
            "500",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
}

#[test]
fn batch_winnow_learns_committees() {
    let (ds, panel) = rosenblatt_core::data::synth::committee(2000, 60, 5, 4).unwrap();
    let t = train(
        &ds,
        TrainParams::for_algo(Algo::Winnow)
            .mode(Mode::Batch)
            .lr(0.005)
            .epochs(300),
    );
    assert!(
        t.report.train_accuracy.unwrap() > 0.97,
        "{}",
        t.report.train_accuracy.unwrap()
    );
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.0);
    let w = &t.model.hyperplane().unwrap().weights;
    assert!(w.iter().all(|v| *v > 0.0 && *v <= 1.0));
    // The panel's experts end up with the largest weights.
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(|a, b| w[*b].total_cmp(&w[*a]));
    let mut top: Vec<usize> = order[..panel.len()].to_vec();
    top.sort_unstable();
    assert_eq!(top, panel);
}

fn two_d(points: &[(f32, f32, &'static str)]) -> Dataset {
    let names: Vec<&str> = points.iter().map(|p| p.2).collect();
    Dataset::new(
        points.iter().flat_map(|p| [p.0, p.1]).collect(),
        points.len(),
        2,
        Some(data::Labels::from_names(&names)),
        "2d",
    )
}

/// XOR-like quadrants and two concentric rings, seeded.
fn xor_and_circles() -> (Dataset, Dataset) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut xor = Vec::new();
    while xor.len() < 200 {
        let (x, y): (f32, f32) = (rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0));
        if x.abs() > 0.1 && y.abs() > 0.1 {
            xor.push((x, y, if x * y > 0.0 { "1" } else { "-1" }));
        }
    }
    let circles: Vec<(f32, f32, &str)> = (0..300)
        .map(|i| {
            let a: f32 = rng.random_range(0.0..std::f32::consts::TAU);
            let r: f32 = if i % 2 == 1 {
                rng.random_range(0.0..0.4)
            } else {
                rng.random_range(0.7..1.0)
            };
            (
                r * a.cos(),
                r * a.sin(),
                if i % 2 == 1 { "-1" } else { "1" },
            )
        })
        .collect();
    (two_d(&xor), two_d(&circles))
}

#[test]
fn rbf_kernel_separates_what_no_linear_rule_can() {
    use rosenblatt_backend::Kernel;
    let (xor, circles) = xor_and_circles();
    for (name, ds) in [("xor", &xor), ("circles", &circles)] {
        let lin = train(ds, TrainParams::for_algo(Algo::Batch).epochs(300));
        assert!(
            lin.report.train_accuracy.unwrap() < 0.8,
            "{name}: a linear rule got {}",
            lin.report.train_accuracy.unwrap()
        );
        let mut p = TrainParams::for_algo(Algo::Kernel).epochs(300);
        p.kernel = Some(Kernel::Rbf { gamma: 2.0 });
        let k = train(ds, p);
        assert!(k.report.converged, "{name}");
        assert_eq!(k.report.train_accuracy.unwrap(), 1.0, "{name}");
        assert_eq!(k.model.kind(), ModelKind::Kernel);
        // Feature-space Novikoff: rbf gives K(x, x) = 1, so R^2 = 1 + bias^2 = 2.
        assert!((k.report.radius - 2f64.sqrt()).abs() < 1e-6);
        assert!(k.report.margin.unwrap() > 0.0);
        let Body::Kernel(dual) = k.model.body() else {
            panic!("not a kernel model")
        };
        let sv = &dual.support_vectors;
        // The batch dual starts from alpha = 0, where every f is 0, so epoch 1 makes every
        // point a support vector.
        assert!(
            !sv.is_empty() && sv.len() <= ds.n,
            "{name}: {} support vectors",
            sv.len()
        );
    }
}

#[test]
fn linear_kernel_dual_is_the_primal_batch_perceptron() {
    // Integer data keeps every sum exact, so the two forms agree epoch by epoch.
    let mut rng_rows = Vec::new();
    for i in 0..300i32 {
        let (a, b, c) = ((i * 7) % 5 - 2, (i * 11) % 7 - 3, (i * 13) % 3 - 1);
        rng_rows.push((
            a as f32,
            b as f32,
            c as f32,
            if 2 * a - b + c + 1 >= 0 { "pos" } else { "neg" },
        ));
    }
    let names: Vec<&str> = rng_rows.iter().map(|r| r.3).collect();
    let ds = Dataset::new(
        rng_rows.iter().flat_map(|r| [r.0, r.1, r.2]).collect(),
        300,
        3,
        Some(data::Labels::from_names(&names)),
        "int",
    );
    let primal = train(&ds, TrainParams::for_algo(Algo::Batch).epochs(50));
    let dual = train(&ds, TrainParams::for_algo(Algo::Kernel).epochs(50));
    assert_eq!(
        primal.report.mistakes_per_epoch,
        dual.report.mistakes_per_epoch
    );
    assert_eq!(
        primal.report.train_accuracy.unwrap(),
        dual.report.train_accuracy.unwrap()
    );
    let cpu = CpuBackend::new();
    assert_eq!(
        primal.model.decision_function(&ds, &cpu).unwrap(),
        dual.model.decision_function(&ds, &cpu).unwrap()
    );
}

#[test]
fn kernel_models_round_trip_and_bad_kernel_parameters_are_refused() {
    use rosenblatt_backend::Kernel;
    let (_, circles) = xor_and_circles();
    for kernel in [
        Kernel::Rbf { gamma: 2.0 },
        Kernel::Poly {
            degree: 2,
            gamma: 1.0,
            coef0: 1.0,
        },
        Kernel::Linear,
    ] {
        let mut p = TrainParams::for_algo(Algo::Kernel).epochs(30);
        p.kernel = Some(kernel);
        let t = train(&circles, p);
        let mut buf = Vec::new();
        t.model.write(&mut buf).unwrap();
        let back =
            Model::from_json(Path::new("k.json"), std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, t.model);
        let cpu = CpuBackend::new();
        assert_eq!(
            back.evaluate(&circles, &cpu).unwrap(),
            t.model.evaluate(&circles, &cpu).unwrap()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    common::write(p, "c.csv", "a,b,label\n0,1,1\n1,0,-1\n");
    for args in [
        ["--kernel", "poly", "--degree", "0"],
        ["--kernel", "rbf", "--gamma", "-1"],
    ] {
        let mut a = vec!["train", "c.csv", "--algo", "kernel"];
        a.extend(args);
        let o = common::run(p, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
    }
    let o = common::run(
        p,
        &[
            "train", "c.csv", "--algo", "kernel", "--kernel", "rbf", "-o", "k.json", "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = common::run(p, &["predict", "k.json", "c.csv", "--margins"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).lines().count(), 2);
}

#[test]
fn the_voted_perceptron_kept_as_steps_votes_as_every_vector_would() {
    // Integer data: scoring by steps (one dot product of rows a step, prefix sums) and by
    // every vector written out give the same votes, bit for bit; on both backends where there
    // is a GPU; with a held-out set, the model of the best held-out epoch.
    for (k, val) in [(2, None), (3, None), (4, Some(0.2))] {
        let ds = common::integer_classes(300, 6, k, 17 + k as u64);
        let mut tp = TrainParams::for_algo(Algo::Voted).epochs(15);
        tp.validation_fraction = val;
        let t = train(&ds, tp.clone());
        let Body::Voted(v) = t.model.body() else {
            panic!("not voted")
        };
        assert!(v.steps.is_some());
        let every = Model::new(
            Algo::Voted,
            t.model.classes().to_vec(),
            ds.d,
            Body::Voted(v.every_vector(ds.d, 1.0)),
            tp.clone(),
        )
        .unwrap();
        let cpu = CpuBackend::new();
        let want = every.raw_scores(&ds, &cpu).unwrap();
        assert_eq!(t.model.raw_scores(&ds, &cpu).unwrap(), want, "{k} classes");
        if let Some(g) = common::gpu() {
            assert_eq!(
                t.model.raw_scores(&ds, g).unwrap(),
                want,
                "{k} classes, GPU"
            );
        }
        // Each vector keeps d + 1 weights a head; a step keeps a row index and its coefficients.
        assert!(every.body() != t.model.body());
    }
}

#[test]
fn novikoffs_bound_holds_on_every_run_of_a_margin_sweep() {
    use rosenblatt_app::experiment::margin_experiment;
    let runs = margin_experiment(&[0.2, 0.05, 0.01], 5, 200, 3, 100_000, 7).unwrap();
    assert_eq!(runs.len(), 15);
    for r in &runs {
        assert!(r.converged, "{r:?}");
        assert!(r.mistakes as f64 <= r.bound, "{r:?}");
        assert!(
            r.gamma > 0.0 && r.gamma <= r.requested_margin as f64 + 1e-6,
            "{r:?}"
        );
    }
    // Smaller margins, more mistakes (the medians of 5 seeds).
    let median = |m: f32| {
        let mut v: Vec<u64> = (runs.iter())
            .filter(|r| r.requested_margin == m)
            .map(|r| r.mistakes)
            .collect();
        v.sort();
        v[2]
    };
    assert!(median(0.2) < median(0.01));
}

#[test]
fn averaged_and_voted_beat_the_last_vector_epoch_after_epoch_on_noisy_data() {
    use rosenblatt_app::experiment::averaging_experiment;
    let rows = averaging_experiment(600, 10, 0.1, 8, 3).unwrap();
    assert_eq!(rows.len(), 8);
    let mean = |f: fn(&rosenblatt_app::experiment::AveragingRow) -> f64| {
        rows.iter().map(f).sum::<f64>() / rows.len() as f64
    };
    let (last, avg, voted) = (mean(|r| r.last), mean(|r| r.averaged), mean(|r| r.voted));
    assert!(
        avg < last && voted < last,
        "last {last}, averaged {avg}, voted {voted}"
    );
    for r in &rows {
        for e in [r.last, r.pocket, r.averaged, r.voted] {
            assert!((0.0..=1.0).contains(&e), "{r:?}");
        }
    }
}

#[test]
fn the_complexity_experiment_times_every_size_and_fits_a_slope() {
    use rosenblatt_app::experiment::{complexity_experiment, fitted_slope};
    use rosenblatt_backend::Backend;
    let cpu = CpuBackend::new();
    let rows = complexity_experiment(&[(500, 4), (2000, 8)], 3, &cpu, 1).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r.seconds > 0.0 && r.device == cpu.device()));
    // The fit itself: y = 3 x^2 has slope 2; one x gives none.
    let pts: Vec<(f64, f64)> = [1.0, 10.0, 100.0]
        .iter()
        .map(|&x| (x, 3.0 * x * x))
        .collect();
    assert!((fitted_slope(&pts).unwrap() - 2.0).abs() < 1e-9);
    assert_eq!(fitted_slope(&[(5.0, 1.0), (5.0, 2.0)]), None);
}

#[test]
fn the_experiments_write_json_and_pictures_and_refuse_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = common::run(
        p,
        &[
            "experiment",
            "margin",
            "--margins",
            "0.2,0.05",
            "--seeds",
            "3",
            "--n",
            "100",
            "--json",
            "--plot",
            "m.svg",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(v["bound_held"], true);
    assert_eq!(v["runs"].as_array().unwrap().len(), 6);
    assert!(std::fs::read_to_string(p.join("m.svg"))
        .unwrap()
        .contains("<svg"));
    let o = common::run(
        p,
        &[
            "experiment",
            "averaging",
            "--n",
            "200",
            "--epochs",
            "3",
            "--plot",
            "a.png",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::stdout(&o).contains("voted"));
    assert!(p.join("a.png").exists());
    let o = common::run(
        p,
        &[
            "experiment",
            "complexity",
            "--n",
            "1000,2000",
            "--d",
            "4",
            "--reps",
            "2",
            "--backend",
            "cpu",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    assert!(v["fits"][0]["slope"].is_number());
    for (args, words) in [
        (&["experiment", "margin", "--margins", "0"][..], "--margins"),
        (&["experiment", "averaging", "--noise", "0.7"], "--noise"),
        (&["experiment", "margin", "--plot", "m.txt"], "--plot"),
    ] {
        let o = common::run(p, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains(words),
            "{args:?}: {}",
            common::stderr(&o)
        );
    }
}

#[test]
fn steps_of_rows_and_streams_by_hand() {
    // Rows (1, 0) -> +1 and (0, 1) -> -1, file order, eta 1, bias.
    let ds = Dataset::new(
        vec![1.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    let p = TrainParams::for_algo(Algo::Averaged).shuffle(false);
    // One step of both rows, both scored by w = 0 (both mistakes): w = (1,0,1) + (0,-1,-1)
    // = (1, -1, 0). Epoch 2's step makes no mistake. The average over the 2 steps' weights is
    // (1, -1, 0) (the sequential rule's is (1, -0.75, 0.25), by hand above).
    let t = train(&ds, p.clone().minibatch(2));
    assert_eq!(t.model.hyperplane().unwrap().weights, vec![1.0, -1.0]);
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.0);
    assert_eq!(t.report.mistakes_per_epoch, vec![2, 0]);
    // Two streams, a row each, from w = 0: (1, 0, 1) and (0, -1, -1), mixed to their mean
    // (0.5, -0.5, 0); epoch 2 makes no mistake. Stream 0's weights after its two steps:
    // (1, 0, 1), (0.5, -0.5, 0) (the mix counts in the next step): average (0.75, -0.25,
    // 0.5); stream 1's: (0, -1, -1), (0.5, -0.5, 0): (0.25, -0.75, -0.5). The model is their
    // mean, (0.5, -0.5, 0); the last vector is the same.
    for algo in [Algo::Averaged, Algo::Online] {
        let t = train(&ds, p.clone().algo(algo).streams(2));
        assert_eq!(
            t.model.hyperplane().unwrap().weights,
            vec![0.5, -0.5],
            "{algo:?}"
        );
        assert_eq!(t.model.hyperplane().unwrap().bias, 0.0, "{algo:?}");
        assert_eq!(t.report.mistakes_per_epoch, vec![2, 0], "{algo:?}");
    }
    // One row a step and one stream are the sequential rule.
    let seq = train(&ds, p.clone());
    let one = train(&ds, p.clone().minibatch(1).streams(1));
    assert_eq!(seq.model.hyperplane(), one.model.hyperplane());
    assert_eq!(seq.model.hyperplane().unwrap().weights, vec![1.0, -0.75]);
}

/// The averaged multiclass perceptron by steps of B rows in S streams as the GPU's kernels'
/// CPU twin runs it (`backend::steps`, kept equal to shaders/steps.wgsl by tests/it/gpu.rs).
fn steps_by_twin(
    x: &[f32],
    y: &[usize],
    d: usize,
    k: usize,
    b: usize,
    s: usize,
    epochs: usize,
) -> Vec<f32> {
    use rosenblatt_backend::steps::{CpuSteps, StepsBound, StepsSetup};
    let setup = StepsSetup {
        rule: rosenblatt_backend::HeadRule::MulticlassArgmax,
        tau: 0.0,
        eta: 1.0,
        step_rows: b,
        streams: s,
        average: true,
        w0: vec![0.0; k * (d + 1)],
        heads: k,
        update: Default::default(),
    };
    let yf: Vec<f32> = y.iter().map(|&c| c as f32).collect();
    let rows = rosenblatt_backend::steps::StepRows {
        x: x.into(),
        y: &yf,
        weights: None,
        d,
        bias: 1.0,
    };
    let mut twin = CpuSteps::new(rows, setup).unwrap();
    let order: Vec<u32> = (0..y.len() as u32).collect();
    for _ in 0..epochs {
        twin.epoch(&order).unwrap();
    }
    twin.model().unwrap()
}

#[test]
fn steps_of_rows_in_streams_equal_the_plain_form() {
    for (n, d, k, b, s) in [
        (60, 3, 3, 1, 1),
        (60, 3, 3, 4, 1),
        (61, 5, 4, 7, 1),
        (60, 3, 3, 1, 2),
        (90, 4, 3, 5, 4),
        (37, 2, 5, 64, 2),
    ] {
        let ds = common::integer_classes(n, d, k, (n * b + s) as u64);
        let labels = ds.labels.as_ref().unwrap();
        let y: Vec<usize> = labels.index.iter().map(|&c| c as usize).collect();
        let k = labels.classes.len();
        let x: Vec<f32> = (0..n).flat_map(|i| ds.row(i).to_vec()).collect();
        let epochs = 4;
        let t = train(
            &ds,
            TrainParams::for_algo(Algo::Averaged)
                .shuffle(false)
                .epochs(epochs)
                .patience(0)
                .minibatch(b)
                .streams(s),
        );
        let what = format!("n {n} d {d} k {k} B {b} S {s}");
        let want = steps_by_twin(&x, &y, d, k, b, s, t.report.epochs);
        let Body::Multiclass(rows) = t.model.body() else {
            panic!("{what}: not a multiclass model")
        };
        for h in 0..k {
            let got = rows.weights[h].iter().chain([&rows.bias[h]]);
            for (g, w) in got.zip(&want[h * (d + 1)..(h + 1) * (d + 1)]) {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{what}: head {h}: {:?} against {:?}",
                    rows.weights[h],
                    &want[h * (d + 1)..(h + 1) * (d + 1)]
                );
            }
        }
    }
}

#[test]
fn cli_steps_and_streams_train_and_bad_values_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv"),
        p.join("digits.csv"),
    )
    .unwrap();
    let o = common::run(
        p,
        &[
            "train",
            "digits.csv",
            "--minibatch",
            "4",
            "--streams",
            "3",
            "--json",
            "-o",
            "m.json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert!(v["train_accuracy"].as_f64().unwrap() > 0.95, "{v}");
    // The model file records them; a file without them is the sequential rule.
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    assert_eq!(
        (
            m["params"]["minibatch"].as_u64(),
            m["params"]["streams"].as_u64()
        ),
        (Some(4), Some(3)),
        "{m}"
    );
    // The text report says so.
    let o = common::run(
        p,
        &["train", "digits.csv", "--minibatch", "4", "--streams", "3"],
    );
    let text = common::stdout(&o);
    assert!(
        text.contains("steps:             4 rows a step in 3 streams, mixed by their mean"),
        "{text}"
    );
    // Passive-aggressive takes them too (on the CPU as the GPU kernels' twin).
    let o = common::run(
        p,
        &[
            "train",
            "digits.csv",
            "--algo",
            "pa",
            "--minibatch",
            "4",
            "--streams",
            "3",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["minibatch"].as_u64(), v["streams"].as_u64()),
        (Some(4), Some(3)),
        "{v}"
    );
    assert!(v["train_accuracy"].as_f64().unwrap() > 0.9, "{v}");
    for (args, flag, words) in [
        (&["--minibatch", "0"][..], "--minibatch", "at least 1"),
        (&["--streams", "0"][..], "--streams", "1..=4096"),
        (&["--streams", "5000"][..], "--streams", "1..=4096"),
        (
            &["--minibatch", "4", "--algo", "winnow"][..],
            "--minibatch",
            "passive-aggressive and AROW only",
        ),
        (
            &["--streams", "2", "--algo", "averaged", "--mode", "batch"][..],
            "--streams",
            "online perceptron",
        ),
        (
            &["--streams", "2", "--algo", "voted"][..],
            "--streams",
            "online perceptron",
        ),
    ] {
        let o = common::run(p, &[&["train", "digits.csv"][..], args].concat());
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(words), "{args:?}: {err}");
    }
}

#[test]
fn time_to_accuracy_trains_each_rule_for_each_budget_and_draws_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv"),
    )
    .unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let (mut train, mut test) = (format!("{header}\n"), format!("{header}\n"));
    for (i, l) in lines.enumerate() {
        let to = if i % 5 == 0 { &mut test } else { &mut train };
        to.push_str(l);
        to.push('\n');
    }
    common::write(p, "train.csv", &train);
    common::write(p, "test.csv", &test);
    let o = common::run(
        p,
        &[
            "experiment",
            "time-to-accuracy",
            "train.csv",
            "test.csv",
            "--epochs",
            "1,3",
            "--backend",
            "cpu",
            "--json",
            "--plot",
            "t.svg",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    let points = v["points"].as_array().unwrap();
    // Two rules (the CPU's default and, without a GPU, the GPU's rule on the CPU), two budgets.
    assert_eq!(points.len(), 4, "{v}");
    let (b, s) = rosenblatt_core::params::gpu_steps(v["n"].as_u64().unwrap() as usize);
    for (i, pt) in points.iter().enumerate() {
        assert_eq!(pt["epochs"], [1, 3][i % 2], "{pt}");
        let acc = pt["accuracy"].as_f64().unwrap();
        assert!(acc > 0.8 && acc <= 1.0, "{pt}");
        assert!(pt["seconds"].as_f64().unwrap() > 0.0, "{pt}");
        let steps = pt["steps"]
            .as_array()
            .map(|a| (a[0].as_u64(), a[1].as_u64()));
        let want = (i >= 2 && b * s > 1).then_some((Some(b as u64), Some(s as u64)));
        assert_eq!(steps, want, "{pt}");
    }
    let svg = std::fs::read_to_string(p.join("t.svg")).unwrap();
    assert!(
        svg.contains("train&apos;s default") || svg.contains("train's default"),
        "legend"
    );
    assert!(svg.contains("test accuracy") && svg.contains("seconds (upload included)"));
    // A budget of 0 epochs is refused by name.
    let o = common::run(
        p,
        &[
            "experiment",
            "time-to-accuracy",
            "train.csv",
            "test.csv",
            "--epochs",
            "0",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("--epochs"),
        "{}",
        common::stderr(&o)
    );
}
