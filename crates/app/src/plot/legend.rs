//! Legends placed where they cover the fewest marks: every chart collects the pixels of what
//! it drew (points, and lines traced every few pixels), and the legend goes to the first of
//! eight places around the plotting area's edge that covers the fewest of them.

use std::ops::Range;

use plotters::element::MultiLineText;
use plotters::prelude::*;

use super::FONT;

/// Places a legend may take, in the order preferred when several cover as few marks.
fn places() -> [SeriesLabelPosition; 8] {
    [
        SeriesLabelPosition::UpperRight,
        SeriesLabelPosition::UpperLeft,
        SeriesLabelPosition::LowerRight,
        SeriesLabelPosition::LowerLeft,
        SeriesLabelPosition::MiddleRight,
        SeriesLabelPosition::MiddleLeft,
        SeriesLabelPosition::UpperMiddle,
        SeriesLabelPosition::LowerMiddle,
    ]
}

/// The legend's size in pixels for `labels` at `font` (plotters' layout: the text block, a
/// 30-pixel sample area and a 10-pixel margin all round).
pub(crate) fn size(labels: &[String], font: u32) -> (i32, i32) {
    let style: TextStyle = (FONT, font).into_font().into();
    let mut text = MultiLineText::<_, &str>::new((0, 0), &style);
    for l in labels {
        text.push_line(l.as_str());
    }
    let (w, h) = text.estimate_dimension().unwrap_or((
        labels
            .iter()
            .map(|l| super::axis::text_width(l, font) as i32)
            .max()
            .unwrap_or(0),
        labels.len() as i32 * font as i32 * 5 / 4,
    ));
    (w + 30 + 20, h + 20)
}

/// The legend's box for `place` in a plotting area of `dim` pixels (plotters' layout),
/// relative to the area's top left corner.
pub(crate) fn at(place: SeriesLabelPosition, (w, h): (i32, i32), dim: (i32, i32)) -> [i32; 4] {
    use SeriesLabelPosition::*;
    let x = match place {
        UpperLeft | MiddleLeft | LowerLeft => 5,
        UpperMiddle | MiddleMiddle | LowerMiddle => (dim.0 - w) / 2,
        UpperRight | MiddleRight | LowerRight => dim.0 - w - 5,
        Coordinate(x, _) => x,
    };
    let y = match place {
        UpperLeft | UpperMiddle | UpperRight => 5,
        MiddleLeft | MiddleMiddle | MiddleRight => (dim.1 - h) / 2,
        LowerLeft | LowerMiddle | LowerRight => dim.1 - h - 5,
        Coordinate(_, y) => y,
    };
    [x, y, x + w, y + h]
}

/// The place for a legend of `size` in the plotting area spanning `area` (absolute pixels)
/// that covers the fewest of `marks` (absolute pixels; `slack` pixels around each box
/// count, for the marks' radius): the eight places along the edge first, then any spot on
/// a grid of 8 pixels, so that a legend over data moves to a gap between curves.
pub(crate) fn place(
    area: &(Range<i32>, Range<i32>),
    size: (i32, i32),
    marks: &[(i32, i32)],
    slack: i32,
) -> SeriesLabelPosition {
    let dim = (area.0.end - area.0.start, area.1.end - area.1.start);
    // Marks counted in cells of a summed-area table (cells of 4 pixels or more, at most
    // 512 a side), so that any box's count is four lookups however many marks there are.
    let cell = ((dim.0.max(dim.1) + 511) / 512).max(4);
    let (gw, gh) = ((dim.0 / cell + 2) as usize, (dim.1 / cell + 2) as usize);
    let mut sat = vec![0u32; (gw + 1) * (gh + 1)];
    for (x, y) in marks {
        let (x, y) = (x - area.0.start, y - area.1.start);
        if x >= 0 && y >= 0 && x <= dim.0 && y <= dim.1 {
            sat[(y / cell) as usize * (gw + 1) + (x / cell) as usize] += 1;
        }
    }
    // In place: sat[r][c] becomes the sum over rows < r + 1 and columns < c + 1; then
    // shifted so that sat[r][c] is the sum over rows < r and columns < c.
    for r in 0..gh {
        let mut run = 0u32;
        for c in 0..gw {
            run += sat[r * (gw + 1) + c];
            let above = if r > 0 {
                sat[(r - 1) * (gw + 1) + c]
            } else {
                0
            };
            sat[r * (gw + 1) + c] = run + above;
        }
    }
    let sum_below = |r: i32, c: i32| -> u32 {
        // Marks in rows < r and columns < c (of cells).
        if r <= 0 || c <= 0 {
            return 0;
        }
        let (r, c) = ((r as usize).min(gh), (c as usize).min(gw));
        sat[(r - 1) * (gw + 1) + (c - 1)]
    };
    let covered = |p: SeriesLabelPosition| -> usize {
        let [x0, y0, x1, y1] = at(p, size, dim);
        let (c0, r0) = ((x0 - slack).max(0) / cell, (y0 - slack).max(0) / cell);
        let (c1, r1) = ((x1 + slack) / cell + 1, (y1 + slack) / cell + 1);
        (sum_below(r1, c1) + sum_below(r0, c0) - sum_below(r0, c1) - sum_below(r1, c0)) as usize
    };
    let mut best = (SeriesLabelPosition::UpperRight, usize::MAX);
    for p in places() {
        let c = covered(p.clone());
        if c < best.1 {
            best = (p, c);
        }
    }
    if best.1 == 0 {
        return best.0;
    }
    let (room_x, room_y) = (dim.0 - size.0 - 5, dim.1 - size.1 - 5);
    for y in (5..=room_y.max(5)).step_by(8) {
        for x in (5..=room_x.max(5)).step_by(8) {
            let c = covered(SeriesLabelPosition::Coordinate(x, y));
            if c < best.1 {
                best = (SeriesLabelPosition::Coordinate(x, y), c);
            }
        }
    }
    best.0
}

/// The pixels along a polyline, one every 3 pixels or closer, so that a legend box over any
/// part of a curve covers some of them.
pub(crate) fn trace(px: &[(i32, i32)]) -> Vec<(i32, i32)> {
    let mut out = Vec::with_capacity(px.len());
    if let Some(&first) = px.first() {
        out.push(first);
    }
    for w in px.windows(2) {
        let (a, b) = (w[0], w[1]);
        let len = ((b.0 - a.0) as f64).hypot((b.1 - a.1) as f64);
        let steps = ((len / 3.0).ceil() as usize).clamp(1, 4096);
        for k in 1..=steps {
            let t = k as f64 / steps as f64;
            out.push((
                a.0 + ((b.0 - a.0) as f64 * t).round() as i32,
                a.1 + ((b.1 - a.1) as f64 * t).round() as i32,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_goes_where_no_mark_is() {
        let area = (0..400, 0..300);
        let size = (100, 60);
        // Marks fill the upper right and upper left: a lower corner is free.
        let marks: Vec<(i32, i32)> = (0..400)
            .step_by(4)
            .flat_map(|x| (0..100).step_by(4).map(move |y| (x, y)))
            .collect();
        let p = place(&area, size, &marks, 3);
        assert_eq!(p, SeriesLabelPosition::LowerRight);
        // No marks: the first preference.
        assert_eq!(place(&area, size, &[], 3), SeriesLabelPosition::UpperRight);
        // A traced line from corner to corner leaves two corners free.
        let line = trace(&[(0, 0), (400, 300)]);
        assert!(line.len() > 100);
        let p = place(&area, size, &line, 3);
        assert!(
            matches!(
                p,
                SeriesLabelPosition::UpperRight | SeriesLabelPosition::LowerLeft
            ),
            "{p:?}"
        );
    }
}
