//! Plot commands write valid PNG, SVG and GIF files of the requested size on generated 2-D
//! data, with the expected elements; bad requests exit 2 and leave no file.

mod common;

use common::{run, stderr};

fn png_size(b: &[u8]) -> (u32, u32) {
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    assert!(run(
        p,
        &["gen", "--n", "120", "--d", "2", "--noise", "0.05", "--seed", "2", "-o", "d.csv"]
    )
    .status
    .success());
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "pocket",
            "--epochs",
            "30",
            "-o",
            "m.json",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

#[test]
fn boundary_png_and_svg_have_the_size_points_and_line() {
    let dir = setup();
    let p = dir.path();
    let o = run(
        p,
        &[
            "plot", "boundary", "m.json", "d.csv", "-o", "b.png", "--width", "640", "--height",
            "480",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        png_size(&std::fs::read(p.join("b.png")).unwrap()),
        (640, 480)
    );
    let o = run(p, &["plot", "boundary", "m.json", "d.csv", "-o", "b.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(p.join("b.svg")).unwrap();
    assert!(svg.contains("width=\"800\"") && svg.contains("height=\"600\""));
    // One filled circle of radius 3 per data point.
    let points = svg.matches("<circle").filter(|_| true).count();
    let data_points = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.contains("r=\"3\"") && c.contains("stroke=\"none\""))
        .count();
    assert_eq!(data_points, 120, "{points} circles in all");
    // The boundary line, black and 2 wide, and its legend entry.
    assert!(svg.contains("<polyline") && svg.contains("stroke=\"#000000\" stroke-width=\"2\""));
    assert!(
        svg.contains("w.x + b = 0")
            && svg.contains("misclassified")
            && svg.contains("closest point")
    );
}

#[test]
fn training_and_roc_plots() {
    let dir = setup();
    let p = dir.path();
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "online",
            "--json",
            "--plot",
            "t.svg",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(p.join("run.json"), &o.stdout).unwrap();
    let svg = std::fs::read_to_string(p.join("t.svg")).unwrap();
    assert!(svg.contains("mistakes per epoch") && svg.contains("criterion J"));
    for (input, out) in [("run.json", "t.png"), ("m.json", "t2.png")] {
        let o = run(p, &["plot", "training", input, "-o", out]);
        assert!(o.status.success(), "{input}: {}", stderr(&o));
        assert_eq!(png_size(&std::fs::read(p.join(out)).unwrap()), (800, 600));
    }
    let o = run(p, &["plot", "roc", "m.json", "d.csv", "-o", "r.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(p.join("r.svg")).unwrap();
    assert!(
        svg.contains("ROC (AUC = 0.9") || svg.contains("ROC (AUC = 1.0"),
        "AUC in the legend"
    );
}

#[test]
fn animation_is_a_gif_of_the_documented_size() {
    let dir = setup();
    let p = dir.path();
    let o = run(
        p,
        &[
            "train",
            "d.csv",
            "--algo",
            "online",
            "--epochs",
            "5",
            "--animate",
            "a.gif",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let b = std::fs::read(p.join("a.gif")).unwrap();
    assert_eq!(&b[..6], b"GIF89a");
    assert_eq!(
        (
            u16::from_le_bytes([b[6], b[7]]),
            u16::from_le_bytes([b[8], b[9]])
        ),
        (640, 480)
    );
}

#[test]
fn bad_plot_requests_exit_2_and_write_nothing() {
    let dir = setup();
    let p = dir.path();
    assert!(run(p, &["gen", "--n", "50", "--d", "3", "-o", "d3.csv"])
        .status
        .success());
    assert!(run(p, &["train", "d3.csv", "-o", "m3.json"])
        .status
        .success());
    let o = run(p, &["plot", "boundary", "m3.json", "d3.csv", "-o", "x.png"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--features"), "{}", stderr(&o));
    let o = run(
        p,
        &[
            "plot",
            "boundary",
            "m3.json",
            "d3.csv",
            "-o",
            "x.png",
            "--features",
            "1,3",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(p.join("x.png")).unwrap();
    let o = run(
        p,
        &[
            "plot",
            "boundary",
            "m3.json",
            "d3.csv",
            "-o",
            "x.png",
            "--features",
            "1,9",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = run(p, &["plot", "boundary", "m.json", "d.csv", "-o", "x.jpg"]);
    assert_eq!(o.status.code(), Some(2));
    // ROC of a multiclass model.
    common::write(p, "mc.csv", "a,b,label\n0,0,x\n1,0,y\n0,1,z\n1,1,x\n");
    assert!(
        run(p, &["train", "mc.csv", "--algo", "online", "-o", "mc.json"])
            .status
            .success()
    );
    let o = run(p, &["plot", "roc", "mc.json", "mc.csv", "-o", "x.png"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("binary"), "{}", stderr(&o));
    // --animate needs 2-D data: refused before training, so no model is written either.
    let o = run(
        p,
        &["train", "d3.csv", "--animate", "x.gif", "-o", "x.json"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!p.join("x.json").exists());
    let leftovers: Vec<_> = std::fs::read_dir(p)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('x') || n.starts_with(".rosenblatt"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
