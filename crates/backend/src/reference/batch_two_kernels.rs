//! Twins of the two-kernel and sparse paths (shaders/batch_two_kernels.wgsl): `margins`,
//! `accumulate`, `gather`.

use super::super::{predicted_wrong, row_rule, BatchRule, HeadRule, Row, TrainView};
use super::row_score;

/// Twin of `margins`: for every training row the K scores, the rule's coefficient of x for
/// each head times the row's weight (`coef`, `n * heads`, row-major; 0 where the row does not
/// update the head), and the epoch's mistakes and criterion J (weighted); for every held-out
/// row the prediction rule with the weights `wv`, counting the rows predicted wrong.
pub fn margins(
    v: TrainView<'_>,
    w: &[f32],
    wv: &[f32],
    rule: &BatchRule,
    coef: &mut [f32],
) -> Margins {
    let (d, k) = (v.d, v.heads);
    let mut s = vec![0f32; k];
    let mut buf = Vec::new();
    let (mut mistakes, mut criterion, mut weighted, mut wrong_rows) = (0u64, 0f64, 0f64, 0u64);
    for i in 0..v.n {
        let row = v.x.row(i, d, &mut buf);
        for (h, sh) in s.iter_mut().enumerate() {
            *sh = row_score(&w[h * (d + 1)..(h + 1) * (d + 1)], row, v.bias);
        }
        let c = &mut coef[i * k..(i + 1) * k];
        c.fill(0.0);
        let o = row_rule(rule.rule, rule.tau, &s, v.y[i], v.row_weight(i), |h, a| {
            c[h] = a
        });
        mistakes += o.mistakes;
        criterion += o.criterion;
        weighted += o.weighted;
        wrong_rows += o.wrong_rows;
    }
    let val = v.val.map(|val| {
        let mut wrong = 0u64;
        for i in 0..val.n {
            let row = val.x.row(i, d, &mut buf);
            for (h, sh) in s.iter_mut().enumerate() {
                *sh = row_score(&wv[h * (d + 1)..(h + 1) * (d + 1)], row, v.bias);
            }
            wrong += u64::from(predicted_wrong(rule.rule, &s, val.y[i]));
        }
        wrong
    });
    Margins {
        mistakes,
        criterion,
        val_mistakes: val,
        weighted: v.sw.is_some().then_some(weighted),
        wrong_rows: (rule.rule == HeadRule::OneVsRest).then_some(wrong_rows),
    }
}

/// What `margins` counts in an epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margins {
    /// Training mistakes.
    pub mistakes: u64,
    /// The criterion J (weighted).
    pub criterion: f64,
    /// Held-out rows predicted wrong, when there are held-out rows.
    pub val_mistakes: Option<u64>,
    /// The mistakes' row weights summed, when rows have weights.
    pub weighted: Option<f64>,
    /// One-vs-rest: the training rows whose first highest score is not their class.
    pub wrong_rows: Option<u64>,
}

/// Twin of `accumulate`: per chunk of `chunk_rows` rows, the sum over its rows of
/// coef[r, k] * [x_r, bias] for every (head k, column j), rows in order, skipping rows whose
/// coefficient is 0. Returns `chunks * heads * (d + 1)` partial sums.
pub fn accumulate(v: TrainView<'_>, coef: &[f32], chunk_rows: usize) -> Vec<f32> {
    let (d, k) = (v.d, v.heads);
    let len = k * (d + 1);
    let chunks = v.n.div_ceil(chunk_rows).max(1);
    let mut partials = vec![0f32; chunks * len];
    let mut buf = Vec::new();
    for (c, part) in partials.chunks_exact_mut(len).enumerate() {
        for r in c * chunk_rows..((c + 1) * chunk_rows).min(v.n) {
            let row = v.x.row(r, d, &mut buf);
            for h in 0..k {
                let a = coef[r * k + h];
                if a == 0.0 {
                    continue;
                }
                let out = &mut part[h * (d + 1)..(h + 1) * (d + 1)];
                add_row(a, row, out);
                out[d] += a * v.bias;
            }
        }
    }
    partials
}

/// out[j] += a * x_j for every stored value of the row, in column order.
fn add_row(a: f32, row: Row<'_>, out: &mut [f32]) {
    match row {
        Row::Dense(x) => {
            for (o, x) in out.iter_mut().zip(x) {
                *o += a * x;
            }
        }
        Row::Sparse { idx, val } => {
            for (&j, &x) in idx.iter().zip(val) {
                out[j as usize] += a * x;
            }
        }
    }
}

/// Twin of `gather` (CSR rows; the GPU reads a column-major copy): for every (head k, column
/// j) the sum over the rows of coef[r, k] * [x_r, bias]_j, rows in ascending order, skipping
/// rows whose coefficient is 0. Returns `heads * (d + 1)` sums (one partial). The GPU sums a
/// column's entries in TPC strided runs and then a tree, one partial per segment: the same
/// sums wherever they are exact (integer data), not bit for bit on float data.
pub fn gather(v: TrainView<'_>, coef: &[f32]) -> Vec<f32> {
    accumulate(v, coef, v.n.max(1))
}
