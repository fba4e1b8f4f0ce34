//! Host views of the data a backend binds: training rows with labels, weights and held-out
//! rows, unlabelled rows, and the rows kernel scoring binds.

use super::{Matrix, Storage, WideMatrix};
use crate::error::Result;

/// Host view of a training set. The bias column is implicit: row i is treated as
/// `[x_i, bias]`, and each of the `heads` weight vectors has `d + 1` entries, the last one for
/// the bias; weights are stored head after head (`heads * (d + 1)` values).
#[derive(Debug, Clone, Copy)]
pub struct TrainView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Labels, `n` of them: -1 or +1 for [`HeadRule::Binary`](super::HeadRule::Binary), else the class index (exact in
    /// f32 below 2^24).
    pub y: &'a [f32],
    /// Rows.
    pub n: usize,
    /// Features (without the bias column).
    pub d: usize,
    /// Value of the implicit last column: 1 with a bias, 0 without.
    pub bias: f32,
    /// Number of weight vectors K (1 for binary; the number of classes otherwise).
    pub heads: usize,
    /// Per-row weights, `n` of them (a factor on the row's update and criterion); `None`:
    /// every row weighs 1.
    pub sw: Option<&'a [f32]>,
    /// Under one-vs-rest with class weights, one factor per class (`heads` of them): a row of
    /// class c weighs `sw` times `own[c]` in head c and `sw` in the others (scikit-learn's
    /// one-vs-rest weighting; see [`RowWeight`](super::RowWeight)). `None`: a row weighs `sw`
    /// in every head (binary and multiclass rules fold class weights into `sw`).
    pub own: Option<&'a [f32]>,
    /// Held-out rows, scored every epoch with the prediction rule and never trained on.
    pub val: Option<ValView<'a>>,
}

/// Held-out rows of a training set (validation): features with the training set's `d` and
/// labels in the same internal form.
#[derive(Debug, Clone, Copy)]
pub struct ValView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Labels (±1 or class index, as [`TrainView::y`]).
    pub y: &'a [f32],
    /// Rows.
    pub n: usize,
}

/// Host view of unlabelled features, for scoring.
#[derive(Debug, Clone, Copy)]
pub struct DataView<'a> {
    /// Features: dense (`n * d`, row-major) or CSR, in any storage.
    pub x: Matrix<'a>,
    /// Rows.
    pub n: usize,
    /// Features (without the bias column).
    pub d: usize,
    /// Value of the implicit last column.
    pub bias: f32,
}

impl<'a> TrainView<'a> {
    /// A view of `n` rows of `d` features with labels `y`, every row weighing 1 and no
    /// held-out rows.
    pub fn new(
        x: impl Into<Matrix<'a>>,
        y: &'a [f32],
        n: usize,
        d: usize,
        bias: f32,
        heads: usize,
    ) -> Self {
        TrainView {
            x: x.into(),
            y,
            n,
            d,
            bias,
            heads,
            sw: None,
            own: None,
            val: None,
        }
    }

    /// The features without labels.
    pub fn data(&self) -> DataView<'a> {
        DataView {
            x: self.x,
            n: self.n,
            d: self.d,
            bias: self.bias,
        }
    }

    /// The held-out rows' features, when there are any.
    pub fn val_data(&self) -> Option<DataView<'a>> {
        self.val.map(|v| DataView {
            x: v.x,
            n: v.n,
            d: self.d,
            bias: self.bias,
        })
    }

    /// Weight of row `i` (1 without per-row weights).
    #[inline(always)]
    pub fn weight(&self, i: usize) -> f32 {
        self.sw.map_or(1.0, |w| w[i])
    }

    /// Weight of row `i` in each head (see [`TrainView::own`]).
    #[inline(always)]
    pub fn row_weight(&self, i: usize) -> super::RowWeight {
        let row = self.weight(i);
        match self.own {
            Some(f) => super::RowWeight {
                row,
                own: row * f[self.y[i] as usize],
            },
            None => super::RowWeight::uniform(row),
        }
    }
}

/// Squared norms ||x_i||^2 of every row (without the bias column): the kernels' K(x, x) and
/// K(z, z) inputs, computed in one place for both backends.
pub fn sq_norms(data: DataView<'_>) -> Vec<f32> {
    if data.d == 0 {
        return vec![0.0; data.n];
    }
    let mut buf = Vec::new();
    (0..data.n)
        .map(|i| data.x.row(i, data.d, &mut buf).sq_norm())
        .collect()
}

/// The rows a host backend scores kernels on: the eval rows, the support rows (the eval rows
/// when none are given) and the squared norms of the support rows.
pub struct DualRows<'a> {
    /// Rows scored.
    pub eval: DataView<'a>,
    /// Rows support vectors are drawn from.
    pub sv: DataView<'a>,
    /// ||sv_j||^2 for every support row j.
    pub sq: Vec<f32>,
    /// The eval rows as f32 (widened once when stored compactly).
    pub ex: WideMatrix<'a>,
    /// The support rows as f32.
    pub sx: WideMatrix<'a>,
}

impl<'a> DualRows<'a> {
    /// Binds `eval` and `sv` (`None`: the eval rows), widened to f32 (within the memory
    /// budget).
    pub fn new(eval: DataView<'a>, sv: Option<DataView<'a>>) -> Result<Self> {
        check_widened(eval)?;
        if let Some(s) = sv {
            check_widened(s)?;
        }
        let same = sv.is_none();
        let sv = sv.unwrap_or(eval);
        let ex = eval.x.widened();
        let sx = if same { ex.clone() } else { sv.x.widened() };
        Ok(DualRows {
            eval,
            sv,
            sq: sq_norms(sv),
            ex,
            sx,
        })
    }
}

/// Checks the memory for the rows of `data` widened into an f32 copy, as kernel scoring and
/// storage conversions make one: nothing to check for f32 dense rows, which are borrowed
/// (and CSR rows are checked where they are made dense).
pub(crate) fn check_widened(data: DataView<'_>) -> Result<()> {
    if data.x.is_sparse() || data.x.storage() == Storage::F32 {
        return Ok(());
    }
    crate::limits::check(
        || {
            format!(
                "{} rows x {} features held as {}, widened to f32",
                data.n,
                data.d,
                data.x.storage().name()
            )
        },
        (data.n as u128) * (data.d as u128),
        4,
    )
}
