//! Twins of the register pass (shaders/batch_register.wgsl with its lane sums): `epoch`,
//! `scores`.

use super::super::{BatchRule, DataView, TrainView};
use super::{accumulate, margins, row_score, Margins};

/// Twin of `epoch` (the register pass over dense rows): the K scores of every training row,
/// the rule, its coefficients (`coef`, scratch here: the GPU keeps them in workgroup memory)
/// and the epoch's counts, as `margins`; and one partial per workgroup's run of `run` rows,
/// the sum over the run of coef[r, k] * [x_r, bias], as `accumulate` with chunks of `run`
/// rows. Held-out rows are counted as `margins` counts them. The GPU sums a run's rows in
/// row groups (each in row order) that are then added in order: the same sums wherever
/// they are exact (integer data), not bit for bit on float data.
pub fn epoch(
    v: TrainView<'_>,
    w: &[f32],
    wv: &[f32],
    rule: &BatchRule,
    run: usize,
    coef: &mut [f32],
) -> (Margins, Vec<f32>) {
    let m = margins(v, w, wv, rule, coef);
    (m, accumulate(v, coef, run.max(1)))
}

/// Twin of `scores`: w_k . [x_i, bias] for every row and head, row-major.
pub fn scores(data: DataView<'_>, w: &[f32]) -> Vec<f32> {
    let d = data.d;
    let heads = w.len() / (d + 1);
    let mut out = Vec::with_capacity(data.n * heads);
    let mut buf = Vec::new();
    for i in 0..data.n {
        let row = data.x.row(i, d, &mut buf);
        for h in 0..heads {
            out.push(row_score(
                &w[h * (d + 1)..(h + 1) * (d + 1)],
                row,
                data.bias,
            ));
        }
    }
    out
}
