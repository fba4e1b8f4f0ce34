//! Data larger than memory: a float32 `.npy` is memory-mapped, not read, so it trains in a
//! memory budget smaller than X, with the model of the in-memory run, while the process's
//! anonymous memory stays far below the size of X. (That test runs in a process of its own:
//! the budget is process-wide, and the resident memory it measures is the process's.)

use crate::common;

use std::io::Write;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_core::data::{self, npy, LoadOptions};
use rosenblatt_core::params::TrainParams;
use rosenblatt_train::algo;

/// Writes `n` x `d` integer features in -3..=3 (row by row, never all in memory) and labels
/// from a fixed integer hyperplane with 5% flipped.
fn write_set(dir: &Path, n: usize, d: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let w: Vec<i32> = (0..d).map(|j| (j as i32 % 5) - 2).collect();
    let mut x = std::io::BufWriter::new(std::fs::File::create(dir.join("x.npy")).unwrap());
    x.write_all(&common::npy_header("<f4", &format!("({n}, {d})")))
        .unwrap();
    // The same values as int8 (a quarter of the bytes).
    let mut x8 = std::io::BufWriter::new(std::fs::File::create(dir.join("x8.npy")).unwrap());
    x8.write_all(&common::npy_header("|i1", &format!("({n}, {d})")))
        .unwrap();
    let mut y = common::npy_header("<i8", &format!("({n},)"));
    let mut row = vec![0i32; d];
    for _ in 0..n {
        for v in row.iter_mut() {
            *v = rng.random_range(-3..=3);
        }
        for v in &row {
            x.write_all(&(*v as f32).to_le_bytes()).unwrap();
            x8.write_all(&(*v as i8).to_le_bytes()).unwrap();
        }
        let s: i32 = row.iter().zip(&w).map(|(a, b)| a * b).sum();
        let label: i64 = if (s >= 0) != rng.random_bool(0.05) {
            1
        } else {
            -1
        };
        y.extend(label.to_le_bytes());
    }
    x.flush().unwrap();
    x8.flush().unwrap();
    std::fs::write(dir.join("y.npy"), y).unwrap();
}

#[test]
fn a_mapped_npy_larger_than_the_budget_trains_like_in_memory() {
    if !common::in_own_process("scale::a_mapped_npy_larger_than_the_budget_trains_like_in_memory") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // 500,000 x 48 float32: 96 MB of X (24 MB as int8), against a budget of 16 MiB.
    let (n, d) = (500_000, 48);
    write_set(p, n, d);
    let opts = LoadOptions {
        labels: Some(p.join("y.npy")),
        ..Default::default()
    };
    let params = TrainParams::for_algo(rosenblatt::Algo::Batch)
        .epochs(8)
        .validate()
        .unwrap();
    let cpu = CpuBackend::new();
    rosenblatt_core::limits::set_budget(16 << 20);
    let before = common::rss_anon();
    let mapped = data::load(&p.join("x.npy"), &opts).unwrap();
    assert!(mapped.x.is_mapped(), "a float32 C-order .npy is mapped");
    assert_eq!((mapped.n, mapped.d), (n, d));
    let t = algo::train(&mapped, &params, &cpu, None, &mut ()).unwrap();
    let after = common::rss_anon();
    if let (Some(a), Some(b)) = (before, after) {
        let grown = b.saturating_sub(a);
        assert!(
            grown < 24 << 20,
            "anonymous memory grew by {grown} bytes while training 96 MB of mapped X"
        );
    }
    // The int8 file (24 MB, also more than the budget) is mapped too and read as int8 in
    // place: the same model, anonymous memory as small.
    let before = common::rss_anon();
    let m8 = data::load(&p.join("x8.npy"), &opts).unwrap();
    assert!(m8.x.is_mapped() && m8.view().storage() == rosenblatt_backend::Storage::I8);
    let t8 = algo::train(&m8, &params, &cpu, None, &mut ()).unwrap();
    if let (Some(a), Some(b)) = (before, common::rss_anon()) {
        let grown = b.saturating_sub(a);
        assert!(
            grown < 24 << 20,
            "anonymous memory grew by {grown} bytes (int8)"
        );
    }
    assert_eq!(t8.model.body(), t.model.body());
    assert_eq!(t8.report.radius, t.report.radius);
    // Read into memory instead, the same file does not fit the budget...
    let bytes = std::fs::read(p.join("x.npy")).unwrap();
    let e = npy::parse_npy(&p.join("x.npy"), &bytes, Some(&p.join("y.npy")))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("x.npy"), "{e}");
    // ...and with the budget lifted it trains the same model.
    rosenblatt_core::limits::set_budget(0);
    let in_memory = npy::parse_npy(&p.join("x.npy"), &bytes, Some(&p.join("y.npy"))).unwrap();
    drop(bytes);
    assert!(!in_memory.x.is_mapped());
    let u = algo::train(&in_memory, &params, &cpu, None, &mut ()).unwrap();
    assert_eq!(t.model.body(), u.model.body());
    assert_eq!(t.report.mistakes_per_epoch, u.report.mistakes_per_epoch);
    assert_eq!(t.report.radius, u.report.radius);
    // A non-finite value in a mapped file is refused like one read into memory.
    let mut bad = common::npy_header("<f4", "(2, 2)");
    for v in [1.0f32, f32::NAN, 0.0, 2.0] {
        bad.extend(v.to_le_bytes());
    }
    std::fs::write(p.join("bad.npy"), bad).unwrap();
    let e = data::load(&p.join("bad.npy"), &LoadOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("row 1, column 2"), "{e}");
}

/// `convert` streams CSV and LIBSVM text into a float32 `.npy` (and the labels into another),
/// which training then memory-maps: the same model as training on the text. Run as a child
/// process, so the budget above does not reach it.
#[test]
fn convert_writes_npy_that_trains_like_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let o = common::run(
        p,
        &[
            "gen", "--n", "3000", "--d", "7", "--seed", "4", "--noise", "0.05", "-o", "a.csv",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = common::run(
        p,
        &[
            "gen", "--n", "3000", "--d", "7", "--seed", "4", "--noise", "0.05", "--format",
            "libsvm", "-o", "a.svm",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let train = |args: &[&str]| {
        let mut all = vec!["train"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--backend", "cpu", "--epochs", "40", "--json"]);
        let o = common::run(p, &all);
        assert!(o.status.success(), "{args:?}: {}", common::stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
        (r["mistakes_per_epoch"].clone(), r["train_accuracy"].clone())
    };
    let want = train(&["a.csv"]);
    for (src, out) in [("a.csv", "c.npy"), ("a.svm", "s.npy")] {
        let o = common::run(p, &["convert", src, "-o", out]);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let labels = out.replace(".npy", ".labels.npy");
        assert!(
            common::stderr(&o).contains(&labels),
            "{}",
            common::stderr(&o)
        );
        assert_eq!(train(&[out, "--labels", &labels]), want, "{src}");
        let ds = data::load(&p.join(out), &LoadOptions::default()).unwrap();
        assert!(ds.x.is_mapped());
        assert_eq!((ds.n, ds.d), (3000, 7));
    }
    // Bad input is named, exit 2, and leaves no output behind.
    common::write(p, "bad.csv", "a,b,label\n1,2,x\n3,oops,y\n");
    let o = common::run(p, &["convert", "bad.csv", "-o", "bad.npy"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("bad.csv"),
        "{}",
        common::stderr(&o)
    );
    assert!(!p.join("bad.npy").exists() && !p.join("bad.labels.npy").exists());
    let o = common::run(p, &["convert", "c.npy", "-o", "d.npy"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
}

/// Without the `mpi` feature, `--distributed` says how to get it (exit 2).
#[cfg(not(feature = "mpi"))]
#[test]
fn distributed_without_mpi_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    common::write(p, "a.csv", "x,label\n1,1\n-1,-1\n");
    let o = common::run(p, &["train", "a.csv", "--distributed"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("--features mpi"),
        "{}",
        common::stderr(&o)
    );
}

/// Each process of a data-parallel run parses only the lines that start in its byte range of
/// a text file: for any number of processes the shares, in process order, are the whole
/// file's rows (none lost, none twice), with a header or without, CRLF line ends, comments
/// (before the header too), blank lines, no final newline, and more processes than lines.
#[test]
fn the_shares_of_a_text_file_are_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let rows: Vec<(Vec<i32>, &str)> = (0..57)
        .map(|_| {
            let x = (0..4).map(|_| rng.random_range(-9..=99)).collect();
            (x, ["a", "b", "c"][rng.random_range(0..3)])
        })
        .collect();
    let csv_rows = |end: &str| -> String {
        rows.iter()
            .map(|(x, y)| {
                let x: Vec<String> = x.iter().map(|v| v.to_string()).collect();
                format!("{},{y}{end}", x.join(","))
            })
            .collect()
    };
    let mut svm = String::from("# a comment\n");
    for (k, (x, y)) in rows.iter().enumerate() {
        let label = match *y {
            "a" => 1,
            "b" => 2,
            _ => 3,
        };
        svm.push_str(&label.to_string());
        for (j, v) in x.iter().enumerate().filter(|(_, v)| **v != 0) {
            svm.push_str(&format!(" {}:{v}", j + 1));
        }
        svm.push_str(if k % 7 == 3 { "\n\n" } else { "\n" });
    }
    let files = [
        ("header.csv", format!("p,q,r,s,label\n{}", csv_rows("\n"))),
        ("bare.csv", csv_rows("\n")),
        ("crlf.csv", format!("p,q,r,s,label\r\n{}", csv_rows("\r\n"))),
        ("open.csv", csv_rows("\n").trim_end().to_string()),
        ("rows.svm", svm),
        ("tiny.csv", "p,label\n1,a\n2,b\n".to_string()),
        (
            "comments.csv",
            format!(
                "# made by hand\n\np,q,r,s,label\n# rows\n{}",
                csv_rows("\n")
            ),
        ),
    ];
    let opts = LoadOptions {
        layout: data::Layout::Dense,
        ..Default::default()
    };
    for (name, text) in &files {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        assert!(data::part::splits(&path, &opts).unwrap(), "{name}");
        let whole = data::load(&path, &opts).unwrap();
        let named = |ds: &data::Dataset| -> Vec<(Vec<f32>, String)> {
            let l = ds.labels.as_ref().unwrap();
            (0..ds.n)
                .map(|i| {
                    let row = (0..ds.d).map(|j| ds.get(i, j)).collect();
                    (row, l.classes[l.index[i] as usize].clone())
                })
                .collect()
        };
        let want = named(&whole);
        for parts in 1..=7 {
            let mut got = Vec::new();
            for k in 0..parts {
                let share = data::part::load_part(&path, &opts, k, parts).unwrap();
                assert!(share.d <= whole.d, "{name}");
                let mut rows = named(&share);
                for (r, _) in &mut rows {
                    r.resize(whole.d, 0.0);
                }
                got.extend(rows);
            }
            assert_eq!(got, want, "{name} in {parts} shares");
        }
    }
}
