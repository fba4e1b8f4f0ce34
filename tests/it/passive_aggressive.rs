//! The passive-aggressive rules (PA, PA-I, PA-II; Crammer et al., JMLR 2006): steps checked
//! by hand, binary and multiclass; they learn separable data and digits; the CLI trains,
//! saves and predicts with them and refuses what they do not take.

use crate::common;
use crate::common::train;

use std::path::Path;

use approx::assert_abs_diff_eq;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::{self, Dataset};
use rosenblatt_core::params::{
    Algo, MulticlassStrategy, PaVariant, PassiveAggressive, TrainParams,
};
use rosenblatt_train::model::Body;

fn pa(variant: PaVariant, c: f32) -> TrainParams {
    TrainParams {
        passive_aggressive: Some(PassiveAggressive { variant, c }),
        ..TrainParams::for_algo(Algo::PassiveAggressive)
    }
}

#[test]
fn binary_steps_by_hand() {
    // Rows (2, 0) -> +1 and (0, 1) -> -1 with the bias, one epoch in file order.
    // PA: row 1 has loss 1 and ||[x, 1]||^2 = 5: t = 1/5, w = (0.4, 0, 0.2) (margin 1 now).
    // Row 2: y w.x = -0.2, loss 1.2, ||[x, 1]||^2 = 2: t = 0.6, w = (0.4, -0.6, -0.4).
    // PA-I, C = 0.1: both steps capped at 0.1: w = (0.2, 0, 0.1), then (0.2, -0.1, 0).
    // PA-II, C = 1: t = 1 / (5 + 1/2) = 2/11, w = (4/11, 0, 2/11); loss 13/11,
    // t = (13/11) / (2 + 1/2) = 26/55: w = (4/11, -26/55, 2/11 - 26/55).
    let ds = Dataset::new(
        vec![2.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(data::Labels::from_names(&["b", "a"])),
        "tiny",
    );
    for (variant, c, want) in [
        (PaVariant::Pa, 1.0, [0.4, -0.6, -0.4]),
        (PaVariant::Pa1, 0.1, [0.2, -0.1, 0.0]),
        (
            PaVariant::Pa2,
            1.0,
            [4.0 / 11.0, -26.0 / 55.0, 2.0 / 11.0 - 26.0 / 55.0],
        ),
    ] {
        let t = train(&ds, pa(variant, c).shuffle(false).epochs(1));
        let h = t.model.hyperplane().unwrap();
        assert_abs_diff_eq!(h.weights[0], want[0], epsilon = 1e-6);
        assert_abs_diff_eq!(h.weights[1], want[1], epsilon = 1e-6);
        assert_abs_diff_eq!(h.bias, want[2], epsilon = 1e-6);
        // Both rows had a positive hinge loss; the criterion is its sum.
        assert_eq!(t.report.mistakes_per_epoch, vec![2]);
    }
}

#[test]
fn the_multiclass_step_moves_the_true_class_and_the_highest_wrong_one() {
    // e1 -> a, e2 -> b, e3 -> c, no bias, one epoch in file order, PA. Each row: all scores
    // 0, loss 1, the highest wrong class the first in class order; a unit step moves the
    // margin by 2 ||x||^2 = 2, so t = 1/2.
    // Row a: W_a += e1/2, W_b -= e1/2. Row b: W_b += e2/2, W_a -= e2/2.
    // Row c: W_c += e3/2, W_a -= e3/2.
    let ds = Dataset::new(
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        3,
        3,
        Some(data::Labels::from_names(&["a", "b", "c"])),
        "three",
    );
    let t = train(
        &ds,
        pa(PaVariant::Pa, 1.0)
            .shuffle(false)
            .epochs(1)
            .fit_bias(false),
    );
    let Body::Multiclass(rows) = t.model.body() else {
        panic!("not a multiclass model: {:?}", t.model.kind())
    };
    assert_eq!(
        rows.weights,
        vec![
            vec![0.5, -0.5, -0.5],
            vec![-0.5, 0.5, 0.0],
            vec![0.0, 0.0, 0.5]
        ]
    );
}

#[test]
fn every_variant_separates_separable_data() {
    let s = common::separable(1000, 5, 0.1, 3);
    for variant in [PaVariant::Pa, PaVariant::Pa1, PaVariant::Pa2] {
        let t = train(&s.data, pa(variant, 1.0).epochs(200));
        assert_eq!(t.report.train_accuracy.unwrap(), 1.0, "{variant:?}");
    }
}

#[test]
fn digits_multiclass_and_one_vs_rest_generalise() {
    let (tr, te) = common::digits();
    for strategy in [MulticlassStrategy::Direct, MulticlassStrategy::Ovr] {
        let p = TrainParams {
            multiclass: strategy,
            ..pa(PaVariant::Pa1, 1.0).epochs(50)
        };
        let t = train(&tr, p);
        let acc = t.model.evaluate(&te, &CpuBackend::new()).unwrap().accuracy;
        assert!(acc > 0.9, "{strategy:?}: held-out accuracy {acc}");
    }
}

#[test]
fn cli_trains_saves_predicts_and_refuses_what_pa_does_not_take() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| common::run(dir.path(), args);
    let o = run(&[
        "gen", "--n", "300", "--d", "3", "--seed", "4", "-o", "d.csv",
    ]);
    assert!(o.status.success());
    let o = run(&[
        "train",
        "d.csv",
        "--algo",
        "pa",
        "--pa-variant",
        "pa2",
        "--aggressiveness",
        "0.5",
        "--backend",
        "cpu",
        "-o",
        "m.json",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::stdout(&o).starts_with("passive-aggressive on cpu"));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(m["algorithm"], "pa");
    assert_eq!(
        m["params"]["passive_aggressive"],
        serde_json::json!({"variant": "pa2", "c": 0.5})
    );
    let o = run(&["predict", "m.json", "d.csv"]);
    assert!(o.status.success());
    assert_eq!(common::stdout(&o).lines().count(), 300);
    for (args, flag) in [
        (&["--aggressiveness", "0"][..], "--aggressiveness"),
        (&["--aggressiveness", "nan"][..], "--aggressiveness"),
        (&["--margin-threshold", "0.5"][..], "--margin-threshold"),
        (&["--pa-variant", "pa3"][..], "--pa-variant"),
    ] {
        let mut a = vec!["train", "d.csv", "--algo", "pa"];
        a.extend_from_slice(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(common::stderr(&o).contains(flag), "{}", common::stderr(&o));
    }
    let digits = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv");
    let o = run(&[
        "train",
        digits.to_str().unwrap(),
        "--algo",
        "pa",
        "--multiclass-update",
        "all",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("--multiclass-update"));
}

/// The passive-aggressive rule's steps of one row in one stream, as the GPU's kernels' CPU
/// twin runs them (`backend::steps` with `pa`), are the sequential rule (algo::pa) bit for
/// bit: on sparse rows both sum a score over the non-zeros in column order, and both take
/// their step from `backend::pa_rule`.
#[test]
fn passive_aggressive_in_one_step_of_one_row_is_the_sequential_rule() {
    use rosenblatt_backend::steps::{CpuSteps, StepRows, StepUpdate, StepsBound, StepsSetup};
    use rosenblatt_backend::{CsrBuf, HeadRule};
    for (variant, c) in [
        (PaVariant::Pa, 1.0),
        (PaVariant::Pa1, 0.5),
        (PaVariant::Pa2, 2.0),
    ] {
        let (n, d) = (120, 6);
        let dense = common::integer_classes(n, d, 3, 5);
        let labels = dense.labels.clone().unwrap();
        let x: Vec<f32> = (0..n)
            .flat_map(|i| dense.row(i).iter().map(|v| v * 0.37).collect::<Vec<_>>())
            .collect();
        let csr = CsrBuf::from_dense(&x, d);
        let ds = Dataset::from_matrix(csr.clone().into(), n, d, Some(labels.clone()), "s");
        let t = train(&ds, pa(variant, c).shuffle(false).epochs(4).patience(0));
        let k = labels.classes.len();
        let y: Vec<f32> = labels.index.iter().map(|&c| c as f32).collect();
        let setup = StepsSetup {
            rule: HeadRule::MulticlassArgmax,
            tau: 0.0,
            eta: 1.0,
            step_rows: 1,
            streams: 1,
            average: false,
            w0: vec![0.0; k * (d + 1)],
            heads: k,
            update: StepUpdate::PassiveAggressive(PassiveAggressive { variant, c }.size()),
        };
        let rows = StepRows {
            x: (&csr).into(),
            y: &y,
            weights: None,
            d,
            bias: 1.0,
        };
        let mut twin = CpuSteps::new(rows, setup).unwrap();
        let order: Vec<u32> = (0..n as u32).collect();
        let mut mistakes = Vec::new();
        for _ in 0..t.report.epochs {
            mistakes.push(twin.epoch(&order).unwrap().mistakes);
        }
        assert_eq!(mistakes, t.report.mistakes_per_epoch, "{variant:?}");
        let want = twin.model().unwrap();
        let Body::Multiclass(rows) = t.model.body() else {
            panic!("not a multiclass model")
        };
        for h in 0..k {
            let got: Vec<f32> = rows.weights[h]
                .iter()
                .chain([&rows.bias[h]])
                .copied()
                .collect();
            assert_eq!(
                got,
                want[h * (d + 1)..(h + 1) * (d + 1)],
                "{variant:?} head {h}"
            );
        }
    }
}

/// The stepped rows are checked whole: a sparse row whose columns repeat or fall beyond d is
/// refused (the kernels update a row's columns in parallel); the CPU twin takes steps of any
/// size (only the GPU's kernels cap a step's scores).
#[test]
fn stepped_rows_are_checked_and_the_twin_takes_any_step() {
    use rosenblatt_backend::steps::{CpuSteps, StepRows, StepUpdate, StepX, StepsSetup};
    use rosenblatt_backend::{HeadRule, PaSize};
    let setup = StepsSetup {
        rule: HeadRule::Binary,
        tau: 0.0,
        eta: 1.0,
        step_rows: 4096,
        streams: 1,
        average: false,
        w0: vec![0.0; 4],
        heads: 1,
        update: StepUpdate::PassiveAggressive(PaSize::Pa),
    };
    let y = [1.0, -1.0];
    let cases = [
        ([0u32, 1, 2], true),
        ([0, 2, 1], false),
        ([0, 1, 1], false),
        ([0, 2, 3], false),
    ];
    for (indices, ok) in cases {
        let rows = StepRows {
            x: StepX::Csr {
                indptr: &[0, 1, 3],
                indices: &indices,
                values: &[1.0, 2.0, 3.0],
            },
            y: &y,
            weights: None,
            d: 3,
            bias: 1.0,
        };
        assert_eq!(
            CpuSteps::new(rows, setup.clone()).is_ok(),
            ok,
            "{indices:?}"
        );
    }
}
