//! AROW (Crammer, Kulesza and Dredze, NIPS 2009, diagonal covariance): a step checked by
//! hand; in steps and streams (the GPU's form, its CPU twin where the user names the steps)
//! one row a step is the sequential rule, and two streams mix their confidences as their
//! weights (checked by hand, on the CPU and the GPU); one pass over sparse noisy rows learns
//! more than the perceptrons' and passive-aggressive's one pass (what the rule is for); K
//! classes train one-vs-rest; the CLI trains one pass by default, on the GPU where asked, and
//! refuses what the rule does not take.

use crate::common::train;
use crate::common::{self, run, stderr, stdout};

use approx::assert_abs_diff_eq;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::Backend;
use rosenblatt_core::data::{self, Dataset};
use rosenblatt_core::params::{Algo, Arow, ArowCovariance, TrainParams};
use rosenblatt_train::algo;
use rosenblatt_train::model::ModelKind;
use serde_json::Value;

fn arow(r: f32) -> TrainParams {
    TrainParams {
        arow: Some(Arow {
            r,
            ..Arow::default()
        }),
        ..TrainParams::for_algo(Algo::Arow)
    }
}

#[test]
fn steps_by_hand() {
    // Rows (2, 0) -> +1 and (0, 1) -> -1 with the bias, r = 1, one epoch in file order; every
    // confidence starts at 1.
    // Row 1: margin 0, v = 4 + 1 = 5, beta = 1/6, alpha = 1/6: w = (2/6, 0), b = 1/6;
    // sigma_0 = 1 - 4/6 = 1/3, sigma_b = 1 - 1/6 = 5/6.
    // Row 2: margin -(1/6), loss 7/6, v = 1 + 5/6 = 11/6, beta = 6/17, alpha = 7/17:
    // w_1 = -7/17, b = 1/6 - (7/17)(5/6) = -3/17.
    let ds = Dataset::new(
        vec![2.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    let t = train(&ds, arow(1.0).shuffle(false).epochs(1));
    let h = t.model.hyperplane().unwrap();
    assert_abs_diff_eq!(h.weights[0], 1.0 / 3.0, epsilon = 1e-6);
    assert_abs_diff_eq!(h.weights[1], -7.0 / 17.0, epsilon = 1e-6);
    assert_abs_diff_eq!(h.bias, -3.0 / 17.0, epsilon = 1e-6);
    // Both rows had a margin below 1: two steps, the criterion their hinge losses' sum.
    assert_eq!(t.report.mistakes_per_epoch, vec![2]);
}

#[test]
fn a_row_of_weight_zero_changes_nothing_and_weight_one_is_the_plain_rule() {
    // The rows of `steps_by_hand`, the first weighted 0: only the second row steps, from
    // w = 0 and every confidence 1: margin 0, v = 1 + 1 = 2, beta = 1/3, alpha = 1/3:
    // w = (0, -1/3), b = -1/3. With weights 1 the model is the unweighted one.
    let rows = |weights: Vec<f32>| {
        let mut ds = Dataset::new(
            vec![2.0, 0.0, 0.0, 1.0],
            2,
            2,
            Some(data::Labels::from_names(&["b", "a"])),
            "tiny",
        );
        ds.weights = Some(weights);
        ds
    };
    let p = || arow(1.0).shuffle(false).epochs(1);
    let h = train(&rows(vec![0.0, 1.0]), p())
        .model
        .hyperplane()
        .unwrap()
        .clone();
    assert_abs_diff_eq!(h.weights[0], 0.0, epsilon = 1e-7);
    assert_abs_diff_eq!(h.weights[1], -1.0 / 3.0, epsilon = 1e-6);
    assert_abs_diff_eq!(h.bias, -1.0 / 3.0, epsilon = 1e-6);
    let ones = train(&rows(vec![1.0, 1.0]), p()).model.augmented();
    let mut unweighted = rows(vec![]);
    unweighted.weights = None;
    assert_eq!(ones, train(&unweighted, p()).model.augmented());
}

#[test]
fn two_streams_mix_their_confidences_as_their_weights() {
    // The rows of `steps_by_hand` (r = 1), one a stream, two streams, two epochs.
    // Epoch 1: stream 0 as in `steps_by_hand`'s first row: w = (1/3, 0), b = 1/6,
    // sigma = (1/3, 1, 5/6); stream 1, row (0, 1) -> -1 from 0: v = 2, beta = alpha = 1/3:
    // w = (0, -1/3), b = -1/3, sigma = (1, 2/3, 2/3). Mixed: w = (1/6, -1/6), b = -1/12,
    // sigma = (2/3, 5/6, 3/4).
    // Epoch 2, stream 0: score 1/4, loss 3/4, v = 8/3 + 3/4 = 41/12, beta = 12/53,
    // alpha = 9/53: w_0 += (9/53)(2/3)(2) = 12/53, b += (9/53)(3/4) = 27/212. Stream 1:
    // score -1/4, loss 3/4, v = 5/6 + 3/4 = 19/12, beta = 12/31, alpha = 9/31:
    // w_1 -= (9/31)(5/6) = 15/62, b -= (9/31)(3/4) = 27/124. Mixed after each epoch.
    let ds = Dataset::new(
        vec![2.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    let want = [
        [1.0 / 6.0, -1.0 / 6.0, -1.0 / 12.0],
        [
            1.0 / 6.0 + 6.0 / 53.0,
            -1.0 / 6.0 - 15.0 / 124.0,
            -1.0 / 12.0 + (27.0 / 212.0 - 27.0 / 124.0) / 2.0,
        ],
    ];
    let p = |epochs| {
        arow(1.0)
            .shuffle(false)
            .epochs(epochs)
            .patience(0)
            .minibatch(1)
            .streams(2)
            .validate()
            .unwrap()
    };
    let cpu = CpuBackend::new();
    let mut backends: Vec<(&str, &dyn Backend)> = vec![("cpu", &cpu)];
    if let Some(g) = common::gpu() {
        backends.push(("gpu", g));
    }
    for (name, b) in backends {
        for (e, want) in want.iter().enumerate() {
            let t = algo::train(&ds, &p(e + 1), b, None, &mut ()).unwrap();
            assert_eq!(t.report.backend, name, "{name}");
            assert_eq!(t.report.mistakes_per_epoch.len(), e + 1, "{name}");
            let h = t.model.hyperplane().unwrap();
            let got = [h.weights[0], h.weights[1], h.bias];
            for (g, w) in got.iter().zip(want) {
                assert_abs_diff_eq!(*g, *w as f32, epsilon = 1e-6);
            }
        }
    }
}

/// AROW in steps of one row and one stream (the GPU's form, here its CPU twin) is the
/// sequential rule bit for bit on sparse rows of fractional values, binary and one-vs-rest,
/// with row weights.
#[test]
fn arow_in_one_step_of_one_row_is_the_sequential_rule() {
    use rosenblatt_backend::steps::{CpuSteps, StepRows, StepUpdate, StepsBound, StepsSetup};
    use rosenblatt_backend::{CsrBuf, HeadRule, RowWeight};
    use rosenblatt_train::model::Body;
    for k in [2, 3] {
        let (n, d) = (120, 6);
        let dense = common::integer_classes(n, d, k, 5);
        let mut labels = dense.labels.clone().unwrap();
        let x: Vec<f32> = (0..n)
            .flat_map(|i| dense.row(i).iter().map(|v| v * 0.37).collect::<Vec<_>>())
            .collect();
        let weights: Vec<f32> = (0..n).map(|i| [1.0, 0.5, 2.0][i % 3]).collect();
        let csr = CsrBuf::from_dense(&x, d);
        let mut ds = Dataset::from_matrix(csr.clone().into(), n, d, Some(labels.clone()), "s");
        ds.weights = Some(weights.clone());
        let t = train(&ds, arow(2.0).shuffle(false).epochs(3).patience(0));
        // Binary labels are ±1 for the twin (class 1 is +1), classes their index.
        let (rule, heads) = match k {
            2 => (HeadRule::Binary, 1),
            _ => (HeadRule::OneVsRest, k),
        };
        let y: Vec<f32> = labels
            .index
            .iter()
            .map(|&c| match k {
                2 => [-1.0, 1.0][c as usize],
                _ => c as f32,
            })
            .collect();
        labels.classes.clear();
        let setup = StepsSetup {
            rule,
            tau: 0.0,
            eta: 1.0,
            step_rows: 1,
            streams: 1,
            average: false,
            w0: vec![0.0; heads * (d + 1)],
            heads,
            update: StepUpdate::Arow { r: 2.0 },
        };
        let wts: Vec<RowWeight> = weights.iter().map(|&w| RowWeight::uniform(w)).collect();
        let rows = StepRows {
            x: (&csr).into(),
            y: &y,
            weights: Some(&wts),
            d,
            bias: 1.0,
        };
        let mut twin = CpuSteps::new(rows, setup).unwrap();
        let order: Vec<u32> = (0..n as u32).collect();
        let mut mistakes = Vec::new();
        for _ in 0..t.report.epochs {
            mistakes.push(twin.epoch(&order).unwrap().mistakes);
        }
        assert_eq!(mistakes, t.report.mistakes_per_epoch, "K = {k}");
        let want = twin.model().unwrap();
        let got: Vec<f32> = match t.model.body() {
            Body::Multiclass(rows) => (0..heads)
                .flat_map(|h| rows.weights[h].iter().chain([&rows.bias[h]]).copied())
                .collect(),
            _ => t.model.augmented(),
        };
        assert_eq!(got, want, "K = {k}");
    }
}

fn full(r: f32) -> TrainParams {
    TrainParams {
        arow: Some(Arow {
            r,
            covariance: ArowCovariance::Full,
        }),
        ..TrainParams::for_algo(Algo::Arow)
    }
}

#[test]
fn the_full_covariance_steps_by_hand_and_gives_the_papers_bound() {
    // The rows of `steps_by_hand`, r = 1, with the whole covariance. Row 1 as there:
    // w = (1/3, 0), b = 1/6, and Sigma = I - (1/6) (2, 0, 1)(2, 0, 1)^T, which couples x_0
    // and the bias. Row 2, x = (0, 1, 1): Sigma x = (-1/3, 1, 5/6), v = 11/6, margin -1/6,
    // loss 7/6, beta = 6/17, alpha = 7/17: w -= (7/17)(-1/3, 1, 5/6), so
    // w = (8/17, -7/17), b = -3/17 (the diagonal rule leaves w_0 at 1/3).
    // The bound: both steps were mistakes (margins 0 and -1/6); X_A = x1 x1^T + x2 x2^T,
    // det(I + X_A) = 17; the margins of the trained w are 13/17 and 10/17, |w|^2 = 122/289,
    // w^T X_A w = (169 + 100)/289, so M <= sqrt(391/289) sqrt(ln 17) / (10/17) - 0.
    let ds = Dataset::new(
        vec![2.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    let t = train(&ds, full(1.0).shuffle(false).epochs(1));
    let h = t.model.hyperplane().unwrap();
    assert_abs_diff_eq!(h.weights[0], 8.0 / 17.0, epsilon = 1e-6);
    assert_abs_diff_eq!(h.weights[1], -7.0 / 17.0, epsilon = 1e-6);
    assert_abs_diff_eq!(h.bias, -3.0 / 17.0, epsilon = 1e-6);
    let b = t.report.arow_bound.clone().expect("a bound");
    assert_eq!((b.mistakes, b.corrections), (2, 0));
    assert_abs_diff_eq!(b.log_det, 17f64.ln(), epsilon = 1e-6); // beta is f32
    let want = 391f64.sqrt() * 17f64.ln().sqrt() / 10.0;
    assert_abs_diff_eq!(b.bound.unwrap(), want, epsilon = 1e-5);
    // The diagonal rule reports no bound.
    assert!(train(&ds, arow(1.0).shuffle(false).epochs(1))
        .report
        .arow_bound
        .is_none());
}

#[test]
fn the_full_covariance_bound_holds_and_one_feature_a_row_is_the_diagonal_rule() {
    // Separable rows, several epochs: every step is a mistake or a correction, and the
    // mistakes are within the bound (at u = w / min y w.x, where w separates the rows).
    for (seed, r) in [(3, 1.0), (4, 10.0)] {
        let s = common::separable(400, 8, 0.1, seed);
        let t = train(&s.data, full(r).epochs(5));
        let b = t.report.arow_bound.clone().expect("counts");
        assert_eq!(b.mistakes + b.corrections, t.report.total_mistakes);
        assert!(b.mistakes > 0 && b.log_det > 0.0, "{b:?}");
        if t.report.margin.is_some() {
            let bound = b.bound.expect("a separating model has a bound");
            assert!((b.mistakes as f64) <= bound, "{b:?}");
        }
    }
    // Noisy rows: the trained weights do not separate them, so counts without a bound.
    let mut noisy = common::separable(300, 5, 0.1, 6).data;
    let labels = noisy.labels.as_mut().unwrap();
    for i in (0..300).step_by(10) {
        labels.index[i] = 1 - labels.index[i];
    }
    let t = train(&noisy, full(1.0).epochs(3));
    let b = t.report.arow_bound.clone().unwrap();
    assert!(b.bound.is_none() && b.mistakes > 0, "{b:?}");
    // Rows with one non-zero and no bias keep the covariance diagonal: the diagonal rule's
    // model (to rounding: the full matrices are f64).
    let n = 60;
    let x: Vec<f32> = (0..n * 4)
        .map(|k| match k % 4 == (k / 4) % 4 {
            true => 1.0 + (k % 7) as f32 * 0.25,
            false => 0.0,
        })
        .collect();
    let names: Vec<&str> = (0..n).map(|i| ["a", "b"][(i / 4 + i) % 2]).collect();
    let ds = Dataset::new(x, n, 4, Some(data::Labels::from_names(&names)), "one-hot");
    let p = |q: TrainParams| q.shuffle(false).epochs(3).fit_bias(false);
    let (f, g) = (train(&ds, p(full(2.0))), train(&ds, p(arow(2.0))));
    assert_eq!(f.report.mistakes_per_epoch, g.report.mistakes_per_epoch);
    for (a, b) in f.model.augmented().iter().zip(g.model.augmented()) {
        assert_abs_diff_eq!(*a, b, epsilon = 1e-5);
    }
    // More columns than the full matrices take: refused, naming the parameter.
    let wide = Dataset::new(
        vec![1.0; 2 * 2100],
        2,
        2100,
        Some(data::Labels::from_names(&["a", "b"])),
        "wide",
    );
    let e = rosenblatt_train::algo::train(
        &wide,
        &full(1.0).validate().unwrap(),
        &CpuBackend::new(),
        None,
        &mut (),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("2101 x 2101"), "{e}");
    // K classes: one full covariance a head (one-vs-rest), no bound.
    let (tr, te) = common::digits();
    let t = train(
        &tr,
        full(10.0)
            .epochs(1)
            .scale(rosenblatt_core::params::Scale::Maxabs),
    );
    assert!(t.report.arow_bound.is_none());
    let acc = t.model.evaluate(&te, &CpuBackend::new()).unwrap().accuracy;
    assert!(acc > 0.9, "held-out accuracy {acc}");
}

#[test]
fn one_pass_over_sparse_noisy_rows_learns_more_than_the_other_rules() {
    // 25,000 training rows of 20,000 features, 20 non-zeros a row, 5% of labels flipped;
    // 5,000 held out. One pass each: AROW's per-feature steps against one step size for all.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = run(
        p,
        &[
            "gen",
            "--n",
            "30000",
            "--d",
            "20000",
            "--density",
            "0.001",
            "--noise",
            "0.05",
            "--seed",
            "2",
            "--format",
            "libsvm",
            "-o",
            "all.svm",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(p.join("all.svm")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    common::write(p, "train.svm", &(lines[..25_000].join("\n") + "\n"));
    common::write(p, "test.svm", &(lines[25_000..].join("\n") + "\n"));
    let accuracy = |algo: &str| -> f64 {
        let o = run(
            p,
            &[
                "train",
                "train.svm",
                "--algo",
                algo,
                "--epochs",
                "1",
                "--backend",
                "cpu",
                "--features",
                "20000",
                "-o",
                "m.json",
            ],
        );
        assert!(o.status.success(), "{algo}: {}", stderr(&o));
        let o = run(p, &["eval", "m.json", "test.svm", "--json"]);
        assert!(o.status.success(), "{algo}: {}", stderr(&o));
        let ev: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        ev["accuracy"].as_f64().unwrap()
    };
    let arow = accuracy("arow");
    for (other, by) in [("online", 0.03), ("averaged", 0.03), ("pa", 0.01)] {
        let acc = accuracy(other);
        assert!(
            arow > acc + by,
            "one pass: AROW {arow:.4} against {other} {acc:.4}"
        );
    }
}

#[test]
fn classes_train_one_vs_rest_and_generalise() {
    let (tr, te) = common::digits();
    let t = train(&tr, arow(10.0).epochs(3));
    assert_eq!(t.model.kind(), ModelKind::Ovr);
    let acc = t.model.evaluate(&te, &CpuBackend::new()).unwrap().accuracy;
    assert!(acc > 0.9, "held-out accuracy {acc}");
}

#[test]
fn the_cli_trains_one_pass_by_default_and_refuses_what_arow_does_not_take() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let s = common::separable(300, 4, 0.1, 5);
    let mut csv = String::new();
    for i in 0..s.data.n {
        let row: Vec<String> = s.data.row(i).iter().map(|v| v.to_string()).collect();
        let y = s.data.labels.as_ref().unwrap().index[i];
        csv += &format!("{},{y}\n", row.join(","));
    }
    common::write(p, "d.csv", &csv);
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "arow",
            "--backend",
            "cpu",
            "--json",
            "-o",
            "m.json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(r["epochs"], 1, "{r}");
    assert_eq!(r["algo"], "arow", "{r}");
    let m = std::fs::read_to_string(p.join("m.json")).unwrap();
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["params"]["arow"]["r"], 30.0, "{m}");
    assert_eq!(m["params"]["epochs"], 1, "{m}");
    // The full covariance: the report's counts and bound, in the JSON too.
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "arow",
            "--arow-covariance",
            "full",
            "--epochs",
            "3",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let b = &r["arow_bound"];
    assert!(b["mistakes"].as_u64().unwrap() > 0, "{r}");
    assert!(b["log_det"].as_f64().unwrap() > 0.0, "{r}");
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "arow",
            "--arow-covariance",
            "full",
        ],
    );
    assert!(stdout(&o).contains("AROW bound:"), "{}", stdout(&o));
    // On a GPU: AROW's own steps (8 rows, one stream), no note that it runs on the CPU, and
    // the model of the CPU's twin in the same steps, to rounding.
    if common::gpu().is_some() {
        let gpu = run(
            p,
            &[
                "train",
                "d.csv",
                "--algo",
                "arow",
                "--backend",
                "gpu",
                "--json",
                "-o",
                "g.json",
            ],
        );
        assert!(gpu.status.success(), "{}", stderr(&gpu));
        assert!(!stderr(&gpu).contains("runs on the"), "{}", stderr(&gpu));
        let r: Value = serde_json::from_str(stdout(&gpu).trim()).unwrap();
        assert_eq!(r["backend"], "gpu", "{r}");
        assert_eq!(
            (r["minibatch"].as_u64(), r["streams"].as_u64()),
            (Some(8), Some(1)),
            "{r}"
        );
        let twin = run(
            p,
            &[
                "train",
                "d.csv",
                "--algo",
                "arow",
                "--backend",
                "cpu",
                "--minibatch",
                "8",
                "--json",
                "-o",
                "t.json",
            ],
        );
        assert!(twin.status.success(), "{}", stderr(&twin));
        let weights = |f: &str| -> Vec<f64> {
            let m: Value =
                serde_json::from_str(&std::fs::read_to_string(p.join(f)).unwrap()).unwrap();
            let mut w: Vec<f64> = m["weights"]
                .as_array()
                .unwrap_or_else(|| panic!("{m}"))
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            w.push(m["bias"].as_f64().unwrap());
            w
        };
        let (g, t) = (weights("g.json"), weights("t.json"));
        assert!(t.iter().any(|&v| v != 0.0));
        for (a, b) in g.iter().zip(&t) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{g:?} {t:?}");
        }
        // The full covariance has no GPU form: the CPU runs it, and says so.
        let full = run(
            p,
            &[
                "train",
                "d.csv",
                "--algo",
                "arow",
                "--arow-covariance",
                "full",
                "--backend",
                "gpu",
                "--json",
            ],
        );
        assert!(full.status.success(), "{}", stderr(&full));
        assert!(
            stderr(&full).contains("runs on the CPU"),
            "{}",
            stderr(&full)
        );
        let r: Value = serde_json::from_str(stdout(&full).trim()).unwrap();
        assert_eq!(r["backend"], "cpu", "{r}");
    }
    for (args, flag) in [
        (&["--arow-r", "0"][..], "--arow-r"),
        (&["--arow-r", "nan"][..], "--arow-r"),
        (&["--mode", "batch"][..], "--mode"),
        (&["--margin-threshold", "1"][..], "--margin-threshold"),
        (
            &["--arow-covariance", "full", "--streams", "2"][..],
            "--arow-covariance",
        ),
        (&["--arow-covariance", "diag"][..], "--arow-covariance"),
    ] {
        let mut a = vec!["train", "d.csv", "--algo", "arow", "--backend", "cpu"];
        a.extend_from_slice(args);
        let o = run(p, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
    }
}
