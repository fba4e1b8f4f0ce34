//! Plot commands write valid PNG, SVG and GIF files of the requested size on generated 2-D
//! data, with the expected elements; bad requests exit 2 and leave no file.

use crate::common;

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
            // Unscaled: the tests swap in weights on the features as given.
            "--scale",
            "none",
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

/// The view `plot boundary` gives a feature of `rows`: the values' range padded by 6% of
/// its span (plot/axis.rs, `padded`).
fn view(rows: &[(f64, f64)], k: usize) -> (f64, f64) {
    let v = |r: &(f64, f64)| if k == 0 { r.0 } else { r.1 };
    // The values as the data holds them (f32).
    let lo = rows
        .iter()
        .map(|r| v(r) as f32 as f64)
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|r| v(r) as f32 as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = (hi - lo) * 0.06;
    (lo - pad, hi + pad)
}

/// The rows of a generated 2-D CSV (f1, f2, label).
fn csv_rows(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<f64> = l.split(',').take(2).map(|v| v.parse().unwrap()).collect();
            (f[0], f[1])
        })
        .collect()
}

/// A number attribute of an SVG element.
fn attr(el: &str, name: &str) -> Option<f64> {
    let at = el.find(&format!(" {name}=\""))? + name.len() + 3;
    el[at..].split('"').next()?.parse().ok()
}

/// The plotting area in pixels (left, top, right, bottom): the box around the region cells
/// (filled rectangles, no stroke, not white).
fn plot_area(svg: &str) -> (f64, f64, f64, f64) {
    let mut b = (
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    );
    for el in svg.split("<rect").skip(1) {
        let el = el.split('>').next().unwrap();
        if !el.contains("stroke=\"none\"") || el.contains("fill=\"#FFFFFF\"") {
            continue;
        }
        let (x, y) = (attr(el, "x").unwrap(), attr(el, "y").unwrap());
        let (w, h) = (attr(el, "width").unwrap(), attr(el, "height").unwrap());
        b = (b.0.min(x), b.1.min(y), b.2.max(x + w), b.3.max(y + h));
    }
    b
}

/// The points of the boundary line: the first black polyline 2 wide (the legend's sample
/// comes after it).
fn boundary_points(svg: &str) -> Option<Vec<(f64, f64)>> {
    let el = svg
        .split("<polyline")
        .skip(1)
        .find(|e| e.contains("stroke=\"#000000\" stroke-width=\"2\""))?;
    let pts = el.split("points=\"").nth(1)?.split('"').next()?;
    Some(
        pts.split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect(),
    )
}

/// The model's (w1, w2, b) from its file.
fn hyperplane(path: &std::path::Path) -> (f64, f64, f64) {
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let w = m["weights"].as_array().unwrap();
    (
        w[0].as_f64().unwrap(),
        w[1].as_f64().unwrap(),
        m["bias"].as_f64().unwrap(),
    )
}

#[test]
fn the_boundary_line_drawn_lies_on_the_models_boundary() {
    // 8 generated sets, the default training: every point of the line read back from the
    // SVG, mapped to data coordinates through the plotting area, lies on w.x + b = 0 within
    // 2% of the view (before the line was clipped as a segment, 5 of 8 were off by 14-62%).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut steep = 0;
    for seed in 1..=8 {
        let seed = seed.to_string();
        let gen = [
            "gen", "--n", "300", "--d", "2", "--margin", "0.05", "--seed", &seed, "-o", "s.csv",
        ];
        assert!(run(p, &gen).status.success());
        let o = run(p, &["train", "s.csv", "-o", "s.json", "--backend", "cpu"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = run(p, &["plot", "boundary", "s.json", "s.csv", "-o", "s.svg"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let svg = std::fs::read_to_string(p.join("s.svg")).unwrap();
        let rows = csv_rows(&std::fs::read_to_string(p.join("s.csv")).unwrap());
        let ((x0, x1), (y0, y1)) = (view(&rows, 0), view(&rows, 1));
        let (l, t, r, b) = plot_area(&svg);
        let (a, bb, c) = hyperplane(&p.join("s.json"));
        if a.abs() * (x1 - x0) > bb.abs() * (y1 - y0) {
            steep += 1;
        }
        let pts = boundary_points(&svg).expect("a boundary line");
        assert!(pts.len() >= 2, "seed {seed}: {pts:?}");
        let span = (x1 - x0).max(y1 - y0);
        for &(px, py) in &pts {
            let x = x0 + (px - l) / (r - l) * (x1 - x0);
            let y = y1 - (py - t) / (b - t) * (y1 - y0);
            let off = (a * x + bb * y + c).abs() / (a * a + bb * bb).sqrt();
            assert!(
                off <= 0.02 * span,
                "seed {seed}: ({x}, {y}) is {off} from the boundary (view {span})"
            );
            // Within the view (a pixel's slack).
            assert!(px >= l - 1.0 && px <= r + 1.0 && py >= t - 1.0 && py <= b + 1.0);
        }
    }
    // The sets include boundaries steeper than the frame's diagonal (the case that was
    // drawn wrong).
    assert!(steep >= 1, "no steep boundary among the 8 sets");
}

#[test]
fn a_boundary_outside_the_view_or_w_zero_is_not_drawn_and_the_title_says_so() {
    let dir = setup();
    let p = dir.path();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    for (name, weights, bias, says) in [
        ("far.json", None, 1e6, "the boundary lies outside this view"),
        (
            "zero.json",
            Some([0.0, 0.0]),
            1.0,
            "w = 0: no boundary line",
        ),
    ] {
        let mut m = m.clone();
        m["bias"] = serde_json::json!(bias);
        if let Some(w) = weights {
            m["weights"] = serde_json::json!(w);
        }
        std::fs::write(p.join(name), m.to_string()).unwrap();
        let o = run(p, &["plot", "boundary", name, "d.csv", "-o", "x.svg"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let svg = std::fs::read_to_string(p.join("x.svg")).unwrap();
        assert!(svg.contains(says), "{name}");
        assert!(boundary_points(&svg).is_none(), "{name}: a line is drawn");
        assert!(!svg.contains("w.x + b = 0"), "{name}: a legend for no line");
        if weights.is_some() {
            assert!(
                !svg.contains("closest point"),
                "{name}: a distance to no boundary"
            );
        }
    }
}

/// A text of an SVG: position, anchor, size, rotation and the words.
#[derive(Debug)]
struct Text {
    x: f64,
    y: f64,
    anchor: String,
    size: f64,
    rotated: bool,
    text: String,
}

fn texts(svg: &str) -> Vec<Text> {
    svg.split("<text")
        .skip(1)
        .map(|el| {
            let (head, rest) = el.split_once('>').unwrap();
            let anchor = head
                .split("text-anchor=\"")
                .nth(1)
                .and_then(|t| t.split('"').next())
                .unwrap_or("start")
                .to_string();
            Text {
                x: attr(head, "x").unwrap(),
                y: attr(head, "y").unwrap(),
                anchor,
                size: attr(head, "font-size").unwrap(),
                rotated: head.contains("rotate("),
                text: rest.split("</text>").next().unwrap().trim().to_string(),
            }
        })
        .collect()
}

/// A generous width of a label in the SVG's font size (DejaVu Sans: no character used in a
/// number is wider than 0.84 em; digits are 0.64 em).
fn width(t: &Text) -> f64 {
    t.text
        .chars()
        .map(|c| if c == '+' { 0.84 } else { 0.64 })
        .sum::<f64>()
        * t.size
}

/// The tick labels of a boundary plot with plotting area `(l, t, r, b)`: y labels (right
/// aligned at the axis) and x labels (centred, just under the area).
fn tick_labels(svg: &str, (l, _t, _r, b): (f64, f64, f64, f64)) -> (Vec<Text>, Vec<Text>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for t in texts(svg) {
        if t.rotated {
            continue;
        }
        if t.anchor == "end" && t.x <= l {
            ys.push(t);
        } else if t.anchor == "middle" && t.y > b && t.y < b + 25.0 {
            xs.push(t);
        }
    }
    xs.sort_by(|p, q| p.x.total_cmp(&q.x));
    (xs, ys)
}

/// Checks the labels of an axis: every y label whole inside the picture (its sign too), x
/// labels apart from each other, all distinct.
fn check_ticks(svg: &str, area: (f64, f64, f64, f64), case: &str) -> Vec<String> {
    let (xs, ys) = tick_labels(svg, area);
    assert!(xs.len() >= 2 && ys.len() >= 2, "{case}: {xs:?} {ys:?}");
    for y in &ys {
        assert!(
            y.x - width(y) >= 0.0,
            "{case}: y label {:?} cut at the left",
            y.text
        );
    }
    for w in xs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.x + width(a) / 2.0 < b.x - width(b) / 2.0,
            "{case}: x labels {:?} and {:?} overlap",
            a.text,
            b.text
        );
    }
    let all: Vec<String> = xs.iter().chain(&ys).map(|t| t.text.clone()).collect();
    for (k, t) in ys.iter().enumerate() {
        assert!(
            !ys[k + 1..].iter().any(|u| u.text == t.text),
            "{case}: y label {:?} twice",
            t.text
        );
    }
    all
}

/// Every point of the boundary line drawn in `svg` lies on a x + b y + c = 0 within 1.5
/// pixels' worth of the view `(xr, yr)`; returns how many points were read.
fn check_line(svg: &str, (a, b, c): (f64, f64, f64), xr: (f64, f64), yr: (f64, f64), case: &str) {
    let (l, t, r, bt) = plot_area(svg);
    let pts = boundary_points(svg).unwrap_or_else(|| panic!("{case}: no line"));
    assert!(pts.len() >= 2, "{case}");
    let pixel = ((xr.1 - xr.0) / (r - l)).max((yr.1 - yr.0) / (bt - t));
    let norm = (a * a + b * b).sqrt();
    for &(px, py) in &pts {
        let x = xr.0 + (px - l) / (r - l) * (xr.1 - xr.0);
        let y = yr.1 - (py - t) / (bt - t) * (yr.1 - yr.0);
        let off = (a * x + b * y + c).abs() / norm;
        assert!(
            off <= 1.5 * pixel,
            "{case}: ({x}, {y}) is {off} off (a pixel is {pixel})"
        );
        assert!(
            px >= l - 1.0 && px <= r + 1.0 && py >= t - 1.0 && py <= bt + 1.0,
            "{case}"
        );
    }
    // The segment spans the view: its ends are on the frame.
    let on_edge = |&(px, py): &(f64, f64)| {
        [px - l, r - px, py - t, bt - py]
            .iter()
            .any(|d| d.abs() <= 2.0)
    };
    assert!(
        on_edge(&pts[0]) && on_edge(pts.last().unwrap()),
        "{case}: {pts:?}"
    );
}

/// A model file like `base` with weights `w` and bias `b`.
fn with_weights(base: &serde_json::Value, w: &[f64], b: f64) -> String {
    let mut m = base.clone();
    m["weights"] = serde_json::json!(w);
    m["bias"] = serde_json::json!(b);
    m.to_string()
}

#[test]
fn steep_shallow_vertical_horizontal_sliced_scaled_and_offset_lines_are_the_models() {
    // Each boundary read back from the SVG lies on the model's within a pixel and spans the
    // view; the tick labels fit, keep their sign and do not touch (data scaled by 1e6 read
    // "200000.0" for both -200000 and 200000, and data at 1e6 was squashed into a dot).
    let dir = setup();
    let p = dir.path();
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("m.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(p.join("d.csv")).unwrap();
    let rows = csv_rows(&text);
    let (xr, yr) = (view(&rows, 0), view(&rows, 1));
    for (case, w, b) in [
        ("steep", [31.2, 2.96], -4.0),
        ("shallow", [0.1, 1.0], 0.2),
        ("vertical", [1.0, 0.0], -0.25),
        ("horizontal", [0.0, 1.0], 0.3),
        ("diagonal", [1.0, -1.0], 0.0),
    ] {
        std::fs::write(p.join("c.json"), with_weights(&base, &w, b)).unwrap();
        let o = run(p, &["plot", "boundary", "c.json", "d.csv", "-o", "c.svg"]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let svg = std::fs::read_to_string(p.join("c.svg")).unwrap();
        check_line(&svg, (w[0], w[1], b), xr, yr, case);
        check_ticks(&svg, plot_area(&svg), case);
    }
    // Scaled by 1e6 and moved to 1e6: the same data, the same boundary carried along.
    for (case, scale, shift) in [("scaled", 1e6, 0.0), ("offset", 1.0, 1e6)] {
        let moved: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r.0 * scale + shift, r.1 * scale + shift))
            .collect();
        let mut csv = String::from("f1,f2,label\n");
        for (line, r) in text.lines().skip(1).zip(&moved) {
            let label = line.rsplit(',').next().unwrap();
            csv.push_str(&format!("{},{},{label}\n", r.0, r.1));
        }
        std::fs::write(p.join("s.csv"), csv).unwrap();
        // The line x - y = 0 moved: x - y = 0 for both (a shift along the diagonal).
        std::fs::write(p.join("s.json"), with_weights(&base, &[1.0, -1.0], 0.0)).unwrap();
        let o = run(p, &["plot", "boundary", "s.json", "s.csv", "-o", "s.svg"]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let svg = std::fs::read_to_string(p.join("s.svg")).unwrap();
        let (xs, ys) = (view(&moved, 0), view(&moved, 1));
        check_line(&svg, (1.0, -1.0, 0.0), xs, ys, case);
        let labels = check_ticks(&svg, plot_area(&svg), case);
        if case == "scaled" {
            assert!(
                labels.iter().any(|l| l.starts_with('-')),
                "{case}: {labels:?}"
            );
        }
        // The data fills the view: the circles span most of the plotting area.
        let (l, _, r, _) = plot_area(&svg);
        let cx: Vec<f64> = svg
            .split("<circle")
            .skip(1)
            .filter(|c| c.contains("r=\"3\""))
            .map(|c| attr(c, "cx").unwrap())
            .collect();
        let spread = cx.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            - cx.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            spread > 0.8 * (r - l),
            "{case}: the data spans {spread} of {} pixels",
            r - l
        );
    }
    // A slice of 3-D data: features 1 and 3, feature 2 at its mean.
    assert!(run(
        p,
        &["gen", "--n", "200", "--d", "3", "--seed", "4", "-o", "d3.csv"]
    )
    .status
    .success());
    let t3 = std::fs::read_to_string(p.join("d3.csv")).unwrap();
    let r3: Vec<Vec<f64>> = t3
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .take(3)
                .map(|v| v.parse::<f32>().unwrap() as f64)
                .collect()
        })
        .collect();
    let mean2 = r3.iter().map(|r| r[1] as f32 as f64).sum::<f64>() / r3.len() as f64;
    let mut m3 = base.clone();
    m3["n_features"] = serde_json::json!(3);
    let (w, b) = ([2.0, 1.5, 0.7], -0.1);
    std::fs::write(p.join("m3.json"), with_weights(&m3, &w, b)).unwrap();
    let o = run(
        p,
        &[
            "plot",
            "boundary",
            "m3.json",
            "d3.csv",
            "--features",
            "1,3",
            "-o",
            "c.svg",
        ],
    );
    assert!(o.status.success(), "slice: {}", stderr(&o));
    let svg = std::fs::read_to_string(p.join("c.svg")).unwrap();
    let pairs: Vec<(f64, f64)> = r3.iter().map(|r| (r[0], r[2])).collect();
    check_line(
        &svg,
        (w[0], w[2], b + w[1] * mean2),
        view(&pairs, 0),
        view(&pairs, 1),
        "slice",
    );
}

/// The legend's box (the black-framed rectangle) and the data circles drawn before it.
fn legend_and_points(svg: &str) -> ([f64; 4], Vec<(f64, f64)>) {
    let at = svg
        .find("fill=\"none\" stroke=\"#000000\"/>")
        .expect("a legend box");
    let head = &svg[..at];
    let rect = &head[head.rfind("<rect").unwrap()..];
    let (x, y) = (attr(rect, "x").unwrap(), attr(rect, "y").unwrap());
    let (w, h) = (attr(rect, "width").unwrap(), attr(rect, "height").unwrap());
    let pts = head
        .split("<circle")
        .skip(1)
        .map(|c| (attr(c, "cx").unwrap(), attr(c, "cy").unwrap()))
        .collect();
    ([x, y, x + w, y + h], pts)
}

/// Points on a disk of radius 1 (a sunflower spiral), with their angle's sector of
/// `sectors` as the class.
fn disk_csv(n: usize, sectors: usize) -> String {
    let mut csv = String::from("f1,f2,label\n");
    for k in 0..n {
        let (a, r) = (k as f64 * 2.399_963, (k as f64 / n as f64).sqrt());
        let (x, y) = (r * a.cos(), r * a.sin());
        let s = (y.atan2(x) + std::f64::consts::PI) / (std::f64::consts::TAU / sectors as f64);
        csv.push_str(&format!("{x},{y},c{}\n", (s as usize).min(sectors - 1)));
    }
    csv
}

#[test]
fn the_legend_covers_no_point_where_a_corner_is_free_and_ten_classes_get_ten_colours() {
    // Points on an L (the disk without its upper right quarter) leave a corner free: the
    // legend takes it (it sat at the middle right, over the data). Ten classes each get
    // their own colour (the palette had eight).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let l: String = disk_csv(600, 2)
        .lines()
        .filter(|row| {
            let v: Vec<f64> = row
                .split(',')
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect();
            v.len() < 2 || !(v[0] > 0.0 && v[1] > 0.0)
        })
        .map(|row| format!("{row}\n"))
        .collect();
    common::write(p, "disk.csv", &l);
    let o = run(
        p,
        &["train", "disk.csv", "-o", "d.json", "--backend", "cpu"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for (plot, out) in [("boundary", "d.svg"), ("roc", "roc.svg")] {
        let o = run(p, &["plot", plot, "d.json", "disk.csv", "-o", out]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let svg = std::fs::read_to_string(p.join("d.svg")).unwrap();
    let ([x0, y0, x1, y1], pts) = legend_and_points(&svg);
    assert!(pts.len() >= 400, "{}", pts.len());
    let covered: Vec<_> = pts
        .iter()
        .filter(|(x, y)| *x >= x0 && *x <= x1 && *y >= y0 && *y <= y1)
        .collect();
    assert!(
        covered.is_empty(),
        "the legend [{x0}, {y0}, {x1}, {y1}] covers {covered:?}"
    );

    common::write(p, "ring.csv", &disk_csv(400, 10));
    let o = run(
        p,
        &[
            "train",
            "ring.csv",
            "--algo",
            "multiclass",
            "-o",
            "r.json",
            "--backend",
            "cpu",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        p,
        &["plot", "boundary", "r.json", "ring.csv", "-o", "r.svg"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(p.join("r.svg")).unwrap();
    let fills: std::collections::BTreeSet<&str> = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.contains("r=\"3\""))
        .filter_map(|c| c.split("fill=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(fills.len(), 10, "{fills:?}");
    // Unlabelled data is coloured by the prediction, and the legend says so.
    let unlabelled: String = disk_csv(400, 10)
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string() + "\n")
        .collect();
    common::write(p, "u.csv", &unlabelled);
    let o = run(
        p,
        &[
            "plot",
            "boundary",
            "r.json",
            "u.csv",
            "--label-col",
            "none",
            "-o",
            "u.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(p.join("u.svg")).unwrap();
    assert!(svg.contains("predicted c0") && !svg.contains("class c0"));
}

#[test]
fn one_vs_rest_mistakes_are_counted_per_head_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut csv = String::from("f1,f2,label\n");
    for k in 0..180 {
        let c = k % 3;
        let (cx, cy) = [(0.0, 0.0), (3.0, 0.0), (0.0, 3.0)][c];
        let (a, r) = (k as f64 * 2.4, 0.9 * ((k * 7919 % 97) as f64 / 97.0));
        csv.push_str(&format!("{},{},{c}\n", cx + r * a.cos(), cy + r * a.sin()));
    }
    common::write(p, "m3.csv", &csv);
    let args = [
        "train",
        "m3.csv",
        "--algo",
        "batch",
        "--multiclass",
        "ovr",
        "--validation-fraction",
        "0.25",
        "--backend",
        "cpu",
    ];
    let o = run(p, &[&args[..], &["--json", "--plot", "v.svg"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["heads"], 3);
    let n = r["n"].as_u64().unwrap();
    let m = r["mistakes_per_epoch"].as_array().unwrap();
    assert!(m[0].as_u64().unwrap() > n, "epoch 1 counts heads: {m:?}");
    assert!(m.iter().all(|v| v.as_u64().unwrap() <= 3 * n));
    // Apart from the heads' mistakes, the rows predicted wrong: at most n, at most the
    // heads' mistakes, and in epoch 1 (w = 0, every score 0, class 0 predicted) the rows
    // not of class 0.
    let rows = r["wrong_rows_per_epoch"].as_array().unwrap();
    assert_eq!(rows.len(), m.len());
    for (w, k) in rows.iter().zip(m) {
        assert!(
            w.as_u64().unwrap() <= n.min(k.as_u64().unwrap()),
            "{rows:?} {m:?}"
        );
    }
    let (lo, hi) = (n * 2 / 3 - n / 6, n * 2 / 3 + n / 6);
    assert!((lo..=hi).contains(&rows[0].as_u64().unwrap()), "{rows:?}");
    let svg = std::fs::read_to_string(p.join("v.svg")).unwrap();
    assert!(svg.contains("training (1 - rows wrong / n)"));
    assert!(!svg.contains("per head (1 - mistakes"));
    assert!(svg.contains("summed over 3 heads"));
    assert!(svg.contains("rows predicted wrong per epoch"));
    let o = run(p, &args);
    assert!(
        common::stdout(&o).contains("counted per head"),
        "{}",
        common::stdout(&o)
    );
    assert!(
        common::stdout(&o).contains("rows wrong:"),
        "{}",
        common::stdout(&o)
    );
    // The online rules count the rows apart too; other models have no such count.
    let online = [
        "train",
        "m3.csv",
        "--algo",
        "online",
        "--multiclass",
        "ovr",
        "--json",
        "--backend",
        "cpu",
    ];
    let on = run(p, &online);
    assert!(on.status.success(), "{}", stderr(&on));
    let r: serde_json::Value = serde_json::from_slice(&on.stdout).unwrap();
    assert!(r["wrong_rows_per_epoch"].as_array().is_some(), "{r}");
    let direct = run(p, &["train", "m3.csv", "--json", "--backend", "cpu"]);
    let r: serde_json::Value = serde_json::from_slice(&direct.stdout).unwrap();
    assert!(r.get("wrong_rows_per_epoch").is_none(), "{r}");
    assert!(
        common::stdout(&o).contains("one-vs-rest model"),
        "{}",
        common::stdout(&o)
    );
}

/// Records every step of a training run, as `train --animate` does.
struct Rec(rosenblatt_app::plot::Recording);

impl rosenblatt_train::algo::Progress for Rec {
    fn wants_snapshots(&self) -> bool {
        true
    }
    fn snapshot(&mut self, epoch: usize, w: &[f32]) {
        self.0.record(epoch, w);
    }
}

#[test]
fn animations_start_at_start_end_on_the_saved_model_and_thin_evenly() {
    use rosenblatt_app::plot::{animation_frame, Recording, MAX_FRAMES};
    use rosenblatt_backend::cpu::CpuBackend;
    use rosenblatt_core::params::{Algo, Mode, TrainParams};
    use rosenblatt_train::algo;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let s = common::separable(300, 2, 0.02, 5);
    let mut last = Vec::new();
    for (algo, mode) in [
        (Algo::Averaged, Mode::Online),
        (Algo::Online, Mode::Online),
        (Algo::Pocket, Mode::Batch),
        (Algo::Averaged, Mode::Batch),
    ] {
        let params = TrainParams::for_algo(algo)
            .mode(mode)
            .epochs(30)
            .seed(3)
            .validate()
            .unwrap();
        let online = params.effective_mode() == Mode::Online;
        let mut rec = Rec(Recording::new(vec![0.0; 3], params.effective_mode()));
        let t = algo::train(&s.data, &params, &CpuBackend::new(), None, &mut rec).unwrap();
        let saved = t.model.augmented();
        let frames = rec.0.frames(&saved, "the saved model");
        let case = format!("{algo:?} {mode:?}");
        assert_eq!(frames[0].caption, "start", "{case}");
        assert_eq!(frames[0].weights, [0.0, 0.0, 0.0], "{case}");
        let end = frames.last().unwrap();
        assert_eq!(
            end.weights, saved,
            "{case}: the last frame is not the saved model"
        );
        assert!(
            end.caption.ends_with("the saved model"),
            "{case}: {}",
            end.caption
        );
        if online {
            assert!(
                frames[1].caption.starts_with("update 1 "),
                "{case}: {}",
                frames[1].caption
            );
        }
        // The last frame drawn shows the saved model's boundary.
        animation_frame(&s.data, end, &p.join("f.svg")).unwrap();
        let svg = std::fs::read_to_string(p.join("f.svg")).unwrap();
        let rows: Vec<(f64, f64)> = (0..s.data.n)
            .map(|r| (s.data.get(r, 0) as f64, s.data.get(r, 1) as f64))
            .collect();
        let frame_area = {
            // The frame has no cells: the area is the axes' box, from the circles' extent
            // padded as the view is (6% of the span each side).
            let cx: Vec<(f64, f64)> = svg
                .split("<circle")
                .skip(1)
                .map(|c| (attr(c, "cx").unwrap(), attr(c, "cy").unwrap()))
                .collect();
            let (l, r) = cx.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, c| {
                (a.0.min(c.0), a.1.max(c.0))
            });
            let (t, b) = cx.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, c| {
                (a.0.min(c.1), a.1.max(c.1))
            });
            let (pw, ph) = ((r - l) * 0.06 / 1.0, (b - t) * 0.06);
            (l - pw, t - ph, r + pw, b + ph)
        };
        let (xr, yr) = (view(&rows, 0), view(&rows, 1));
        let (l, t, r, b) = frame_area;
        let pts = boundary_points(&svg).expect("a line");
        let (a, bb, c) = (saved[0] as f64, saved[1] as f64, saved[2] as f64);
        for (px, py) in pts {
            let x = xr.0 + (px - l) / (r - l) * (xr.1 - xr.0);
            let y = yr.1 - (py - t) / (b - t) * (yr.1 - yr.0);
            let off = (a * x + bb * y + c).abs() / (a * a + bb * bb).sqrt();
            assert!(
                off < 0.02 * (xr.1 - xr.0),
                "{case}: ({x}, {y}) is {off} off"
            );
        }
        last.push(frames[frames.len() - 2].weights.clone());
    }
    // The averaged perceptron animates its average, not the online vector.
    assert_ne!(last[0], last[1]);

    // A long run is thinned evenly to the limit, its last step kept.
    let mut rec = Recording::new(vec![0.0; 3], Mode::Online);
    for k in 1..=282_258u64 {
        rec.record(1 + (k / 7057) as usize, &[k as f32, 1.0, 0.0]);
    }
    assert!(rec.thinned());
    let frames = rec.frames(&[1.0, 2.0, 3.0], "the saved model");
    assert!(frames.len() <= MAX_FRAMES, "{}", frames.len());
    let steps: Vec<u64> = frames[1..frames.len() - 1]
        .iter()
        .map(|f| f.caption.split(' ').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(*steps.last().unwrap(), 282_258);
    let gaps: Vec<u64> = steps.windows(2).map(|w| w[1] - w[0]).collect();
    let inner = &gaps[..gaps.len() - 1];
    let (lo, hi) = (inner.iter().min().unwrap(), inner.iter().max().unwrap());
    assert!(*hi <= 2 * *lo, "uneven frames: gaps {lo} to {hi}");
    assert!(steps[0] < 5000, "the first steps are shown: {steps:?}");
}
