//! Pictures: the decision boundary of a model over 2-D data (or a 2-D slice), the training
//! curves of a run, the ROC curve, and an animation of the boundary during training. PNG or
//! SVG by the file's extension (GIF for animations); text uses the bundled DejaVu Sans, so no
//! system font library is needed. Files are drawn to a temporary and renamed into place.

mod axis;
mod legend;

use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use axis::{Axis, Scale};

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
static FONT_BYTES: &[u8] = include_bytes!("../../../../assets/DejaVuSans.ttf");

/// Class colours (colour-blind friendly: Okabe-Ito) for the first eight classes.
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

/// The colour of class (or series) `c`: the palette, then hues a golden angle apart at
/// alternating lightness, so that no two classes share a colour however many there are.
fn colour(c: usize) -> RGBColor {
    if let Some(p) = PALETTE.get(c) {
        return *p;
    }
    let k = (c - PALETTE.len()) as f64;
    let hue = (k * 0.381_966_011_250_105 + 0.05).fract();
    let light = [0.42, 0.58, 0.32][(c - PALETTE.len()) % 3];
    let (r, g, b) = hsl(hue, 0.75, light);
    // Never pure black (the boundary line's colour).
    RGBColor(r.max(8), g.max(8), b.max(8))
}

/// HSL (each in [0, 1]) to 8-bit RGB.
fn hsl(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h * 6.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let q = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (q(r), q(g), q(b))
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

/// The coordinates of every chart: f64 on both axes, with the ticks of [`axis`].
type Plane = Cartesian2d<Ticked, Ticked>;

/// An f64 axis whose ticks are given (plotters' own `WithKeyPoints` keeps the f64 axis's
/// formatting, which takes no label formatter; this one takes ours).
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(v, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

impl Ticked {
    fn new(a: &Axis) -> Ticked {
        Ticked {
            inner: (a.lo..a.hi).into(),
            ticks: a.ticks.clone(),
        }
    }
}

/// What a chart's frame holds: its caption, the two axes' ranges, scales and descriptions.
struct Frame<'t> {
    caption: Option<(&'t str, u32)>,
    x: (f64, f64, Scale),
    y: (f64, f64, Scale),
    x_desc: &'t str,
    y_desc: &'t str,
    /// Tick labels' size in pixels.
    font: u32,
    margin: u32,
    /// Grid lines at the ticks.
    grid: bool,
}

/// Builds the chart of `f` on `area` and draws its axes: ticks chosen to fit the area's size
/// ([`axis::axis`]), label areas as wide as the labels and the description need, and room on
/// the right for the last x label.
fn frame<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    f: &Frame<'_>,
) -> Result<ChartContext<'a, DB, Plane>> {
    let (w, h) = area.dim_in_pixel();
    let (w, h) = (w as f64, h as f64);
    let font = f.font;
    let cap = f.caption.map_or(0.0, |(_, size)| size as f64 * 1.6);
    let x_area = 2 * font + 22;
    let y_px = h - 2.0 * f.margin as f64 - cap - x_area as f64;
    let ya = axis::axis(f.y.0, f.y.1, f.y.2, y_px.max(20.0), font, axis::Along::Y);
    let widest = (ya.labels.iter())
        .map(|l| axis::text_width(l, font))
        .fold(0.0, f64::max);
    let y_area = (widest.ceil() as u32) + 12 + font + 16;
    let x_px = w - 2.0 * f.margin as f64 - y_area as f64;
    let xa = axis::axis(f.x.0, f.x.1, f.x.2, x_px.max(20.0), font, axis::Along::X);
    let last = xa.labels.last().map_or(0.0, |l| axis::text_width(l, font));
    let mut b = ChartBuilder::on(area);
    if let Some((text, size)) = f.caption {
        b.caption(text, (FONT, size));
    }
    let mut c = b
        .margin(f.margin)
        .margin_right(f.margin.max((last / 2.0).ceil() as u32 + 4))
        .x_label_area_size(x_area)
        .y_label_area_size(y_area)
        .build_cartesian_2d(Ticked::new(&xa), Ticked::new(&ya))
        .map_err(perr)?;
    let label = |a: &Axis, v: f64| -> String {
        a.ticks
            .iter()
            .zip(&a.labels)
            .min_by(|p, q| (p.0 - v).abs().total_cmp(&(q.0 - v).abs()))
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    let xf = |v: &f64| label(&xa, *v);
    let yf = |v: &f64| label(&ya, *v);
    let mut mesh = c.configure_mesh();
    mesh.x_desc(f.x_desc)
        .y_desc(f.y_desc)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .label_style((FONT, font))
        .axis_desc_style((FONT, font + 1))
        .light_line_style(WHITE);
    if !f.grid {
        mesh.disable_mesh();
    }
    mesh.draw().map_err(perr)?;
    Ok(c)
}

/// What a chart drew, for its legend: the entries, and the pixels of every mark and line
/// (the legend goes where it covers the fewest).
#[derive(Default)]
struct Key {
    labels: Vec<String>,
    marks: Vec<(i32, i32)>,
}

impl Key {
    /// Notes the points `pts` (data coordinates) as drawn marks.
    fn note_marks<'a, DB: DrawingBackend + 'a>(
        &mut self,
        c: &ChartContext<'a, DB, Plane>,
        pts: &[(f64, f64)],
    ) {
        self.marks.extend(pts.iter().map(|p| c.backend_coord(p)));
    }

    /// Notes the line through the points `pts` (data coordinates) as drawn.
    fn note_line<'a, DB: DrawingBackend + 'a>(
        &mut self,
        c: &ChartContext<'a, DB, Plane>,
        pts: &[(f64, f64)],
    ) {
        let px: Vec<(i32, i32)> = pts.iter().map(|p| c.backend_coord(p)).collect();
        self.marks.extend(legend::trace(&px));
    }

    /// Draws a line series with its legend entry (a short segment in the same style).
    fn line<'a, DB: DrawingBackend + 'a>(
        &mut self,
        c: &mut ChartContext<'a, DB, Plane>,
        pts: Vec<(f64, f64)>,
        style: ShapeStyle,
        label: String,
    ) -> Result<()> {
        self.note_line(c, &pts);
        c.draw_series(LineSeries::new(pts, style))
            .map_err(perr)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        self.labels.push(label);
        Ok(())
    }

    /// Draws the legend where it covers the fewest marks: framed, on a mostly opaque white
    /// box.
    fn draw<'a, DB: DrawingBackend + 'a>(
        &self,
        c: &mut ChartContext<'a, DB, Plane>,
        font: u32,
    ) -> Result<()> {
        if self.labels.is_empty() {
            return Ok(());
        }
        let size = legend::size(&self.labels, font);
        let area = c.plotting_area().get_pixel_range();
        let pos = legend::place(&area, size, &self.marks, 4);
        c.configure_series_labels()
            .position(pos)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, font))
            .draw()
            .map_err(perr)?;
        Ok(())
    }
}

/// What the boundary plot shows: two features of the data, the others fixed at their mean.
struct Slice {
    i: usize,
    j: usize,
    means: Vec<f32>,
    x_range: (f64, f64),
    y_range: (f64, f64),
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
    // In f64, padded by 6% of the span (a constant feature gets room around its value), so
    // that data far from 0 fills the view; a span plotters cannot draw is refused rather
    // than drawn forever.
    let range = |k: usize| -> Result<(f64, f64)> {
        let (lo, hi) = (0..ds.n)
            .map(|r| ds.get(r, k) as f64)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 0.0) };
        let (a, b) = axis::padded(lo, hi, 0.06);
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
        Ok((a, b))
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
                (s.x_range.0 + (c as f64 + 0.5) / gw as f64 * (s.x_range.1 - s.x_range.0)) as f32;
            x[start + s.j] =
                (s.y_range.0 + (r as f64 + 0.5) / gh as f64 * (s.y_range.1 - s.y_range.0)) as f32;
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
    let line = model.input_hyperplane().map(|h| {
        let w = &h.weights;
        let off: f64 = h.bias as f64
            + (0..ds.d)
                .filter(|k| *k != s.i && *k != s.j)
                .map(|k| w[k] as f64 * s.means[k] as f64)
                .sum::<f64>();
        (w[s.i] as f64, w[s.j] as f64, off)
    });
    // No distance to a boundary that is not there: w = 0.
    let norm = model
        .input_hyperplane()
        .map(|h| h.weights.iter().map(|v| v * v).sum::<f32>().sqrt())
        .filter(|n| *n > 0.0 && n.is_finite());
    let closest = norm.map(|norm| {
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
        Some(_) if norm.is_none() => ", w = 0: no boundary line",
        Some((a, b, _)) if a == 0.0 && b == 0.0 => {
            ", w is 0 in these two features: no boundary line"
        }
        Some(l) if clip_line(l, s.x_range, s.y_range).is_none() => {
            ", the boundary lies outside this view"
        }
        _ => "",
    };
    let title = format!(
        "{} ({}){}{missing}",
        model.algorithm().title().to_lowercase(),
        model.kind().describe(),
        if ds.d > 2 {
            ", slice: other features at their mean"
        } else {
            ""
        }
    );
    let plot = BoundaryPlot {
        model,
        ds,
        s: &s,
        cells: &cells,
        grid: (gw, gh),
        line: line.filter(|_| norm.is_some()),
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
    /// The boundary a x + b y + c = 0 in the slice.
    line: Option<(f64, f64, f64)>,
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
        let (xd, yd) = (
            format!("feature {}", s.i + 1),
            format!("feature {}", s.j + 1),
        );
        let mut chart = frame(
            root,
            &Frame {
                caption: Some((title, 20)),
                x: (s.x_range.0, s.x_range.1, Scale::Linear),
                y: (s.y_range.0, s.y_range.1, Scale::Linear),
                x_desc: &xd,
                y_desc: &yd,
                font: 14,
                margin: 12,
                grid: false,
            },
        )?;
        // The cells in f64: at an offset of 1e6 an f32 cell edge would leave gaps.
        let (cw, ch) = (
            (s.x_range.1 - s.x_range.0) / gw as f64,
            (s.y_range.1 - s.y_range.0) / gh as f64,
        );
        chart
            .draw_series(cells.iter().enumerate().map(|(k, c)| {
                let (x0, y0) = (
                    s.x_range.0 + (k % gw) as f64 * cw,
                    s.y_range.0 + (k / gw) as f64 * ch,
                );
                Rectangle::new(
                    [(x0, y0), (x0 + cw, y0 + ch)],
                    light(colour(*c as usize)).filled(),
                )
            }))
            .map_err(perr)?;
        let mut key = Key::default();
        if let Some(l) = line {
            draw_line(
                &mut chart,
                &mut key,
                s.x_range,
                s.y_range,
                l,
                Some("w.x + b = 0"),
            )?;
        }
        self.draw_points(&mut chart, &mut key)?;
        key.draw(&mut chart, 13)
    }
}

/// The part of the line a x + b y + c = 0 inside the rectangle `xr` x `yr`: its two ends,
/// or `None` where the line misses the rectangle, touches it in one point, or is not a line
/// (a = b = 0). Every picture draws a boundary through this, so that the segment drawn is
/// the model's boundary, never a segment clamped to the frame.
pub(crate) fn clip_line(
    (a, b, c): (f64, f64, f64),
    xr: (f64, f64),
    yr: (f64, f64),
) -> Option<[(f64, f64); 2]> {
    let (x0, x1, y0, y1) = (xr.0, xr.1, yr.0, yr.1);
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
    best.map(|(seg, _)| seg)
}

/// The boundary a x + b y + c = 0 across the view `xr` x `yr`, clipped to it, with a legend
/// entry when `label` is given; nothing where it misses the view.
fn draw_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Plane>,
    key: &mut Key,
    xr: (f64, f64),
    yr: (f64, f64),
    line: (f64, f64, f64),
    label: Option<&str>,
) -> Result<()> {
    let Some(seg) = clip_line(line, xr, yr) else {
        return Ok(());
    };
    match label {
        Some(l) => key.line(chart, seg.to_vec(), BLACK.stroke_width(2), l.to_string())?,
        None => {
            key.note_line(chart, &seg);
            chart
                .draw_series(LineSeries::new(seg, BLACK.stroke_width(2)))
                .map_err(perr)?;
        }
    }
    Ok(())
}

impl BoundaryPlot<'_> {
    /// The rows by class (the label's, else the predicted one), the misclassified ones
    /// circled, and the point closest to the boundary.
    fn draw_points<'c, DB: DrawingBackend + 'c>(
        &self,
        chart: &mut ChartContext<'c, DB, Plane>,
        key: &mut Key,
    ) -> Result<()> {
        let BoundaryPlot {
            model,
            ds,
            s,
            closest,
            pred,
            truth,
            ..
        } = *self;
        let at = |r: usize| (ds.get(r, s.i) as f64, ds.get(r, s.j) as f64);
        for (ci, name) in model.classes().iter().enumerate() {
            let pts: Vec<(f64, f64)> = (0..ds.n)
                .filter(|&r| truth.map_or(pred[r] as usize, |t| t[r] as usize) == ci)
                .map(at)
                .collect();
            key.note_marks(chart, &pts);
            // Unlabelled data is coloured by the prediction, and the legend says so.
            let label = match truth {
                Some(_) => format!("class {name}"),
                None => format!("predicted {name}"),
            };
            chart
                .draw_series(
                    pts.into_iter()
                        .map(|p| Circle::new(p, 3, colour(ci).filled())),
                )
                .map_err(perr)?
                .label(label.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, colour(ci).filled()));
            key.labels.push(label);
        }
        if let Some(t) = truth {
            let wrong: Vec<(f64, f64)> = (0..ds.n).filter(|&r| t[r] != pred[r]).map(at).collect();
            let n_wrong = wrong.len();
            let label = format!("misclassified ({n_wrong})");
            chart
                .draw_series(
                    wrong
                        .into_iter()
                        .map(|p| Circle::new(p, 8, RED.stroke_width(2))),
                )
                .map_err(perr)?
                .label(label.clone())
                .legend(|(x, y)| Circle::new((x + 9, y), 6, RED.stroke_width(2)));
            key.labels.push(label);
        }
        if let Some((k, dist)) = closest {
            let p = at(k);
            let label = format!("closest point, distance {dist:.3}");
            chart
                .draw_series(std::iter::once(TriangleMarker::new(p, 9, BLACK.filled())))
                .map_err(perr)?
                .label(label.clone())
                .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, BLACK.filled()));
            key.labels.push(label);
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
    // One-vs-rest counts a row once in each head that is wrong on it; its accuracy is in
    // rows (the rows whose highest head is wrong) where the report has them, else per head,
    // out of heads x n.
    let heads = r.heads.unwrap_or(1).max(1);
    let rows: Option<Vec<f64>> = r
        .wrong_rows_per_epoch
        .as_ref()
        .filter(|_| heads > 1)
        .map(|v| v.iter().map(|&k| clamp(k as f64)).collect());
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
        heads,
        j: r.criterion_per_epoch.iter().map(|&v| clamp(v)).collect(),
        accuracy: r.validation_accuracy_per_epoch.as_ref().map(|v| {
            let (wrong, n) = match &rows {
                Some(rows) => (rows, r.n.max(1) as f64),
                None => (&m, (r.n.max(1) * heads) as f64),
            };
            (
                wrong
                    .iter()
                    .map(|&k| (1.0 - k / n).clamp(0.0, 1.0))
                    .collect(),
                v.iter().map(|&a| clamp(a)).collect(),
                r.best_epoch,
            )
        }),
        in_rows: rows.is_some(),
        rows,
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
    /// The heads a row's mistakes are counted in (one-vs-rest: K; else 1).
    heads: usize,
    /// One-vs-rest: the rows predicted wrong per epoch (drawn beside the heads' mistakes).
    rows: Option<Vec<f64>>,
    /// Whether the training accuracy is in rows (else per head).
    in_rows: bool,
    j: Vec<f64>,
    /// With a validation set: training accuracy (1 - mistakes / n, per head for one-vs-rest)
    /// and validation accuracy per epoch, and the best epoch; drawn instead of J.
    accuracy: Option<(Vec<f64>, Vec<f64>, usize)>,
    split: u32,
}

/// The points (epoch, value) of a per-epoch series, epochs from 1.
fn per_epoch(v: &[f64], f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    v.iter()
        .enumerate()
        .map(|(k, v)| ((k + 1) as f64, f(*v)))
        .collect()
}

impl Painter for TrainingPlot {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let (up, down) = root.split_vertically(self.split);
        let e = (self.m.len() as f64).max(2.0);
        self.paint_mistakes(&up, e)?;
        match &self.accuracy {
            Some((train, val, best)) => self.paint_accuracy(&down, e, train, val, *best),
            None => self.paint_criterion(&down, e),
        }
    }
}

impl TrainingPlot {
    /// The upper chart: mistakes per epoch (on a log axis, of mistakes + 1, when they span a
    /// wide range), cumulative mistakes and the bound, over `e` epochs.
    fn paint_mistakes<DB: DrawingBackend>(
        &self,
        up: &DrawingArea<DB, Shift>,
        e: f64,
    ) -> Result<()> {
        let (y, scale, desc, f): (_, _, _, fn(f64) -> f64) = if self.log {
            (
                (-0.05, (self.top + 1.0).log10() * 1.05 + 0.05),
                Scale::Log,
                "mistakes + 1 (log scale)",
                |v| (v + 1.0).log10(),
            )
        } else {
            ((0.0, self.top * 1.08), Scale::Linear, "mistakes", |v| v)
        };
        let mut c = frame(
            up,
            &Frame {
                caption: Some((&self.title, 18)),
                x: (1.0, e, Scale::Integer),
                y: (y.0, y.1, scale),
                x_desc: "epoch",
                y_desc: desc,
                font: 13,
                margin: 10,
                grid: true,
            },
        )?;
        let mut key = Key::default();
        let mistakes = if self.heads > 1 {
            format!("mistakes per epoch, summed over {} heads", self.heads)
        } else {
            "mistakes per epoch".into()
        };
        key.line(
            &mut c,
            per_epoch(&self.m, f),
            colour(0).stroke_width(2),
            mistakes,
        )?;
        if let Some(rows) = &self.rows {
            key.line(
                &mut c,
                per_epoch(rows, f),
                colour(2).stroke_width(2),
                "rows predicted wrong per epoch".into(),
            )?;
        }
        key.line(
            &mut c,
            per_epoch(&self.cum, f),
            colour(1).stroke_width(2),
            "cumulative mistakes".into(),
        )?;
        if let Some(b) = self.bound {
            key.line(
                &mut c,
                vec![(1.0, f(b)), (e, f(b))],
                RED.stroke_width(2),
                format!("Novikoff bound (R/gamma)^2 = {b:.0}"),
            )?;
        }
        key.draw(&mut c, 13)
    }

    /// The lower chart with a validation set: training and validation accuracy per epoch and
    /// the best epoch.
    fn paint_accuracy<DB: DrawingBackend>(
        &self,
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
        let hi = 1.0 + (1.0 - lo) * 0.03;
        let mut c = frame(
            down,
            &Frame {
                caption: None,
                x: (1.0, e, Scale::Integer),
                y: (lo, hi, Scale::Linear),
                x_desc: "epoch",
                y_desc: "accuracy",
                font: 13,
                margin: 10,
                grid: true,
            },
        )?;
        let mut key = Key::default();
        let train_label = if self.in_rows {
            "training (1 - rows wrong / n)".into()
        } else if self.heads > 1 {
            format!("training, per head (1 - mistakes / ({} n))", self.heads)
        } else {
            "training (1 - mistakes / n)".into()
        };
        key.line(
            &mut c,
            per_epoch(train, |v| v),
            colour(0).stroke_width(2),
            train_label,
        )?;
        key.line(
            &mut c,
            per_epoch(val, |v| v),
            colour(3).stroke_width(2),
            "validation".into(),
        )?;
        if best > 0 {
            let b = best as f64;
            key.line(
                &mut c,
                vec![(b, lo), (b, 1.0)],
                BLACK.stroke_width(1),
                format!("best epoch {best} (the model kept)"),
            )?;
        }
        key.draw(&mut c, 13)
    }

    /// The lower chart without a validation set: the perceptron criterion J per epoch.
    fn paint_criterion<DB: DrawingBackend>(
        &self,
        down: &DrawingArea<DB, Shift>,
        e: f64,
    ) -> Result<()> {
        let jmax = self.j.iter().copied().fold(0f64, f64::max).max(1e-9);
        let mut c = frame(
            down,
            &Frame {
                caption: None,
                x: (1.0, e, Scale::Integer),
                y: (0.0, jmax * 1.08, Scale::Linear),
                x_desc: "epoch",
                y_desc: "criterion J",
                font: 13,
                margin: 10,
                grid: true,
            },
        )?;
        let mut key = Key::default();
        key.line(
            &mut c,
            per_epoch(&self.j, |v| v),
            colour(2).stroke_width(2),
            "J = sum over mistakes of -y w.x".into(),
        )?;
        key.draw(&mut c, 13)
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
                "a ROC curve needs a binary model; this one is a {} model with {} classes",
                model.kind().describe(),
                model.classes().len()
            ),
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
        let mut c = frame(
            root,
            &Frame {
                caption: Some((&self.title, 20)),
                x: (0.0, 1.0, Scale::Linear),
                y: (0.0, 1.0001, Scale::Linear),
                x_desc: "false positive rate",
                y_desc: "true positive rate",
                font: 14,
                margin: 12,
                grid: true,
            },
        )?;
        let mut key = Key::default();
        key.line(
            &mut c,
            vec![(0.0, 0.0), (1.0, 1.0)],
            BLACK.mix(0.4).stroke_width(1),
            "chance".into(),
        )?;
        key.line(
            &mut c,
            self.pts.clone(),
            colour(0).stroke_width(3),
            format!("ROC (AUC = {:.4})", self.auc),
        )?;
        key.draw(&mut c, 14)
    }
}

/// Most frames an animation draws; longer runs are thinned evenly (first and last kept).
pub const MAX_FRAMES: usize = 150;

/// Frames a [`Recording`] keeps: past this it drops every other one and records every
/// second step from then on, so that what it keeps stays evenly spaced over the whole run.
const KEEP: usize = 2 * MAX_FRAMES;

/// One frame of an animation: its caption and the augmented weights (w1, w2, b) drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct AnimFrame {
    /// What the frame shows ("start", "update 12 (epoch 2)", "the saved model ...").
    pub caption: String,
    /// The augmented weights of the binary linear model drawn.
    pub weights: Vec<f32>,
}

/// The weights of a binary linear model on 2-D data as training goes, for [`animate`]: one
/// step an update (online) or an epoch (batch), kept evenly thinned to at most a few hundred
/// frames however long the run, the last step always kept.
#[derive(Debug, Clone)]
pub struct Recording {
    online: bool,
    /// (step, epoch, weights); step 0 is the start.
    kept: Vec<(u64, usize, Vec<f32>)>,
    /// Every `stride`-th step is kept.
    stride: u64,
    steps: u64,
    /// The newest step, when it is not among the kept ones.
    newest: Option<(u64, usize, Vec<f32>)>,
}

impl Recording {
    /// A recording starting from the weights `start` of a run in `mode`: online, a step is an
    /// update; batch, an epoch.
    pub fn new(start: Vec<f32>, mode: crate::params::Mode) -> Recording {
        Recording {
            online: mode == crate::params::Mode::Online,
            kept: vec![(0, 0, start)],
            stride: 1,
            steps: 0,
            newest: None,
        }
    }

    /// Records the next step: the weights after it, in `epoch` (1-based).
    pub fn record(&mut self, epoch: usize, w: &[f32]) {
        self.steps += 1;
        let f = (self.steps, epoch, w.to_vec());
        if !self.steps.is_multiple_of(self.stride) {
            self.newest = Some(f);
            return;
        }
        self.newest = None;
        self.kept.push(f);
        if self.kept.len() > KEEP {
            let twice = self.stride * 2;
            self.kept.retain(|(s, _, _)| s.is_multiple_of(twice));
            self.stride = twice;
        }
    }

    /// Steps recorded (updates or epochs), the start not counted.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// True when there are more steps than an animation draws: [`Recording::frames`] then
    /// shows `MAX_FRAMES - 2` of them, evenly spaced, the start and the saved model.
    pub fn thinned(&self) -> bool {
        self.steps as usize + 1 > MAX_FRAMES - 1
    }

    /// The frames to draw: at most [`MAX_FRAMES`], evenly spaced from the start to the last
    /// step, then the saved model `saved` (captioned `saved_caption`) unless the last step
    /// already shows it.
    pub fn frames(mut self, saved: &[f32], saved_caption: &str) -> Vec<AnimFrame> {
        self.kept.extend(self.newest.take());
        let all = self.kept;
        let room = MAX_FRAMES - 1;
        let pick: Vec<usize> = if all.len() <= room {
            (0..all.len()).collect()
        } else {
            (0..room)
                .map(|k| k * (all.len() - 1) / (room - 1))
                .collect()
        };
        let mut frames: Vec<AnimFrame> = pick
            .into_iter()
            .map(|k| {
                let (step, epoch, w) = &all[k];
                let caption = match (step, self.online) {
                    (0, _) => "start".to_string(),
                    (s, true) => format!("update {s} (epoch {epoch})"),
                    (_, false) => format!("epoch {epoch}"),
                };
                AnimFrame {
                    caption,
                    weights: w.clone(),
                }
            })
            .collect();
        match frames.last_mut() {
            Some(f) if f.weights == saved => {
                f.caption = format!("{}: {saved_caption}", f.caption);
            }
            _ => frames.push(AnimFrame {
                caption: saved_caption.to_string(),
                weights: saved.to_vec(),
            }),
        }
        frames
    }
}

/// Checks an animation request, before training where possible: `out` ends in .gif, the data
/// is 2-D, and the model will be binary and linear (`not_linear`: why it will not be).
pub fn check_animation(out: &Path, ds: &Dataset, not_linear: Option<&str>) -> Result<()> {
    if !image_kind(out).is_ok_and(|k| k == ImageKind::Gif) {
        return Err(Error::param(
            Param::AnimationPath,
            out.display(),
            "must end in .gif",
        ));
    }
    let why = if ds.d != 2 {
        format!(
            "an animation draws a boundary over 2 features, and this data has {}",
            ds.d
        )
    } else if let Some(why) = not_linear {
        format!("an animation draws one binary linear model, and {why}")
    } else {
        return Ok(());
    };
    Err(Error::data(&ds.source, why))
}

/// An animated GIF of the boundary moving as training goes: `frames` of a binary linear model
/// on 2-D data (from a [`Recording`]), 640 x 480, 80 ms apart, the last one held about a second.
pub fn animate(ds: &Dataset, frames: &[AnimFrame], out: &Path) -> Result<()> {
    register_font()?;
    check_animation(out, ds, None)?;
    if frames.is_empty() {
        return Err(Error::Plot("no training steps to animate".into()));
    }
    let s = slice(ds, None)?;
    let labels = ds.require_labels()?;
    let tmp = output::temp_beside(out, ".gif")
        .map_err(|e| Error::Plot(format!("cannot create {}: {e}", out.display())))?;
    {
        let root = BitMapBackend::gif(tmp.path(), (640, 480), 80)
            .map_err(perr)?
            .into_drawing_area();
        for (n, f) in frames.iter().enumerate() {
            // The last frame (the saved model) is held about a second: the picture a viewer
            // is left with.
            let copies = if n + 1 == frames.len() { 12 } else { 1 };
            for _ in 0..copies {
                let p = FramePlot {
                    ds,
                    s: &s,
                    labels: &labels.index,
                    frame: f,
                    title: format!("{}, frame {}/{}", f.caption, n + 1, frames.len()),
                };
                p.paint(&root)?;
                root.present().map_err(perr)?;
            }
        }
    }
    tmp.persist()
        .map_err(|e| Error::Plot(format!("cannot write {}: {e}", out.display())))
}

/// One frame of an animation as a PNG or SVG picture (640 x 480): what [`animate`] draws,
/// for a slide, or to check a frame.
pub fn animation_frame(ds: &Dataset, frame: &AnimFrame, out: &Path) -> Result<()> {
    if ds.d != 2 {
        return check_animation(Path::new("x.gif"), ds, None);
    }
    let s = slice(ds, None)?;
    let labels = ds.require_labels()?;
    let p = FramePlot {
        ds,
        s: &s,
        labels: &labels.index,
        frame,
        title: frame.caption.clone(),
    };
    render(out, (640, 480), &p)
}

/// A frame: the line of its weights over the data, the rows it gets wrong circled.
struct FramePlot<'a> {
    ds: &'a Dataset,
    s: &'a Slice,
    labels: &'a [u32],
    frame: &'a AnimFrame,
    title: String,
}

impl Painter for FramePlot<'_> {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let FramePlot { ds, s, labels, .. } = *self;
        root.fill(&WHITE).map_err(perr)?;
        let mut chart = frame(
            root,
            &Frame {
                caption: Some((&self.title, 18)),
                x: (s.x_range.0, s.x_range.1, Scale::Linear),
                y: (s.y_range.0, s.y_range.1, Scale::Linear),
                x_desc: "feature 1",
                y_desc: "feature 2",
                font: 12,
                margin: 10,
                grid: false,
            },
        )?;
        let w = &self.frame.weights;
        let (a, b, c) = (
            w.first().copied().unwrap_or(0.0),
            w.get(1).copied().unwrap_or(0.0),
            w.get(2).copied().unwrap_or(0.0),
        );
        let mut key = Key::default();
        let line = (a as f64, b as f64, c as f64);
        draw_line(&mut chart, &mut key, s.x_range, s.y_range, line, None)?;
        chart
            .draw_series((0..ds.n).map(|r| {
                let (x, y) = (ds.get(r, 0), ds.get(r, 1));
                let class = labels[r] as usize;
                // The model's prediction (sgn(0) = +1) against the label.
                let wrong = (a * x + b * y + c >= 0.0) != (class == 1);
                let style = if wrong {
                    RED.stroke_width(2)
                } else {
                    colour(class).filled()
                };
                Circle::new((x as f64, y as f64), if wrong { 5 } else { 3 }, style)
            }))
            .map_err(perr)?;
        Ok(())
    }
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
            axis::padded(lo, hi, 0.05)
        };
        (
            span(pts.iter().map(|p| p.0).collect()),
            span(pts.iter().map(|p| p.1).collect()),
        )
    }
}

impl Painter for Chart {
    fn paint<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let ((x0, x1), (y0, y1)) = self.ranges();
        let scale = |log: bool| if log { Scale::Log } else { Scale::Linear };
        let mut c = frame(
            root,
            &Frame {
                caption: Some((&self.title, 18)),
                x: (x0, x1, scale(self.log_x)),
                y: (y0, y1, scale(self.log_y)),
                x_desc: &self.x_desc,
                y_desc: &self.y_desc,
                font: 13,
                margin: 12,
                grid: true,
            },
        )?;
        let mut key = Key::default();
        for (i, s) in self.series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = s.points.iter().filter_map(|&p| self.map(p)).collect();
            let col = colour(i);
            if s.dots {
                key.note_marks(&c, &pts);
                c.draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, 3, col.mix(0.6).filled())),
                )
                .map_err(perr)?
                .label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 3, col.filled()));
                key.labels.push(s.name.clone());
            } else {
                key.line(&mut c, pts, col.stroke_width(2), s.name.clone())?;
            }
        }
        key.draw(&mut c, 13)
    }
}

#[cfg(test)]
mod clip_tests {
    use super::clip_line;

    /// Distance of (x, y) from a x + b y + c = 0.
    fn off((a, b, c): (f64, f64, f64), (x, y): (f64, f64)) -> f64 {
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
        assert_eq!(clip_line((f64::NAN, 1.0, 0.0), xr, yr), None);
    }
}
