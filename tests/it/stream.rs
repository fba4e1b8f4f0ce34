//! One pass over Vowpal Wabbit text read in blocks (`train --stream`, `Trainer::fit_stream`):
//! the model equals the in-memory run of one epoch in file order bit for bit, for every rule
//! that streams, over inputs of several blocks; memory does not grow with the rows; what a
//! pass cannot do, a class first met after the first 8 MiB and a bad line in a later block
//! are exit 2 naming the place, with no model written; standard input streams too.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use rosenblatt::{
    Algo, Hashing, LoadOptions, Mode, MulticlassStrategy, Scale, TrainParams, Trainer,
};
use rosenblatt_core::data;

use crate::common::{run, stderr, stdout};

/// `n` rows of Vowpal Wabbit text over a few dozen tokens, labelled by a planted rule over
/// them with some noise: `classes` 2 gives -1/1, more gives 1..K. About 100 bytes a row.
fn text(n: usize, classes: usize, seed: u64) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut s = String::with_capacity(n * 96);
    for _ in 0..n {
        let toks: Vec<usize> = (0..12).map(|_| rng.random_range(0..40)).collect();
        let score: usize = toks.iter().sum::<usize>() + rng.random_range(0..20);
        let label = match classes {
            2 if score > 244 => "1".to_string(),
            2 => "-1".to_string(),
            k => (1 + (score * k / 489).min(k - 1)).to_string(),
        };
        let w = if rng.random_bool(0.1) { " 2" } else { "" };
        s.push_str(&format!("{label}{w} |t"));
        for t in &toks {
            s.push_str(&format!(" tok{t}"));
        }
        s.push_str(&format!(" |n x:{:.3}\n", rng.random::<f32>()));
    }
    s
}

/// Options hashing into 2^12 columns.
fn hashed() -> LoadOptions {
    LoadOptions {
        hashing: Some(Hashing {
            bits: 12,
            ..Hashing::default()
        }),
        ..LoadOptions::default()
    }
}

#[test]
fn a_stream_of_blocks_trains_the_model_of_one_epoch_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    // Over 8 MiB of text: at least two blocks.
    for (classes, rows) in [(2, 100_000), (4, 100_000)] {
        let path = dir.path().join(format!("rows{classes}.vw"));
        std::fs::write(&path, text(rows, classes, classes as u64)).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 8 << 20);
        let whole = data::load(&path, &hashed()).unwrap();
        let mut cases = vec![
            ("online", TrainParams::for_algo(Algo::Online)),
            ("averaged", TrainParams::for_algo(Algo::Averaged)),
            ("pa", TrainParams::for_algo(Algo::PassiveAggressive)),
            ("arow", TrainParams::for_algo(Algo::Arow)),
            (
                "averaged one-vs-rest",
                TrainParams::for_algo(Algo::Averaged).multiclass(MulticlassStrategy::Ovr),
            ),
        ];
        // Online scaling (the front ends' default): each row scaled by the largest
        // magnitudes of the rows before it and its own, kept across the blocks as the
        // in-memory run's first epoch keeps them.
        for (name, algo) in [
            ("averaged, online scaling", Algo::Averaged),
            ("pa, online scaling", Algo::PassiveAggressive),
        ] {
            cases.push((name, TrainParams::for_algo(algo).scale(Scale::Online)));
        }
        if classes == 2 {
            cases.push(("winnow", TrainParams::for_algo(Algo::Winnow)));
            cases.push((
                "online, steps of 8, margin 1",
                TrainParams::for_algo(Algo::Online)
                    .minibatch(8)
                    .margin_threshold(1.0),
            ));
        } else {
            cases.push((
                "multiclass online",
                TrainParams::for_algo(Algo::Multiclass).mode(Mode::Online),
            ));
        }
        for (name, p) in cases {
            let p = p.epochs(1).shuffle(false);
            let want = Trainer::new(p.clone())
                .unwrap()
                .backend(rosenblatt::BackendChoice::Cpu)
                .fit(&whole)
                .unwrap();
            let got = Trainer::new(p)
                .unwrap()
                .fit_stream(&path, &hashed())
                .unwrap();
            let what = format!("{name}, {classes} classes");
            assert_eq!(got.model.body(), want.model.body(), "{what}: model");
            assert_eq!(got.model.classes(), want.model.classes(), "{what}");
            let (g, w) = (&got.report, &want.report);
            assert_eq!(g.n, rows, "{what}");
            assert_eq!(g.mistakes_per_epoch, w.mistakes_per_epoch, "{what}");
            assert_eq!(g.criterion_per_epoch, w.criterion_per_epoch, "{what}");
            assert_eq!(g.wrong_rows_per_epoch, w.wrong_rows_per_epoch, "{what}");
            assert_eq!(got.model.scaling(), want.model.scaling(), "{what}: scaling");
            match got.model.scaling() {
                // R of the rows as the pass met them (scaled by the maxima then), which are
                // at least as long as the rows scaled by the final maxima.
                Some(sc) => {
                    assert_eq!(sc.kind, Scale::Online, "{what}");
                    assert!(g.radius >= w.radius - 1e-9, "{what}");
                }
                None => assert_eq!(g.radius, w.radius, "{what}"),
            }
            assert_eq!(
                g.streamed_bytes,
                Some(std::fs::metadata(&path).unwrap().len())
            );
            assert_eq!(w.streamed_bytes, None);
            // Progressive accuracy (each row predicted before it trained the model): well
            // above chance.
            assert!(
                g.progressive_accuracy.unwrap() > 1.2 / classes as f64,
                "{what}: progressive accuracy {}",
                g.progressive_accuracy.unwrap()
            );
            assert_eq!(g.margin, None);
        }
    }
}

/// `train rows.vw --stream --algo arow --hash-bits 12 -o m.json` in `dir`: its report.
fn stream_arow(dir: &Path) -> String {
    let args = [
        "train",
        "rows.vw",
        "--stream",
        "--algo",
        "arow",
        "--hash-bits",
        "12",
    ];
    let o = run(dir, &[&args[..], &["-o", "m.json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn the_command_line_streams_a_file_and_standard_input_to_a_model_that_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("rows.vw"), text(20_000, 2, 9)).unwrap();
    let out = stream_arow(p);
    for words in [
        "AROW on cpu",
        "n = 20000",
        "1 (one pass over the rows)",
        "streamed:          20000 rows",
        "rows/s",
        "progressive accuracy:",
        "peak memory:",
        "model written to m.json",
    ] {
        assert!(out.contains(words), "{words:?} not in {out}");
    }
    // The model predicts the raw text, hashed as it was trained.
    let o = run(p, &["predict", "m.json", "rows.vw", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 20_000);
    // Standard input, piped: the same model.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rosenblatt"))
        .args([
            "train",
            "-",
            "--stream",
            "--algo",
            "arow",
            "--hash-bits",
            "12",
            "-o",
            "in.json",
        ])
        .current_dir(p)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rows = std::fs::read(p.join("rows.vw")).unwrap();
    child.stdin.take().unwrap().write_all(&rows).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let weights = |f: &str| -> serde_json::Value {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.join(f)).unwrap()).unwrap();
        m["weights"].clone()
    };
    assert_eq!(weights("in.json"), weights("m.json"));
}

#[test]
fn memory_stays_flat_as_the_rows_grow() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let peak = |rows: usize| -> f64 {
        let o = run(
            p,
            &[
                "gen",
                "--kind",
                "clicks",
                "--n",
                &rows.to_string(),
                "-o",
                "log.vw",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        // Quadratic interactions of the 26 categorical fields: ~350 non-zeros a row, ~3 KB
        // held in memory for every ~460 bytes of text.
        let o = run(
            p,
            &[
                "train", "log.vw", "--stream", "--algo", "averaged", "-q", "cc",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        let line = out.lines().find(|l| l.contains("peak memory:")).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    // Both past the reader's steady state (a text trained, the next parsed: 4 and 14 texts
    // of 8 MiB); 240,000 rows held whole would take about 670 MB.
    let (small, large) = (peak(60_000), peak(240_000));
    assert!(
        large < small * 1.3 + 30.0 && large < 400.0,
        "peak memory {small} MB for 60,000 rows, {large} MB for 240,000"
    );
}

fn refused(dir: &Path, args: &[&str], words: &[&str]) {
    let o = run(dir, args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let e = stderr(&o);
    for w in words {
        assert!(e.contains(w), "{args:?}: {w:?} not in {e}");
    }
    assert!(!dir.join("m.json").exists(), "{args:?} wrote a model");
}

#[test]
fn what_one_pass_cannot_do_and_bad_input_are_exit_2_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // Two blocks; the second brings a class the first never had, then a bad line.
    let mut t = text(100_000, 2, 4);
    let first_block = t.len();
    t.push_str("7 |t tok1\n");
    std::fs::write(p.join("new_class.vw"), &t).unwrap();
    let lines = t.lines().count();
    t.push_str("1 |t tok1:x\n");
    std::fs::write(p.join("bad_line.vw"), &t).unwrap();
    assert!(first_block > 8 << 20);
    std::fs::write(p.join("rows.csv"), "x,y\n1,1\n2,-1\n").unwrap();
    std::fs::write(p.join("rows.vw"), text(50, 2, 1)).unwrap();
    let train = |extra: &[&'static str]| {
        let mut v = vec!["train", "rows.vw", "--stream", "-o", "m.json"];
        v.extend_from_slice(extra);
        v
    };
    refused(
        p,
        &train(&["--epochs", "3"]),
        &["--stream", "one pass", "--epochs 3"],
    );
    refused(
        p,
        &train(&["--algo", "voted"]),
        &["--algo", "keeps no rows", "voted"],
    );
    refused(
        p,
        &train(&["--algo", "multiclass"]),
        &["online mode", "multiclass"],
    );
    refused(
        p,
        &train(&["--scale", "standard"]),
        &["--scale", "every row"],
    );
    refused(
        p,
        &train(&["--class-weight", "balanced"]),
        &["--class-weight"],
    );
    refused(
        p,
        &train(&["--validation-fraction", "0.2"]),
        &["--validation-fraction"],
    );
    refused(p, &train(&["--init-model", "x.json"]), &["--init-model"]);
    refused(
        p,
        &train(&["--algo", "arow", "--arow-covariance", "full"]),
        &["--arow-covariance", "diagonal in a streamed run"],
    );
    refused(
        p,
        &["train", "rows.csv", "--stream", "-o", "m.json"],
        &["rows.csv", "Vowpal Wabbit"],
    );
    refused(
        p,
        &["train", "new_class.vw", "--stream", "-o", "m.json"],
        &["new_class.vw", "\"7\"", "first 8 MiB"],
    );
    refused(
        p,
        &[
            "train",
            "bad_line.vw",
            "--stream",
            "--algo",
            "arow",
            "-o",
            "m.json",
        ],
        &["bad_line.vw", &format!("line {}", lines + 1), "tok1:x"],
    );
    refused(
        p,
        &["train", "missing.vw", "--stream", "-o", "m.json"],
        &["missing.vw"],
    );
    // A class met late in the first 8 MiB (in another core's share of them) is a class.
    let mut late = text(100_000, 2, 5);
    let at = late[..6 << 20].rfind('\n').unwrap() + 1;
    late.insert_str(at, "0 |t tok2\n");
    std::fs::write(p.join("late.vw"), &late).unwrap();
    let o = run(
        p,
        &[
            "train",
            "late.vw",
            "--stream",
            "--algo",
            "arow",
            "-o",
            "late.json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let m = rosenblatt::Model::load(&p.join("late.json")).unwrap();
    assert_eq!(m.classes(), ["-1", "0", "1"]);
    // An empty input.
    std::fs::write(p.join("empty.vw"), "\n\n").unwrap();
    refused(
        p,
        &["train", "empty.vw", "--stream", "-o", "m.json"],
        &["empty.vw", "no examples"],
    );
}

#[test]
fn predict_and_eval_stream_vowpal_wabbit_text_and_give_what_the_rows_held_give() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut t = text(100_000, 4, 6);
    std::fs::write(p.join("rows.vw"), &t).unwrap();
    stream_arow(p);
    let o = run(
        p,
        &[
            "predict",
            "m.json",
            "rows.vw",
            "--backend",
            "cpu",
            "--margins",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // What the model predicts of the rows held in memory, and its scores.
    let model = rosenblatt::Model::load(&p.join("m.json")).unwrap();
    let whole = data::load(&p.join("rows.vw"), &hashed()).unwrap();
    let raw = model
        .raw_scores(&whole, &rosenblatt::CpuBackend::new())
        .unwrap();
    let want: Vec<String> = model
        .predict(&raw)
        .iter()
        .zip(raw.chunks_exact(4))
        .map(|(&c, s)| {
            let s: Vec<String> = s.iter().map(f32::to_string).collect();
            format!("{}\t{}", model.classes()[c as usize], s.join("\t"))
        })
        .collect();
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), want);
    // eval reads it in blocks too: the evaluation of the rows held in memory.
    let o = run(
        p,
        &["eval", "m.json", "rows.vw", "--backend", "cpu", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ev = model
        .evaluate(&whole, &rosenblatt::CpuBackend::new())
        .unwrap();
    assert_eq!(got, serde_json::to_value(&ev).unwrap());
    // A bad line in a later block: exit 2 naming it, and no file of predictions.
    t.push_str("1 |t tok1:x\n");
    std::fs::write(p.join("bad.vw"), &t).unwrap();
    let o = run(p, &["predict", "m.json", "bad.vw", "-o", "pred.txt"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("line 100001"), "{}", stderr(&o));
    assert!(!p.join("pred.txt").exists());
}
