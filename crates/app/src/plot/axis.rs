//! Axes: the range a chart shows, where its ticks go and how their labels read. Every chart
//! draws its ticks from here (plotters' own key points label only powers of ten on a log
//! axis, print 1.2 on an epoch axis and print f32 labels too long for their area), so that
//! labels fit their room, never touch, keep their sign and say what the value is.

/// One axis: the range shown, the ticks (in the plotted coordinate) and their labels.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    /// The plotted range (log10 of the values on a log axis).
    pub lo: f64,
    pub hi: f64,
    /// Tick positions in the plotted coordinate, ascending, all within the range.
    pub ticks: Vec<f64>,
    /// The label of each tick.
    pub labels: Vec<String>,
}

/// What an axis holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Any real values.
    Linear,
    /// Whole numbers (epochs): ticks only at integers.
    Integer,
    /// Positive values on a log10 axis (the range is given in log10).
    Log,
}

/// The width in pixels of `text` in the bundled DejaVu Sans at `size` pixels, from its
/// advance widths (an upper estimate for the characters a label holds).
pub(crate) fn text_width(text: &str, size: u32) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            '0'..='9' => 0.637,
            '-' => 0.361,
            '.' | ',' | ' ' => 0.32,
            'e' => 0.615,
            '+' => 0.838,
            'i' | 'l' | 'j' => 0.278,
            'm' | 'w' | 'M' | 'W' => 0.975,
            _ => 0.65,
        })
        .sum();
    em * size as f64
}

/// The range `(lo, hi)` of some values padded by `share` of its span on each side; a single
/// value (or none: `lo > hi`) gets room of 1 around it, or 1% of its size when that is more,
/// so that the view is never empty, and values far from 0 are not squashed into a dot.
pub(crate) fn padded(lo: f64, hi: f64, share: f64) -> (f64, f64) {
    if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) || !lo.is_finite() || !hi.is_finite() {
        return (-1.0, 1.0);
    }
    let span = hi - lo;
    if span > 0.0 {
        (lo - span * share, hi + span * share)
    } else {
        let room = (lo.abs() * 0.01).max(1.0);
        (lo - room, hi + room)
    }
}

/// A step of 1, 2 or 5 times a power of ten, at least `raw` (and at least 1 on the
/// `Integer` scale, which the exponents of a log axis are on too); with its power of ten.
fn nice_step(raw: f64, scale: Scale) -> (f64, i32) {
    let integer = scale == Scale::Integer;
    let raw = if raw.is_finite() && raw > 0.0 {
        raw
    } else {
        1.0
    };
    let mut e = raw.log10().floor() as i32;
    let mut step = f64::INFINITY;
    for m in [1.0, 2.0, 5.0, 10.0] {
        let s = m * 10f64.powi(e);
        if s >= raw * (1.0 - 1e-9) {
            step = s;
            if m == 10.0 {
                e += 1;
            }
            break;
        }
    }
    if integer && step < 1.0 {
        return (1.0, 0);
    }
    (step, e)
}

/// The multiples of `step` within `[lo, hi]`, as k * step (no running sum, so no drift).
fn multiples(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let (a, b) = ((lo / step).ceil(), (hi / step).floor());
    if a.partial_cmp(&b).is_none_or(|o| o.is_gt()) || b - a > 1000.0 {
        return Vec::new();
    }
    (0..=(b - a) as i64)
        .map(|k| {
            let v = (a + k as f64) * step;
            if v == 0.0 {
                0.0 // never -0
            } else {
                v
            }
        })
        .collect()
}

/// Labels for values that are multiples of 10^`e`: plain decimals with the digits the step
/// needs, or scientific notation where that is shorter (1e6 rather than 1000000, 2.5e-5
/// rather than 0.000025); the same form for every label of an axis.
pub(crate) fn labels(values: &[f64], e: i32) -> Vec<String> {
    let decimals = (-e).max(0) as usize;
    let plain: Vec<String> = values
        .iter()
        .map(|&v| {
            let s = format!("{v:.decimals$}");
            // A rounded zero keeps no sign.
            if s.trim_start_matches('-')
                .chars()
                .all(|c| c == '0' || c == '.')
            {
                s.trim_start_matches('-').to_string()
            } else {
                s
            }
        })
        .collect();
    let sci: Vec<String> = values.iter().map(|&v| scientific(v, e)).collect();
    let longest = |l: &[String]| l.iter().map(|s| s.len()).max().unwrap_or(0);
    if longest(&sci) < longest(&plain) && longest(&plain) > 6 {
        sci
    } else {
        plain
    }
}

/// `v` (a multiple of 10^`e`) in scientific notation with the digits down to 10^`e`:
/// 2e5, -2.5e5, 1.0000002e6.
fn scientific(v: f64, e: i32) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    let digits = (mag - e).max(0) as usize;
    let s = format!("{v:.digits$e}");
    // Trailing zeros of the mantissa say nothing.
    match s.split_once('e') {
        Some((m, x)) if m.contains('.') => {
            let m = m.trim_end_matches('0').trim_end_matches('.');
            format!("{m}e{x}")
        }
        _ => s,
    }
}

/// Which way an axis runs, so how its labels sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Along {
    /// A horizontal axis: labels side by side.
    X,
    /// A vertical axis: labels stacked.
    Y,
}

/// Ticks and labels for the range `(lo, hi)` on an axis `px` pixels long, with labels of
/// `font` pixels: as many ticks as fit with room between their labels, at most 10.
pub(crate) fn axis(lo: f64, hi: f64, scale: Scale, px: f64, font: u32, along: Along) -> Axis {
    let across = along == Along::X;
    let (lo, hi) = if lo < hi && lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        padded(lo, lo, 0.0)
    };
    let fits = |ticks: &[f64], labels: &[String]| {
        if ticks.len() < 2 {
            return true;
        }
        let gap = ticks
            .windows(2)
            .map(|w| (w[1] - w[0]) / (hi - lo) * px)
            .fold(f64::INFINITY, f64::min);
        let need = if across {
            labels
                .iter()
                .map(|l| text_width(l, font))
                .fold(0.0, f64::max)
                + 0.8 * font as f64
        } else {
            1.6 * font as f64
        };
        gap >= need
    };
    let mut best = None;
    for max_n in (2..=10).rev() {
        let (ticks, labels) = match scale {
            Scale::Log => log_ticks(lo, hi, max_n),
            _ => {
                let (step, e) = nice_step((hi - lo) / max_n as f64, scale);
                let t = multiples(lo, hi, step);
                let l = labels(&t, e);
                (t, l)
            }
        };
        if fits(&ticks, &labels) || max_n == 2 {
            best = Some((ticks, labels));
            break;
        }
    }
    let (ticks, labels) = best.unwrap_or_default();
    Axis {
        lo,
        hi,
        ticks,
        labels,
    }
}

/// Ticks of a log10 axis over `[lo, hi]` (in log10), at most about `max_n`: whole decades
/// when it spans several (every other one, or fewer, when they are too many); 1, 2 and 5 of
/// each decade when it spans one or two; and evenly spaced values when it spans less than a
/// decade, so that every log axis has labels.
fn log_ticks(lo: f64, hi: f64, max_n: usize) -> (Vec<f64>, Vec<String>) {
    let span = hi - lo;
    let label_all = |vals: &[f64]| -> Vec<String> { vals.iter().map(|&v| short(v)).collect() };
    if span >= 3.0 || (span >= 1.0 && max_n <= 3) {
        let (step, _) = nice_step(span / max_n as f64, Scale::Integer);
        let t = multiples(lo, hi, step);
        let v: Vec<f64> = t.iter().map(|e| 10f64.powf(*e)).collect();
        let l = v.iter().map(|&x| decade(x)).collect();
        return (t, l);
    }
    if span >= 1.0 {
        let mut vals = Vec::new();
        for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
            for m in [1.0, 2.0, 5.0] {
                let v = m * 10f64.powi(e);
                let p = v.log10();
                if p >= lo - 1e-12 && p <= hi + 1e-12 {
                    vals.push(v);
                }
            }
        }
        if vals.len() <= max_n {
            let l = label_all(&vals);
            return (vals.iter().map(|v| v.log10()).collect(), l);
        }
        let (step, _) = nice_step(span / max_n as f64, Scale::Integer);
        let t = multiples(lo, hi, step);
        let l = t.iter().map(|&e| decade(10f64.powf(e))).collect();
        return (t, l);
    }
    // Less than a decade: a linear step between the values at the ends.
    let (a, b) = (10f64.powf(lo), 10f64.powf(hi));
    let (step, e) = nice_step((b - a) / max_n as f64, Scale::Linear);
    let vals: Vec<f64> = multiples(a, b, step)
        .into_iter()
        .filter(|v| *v > 0.0)
        .collect();
    let l = labels(&vals, e);
    (vals.iter().map(|v| v.log10()).collect(), l)
}

/// A power of ten as a label: 0.001 to 10000 in full, else 1e5, 1e-4.
fn decade(x: f64) -> String {
    short(10f64.powi(x.log10().round() as i32))
}

/// A value with few digits (1, 2 or 5 times a power of ten) as a label: in full from 0.001
/// to 99,999, else in scientific notation (2e5, 5e-4).
fn short(x: f64) -> String {
    if (1e-3..1e5).contains(&x.abs()) {
        // To its power of ten's digit: 2 * 10^-2 prints 0.02.
        let decimals = (-(x.abs().log10().floor() as i32)).max(0) as usize;
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        scientific(x, x.abs().log10().floor() as i32 - 11)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_keep_their_sign_and_fit() {
        // Data scaled by 1e6: the labels read -2e5 and 2e5, not both "200000.0".
        let a = axis(-450_000.0, 450_000.0, Scale::Linear, 400.0, 14, Along::Y);
        assert!(a.labels.contains(&"-2e5".to_string()), "{:?}", a.labels);
        assert!(a.labels.contains(&"2e5".to_string()), "{:?}", a.labels);
        assert!(a.labels.contains(&"0".to_string()), "{:?}", a.labels);
        // Every label distinct, every tick in range.
        for a in [
            axis(1e6 - 1.2, 1e6 + 1.3, Scale::Linear, 700.0, 14, Along::X),
            axis(-3e-6, 7e-6, Scale::Linear, 700.0, 14, Along::X),
            axis(0.3, 0.9, Scale::Linear, 300.0, 14, Along::Y),
        ] {
            let mut l = a.labels.clone();
            l.dedup();
            assert_eq!(l.len(), a.labels.len(), "{a:?}");
            assert!(a.ticks.len() >= 2, "{a:?}");
            assert!(a.ticks.iter().all(|t| *t >= a.lo && *t <= a.hi), "{a:?}");
        }
        // Across an axis, labels do not touch.
        let a = axis(-3e6, 3e6, Scale::Linear, 300.0, 14, Along::X);
        for w in a.ticks.windows(2).zip(a.labels.windows(2)) {
            let gap = (w.0[1] - w.0[0]) / (a.hi - a.lo) * 300.0;
            let need = (text_width(&w.1[0], 14) + text_width(&w.1[1], 14)) / 2.0;
            assert!(gap > need, "{a:?}");
        }
    }

    #[test]
    fn epochs_get_whole_ticks_and_log_axes_always_get_labels() {
        let a = axis(1.0, 3.0, Scale::Integer, 600.0, 13, Along::X);
        assert_eq!(a.labels, ["1", "2", "3"]);
        // Within one decade (2,000 to 3,000 rows): labels between the powers of ten.
        let a = axis(
            2000f64.log10(),
            3000f64.log10(),
            Scale::Log,
            600.0,
            13,
            Along::X,
        );
        assert!(a.labels.len() >= 2, "{a:?}");
        assert!(a.labels.contains(&"2500".to_string()), "{a:?}");
        // Over one or two decades: 1, 2, 5 of each.
        let a = axis(0.0, 2.0, Scale::Log, 600.0, 13, Along::X);
        assert_eq!(a.labels, ["1", "2", "5", "10", "20", "50", "100"]);
        // Many decades: powers of ten.
        let a = axis(-3.0, 8.0, Scale::Log, 300.0, 13, Along::Y);
        assert!(a.labels.contains(&"1e6".to_string()), "{a:?}");
        assert!(a.labels.contains(&"0.01".to_string()) || a.labels.contains(&"0.001".to_string()));
    }

    #[test]
    fn padding_is_a_share_of_the_span() {
        let (a, b) = padded(1e6, 1e6 + 2.0, 0.06);
        assert!((a - (1e6 - 0.12)).abs() < 1e-6 && (b - (1e6 + 2.12)).abs() < 1e-6);
        assert_eq!(padded(5.0, 5.0, 0.06), (4.0, 6.0));
        assert_eq!(padded(f64::INFINITY, f64::NEG_INFINITY, 0.06), (-1.0, 1.0));
    }
}
