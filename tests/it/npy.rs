//! NumPy input: .npy features (float32/float64, C and Fortran order) with labels from a second
//! .npy, and .npz archives with X and y, written here byte by byte; and every bad case.

use crate::common;

use std::io::Write;
use std::path::Path;

use rosenblatt_core::data::{self, LoadOptions};

/// The bytes of a version-1 .npy file.
fn npy(descr: &str, fortran: bool, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape_s = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_s}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn load(path: &Path, labels: Option<&Path>) -> rosenblatt::Result<data::Dataset> {
    let opts = LoadOptions {
        labels: labels.map(Path::to_path_buf),
        ..Default::default()
    };
    data::load(path, &opts)
}

fn npz(path: &Path, members: &[(&str, Vec<u8>)]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn npy_features_in_both_orders_with_npy_labels() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // 2 x 3: rows (1, 2, 3) and (4, 5, 6).
    std::fs::write(
        p.join("c.npy"),
        npy("<f4", false, &[2, 3], &f32s(&[1., 2., 3., 4., 5., 6.])),
    )
    .unwrap();
    std::fs::write(
        p.join("f.npy"),
        npy("<f8", true, &[2, 3], &f64s(&[1., 4., 2., 5., 3., 6.])),
    )
    .unwrap();
    std::fs::write(
        p.join("y.npy"),
        npy(
            "<i8",
            false,
            &[2],
            &[(-1i64).to_le_bytes(), 1i64.to_le_bytes()].concat(),
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("s.npy"),
        npy(
            "<U3",
            false,
            &[2],
            &"no\0yes"
                .chars()
                .flat_map(|c| (c as u32).to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
    )
    .unwrap();
    for f in ["c.npy", "f.npy"] {
        let ds = load(&p.join(f), Some(&p.join("y.npy"))).unwrap();
        assert_eq!((ds.n, ds.d), (2, 3), "{f}");
        assert_eq!(&*ds.x.values(), &[1., 2., 3., 4., 5., 6.], "{f}");
        assert_eq!(ds.labels.unwrap().classes, vec!["-1", "1"]);
    }
    let ds = load(&p.join("c.npy"), Some(&p.join("s.npy"))).unwrap();
    assert_eq!(ds.labels.unwrap().classes, vec!["no", "yes"]);
    assert!(load(&p.join("c.npy"), None).unwrap().labels.is_none());
    // Compact dtypes (images, counts) read as the same values.
    let halves: Vec<u8> = [1f32, 2., 3., 4., 5., 6.]
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let shorts: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for (name, descr, data) in [
        ("u1.npy", "|u1", vec![1u8, 2, 3, 4, 5, 6]),
        ("i1.npy", "|i1", vec![1u8, 2, 3, 4, 5, 6]),
        ("i2.npy", "<i2", shorts),
        ("f2.npy", "<f2", halves),
    ] {
        std::fs::write(p.join(name), npy(descr, false, &[2, 3], &data)).unwrap();
        let ds = load(&p.join(name), Some(&p.join("y.npy"))).unwrap();
        assert_eq!(&*ds.x.values(), &[1., 2., 3., 4., 5., 6.], "{name}");
        // C-order u8, i8 and f16 are memory-mapped and read in their own storage.
        let mapped = name != "i2.npy";
        assert_eq!(ds.x.is_mapped(), mapped, "{name}");
        if mapped {
            assert_ne!(
                ds.view().storage(),
                rosenblatt_backend::Storage::F32,
                "{name}"
            );
        }
    }
    // A subnormal half (which some GPUs flush to zero) is read into memory, not mapped.
    std::fs::write(
        p.join("tiny.npy"),
        npy("<f2", false, &[1, 2], &[0x01, 0x00, 0x00, 0x3c]),
    )
    .unwrap();
    let tiny = load(&p.join("tiny.npy"), None).unwrap();
    assert!(!tiny.x.is_mapped());
    assert_eq!(&*tiny.x.values(), &[2f32.powi(-24), 1.0]);
    std::fs::write(p.join("neg.npy"), npy("|i1", false, &[1, 2], &[0xff, 0x80])).unwrap();
    assert_eq!(
        &*load(&p.join("neg.npy"), None).unwrap().x.values(),
        &[-1., -128.]
    );
}

#[test]
fn npz_round_trip_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let s = common::separable(200, 4, 0.1, 2);
    let l = s.data.labels.as_ref().unwrap();
    let y: Vec<u8> = l
        .index
        .iter()
        .flat_map(|&c| (c as i32).to_le_bytes())
        .collect();
    npz(
        &p.join("d.npz"),
        &[
            ("X", npy("<f4", false, &[200, 4], &f32s(&s.data.x.values()))),
            ("y", npy("<i4", false, &[200], &y)),
        ],
    );
    let ds = load(&p.join("d.npz"), None).unwrap();
    assert_eq!(ds.x, s.data.x);
    assert_eq!(ds.labels.as_ref().unwrap().index, l.index);
    let o = common::run(
        p,
        &[
            "train",
            "d.npz",
            "-o",
            "m.json",
            "--backend",
            "cpu",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    std::fs::write(
        p.join("X.npy"),
        npy("<f4", false, &[200, 4], &f32s(&s.data.x.values())),
    )
    .unwrap();
    let o = common::run(p, &["predict", "m.json", "X.npy", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).lines().count(), 200);
    let o = common::run(
        p,
        &["eval", "m.json", "d.npz", "--backend", "cpu", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(v["accuracy"], 1.0);
}

#[test]
fn bad_numpy_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let x = npy("<f4", false, &[2, 2], &f32s(&[1., 2., 3., 4.]));
    std::fs::write(p.join("x.npy"), &x).unwrap();
    // (file name, its bytes, a labels file's bytes, the words the error must contain)
    type Case<'a> = (&'a str, Vec<u8>, Option<Vec<u8>>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "ints.npy",
            npy("<i4", false, &[2, 2], &[0u8; 16]),
            None,
            "8- or 16-bit integers",
        ),
        (
            "flat.npy",
            npy("<f4", false, &[4], &f32s(&[1., 2., 3., 4.])),
            None,
            "2-D",
        ),
        (
            "nan.npy",
            npy("<f4", false, &[2, 2], &f32s(&[1., f32::NAN, 3., 4.])),
            None,
            "row 1, column 2",
        ),
        (
            "short.npy",
            npy("<f4", false, &[2, 2], &f32s(&[1.])),
            None,
            "truncated",
        ),
        ("junk.npy", b"not numpy at all".to_vec(), None, "magic"),
        (
            "big.npy",
            npy(">f4", false, &[2, 2], &[0u8; 16]),
            None,
            "big-endian",
        ),
        (
            "x.npy",
            x.clone(),
            Some(npy("<i8", false, &[3], &[0u8; 24])),
            "3 labels for 2 rows",
        ),
        (
            "x.npy",
            x.clone(),
            Some(npy("<i8", false, &[2, 2], &[0u8; 32])),
            "labels must be 1-D",
        ),
    ];
    for (name, bytes, labels, want) in cases {
        std::fs::write(p.join(name), &bytes).unwrap();
        let lp = labels.map(|b| {
            std::fs::write(p.join("labels.npy"), b).unwrap();
            p.join("labels.npy")
        });
        let e = load(&p.join(name), lp.as_deref()).unwrap_err();
        assert!(e.is_input_error(), "{name}");
        assert!(
            e.to_string().contains(want) && e.to_string().contains(".npy"),
            "{name}: {e}"
        );
    }
    npz(&p.join("nox.npz"), &[("A", x.clone())]);
    let e = load(&p.join("nox.npz"), None).unwrap_err().to_string();
    assert!(e.contains("no array named X"), "{e}");
    std::fs::write(p.join("bad.npz"), b"PK junk").unwrap();
    let e = load(&p.join("bad.npz"), None).unwrap_err().to_string();
    assert!(e.contains("not a .npz"), "{e}");
    let o = common::run(p, &["train", "nox.npz", "-o", "m.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!p.join("m.json").exists());
}

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An archive's members: (name, .npy bytes).
type Members = Vec<(&'static str, Vec<u8>)>;

/// The members of a `scipy.sparse.save_npz` archive: format, shape, indptr, indices, data.
fn scipy(
    format: &str,
    shape: [i64; 2],
    indptr: Vec<u8>,
    indices: Vec<u8>,
    data: Vec<u8>,
) -> Members {
    vec![
        ("format", npy("|S3", false, &[], &format.as_bytes()[..3])),
        ("shape", npy("<i8", false, &[2], &i64s(&shape))),
        ("indptr", indptr),
        ("indices", indices),
        ("data", data),
    ]
}

/// The 3 x 4 matrix [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, -4]] with labels 1, -1, 1.
const DENSE: [f32; 12] = [1., 0., 2., 0., 0., 0., 0., 0., 0., 3., 0., -4.];

fn labels_npy(p: &Path) {
    std::fs::write(p.join("y.npy"), npy("<i8", false, &[3], &i64s(&[1, -1, 1]))).unwrap();
}

#[test]
fn scipy_sparse_npz_csr_and_csc_load_as_the_dense_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    labels_npy(p);
    // CSR with int32 indices and float64 data; CSC with int64 indices and float32 data.
    let csr = scipy(
        "csr",
        [3, 4],
        npy("<i4", false, &[4], &i32s(&[0, 2, 2, 4])),
        npy("<i4", false, &[4], &i32s(&[0, 2, 1, 3])),
        npy("<f8", false, &[4], &f64s(&[1., 2., 3., -4.])),
    );
    let csc = scipy(
        "csc",
        [3, 4],
        npy("<i8", false, &[5], &i64s(&[0, 1, 2, 3, 4])),
        npy("<i8", false, &[4], &i64s(&[0, 2, 0, 2])),
        npy("<f4", false, &[4], &f32s(&[1., 3., 2., -4.])),
    );
    npz(&p.join("r.npz"), &csr);
    npz(&p.join("c.npz"), &csc);
    for f in ["r.npz", "c.npz"] {
        for layout in [
            data::Layout::Auto,
            data::Layout::Sparse,
            data::Layout::Dense,
        ] {
            let opts = LoadOptions {
                labels: Some(p.join("y.npy")),
                layout,
                ..Default::default()
            };
            let ds = data::load(&p.join(f), &opts).unwrap();
            assert_eq!((ds.n, ds.d), (3, 4), "{f}");
            assert_eq!(
                ds.is_sparse(),
                layout == data::Layout::Sparse,
                "{f} {layout:?}"
            );
            assert_eq!(ds.view().to_dense(3, 4).to_vec(), DENSE, "{f} {layout:?}");
            assert_eq!(ds.labels.unwrap().classes, vec!["-1", "1"]);
        }
    }
    // Through the CLI: train, then predict on the same file.
    let o = common::run(
        p,
        &[
            "train",
            "r.npz",
            "--labels",
            "y.npy",
            "--sparse",
            "--algo",
            "online",
            "--backend",
            "cpu",
            "-o",
            "m.json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = common::run(p, &["predict", "m.json", "c.npz", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(
        common::stdout(&o).lines().collect::<Vec<_>>(),
        ["1", "-1", "1"]
    );
}

#[test]
fn bad_scipy_sparse_archives_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    labels_npy(p);
    let ip = |v: &[i32]| npy("<i4", false, &[v.len()], &i32s(v));
    let fd = |v: &[f64]| npy("<f8", false, &[v.len()], &f64s(v));
    let good = || (ip(&[0, 2, 2, 4]), ip(&[0, 2, 1, 3]), fd(&[1., 2., 3., -4.]));
    let cases: Vec<(&str, Members, &str)> = vec![
        {
            let (pp, _, d) = good();
            (
                "unsorted",
                scipy("csr", [3, 4], pp, ip(&[2, 0, 1, 3]), d),
                "not sorted",
            )
        },
        {
            let (_, i, d) = good();
            (
                "indptr",
                scipy("csr", [3, 4], ip(&[0, 3, 2, 4]), i, d),
                "not monotone",
            )
        },
        {
            let (_, i, d) = good();
            (
                "shape",
                scipy("csr", [2, 4], ip(&[0, 2, 2, 4]), i, d),
                "where 3 belong",
            )
        },
        {
            let (pp, i, _) = good();
            (
                "dtype",
                scipy(
                    "csr",
                    [3, 4],
                    pp,
                    i,
                    npy("<i4", false, &[4], &i32s(&[1, 2, 3, 4])),
                ),
                "float32 or float64",
            )
        },
        {
            let (pp, _, d) = good();
            (
                "index",
                scipy("csr", [3, 4], pp, ip(&[0, 2, 1, 4]), d),
                "not below the 4",
            )
        },
        {
            let (pp, i, d) = good();
            ("coo", scipy("coo", [3, 4], pp, i, d), "\"coo\" is not read")
        },
        {
            let (pp, i, _) = good();
            (
                "nan",
                scipy("csr", [3, 4], pp, i, fd(&[1., f64::NAN, 3., 4.])),
                "not a finite",
            )
        },
        {
            let (pp, i, _) = good();
            (
                "count",
                scipy("csr", [3, 4], pp, i, fd(&[1., 2., 3.])),
                "does not match",
            )
        },
        {
            let (_, i, d) = good();
            (
                "end",
                scipy("csr", [3, 4], ip(&[0, 2, 2, 3]), i, d),
                "must start at 0 and end",
            )
        },
    ];
    for (name, members, want) in cases {
        let f = format!("{name}.npz");
        npz(&p.join(&f), &members);
        let o = common::run(p, &["train", &f, "--labels", "y.npy", "--backend", "cpu"]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", common::stderr(&o));
        let e = common::stderr(&o);
        assert!(
            e.contains(&f) && e.contains(want),
            "{name}: {want:?} not in {e}"
        );
    }
}

#[test]
fn archives_written_by_scipy_load_as_their_dense_rows() {
    // Written by scripts/scipy_fixtures.py with scipy.sparse.save_npz.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scipy");
    let dense = data::load(&dir.join("rows.csv"), &LoadOptions::default()).unwrap();
    for f in ["rows_csr.npz", "rows_csc.npz"] {
        let ds = load(&dir.join(f), Some(&dir.join("labels.npy"))).unwrap();
        assert!(ds.is_sparse(), "{f}");
        assert_eq!((ds.n, ds.d, ds.stored()), (60, 500, 540), "{f}");
        assert_eq!(ds.view().to_dense(60, 500), dense.x.values(), "{f}");
        assert_eq!(ds.labels, dense.labels, "{f}");
    }
}
