//! Pictures: the decision boundary of a model over 2-D data (or a 2-D slice), the training
//! curves of a run, the ROC curve, and an animation of the boundary during training. PNG or
//! SVG by the file's extension (GIF for animations); text uses the bundled DejaVu Sans, so no
//! system font library is needed. Files are drawn to a temporary and renamed into place.

use std::path::Path;

use plotters::coord::types::{RangedCoordf32, RangedCoordf64};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::backend::cpu::CpuBackend;
use crate::backend::Backend;
use crate::backend::MatrixBuf;
use crate::data::Dataset;
use crate::error::{Error, Param, Result};
use crate::metrics;
use crate::model::Model;
use crate::output;
use crate::report::TrainReport;

const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Class colours (colour-blind friendly: Okabe-Ito), cycled past eight classes.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn colour(c: usize) -> RGBColor {
    PALETTE[c % PALETTE.len()]
}

fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Plot("the bundled font could not be loaded".into()))
    }
}

fn perr<E: std::fmt::Debug>(e: E) -> Error {
    Error::Plot(format!("{e:?}"))
}

/// Image kinds chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// PNG bitmap.
    Png,
    /// SVG vector image.
    Svg,
    /// Animated GIF.
    Gif,
}

/// The image kind for `path`'s extension, or an input error naming it.
pub fn image_kind(path: &Path) -> Result<ImageKind> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("png") => Ok(ImageKind::Png),
        Some("svg") => Ok(ImageKind::Svg),
        Some("gif") => Ok(ImageKind::Gif),
        _ => Err(Error::InvalidParam {
            name: Param::ImagePath,
            value: path.display().to_string(),
            reason: "must end in .png or .svg (.gif for an animation)".into(),
        }),
    }
}

/// Widest span of an axis of a boundary plot (its arithmetic is in f32).
const MAX_SPAN: f64 = 1e37;

/// Largest value a training plot draws; larger ones (an astronomic Novikoff bound, J after
/// an overflow) are drawn at this height.
const MAX_PLOTTED: f64 = 1e300;

/// Largest image side in pixels.
pub const MAX_SIDE: u32 = 16_384;

/// Checks an image size: each side from 16 to [`MAX_SIDE`] pixels, and the bitmap within the
/// memory budget.
pub fn check_size((w, h): (u32, u32)) -> Result<()> {
    for (name, v) in [(Param::ImageWidth, w), (Param::ImageHeight, h)] {
        if !(16..=MAX_SIDE).contains(&v) {
            return Err(Error::param(
                name,
                v,
                format!("must be between 16 and {MAX_SIDE} pixels"),
            ));
        }
    }
    crate::limits::check(
        || format!("an image of {w} x {h} pixels"),
        w as u128 * h as u128,
        4,
    )
}

/// Something that can draw itself on any plotters backend.
trait Painter {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Draws `p` into a PNG or SVG at `out` (through a temporary file in the same folder).
fn render(out: &Path, size: (u32, u32), p: &impl Painter) -> Result<()> {
    check_size(size)?;
    register_font()?;
    let kind = image_kind(out)?;
    let ext = if kind == ImageKind::Svg {
        ".svg"
    } else {
        ".png"
    };
    let tmp = output::temp_beside(out, ext)
        .map_err(|e| Error::Plot(format!("cannot create {}: {e}", out.display())))?;
    match kind {
        ImageKind::Svg => {
            let root = SVGBackend::new(tmp.path(), size).into_drawing_area();
            p.paint(&root)?;
            root.present().map_err(perr)?;
        }
        ImageKind::Png => {
            let root = BitMapBackend::new(tmp.path(), size).into_drawing_area();
            p.paint(&root)?;
            root.present().map_err(perr)?;
        }
        ImageKind::Gif => {
            return Err(Error::InvalidParam {
                name: Param::ImagePath,
                value: out.display().to_string(),
                reason: "must end in .png or .svg (GIF is for animations)".into(),
            })
        }
    }
    tmp.persist()
        .map_err(|e| Error::Plot(format!("cannot write {}: {e}", out.display())))
}

/// What the boundary plot shows: two features of the data, the others fixed at their mean.
struct Slice {
    i: usize,
    j: usize,
    means: Vec<f32>,
    x_range: (f32, f32),
    y_range: (f32, f32),
}

fn slice(ds: &Dataset, features: Option<(usize, usize)>) -> Result<Slice> {
    let (i, j) = match (ds.d, features) {
        (_, Some((i, j))) => {
            if i >= ds.d || j >= ds.d || i == j {
                return Err(Error::InvalidParam {
                    name: Param::PlotFeatures,
                    value: format!("{},{}", i + 1, j + 1),
                    reason: "must name two different features between 1 and d".into(),
                });
            }
            (i, j)
        }
        (2, None) => (0, 1),
        (d, None) => {
            return Err(Error::param(
                Param::PlotFeatures,
                "not given",
                format!(
                    "must name two features i,j for data with {d} features (a boundary plot draws \
                     2: the slice through them, the others at their mean)"
                ),
            ))
        }
    };
    let mut means = vec![0f64; ds.d];
    ds.x.for_each_value(ds.d, |j, v| means[j] += v as f64);
    let means: Vec<f32> = means
        .iter()
        .map(|m| (m / ds.n.max(1) as f64) as f32)
        .collect();
    // In f64, with a margin relative to the values, so that a range is never empty or
    // infinite; a span plotters cannot draw in f32 is refused rather than drawn forever.
    let range = |k: usize| -> Result<(f32, f32)> {
        let (lo, hi) = (0..ds.n)
            .map(|r| ds.get(r, k) as f64)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 0.0) };
        let pad = ((hi - lo) * 0.06).max(1e-3 * lo.abs().max(hi.abs()).max(1.0));
        let (a, b) = (lo - pad, hi + pad);
        if b - a > MAX_SPAN {
            return Err(Error::data(
                &ds.source,
                format!(
                    "feature {} spans {:e} to {:e}, too wide to plot (at most {MAX_SPAN:e}); rescale it",
                    k + 1,
                    lo as f32,
                    hi as f32
                ),
            ));
        }
        Ok((a as f32, b as f32))
    };
    Ok(Slice {
        i,
        j,
        x_range: range(i)?,
        y_range: range(j)?,
        means,
    })
}

/// Predicted class of every cell centre of a `gw x gh` grid over the slice, scored in blocks
/// of at most 16 MiB of grid points (a slice through 100,000 features stays small).
fn grid_classes(model: &Model, s: &Slice, gw: usize, gh: usize) -> Result<Vec<u32>> {
    let d = s.means.len();
    let cells = gw * gh;
    let block = ((16usize << 20) / (4 * d.max(1))).clamp(1, cells.max(1));
    let mut out = Vec::with_capacity(cells);
    let mut x = Vec::with_capacity(block * d);
    for c0 in (0..cells).step_by(block) {
        x.clear();
        let c1 = (c0 + block).min(cells);
        for cell in c0..c1 {
            let (r, c) = (cell / gw, cell % gw);
            let start = x.len();
            x.extend_from_slice(&s.means);
            x[start + s.i] =
                s.x_range.0 + (c as f32 + 0.5) / gw as f32 * (s.x_range.1 - s.x_range.0);
            x[start + s.j] =
                s.y_range.0 + (r as f32 + 0.5) / gh as f32 * (s.y_range.1 - s.y_range.0);
        }
        let grid = Dataset::new(std::mem::take(&mut x), c1 - c0, d, None, "<grid>");
        out.extend(model.predict(&model.raw_scores(&grid, &CpuBackend::new())?));
        if let MatrixBuf::Dense(v) = grid.x {
            x = v;
        }
    }
    Ok(out)
}

fn light(c: RGBColor) -> RGBColor {
    let mix = |v: u8| (v as u16 + 3 * 255) as f32 / 4.0;
    RGBColor(mix(c.0) as u8, mix(c.1) as u8, mix(c.2) as u8)
}

/// The decision boundary of `model` over `ds` (2-D, or the slice through `features`).
pub fn boundary(
    model: &Model,
    ds: &Dataset,
    backend: &dyn Backend,
    features: Option<(usize, usize)>,
    out: &Path,
    size: (u32, u32),
) -> Result<()> {
    model.check_features(ds)?;
    let s = slice(ds, features)?;
    // The regions are cells of a grid; coarser in SVG, where each cell is an element.
    let (gw, gh) = if image_kind(out)? == ImageKind::Svg {
        (64usize, 48usize)
    } else {
        (160, 120)
    };
    let cells = grid_classes(model, &s, gw, gh)?;
    let raw = model.raw_scores(ds, backend)?;
    let pred = model.predict(&raw);
    let truth = match ds.labels {
        Some(_) => Some(model.class_indices(ds)?),
        None => None,
    };
    // Binary linear models: the line w.x + b = 0 in the slice, and the closest point.
    let line = match model.input_hyperplane() {
        Some(h) => {
            let w = &h.weights;
            let off: f32 = h.bias
                + (0..ds.d)
                    .filter(|k| *k != s.i && *k != s.j)
                    .map(|k| w[k] * s.means[k])
                    .sum::<f32>();
            Some((w[s.i], w[s.j], off))
        }
        None => None,
    };
    // (No distance to a boundary that is not there: w = 0.)
    let closest = model.input_hyperplane().and_then(|h| {
        let norm = h.weights.iter().map(|v| v * v).sum::<f32>().sqrt();
        (norm > 0.0 && norm.is_finite()).then_some((h, norm))
    });
    let closest = closest.map(|(_, norm)| {
        let (k, v) = raw
            .iter()
            .enumerate()
            .fold((0usize, f32::INFINITY), |(bk, bv), (k, v)| {
                if v.abs() < bv {
                    (k, v.abs())
                } else {
                    (bk, bv)
                }
            });
        (k, v / norm)
    });
    // Where the linear model's boundary is not drawn, the title says why.
    let missing = match line {
        Some((a, b, _)) if a == 0.0 && b == 0.0 => ", w = 0 here: no boundary line",
        Some(l) if clip_line(l, s.x_range, s.y_range).is_none() => {
            ", the boundary lies outside this view"
        }
        _ => "",
    };
    let title = format!(
        "{} ({:?}){}{missing}",
        model.algorithm().title(),
        model.kind(),
        if ds.d > 2 {
            ", slice: other features at their mean"
        } else {
            ""
        }
    )
    .to_lowercase();
    let plot = BoundaryPlot {
        model,
        ds,
        s: &s,
        cells: &cells,
        grid: (gw, gh),
        line,
        closest,
        pred: &pred,
        truth: truth.as_deref(),
        title: &title,
    };
    render(out, size, &plot)
}

struct BoundaryPlot<'a> {
    model: &'a Model,
    ds: &'a Dataset,
    s: &'a Slice,
    cells: &'a [u32],
    grid: (usize, usize),
    line: Option<(f32, f32, f32)>,
    closest: Option<(usize, f32)>,
    pred: &'a [u32],
    /// The model's class of each row's label, when the data is labelled.
    truth: Option<&'a [u32]>,
    title: &'a str,
}

impl Painter for BoundaryPlot<'_> {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let BoundaryPlot {
            s,
            cells,
            grid: (gw, gh),
            line,
            title,
            ..
        } = *self;
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(s.x_range.0..s.x_range.1, s.y_range.0..s.y_range.1)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(format!("feature {}", s.i + 1))
            .y_desc(format!("feature {}", s.j + 1))
            .label_style((FONT, 14))
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        let (cw, ch) = (
            (s.x_range.1 - s.x_range.0) / gw as f32,
            (s.y_range.1 - s.y_range.0) / gh as f32,
        );
        chart
            .draw_series(cells.iter().enumerate().map(|(k, c)| {
                let (x0, y0) = (
                    s.x_range.0 + (k % gw) as f32 * cw,
                    s.y_range.0 + (k / gw) as f32 * ch,
                );
                Rectangle::new(
                    [(x0, y0), (x0 + cw, y0 + ch)],
                    light(colour(*c as usize)).filled(),
                )
            }))
            .map_err(perr)?;
        if let Some(l) = line {
            draw_line(&mut chart, s, l)?;
        }
        self.draw_points(&mut chart)?;
        legend(&mut chart, 13, SeriesLabelPosition::MiddleRight)?;
        Ok(())
    }
}

/// A chart of two features.
type Chart2<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf32, RangedCoordf32>>;

/// The part of the line a x + b y + c = 0 inside the rectangle `xr` x `yr`: its two ends,
/// or `None` where the line misses the rectangle, touches it in one point, or is not a line
/// (a = b = 0). Every picture draws a boundary through this, so that the segment drawn is
/// the model's boundary, never a segment clamped to the frame.
pub(crate) fn clip_line(
    (a, b, c): (f32, f32, f32),
    xr: (f32, f32),
    yr: (f32, f32),
) -> Option<[(f32, f32); 2]> {
    let (a, b, c) = (a as f64, b as f64, c as f64);
    let (x0, x1, y0, y1) = (xr.0 as f64, xr.1 as f64, yr.0 as f64, yr.1 as f64);
    if !(a.is_finite() && b.is_finite() && c.is_finite()) || (a == 0.0 && b == 0.0) {
        return None;
    }
    let mut pts: Vec<(f64, f64)> = Vec::with_capacity(4);
    let inside = |v: f64, lo: f64, hi: f64| v >= lo && v <= hi;
    if b != 0.0 {
        for x in [x0, x1] {
            let y = -(a * x + c) / b;
            if inside(y, y0, y1) {
                pts.push((x, y));
            }
        }
    }
    if a != 0.0 {
        for y in [y0, y1] {
            let x = -(b * y + c) / a;
            if inside(x, x0, x1) {
                pts.push((x, y));
            }
        }
    }
    // The two points farthest apart (a line through a corner meets two edges there).
    let mut best: Option<([(f64, f64); 2], f64)> = None;
    for (i, p) in pts.iter().enumerate() {
        for q in &pts[i + 1..] {
            let d = (p.0 - q.0).powi(2) + (p.1 - q.1).powi(2);
            if d > 0.0 && best.is_none_or(|(_, bd)| d > bd) {
                best = Some(([*p, *q], d));
            }
        }
    }
    best.map(|([p, q], _)| [(p.0 as f32, p.1 as f32), (q.0 as f32, q.1 as f32)])
}

/// The boundary a x + b y + c = 0 across the slice's view, clipped to it; nothing where it
/// misses the view.
fn draw_line<DB: DrawingBackend>(
    chart: &mut Chart2<'_, DB>,
    s: &Slice,
    line: (f32, f32, f32),
) -> Result<()> {
    let Some(seg) = clip_line(line, s.x_range, s.y_range) else {
        return Ok(());
    };
    chart
        .draw_series(LineSeries::new(seg, BLACK.stroke_width(2)))
        .map_err(perr)?
        .label("w.x + b = 0")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    Ok(())
}

impl BoundaryPlot<'_> {
    /// The rows by class (the label's, else the predicted one), the misclassified ones
    /// circled, and the point closest to the boundary.
    fn draw_points<DB: DrawingBackend>(&self, chart: &mut Chart2<'_, DB>) -> Result<()> {
        let BoundaryPlot {
            model,
            ds,
            s,
            closest,
            pred,
            truth,
            ..
        } = *self;
        for (ci, name) in model.classes().iter().enumerate() {
            let pts: Vec<(f32, f32)> = (0..ds.n)
                .filter(|&r| truth.map_or(pred[r] as usize, |t| t[r] as usize) == ci)
                .map(|r| (ds.get(r, s.i), ds.get(r, s.j)))
                .collect();
            chart
                .draw_series(
                    pts.into_iter()
                        .map(|p| Circle::new(p, 3, colour(ci).filled())),
                )
                .map_err(perr)?
                .label(format!("class {name}"))
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour(ci).filled()));
        }
        if let Some(t) = truth {
            let wrong: Vec<(f32, f32)> = (0..ds.n)
                .filter(|&r| t[r] != pred[r])
                .map(|r| (ds.get(r, s.i), ds.get(r, s.j)))
                .collect();
            let n_wrong = wrong.len();
            chart
                .draw_series(
                    wrong
                        .into_iter()
                        .map(|p| Circle::new(p, 8, RED.stroke_width(2))),
                )
                .map_err(perr)?
                .label(format!("misclassified ({n_wrong})"))
                .legend(|(x, y)| Circle::new((x + 9, y), 6, RED.stroke_width(2)));
        }
        if let Some((k, dist)) = closest {
            let p = (ds.get(k, s.i), ds.get(k, s.j));
            chart
                .draw_series(std::iter::once(TriangleMarker::new(p, 9, BLACK.filled())))
                .map_err(perr)?
                .label(format!("closest point, distance {dist:.3}"))
                .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, BLACK.filled()));
        }
        Ok(())
    }
}

/// Reads a training report from `train --json` output or from a model file.
pub fn load_report(path: &Path) -> Result<TrainReport> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let bad = |m: String| Error::Data {
        path: path.to_path_buf(),
        msg: m,
    };
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).map_err(|e| bad(format!("not JSON ({e})")))?;
    let r = if v.get("format").is_some() {
        v.get("training").cloned().unwrap_or_default()
    } else {
        v
    };
    serde_json::from_value(r).map_err(|e| {
        bad(format!(
            "not a training report (a JSON training report or a model file): {e}"
        ))
    })
}

/// Draws the legend of the series drawn so far: framed, on a mostly opaque white box.
fn legend<'a, DB, CT>(
    c: &mut ChartContext<'a, DB, CT>,
    font: u32,
    pos: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    c.configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, font))
        .draw()
        .map_err(perr)?;
    Ok(())
}

/// Draws a line series with its legend entry (a short segment in the same style).
fn line<'a, DB, X, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pts: impl IntoIterator<Item = (f64, f64)>,
    style: ShapeStyle,
    label: String,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    c.draw_series(LineSeries::new(pts, style))
        .map_err(perr)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    Ok(())
}

/// Mistakes per epoch (log scale when they span decades), the cumulative mistakes next to
/// Novikoff's bound when known, and the perceptron criterion J.
pub fn training(r: &TrainReport, out: &Path, size: (u32, u32)) -> Result<()> {
    if r.mistakes_per_epoch.is_empty() {
        return Err(Error::Data {
            path: out.to_path_buf(),
            msg: "the report has no epochs".into(),
        });
    }
    let clamp = |v: f64| {
        if v.is_nan() {
            0.0
        } else {
            v.clamp(-MAX_PLOTTED, MAX_PLOTTED)
        }
    };
    let m: Vec<f64> = r
        .mistakes_per_epoch
        .iter()
        .map(|&v| clamp(v as f64))
        .collect();
    let cum: Vec<f64> = m
        .iter()
        .scan(0.0, |s, v| {
            *s = clamp(*s + v);
            Some(*s)
        })
        .collect();
    let bound = r.mistake_bound.map(clamp);
    let top = cum
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(bound.unwrap_or(0.0))
        .max(1.0);
    let nonzero_min = m
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let plot = TrainingPlot {
        title: format!(
            "{} on {} ({}), n = {}, d = {}",
            r.algo,
            r.backend,
            r.stop_reason.name(),
            r.n,
            r.d
        ),
        log: top / nonzero_min.max(1.0) >= 100.0,
        top,
        bound,
        j: r.criterion_per_epoch.iter().map(|&v| clamp(v)).collect(),
        accuracy: r.validation_accuracy_per_epoch.as_ref().map(|v| {
            let n = r.n.max(1) as f64;
            (
                m.iter().map(|&k| 1.0 - k / n).collect(),
                v.iter().map(|&a| clamp(a)).collect(),
                r.best_epoch,
            )
        }),
        m,
        cum,
        split: size.1 * 3 / 5,
    };
    render(out, size, &plot)
}

struct TrainingPlot {
    title: String,
    m: Vec<f64>,
    cum: Vec<f64>,
    bound: Option<f64>,
    log: bool,
    top: f64,
    j: Vec<f64>,
    /// With a validation set: training accuracy (1 - mistakes / n) and validation accuracy
    /// per epoch, and the best epoch; drawn instead of J.
    accuracy: Option<(Vec<f64>, Vec<f64>, usize)>,
    split: u32,
}

impl Painter for TrainingPlot {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let (up, down) = root.split_vertically(self.split);
        let e = (self.m.len() as f64).max(2.0);
        self.paint_mistakes(&up, e)?;
        match &self.accuracy {
            Some((train, val, best)) => Self::paint_accuracy(&down, e, train, val, *best),
            None => self.paint_criterion(&down, e),
        }
    }
}

impl TrainingPlot {
    /// The upper chart: mistakes per epoch (on a log axis when they span a wide range),
    /// cumulative mistakes and the bound, over `e` epochs.
    fn paint_mistakes<DB: DrawingBackend>(
        &self,
        up: &DrawingArea<DB, Shift>,
        e: f64,
    ) -> Result<()> {
        if self.log {
            let mut c = ChartBuilder::on(up)
                .caption(&self.title, (FONT, 18))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d(1f64..e, (0.5f64..self.top * 2.0).log_scale())
                .map_err(perr)?;
            c.configure_mesh()
                .x_desc("epoch")
                .y_desc("mistakes + 1 (log scale)")
                .label_style((FONT, 13))
                .light_line_style(WHITE)
                .draw()
                .map_err(perr)?;
            self.top_series(&mut c, 1.0)
        } else {
            let mut c = ChartBuilder::on(up)
                .caption(&self.title, (FONT, 18))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d(1f64..e, 0f64..self.top * 1.08)
                .map_err(perr)?;
            c.configure_mesh()
                .x_desc("epoch")
                .y_desc("mistakes")
                .label_style((FONT, 13))
                .light_line_style(WHITE)
                .draw()
                .map_err(perr)?;
            self.top_series(&mut c, 0.0)
        }
    }

    /// The lower chart with a validation set: training and validation accuracy per epoch and
    /// the best epoch.
    fn paint_accuracy<DB: DrawingBackend>(
        down: &DrawingArea<DB, Shift>,
        e: f64,
        train: &[f64],
        val: &[f64],
        best: usize,
    ) -> Result<()> {
        let lo = train
            .iter()
            .chain(val)
            .copied()
            .fold(1f64, f64::min)
            .clamp(0.0, 0.99);
        let mut c = ChartBuilder::on(down)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(1f64..e, lo..1.0)
            .map_err(perr)?;
        c.configure_mesh()
            .x_desc("epoch")
            .y_desc("accuracy")
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        let at = |s: &[f64]| -> Vec<(f64, f64)> {
            s.iter()
                .enumerate()
                .map(|(k, v)| ((k + 1) as f64, *v))
                .collect()
        };
        line(
            &mut c,
            at(train),
            colour(0).stroke_width(2),
            "training (1 - mistakes / n)".into(),
        )?;
        line(
            &mut c,
            at(val),
            colour(3).stroke_width(2),
            "validation".into(),
        )?;
        if best > 0 {
            let b = best as f64;
            line(
                &mut c,
                [(b, lo), (b, 1.0)],
                BLACK.stroke_width(1),
                format!("best epoch {best} (the model kept)"),
            )?;
        }
        legend(&mut c, 13, SeriesLabelPosition::LowerRight)
    }

    /// The lower chart without a validation set: the perceptron criterion J per epoch.
    fn paint_criterion<DB: DrawingBackend>(
        &self,
        down: &DrawingArea<DB, Shift>,
        e: f64,
    ) -> Result<()> {
        let jmax = self.j.iter().copied().fold(0f64, f64::max).max(1e-9);
        let mut c = ChartBuilder::on(down)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(1f64..e, 0f64..jmax * 1.08)
            .map_err(perr)?;
        c.configure_mesh()
            .x_desc("epoch")
            .y_desc("criterion J")
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        let j = self.j.iter().enumerate().map(|(k, v)| ((k + 1) as f64, *v));
        line(
            &mut c,
            j,
            colour(2).stroke_width(2),
            "J = sum over mistakes of -y w.x".into(),
        )?;
        legend(&mut c, 13, SeriesLabelPosition::MiddleRight)
    }
    /// Mistakes per epoch, cumulative mistakes and the bound, shifted by `shift` (1 on a log
    /// axis, so that epochs with no mistake still show).
    fn top_series<'a, DB, Y>(
        &self,
        c: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
        shift: f64,
    ) -> Result<()>
    where
        DB: DrawingBackend + 'a,
        Y: Ranged<ValueType = f64>,
    {
        let e = (self.m.len() as f64).max(2.0);
        let at = |k: usize, v: &f64| ((k + 1) as f64, v + shift);
        let per = self.m.iter().enumerate().map(|(k, v)| at(k, v));
        line(
            c,
            per,
            colour(0).stroke_width(2),
            "mistakes per epoch".into(),
        )?;
        let cum = self.cum.iter().enumerate().map(|(k, v)| at(k, v));
        line(
            c,
            cum,
            colour(1).stroke_width(2),
            "cumulative mistakes".into(),
        )?;
        if let Some(b) = self.bound {
            let label = format!("Novikoff bound (R/gamma)^2 = {b:.0}");
            line(
                c,
                [(1.0, b + shift), (e, b + shift)],
                RED.stroke_width(2),
                label,
            )?;
        }
        legend(c, 13, SeriesLabelPosition::MiddleRight)?;
        Ok(())
    }
}

/// The ROC curve of a binary model on labelled data, with the AUC in the legend.
pub fn roc(
    model: &Model,
    ds: &Dataset,
    backend: &dyn Backend,
    out: &Path,
    size: (u32, u32),
) -> Result<()> {
    if !model.is_binary() {
        return Err(Error::Data {
            path: ds.source.clone(),
            msg: format!(
                "a ROC curve needs a binary model; this one is {:?} with {} classes",
                model.kind(),
                model.classes().len()
            )
            .to_lowercase(),
        });
    }
    ds.require_labels()?;
    let positive: Vec<bool> = model.class_indices(ds)?.iter().map(|&t| t == 1).collect();
    let scores = model.decision_function(ds, backend)?;
    let auc = metrics::auc(&scores, &positive).ok_or_else(|| Error::Data {
        path: ds.source.clone(),
        msg: "a ROC curve needs both classes in the data".into(),
    })?;
    let plot = RocPlot {
        title: format!("ROC: {} perceptron, n = {}", model.algorithm().name(), ds.n),
        pts: metrics::roc_curve(&scores, &positive),
        auc,
    };
    render(out, size, &plot)
}

struct RocPlot {
    title: String,
    pts: Vec<(f64, f64)>,
    auc: f64,
}

impl Painter for RocPlot {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let mut c = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..1f64, 0f64..1.0001f64)
            .map_err(perr)?;
        c.configure_mesh()
            .x_desc("false positive rate")
            .y_desc("true positive rate")
            .label_style((FONT, 14))
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        line(
            &mut c,
            [(0.0, 0.0), (1.0, 1.0)],
            BLACK.mix(0.4).stroke_width(1),
            "chance".into(),
        )?;
        let label = format!("ROC (AUC = {:.4})", self.auc);
        line(
            &mut c,
            self.pts.iter().copied(),
            colour(0).stroke_width(3),
            label,
        )?;
        legend(&mut c, 14, SeriesLabelPosition::LowerRight)?;
        Ok(())
    }
}

/// Most frames in an animation; longer runs are subsampled evenly (first and last kept).
pub const MAX_FRAMES: usize = 150;

/// Checks an animation request, before training where possible: `out` ends in .gif, the data
/// is 2-D, and the model will be binary and linear (`binary_linear`).
pub fn check_animation(out: &Path, ds: &Dataset, binary_linear: bool) -> Result<()> {
    let why = if !image_kind(out).is_ok_and(|k| k == ImageKind::Gif) {
        "must end in .gif".to_string()
    } else if ds.d != 2 {
        format!(
            "needs 2-D data; {} has {} features",
            ds.source.display(),
            ds.d
        )
    } else if !binary_linear {
        "needs a binary linear model (not voted, kernel or multiclass)".to_string()
    } else {
        return Ok(());
    };
    Err(Error::param(Param::AnimationPath, out.display(), why))
}

/// An animated GIF of the boundary moving as training goes: `frames` are (epoch, augmented
/// weights) snapshots of a binary model on 2-D data; at most [`MAX_FRAMES`] are drawn,
/// 640 x 480, 80 ms apart.
pub fn animate(ds: &Dataset, frames: &[(usize, Vec<f32>)], online: bool, out: &Path) -> Result<()> {
    register_font()?;
    check_animation(out, ds, true)?;
    if frames.is_empty() {
        return Err(Error::Plot("no training steps to animate".into()));
    }
    let pick: Vec<usize> = if frames.len() <= MAX_FRAMES {
        (0..frames.len()).collect()
    } else {
        (0..MAX_FRAMES)
            .map(|k| k * (frames.len() - 1) / (MAX_FRAMES - 1))
            .collect()
    };
    let s = slice(ds, None)?;
    let labels = ds.require_labels()?;
    let tmp = output::temp_beside(out, ".gif")
        .map_err(|e| Error::Plot(format!("cannot create {}: {e}", out.display())))?;
    {
        let root = BitMapBackend::gif(tmp.path(), (640, 480), 80)
            .map_err(perr)?
            .into_drawing_area();
        for (n, &k) in pick.iter().enumerate() {
            let (epoch, w) = &frames[k];
            root.fill(&WHITE).map_err(perr)?;
            let what = if online {
                format!("update {} (epoch {epoch})", k + 1)
            } else {
                format!("epoch {epoch}")
            };
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    format!("{what}, frame {}/{}", n + 1, pick.len()),
                    (FONT, 18),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(40)
                .build_cartesian_2d(s.x_range.0..s.x_range.1, s.y_range.0..s.y_range.1)
                .map_err(perr)?;
            chart
                .configure_mesh()
                .disable_mesh()
                .label_style((FONT, 12))
                .draw()
                .map_err(perr)?;
            let (a, b, c) = (w[0], w[1], w[2]);
            if let Some(seg) = clip_line((a, b, c), s.x_range, s.y_range) {
                chart
                    .draw_series(LineSeries::new(seg, BLACK.stroke_width(2)))
                    .map_err(perr)?;
            }
            chart
                .draw_series((0..ds.n).map(|r| {
                    let p = (ds.get(r, 0), ds.get(r, 1));
                    let y = labels.index[r] as usize;
                    let wrong = (a * p.0 + b * p.1 + c >= 0.0) != (y == 1);
                    let style = if wrong {
                        RED.stroke_width(2)
                    } else {
                        colour(y).filled()
                    };
                    Circle::new(p, if wrong { 5 } else { 3 }, style)
                }))
                .map_err(perr)?;
            root.present().map_err(perr)?;
        }
    }
    tmp.persist()
        .map_err(|e| Error::Plot(format!("cannot write {}: {e}", out.display())))
}

/// A chart of named series (the experiments' pictures): lines or dots, each axis linear or
/// logarithmic (log axes plot log10 of the values and label the ticks with the values).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// The x axis's description.
    pub x_desc: String,
    /// The y axis's description.
    pub y_desc: String,
    /// A log10 x axis (values <= 0 are left out).
    pub log_x: bool,
    /// A log10 y axis (values <= 0 are left out).
    pub log_y: bool,
    /// The series, drawn in order.
    pub series: Vec<Series>,
}

/// One series of a [`Chart`].
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's entry.
    pub name: String,
    /// The points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Dots instead of a line.
    pub dots: bool,
}

/// Draws `chart` to `out` (.png or .svg).
pub fn chart(chart: &Chart, out: &Path, size: (u32, u32)) -> Result<()> {
    render(out, size, chart)
}

impl Chart {
    /// A point in the plotted coordinates (None: off a log axis).
    fn map(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        let axis = |v: f64, log: bool| match log {
            true if v > 0.0 => Some(v.log10()),
            true => None,
            false => v.is_finite().then_some(v),
        };
        Some((axis(x, self.log_x)?, axis(y, self.log_y)?))
    }

    /// The plotted ranges, padded.
    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts: Vec<(f64, f64)> = (self.series.iter())
            .flat_map(|s| s.points.iter().filter_map(|&p| self.map(p)))
            .collect();
        let span = |vals: Vec<f64>| {
            let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if !lo.is_finite() {
                return (0.0, 1.0);
            }
            let pad = ((hi - lo) * 0.05).max(1e-9);
            (lo - pad, hi + pad)
        };
        (
            span(pts.iter().map(|p| p.0).collect()),
            span(pts.iter().map(|p| p.1).collect()),
        )
    }
}

/// A tick label: the value; on a log axis 10^v at whole powers of ten and nothing between.
fn tick(v: f64, log: bool) -> String {
    if !log {
        return format!("{}", (v * 1e4).round() / 1e4);
    }
    if (v - v.round()).abs() > 1e-6 {
        return String::new();
    }
    let x = 10f64.powi(v.round() as i32);
    if (1e-3..1e5).contains(&x) {
        format!("{x}")
    } else {
        format!("{x:.0e}")
    }
}

impl Painter for Chart {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let ((x0, x1), (y0, y1)) = self.ranges();
        let mut c = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(perr)?;
        let (lx, ly) = (self.log_x, self.log_y);
        let xf = move |v: &f64| tick(*v, lx);
        let yf = move |v: &f64| tick(*v, ly);
        c.configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .label_style((FONT, 13))
            .light_line_style(WHITE)
            .draw()
            .map_err(perr)?;
        for (i, s) in self.series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = s.points.iter().filter_map(|&p| self.map(p)).collect();
            let col = colour(i);
            if s.dots {
                c.draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, 3, col.mix(0.6).filled())),
                )
                .map_err(perr)?
                .label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 3, col.filled()));
            } else {
                line(&mut c, pts, col.stroke_width(2), s.name.clone())?;
            }
        }
        legend(&mut c, 13, SeriesLabelPosition::UpperLeft)
    }
}

#[cfg(test)]
mod clip_tests {
    use super::clip_line;

    /// Distance of (x, y) from a x + b y + c = 0.
    fn off((a, b, c): (f32, f32, f32), (x, y): (f32, f32)) -> f32 {
        (a * x + b * y + c).abs() / (a * a + b * b).sqrt()
    }

    #[test]
    fn clipped_segments_lie_on_the_line_and_end_on_the_frame() {
        let (xr, yr) = ((-1.0, 1.0), (-2.0, 2.0));
        for line in [
            (31.2, 2.96, -4.0), // steep: ends on the top and bottom edges
            (0.1, 1.0, 0.5),    // shallow: ends on the left and right edges
            (1.0, 0.0, -0.25),  // vertical
            (0.0, 1.0, 1.5),    // horizontal
            (2.0, -1.0, 0.0),   // through a corner region: (1, 2) and (-1, -2)
        ] {
            let seg = clip_line(line, xr, yr).unwrap_or_else(|| panic!("{line:?}"));
            for p in seg {
                assert!(off(line, p) < 1e-5, "{line:?}: {seg:?}");
                assert!(p.0 >= xr.0 && p.0 <= xr.1 && p.1 >= yr.0 && p.1 <= yr.1);
                let on_edge = [p.0 - xr.0, xr.1 - p.0, p.1 - yr.0, yr.1 - p.1]
                    .iter()
                    .any(|d| d.abs() < 1e-5);
                assert!(on_edge, "{line:?}: {p:?}");
            }
            assert!(seg[0] != seg[1]);
        }
        // Steep: x at the top and bottom edges, not the frame's x ends.
        let s = clip_line((31.2, 2.96, -4.0), xr, yr).unwrap();
        assert!(
            s.iter().all(|p| p.1.abs() > 1.99 && p.0.abs() < 0.5),
            "{s:?}"
        );
        // A line outside the view, one touching a corner only, and w = 0: no segment.
        assert_eq!(clip_line((1.0, 0.0, -5.0), xr, yr), None);
        assert_eq!(clip_line((1.0, 1.0, -3.0), xr, yr), None);
        assert_eq!(clip_line((0.0, 0.0, 1.0), xr, yr), None);
        assert_eq!(clip_line((f32::NAN, 1.0, 0.0), xr, yr), None);
    }
}
