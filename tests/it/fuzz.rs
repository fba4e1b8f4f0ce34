//! Fuzzing on stable Rust, kept in the repository. Valid seeds (CSV, LIBSVM, .npy, .npz and
//! model JSON of every kind) are mutated (bit flips, random and "interesting" bytes and
//! tokens such as `nan`, `1e39` or a huge index, deletions, duplications, truncations) and fed
//! to
//! - the loaders and the model reader in-process, then training, saving and re-reading what
//!   loaded: no panic, every model written loads back, predictions have one value per row;
//! - the release binary on files (train, predict, eval, plot boundary/roc/training,
//!   train --animate), under a 4 GiB address-space
//!   limit and a time limit: the exit code is 0, 1 or 2, no panic, no hang, a model written
//!   is a model that loads, and predict prints one line per row.
//!
//! `cargo test` runs a short round (seconds). The long round is
//! `cargo test --release --test it fuzz:: -- --ignored`, with `ROSENBLATT_FUZZ_CASES` (default
//! 100,000 in-process) and `ROSENBLATT_FUZZ_CLI_CASES` (default 5,000 cases on the binary).
//! Failing inputs are saved under target/fuzz-failures/ with what went wrong.

use std::io::{Cursor, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::hashing::Hashing;
use rosenblatt_core::data::{self, Dataset, Format, Layout, LoadOptions};
use rosenblatt_core::params::{Algo, TrainParams};
use rosenblatt_train::algo;
use rosenblatt_train::model::Model;

/// One seed: a file name (its extension picks the loader) and its bytes.
struct Seed {
    name: &'static str,
    bytes: Vec<u8>,
}

fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn npz_bytes(x: &[u8], y: &[u8]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    z.start_file("X.npy", opts).unwrap();
    z.write_all(x).unwrap();
    z.start_file("y.npy", opts).unwrap();
    z.write_all(y).unwrap();
    z.finish().unwrap().into_inner()
}

fn seeds() -> Vec<Seed> {
    let f32s: Vec<u8> = [1.0f32, 2.0, -1.0, 0.5, 3.0, -2.0, 0.0, 1.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let f64s: Vec<u8> = [1.0f64, -2.0, 0.5, 3.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let y: Vec<u8> = [1i64, -1, 1, -1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let x = npy_bytes("<f4", "(4, 2)", &f32s);
    let yb = npy_bytes("<i8", "(4,)", &y);
    let mut s = vec![
        Seed {
            name: "a.csv",
            bytes: b"x1,x2,label\n1,2,1\n-1,0.5,-1\n2,2,1\n-2,-1,-1\n0.5,3,1\n".to_vec(),
        },
        Seed {
            name: "b.csv",
            bytes: b"1.5,2,cat\n-1,0,dog\n2,-2,eel\n0,1,cat\n-3,2,dog\n1,-1,eel\n".to_vec(),
        },
        // Categorical text beside numbers, empty fields, a header naming the column.
        Seed {
            name: "e.csv",
            bytes: b"a,color,label\n1,red,1\n,blue,-1\n2,,1\n-2,red,-1\n0.5,teal,1\n".to_vec(),
        },
        Seed {
            name: "c.svm",
            bytes: b"+1 1:0.5 3:2 # c\n-1 2:1\n+1 1:1 2:0.25 3:-1\n-1 3:4\n".to_vec(),
        },
        // Vowpal Wabbit text: namespaces with values, importance, tags, a default namespace.
        Seed {
            name: "v.vw",
            bytes: b"1 1.0 zebra|MetricFeatures:3.28 height:1.5 length:2.0 |Says black with \
                     white stripes |OtherFeatures NumberOfLegs:4.0 HasStripes\n\
                     -1 0.5 'horse|MetricFeatures:1.5 height:1.7 |Says brown\n\
                     1 |Says black white |a x:2 y\n-1 |a z b:0.5\n"
                .to_vec(),
        },
        Seed {
            name: "d.npy",
            bytes: x.clone(),
        },
        Seed {
            name: "e.npy",
            bytes: npy_bytes("<f8", "(2, 2)", &f64s),
        },
        // Compact dtypes: memory-mapped in their storage when read through a file.
        Seed {
            name: "g.npy",
            bytes: npy_bytes("|u1", "(4, 2)", &[0, 3, 255, 7, 1, 1, 9, 0]),
        },
        Seed {
            name: "h.npy",
            bytes: npy_bytes("<f2", "(2, 2)", &[0, 60, 0, 188, 0, 0, 0, 66]),
        },
        Seed {
            name: "f.npz",
            bytes: npz_bytes(&x, &yb),
        },
    ];
    // scipy sparse archives (scripts/scipy_fixtures.py): CSR compressed, CSC stored.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scipy");
    for name in ["rows_csr.npz", "rows_csc.npz"] {
        s.push(Seed {
            name: "s.npz",
            bytes: std::fs::read(dir.join(name)).unwrap(),
        });
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    for name in [
        "binary-batch",
        "multiclass-argmax",
        "ovr",
        "voted",
        "kernel-rbf",
        "kernel-poly",
    ] {
        s.push(Seed {
            name: "m.json",
            bytes: std::fs::read(dir.join(format!("{name}.json"))).unwrap(),
        });
    }
    // Version 2: scaling and voted models of 3 classes.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2");
    for name in ["binary-standard", "voted-multi", "ovr-maxabs"] {
        s.push(Seed {
            name: "m.json",
            bytes: std::fs::read(dir.join(format!("{name}.json"))).unwrap(),
        });
    }
    s
}

const TOKENS: &[&[u8]] = &[
    b"nan",
    b"inf",
    b"-inf",
    b"1e39",
    b"-3.4e38",
    b"3e38",
    b"1e-45",
    b"4294967296",
    b"268435456",
    b"99999999999999999999",
    b"-1",
    b"+1",
    b"1.0",
    b"0",
    b"\n",
    b",",
    b":",
    b" ",
    b"#",
    b"\x00",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b"null",
    b"1e30",
    b"-0",
    b"18446744073709551615",
    b"'shape': (1000000000, 1000000000)",
    b"<f8",
    b"<i4",
    b"|u1",
    b"|",
    b"'tag|",
    b"| ",
    b"1:2",
];

fn mutate(seed: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    let rounds = if rng.random_bool(0.6) {
        1
    } else {
        rng.random_range(2..=4)
    };
    for _ in 0..rounds {
        let len = v.len();
        let at = if len == 0 {
            0
        } else {
            rng.random_range(0..len)
        };
        match rng.random_range(0..9) {
            0 if len > 0 => v[at] ^= 1 << rng.random_range(0..8),
            1 if len > 0 => v[at] = rng.random(),
            2 => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 if len > 0 => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                let end = (at + rng.random_range(1..=8)).min(len);
                v.splice(at..end, t.iter().copied());
            }
            4 if len > 0 => {
                let end = (at + rng.random_range(1..=16)).min(len);
                v.drain(at..end);
            }
            5 if len > 0 => {
                let end = (at + rng.random_range(1..=64)).min(len);
                let chunk: Vec<u8> = v[at..end].to_vec();
                for _ in 0..rng.random_range(1..=3) {
                    v.splice(at..at, chunk.iter().copied());
                }
            }
            6 if len > 0 && rng.random_bool(0.3) => v.truncate(at),
            6 | 7 if len > 0 => {
                // A number replaced by a token: keeps the structure, breaks the value.
                if let Some(start) = (at..len).find(|&i| v[i].is_ascii_digit()) {
                    let end = (start..len)
                        .find(|&i| !(v[i].is_ascii_digit() || v[i] == b'.'))
                        .unwrap_or(len);
                    let t = TOKENS[rng.random_range(0..TOKENS.len())];
                    v.splice(start..end, t.iter().copied());
                }
            }
            _ => {
                let n = rng.random_range(1..=4);
                for _ in 0..n {
                    v.insert(at.min(v.len()), rng.random());
                }
            }
        }
    }
    v
}

/// Saves a failing input and returns a description of it.
fn save_failure(name: &str, bytes: &[u8], what: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let stamp = format!("{:016x}", rand::random::<u64>());
    let path = dir.join(format!("{stamp}-{name}"));
    let _ = std::fs::write(&path, bytes);
    let _ = std::fs::write(dir.join(format!("{stamp}-{name}.txt")), what);
    format!("{what} (input saved to {})", path.display())
}

/// Trains a few epochs on data that loaded, saves, re-reads and predicts.
fn train_round_trip(ds: &Dataset, algo: Algo) -> Result<(), String> {
    let params = TrainParams::for_algo(algo).epochs(3).validate().unwrap();
    let Ok(t) = algo::train(ds, &params, &CpuBackend::new(), None, &mut ()) else {
        return Ok(());
    };
    let mut buf = Vec::new();
    t.model.write(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8(buf).map_err(|e| e.to_string())?;
    let back = Model::from_json(Path::new("m.json"), &text)
        .map_err(|e| format!("a trained model does not load back: {e}"))?;
    let raw = back
        .raw_scores(ds, &CpuBackend::new())
        .map_err(|e| format!("a trained model does not score its data: {e}"))?;
    if back.predict(&raw).len() != ds.n {
        return Err("predictions are not one per row".into());
    }
    Ok(())
}

/// A model that loads must predict one value per row of data with its feature count.
fn predict_rows(m: &Model) -> Result<(), String> {
    let d = m.n_features();
    if d > 10_000 {
        return Ok(());
    }
    let ds = Dataset::new(
        (0..5 * d)
            .map(|i| (i % 7) as f32 - 3.0)
            .collect::<Vec<f32>>(),
        5,
        d,
        None,
        "rows",
    );
    let raw = m
        .raw_scores(&ds, &CpuBackend::new())
        .map_err(|e| format!("a loaded model does not score: {e}"))?;
    let (p, v) = (m.predict(&raw), m.decision_values(&raw));
    if p.len() != 5 || v.len() != 5 || p.iter().any(|&c| c as usize >= m.classes().len()) {
        return Err(format!(
            "a loaded model predicts {} classes / {} values for 5 rows",
            p.len(),
            v.len()
        ));
    }
    Ok(())
}

/// How many in-process cases were accepted (loaded, or read as a model).
static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One in-process case: the loader (or model reader) on the bytes, then what follows.
fn in_process_case(seed: &Seed, bytes: &[u8], rng: &mut ChaCha8Rng) -> Result<(), String> {
    let path = PathBuf::from(seed.name);
    if seed.name.ends_with(".json") {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        return match Model::from_json(&path, text) {
            Ok(m) => {
                ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                predict_rows(&m)
            }
            Err(e) if e.is_input_error() => Ok(()),
            Err(e) => Err(format!("model error is not an input error: {e}")),
        };
    }
    let format = match rng.random_range(0..6) {
        0 => Format::Csv,
        1 => Format::Libsvm,
        _ => Format::Auto,
    };
    let layout = [Layout::Auto, Layout::Sparse, Layout::Dense][rng.random_range(0..3)];
    // Vowpal Wabbit text hashed into few columns (so its rows also train), with an
    // interaction.
    let hashing = if seed.name.ends_with(".vw") {
        Some(Hashing {
            bits: rng.random_range(1..=8),
            quadratic: vec!["aS".into()],
            ..Hashing::default()
        })
    } else if seed.name.ends_with(".csv") && rng.random_bool(0.3) {
        // CSV with a categorical column (by index or by a name the header may have), hashed.
        Some(Hashing {
            bits: rng.random_range(1..=8),
            categorical: vec![["0", "1", "-2", "a", "color"][rng.random_range(0..5)].into()],
            ..Hashing::default()
        })
    } else {
        None
    };
    let opts = LoadOptions {
        format,
        layout,
        hashing,
        ..Default::default()
    };
    let text = !seed.name.ends_with(".npy") && !seed.name.ends_with(".npz");
    if text && rng.random_bool(0.25) {
        // Shares of the file, as the processes of a data-parallel run read it: each loads or
        // fails with an input error, and where all load, they hold the whole file's rows.
        let f = tempfile::Builder::new()
            .suffix(if format == Format::Libsvm {
                ".svm"
            } else if seed.name.ends_with(".vw") {
                ".vw"
            } else {
                ".csv"
            })
            .tempfile()
            .map_err(|e| e.to_string())?;
        std::fs::write(f.path(), bytes).map_err(|e| e.to_string())?;
        if !data::part::splits(f.path(), &opts).unwrap_or(false) {
            return Ok(());
        }
        let parts = rng.random_range(2..=4);
        let mut rows = Some(0);
        for k in 0..parts {
            match data::part::load_part(f.path(), &opts, k, parts) {
                Ok(ds) => rows = rows.map(|r| r + ds.n),
                Err(e) if e.is_input_error() => rows = None,
                Err(e) => return Err(format!("share error is not an input error: {e}")),
            }
        }
        if let (Some(r), Ok(whole)) = (rows, data::load(f.path(), &opts)) {
            if r != whole.n {
                return Err(format!(
                    "{parts} shares hold {r} rows, the file {}",
                    whole.n
                ));
            }
        }
        return Ok(());
    }
    let loaded = if seed.name.ends_with(".npy") && rng.random_bool(0.5) {
        // Through a file, as `train x.npy` reads it: a float32 C array is memory-mapped.
        let f = tempfile::Builder::new()
            .suffix(".npy")
            .tempfile()
            .map_err(|e| e.to_string())?;
        std::fs::write(f.path(), bytes).map_err(|e| e.to_string())?;
        data::load(f.path(), &opts)
    } else {
        data::load_bytes(&path, bytes, &opts)
    };
    match loaded {
        Ok(ds) => {
            ACCEPTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let whole = match ds.x.csr() {
                Some(c) => c.check(ds.d).is_ok() && c.n() == ds.n,
                None => ds.x.values().len() == ds.n * ds.d,
            };
            if !whole || ds.x.values().iter().any(|v| !v.is_finite()) {
                return Err("a loaded data set is inconsistent or not finite".into());
            }
            if ds.labels.is_some() && ds.n * ds.d <= 100_000 {
                let algos = [Algo::Batch, Algo::Online, Algo::Averaged, Algo::Voted];
                train_round_trip(&ds, algos[rng.random_range(0..algos.len())])?;
            }
            Ok(())
        }
        Err(e) if e.is_input_error() => Ok(()),
        Err(e) => Err(format!("load error is not an input error: {e}")),
    }
}

/// `cases` mutated inputs through the loaders and models, in this process (under a memory
/// budget of 256 MiB, which is process-wide: the tests call it in a process of their own).
fn in_process(cases: usize, seed: u64) {
    rosenblatt_core::limits::set_budget(256 << 20);
    let seeds = seeds();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let start = Instant::now();
    for case in 0..cases {
        let s = &seeds[case % seeds.len()];
        let bytes = mutate(&s.bytes, &mut rng);
        let t0 = Instant::now();
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| in_process_case(s, &bytes, &mut rng)));
        let what = match r {
            Ok(Ok(())) => None,
            Ok(Err(msg)) => Some(msg),
            Err(_) => Some("panic".to_string()),
        };
        let what = what.or_else(|| {
            (t0.elapsed() > Duration::from_secs(10))
                .then(|| format!("took {:.1} s", t0.elapsed().as_secs_f64()))
        });
        if let Some(w) = what {
            failures.push(save_failure(s.name, &bytes, &w));
        }
    }
    eprintln!(
        "fuzz: {cases} in-process cases in {:.1} s ({} accepted, the rest refused), {} failures",
        start.elapsed().as_secs_f64(),
        ACCEPTED.load(std::sync::atomic::Ordering::Relaxed),
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Runs the binary with `args` in `dir` under a 4 GiB address-space limit and `limit`
/// seconds; returns (exit code, stdout, stderr), or None when it had to be killed.
fn run_limited(dir: &Path, args: &[&str], limit: u64) -> Option<(i32, String, String)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_rosenblatt"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            return Some((
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Checks one run of the binary: exit code 0, 1 or 2, no panic, no hang.
fn check_run(r: Option<(i32, String, String)>, what: &str) -> Result<(i32, String), String> {
    let Some((code, out, err)) = r else {
        return Err(format!("{what}: hung (killed after the time limit)"));
    };
    if !(0..=2).contains(&code) {
        return Err(format!("{what}: exit code {code}: {err}"));
    }
    if err.contains("panicked") || err.contains("RUST_BACKTRACE") {
        return Err(format!("{what}: panic: {err}"));
    }
    CODES[code as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok((code, out))
}

/// Exit codes of the binary's runs, 0, 1 and 2.
static CODES: [std::sync::atomic::AtomicUsize; 3] = [
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
];

fn cli_case(dir: &Path, seed: &Seed, bytes: &[u8], rng: &mut ChaCha8Rng) -> Result<(), String> {
    let _ = std::fs::remove_file(dir.join("m.json"));
    if seed.name.ends_with(".json") {
        std::fs::write(dir.join("m.json"), bytes).unwrap();
        for args in [
            &["predict", "m.json", "data.csv", "--backend", "cpu"][..],
            &["eval", "m.json", "data.csv", "--backend", "cpu"],
            &[
                "plot", "training", "m.json", "-o", "t.png", "--width", "160", "--height", "120",
            ],
        ] {
            let (code, out) = check_run(run_limited(dir, args, 60), &args.join(" "))?;
            if args[0] == "predict" && code == 0 && out.lines().count() != 6 {
                return Err(format!(
                    "predict printed {} lines for 6 rows",
                    out.lines().count()
                ));
            }
        }
        return Ok(());
    }
    let name = seed.name;
    std::fs::write(dir.join(name), bytes).unwrap();
    let algos = [
        "batch",
        "online",
        "pocket",
        "averaged",
        "voted",
        "winnow",
        "kernel",
        "multiclass",
    ];
    let algo = algos[rng.random_range(0..algos.len())];
    // The real-data options too: scaling, class weights, a validation split, patience.
    let extras: [&[&str]; 7] = [
        &[],
        &["--storage", "u8"],
        &["--storage", "f16", "--validation-fraction", "0.2"],
        &["--scale", "standard"],
        &["--scale", "maxabs", "--class-weight", "balanced"],
        &["--validation-fraction", "0.3", "--patience", "2"],
        &[
            "--scale",
            "minmax",
            "--patience",
            "1",
            "--min-improvement",
            "0.5",
        ],
    ];
    let mut train = vec![
        "train",
        name,
        "--backend",
        "cpu",
        "--epochs",
        "5",
        "--algo",
        algo,
        "-o",
        "m.json",
    ];
    train.extend_from_slice(extras[rng.random_range(0..extras.len())]);
    // Vowpal Wabbit text also streamed in one pass, by a rule that streams.
    if name.ends_with(".vw") && rng.random_bool(0.5) {
        let rules = ["online", "averaged", "pa", "arow", "winnow"];
        let rule = rules[rng.random_range(0..rules.len())];
        train = vec!["train", name, "--stream", "--algo", rule, "-o", "m.json"];
    }
    // CSV also with a categorical column, hashed.
    if name.ends_with(".csv") && rng.random_bool(0.3) {
        let cols = ["0", "1", "-2", "color", "a"];
        train.extend_from_slice(&["--categorical", cols[rng.random_range(0..cols.len())]]);
    }
    let (code, _) = check_run(run_limited(dir, &train, 60), &train.join(" "))?;
    if code != 0 {
        return Ok(());
    }
    let model = Model::load(&dir.join("m.json"))
        .map_err(|e| format!("{}: the model written does not load: {e}", train.join(" ")))?;
    let recorded = LoadOptions {
        hashing: model.hashing().cloned(),
        ..LoadOptions::default()
    };
    let n = data::load_bytes(Path::new(name), bytes, &recorded)
        .map_err(|e| format!("train accepted data the loader refuses: {e}"))?
        .n;
    let predict = ["predict", "m.json", name, "--backend", "cpu"];
    let (code, out) = check_run(run_limited(dir, &predict, 60), "predict")?;
    if code == 0 && out.lines().count() != n {
        return Err(format!(
            "predict printed {} lines for {n} rows",
            out.lines().count()
        ));
    }
    check_run(
        run_limited(dir, &["eval", "m.json", name, "--backend", "cpu"], 60),
        "eval",
    )?;
    if model.is_binary() {
        let roc = [
            "plot",
            "roc",
            "m.json",
            name,
            "-o",
            "r.png",
            "--width",
            "160",
            "--height",
            "120",
            "--backend",
            "cpu",
        ];
        check_run(run_limited(dir, &roc, 60), "plot roc")?;
    }
    if model.n_features() == 2 {
        let anim = [
            "train",
            name,
            "--backend",
            "cpu",
            "--epochs",
            "3",
            "--algo",
            "online",
            "--animate",
            "a.gif",
        ];
        check_run(run_limited(dir, &anim, 60), "train --animate")?;
    }
    if model.n_features() >= 2 {
        let plot = [
            "plot",
            "boundary",
            "m.json",
            name,
            "-o",
            "p.png",
            "--features",
            "1,2",
            "--width",
            "160",
            "--height",
            "120",
            "--backend",
            "cpu",
        ];
        check_run(run_limited(dir, &plot, 60), "plot boundary")?;
    }
    Ok(())
}

fn cli(cases: usize, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("data.csv"),
        "x1,x2,x3,label\n1,2,3,1\n-1,0,2,-1\n2,2,-1,1\n-2,-1,0,-1\n0,3,1,1\n1,1,1,-1\n",
    )
    .unwrap();
    let seeds = seeds();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let start = Instant::now();
    for case in 0..cases {
        let s = &seeds[case % seeds.len()];
        let bytes = mutate(&s.bytes, &mut rng);
        if let Err(w) = cli_case(dir.path(), s, &bytes, &mut rng) {
            failures.push(save_failure(s.name, &bytes, &w));
        }
    }
    let c = |k: usize| CODES[k].load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "fuzz: {cases} cases on the binary in {:.1} s (runs exiting 0/1/2: {}/{}/{}), {} failures",
        start.elapsed().as_secs_f64(),
        c(0),
        c(1),
        c(2),
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn fuzz_short_loaders_and_models() {
    if !crate::common::in_own_process("fuzz::fuzz_short_loaders_and_models") {
        return;
    }
    in_process(3_000, 1);
}

#[test]
fn fuzz_short_binary() {
    cli(24, 2);
}

#[test]
#[ignore = "long: cargo test --release --test it fuzz:: -- --ignored"]
fn fuzz_long_loaders_and_models() {
    if !crate::common::in_own_process("fuzz::fuzz_long_loaders_and_models") {
        return;
    }
    in_process(env_count("ROSENBLATT_FUZZ_CASES", 100_000), 11);
}

#[test]
#[ignore = "long: cargo test --release --test it fuzz:: -- --ignored"]
fn fuzz_long_binary() {
    cli(env_count("ROSENBLATT_FUZZ_CLI_CASES", 5_000), 12);
}
