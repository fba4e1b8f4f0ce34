//! Data-parallel training under MPI (needs `mpirun` from Open MPI and the CLI built with
//! `--features mpi`: `cargo test --features mpi --test it mpi::`, or any build of these tests
//! with ROSENBLATT_MPI_BIN naming such a CLI, as CI runs them; without either they print
//! "skipped", and fail where ROSENBLATT_REQUIRE_MPI=1): `mpirun -np N rosenblatt train
//! --distributed` for N = 1, 2 and 3, each process on its
//! CPU or on its GPU (resident or streamed), writes the model of the single-process run, bit
//! for bit on integer data, for the batch family (binary,
//! multiclass, one-vs-rest, pocket, averaged, Winnow) on a memory-mapped `.npy` and on sparse
//! LIBSVM rows, and with held-out rows (Winnow's criterion, a sum of fractional margins, to
//! rounding); float sums (balanced class weights, scaling) agree to rounding; what it cannot
//! train yet is refused.
use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The CLI built with the `mpi` feature: ROSENBLATT_MPI_BIN, else this build's CLI where the
/// tests build with the feature; else `None`, with a visible "skipped" line (a panic where
/// ROSENBLATT_REQUIRE_MPI=1).
fn mpi_cli() -> Option<&'static Path> {
    static CLI: OnceLock<Option<PathBuf>> = OnceLock::new();
    CLI.get_or_init(|| {
        if let Some(bin) = std::env::var_os("ROSENBLATT_MPI_BIN") {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "ROSENBLATT_MPI_BIN: no file {}",
                bin.display()
            );
            return Some(bin);
        }
        if cfg!(feature = "mpi") {
            return Some(env!("CARGO_BIN_EXE_rosenblatt").into());
        }
        assert!(
            !std::env::var("ROSENBLATT_REQUIRE_MPI").is_ok_and(|v| v == "1"),
            "ROSENBLATT_REQUIRE_MPI=1 but no CLI with the mpi feature: build with --features \
             mpi, or set ROSENBLATT_MPI_BIN"
        );
        let _ = writeln!(
            std::io::stderr(),
            "skipped: MPI (no CLI with the mpi feature: --features mpi or ROSENBLATT_MPI_BIN)"
        );
        None
    })
    .as_deref()
}

/// The MPI-enabled CLI, for tests that checked [`mpi_cli`] first.
fn cli() -> &'static Path {
    mpi_cli().expect("checked by the test")
}

/// `args` with `--scale none` where they train and name no scaling: these tests compare
/// runs on integer data bit for bit, which the default scaling would make fractional; and
/// without `auto_validation` (a data-parallel run holds nothing out by default) in the model
/// files they compare.
fn unscaled<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    if v.first() == Some(&"train") && !v.contains(&"--scale") {
        v.extend(["--scale", "none"]);
    }
    v
}

/// `common::run` with [`unscaled`] arguments.
fn run(dir: &Path, args: &[&str]) -> Output {
    common::run(dir, &unscaled(args))
}

/// `mpirun --oversubscribe -np N rosenblatt ARGS` in `dir` (as root too).
fn mpirun(dir: &Path, np: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--oversubscribe", "-np", &np.to_string()])
        .arg(cli())
        .args(unscaled(args))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .current_dir(dir)
        .output()
        .expect("mpirun (Open MPI) on the PATH")
}

/// The model file without its training report (which holds times and the device).
fn model(dir: &Path, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object_mut().unwrap().remove("training");
    // A single process may hold rows out on a large set; a data-parallel run does not.
    if let Some(p) = v["params"].as_object_mut() {
        p.remove("auto_validation");
    }
    v
}

/// A binary model file's weights.
fn weights(v: &serde_json::Value) -> Vec<f64> {
    v["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// 10,007 x 13 integer features; binary labels from a hyperplane (5% flipped) and 4-class
/// labels, as `.npy`; and the same rows, sparse, as LIBSVM.
fn write_sets(dir: &Path) {
    let (n, d) = (10_007, 13);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut x = common::npy_header("<f4", &format!("({n}, {d})"));
    let (mut y2, mut y4) = (
        common::npy_header("<i8", &format!("({n},)")),
        common::npy_header("<i8", &format!("({n},)")),
    );
    let mut svm = String::new();
    let mut vw = String::new();
    let names: Vec<String> = (1..=d).map(|j| format!("f{j}")).collect();
    let mut csv = format!("{},label\n", names.join(","));
    for _ in 0..n {
        let row: Vec<i32> = (0..d)
            .map(|_| {
                if rng.random_bool(0.6) {
                    0
                } else {
                    rng.random_range(-3..=3)
                }
            })
            .collect();
        let s: i32 = row
            .iter()
            .enumerate()
            .map(|(j, v)| v * (j as i32 % 5 - 2))
            .sum();
        let b: i64 = if (s >= 0) != rng.random_bool(0.05) {
            1
        } else {
            -1
        };
        x.extend(row.iter().flat_map(|&v| (v as f32).to_le_bytes()));
        y2.extend(b.to_le_bytes());
        y4.extend((s.rem_euclid(4) as i64).to_le_bytes());
        let cells: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        csv.push_str(&format!("{},c{}\n", cells.join(","), s.rem_euclid(4)));
        svm.push_str(&b.to_string());
        for (j, v) in row.iter().enumerate().filter(|(_, v)| **v != 0) {
            svm.push_str(&format!(" {}:{v}", j + 1));
        }
        svm.push('\n');
        // The same rows as Vowpal Wabbit text: numbered features land in their column.
        vw.push_str(&format!("{b} |"));
        for (j, v) in row.iter().enumerate().filter(|(_, v)| **v != 0) {
            vw.push_str(&format!(" {j}:{v}"));
        }
        vw.push('\n');
    }
    std::fs::write(dir.join("x.npy"), x).unwrap();
    std::fs::write(dir.join("y2.npy"), y2).unwrap();
    std::fs::write(dir.join("y4.npy"), y4).unwrap();
    std::fs::write(dir.join("x.svm"), svm).unwrap();
    std::fs::write(dir.join("x.vw"), vw).unwrap();
    std::fs::write(dir.join("x.csv"), csv).unwrap();
    std::fs::write(dir.join("tiny.csv"), "p,q,label\n1,2,a\n-2,1,b\n3,-1,a\n").unwrap();
}

/// The batch family's cases: binary, multiclass (argmax and one-vs-rest), pocket with
/// patience, averaged, Winnow, sparse rows, held-out rows; CSV, LIBSVM and Vowpal Wabbit
/// text read by byte range (each process parses only its share; the text and a CSV with a
/// categorical column hashed), a file with fewer rows than processes.
const CASES: &[&[&str]] = &[
    &["x.npy", "--labels", "y2.npy"],
    &["x.npy", "--labels", "y4.npy", "--algo", "multiclass"],
    &[
        "x.npy",
        "--labels",
        "y4.npy",
        "--algo",
        "multiclass",
        "--multiclass",
        "ovr",
    ],
    &[
        "x.npy",
        "--labels",
        "y2.npy",
        "--algo",
        "pocket",
        "--patience",
        "4",
    ],
    &[
        "x.npy", "--labels", "y2.npy", "--algo", "averaged", "--mode", "batch",
    ],
    &[
        "x.npy", "--labels", "y2.npy", "--algo", "winnow", "--mode", "batch", "--lr", "0.1",
    ],
    &["x.svm", "--sparse"],
    &["x.svm"],
    &["x.csv", "--algo", "multiclass"],
    &["tiny.csv"],
    // Hashed text: Vowpal Wabbit lines, and CSV with a categorical column.
    &["x.vw", "--hash-bits", "5"],
    &[
        "x.csv",
        "--categorical",
        "f3",
        "--hash-bits",
        "9",
        "--algo",
        "multiclass",
    ],
    &[
        "x.npy",
        "--labels",
        "y2.npy",
        "--algo",
        "pocket",
        "--validation-fraction",
        "0.2",
    ],
];

/// Each case trained by `np` processes for each of `nps`, each process on `backend`, writes
/// the model of one process on the CPU, with the same report.
fn assert_single_process_model(p: &Path, backend: &str, nps: &[usize]) {
    for (k, case) in CASES.iter().enumerate() {
        let mut args = vec!["train"];
        args.extend_from_slice(case);
        // The batch rule unless the case names another (train's default is online).
        if !case.contains(&"--algo") {
            args.extend_from_slice(&["--algo", "batch"]);
        }
        args.extend_from_slice(&["--epochs", "25", "--json", "-o"]);
        let one = format!("one{k}.json");
        let mut single = args.clone();
        single.extend_from_slice(&[&one, "--backend", "cpu"]);
        let o = run(p, &single);
        assert!(o.status.success(), "{case:?}: {}", common::stderr(&o));
        let want: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
        for &np in nps {
            let out = format!("d{k}_{np}_{backend}.json");
            let mut dist = args.clone();
            dist.extend_from_slice(&[&out, "--distributed", "--backend", backend]);
            let o = mpirun(p, np, &dist);
            assert!(
                o.status.success(),
                "{case:?} np={np} {backend}: {}",
                common::stderr(&o)
            );
            // One report, from the first process.
            let text = common::stdout(&o);
            assert_eq!(text.lines().count(), 1, "{case:?} np={np}: {text}");
            let got: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(got["backend"], backend, "{case:?} np={np}");
            for key in [
                "n",
                "epochs",
                "mistakes_per_epoch",
                "train_accuracy",
                "radius",
                "stop_reason",
            ] {
                assert_eq!(got[key], want[key], "{case:?} np={np} {backend}: {key}");
            }
            // The criterion sums margins, which Winnow's weights make fractions, and the GPU
            // keeps it in f32: to rounding.
            let crit = |v: &serde_json::Value| -> Vec<f64> {
                v["criterion_per_epoch"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect()
            };
            let tol = if backend == "gpu" { 1e-5 } else { 1e-9 };
            for (x, y) in crit(&got).iter().zip(crit(&want)) {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "{case:?} np={np} {backend}: J {x} vs {y}"
                );
            }
            let (got_m, want_m) = (model(p, &out), model(p, &one));
            if case.contains(&"winnow") && backend == "gpu" {
                // Winnow's weights are exp(): the GPU's exp is not the CPU's, to rounding.
                for (x, y) in weights(&got_m).iter().zip(weights(&want_m)) {
                    assert!(
                        (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                        "winnow: {x} vs {y}"
                    );
                }
            } else {
                assert_eq!(got_m, want_m, "{case:?} np={np} {backend}: model");
            }
        }
    }
}

#[test]
fn n_processes_train_the_single_process_model() {
    if mpi_cli().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_sets(dir.path());
    assert_single_process_model(dir.path(), "cpu", &[1, 2, 3]);
}

/// Each process runs its epochs on its GPU (here all share the one adapter), the sums read
/// back and added on the host: the model of one process on the CPU.
#[test]
fn n_processes_on_their_gpus_train_the_single_process_model() {
    if mpi_cli().is_none() {
        return;
    }
    if common::gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_sets(dir.path());
    assert_single_process_model(dir.path(), "gpu", &[1, 3]);
    // X streamed through each GPU under a budget smaller than its share (the first case).
    let o = mpirun(
        dir.path(),
        2,
        &[
            "train",
            "x.npy",
            "--labels",
            "y2.npy",
            "--algo",
            "batch",
            "--epochs",
            "25",
            "-o",
            "streamed.json",
            "--distributed",
            "--backend",
            "gpu",
            "--gpu-memory",
            "65536",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(
        model(dir.path(), "streamed.json"),
        model(dir.path(), "one0.json")
    );
}

/// The online averaged perceptron in steps and streams, each process's on its GPU (dense and
/// sparse rows): the processes mix their GPUs' models as the CPU's, so the model and the
/// counts equal the same run's on the CPUs, bit for bit on integer data (with processes and
/// streams powers of two, so that their means stay exact whatever the order of a sum).
#[test]
fn stepped_processes_on_their_gpus_equal_the_same_on_cpus() {
    if mpi_cli().is_none() {
        return;
    }
    if common::gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write_sets(p);
    let cases: [&[&str]; 3] = [
        &[
            "x.npy",
            "--labels",
            "y2.npy",
            "--minibatch",
            "4",
            "--streams",
            "2",
        ],
        &[
            "x.npy",
            "--labels",
            "y4.npy",
            "--multiclass",
            "ovr",
            "--streams",
            "4",
        ],
        &[
            "x.svm",
            "--sparse",
            "--minibatch",
            "2",
            "--streams",
            "2",
            "--validation-fraction",
            "0.2",
        ],
    ];
    for (k, case) in cases.iter().enumerate() {
        let mut args = vec!["train"];
        args.extend_from_slice(case);
        args.extend_from_slice(&["--epochs", "6", "--distributed", "--json", "-o"]);
        for np in [1, 2] {
            let run = |backend: &str| {
                let out = format!("s{k}_{np}_{backend}.json");
                let all = [&args[..], &[&out, "--backend", backend]].concat();
                let o = mpirun(p, np, &all);
                assert!(
                    o.status.success(),
                    "{case:?} np={np}: {}",
                    common::stderr(&o)
                );
                let r: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
                (r, model(p, &out))
            };
            let ((gr, gm), (cr, cm)) = (run("gpu"), run("cpu"));
            assert_eq!(gr["backend"], "gpu", "{case:?} np={np}: {gr}");
            assert!(gr.get("gpu_plan").is_some(), "{case:?} np={np}: {gr}");
            for key in [
                "mistakes_per_epoch",
                "epochs",
                "train_accuracy",
                "minibatch",
                "streams",
            ] {
                assert_eq!(gr[key], cr[key], "{case:?} np={np}: {key}");
            }
            assert_eq!(gm, cm, "{case:?} np={np}: model");
        }
    }
}

#[test]
fn float_sums_agree_to_rounding_and_the_unsupported_is_refused() {
    if mpi_cli().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write_sets(p);
    // Balanced class weights make the sums fractions: the same model to rounding.
    let base = [
        "train",
        "x.npy",
        "--labels",
        "y2.npy",
        "--class-weight",
        "balanced",
        "--algo",
        "batch",
        "--epochs",
        "20",
        "-o",
    ];
    let o = run(p, &[&base[..], &["one.json", "--backend", "cpu"]].concat());
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = mpirun(
        p,
        3,
        &[&base[..], &["three.json", "--distributed"]].concat(),
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let (a, b) = (model(p, "one.json"), model(p, "three.json"));
    for (x, y) in weights(&a).iter().zip(weights(&b)) {
        assert!((x - y).abs() <= 1e-3 * (1.0 + x.abs()), "{x} vs {y}");
    }
    // The online forms by parameter mixing: one process is the sequential run; more mix
    // their weights after every epoch (another algorithm, as good on this data).
    for algo in ["online", "averaged", "winnow"] {
        let online = [
            "train", "x.npy", "--labels", "y2.npy", "--algo", algo, "--epochs", "10", "--json",
        ];
        let seq_out = format!("seq_{algo}.json");
        let o = run(
            p,
            &[&online[..], &["-o", &seq_out, "--backend", "cpu"]].concat(),
        );
        assert!(o.status.success(), "{}", common::stderr(&o));
        let seq: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
        for np in [1, 3] {
            let out = format!("ipm_{algo}{np}.json");
            let o = mpirun(
                p,
                np,
                &[&online[..], &["-o", &out, "--distributed"]].concat(),
            );
            assert!(o.status.success(), "{}", common::stderr(&o));
            let r: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
            if np == 1 {
                assert_eq!(model(p, &out), model(p, &seq_out), "{algo}");
                assert_eq!(r["mistakes_per_epoch"], seq["mistakes_per_epoch"], "{algo}");
            }
            let (a, b) = (
                r["train_accuracy"].as_f64().unwrap(),
                seq["train_accuracy"].as_f64().unwrap(),
            );
            assert!(
                a > b - 0.05,
                "{algo} np={np}: accuracy {a} against {b} in one process"
            );
        }
    }
    // An error after MPI started (every process fails to write the model) ends them all
    // with the error's code instead of leaving any waiting.
    let o = mpirun(
        p,
        2,
        &[
            "train",
            "x.npy",
            "--labels",
            "y2.npy",
            "--distributed",
            "-o",
            "no/such/dir/m.json",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("no/such/dir"),
        "{}",
        common::stderr(&o)
    );
    // Scaling is fitted on every row alike in each process (each reads the whole file).
    let scaled = [
        "train", "x.npy", "--labels", "y2.npy", "--scale", "standard", "--algo", "batch",
        "--epochs", "15", "--json",
    ];
    let o = run(p, &[&scaled[..], &["--backend", "cpu"]].concat());
    let one: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let o = mpirun(p, 3, &[&scaled[..], &["--distributed"]].concat());
    assert!(o.status.success(), "{}", common::stderr(&o));
    let three: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let (a, b) = (
        one["train_accuracy"].as_f64().unwrap(),
        three["train_accuracy"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 0.02, "scaled: {a} vs {b}");
    for bad in [&["--algo", "voted"][..], &["--algo", "kernel"]] {
        let o = mpirun(
            p,
            2,
            &[
                &["train", "x.npy", "--labels", "y2.npy", "--distributed"][..],
                bad,
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains("--distributed"),
            "{}",
            common::stderr(&o)
        );
    }
}

#[test]
fn bench_times_the_sums_over_the_processes() {
    if mpi_cli().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Each process times its CPU epochs, or its GPU's, with the sums.
    let backends: &[(&str, &str)] = if common::gpu().is_some() {
        &[("cpu", "gpu"), ("gpu", "cpu")]
    } else {
        &[("cpu", "gpu")]
    };
    let args = [
        "bench", "--n", "4000", "--d", "8", "--epochs", "3", "--json",
    ];
    // One process on the CPU, for the share of mistake rows.
    let one = run(
        dir.path(),
        &[&args[..], &["--backend", "cpu", "--no-converge"]].concat(),
    );
    assert!(one.status.success(), "{}", common::stderr(&one));
    let one: serde_json::Value = serde_json::from_str(common::stdout(&one).trim()).unwrap();
    let f1 = one["cpu"]["mistake_fraction"].as_f64().unwrap();
    for &(on, other) in backends {
        let o = mpirun(
            dir.path(),
            2,
            &[&args[..], &["--distributed", "--backend", on]].concat(),
        );
        assert!(o.status.success(), "{on}: {}", common::stderr(&o));
        let text = common::stdout(&o);
        assert_eq!(text.lines().count(), 1, "one report: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[on]["processes"], 2);
        assert!(v[on]["allreduce_ms_per_epoch"].as_f64().unwrap() >= 0.0);
        assert!(v[other].is_null());
        // The mistakes are a fraction of all the rows, as in one process (the same epochs on
        // the same data; the sums' order may differ in the last bits, so not exactly).
        let f = v[on]["mistake_fraction"].as_f64().unwrap();
        assert!(f1 > 0.0 && (f - f1).abs() < 0.02, "{on}: {f} against {f1}");
    }
}

/// `mpirun` with two programs: process 0 runs `a`, process 1 runs `b`.
fn mpirun_two(dir: &Path, a: &[&str], b: &[&str]) -> Output {
    let bin = cli().as_os_str();
    Command::new("mpirun")
        .args(["--oversubscribe", "-np", "1"])
        .arg(bin)
        .args(unscaled(a))
        .args([":", "-np", "1"])
        .arg(bin)
        .args(unscaled(b))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .current_dir(dir)
        .output()
        .expect("mpirun (Open MPI) on the PATH")
}

#[test]
fn processes_started_differently_stop_with_one_message_naming_what_differs() {
    if mpi_cli().is_none() {
        return;
    }
    // Was: Open MPI's MPI_ERR_TRUNCATE from inside an all-gather, naming nothing.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write_sets(p);
    std::fs::copy(p.join("x.svm"), p.join("other.svm")).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.join("other.svm"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"1 1:1\n").unwrap();
    let base = [
        "train",
        "x.svm",
        "--distributed",
        "--backend",
        "cpu",
        "-o",
        "m.json",
    ];
    for (a, b, says) in [
        (
            &["--epochs", "5"][..],
            &["--epochs", "50"][..],
            "the parameter epochs is 5 on process 0 and 50 on process 1",
        ),
        (
            &["--algo", "online"][..],
            &["--algo", "batch"][..],
            "the parameter algo is \"online\" on process 0 and \"batch\"",
        ),
        (
            &["--scale", "maxabs"][..],
            &[][..],
            "the parameter scale is \"maxabs\" on process 0 and \"none\"",
        ),
        (
            &["--seed", "3"][..],
            &["--seed", "4"][..],
            "the parameter seed is 3 on process 0 and 4",
        ),
    ] {
        let o = mpirun_two(p, &[&base[..], a].concat(), &[&base[..], b].concat());
        let e = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{a:?}/{b:?}: {e}");
        assert!(e.contains(says), "{a:?}/{b:?}: {e}");
        assert_eq!(
            e.matches("started differently").count(),
            1,
            "one message: {e}"
        );
        assert!(!e.contains("TRUNCATE"), "{e}");
        assert!(!p.join("m.json").exists());
    }
    let other = ["train", "other.svm", "--distributed", "--backend", "cpu"];
    let o = mpirun_two(p, &base[..5], &other);
    let e = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("training data is x.svm (") && e.contains("on process 1"),
        "{e}"
    );
    // The same options everywhere still train.
    let o = mpirun(p, 2, &base);
    assert!(o.status.success(), "{}", common::stderr(&o));
}
