//! Feature scaling fitted on training data and kept in the model: x' = (x - offset) * factor
//! per feature, in f32. Statistics are computed in f64. A constant feature (zero spread), or
//! one whose spread is too small for its inverse to be an f32, keeps factor 1, so scaling
//! never divides by zero (scikit-learn's scalers do the same).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::matrix::{MatrixBuf, Row};
use crate::params::Scale;

/// A fitted scaling: `offset` and `factor`, one of each per feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scaler {
    /// Which scaling.
    pub kind: Scale,
    /// Subtracted from each feature.
    pub offset: Vec<f32>,
    /// Then multiplied in.
    pub factor: Vec<f32>,
}

/// One value scaled: every path that scales (a copy, a row as it is read, scoring) uses this
/// arithmetic, so they give the same bits. (v - 0) * f is v * f exactly, for sparse values.
#[inline]
fn scaled(v: f32, offset: f32, factor: f32) -> f32 {
    (v - offset) * factor
}

/// What scaling does with a value past the f32 range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// An error naming the source (training: the data are not what the scaling expects).
    Error,
    /// Saturates at the largest finite value of its sign (scoring).
    Saturate,
}

impl Scaler {
    /// Fits `kind` on the `n` rows of `d` features in `x` (row-major). `None` for
    /// [`Scale::None`].
    pub fn fit(kind: Scale, x: &[f32], n: usize, d: usize) -> Option<Scaler> {
        if kind == Scale::None {
            return None;
        }
        let rows = || x.chunks_exact(d.max(1)).take(n);
        let (mut offset, mut spread) = (vec![0f64; d], vec![0f64; d]);
        match kind {
            Scale::Standard => {
                let mut sum = vec![0f64; d];
                for r in rows() {
                    for (s, &v) in sum.iter_mut().zip(r) {
                        *s += v as f64;
                    }
                }
                let nf = n.max(1) as f64;
                for (o, s) in offset.iter_mut().zip(&sum) {
                    *o = s / nf;
                }
                let mut ss = vec![0f64; d];
                for r in rows() {
                    for ((q, &v), &m) in ss.iter_mut().zip(r).zip(&offset) {
                        *q += (v as f64 - m).powi(2);
                    }
                }
                for (sp, q) in spread.iter_mut().zip(&ss) {
                    *sp = (q / nf).sqrt();
                }
            }
            Scale::Minmax | Scale::Maxabs => {
                let (mut lo, mut hi) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
                for r in rows() {
                    for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(r) {
                        *l = l.min(v as f64);
                        *h = h.max(v as f64);
                    }
                }
                for j in 0..d {
                    if n == 0 {
                        continue;
                    }
                    if kind == Scale::Minmax {
                        offset[j] = lo[j];
                        spread[j] = hi[j] - lo[j];
                    } else {
                        spread[j] = lo[j].abs().max(hi[j].abs());
                    }
                }
            }
            Scale::None => unreachable!("handled above"),
        }
        let factor = spread.iter().map(|&s| factor_of(s)).collect();
        Some(Scaler {
            kind,
            offset: offset.iter().map(|&o| o as f32).collect(),
            factor,
        })
    }

    /// Rows `0..n` of `x` (`d` features) scaled a block of at most 16 MiB at a time, never all
    /// at once: `f` gets each block's row count and its scaled rows (one empty block when
    /// `n` is 0). Rows scale independently, so the blocks hold the bits of one scaled copy.
    /// `overflow` as in [`Scaler::apply_matrix`].
    pub fn for_scaled_blocks(
        &self,
        x: &MatrixBuf,
        n: usize,
        d: usize,
        source: &std::path::Path,
        overflow: Overflow,
        mut f: impl FnMut(usize, MatrixBuf) -> Result<()>,
    ) -> Result<()> {
        let block = ((16usize << 20) / (4 * d.max(1))).clamp(1, n.max(1));
        for r0 in (0..n.max(1)).step_by(block) {
            let rows: Vec<usize> = (r0..(r0 + block).min(n)).collect();
            let mut part = x.select(&rows, d);
            self.apply_matrix(&mut part, rows.len(), d, source, overflow)?;
            f(rows.len(), part)?;
        }
        Ok(())
    }

    /// Scales the rows of `x` (row-major, `self.offset.len()` features) in place; `source`
    /// names the data in the error when a scaled value leaves the f32 range.
    pub fn apply(&self, x: &mut [f32], source: &std::path::Path) -> Result<()> {
        let d = self.offset.len().max(1);
        for r in x.chunks_exact_mut(d) {
            for ((v, &o), &f) in r.iter_mut().zip(&self.offset).zip(&self.factor) {
                *v = scaled(*v, o, f);
            }
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(Error::data(
                source,
                format!(
                    "{} scaling overflowed at row {}, feature {} (the values span more than f32 holds)",
                    self.kind.name(),
                    i / d + 1,
                    i % d + 1
                ),
            ));
        }
        Ok(())
    }

    /// Row `i` of the training data, scaled into `buf` with the arithmetic of
    /// [`Scaler::apply_matrix`] (so the same bits as a scaled copy): the online rules read X
    /// as given and scale each row they visit, so training never holds a scaled copy of X.
    /// A sparse row scales its stored values (only for scalings that keep zeros).
    pub fn scale_row<'r>(
        &self,
        row: Row<'r>,
        buf: &'r mut Vec<f32>,
        i: usize,
        source: &std::path::Path,
    ) -> Result<Row<'r>> {
        buf.clear();
        let out = match row {
            Row::Dense(x) => {
                buf.extend(
                    x.iter()
                        .zip(&self.offset)
                        .zip(&self.factor)
                        .map(|((&v, &o), &f)| scaled(v, o, f)),
                );
                Row::Dense(buf.as_slice())
            }
            Row::Sparse { idx, val } => {
                buf.extend(
                    idx.iter()
                        .zip(val)
                        .map(|(&j, &v)| scaled(v, 0.0, self.factor[j as usize])),
                );
                Row::Sparse {
                    idx,
                    val: buf.as_slice(),
                }
            }
        };
        let vals = match &out {
            Row::Dense(v) => *v,
            Row::Sparse { val, .. } => *val,
        };
        if let Some(k) = vals.iter().position(|v| !v.is_finite()) {
            let feature = match &out {
                Row::Dense(_) => k as u32,
                Row::Sparse { idx, .. } => idx[k],
            };
            return Err(Error::data(
                source,
                format!(
                    "{} scaling overflowed at row {}, feature {} (the values span more than f32 holds)",
                    self.kind.name(),
                    i + 1,
                    feature + 1
                ),
            ));
        }
        Ok(out)
    }

    /// Scales the rows of `x` in place for scoring: a value past the f32 range saturates at
    /// +-f32::MAX (as an input value could be that large), so a model that loads always
    /// scores.
    pub fn apply_saturating(&self, x: &mut [f32]) {
        let d = self.offset.len().max(1);
        for r in x.chunks_exact_mut(d) {
            for ((v, &o), &f) in r.iter_mut().zip(&self.offset).zip(&self.factor) {
                *v = scaled(*v, o, f).clamp(-f32::MAX, f32::MAX);
            }
        }
    }

    /// Fits `kind` on `n` rows of `d` features, dense or sparse. Sparse data keeps its zeros:
    /// maxabs as for dense rows; standard scaling divides by the standard deviation (the
    /// implicit zeros counted) without centering (offset 0), as scikit-learn's
    /// `StandardScaler(with_mean=False)`; minmax is refused (its offset would turn every zero
    /// into a non-zero value), as scikit-learn's `MinMaxScaler` refuses sparse input.
    pub fn fit_matrix(
        kind: Scale,
        x: &MatrixBuf,
        n: usize,
        d: usize,
    ) -> std::result::Result<Option<Scaler>, String> {
        let c = match x {
            MatrixBuf::Csr(c) => c,
            _ if kind == Scale::None => return Ok(None),
            _ => {
                // A compact memory map is widened for the fit (scaling copies X anyway): within
                // the memory budget.
                let wide = (x.len() as u128) * 4;
                if x.stored_values().storage() != crate::matrix::Storage::F32
                    && wide > crate::limits::budget() as u128
                {
                    return Err(format!(
                        "needs X widened to f32 ({wide} bytes), more than the memory budget ({} \
                         bytes); train without scaling, or scale the file beforehand",
                        crate::limits::budget()
                    ));
                }
                return Ok(Scaler::fit(kind, &x.values(), n, d));
            }
        };
        let (mut offset, mut spread) = (vec![0f64; d], vec![0f64; d]);
        match kind {
            Scale::None => return Ok(None),
            Scale::Minmax => {
                return Err(
                    "minmax scaling would turn the zeros of sparse data into non-zero \
                            values (its offset shifts them); use maxabs, or standard (which \
                            sparse data gets without centering)"
                        .into(),
                )
            }
            Scale::Maxabs => {
                for (&j, &v) in c.indices.iter().zip(&c.values) {
                    let s = &mut spread[j as usize];
                    *s = s.max((v as f64).abs());
                }
            }
            Scale::Standard => {
                let mut sum = vec![0f64; d];
                for (&j, &v) in c.indices.iter().zip(&c.values) {
                    sum[j as usize] += v as f64;
                }
                let nf = n.max(1) as f64;
                let mean: Vec<f64> = sum.iter().map(|s| s / nf).collect();
                let (mut ss, mut count) = (vec![0f64; d], vec![0usize; d]);
                for (&j, &v) in c.indices.iter().zip(&c.values) {
                    let j = j as usize;
                    ss[j] += (v as f64 - mean[j]).powi(2);
                    count[j] += 1;
                }
                for j in 0..d {
                    // The implicit zeros: each is mean[j] away from the mean.
                    let q = ss[j] + (n - count[j].min(n)) as f64 * mean[j] * mean[j];
                    spread[j] = (q / nf).sqrt();
                }
                offset.fill(0.0);
            }
        }
        Ok(Some(Scaler {
            kind,
            offset: offset.iter().map(|&o| o as f32).collect(),
            factor: spread.iter().map(|&s| factor_of(s)).collect(),
        }))
    }

    /// True when the scaling maps 0 to 0 (every offset 0), so sparse data stays sparse.
    pub fn keeps_zeros(&self) -> bool {
        self.offset.iter().all(|&o| o == 0.0)
    }

    /// Scales `n` rows of `d` features in place, dense or sparse (sparse rows scale their
    /// stored values; a scaling with offsets makes them dense first, within the memory
    /// budget). `overflow`: what a value past the f32 range does (saturates when scoring, is
    /// an error naming `source` when training).
    pub fn apply_matrix(
        &self,
        x: &mut MatrixBuf,
        n: usize,
        d: usize,
        source: &std::path::Path,
        overflow: Overflow,
    ) -> Result<()> {
        let saturate = overflow == Overflow::Saturate;
        if let MatrixBuf::Mapped(m) = x {
            // A read-only map: the scaled rows are a copy, in memory.
            crate::limits::check(
                || {
                    format!(
                        "{}: a scaled copy of {n} rows x {d} features",
                        source.display()
                    )
                },
                m.len() as u128,
                4,
            )?;
            *x = MatrixBuf::Dense(m.values().into_owned());
        }
        if let MatrixBuf::Csr(c) = x {
            if !self.keeps_zeros() {
                let what = || {
                    format!(
                        "{}: {n} rows x {d} features made dense by the model's {} scaling (its \
                         offsets move the zeros)",
                        source.display(),
                        self.kind.name()
                    )
                };
                let mut dense: Vec<f32> = crate::limits::zeros(what, n.saturating_mul(d))?;
                for i in 0..n {
                    for p in c.indptr[i]..c.indptr[i + 1] {
                        dense[i * d + c.indices[p] as usize] = c.values[p];
                    }
                }
                *x = MatrixBuf::Dense(dense);
            }
        }
        match x {
            MatrixBuf::Dense(x) if saturate => {
                self.apply_saturating(x);
                Ok(())
            }
            MatrixBuf::Dense(x) => self.apply(x, source),
            MatrixBuf::Mapped(_) => Ok(()),
            MatrixBuf::Csr(c) => {
                for (&j, v) in c.indices.iter().zip(c.values.iter_mut()) {
                    *v = scaled(*v, 0.0, self.factor[j as usize]);
                    if saturate {
                        *v = v.clamp(-f32::MAX, f32::MAX);
                    }
                }
                if let Some(k) = c.values.iter().position(|v| !v.is_finite()) {
                    let row = c.indptr.partition_point(|&p| p <= k);
                    return Err(Error::data(
                        source,
                        format!(
                            "{} scaling overflowed at row {row}, feature {} (the values span \
                             more than f32 holds)",
                            self.kind.name(),
                            c.indices[k] + 1
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    /// Checks a scaler read from a file for `d` features: the message says what is wrong.
    pub fn check(&self, d: usize) -> std::result::Result<(), String> {
        if self.kind == Scale::None {
            return Err("scaling kind \"none\" is written as no \"scaling\" field".into());
        }
        if self.offset.len() != d || self.factor.len() != d {
            return Err(format!(
                "scaling has {} offsets and {} factors for {d} features",
                self.offset.len(),
                self.factor.len()
            ));
        }
        if self.offset.iter().any(|v| !v.is_finite()) {
            return Err("a scaling offset is not a finite number".into());
        }
        if self.factor.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err("a scaling factor is not a positive finite number".into());
        }
        if self.kind == Scale::Maxabs && self.offset.iter().any(|&o| o != 0.0) {
            return Err("maxabs scaling has a non-zero offset".into());
        }
        Ok(())
    }
}

/// 1 / spread in f32, or 1 where the spread is 0 or its inverse is no positive finite f32.
fn factor_of(s: f64) -> f32 {
    let f = (1.0 / s) as f32;
    if s > 0.0 && f.is_finite() && f > 0.0 {
        f
    } else {
        1.0
    }
}

/// The spread of the features' ranges: (ratio of the widest range to the narrowest non-zero
/// one, the widest feature, the narrowest feature), 0-based, over `n` rows of `d`. `None` when
/// fewer than two features vary.
pub fn range_spread(x: &MatrixBuf, n: usize, d: usize) -> Option<(f64, usize, usize)> {
    if d < 2 || n == 0 {
        return None;
    }
    let (mut lo, mut hi) = (vec![f32::INFINITY; d], vec![f32::NEG_INFINITY; d]);
    let mut count = vec![0usize; d];
    x.for_each_value(d, |j, v| {
        lo[j] = lo[j].min(v);
        hi[j] = hi[j].max(v);
        count[j] += 1;
    });
    // Sparse rows: a column with fewer stored values than rows also holds 0.
    for j in 0..d {
        if count[j] < n {
            lo[j] = lo[j].min(0.0);
            hi[j] = hi[j].max(0.0);
        }
    }
    let ranges: Vec<(usize, f64)> = (0..d)
        .map(|j| (j, hi[j] as f64 - lo[j] as f64))
        .filter(|&(_, r)| r > 0.0)
        .collect();
    let wide = ranges.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let narrow = ranges.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    (wide.0 != narrow.0).then(|| (wide.1 / narrow.1, wide.0, narrow.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scaling_by_hand_with_a_constant_column() {
        // Two features: (1, 5), (3, 5), (-2, 5); the second is constant.
        let x = [1.0, 5.0, 3.0, 5.0, -2.0, 5.0];
        let s = Scaler::fit(Scale::Standard, &x, 3, 2).unwrap();
        let mean = 2.0 / 3.0;
        let sd = (((1.0f64 - mean).powi(2) + (3.0f64 - mean).powi(2) + (-2.0f64 - mean).powi(2))
            / 3.0)
            .sqrt();
        assert_eq!(s.offset, vec![mean as f32, 5.0]);
        assert_eq!(s.factor, vec![(1.0 / sd) as f32, 1.0]);
        let m = Scaler::fit(Scale::Minmax, &x, 3, 2).unwrap();
        assert_eq!(
            (m.offset.clone(), m.factor.clone()),
            (vec![-2.0, 5.0], vec![0.2, 1.0])
        );
        let mut y = x;
        m.apply(&mut y, std::path::Path::new("t")).unwrap();
        assert_eq!(y, [0.6, 0.0, 1.0, 0.0, 0.0, 0.0]);
        let a = Scaler::fit(Scale::Maxabs, &x, 3, 2).unwrap();
        assert_eq!(
            (a.offset.clone(), a.factor.clone()),
            (vec![0.0, 0.0], vec![1.0 / 3.0, 0.2])
        );
        assert!(Scaler::fit(Scale::None, &x, 3, 2).is_none());
        assert!(a.check(2).is_ok() && a.check(3).is_err());
    }

    #[test]
    fn spread_names_the_widest_and_narrowest_features() {
        let x = [0.0, 0.05, 7.0, 4000.0, 0.1, 7.0];
        let (r, wide, narrow) = range_spread(&x.to_vec().into(), 2, 3).unwrap();
        assert_eq!((wide, narrow), (0, 1));
        assert!((r - 4000.0 / 0.05).abs() / r < 1e-6, "{r}");
        assert!(range_spread(&vec![1.0, 2.0].into(), 1, 2).is_none());
        // The same rows sparse: the same answer.
        let c = MatrixBuf::Csr(crate::matrix::CsrBuf::from_dense(&x, 3));
        assert_eq!(range_spread(&c, 2, 3).map(|t| (t.1, t.2)), Some((0, 1)));
    }

    #[test]
    fn sparse_scaling_keeps_zeros_and_matches_dense_where_it_can() {
        use crate::matrix::CsrBuf;
        // Rows (0, 2), (4, 0), (0, -6).
        let x = [0.0, 2.0, 4.0, 0.0, 0.0, -6.0];
        let sp = MatrixBuf::Csr(CsrBuf::from_dense(&x, 2));
        let dense = MatrixBuf::Dense(x.to_vec());
        let a = Scaler::fit_matrix(Scale::Maxabs, &sp, 3, 2)
            .unwrap()
            .unwrap();
        let b = Scaler::fit_matrix(Scale::Maxabs, &dense, 3, 2)
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        let s = Scaler::fit_matrix(Scale::Standard, &sp, 3, 2)
            .unwrap()
            .unwrap();
        let full = Scaler::fit(Scale::Standard, &x, 3, 2).unwrap();
        assert!(s.keeps_zeros() && !full.keeps_zeros());
        for (f, g) in s.factor.iter().zip(&full.factor) {
            assert!((f - g).abs() <= 1e-6 * g, "{f} vs {g}");
        }
        assert!(Scaler::fit_matrix(Scale::Minmax, &sp, 3, 2).is_err());
        let mut y = sp.clone();
        a.apply_matrix(&mut y, 3, 2, std::path::Path::new("t"), Overflow::Error)
            .unwrap();
        assert_eq!(y.csr().unwrap().values, vec![2.0 / 6.0, 1.0, -1.0]);
        // A scaling with offsets (a model trained on dense rows) makes sparse rows dense.
        let mut z = sp.clone();
        full.apply_matrix(&mut z, 3, 2, std::path::Path::new("t"), Overflow::Saturate)
            .unwrap();
        let mut want = x;
        full.apply_saturating(&mut want);
        assert_eq!(z.dense().unwrap(), &want[..]);
    }
}
