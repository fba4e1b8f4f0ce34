//! AROW (Crammer, Kulesza and Dredze, NIPS 2009, diagonal covariance): a step checked by
//! hand; one pass over sparse noisy rows learns more than the perceptrons' and
//! passive-aggressive's one pass (what the rule is for); K classes train one-vs-rest; the CLI
//! trains one pass by default and refuses what the rule does not take.

use crate::common::train;
use crate::common::{self, run, stderr, stdout};

use approx::assert_abs_diff_eq;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::{self, Dataset};
use rosenblatt_core::params::{Algo, Arow, TrainParams};
use rosenblatt_train::model::ModelKind;
use serde_json::Value;

fn arow(r: f32) -> TrainParams {
    TrainParams {
        arow: Some(Arow { r }),
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
    for (args, flag) in [
        (&["--arow-r", "0"][..], "--arow-r"),
        (&["--arow-r", "nan"][..], "--arow-r"),
        (&["--mode", "batch"][..], "--mode"),
        (&["--margin-threshold", "1"][..], "--margin-threshold"),
    ] {
        let mut a = vec!["train", "d.csv", "--algo", "arow", "--backend", "cpu"];
        a.extend_from_slice(args);
        let o = run(p, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
    }
}
