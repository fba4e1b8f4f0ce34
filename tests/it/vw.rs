//! Vowpal Wabbit's text format through the command line: train hashes the raw features into
//! the columns the flags name and the model records them, so predict, eval and a continued
//! run hash raw input the same way; flags that disagree with the model, and bad lines, are
//! exit 2 naming the place.

use std::path::{Path, PathBuf};

use crate::common;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v5/binary.vw")
}

/// A scratch directory holding the fixture's examples.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("train.vw")).unwrap();
    dir
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = common::run(dir, args);
    assert!(o.status.success(), "{args:?}: {}", common::stderr(&o));
    common::stdout(&o)
}

fn refused(dir: &Path, args: &[&str], words: &str) {
    let o = common::run(dir, args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
    let e = common::stderr(&o);
    assert!(e.contains(words), "{args:?}: {words:?} not in {e}");
}

#[test]
fn a_model_trained_on_hashed_text_predicts_raw_text_the_same_way() {
    let dir = scratch();
    let p = dir.path();
    let report = ok(
        p,
        &[
            "train",
            "train.vw",
            "--hash-bits",
            "8",
            "-q",
            "ab",
            "--backend",
            "cpu",
            "--json",
            "-o",
            "m.json",
        ],
    );
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let acc = r["train_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.9, "{report}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    assert_eq!(m["version"], 7, "online scaling is version 7");
    assert_eq!(m["n_features"], 256);
    assert_eq!(
        m["hashing"],
        serde_json::json!({"bits": 8, "sign": "signed", "quadratic": ["ab"]})
    );
    // predict and eval hash as the model says: the training accuracy again.
    let labels: Vec<String> = std::fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let pred = ok(p, &["predict", "m.json", "train.vw", "--backend", "cpu"]);
    let right = pred.lines().zip(&labels).filter(|(a, b)| a == b).count();
    assert_eq!(pred.lines().count(), 40);
    assert!(
        (right as f64 / 40.0 - acc).abs() < 1e-9,
        "{right} of 40, trained {acc}"
    );
    let ev: serde_json::Value = serde_json::from_str(&ok(
        p,
        &["eval", "m.json", "train.vw", "--backend", "cpu", "--json"],
    ))
    .unwrap();
    assert_eq!(ev["accuracy"].as_f64().unwrap(), acc);
    // Unlabelled examples (the label and importance cut off) predict the same.
    let bare: String = std::fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", &l[l.find('|').unwrap()..]))
        .collect();
    std::fs::write(p.join("bare.vw"), bare).unwrap();
    assert_eq!(
        ok(p, &["predict", "m.json", "bare.vw", "--backend", "cpu"]),
        pred
    );
    // The same flags are fine; other ones are refused, as is a continued run hashed otherwise.
    ok(
        p,
        &[
            "predict",
            "m.json",
            "train.vw",
            "--hash-bits",
            "8",
            "-q",
            "ab",
        ],
    );
    refused(
        p,
        &["predict", "m.json", "train.vw", "--hash-bits", "10"],
        "--hash-bits and the other hashing flags must be left out",
    );
    refused(
        p,
        &[
            "train",
            "train.vw",
            "--hash-bits",
            "8",
            "--hash-sign",
            "unsigned",
            "--init-model",
            "m.json",
        ],
        "hashed with 8 hash bits, signed",
    );
}

#[test]
fn bad_hashing_flags_and_bad_lines_are_exit_2_naming_the_place() {
    let dir = scratch();
    let p = dir.path();
    refused(
        p,
        &["train", "train.vw", "--hash-bits", "29"],
        "--hash-bits must be in [1, 28]",
    );
    refused(p, &["train", "train.vw", "-q", "abc"], "--quadratic");
    refused(
        p,
        &["train", "train.vw", "--hash-sign", "maybe"],
        "signed or unsigned",
    );
    let mut text = std::fs::read_to_string(fixture()).unwrap();
    text.push_str("1 |a good:lots\n");
    std::fs::write(p.join("bad.vw"), text).unwrap();
    refused(p, &["train", "bad.vw"], "line 41");
    refused(p, &["train", "bad.vw"], "feature value: not a number");
    // Unsigned hashing, and the default bits (18), train too.
    ok(
        p,
        &[
            "train",
            "train.vw",
            "--hash-sign",
            "unsigned",
            "--backend",
            "cpu",
        ],
    );
}

#[test]
fn numbered_features_unsigned_train_the_model_the_same_rows_train_from_libsvm() {
    // `gen --format vw` names each feature by its column: unsigned hashing into 2^5 >= 20
    // columns puts it back there, so the model is the LIBSVM file's, weight for weight.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (format, file) in [("vw", "g.vw"), ("libsvm", "g.svm")] {
        let gen = [
            "gen",
            "--n",
            "300",
            "--d",
            "20",
            "--density",
            "0.3",
            "--seed",
            "3",
            "--format",
            format,
            "-o",
            file,
        ];
        ok(p, &gen);
    }
    let first = std::fs::read_to_string(p.join("g.vw")).unwrap();
    assert!(first.lines().next().unwrap().contains(" | "), "{first:.80}");
    let train = |file: &str, extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["train", file, "--backend", "cpu", "-o"];
        let out = format!("{file}.json");
        args.push(&out);
        args.extend_from_slice(extra);
        ok(p, &args);
        serde_json::from_str(&std::fs::read_to_string(p.join(&out)).unwrap()).unwrap()
    };
    let vw = train("g.vw", &["--hash-bits", "5", "--hash-sign", "unsigned"]);
    let svm = train("g.svm", &["--features", "32", "--sparse"]);
    assert_eq!(vw["weights"], svm["weights"]);
    assert_eq!(vw["bias"], svm["bias"]);
    assert_eq!(vw["classes"], svm["classes"]);
    // Hashing flags on input that is not hashed would be ignored: refused.
    refused(
        p,
        &["train", "g.svm", "--hash-bits", "5"],
        "Vowpal Wabbit text and to CSV with --categorical",
    );
    // Raw text hashed for a model of numeric columns is refused, not scored.
    refused(
        p,
        &["predict", "g.svm.json", "g.vw", "--hash-bits", "5"],
        "trained on columns given as numbers",
    );
}

#[test]
fn a_generated_click_log_trains_above_the_majority_rule() {
    // `gen --kind clicks`: Criteo-shaped rows as Vowpal Wabbit text; its planted rule is
    // learnt from 8,000 rows well past always answering "no click".
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    ok(
        p,
        &[
            "gen", "--kind", "clicks", "--n", "10000", "--noise", "0.05", "-o", "log.vw",
        ],
    );
    let text = std::fs::read_to_string(p.join("log.vw")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10_000);
    std::fs::write(p.join("train.vw"), lines[..8000].join("\n") + "\n").unwrap();
    std::fs::write(p.join("test.vw"), lines[8000..].join("\n") + "\n").unwrap();
    ok(
        p,
        &["train", "train.vw", "--backend", "cpu", "-o", "m.json"],
    );
    let ev: serde_json::Value = serde_json::from_str(&ok(
        p,
        &["eval", "m.json", "test.vw", "--backend", "cpu", "--json"],
    ))
    .unwrap();
    let clicks = lines[8000..].iter().filter(|l| l.starts_with("1 ")).count() as f64 / 2000.0;
    let majority = clicks.max(1.0 - clicks);
    let acc = ev["accuracy"].as_f64().unwrap();
    assert!(acc > majority + 0.05, "accuracy {acc}, majority {majority}");
    refused(
        p,
        &["gen", "--kind", "clicks", "--n", "5", "--format", "libsvm"],
        "--format must be vw (the default) or csv",
    );
    // As CSV, the same rows train through its categorical columns.
    let csv = ok(
        p,
        &["gen", "--kind", "clicks", "--n", "300", "--format", "csv"],
    );
    std::fs::write(p.join("clicks.csv"), &csv).unwrap();
    let cats: Vec<String> = (1..=26).map(|j| format!("C{j}")).collect();
    let report = ok(
        p,
        &[
            "train",
            "clicks.csv",
            "--categorical",
            &cats.join(","),
            "--algo",
            "arow",
            "--json",
            "-o",
            "c.json",
        ],
    );
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(r["n"], 300, "{report}");
    assert!(r["train_accuracy"].as_f64().unwrap() > 0.5, "{report}");
}

/// `rows` click-like rows: (label, n1, n2, color, shape), a planted rule on color and n1.
fn categorical_rows(rows: usize) -> Vec<(i32, f32, f32, &'static str, &'static str)> {
    const COLORS: [&str; 4] = ["red", "blue", "green", "teal"];
    const SHAPES: [&str; 3] = ["square", "round", ""];
    (0..rows)
        .map(|i| {
            let color = COLORS[(i * 7) % 4];
            let shape = SHAPES[(i * 5) % 3];
            let n1 = ((i * 37) % 11) as f32 / 4.0;
            let n2 = ((i * 13) % 5) as f32;
            let score = match color {
                "red" | "teal" => 1.5,
                _ => -1.5,
            } + n1
                - 1.25;
            (if score > 0.0 { 1 } else { -1 }, n1, n2, color, shape)
        })
        .collect()
}

#[test]
fn csv_with_categorical_columns_trains_the_model_its_vowpal_wabbit_lines_train() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let rows = categorical_rows(400);
    let mut csv = String::from("label,n1,n2,color,shape\n");
    let mut unlabelled = String::from("n1,n2,color,shape\n");
    let mut vw = String::new();
    for &(y, n1, n2, color, shape) in &rows {
        csv.push_str(&format!("{y},{n1},{n2},{color},{shape}\n"));
        unlabelled.push_str(&format!("{n1},{n2},{color},{shape}\n"));
        // The same row as Vowpal Wabbit text: an empty field is a missing feature, a zero
        // none at all.
        let mut line = format!("{y} |");
        for (name, v) in [("n1", n1), ("n2", n2)] {
            if v != 0.0 {
                line.push_str(&format!(" {name}:{v}"));
            }
        }
        line.push_str(&format!(" color={color}"));
        if !shape.is_empty() {
            line.push_str(&format!(" shape={shape}"));
        }
        vw.push_str(&line);
        vw.push('\n');
    }
    std::fs::write(p.join("train.csv"), csv).unwrap();
    std::fs::write(p.join("new.csv"), unlabelled).unwrap();
    std::fs::write(p.join("train.vw"), vw).unwrap();
    let common_args = ["--hash-bits", "10", "--backend", "cpu", "--algo", "online"];
    let report = ok(
        p,
        &[
            &[
                "train",
                "train.csv",
                "--categorical",
                "color,shape",
                "--json",
            ][..],
            &common_args,
            &["-o", "csv.json"],
        ]
        .concat(),
    );
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(r["train_accuracy"].as_f64().unwrap() >= 0.95, "{report}");
    ok(
        p,
        &[&["train", "train.vw"][..], &common_args, &["-o", "vw.json"]].concat(),
    );
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p.join(f)).unwrap()).unwrap()
    };
    let (m, v) = (read("csv.json"), read("vw.json"));
    // The same features in the same columns: the same model, bit for bit.
    assert_eq!(m["weights"], v["weights"]);
    assert_eq!(m["bias"], v["bias"]);
    assert_eq!(m["version"], 7, "online scaling is version 7");
    assert_eq!(m["n_features"], 1024);
    assert_eq!(
        m["hashing"],
        serde_json::json!({"bits": 10, "sign": "signed",
            "categorical": ["color", "shape"],
            "csv_columns": ["n1", "n2", "color", "shape"]})
    );
    // Predict hashes a file without the label column as the model records, and gives what
    // it gives for the labelled rows; eval reads the labels.
    let labelled = ok(p, &["predict", "csv.json", "train.csv"]);
    let new = ok(p, &["predict", "csv.json", "new.csv"]);
    assert_eq!(labelled, new);
    assert_eq!(new.lines().count(), 400);
    let eval = ok(p, &["eval", "csv.json", "train.csv", "--json"]);
    let e: serde_json::Value = serde_json::from_str(&eval).unwrap();
    assert_eq!(e["accuracy"], r["train_accuracy"], "{eval}");

    refused(
        p,
        &[
            "train",
            "train.csv",
            "--categorical",
            "colour",
            "-o",
            "x.json",
        ],
        "no column named \"colour\"",
    );
    refused(
        p,
        &[
            "train",
            "train.csv",
            "--categorical",
            "label",
            "-o",
            "x.json",
        ],
        "is the label column",
    );
    refused(
        p,
        &[
            "train",
            "train.csv",
            "--categorical",
            "color",
            "-q",
            "ab",
            "-o",
            "x.json",
        ],
        "--quadratic",
    );
    refused(
        p,
        &[
            "train",
            "train.vw",
            "--categorical",
            "color",
            "-o",
            "x.json",
        ],
        "names CSV columns",
    );
    std::fs::write(p.join("numbers.csv"), "a,b,label\n1,2,0\n3,4,1\n").unwrap();
    refused(
        p,
        &["train", "numbers.csv", "--hash-bits", "8", "-o", "x.json"],
        "CSV with --categorical",
    );
    refused(
        p,
        &["predict", "csv.json", "new.csv", "--categorical", "shape"],
        "--categorical",
    );
    assert!(!p.join("x.json").exists());
}
