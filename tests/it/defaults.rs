//! The front ends' defaults on the data people bring (issue 61): online scaling, a held-out
//! share for the stopping rule on large sets, one streamed pass of AROW for large Vowpal
//! Wabbit text, honest reports (progressive accuracy, the GPU's fallback), Ctrl-C, and the
//! model files of earlier versions.

use std::path::Path;

use rosenblatt::{Algo, Dataset, Scale, TrainParams, Trainer};
use serde_json::Value;

use crate::common::{run, stderr, stdout, write};

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap()
}

fn model(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A small Vowpal Wabbit text set in the shape of issue 61's: a few words of weight near 0.1
/// and one raw count in the hundreds; the class follows the words (the count carries nothing
/// about it), about 1 in 5 rows positive.
fn text_with_count(n: usize, seed: u64) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut s = String::new();
    for _ in 0..n {
        let pos = rng.random_bool(0.2);
        let mut words = Vec::new();
        for _ in 0..8 {
            // Class words 0..10 for positives, 10..20 for negatives, then shared noise.
            let w = match rng.random_range(0..3) {
                0 if pos => rng.random_range(0..10),
                0 => rng.random_range(10..20),
                _ => rng.random_range(20..200),
            };
            words.push(format!("w{w}:{:.3}", rng.random_range(0.05..0.15)));
        }
        let chars = rng.random_range(200..900);
        s.push_str(&format!(
            "{} |w {} |c chars:{chars}\n",
            if pos { 1 } else { -1 },
            words.join(" ")
        ));
    }
    s
}

#[test]
fn a_raw_count_beside_word_weights_no_longer_collapses_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(p, "train.vw", &text_with_count(1500, 1));
    write(p, "test.vw", &text_with_count(600, 2));
    let accuracy = |extra: &[&str]| -> f64 {
        let mut a = vec![
            "train",
            "train.vw",
            "--backend",
            "cpu",
            "-o",
            "m.json",
            "--json",
        ];
        a.extend_from_slice(extra);
        json(&run(p, &a));
        let e = json(&run(p, &["eval", "m.json", "test.vw", "--json"]));
        e["accuracy"].as_f64().unwrap()
    };
    let majority = 1.0
        - text_with_count(600, 2)
            .lines()
            .filter(|l| l.starts_with("1 "))
            .count() as f64
            / 600.0;
    let raw = accuracy(&["--scale", "none"]);
    let default = accuracy(&[]);
    let m = model(&p.join("m.json"));
    assert_eq!(m["scaling"]["kind"], "online");
    assert_eq!(m["version"], 7);
    // Unscaled, the count swamps the words (one class or close to it); scaled, the words
    // decide.
    assert!(raw < majority + 0.03, "raw {raw}, majority {majority}");
    assert!(
        default > majority + 0.05,
        "default {default}, majority {majority}"
    );
    for algo in ["arow", "pa"] {
        let a = accuracy(&["--algo", algo]);
        assert!(a > majority + 0.05, "{algo}: {a}, majority {majority}");
    }
}

#[test]
fn a_streamed_pass_scales_online_and_reports_progressive_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(p, "t.vw", &text_with_count(2000, 3));
    // One streamed pass and one in-memory epoch in file order train the same model.
    let streamed = json(&run(
        p,
        &["train", "t.vw", "--stream", "-o", "s.json", "--json"],
    ));
    json(&run(
        p,
        &[
            "train",
            "t.vw",
            "--epochs",
            "1",
            "--no-shuffle",
            "--backend",
            "cpu",
            "-o",
            "m.json",
            "--json",
        ],
    ));
    let (s, m) = (model(&p.join("s.json")), model(&p.join("m.json")));
    assert_eq!(s["weights"], m["weights"]);
    assert_eq!(s["scaling"], m["scaling"]);
    assert_eq!(s["scaling"]["kind"], "online");
    assert!(streamed.get("train_accuracy").is_none(), "{streamed}");
    assert!(streamed["progressive_accuracy"].as_f64().unwrap() > 0.5);
    assert_eq!(
        s["training"]["progressive_accuracy"],
        streamed["progressive_accuracy"]
    );
    let o = run(p, &["train", "t.vw", "--stream"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("progressive accuracy:"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("training accuracy"), "{}", stdout(&o));
    // A scaling that needs every row first is refused, naming the flag.
    let o = run(p, &["train", "t.vw", "--stream", "--scale", "standard"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--scale"), "{}", stderr(&o));
}

#[test]
fn large_vowpal_wabbit_text_takes_one_streamed_pass_of_arow_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // A click log of about 18 MB: past the 16 MiB of the streamed default.
    let o = run(
        p,
        &[
            "gen", "--kind", "clicks", "--n", "40000", "--seed", "2", "-o", "big.vw",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata(p.join("big.vw")).unwrap().len() > 16 << 20);
    let r = json(&run(p, &["train", "big.vw", "-o", "m.json", "--json"]));
    assert_eq!(r["algo"], "arow");
    assert_eq!(r["epochs"], 1);
    assert!(r["streamed_bytes"].as_u64().unwrap() > 16 << 20, "{r}");
    assert!(r["chosen"].as_str().unwrap().contains("--algo"), "{r}");
    assert!(r.get("train_accuracy").is_none() && r["progressive_accuracy"].as_f64().is_some());
    let m = model(&p.join("m.json"));
    assert_eq!(m["training"]["chosen"], r["chosen"]);
    assert_eq!(m["scaling"]["kind"], "online");
    let o = run(p, &["train", "big.vw"]);
    assert!(stdout(&o).contains("chosen:") && stdout(&o).contains("one streamed pass"));
    // Naming the rule (or epochs) trains in memory as asked.
    let r = json(&run(
        p,
        &[
            "train",
            "big.vw",
            "--algo",
            "arow",
            "--backend",
            "cpu",
            "--json",
        ],
    ));
    assert!(
        r.get("streamed_bytes").is_none() && r.get("chosen").is_none(),
        "{r}"
    );
    assert!(r["train_accuracy"].as_f64().is_some());
}

/// `n` rows of two noisy features, labelled by their sum.
fn noisy(n: usize) -> Dataset {
    let spec = rosenblatt::SynthSpec {
        n,
        d: 2,
        noise: 0.1,
        seed: 4,
        ..Default::default()
    };
    rosenblatt::synth::generate(&spec).unwrap().data
}

#[test]
fn a_large_set_holds_out_a_tenth_for_the_stopping_rule_when_asked_to_choose() {
    let ds = noisy(100_000);
    let p = TrainParams::for_algo(Algo::Averaged).epochs(5);
    let fit = |p: TrainParams| {
        Trainer::new(p)
            .unwrap()
            .backend(rosenblatt::BackendChoice::Cpu)
            .fit(&ds)
            .unwrap()
    };
    let plain = fit(p.clone());
    assert_eq!(plain.report.n_validation, None);
    assert_eq!(plain.report.held_out, None);
    let auto = TrainParams {
        auto_validation: true,
        ..p.clone()
    };
    let held = fit(auto.clone());
    assert_eq!(held.report.n_validation, Some(10_000));
    assert_eq!(held.report.n, 90_000);
    assert!(held
        .report
        .held_out
        .as_deref()
        .unwrap()
        .contains("100000 rows"));
    // A share named by the user is the user's: no note.
    let named = fit(TrainParams {
        validation_fraction: Some(0.2),
        ..auto.clone()
    });
    assert_eq!(named.report.n_validation, Some(20_000));
    assert_eq!(named.report.held_out, None);
    // Below the threshold nothing is held out.
    let small = noisy(99_999);
    let t = Trainer::new(auto)
        .unwrap()
        .backend(rosenblatt::BackendChoice::Cpu)
        .fit(&small)
        .unwrap();
    assert_eq!(t.report.n_validation, None);
}

#[test]
fn a_class_too_rare_for_the_held_out_share_keeps_its_rows_in_training() {
    // 100,000 rows, one of them of the second class: the stratified tenth takes none of a
    // class's last row, so the held-out rows are all of one class and the rare row trains.
    let mut ds = noisy(100_000);
    let labels = ds.labels.as_mut().unwrap();
    for (i, c) in labels.index.iter_mut().enumerate() {
        *c = u32::from(i == 7);
    }
    let p = TrainParams {
        auto_validation: true,
        ..TrainParams::for_algo(Algo::Averaged).epochs(3)
    };
    let t = Trainer::new(p)
        .unwrap()
        .backend(rosenblatt::BackendChoice::Cpu)
        .fit(&ds)
        .unwrap();
    assert_eq!((t.report.n, t.report.n_validation), (90_000, Some(10_000)));
    assert_eq!(t.report.validation_accuracy.map(|a| a > 0.99), Some(true));
}

#[test]
fn online_scaling_is_scale_free_and_a_zero_feature_keeps_factor_one() {
    // The same rows with feature 1 multiplied by 1000 and a feature that is always 0: online
    // scaling trains the same predictions (up to rounding) and keeps factor 1 for the zeros.
    let ds = noisy(3000);
    let mut big = ds.clone();
    let d = ds.d;
    let mut x = ds.x.values().into_owned();
    for r in x.chunks_mut(d) {
        r[0] *= 1000.0;
    }
    let mut with_zero = Vec::with_capacity(ds.n * (d + 1));
    for r in x.chunks(d) {
        with_zero.extend_from_slice(r);
        with_zero.push(0.0);
    }
    big.x = rosenblatt::MatrixBuf::Dense(with_zero);
    big.d = d + 1;
    let p = TrainParams::for_algo(Algo::Averaged)
        .scale(Scale::Online)
        .epochs(3);
    let fit = |ds: &Dataset| {
        Trainer::new(p.clone())
            .unwrap()
            .backend(rosenblatt::BackendChoice::Cpu)
            .fit(ds)
            .unwrap()
    };
    let (a, b) = (fit(&ds), fit(&big));
    let sc = b.model.scaling().unwrap();
    assert_eq!(sc.kind, Scale::Online);
    assert_eq!(sc.factor[d], 1.0);
    let cpu = rosenblatt::CpuBackend::new();
    let (pa, pb) = (
        a.model.predict(&a.model.raw_scores(&ds, &cpu).unwrap()),
        b.model.predict(&b.model.raw_scores(&big, &cpu).unwrap()),
    );
    let same = pa.iter().zip(&pb).filter(|(x, y)| x == y).count();
    assert!(same >= ds.n - 3, "{same} of {} predictions agree", ds.n);
}

#[test]
fn a_gpu_asked_for_and_not_used_says_why() {
    let Some(_gpu) = crate::common::gpu() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = run(p, &["gen", "--n", "124", "--d", "13", "-o", "w.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&run(p, &["train", "w.csv", "--backend", "gpu", "--json"]));
    assert_eq!(r["backend"], "cpu");
    assert!(
        r["fallback"].as_str().unwrap().contains("sequential rule"),
        "{r}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_says_what_it_stopped_and_leaves_no_model() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = run(
        p,
        &[
            "gen", "--n", "20000", "--d", "50", "--noise", "0.3", "-o", "d.csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let child = Command::new(env!("CARGO_BIN_EXE_rosenblatt"))
        .args([
            "train",
            "d.csv",
            "--algo",
            "online",
            "--epochs",
            "1000000",
            "--patience",
            "0",
            "--backend",
            "cpu",
            "-o",
            "m.json",
        ])
        .current_dir(p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("interrupted") && e.contains("nothing was written"),
        "{e}"
    );
    assert!(!p.join("m.json").exists());
    assert_eq!(crate::common::temporaries(p), Vec::<String>::new());
}

#[test]
fn a_streamed_model_of_version_6_loads_with_its_accuracy_as_progressive() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(p, "t.vw", &text_with_count(300, 5));
    json(&run(
        p,
        &[
            "train", "t.vw", "--stream", "--scale", "none", "-o", "m.json", "--json",
        ],
    ));
    let mut m = model(&p.join("m.json"));
    let acc = m["training"]["progressive_accuracy"].clone();
    assert!(acc.as_f64().is_some());
    // As version 6 wrote it: the progressive accuracy under train_accuracy.
    let t = m["training"].as_object_mut().unwrap();
    t.remove("progressive_accuracy");
    t.insert("train_accuracy".into(), acc.clone());
    m["version"] = 6.into();
    std::fs::write(p.join("old.json"), serde_json::to_string(&m).unwrap()).unwrap();
    let old = rosenblatt::Model::load(&p.join("old.json")).unwrap();
    let r = old.training().unwrap();
    assert_eq!(r.progressive_accuracy, acc.as_f64());
    assert_eq!(r.train_accuracy, None);
    // Online scaling in a file that says version 6 is corrupt.
    json(&run(
        p,
        &["train", "t.vw", "--stream", "-o", "s.json", "--json"],
    ));
    let mut s = model(&p.join("s.json"));
    s["version"] = 6.into();
    std::fs::write(p.join("bad.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let e = rosenblatt::Model::load(&p.join("bad.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 7"), "{e}");
}
