//! The crate root's API as a library user writes it: [`Trainer`] gives the model the
//! algorithm's own entry gives (parameters, held-out rows, warm start, a backend opened by
//! the caller), refuses bad parameters with the parameter and value, and reports progress;
//! a saved model loads back whole. Everything here is named from the crate root only.

use rosenblatt::{
    synth, Algo, BackendChoice, CpuBackend, Error, Fallback, Model, Param, Progress, SynthSpec,
    TrainParams, Trainer,
};

fn data(n: usize, seed: u64) -> rosenblatt::Dataset {
    synth::generate(&SynthSpec {
        n,
        d: 5,
        seed,
        ..Default::default()
    })
    .unwrap()
    .data
}

#[test]
fn the_trainer_gives_the_model_of_the_algorithms_own_entry() {
    let (ds, held) = (data(300, 1), data(100, 2));
    let cpu = CpuBackend::new();
    for algo in [Algo::Averaged, Algo::Batch, Algo::Pocket] {
        let tp = TrainParams::for_algo(algo).epochs(7);
        let params = tp.clone().validate().unwrap();
        let want = rosenblatt_train::algo::train(&ds, &params, &cpu, None, &mut ()).unwrap();
        let got = Trainer::new(tp.clone())
            .unwrap()
            .backend(BackendChoice::Cpu)
            .fit(&ds)
            .unwrap();
        assert_eq!(got.model.augmented(), want.model.augmented(), "{algo:?}");
        assert_eq!(
            got.report.mistakes_per_epoch,
            want.report.mistakes_per_epoch
        );
        // A backend the caller opened, and no fallback: the same run.
        let on = Trainer::new(tp.clone())
            .unwrap()
            .on(&cpu)
            .fallback(Fallback::Never)
            .fit(&ds)
            .unwrap();
        assert_eq!(on.model.augmented(), want.model.augmented());
        // Held-out rows watched: as the problem built with them.
        let pb = rosenblatt_train::algo::Problem::build(
            &ds,
            &params,
            rosenblatt_train::algo::Holdout::Rows(&held),
            None,
        )
        .unwrap();
        let want = rosenblatt_train::algo::fit(pb, &params, &cpu, None, &mut ()).unwrap();
        let got = Trainer::new(tp.clone())
            .unwrap()
            .backend(BackendChoice::Cpu)
            .validation(&held)
            .fit(&ds)
            .unwrap();
        assert_eq!(got.model.augmented(), want.model.augmented());
        assert_eq!(
            got.report.validation_accuracy_per_epoch,
            want.report.validation_accuracy_per_epoch
        );
        assert_eq!(got.report.n_validation, Some(100));
        // A warm start: as `train_from`.
        let start = &want.model;
        let want =
            rosenblatt_train::algo::train_from(start, &ds, &params, &cpu, None, &mut ()).unwrap();
        let got = Trainer::new(tp)
            .unwrap()
            .backend(BackendChoice::Cpu)
            .warm_start(start)
            .fit(&ds)
            .unwrap();
        assert_eq!(got.model.augmented(), want.model.augmented());
    }
}

#[test]
fn bad_parameters_name_the_parameter_and_the_value() {
    let Err(e) = Trainer::new(TrainParams::for_algo(Algo::Batch).lr(1.5)) else {
        panic!("a learning rate of 1.5 was taken");
    };
    match &e {
        Error::InvalidParam { name, value, .. } => {
            assert_eq!(*name, Param::LearningRate);
            assert_eq!(value, "1.5");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn progress_sees_every_epoch_and_a_saved_model_loads_back() {
    struct Count(Vec<usize>);
    impl Progress for Count {
        fn update(&mut self, done: usize, _max: usize, _mistakes: u64) {
            self.0.push(done);
        }
    }
    let ds = data(200, 3);
    let mut seen = Count(Vec::new());
    let t = Trainer::new(TrainParams::for_algo(Algo::Batch).epochs(5))
        .unwrap()
        .backend(BackendChoice::Cpu)
        .progress(&mut seen)
        .fit(&ds)
        .unwrap();
    assert_eq!(seen.0.last().copied(), Some(t.report.epochs));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    t.model.save(&path).unwrap();
    let back = Model::load(&path).unwrap();
    assert_eq!(back.augmented(), t.model.augmented());
    // Nothing but the file is left in the folder (no temporary).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let e = Model::load(&dir.path().join("none.json")).unwrap_err();
    assert!(e.to_string().contains("none.json"), "{e}");
}
