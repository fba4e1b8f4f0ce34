//! AROW, adaptive regularization of weight vectors (Crammer, Kulesza and Dredze, "Adaptive
//! Regularization of Weight Vectors", NIPS 2009), with a diagonal covariance: each weight
//! keeps a confidence sigma_j (1 at the start, shrinking as its feature is seen), and a row
//! whose margin m = y w.x is below 1 moves w by alpha y Sigma x with
//!
//!   v = x^T Sigma x,  beta = 1 / (v + r),  alpha = (1 - m) beta,
//!   sigma_j <- sigma_j - beta sigma_j^2 x_j^2,
//!
//! so rare features take large steps and frequent ones small: what Vowpal Wabbit's adaptive,
//! normalised steps learn per pass, in the perceptron family. (The paper's mistake bound is
//! proved for the full covariance, whose inverse grows by x x^T / r a step; none is known for
//! this diagonal form, so the report gives none: docs/guide.md, "AROW".) x is augmented ([x, 1]), so the bias has its own confidence. `r` (> 0) sets
//! how fast the confidence grows: larger is slower (default 30, chosen on the one-pass
//! figures of docs/guide.md, "AROW"). Binary; with K classes one head per class
//! against the rest (one-vs-rest), each head with its own confidences. A row's and its
//! class's weight c enters as c copies would in AROW's objective (r / c in place of r, so
//! beta = c / (c v + r): weight 0 changes nothing), and eta scales alpha. A "mistake" in the reports is a row the rule steps on (margin below
//! 1), and the criterion the sum of the hinge losses, as for passive-aggressive. A warm start
//! takes the model's weights with every confidence 1 again (model files hold no covariance).

use super::online::{self, OnlineRule, Snapshot, Step};
use super::{Backends, Fitted, Problem, Progress};
use crate::backend::{row_rule, HeadRule, Row, RowWeight};
use crate::error::Result;
use crate::params::Params;

/// Trains AROW of `params` row by row on the host CPU (it has no GPU form).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    _backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    online::fitted(pb, online::run(pb, params, rule(pb, params), progress)?)
}

/// AROW's rule for `params` from the problem's initial weights, every confidence 1.
pub(crate) fn rule(pb: &Problem<'_>, params: &Params) -> impl OnlineRule {
    let w = pb.initial_weights(params);
    Arow {
        sigma: vec![1.0; w.len()],
        w,
        s: vec![0.0; pb.heads],
        steps: Vec::new(),
        r: params.arow.unwrap_or_default().r,
        eta: params.lr,
    }
}

struct Arow {
    /// Augmented weights, `heads * (d + 1)`.
    w: Vec<f32>,
    /// The diagonal of each head's covariance, laid out as `w`.
    sigma: Vec<f32>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    /// The heads with a margin of at most 1 and the sign of their step (scratch).
    steps: Vec<(usize, f32)>,
    r: f32,
    eta: f32,
}

impl OnlineRule for Arow {
    type Best = Vec<f32>;

    fn row_scores(&self) -> Option<&[f32]> {
        Some(&self.s)
    }

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn step(
        &mut self,
        pb: &Problem<'_>,
        _i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step> {
        let v = pb.view();
        let (d, bias) = (v.d, v.bias);
        let da = d + 1;
        row.decisions(&self.w, bias, &mut self.s);
        // The heads whose margin is at most 1, and their label signs (the rule is binary or
        // one-vs-rest: `Problem` gives AROW no joint multiclass rule).
        let rule = pb.rule;
        debug_assert!(matches!(rule, HeadRule::Binary | HeadRule::OneVsRest));
        self.steps.clear();
        let steps = &mut self.steps;
        let o = row_rule(rule, 1.0, &self.s, y, RowWeight::ONE, |h, sign| {
            steps.push((h, sign))
        });
        let mut out = Step {
            wrong_rows: o.wrong_rows,
            ..Step::default()
        };
        for &(h, sign) in self.steps.iter() {
            let loss = 1.0 - sign * self.s[h];
            if loss <= 0.0 {
                continue;
            }
            let wi = wt.head(rule, h, y);
            out.mistakes += 1;
            out.criterion += loss as f64 * wi as f64;
            out.weighted += wi as f64;
            let (w, sg) = (
                &mut self.w[h * da..(h + 1) * da],
                &mut self.sigma[h * da..(h + 1) * da],
            );
            let mut conf = sg[d] * bias * bias;
            row.for_each_nonzero(|j, x| conf += sg[j] * x * x);
            // A row of weight c counts as c copies in AROW's objective: r becomes r / c, so
            // beta = c / (c v + r); a row of weight 0 changes neither w nor the confidences.
            let beta = wi / (wi * conf + self.r);
            let a = self.eta * loss * beta * sign;
            row.for_each_nonzero(|j, x| {
                let sx = sg[j] * x;
                w[j] += a * sx;
                sg[j] -= beta * sx * sx;
            });
            let sx = sg[d] * bias;
            w[d] += a * sx;
            sg[d] -= beta * sx * sx;
        }
        Ok(out)
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        self.w.clone()
    }

    fn finish(self, _pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(best.unwrap_or(self.w)))
    }
}
