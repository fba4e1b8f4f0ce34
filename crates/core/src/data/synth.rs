//! Synthetic data with known geometry: linearly separable points from a seeded unit normal w*
//! and bias b*, features uniform in [-1, 1]^d (so R <= sqrt(d + 1) with the bias column),
//! no point closer than the requested geometric margin to the true hyperplane, and an
//! optional exact fraction of flipped labels for non-separable data.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Dataset, Labels};
use crate::error::{Error, Param, Result};

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthSpec {
    /// Number of points.
    pub n: usize,
    /// Number of features.
    pub d: usize,
    /// Geometric margin gamma in input space: every point has |w*.x + b*| >= gamma (||w*|| = 1).
    pub margin: f32,
    /// Fraction of labels flipped after generation, in [0, 0.5].
    pub noise: f32,
    /// Seed for w*, b*, the points and the noise.
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            n: 1000,
            d: 2,
            margin: 0.1,
            noise: 0.0,
            seed: 42,
        }
    }
}

/// Generated data with the separator it came from.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The points and labels (classes "-1" and "1").
    pub data: Dataset,
    /// The true unit normal.
    pub w_star: Vec<f32>,
    /// The true bias.
    pub b_star: f32,
    /// A lower bound on the margin of the true separator in the augmented space [x, 1]
    /// (before label noise): gamma / sqrt(1 + b*^2). Use it with R of the augmented data
    /// in the Novikoff bound.
    pub margin_augmented: f64,
}

/// Standard normal sample by Box-Muller.
fn normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A seeded random unit vector of `d` values (normal, normalised).
fn unit_normal(rng: &mut impl Rng, d: usize) -> Vec<f64> {
    let mut w: Vec<f64> = (0..d).map(|_| normal(rng)).collect();
    let norm = w
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    w.iter_mut().for_each(|v| *v /= norm);
    w
}

/// Flips the labels of a random `noise` fraction of the rows (rounded).
fn flip(rng: &mut impl Rng, y: &mut [bool], noise: f32) {
    let flips = (noise as f64 * y.len() as f64).round() as usize;
    if flips > 0 {
        let mut order: Vec<usize> = (0..y.len()).collect();
        order.shuffle(rng);
        for &i in &order[..flips] {
            y[i] = !y[i];
        }
    }
}

/// `k` distinct random columns of `d` in `cols`, ascending (Floyd's sampling; `picked` is
/// scratch).
fn columns(
    rng: &mut impl Rng,
    d: usize,
    k: usize,
    cols: &mut Vec<u32>,
    picked: &mut std::collections::HashSet<u32>,
) {
    cols.clear();
    picked.clear();
    for j in (d - k)..d {
        let t = rng.random_range(0..=j) as u32;
        let pick = if picked.contains(&t) { j as u32 } else { t };
        picked.insert(pick);
        cols.push(pick);
    }
    cols.sort_unstable();
}

/// Checks the sizes, margin and noise of `spec` (every generator's).
fn check(spec: &SynthSpec) -> Result<()> {
    if spec.n == 0 {
        return Err(Error::InvalidParam {
            name: Param::Rows,
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    if spec.d == 0 {
        return Err(Error::InvalidParam {
            name: Param::Features,
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    if !(spec.margin.is_finite() && spec.margin >= 0.0 && spec.margin < 1.0) {
        return Err(Error::InvalidParam {
            name: Param::Margin,
            value: spec.margin.to_string(),
            reason: "must be in [0, 1) (features lie in [-1, 1])".into(),
        });
    }
    if !(spec.noise.is_finite() && (0.0..=0.5).contains(&spec.noise)) {
        return Err(Error::InvalidParam {
            name: Param::Noise,
            value: spec.noise.to_string(),
            reason: "must be in [0, 0.5]".into(),
        });
    }
    Ok(())
}

/// Generates a dataset as described by `spec`.
pub fn generate(spec: &SynthSpec) -> Result<Synthetic> {
    check(spec)?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let d = spec.d;
    let w = unit_normal(&mut rng, d);
    let b: f64 = rng.random_range(-0.25..=0.25);
    let gamma = spec.margin as f64;

    let mut x = super::dense_zeros(Path::new("<generated>"), spec.n, d)?;
    x.clear();
    let mut y = Vec::with_capacity(spec.n);
    let mut row = vec![0f32; d];
    let max_tries = 1000 * spec.n as u64 + 100_000;
    let mut tries = 0u64;
    while y.len() < spec.n {
        tries += 1;
        if tries > max_tries {
            return Err(Error::InvalidParam {
                name: Param::Margin,
                value: spec.margin.to_string(),
                reason:
                    "is too large: almost no point of [-1, 1]^d is that far from the hyperplane"
                        .into(),
            });
        }
        let mut s = b;
        for (r, wj) in row.iter_mut().zip(&w) {
            *r = rng.random_range(-1.0f32..=1.0);
            s += *r as f64 * wj;
        }
        if s.abs() < gamma || s == 0.0 {
            continue;
        }
        x.extend_from_slice(&row);
        y.push(s > 0.0);
    }
    flip(&mut rng, &mut y, spec.noise);
    let names: Vec<&str> = y.iter().map(|&p| if p { "1" } else { "-1" }).collect();
    Ok(Synthetic {
        data: Dataset::new(
            x,
            spec.n,
            d,
            Some(Labels::from_names(&names)),
            PathBuf::from("<generated>"),
        ),
        w_star: w.iter().map(|&v| v as f32).collect(),
        b_star: b as f32,
        margin_augmented: gamma / (1.0 + b * b).sqrt(),
    })
}

/// A value uniform in [-1, 1], drawn again until it is not 0 (a stored non-zero of a sparse row).
fn nonzero_uniform(rng: &mut impl Rng) -> f32 {
    loop {
        let v = rng.random_range(-1.0f32..=1.0);
        if v != 0.0 {
            return v;
        }
    }
}

/// Sparse separable data: each of `spec.n` rows has `round(density * d)` (at least 1)
/// non-zero features in seeded random columns, each uniform in [-1, 1]; the labels are the
/// side of a seeded unit normal w* through the origin (b* = 0: with few non-zeros per row a
/// bias would label nearly every row alike), no row closer than `spec.margin` to it, then a
/// fraction `spec.noise` flipped. Held as CSR: memory grows with the non-zeros, never with
/// n * d. The typical |w*.x| is sqrt(density / 3), so the margin must be well below that.
pub fn generate_sparse(spec: &SynthSpec, density: f64) -> Result<Synthetic> {
    if !(density.is_finite() && density > 0.0 && density <= 1.0) {
        return Err(Error::InvalidParam {
            name: Param::Density,
            value: density.to_string(),
            reason: "must be in (0, 1]".into(),
        });
    }
    if spec.d > u32::MAX as usize {
        return Err(Error::param(
            Param::Features,
            spec.d,
            "must be at most 2^32 - 1",
        ));
    }
    check(spec)?;
    let (n, d) = (spec.n, spec.d);
    let k = ((density * d as f64).round() as usize).clamp(1, d);
    crate::limits::check(
        || format!("{n} generated rows with {k} non-zeros each"),
        n as u128 * k as u128 + d as u128,
        8,
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let w = unit_normal(&mut rng, d);
    let gamma = spec.margin as f64;
    let mut c = crate::matrix::CsrBuf::new();
    c.indices.reserve(n * k);
    c.values.reserve(n * k);
    let mut y = Vec::with_capacity(n);
    let mut cols: Vec<u32> = Vec::with_capacity(k);
    let mut picked = std::collections::HashSet::with_capacity(k);
    let max_tries = 1000 * n as u64 + 100_000;
    let mut tries = 0u64;
    while y.len() < n {
        tries += 1;
        if tries > max_tries {
            return Err(Error::InvalidParam {
                name: Param::Margin,
                value: spec.margin.to_string(),
                reason: format!(
                    "is too large for rows with {k} non-zeros of {d}: almost no row is that far \
                     from the hyperplane (typical |w*.x| is {:.2e})",
                    (k as f64 / d as f64 / 3.0).sqrt()
                ),
            });
        }
        columns(&mut rng, d, k, &mut cols, &mut picked);
        let start = c.values.len();
        let mut s = 0f64;
        for &j in &cols {
            let v = nonzero_uniform(&mut rng);
            s += v as f64 * w[j as usize];
            c.indices.push(j);
            c.values.push(v);
        }
        if s.abs() < gamma || s == 0.0 {
            c.indices.truncate(start);
            c.values.truncate(start);
            continue;
        }
        c.indptr.push(c.values.len());
        y.push(s > 0.0);
    }
    flip(&mut rng, &mut y, spec.noise);
    let names: Vec<&str> = y.iter().map(|&p| if p { "1" } else { "-1" }).collect();
    Ok(Synthetic {
        data: Dataset::from_matrix(
            c.into(),
            n,
            d,
            Some(Labels::from_names(&names)),
            PathBuf::from("<generated>"),
        ),
        w_star: w.iter().map(|&v| v as f32).collect(),
        b_star: 0.0,
        margin_augmented: gamma,
    })
}

/// Sparse rows in `k` classes: each of `n` rows has `round(density * d)` (at least 1) non-zero
/// features in seeded random columns, each uniform in [-1, 1] (as [`generate_sparse`]); the
/// class is the highest of `k` seeded normal linear scores w*_c.x (the first on ties), then
/// a fraction `noise` of the labels is replaced by a random class. Class names are 0..k-1.
/// Held as CSR: memory grows with the non-zeros and k d, never with n d.
pub fn generate_sparse_classes(
    n: usize,
    d: usize,
    k: usize,
    density: f64,
    noise: f32,
    seed: u64,
) -> Result<Dataset> {
    if !(density.is_finite() && density > 0.0 && density <= 1.0) {
        return Err(Error::param(Param::Density, density, "must be in (0, 1]"));
    }
    if n == 0 || d == 0 || k < 2 || d > u32::MAX as usize {
        return Err(Error::data(
            "<generated>",
            format!(
                "{n} rows of {d} features in {k} classes: need rows, at most 2^32 - 1 \
                 features and 2 classes"
            ),
        ));
    }
    let per_row = ((density * d as f64).round() as usize).clamp(1, d);
    crate::limits::check(
        || format!("{n} generated rows with {per_row} non-zeros each in {k} classes"),
        n as u128 * per_row as u128 + k as u128 * d as u128,
        8,
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let w: Vec<f32> = (0..k * d).map(|_| normal(&mut rng) as f32).collect();
    let mut c = crate::matrix::CsrBuf::new();
    c.indices.reserve(n * per_row);
    c.values.reserve(n * per_row);
    let mut names = Vec::with_capacity(n);
    let mut cols: Vec<u32> = Vec::with_capacity(per_row);
    let mut picked = std::collections::HashSet::with_capacity(per_row);
    let mut scores = vec![0f32; k];
    for _ in 0..n {
        columns(&mut rng, d, per_row, &mut cols, &mut picked);
        scores.iter_mut().for_each(|s| *s = 0.0);
        for &j in &cols {
            let v = nonzero_uniform(&mut rng);
            for (h, s) in scores.iter_mut().enumerate() {
                *s += v * w[h * d + j as usize];
            }
            c.indices.push(j);
            c.values.push(v);
        }
        c.indptr.push(c.values.len());
        let class = if rng.random_bool(noise as f64) {
            rng.random_range(0..k)
        } else {
            let mut best = 0;
            for h in 1..k {
                if scores[h] > scores[best] {
                    best = h;
                }
            }
            best
        };
        names.push(class.to_string());
    }
    Ok(Dataset::from_matrix(
        c.into(),
        n,
        d,
        Some(Labels::from_names(&names)),
        PathBuf::from("<generated>"),
    ))
}

/// `n` points uniform in [-1, 1]^d in `k` classes: the class of a point is the highest of k
/// seeded random linear scores w*_c.x (so a multiclass perceptron can learn it), then a
/// fraction `noise` of the labels is replaced by a random class. Class names are 0..k-1.
pub fn generate_classes(n: usize, d: usize, k: usize, noise: f32, seed: u64) -> Result<Dataset> {
    if n == 0 || d == 0 || k < 2 {
        return Err(Error::data(
            "<generated>",
            format!("{n} rows of {d} features in {k} classes: need rows, features and 2 classes"),
        ));
    }
    use rayon::prelude::*;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let w: Vec<f32> = (0..k * d).map(|_| normal(&mut rng) as f32).collect();
    let mut x = super::dense_zeros(Path::new("<generated>"), n, d)?;
    // The random draws in their order (a row's values, then whether it is noise and its
    // class if so), then the classes of the other rows on all cores: no draw depends on a
    // class, so the data are those of drawing row after row.
    let mut noisy: Vec<Option<usize>> = Vec::with_capacity(n);
    for row in x.chunks_exact_mut(d) {
        for v in row.iter_mut() {
            *v = rng.random_range(-1.0f32..=1.0);
        }
        noisy.push(match rng.random_bool(noise as f64) {
            true => Some(rng.random_range(0..k)),
            false => None,
        });
    }
    let names: Vec<String> = x
        .par_chunks_exact(d)
        .zip(noisy)
        .map(|(row, noisy)| {
            let best = noisy.unwrap_or_else(|| {
                let score = |c: usize| -> f32 {
                    w[c * d..(c + 1) * d]
                        .iter()
                        .zip(row)
                        .map(|(a, b)| a * b)
                        .sum()
                };
                // The first class of the highest score (each score computed once).
                let (mut best, mut top) = (0, score(0));
                for c in 1..k {
                    let s = score(c);
                    if s > top {
                        (best, top) = (c, s);
                    }
                }
                best
            });
            best.to_string()
        })
        .collect();
    Ok(Dataset::new(
        x,
        n,
        d,
        Some(Labels::from_names(&names)),
        "<generated>",
    ))
}

/// Writes a dataset as CSV with a header `f1,...,fd,label` (no label column when unlabelled).
pub fn write_csv(ds: &Dataset, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
    let mut header: Vec<String> = (1..=ds.d).map(|j| format!("f{j}")).collect();
    if ds.labels.is_some() {
        header.push("label".into());
    }
    writeln!(out, "{}", header.join(","))?;
    for i in 0..ds.n {
        for (j, v) in ds.row(i).iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{v}")?;
        }
        if let Some(l) = &ds.labels {
            write!(out, ",{}", l.classes[l.index[i] as usize])?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes a labelled dataset in LIBSVM format (zeros omitted).
pub fn write_libsvm(ds: &Dataset, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
    for i in 0..ds.n {
        match &ds.labels {
            Some(l) => write!(out, "{}", l.classes[l.index[i] as usize])?,
            None => write!(out, "0")?,
        }
        match ds.x.csr() {
            Some(c) => {
                for p in c.indptr[i]..c.indptr[i + 1] {
                    if c.values[p] != 0.0 {
                        write!(out, " {}:{}", c.indices[p] + 1, c.values[p])?;
                    }
                }
            }
            None => {
                for (j, v) in ds.row(i).iter().enumerate() {
                    if *v != 0.0 {
                        write!(out, " {}:{v}", j + 1)?;
                    }
                }
            }
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes `ds` as Vowpal Wabbit text: `label | j:v ...` with each non-zero feature named by
/// its 0-based column `j` in the default namespace. Vowpal Wabbit indexes such a numbered
/// feature by its number, and so does `train` (unsigned hashing, 2^b >= d: column j again).
pub fn write_vw(ds: &Dataset, out: &mut (impl Write + ?Sized)) -> std::io::Result<()> {
    for i in 0..ds.n {
        if let Some(l) = &ds.labels {
            write!(out, "{} ", l.classes[l.index[i] as usize])?;
        }
        out.write_all(b"|")?;
        match ds.x.csr() {
            Some(c) => {
                for p in c.indptr[i]..c.indptr[i + 1] {
                    if c.values[p] != 0.0 {
                        write!(out, " {}:{}", c.indices[p], c.values[p])?;
                    }
                }
            }
            None => {
                for (j, v) in ds.row(i).iter().enumerate() {
                    if *v != 0.0 {
                        write!(out, " {j}:{v}")?;
                    }
                }
            }
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The committee problem: `p` experts vote ±1 at random on each example, and the label is
/// the majority vote of a hidden panel of `k` of them (k odd, so there is no tie). The best
/// separator puts weight 1/sqrt(k) on the panel, so R^2 = p (+1 with a bias) and the margin
/// is 1/sqrt(k): the perceptron's mistake bound is about p * k.
pub fn committee(n: usize, p: usize, k: usize, seed: u64) -> Result<(Dataset, Vec<usize>)> {
    if p == 0 || n == 0 {
        return Err(Error::InvalidParam {
            name: Param::Experts,
            value: p.to_string(),
            reason: "and the number of rows must be at least 1".into(),
        });
    }
    if k == 0 || k.is_multiple_of(2) || k > p {
        return Err(Error::InvalidParam {
            name: Param::Panel,
            value: k.to_string(),
            reason: "must be odd and between 1 and the number of experts".into(),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut experts: Vec<usize> = (0..p).collect();
    experts.shuffle(&mut rng);
    let mut panel = experts[..k].to_vec();
    panel.sort_unstable();
    crate::limits::check(
        || format!("<committee>: {n} examples x {p} experts"),
        n as u128 * p as u128,
        4,
    )?;
    let mut x = Vec::with_capacity(n * p);
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        let start = x.len();
        x.extend((0..p).map(|_| if rng.random::<bool>() { 1.0f32 } else { -1.0 }));
        let vote: f32 = panel.iter().map(|&j| x[start + j]).sum();
        names.push(if vote > 0.0 { "1" } else { "-1" });
    }
    Ok((
        Dataset::new(
            x,
            n,
            p,
            Some(Labels::from_names(&names)),
            PathBuf::from("<committee>"),
        ),
        panel,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The K-class generator gives the data of its first, sequential form (a row's draws,
    /// then its class from every score recomputed per comparison), row for row.
    #[test]
    fn classes_are_those_of_the_sequential_draws() {
        let (n, d, k, noise, seed) = (300, 7, 5, 0.2, 11);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let w: Vec<f32> = (0..k * d).map(|_| normal(&mut rng) as f32).collect();
        let mut x = vec![0f32; n * d];
        let mut names = Vec::new();
        for row in x.chunks_exact_mut(d) {
            for v in row.iter_mut() {
                *v = rng.random_range(-1.0f32..=1.0);
            }
            let score = |c: usize| -> f32 {
                w[c * d..(c + 1) * d]
                    .iter()
                    .zip(&*row)
                    .map(|(a, b)| a * b)
                    .sum()
            };
            let mut best = 0;
            for c in 1..k {
                if score(c) > score(best) {
                    best = c;
                }
            }
            if rng.random_bool(noise as f64) {
                best = rng.random_range(0..k);
            }
            names.push(best.to_string());
        }
        let got = generate_classes(n, d, k, noise, seed).unwrap();
        let want = Dataset::new(x, n, d, Some(Labels::from_names(&names)), "<generated>");
        assert_eq!(got, want);
        let classes = got.labels.as_ref().unwrap().classes.len();
        assert_eq!(classes, k, "every class drawn");
    }

    #[test]
    fn respects_margin_noise_and_seed() {
        let spec = SynthSpec {
            n: 500,
            d: 5,
            margin: 0.2,
            noise: 0.0,
            seed: 7,
        };
        let s = generate(&spec).unwrap();
        let y = s.data.binary_signs().unwrap();
        for (i, yi) in y.iter().enumerate() {
            let f: f64 = s
                .data
                .row(i)
                .iter()
                .zip(&s.w_star)
                .map(|(a, b)| (*a * *b) as f64)
                .sum::<f64>()
                + s.b_star as f64;
            assert!(*yi as f64 * f >= 0.2 - 1e-5, "row {i} margin {f}");
            assert!(s.data.row(i).iter().all(|v| v.abs() <= 1.0));
        }
        assert_eq!(generate(&spec).unwrap().data, s.data);
        let noisy = generate(&SynthSpec { noise: 0.1, ..spec }).unwrap();
        let flipped = noisy
            .data
            .binary_signs()
            .unwrap()
            .iter()
            .zip(&y)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(flipped, 50);
    }
}
