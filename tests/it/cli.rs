//! The command line as a user meets it: gen -> train -o -> predict -> eval, the `--json`
//! keys, exit codes (0, 1, 2), and no partial output files on failure.

use crate::common;

use common::{run, stderr, stdout, write};
use serde_json::Value;

#[test]
fn gen_train_predict_eval_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = run(
        p,
        &[
            "gen", "--n", "500", "--d", "3", "--seed", "5", "-o", "data.csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(p.join("data.csv")).unwrap();
    assert!(text.starts_with("f1,f2,f3,label\n"));
    assert_eq!(text.lines().count(), 501);

    let o = run(
        p,
        &["train", "data.csv", "-o", "model.json", "--backend", "cpu"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("converged"));
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("model.json")).unwrap()).unwrap();
    assert_eq!(model["format"], "rosenblatt-model");
    // Online scaling (the default) is version 7.
    assert_eq!(model["version"], 7);
    assert_eq!(model["scaling"]["kind"], "online");
    assert_eq!(model["classes"], serde_json::json!(["-1", "1"]));
    assert_eq!(model["weights"].as_array().unwrap().len(), 3);

    let o = run(
        p,
        &["predict", "model.json", "data.csv", "--backend", "cpu"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let pred: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    let truth: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().to_string())
        .collect();
    assert_eq!(
        pred, truth,
        "a converged model predicts its training data exactly"
    );

    let o = run(
        p,
        &[
            "predict",
            "model.json",
            "data.csv",
            "--margins",
            "-o",
            "pred.tsv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let first = std::fs::read_to_string(p.join("pred.tsv")).unwrap();
    let first = first.lines().next().unwrap().to_string();
    let (label, value) = first.split_once('\t').unwrap();
    let v: f32 = value.parse().unwrap();
    assert_eq!(label == "1", v >= 0.0);

    let o = run(p, &["eval", "model.json", "data.csv", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ev: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(ev["n"], 500);
    assert_eq!(ev["accuracy"], 1.0);
    let m = &ev["confusion"]["matrix"];
    let total: u64 = m
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 500);
    assert_eq!(m[0][1], 0);
    assert_eq!(m[1][0], 0);
}

#[test]
fn train_json_is_one_object_with_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(run(p, &["gen", "--n", "200", "--d", "2", "-o", "d.csv"])
        .status
        .success());
    for algo in ["online", "batch"] {
        let o = run(
            p,
            &[
                "train",
                "d.csv",
                "--algo",
                algo,
                "--json",
                "--backend",
                "cpu",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert_eq!(out.trim().lines().count(), 1, "one line of JSON: {out}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        for key in [
            "algo",
            "backend",
            "device",
            "n",
            "d",
            "epochs",
            "converged",
            "stop_reason",
            "train_accuracy",
            "mistakes_per_epoch",
            "total_mistakes",
            "radius",
            "margin",
            "mistake_bound",
            "seconds",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {out}");
        }
        assert_eq!(v["algo"], algo);
        assert_eq!(v["backend"], "cpu");
        assert_eq!(v["n"], 200);
        assert_eq!(v["converged"], true);
        assert_eq!(v["stop_reason"], "converged");
        assert_eq!(
            v["epochs"].as_u64().unwrap() as usize,
            v["mistakes_per_epoch"].as_array().unwrap().len()
        );
    }
    assert!(
        !p.join("model.json").exists(),
        "without -o nothing is written"
    );
}

#[test]
fn gen_libsvm_trains_and_unlabelled_csv_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = run(
        p,
        &[
            "gen", "--n", "100", "--d", "4", "--format", "libsvm", "-o", "d.svm",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(p, &["train", "d.svm", "-o", "m.json", "--algo", "online"]);
    assert!(o.status.success(), "{}", stderr(&o));
    write(p, "new.csv", "0.5,0.5,-0.2,0.1\n-0.9,0.1,0.3,0.3\n");
    let o = run(p, &["predict", "m.json", "new.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2);
    let o = run(p, &["predict", "m.json", "new.csv", "--label-col", "none"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn assert_input_error(args: &[&str], files: &[(&str, &str)], want: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (name, text) in files {
        write(p, name, text);
    }
    let o = run(p, args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    for w in want {
        assert!(err.contains(w), "{args:?}: expected {w:?} in {err}");
    }
    assert!(
        !p.join("out.json").exists(),
        "{args:?}: no output file on failure"
    );
}

#[test]
fn bad_input_exits_2_and_names_the_place() {
    let train = |f: &'static str| -> Vec<&'static str> {
        vec!["train", f, "-o", "out.json", "--backend", "cpu"]
    };
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "x,label\n1,1\nnan,-1\n")],
        &["a.csv", "line 3, column 1", "NaN"],
    );
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "1,2,1\n2,inf,-1\n")],
        &["line 2, column 2", "infinity"],
    );
    assert_input_error(&train("a.csv"), &[("a.csv", "")], &["a.csv", "empty"]);
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "x,y,label\n")],
        &["header but no data"],
    );
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "1,2,1\n3,-1\n")],
        &["line 2", "ragged"],
    );
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "1,2,1\n3,abc,-1\n")],
        &["line 2, column 2", "\"abc\""],
    );
    assert_input_error(
        &train("a.csv"),
        &[("a.csv", "1,2,1\n3,4,1\n")],
        &["only one class"],
    );
    assert_input_error(
        &train("a.svm"),
        &[("a.svm", "1 0:3\n")],
        &["a.svm", "line 1", "index 0"],
    );
    assert_input_error(
        &train("a.svm"),
        &[("a.svm", "1 1:3\n-1 2:1 2:4\n")],
        &["line 2", "duplicate index 2"],
    );
    assert_input_error(
        &train("a.svm"),
        &[("a.svm", "1 4:3 2:1\n")],
        &["not ascending"],
    );
    assert_input_error(
        &train("a.svm"),
        &[("a.svm", "1 4;3\n")],
        &["malformed pair"],
    );
    assert_input_error(&train("missing.csv"), &[], &["missing.csv"]);
    // Features near the f32 limit overflow the weights unscaled: a clear error, no unreadable
    // model.
    let mut unscaled = train("big.csv");
    unscaled.extend(["--scale", "none"]);
    assert_input_error(
        &unscaled,
        &[(
            "big.csv",
            "a,b,label\n3e38,1,1\n3e38,-1,-1\n2e38,2,1\n-3e38,0,-1\n",
        )],
        &["overflowed", "rescale"],
    );
    // A huge index would need tens of GiB stored densely: refused with the sizes, no abort.
    assert_input_error(
        &train("h.svm"),
        &[("h.svm", "1 1:1\n-1 4000000000:1\n")],
        &["h.svm", "4000000000 features", "GiB"],
    );
    assert_input_error(
        &["train", "a.csv", "--lr", "2"],
        &[("a.csv", "1,1\n2,-1\n")],
        &["--lr", "(0, 1]", "2"],
    );
    assert_input_error(
        &["train", "a.csv", "--label-col", "nope"],
        &[("a.csv", "a,b\n1,1\n2,-1\n")],
        &["no column named \"nope\""],
    );
}

#[test]
fn predict_and_eval_reject_mismatched_data_and_bad_models() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(run(p, &["gen", "--n", "50", "--d", "3", "-o", "d.csv"])
        .status
        .success());
    assert!(run(p, &["train", "d.csv", "-o", "m.json"]).status.success());
    write(p, "wide.csv", "1,2,3,4,5,1\n");
    let o = run(p, &["predict", "m.json", "wide.csv", "-o", "out.txt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("expects 3 features, the data has 5"),
        "{}",
        stderr(&o)
    );
    assert!(!p.join("out.txt").exists());

    write(p, "other.csv", "1,2,3,7\n");
    let o = run(p, &["eval", "m.json", "other.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("label \"7\" is not one of the model's classes"),
        "{}",
        stderr(&o)
    );

    write(
        p,
        "bad.json",
        "{\"format\": \"rosenblatt-model\", \"version\": 1, \"weights\": [",
    );
    let o = run(p, &["predict", "bad.json", "d.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.json") && stderr(&o).contains("invalid JSON"),
        "{}",
        stderr(&o)
    );
    write(
        p,
        "other.json",
        "{\"format\": \"something-else\", \"version\": 1}",
    );
    let o = run(p, &["eval", "other.json", "d.csv"]);
    assert!(
        stderr(&o).contains("format is \"something-else\""),
        "{}",
        stderr(&o)
    );
    let newer = std::fs::read_to_string(p.join("m.json"))
        .unwrap()
        .replace("\"version\": 7", "\"version\": 9");
    write(p, "newer.json", &newer);
    let o = run(p, &["eval", "newer.json", "d.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("version 9 is newer"), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["train"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(dir.path(), &["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(
        dir.path(),
        &["gen", "--n", "10", "--d", "2", "--margin", "1.5"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--margin"));
}

#[test]
fn demo_runs_without_files() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        dir.path(),
        &["demo", "--backend", "cpu", "--n", "5000", "--d", "8"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("online") && out.contains("batch") && out.contains("(R/gamma)^2"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "demo writes no file"
    );
}

#[test]
fn eval_reports_auc_and_per_class_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(run(
        p,
        &["gen", "--n", "400", "--d", "3", "--noise", "0.1", "-o", "d.csv"]
    )
    .status
    .success());
    assert!(
        run(p, &["train", "d.csv", "--algo", "averaged", "-o", "m.json"])
            .status
            .success()
    );
    let o = run(p, &["eval", "m.json", "d.csv", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let auc = v["auc"].as_f64().unwrap();
    assert!(auc > 0.8 && auc < 1.0, "noisy labels: AUC {auc}");
    assert_eq!(v["per_class"].as_array().unwrap().len(), 2);
    let pc = &v["per_class"][1];
    assert_eq!(v["precision"], pc["precision"]);
    assert_eq!(v["recall"], pc["recall"]);
    let support: u64 = v["per_class"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["support"].as_u64().unwrap())
        .sum();
    assert_eq!(support, 400);
    let o = run(p, &["eval", "m.json", "d.csv"]);
    assert!(
        stdout(&o).contains("AUC") && stdout(&o).contains("F1"),
        "{}",
        stdout(&o)
    );

    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/digits.csv"),
        p.join("digits.csv"),
    )
    .unwrap();
    assert!(run(
        p,
        &[
            "train",
            "digits.csv",
            "--algo",
            "online",
            "--epochs",
            "20",
            "-o",
            "mc.json"
        ]
    )
    .status
    .success());
    let o = run(p, &["eval", "mc.json", "digits.csv", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(v["auc"].is_null());
    assert_eq!(v["per_class"].as_array().unwrap().len(), 10);
    assert!(v["macro_f1"].as_f64().unwrap() > 0.9);
    let o = run(p, &["eval", "mc.json", "digits.csv"]);
    assert!(stdout(&o).contains("macro"), "{}", stdout(&o));
}

#[test]
fn storage_is_chosen_when_exact_and_refused_with_the_value_when_not() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut text = String::from("a,b,c,label\n");
    for i in 0..200 {
        let (a, b, c) = (i % 7, (i * 5) % 200, (i * 3) % 11);
        text.push_str(&format!("{a},{b},{c},{}\n", i32::from(a + c > 8)));
    }
    write(p, "u.csv", &text);
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "train",
            "u.csv",
            "--backend",
            "cpu",
            "--json",
            "--epochs",
            "30",
        ];
        if !args.contains(&"--scale") {
            a.extend_from_slice(&["--scale", "none"]);
        }
        if !args.contains(&"--algo") {
            a.extend_from_slice(&["--algo", "batch"]);
        }
        a.extend_from_slice(args);
        let o = run(p, &a);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_str(stdout(&o).trim()).unwrap()
    };
    let auto = json(&[]);
    assert_eq!(auto["storage"], "u8");
    // Every storage that holds the values gives the same run, bit for bit.
    for s in ["f32", "f16", "u8"] {
        let r = json(&["--storage", s]);
        assert_eq!(r["storage"], s);
        for key in [
            "mistakes_per_epoch",
            "criterion_per_epoch",
            "update_norm_per_epoch",
        ] {
            assert_eq!(r[key], auto[key], "--storage {s}: {key}");
        }
    }
    // Scaled features are not integers: auto keeps f32; the online form keeps f32.
    assert_eq!(json(&["--scale", "standard"])["storage"], "f32");
    assert_eq!(json(&["--algo", "online"])["storage"], "f32");
    assert_input_error(
        &[
            "train",
            "u.csv",
            "-o",
            "out.json",
            "--storage",
            "i8",
            "--scale",
            "none",
        ],
        &[("u.csv", &text)],
        &[
            "u.csv",
            "row 27, feature 2 is 130",
            "i8 storage",
            "-128 to 127",
        ],
    );
    assert_input_error(
        &["train", "u.csv", "-o", "out.json", "--storage", "u16"],
        &[("u.csv", &text)],
        &["unknown storage"],
    );
}

#[test]
fn train_with_no_flags_is_the_averaged_perceptron_with_its_own_stopping_rule() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // 10% of the labels flipped: never separable, so the patience rule decides.
    let o = run(
        p,
        &[
            "gen", "--n", "2000", "--d", "5", "--noise", "0.1", "--seed", "3", "-o", "n.csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["train", "n.csv", "--json"];
        a.extend_from_slice(args);
        let o = run(p, &a);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_str(stdout(&o).trim()).unwrap()
    };
    let epochs = |v: &serde_json::Value| {
        (
            v["epochs"].as_u64().unwrap(),
            v["best_epoch"].as_u64().unwrap(),
        )
    };
    let default = json(&[]);
    assert_eq!(default["algo"], "averaged");
    assert_eq!(default["stop_reason"], "patience");
    let (e, b) = epochs(&default);
    assert!(e <= b + 10, "{e} epochs, best {b}");
    // The defaults are patience 10 without a floor for the online averaged perceptron, and
    // patience 30 with a floor of 1% for its batch form and every other rule.
    let same = |a: &serde_json::Value, b: &serde_json::Value| {
        a["mistakes_per_epoch"] == b["mistakes_per_epoch"] && a["stop_reason"] == b["stop_reason"]
    };
    assert!(same(
        &default,
        &json(&["--patience", "10", "--patience-floor", "0"])
    ));
    assert!(!same(&default, &json(&["--patience", "30"])));
    for algo in [
        &["--algo", "averaged", "--mode", "batch"][..],
        &["--algo", "online"],
    ] {
        let explicit = [algo, &["--patience", "30", "--patience-floor", "0.01"]].concat();
        assert!(same(&json(algo), &json(&explicit)), "{algo:?}");
    }
}

#[test]
fn export_writes_an_onnx_graph_of_linear_models_and_refuses_voted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(run(p, &["gen", "--n", "300", "--d", "3", "-o", "d.csv"])
        .status
        .success());
    let o = run(p, &["train", "d.csv", "-o", "m.json", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(p, &["export", "m.json", "-o", "m.onnx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-> m.onnx (ONNX, opset 13"),
        "{}",
        stderr(&o)
    );
    let bytes = std::fs::read(p.join("m.onnx")).unwrap();
    // A protobuf ModelProto: ir_version (field 1, varint) first, then the producer's name;
    // the binary graph's ops by name (onnxruntime runs it in python/tests).
    assert_eq!(&bytes[..2], &[0x08, 0x07]);
    let text = String::from_utf8_lossy(&bytes);
    for op in [
        "rosenblatt",
        "MatMul",
        "GreaterOrEqual",
        "Gather",
        "label",
        "scores",
    ] {
        assert!(text.contains(op), "{op} missing");
    }
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "voted",
            "-o",
            "v.json",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(p, &["export", "v.json", "-o", "v.onnx"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a voted model has no ONNX form"),
        "{}",
        stderr(&o)
    );
    assert!(!p.join("v.onnx").exists());
    // The output must not be the model itself.
    let o = run(p, &["export", "m.json", "-o", "m.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn class_weights_on_unscaled_wide_features_get_a_hint_and_scaling_makes_them_act() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // Two overlapping classes with features of size about 30 (the bias coordinate is 1).
    let mut text = String::from("a,b,label\n");
    let mut s = 7u64;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
    };
    for i in 0..200 {
        let c = i % 2;
        let off = if c == 0 { -8.0 } else { 8.0 };
        text += &format!("{:.3},{:.3},{c}\n", off + 30.0 * next(), 30.0 * next());
    }
    write(p, "d.csv", &text);
    let args = |extra: &[&'static str]| {
        let mut v = vec![
            "train",
            "d.csv",
            "--backend",
            "cpu",
            "--class-weight",
            "0=1000,1=0.0001",
            "--algo",
            "batch",
        ];
        v.extend_from_slice(extra);
        v
    };
    let o = run(p, &args(&["--scale", "none", "-o", "m.json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("hint: class weights move the bias"),
        "{}",
        stderr(&o)
    );
    let o = run(p, &args(&["--scale", "maxabs", "-o", "s.json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("hint: class weights"),
        "{}",
        stderr(&o)
    );
    // Scaled, the heavy class (0) takes the predictions.
    let o = run(p, &["predict", "s.json", "d.csv", "--backend", "cpu"]);
    let zeros = stdout(&o).lines().filter(|l| *l == "0").count();
    assert!(zeros > 190, "{zeros} of 200 predicted 0");
}

/// scikit-learn's `check_class_weight_classifiers` on the CLI: its three noisy blobs
/// (tests/data/blobs3_*.csv: `make_blobs(centers=3, random_state=0, cluster_std=20)` split
/// in halves by `train_test_split(test_size=0.5, random_state=0)`), class weights 1000 :
/// 0.0001 : 0.0001, patience 20; the check asks the heavy class for > 87% of the test rows
/// (scikit-learn's Perceptron: 96%). One-vs-rest weighs as scikit-learn does (a class weight
/// in the class's own head only): the online rule unscaled gets 49 of 50 (weighing the rows'
/// class weights in every head, as before: 42). Scaled, every rule gets them all.
#[test]
fn class_weights_favour_the_heavy_class_as_scikit_learns_check_asks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (train, test) = (data.join("blobs3_train.csv"), data.join("blobs3_test.csv"));
    let heavy = |extra: &[&str]| {
        let mut args = vec![
            "train",
            train.to_str().unwrap(),
            "--backend",
            "cpu",
            "--class-weight",
            "0=1000,1=0.0001,2=0.0001",
            "--patience",
            "20",
            "-o",
            "m.json",
        ];
        args.extend_from_slice(extra);
        let o = run(p, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = run(p, &["predict", "m.json", test.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).lines().filter(|l| *l == "0").count()
    };
    for algo in ["online", "pa"] {
        let n = heavy(&["--algo", algo, "--multiclass", "ovr"]);
        assert!(
            n as f64 / 50.0 > 0.87,
            "{algo} one-vs-rest: {n} of 50 predicted 0"
        );
    }
    for algo in ["averaged", "batch", "pocket", "online"] {
        let n = heavy(&["--algo", algo, "--scale", "maxabs"]);
        assert!(
            n as f64 / 50.0 > 0.87,
            "{algo} scaled: {n} of 50 predicted 0"
        );
    }
}
