//! NumPy input: .npy features (float32/float64, C and Fortran order) with labels from a second
//! .npy, and .npz archives with X and y, written here byte by byte; and every bad case.

mod common;

use std::io::Write;
use std::path::Path;

use rosenblatt::data::{self, LoadOptions};

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
        assert_eq!(ds.x.values(), &[1., 2., 3., 4., 5., 6.], "{f}");
        assert_eq!(ds.labels.unwrap().classes, vec!["-1", "1"]);
    }
    let ds = load(&p.join("c.npy"), Some(&p.join("s.npy"))).unwrap();
    assert_eq!(ds.labels.unwrap().classes, vec!["no", "yes"]);
    assert!(load(&p.join("c.npy"), None).unwrap().labels.is_none());
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
            ("X", npy("<f4", false, &[200, 4], &f32s(s.data.x.values()))),
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
        npy("<f4", false, &[200, 4], &f32s(s.data.x.values())),
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
            "float32 or float64",
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
