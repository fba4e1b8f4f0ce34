//! Warm start (`train --init-model`, `algo::train_from`): N epochs, then M more from the saved
//! model, equal N + M epochs in one run for the batch forms on integer data, on the CPU and the
//! GPU; a model of another kind, feature count or class set is refused with the reason.

use crate::common;

use std::path::Path;

use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::Backend;
use rosenblatt_core::params::{Algo, MulticlassStrategy, TrainParams};
use rosenblatt_train::algo;
use rosenblatt_train::model::Model;

fn check_n_plus_m(backend: &dyn Backend, name: &str) {
    for (k, algo, ovr) in [
        (2, Algo::Batch, false),
        (4, Algo::Multiclass, false),
        (4, Algo::Batch, true),
    ] {
        let ds = common::integer_classes(300, 5, k, 7 + k as u64);
        let p = |epochs| {
            let mut t = TrainParams::for_algo(algo).epochs(epochs);
            if ovr {
                t.multiclass = MulticlassStrategy::Ovr;
            }
            t.validate().unwrap()
        };
        let whole = algo::train(&ds, &p(7), backend, None, &mut ()).unwrap();
        assert_eq!(
            whole.report.epochs, 7,
            "{name} {algo:?}: the data must not converge"
        );
        let first = algo::train(&ds, &p(3), backend, None, &mut ()).unwrap();
        let rest = algo::train_from(&first.model, &ds, &p(4), backend, None, &mut ()).unwrap();
        let what = format!("{name} {algo:?} k={k} ovr={ovr}");
        assert_eq!(rest.model.body(), whole.model.body(), "{what}");
        assert_eq!(
            rest.report.mistakes_per_epoch,
            whole.report.mistakes_per_epoch[3..],
            "{what}"
        );
    }
}

#[test]
fn n_epochs_then_m_more_equal_n_plus_m_on_the_cpu_and_the_gpu() {
    check_n_plus_m(&CpuBackend::new(), "cpu");
    if let Some(g) = common::gpu() {
        check_n_plus_m(g, "gpu");
    }
}

#[test]
fn a_pocket_model_continues_from_its_pocket_and_never_gets_worse() {
    // A saved pocket model is the pocket, not the last iterate: continuing starts from it, so
    // the new pocket has at most its training mistakes.
    let ds = common::integer_classes(300, 5, 2, 9);
    let p = |epochs| {
        TrainParams::for_algo(Algo::Pocket)
            .epochs(epochs)
            .validate()
            .unwrap()
    };
    let cpu = CpuBackend::new();
    let first = algo::train(&ds, &p(3), &cpu, None, &mut ()).unwrap();
    let rest = algo::train_from(&first.model, &ds, &p(4), &cpu, None, &mut ()).unwrap();
    let wrong = |acc: f64| ((1.0 - acc) * 300.0).round() as u64;
    assert_eq!(
        rest.report.mistakes_per_epoch[0],
        wrong(first.report.train_accuracy.unwrap()),
        "the first epoch scores the saved pocket"
    );
    assert!(rest.report.train_accuracy.unwrap() >= first.report.train_accuracy.unwrap());
}

#[test]
fn online_forms_continue_from_the_saved_weights() {
    let ds = common::integer_classes(200, 4, 2, 3);
    let p = TrainParams::for_algo(Algo::Online)
        .epochs(1)
        .shuffle(false)
        .validate()
        .unwrap();
    let cpu = CpuBackend::new();
    let first = algo::train(&ds, &p, &cpu, None, &mut ()).unwrap();
    let again = algo::train_from(&first.model, &ds, &p, &cpu, None, &mut ()).unwrap();
    let two = TrainParams::for_algo(Algo::Online)
        .epochs(2)
        .shuffle(false)
        .validate()
        .unwrap();
    let whole = algo::train(&ds, &two, &cpu, None, &mut ()).unwrap();
    if whole.report.epochs == 2 {
        assert_eq!(again.model.body(), whole.model.body());
    }
}

#[test]
fn incompatible_models_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let run = |args: &[&str]| common::run(p, args);
    assert!(
        run(&["gen", "--n", "80", "--d", "3", "--seed", "1", "-o", "d3.csv"])
            .status
            .success()
    );
    assert!(
        run(&["gen", "--n", "80", "--d", "2", "--seed", "1", "-o", "d2.csv"])
            .status
            .success()
    );
    for (model, algo) in [("m.json", "batch"), ("v.json", "voted")] {
        let o = run(&[
            "train",
            "d3.csv",
            "--algo",
            algo,
            "--backend",
            "cpu",
            "-o",
            model,
        ]);
        assert!(o.status.success(), "{}", common::stderr(&o));
    }
    let refuse = |args: &[&str], want: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
        assert!(common::stderr(&o).contains(want), "{}", common::stderr(&o));
    };
    refuse(
        &[
            "train",
            "d2.csv",
            "--init-model",
            "m.json",
            "--backend",
            "cpu",
        ],
        "it has 3 features, the data 2",
    );
    refuse(
        &[
            "train",
            "d3.csv",
            "--init-model",
            "v.json",
            "--algo",
            "voted",
            "--backend",
            "cpu",
        ],
        "keeps no single weight vector",
    );
    refuse(
        &[
            "train",
            "d3.csv",
            "--init-model",
            "m.json",
            "--algo",
            "multiclass",
            "--backend",
            "cpu",
        ],
        "it is a binary model, and this run makes a multiclass model",
    );
    std::fs::write(
        p.join("ab.csv"),
        "a,b,c,label\n1,2,3,x\n-1,0,2,y\n2,1,0,x\n-2,-1,-3,y\n",
    )
    .unwrap();
    refuse(
        &[
            "train",
            "ab.csv",
            "--init-model",
            "m.json",
            "--backend",
            "cpu",
        ],
        "its classes are",
    );
    refuse(
        &[
            "train",
            "d3.csv",
            "--init-model",
            "m.json",
            "--init",
            "random",
        ],
        "cannot be used with",
    );
    // Continuing into the same file works: it is read before anything is written.
    let o = run(&[
        "train",
        "d3.csv",
        "--init-model",
        "m.json",
        "--backend",
        "cpu",
        "-o",
        "m.json",
        "--json",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    Model::load(&Path::new(p).join("m.json")).unwrap();
}
