//! Model files are a public format. Files written by version 1 of the format (committed under
//! tests/fixtures/v1, one per algorithm and kind, with the `predict --margins` output the
//! writing binary gave) must load and predict as before (the same labels, the margins to the
//! dot product's rounding); a model written now reads back equal; and a file that is not a
//! valid model of its kind is refused whole, with a message naming what is wrong, never a
//! panic or a wrong number of predictions.

use crate::common;

use std::path::{Path, PathBuf};

use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_train::model::{Model, ModelKind};

fn fixtures() -> PathBuf {
    fixtures_of("v1")
}

fn fixtures_of(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(version)
}

/// Every committed v1 model with the data file it was trained on.
fn v1_models() -> Vec<(String, PathBuf, &'static str)> {
    models_of(&fixtures())
}

/// Every committed model under `dir` with the data file it was trained on.
fn models_of(dir: &Path) -> Vec<(String, PathBuf, &'static str)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if let Some(stem) = name.strip_suffix(".json") {
            let multi =
                stem.starts_with("multiclass") || stem.contains("multi") || stem.starts_with("ovr");
            let data = if multi { "multi.csv" } else { "binary.csv" };
            out.push((stem.to_string(), p, data));
        }
    }
    out.sort();
    out
}

/// The model `m` written again: the committed file's layout exactly; returns it.
fn writes_as_committed(m: &Model, path: &Path, stem: &str) -> serde_json::Value {
    let mut buf = Vec::new();
    m.write(&mut buf).unwrap();
    let new: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    let old: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(new, old, "{stem}: layout");
    new
}

/// The model file `text` after `edit` is refused as an input error whose message holds
/// `words`.
fn refused_with(text: &str, edit: Box<dyn Fn(&mut serde_json::Value)>, words: &str) {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    edit(&mut v);
    let e = Model::from_json(Path::new("bad.json"), &v.to_string()).unwrap_err();
    assert!(e.is_input_error(), "{e}");
    assert!(e.to_string().contains(words), "{words:?} not in {e}");
}

/// `predict --margins` of the model `stem` on `data` (both in `dir`) prints the committed
/// `stem.expected.tsv`: the same rows, the same labels, and the same margins up to the
/// rounding of the dot product (since the dot adds each product with one fused multiply-add,
/// a margin can differ from one recorded with a separate multiply and add in its last bits;
/// a wrong weight, bias or feature moves it by far more than 1e-5).
fn predicts_as_recorded(dir: &Path, stem: &str, data: &str) {
    let model = format!("{stem}.json");
    let args = ["predict", &model, data, "--margins", "--backend", "cpu"];
    let o = common::run(dir, &args);
    assert!(o.status.success(), "{stem}: {}", common::stderr(&o));
    let want = std::fs::read_to_string(dir.join(format!("{stem}.expected.tsv"))).unwrap();
    let got = common::stdout(&o);
    assert_eq!(got.lines().count(), want.lines().count(), "{stem}: rows");
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        let (g, w): (Vec<&str>, Vec<&str>) = (g.split('\t').collect(), w.split('\t').collect());
        assert_eq!(g.len(), w.len(), "{stem} row {i}: {g:?} against {w:?}");
        assert_eq!(g[0], w[0], "{stem} row {i}: the label differs");
        for (a, b) in g[1..].iter().zip(&w[1..]) {
            let (a, b): (f32, f32) = (a.parse().unwrap(), b.parse().unwrap());
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "{stem} row {i}: margin {a} against the recorded {b}"
            );
        }
    }
}

#[test]
fn v1_files_of_every_kind_load_and_predict_as_before() {
    let models = v1_models();
    let mut kinds: Vec<ModelKind> = Vec::new();
    let dir = fixtures();
    for (stem, path, data) in &models {
        let m = Model::load(path).unwrap_or_else(|e| panic!("{stem}: {e}"));
        kinds.push(m.kind());
        predicts_as_recorded(&dir, stem, data);
    }
    for k in [
        ModelKind::Binary,
        ModelKind::Multiclass,
        ModelKind::Ovr,
        ModelKind::Voted,
        ModelKind::Kernel,
    ] {
        assert!(kinds.contains(&k), "no v1 fixture of kind {k:?}");
    }
    assert!(models.len() >= 19, "{} fixtures", models.len());
}

#[test]
fn v2_files_load_and_predict_as_before() {
    // Version 2: scaling, class weights, validation, patience, voted models of 3 classes.
    let dir = fixtures_of("v2");
    let models = models_of(&dir);
    assert!(models.len() >= 7, "{} fixtures", models.len());
    let mut scaled = 0;
    for (stem, path, data) in &models {
        let m = Model::load(path).unwrap_or_else(|e| panic!("{stem}: {e}"));
        scaled += usize::from(m.scaling().is_some());
        predicts_as_recorded(&dir, stem, data);
        // Read back equal, and the same JSON.
        let mut buf = Vec::new();
        m.write(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let old: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let new: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(new, old, "{stem}: layout");
    }
    assert!(scaled >= 4, "{scaled} scaled fixtures");
    // A scaling of the wrong length or with a zero factor is refused whole.
    for (field, edit) in [
        ("offset", serde_json::json!([0.0])),
        ("factor", serde_json::json!([1.0, 0.0, 1.0])),
    ] {
        let path = dir.join("binary-standard.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["scaling"][field] = edit;
        let e = Model::from_json(Path::new("bad.json"), &v.to_string()).unwrap_err();
        assert!(e.to_string().contains("scaling"), "{e}");
    }
    // A scaling that sends ordinary inputs past the f32 range still scores every row (the
    // scaled values saturate, as inputs that large would): found by the long fuzz run.
    let path = dir.join("binary-standard.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["scaling"]["factor"] = serde_json::json!([3e38, 3e38, 3e38]);
    v["scaling"]["offset"] = serde_json::json!([-3e38, 0.0, 0.0]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("huge.json"), v.to_string()).unwrap();
    std::fs::copy(dir.join("binary.csv"), tmp.path().join("binary.csv")).unwrap();
    let o = common::run(
        tmp.path(),
        &["predict", "huge.json", "binary.csv", "--backend", "cpu"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).lines().count(), 40);
    // A voted model whose weight rows are not counts x classes is refused.
    let path = dir.join("voted-multi.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["counts"].as_array_mut().unwrap().push(3.into());
    let e = Model::from_json(Path::new("bad.json"), &v.to_string()).unwrap_err();
    assert!(e.to_string().contains("rows per voted vector"), "{e}");
}

#[test]
fn models_written_now_read_back_equal_and_keep_the_v1_layout_plus_the_v2_fields() {
    for (stem, path, _) in v1_models() {
        let m = Model::load(&path).unwrap();
        let mut buf = Vec::new();
        m.write(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let back = Model::from_json(Path::new("again.json"), &text).unwrap();
        assert_eq!(back, m, "{stem}");
        // The same JSON as the v1 file, but for the "bias": 0.0 that v1 wrote for kinds
        // without a single bias.
        let mut old: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if m.kind() != ModelKind::Binary {
            assert_eq!(old["bias"], 0.0, "{stem}");
            old.as_object_mut().unwrap().remove("bias");
        }
        // Version 2 adds the new training parameters (with the values that mean "not used")
        // and the report's best epoch; without them it is the v1 layout.
        let mut new: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(new["version"], 2, "{stem}");
        new["version"] = 1.into();
        let params = new["params"].as_object_mut().unwrap();
        assert_eq!(params.remove("patience"), Some(serde_json::Value::Null));
        assert_eq!(params.remove("scale"), Some("none".into()));
        assert!(params.remove("min_improvement").is_some());
        assert!(params.remove("patience_floor").is_some());
        if let Some(t) = new["training"].as_object_mut() {
            assert_eq!(t.remove("best_epoch"), Some(0.into()), "{stem}");
        }
        assert_eq!(new, old, "{stem}: layout");
    }
}

/// Loads `path` after `edit` has changed its JSON; returns the error text.
fn refused(stem: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let path = fixtures().join(format!("{stem}.json"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut v);
    match Model::from_json(Path::new("bad.json"), &v.to_string()) {
        Ok(_) => panic!("{stem}: an invalid model was accepted: {v}"),
        Err(e) => {
            assert!(e.is_input_error(), "{e}");
            let s = e.to_string();
            assert!(s.starts_with("bad.json: corrupt model: "), "{s}");
            s
        }
    }
}

#[test]
fn invalid_models_are_refused_whole_with_the_reason() {
    use serde_json::json;
    type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "multiclass-argmax",
            Box::new(|v| {
                v["class_weights"][1].as_array_mut().unwrap().pop();
            }),
            "class_weights[1] has 2 values for 3 features",
        ),
        (
            "multiclass-argmax",
            Box::new(|v| {
                v["class_weights"].as_array_mut().unwrap().pop();
                v["class_bias"].as_array_mut().unwrap().pop();
            }),
            "2 weight rows for 3 classes",
        ),
        (
            "voted",
            Box::new(|v| {
                v["class_weights"] = json!([]);
                v["class_bias"] = json!([]);
                v["counts"] = json!([]);
            }),
            "at least one vector",
        ),
        ("voted", Box::new(|v| v["counts"][0] = json!(0)), "count 0"),
        (
            "voted",
            Box::new(|v| {
                v["counts"].as_array_mut().unwrap().pop();
            }),
            "counts for",
        ),
        (
            "binary-batch",
            Box::new(|v| v["class_weights"] = json!([[1.0, 2.0, 3.0]])),
            "a binary model has no field \"class_weights\"",
        ),
        (
            "binary-batch",
            Box::new(|v| v["kernel"] = json!({"kernel": "linear"})),
            "a binary model has no field \"kernel\"",
        ),
        (
            "binary-batch",
            Box::new(|v| v["weights"] = json!([1.0, 2.0])),
            "weights has 2 values for 3 features",
        ),
        (
            "binary-batch",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("weights");
            }),
            "needs the field \"weights\"",
        ),
        (
            "binary-batch",
            Box::new(|v| v["classes"] = json!(["a", "a"])),
            "listed twice",
        ),
        (
            "binary-batch",
            Box::new(|v| v["classes"] = json!(["a", "b", "c"])),
            "needs 2 classes, found 3",
        ),
        (
            "binary-batch",
            Box::new(|v| v["weigths"] = json!([1.0])),
            "unknown field",
        ),
        (
            "binary-batch",
            Box::new(|v| v["n_features"] = json!(0)),
            "n_features is 0",
        ),
        (
            "binary-batch",
            Box::new(|v| v["params"]["lr"] = json!(5.0)),
            "params: learning rate",
        ),
        (
            "ovr",
            Box::new(|v| v["bias"] = json!(1.5)),
            "an ovr model has no field \"bias\"",
        ),
        (
            "kernel-rbf",
            Box::new(|v| v["kernel"]["gamma"] = json!(-1.0)),
            "kernel: kernel gamma should be positive and finite",
        ),
        (
            "kernel-poly",
            Box::new(|v| v["kernel"]["degree"] = json!(4294967295u64)),
            "kernel degree should be between 1 and 16",
        ),
        (
            "kernel-linear",
            Box::new(|v| {
                v["support_vectors"] = json!([]);
                v["dual_coef"] = json!([]);
                v["n_features"] = json!(1u64 << 40);
            }),
            "at least one support vector",
        ),
        (
            "kernel-linear",
            Box::new(|v| {
                v["dual_coef"].as_array_mut().unwrap().pop();
            }),
            "dual coefficients",
        ),
        (
            "kernel-linear",
            Box::new(|v| v["weights"] = json!([0.0, 0.0, 0.0])),
            "a kernel model has no field \"weights\"",
        ),
        (
            "binary-batch",
            Box::new(|v| v["version"] = json!(0)),
            "version 0",
        ),
    ];
    for (stem, edit, want) in cases {
        let got = refused(stem, edit);
        assert!(got.contains(want), "{stem}: expected {want:?} in {got:?}");
    }
}

#[test]
fn a_model_that_loads_predicts_one_line_per_row() {
    // Every fixture, on data with the model's feature count but a different row count.
    let ds = rosenblatt_core::data::Dataset::new(
        (0..7 * 3).map(|i| (i % 5) as f32 - 2.0).collect(),
        7,
        3,
        None,
        "rows",
    );
    for (stem, path, _) in v1_models() {
        let m = Model::load(&path).unwrap();
        let raw = m.raw_scores(&ds, &CpuBackend::new()).unwrap();
        assert_eq!(m.predict(&raw).len(), 7, "{stem}");
        assert_eq!(m.decision_values(&raw).len(), 7, "{stem}");
    }
}

#[test]
fn v3_voted_files_load_predict_as_recorded_and_are_checked_whole() {
    // Version 3: the voted perceptron kept as its first vector and one step per mistake.
    let dir = fixtures_of("v3");
    let models = models_of(&dir);
    assert_eq!(models.len(), 2, "{models:?}");
    for (stem, path, data) in &models {
        let m = Model::load(path).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(m.kind(), ModelKind::Voted);
        predicts_as_recorded(&dir, stem, data);
        let new = writes_as_committed(&m, path, stem);
        assert_eq!(new["version"], 3);
    }
    let path = dir.join("voted.json");
    let text = std::fs::read_to_string(path).unwrap();
    for (edit, words) in [
        (
            Box::new(|v: &mut serde_json::Value| v["vote_rows"][0] = 100_000.into())
                as Box<dyn Fn(&mut serde_json::Value)>,
            "support rows",
        ),
        (
            Box::new(|v| {
                v["vote_coef"].as_array_mut().unwrap().pop();
            }),
            "vote_coef has",
        ),
        (
            Box::new(|v| {
                v["counts"].as_array_mut().unwrap().pop();
            }),
            "one count a vector",
        ),
        (
            Box::new(|v| {
                v["vote_support"][0]["idx"]
                    .as_array_mut()
                    .unwrap()
                    .reverse();
            }),
            "ascend",
        ),
        (
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("vote_coef");
            }),
            "needs all of",
        ),
        (Box::new(|v| v["version"] = 2.into()), "version 3"),
        (
            Box::new(|v| {
                let n = v["counts"].as_array().unwrap().len();
                v["counts"] = serde_json::json!(vec![0; n]);
            }),
            "none votes",
        ),
    ] {
        refused_with(&text, edit, words);
    }
}

#[test]
fn v4_typed_labels_and_feature_names_load_predict_as_recorded_and_are_checked_whole() {
    // Version 4: labels that came typed from Python (integers past 2^53, strings that read as
    // one number) and a DataFrame's feature names.
    let dir = fixtures_of("v4");
    let models = models_of(&dir);
    assert_eq!(models.len(), 2, "{models:?}");
    for (stem, path, data) in &models {
        let m = Model::load(path).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert!(m.label_type().is_some(), "{stem}");
        predicts_as_recorded(&dir, stem, data);
        let new = writes_as_committed(&m, path, stem);
        assert_eq!(new["version"], 4);
    }
    let big = Model::load(&dir.join("bigint.json")).unwrap();
    assert_eq!(big.classes(), ["100000000000000000", "100000000000000001"]);
    assert_eq!(big.feature_names().unwrap(), ["height", "width", "depth"]);
    // The CLI reads the file's integer labels as two classes (one f64, two integers), as
    // Python scored it: 57 of 60.
    let o = common::run(
        &dir,
        &[
            "eval",
            "bigint.json",
            "binary.csv",
            "--json",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(e["accuracy"], 0.95);
    // Strings that read as one number cannot be told apart in a text file: refused, named.
    let o = common::run(
        &dir,
        &[
            "eval",
            "strings-multi.json",
            "multi.csv",
            "--backend",
            "cpu",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("cannot tell them apart"),
        "{}",
        common::stderr(&o)
    );
    let text = std::fs::read_to_string(dir.join("bigint.json")).unwrap();
    for (edit, words) in [
        (
            Box::new(|v: &mut serde_json::Value| v["version"] = 3.into())
                as Box<dyn Fn(&mut serde_json::Value)>,
            "version 4",
        ),
        (
            Box::new(|v| v["classes"][0] = "x".into()),
            "not a label of the type",
        ),
        (
            Box::new(|v| v["classes"][1] = "+100000000000000000".into()),
            "listed twice",
        ),
        (
            Box::new(|v| {
                v["feature_names"].as_array_mut().unwrap().pop();
            }),
            "2 names for 3 features",
        ),
        (
            Box::new(|v| v["label_type"] = "complex".into()),
            "unknown variant",
        ),
    ] {
        refused_with(&text, edit, words);
    }
}

#[test]
fn v5_hashing_loads_predicts_raw_text_as_recorded_and_is_checked_whole() {
    // Version 5: a model trained on Vowpal Wabbit text (`train binary.vw --hash-bits 6 -q ab
    // --algo batch --backend cpu`) records its hashing, and predict hashes the raw text so.
    let dir = fixtures_of("v5");
    let path = dir.join("hashed.json");
    let m = Model::load(&path).unwrap();
    let h = m.hashing().expect("hashing kept");
    assert_eq!(
        (h.bits, h.quadratic.as_slice()),
        (6, &["ab".to_string()][..])
    );
    assert_eq!(m.n_features(), 64);
    predicts_as_recorded(&dir, "hashed", "binary.vw");
    let new = writes_as_committed(&m, &path, "hashed");
    assert_eq!(new["version"], 5);
    let text = std::fs::read_to_string(&path).unwrap();
    for (edit, words) in [
        (
            Box::new(|v: &mut serde_json::Value| v["version"] = 4.into())
                as Box<dyn Fn(&mut serde_json::Value)>,
            "version 5",
        ),
        (
            Box::new(|v| v["hashing"]["bits"] = 7.into()),
            "2^7 = 128 columns, but the model has 64 features",
        ),
        (
            Box::new(|v| v["hashing"]["quadratic"][0] = "abc".into()),
            "two namespaces",
        ),
        (
            Box::new(|v| v["hashing"]["sign"] = "both".into()),
            "unknown variant",
        ),
        (
            Box::new(|v| v["hashing"]["seed"] = 1.into()),
            "unknown field",
        ),
    ] {
        refused_with(&text, edit, words);
    }
}

#[test]
fn a_scaled_model_scores_block_by_block_as_one_scaled_copy() {
    // 100 rows of 70,000 features: the model scales 59 rows (16 MiB) at a time when it
    // scores, never all of X, and gives the bits of scoring one scaled copy.
    use rosenblatt_core::params::{Scale, TrainParams};
    let (n, d) = (100, 70_000);
    let x: Vec<f32> = (0..n * d)
        .map(|i| ((i * 7919 % 13) as f32 - 6.0) * (1 + i % d % 5) as f32)
        .collect();
    let names: Vec<String> = (0..n).map(|i| ((i * 31 % 7) % 2).to_string()).collect();
    let ds = rosenblatt_core::data::Dataset::new(
        x,
        n,
        d,
        Some(rosenblatt_core::data::Labels::from_names(&names)),
        "rows",
    );
    let params = TrainParams::for_algo(rosenblatt::Algo::Batch)
        .scale(Scale::Maxabs)
        .epochs(2)
        .validate()
        .unwrap();
    let t = rosenblatt_train::algo::train(&ds, &params, &CpuBackend::new(), None, &mut ()).unwrap();
    let blocks = t.model.raw_scores(&ds, &CpuBackend::new()).unwrap();
    let mut x = ds.x.clone();
    t.model
        .scaling()
        .unwrap()
        .apply_matrix(
            &mut x,
            n,
            d,
            &ds.source,
            rosenblatt_core::data::scale::Overflow::Saturate,
        )
        .unwrap();
    let whole = rosenblatt_core::data::Dataset::from_matrix(x, n, d, None, ds.source.clone());
    let copy = t
        .model
        .scores_of_scaled(&whole, &CpuBackend::new())
        .unwrap();
    assert_eq!(blocks.len(), n);
    assert!(blocks
        .iter()
        .zip(&copy)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn rows_in_memory_score_as_the_data_set_does_bit_for_bit() {
    // `Model::scores_of_rows` (what Python's predict calls: rows widened and scaled a block
    // at a time, never a data set) against `raw_scores` on the CPU backend, for binary,
    // multiclass and one-vs-rest models, unscaled and with each scaling, f32 and f64 rows,
    // 1 row, a block's worth and more than one thread's share (257 features, 700 rows).
    use rosenblatt_core::params::{Algo, MulticlassStrategy, Scale, TrainParams};
    use rosenblatt_train::model::DenseRows;
    let (n, d) = (700, 257);
    let x: Vec<f32> = (0..n * d)
        .map(|i| ((i * 7919 % 13) as f32 - 6.0) * 0.37 * (1 + i % d % 5) as f32)
        .collect();
    let wide: Vec<f64> = x.iter().map(|&v| v as f64 * (1.0 + 1e-12)).collect(); // rounds back to x
    let cpu = CpuBackend::new();
    for (k, strategy) in [
        (2, MulticlassStrategy::Direct),
        (4, MulticlassStrategy::Direct),
        (4, MulticlassStrategy::Ovr),
    ] {
        let names: Vec<String> = (0..n)
            .map(|i| ((x[i * d] + x[i * d + 1] > 0.0) as usize + 2 * (i % (k / 2))).to_string())
            .collect();
        let ds = rosenblatt_core::data::Dataset::new(
            x.clone(),
            n,
            d,
            Some(rosenblatt_core::data::Labels::from_names(&names)),
            "rows",
        );
        for scale in [Scale::None, Scale::Maxabs, Scale::Standard, Scale::Minmax] {
            let params = TrainParams::for_algo(Algo::Averaged)
                .multiclass(strategy)
                .scale(scale)
                .epochs(3)
                .validate()
                .unwrap();
            let t = rosenblatt_train::algo::train(&ds, &params, &cpu, None, &mut ()).unwrap();
            let m = &t.model;
            for rows in [1, 63, n] {
                let part = rosenblatt_core::data::Dataset::new(
                    x[..rows * d].to_vec(),
                    rows,
                    d,
                    None,
                    "rows",
                );
                let want = m.raw_scores(&part, &cpu).unwrap();
                let got = m
                    .scores_of_rows(DenseRows::F32(&x[..rows * d]), rows, Path::new("rows"))
                    .unwrap()
                    .expect("a linear model scores rows in memory");
                let same = |a: &[f32], b: &[f32]| {
                    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
                };
                assert!(
                    same(&got, &want),
                    "{k} classes, {strategy:?}, {scale:?}, {rows} rows"
                );
                // f64 rows are rounded to f32 first: the scores of the rounded rows.
                let got = m
                    .scores_of_rows(DenseRows::F64(&wide[..rows * d]), rows, Path::new("rows"))
                    .unwrap()
                    .unwrap();
                assert!(
                    same(&got, &want),
                    "f64: {k} classes, {scale:?}, {rows} rows"
                );
            }
        }
    }
    // A value that is not finite is an error naming its row and column (from 0); so is an
    // f64 past f32's range; a row count that disagrees with the values is refused.
    let t = rosenblatt_train::algo::train(
        &common::separable(50, 3, 0.1, 1).data,
        &TrainParams::for_algo(Algo::Batch).validate().unwrap(),
        &cpu,
        None,
        &mut (),
    )
    .unwrap();
    let mut bad = vec![1.0f32; 3 * 40];
    bad[3 * 17 + 2] = f32::NAN;
    let e = t
        .model
        .scores_of_rows(DenseRows::F32(&bad), 40, Path::new("X"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("X holds NaN at row 17, column 2"), "{e}");
    let mut far = vec![1.0f64; 3 * 40];
    far[3 * 39] = 1e300;
    let e = t
        .model
        .scores_of_rows(DenseRows::F64(&far), 40, Path::new("X"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("X holds 1e300 at row 39, column 0"), "{e}");
    assert!(t
        .model
        .scores_of_rows(DenseRows::F32(&bad), 39, Path::new("X"))
        .is_err());
}

#[test]
fn v6_csv_hashing_loads_predicts_a_csv_as_recorded_and_is_checked_whole() {
    // Version 6: a model trained on CSV with categorical columns (`train categorical.csv
    // --categorical color,shape --hash-bits 6 --algo batch --backend cpu`) records them and
    // the training file's feature columns, and predict hashes a CSV file so.
    let dir = fixtures_of("v6");
    let path = dir.join("hashed.json");
    let m = Model::load(&path).unwrap();
    let h = m.hashing().expect("hashing kept");
    assert_eq!(h.categorical, ["color", "shape"]);
    let cols = ["n1", "color", "shape"].map(String::from).to_vec();
    assert_eq!((h.bits, h.csv_columns.as_ref()), (6, Some(&cols)));
    assert_eq!(m.n_features(), 64);
    predicts_as_recorded(&dir, "hashed", "categorical.csv");
    let new = writes_as_committed(&m, &path, "hashed");
    assert_eq!(new["version"], 6);
    let text = std::fs::read_to_string(&path).unwrap();
    for (edit, words) in [
        (
            Box::new(|v: &mut serde_json::Value| v["version"] = 5.into())
                as Box<dyn Fn(&mut serde_json::Value)>,
            "version 6",
        ),
        (
            Box::new(|v| {
                v["hashing"].as_object_mut().unwrap().remove("csv_columns");
            }),
            "both its categorical columns",
        ),
        (
            Box::new(|v| v["hashing"]["categorical"][1] = "".into()),
            "name is empty",
        ),
        (
            Box::new(|v| v["hashing"]["quadratic"] = serde_json::json!(["ab"])),
            "namespaces",
        ),
        (
            Box::new(|v| v["hashing"]["csv_columns"][2] = "COLOR".into()),
            "named twice",
        ),
    ] {
        refused_with(&text, edit, words);
    }
}
