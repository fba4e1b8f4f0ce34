//! A generated click log in the shape of Criteo's display-advertising logs, written as Vowpal
//! Wabbit text or as CSV one row at a time (memory does not grow with the rows), so anyone can
//! make a file of any size to train on.
//!
//! Each row has 13 count features `I1..I13` (namespace `n`, written as log(1 + count); each
//! missing in 10% of the rows) and 26 categorical fields `C1..C26` (namespace `c`, written as
//! `Cj=value`), whose values are drawn with skewed frequencies: field j has a vocabulary of
//! about 10^(1 + j mod 6) values and value v is drawn with probability proportional to
//! 1 / (v + 1) (Zipf), so a few values are common and most are rare. The label follows a
//! planted linear rule: every count feature and every categorical value has a hidden weight
//! (drawn from the seed), the row is a click (1) when its score is above a threshold (about a
//! quarter of the rows), and `noise` of the labels are flipped; else -1.
//!
//! As CSV ([`ClickText::Csv`]) the same rows are the columns `label,I1,...,I13,C1,...,C26`:
//! the label 1 or 0 (as Criteo's), a missing count an empty field, a categorical field its
//! value alone (hash it with the categorical columns `C1..C26`).

use std::io::Write;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Count features.
pub const NUMERIC: usize = 13;
/// Categorical fields.
pub const CATEGORICAL: usize = 26;

/// A field's vocabulary: about 10^(1 + j mod 6) values.
fn vocabulary(j: usize) -> u64 {
    10u64.pow(1 + (j % 6) as u32)
}

/// A hidden weight in [-1, 1) from the seed and a key (SplitMix64).
fn weight(seed: u64, key: u64) -> f32 {
    let mut z = seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// A Zipf-like draw in 0..m: the inverse of the density 1 / (v + 1), continuous.
fn skewed(rng: &mut ChaCha8Rng, m: u64) -> u64 {
    let u: f64 = rng.random();
    let v = ((m as f64 + 1.0).powf(u) - 1.0).floor() as u64;
    v.min(m - 1)
}

/// The text a click log is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClickText {
    /// Vowpal Wabbit lines, the counts in namespace `n` and the fields in `c`.
    Vw,
    /// CSV with a header: `label,I1..I13,C1..C26`.
    Csv,
}

/// Writes `n` rows of the click log to `out` as `text`; `noise` of the labels flipped.
pub fn write_clicks(
    n: usize,
    noise: f32,
    seed: u64,
    text: ClickText,
    out: &mut (impl Write + ?Sized),
) -> std::io::Result<()> {
    if text == ClickText::Csv {
        let mut header = String::from("label");
        for j in 1..=NUMERIC {
            header.push_str(&format!(",I{j}"));
        }
        for j in 1..=CATEGORICAL {
            header.push_str(&format!(",C{j}"));
        }
        header.push('\n');
        out.write_all(header.as_bytes())?;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let wn: Vec<f32> = (0..NUMERIC).map(|j| weight(seed, j as u64)).collect();
    let mut line = String::with_capacity(1024);
    let mut counts = [None::<f32>; NUMERIC];
    let mut cats = [0u64; CATEGORICAL];
    for _ in 0..n {
        let mut score = 0f32;
        for (j, c) in counts.iter_mut().enumerate() {
            *c = (!rng.random_bool(0.1)).then(|| {
                // Counts with a long tail: geometric-like, up to thousands.
                let v = (rng.random::<f64>().powi(3) * 1000.0).floor() as f32;
                (1.0 + v).ln()
            });
            if let Some(x) = c {
                score += wn[j] * (*x - 2.0);
            }
        }
        for (j, c) in cats.iter_mut().enumerate() {
            *c = skewed(&mut rng, vocabulary(j));
            score += 2.0 * weight(seed, ((j as u64 + 1) << 40) ^ *c);
        }
        let mut click = score > 6.0;
        if rng.random::<f32>() < noise {
            click = !click;
        }
        let token = |j: usize, c: u64| {
            (weight(seed ^ 0x5eed, ((j as u64) << 40) ^ c).to_bits() as u64)
                .wrapping_mul(2_654_435_761)
                & 0xffff_ffff
        };
        line.clear();
        match text {
            ClickText::Vw => {
                line.push_str(if click { "1 |n" } else { "-1 |n" });
                for (j, c) in counts.iter().enumerate() {
                    if let Some(x) = c {
                        line.push_str(&format!(" I{}:{x:.4}", j + 1));
                    }
                }
                line.push_str(" |c");
                for (j, &c) in cats.iter().enumerate() {
                    line.push_str(&format!(" C{}={:08x}", j + 1, token(j, c)));
                }
            }
            ClickText::Csv => {
                line.push_str(if click { "1" } else { "0" });
                for c in &counts {
                    line.push(',');
                    if let Some(x) = c {
                        line.push_str(&format!("{x:.4}"));
                    }
                }
                for (j, &c) in cats.iter().enumerate() {
                    line.push_str(&format!(",{:08x}", token(j, c)));
                }
            }
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_the_fields_a_quarter_clicks_and_skewed_values() {
        let mut buf = Vec::new();
        write_clicks(4000, 0.0, 7, ClickText::Vw, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4000);
        let clicks = lines.iter().filter(|l| l.starts_with("1 ")).count();
        assert!((600..1800).contains(&clicks), "{clicks} clicks of 4000");
        for l in &lines {
            assert_eq!(l.matches(" C").count(), CATEGORICAL, "{l}");
            assert!(l.matches(" I").count() <= NUMERIC, "{l}");
        }
        // C1 (10 values) is skewed: its commonest value is in far more than a tenth of rows.
        let mut c1 = std::collections::HashMap::new();
        for l in &lines {
            let v = l.split(" C1=").nth(1).unwrap().split(' ').next().unwrap();
            *c1.entry(v).or_insert(0usize) += 1;
        }
        let top = c1.values().max().unwrap();
        assert!(c1.len() <= 10 && *top > 4000 / 5, "{c1:?}");
        // The same seed, the same file; another seed, another.
        let mut again = Vec::new();
        write_clicks(4000, 0.0, 7, ClickText::Vw, &mut again).unwrap();
        assert_eq!(again, text.as_bytes());
        let mut other = Vec::new();
        write_clicks(10, 0.0, 8, ClickText::Vw, &mut other).unwrap();
        assert_ne!(&other[..], &text.as_bytes()[..other.len()]);
    }

    #[test]
    fn the_csv_form_has_the_same_rows() {
        let (mut vw, mut csv) = (Vec::new(), Vec::new());
        write_clicks(300, 0.1, 3, ClickText::Vw, &mut vw).unwrap();
        write_clicks(300, 0.1, 3, ClickText::Csv, &mut csv).unwrap();
        let (vw, csv) = (
            String::from_utf8(vw).unwrap(),
            String::from_utf8(csv).unwrap(),
        );
        let mut rows = csv.lines();
        let header: Vec<&str> = rows.next().unwrap().split(',').collect();
        assert_eq!(header.len(), 1 + NUMERIC + CATEGORICAL);
        assert_eq!((header[0], header[1], header[14]), ("label", "I1", "C1"));
        for (v, c) in vw.lines().zip(rows) {
            let fields: Vec<&str> = c.split(',').collect();
            assert_eq!(fields.len(), header.len(), "{c}");
            let label = if v.starts_with("1 ") { "1" } else { "0" };
            assert_eq!(fields[0], label, "{v} / {c}");
            for (j, f) in fields[1..=NUMERIC].iter().enumerate() {
                let want = v
                    .split(&format!(" I{}:", j + 1))
                    .nth(1)
                    .map(|t| t.split(' ').next().unwrap());
                assert_eq!(want.unwrap_or(""), *f, "{v} / {c}");
            }
            for (j, f) in fields[1 + NUMERIC..].iter().enumerate() {
                assert!(v.contains(&format!(" C{}={f}", j + 1)), "{v} / {c}");
            }
        }
    }
}
