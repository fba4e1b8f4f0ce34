//! Convergence and theory: both algorithms separate generated separable data, online training
//! never makes more mistakes than Novikoff's bound, the hand-computed update rules, and the
//! CPU batch epoch gives the same bits on any number of threads.

use crate::common;
use crate::common::train;

use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::StopReason;
use rosenblatt_core::data::{Dataset, Labels};
use rosenblatt_core::params::{Algo, Init, TrainParams};
use rosenblatt_train::algo;
use rosenblatt_train::model::{Body, Hyperplane, Model};
use rosenblatt_train::report::radius;

#[test]
fn both_algorithms_converge_on_separable_data() {
    for seed in 0..5 {
        for (n, d) in [(300, 2), (2000, 10), (1000, 50)] {
            let s = common::separable(n, d, 0.05, seed);
            for algo in [Algo::Online, Algo::Batch] {
                let t = train(&s.data, TrainParams::for_algo(algo).epochs(5000).seed(seed));
                let r = &t.report;
                assert!(r.converged, "{algo:?} seed {seed} n {n} d {d}: {r:?}");
                assert_eq!(r.stop_reason, StopReason::Converged);
                assert_eq!(r.train_accuracy, Some(1.0));
                assert_eq!(*r.mistakes_per_epoch.last().unwrap(), 0);
                assert!(r.margin.unwrap() > 0.0);
            }
        }
    }
}

#[test]
fn online_mistakes_never_exceed_novikoff_bound() {
    for seed in 0..40 {
        let d = 1 + (seed as usize % 7);
        let s = common::separable(400, d, 0.1, seed);
        let t = train(
            &s.data,
            TrainParams::for_algo(Algo::Online)
                .seed(seed)
                .epochs(10_000),
        );
        let r_aug = radius(&s.data.x, s.data.d, 1.0);
        let bound = (r_aug / s.margin_augmented).powi(2);
        assert!(t.report.converged);
        assert!(
            (t.report.total_mistakes as f64) <= bound,
            "seed {seed}: {} mistakes > bound {bound}",
            t.report.total_mistakes
        );
        // The reported bound uses the achieved margin, also a valid separator.
        assert!(t.report.total_mistakes as f64 <= t.report.mistake_bound.unwrap());
        assert!((t.report.radius - r_aug).abs() < 1e-9);
    }
}

fn tiny() -> Dataset {
    // Points (1, 0) -> "b", (0, 1) -> "a": classes sorted, so "a" is -1 and "b" is +1.
    Dataset::new(
        vec![1.0, 0.0, 0.0, 1.0],
        2,
        2,
        Some(Labels::from_names(&["b", "a"])),
        "tiny",
    )
}

#[test]
fn online_rule_by_hand_with_ties_and_bias() {
    // File order. Row 0 (y=+1): w=0, margin 0 -> mistake (tie), w = 0.5*(1,0,1) = (.5,0,.5).
    // Row 1 (y=-1): w.x = 0 + .5 = .5, margin -.5 -> mistake, w -= .5*(0,1,1) -> (.5,-.5,0).
    // Epoch 2: margins .5 and .5 -> no mistake, converged.
    let t = train(
        &tiny(),
        TrainParams::for_algo(Algo::Online).lr(0.5).shuffle(false),
    );
    assert_eq!(t.model.hyperplane().unwrap().weights, vec![0.5, -0.5]);
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.0);
    assert_eq!(t.report.mistakes_per_epoch, vec![2, 0]);
    assert_eq!(t.report.criterion_per_epoch, vec![0.5, 0.0]);
    assert_eq!(t.model.classes(), vec!["a", "b"]);
}

#[test]
fn no_bias_keeps_the_hyperplane_through_the_origin() {
    let t = train(
        &tiny(),
        TrainParams::for_algo(Algo::Online)
            .fit_bias(false)
            .shuffle(false),
    );
    assert_eq!(t.model.hyperplane().unwrap().bias, 0.0);
    assert_eq!(t.model.hyperplane().unwrap().weights, vec![1.0, -1.0]);
    // Without the bias column R is max ||x|| = 1.
    assert_eq!(t.report.radius, 1.0);
}

#[test]
fn sign_of_zero_predicts_the_positive_class() {
    // With w = 0 every decision value is 0, and sgn(0) = +1 picks class index 1.
    let ds = tiny();
    let t = train(&ds, TrainParams::for_algo(Algo::Batch).epochs(1));
    let m = Model::new(
        t.model.algorithm(),
        t.model.classes().to_vec(),
        2,
        Body::Binary(Hyperplane {
            weights: vec![0.0, 0.0],
            bias: 0.0,
        }),
        t.model.params().clone(),
    )
    .unwrap();
    let s = m.decision_function(&ds, &CpuBackend::new()).unwrap();
    assert_eq!(s, vec![0.0, 0.0]);
    assert_eq!(
        rosenblatt_train::model::Model::predict_index(&s),
        vec![1, 1]
    );
}

#[test]
fn batch_stops_on_tolerance_and_epoch_limit() {
    let s = common::separable(2000, 5, 0.0, 3);
    let t = train(&s.data, TrainParams::for_algo(Algo::Batch).epochs(3));
    assert_eq!(t.report.epochs, 3);
    assert_eq!(t.report.stop_reason, StopReason::MaxEpochs);
    assert!(!t.report.converged);
    let t = train(&s.data, TrainParams::for_algo(Algo::Batch).tol(Some(1e9)));
    assert_eq!(t.report.epochs, 1);
    assert_eq!(t.report.stop_reason, StopReason::Tolerance);
}

#[test]
fn random_init_is_seeded() {
    let s = common::separable(500, 4, 0.05, 9);
    let p = TrainParams::for_algo(Algo::Batch)
        .init(Init::Random)
        .seed(5);
    let a = train(&s.data, p.clone());
    let b = train(&s.data, p);
    assert_eq!(
        a.model.hyperplane().unwrap().weights,
        b.model.hyperplane().unwrap().weights
    );
    assert!(a.report.converged);
}

#[test]
fn batch_result_does_not_depend_on_thread_count() {
    let s = common::separable(100_000, 17, 0.02, 4);
    let run = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| train(&s.data, TrainParams::for_algo(Algo::Batch).epochs(30)))
    };
    let one = run(1);
    let three = run(3);
    assert_eq!(
        one.model.hyperplane().unwrap().weights,
        three.model.hyperplane().unwrap().weights
    );
    assert_eq!(
        one.model.hyperplane().unwrap().bias,
        three.model.hyperplane().unwrap().bias
    );
    assert_eq!(
        one.report.mistakes_per_epoch,
        three.report.mistakes_per_epoch
    );
}

#[test]
fn one_class_labels_are_rejected() {
    let mut ds = tiny();
    ds.labels = Some(Labels::from_names(&["a", "a"]));
    let p = TrainParams::for_algo(Algo::Batch).validate().unwrap();
    let e = algo::train(&ds, &p, &CpuBackend::new(), None, &mut ()).unwrap_err();
    assert!(e.to_string().contains("only one class"), "{e}");
    assert!(e.is_input_error());
}
