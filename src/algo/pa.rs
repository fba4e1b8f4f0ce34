//! The passive-aggressive rules (Crammer, Dekel, Keshet, Shalev-Shwartz and Singer, "Online
//! Passive-Aggressive Algorithms", JMLR 7, 2006): on a row whose margin y w.x is below 1
//! (hinge loss l = 1 - y w.x > 0), the smallest change of w that brings it to 1, w += t y x
//! with t = l / ||x||^2 (PA), at most C (PA-I), or l / (||x||^2 + 1 / (2 C)) (PA-II); x is
//! augmented ([x, 1]), so ||x||^2 counts the bias. With K classes (direct), the true class
//! gets +t x and the highest-scoring wrong class -t x, with l = 1 - (s_true - s_wrong) and
//! 2 ||x||^2 in place of ||x||^2 (Section 7); one-vs-rest steps each head on its own. Row and
//! class weights scale the step, as does eta (1 by default). A "mistake" in the reports is a
//! row the rule steps on (a positive hinge loss, margin below 1), and the criterion is the
//! sum of the hinge losses; an epoch without one changed nothing, so it ends training
//! (converged, every training margin at least 1).

use super::online::{self, OnlineRule, Snapshot, Step};
use super::{Backends, Fitted, Problem, Progress};
use crate::backend::{row_rule, HeadRule, Row, RowWeight};
use crate::error::Result;
use crate::params::{PaVariant, Params, PassiveAggressive};

/// Trains the passive-aggressive rule of `params` on the host CPU (whatever the backends).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    _backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let rule = Pa {
        w: pb.initial_weights(params),
        s: vec![0.0; pb.heads],
        steps: Vec::new(),
        pa: params.passive_aggressive.unwrap_or_default(),
        eta: params.lr,
        joint: matches!(
            pb.rule,
            HeadRule::MulticlassArgmax | HeadRule::MulticlassAll
        ),
    };
    online::fitted(pb, online::run(pb, params, rule, progress)?)
}

struct Pa {
    /// Augmented weights, `heads * (d + 1)`.
    w: Vec<f32>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    /// The heads with a positive hinge loss and the sign of their step.
    steps: Vec<(usize, f32)>,
    pa: PassiveAggressive,
    eta: f32,
    /// One step for K classes (the true class and the highest wrong one) rather than one
    /// per head.
    joint: bool,
}

impl Pa {
    /// The step for hinge loss `loss` when a unit step moves the margin by `q`.
    fn size(&self, loss: f32, q: f32) -> f32 {
        match self.pa.variant {
            PaVariant::Pa => loss / q,
            PaVariant::Pa1 => (loss / q).min(self.pa.c),
            PaVariant::Pa2 => loss / (q + 0.5 / self.pa.c),
        }
    }
}

impl OnlineRule for Pa {
    type Best = Vec<f32>;

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
        for (h, sh) in self.s.iter_mut().enumerate() {
            *sh = row.decision(&self.w[h * da..(h + 1) * da], bias);
        }
        // The heads to step: those with a margin of at most 1.
        self.steps.clear();
        let steps = &mut self.steps;
        let o = row_rule(pb.rule, 1.0, &self.s, y, RowWeight::ONE, |h, sign| {
            steps.push((h, sign))
        });
        let margin = |&(h, sign): &(usize, f32)| sign * self.s[h];
        // Each step with its hinge loss: one loss for the joint multiclass step (the true
        // class and the highest wrong one), one per head otherwise.
        let losses: Vec<f32> = if self.joint {
            let m: f32 = self.steps.iter().map(margin).sum();
            vec![1.0 - m; self.steps.len()]
        } else {
            self.steps.iter().map(|st| 1.0 - margin(st)).collect()
        };
        let q = (row.sq_norm() + bias * bias) * if self.joint { 2.0 } else { 1.0 };
        let mut step = Step {
            wrong_rows: o.wrong_rows,
            ..Step::default()
        };
        for (i, (&(h, sign), &loss)) in self.steps.iter().zip(&losses).enumerate() {
            if loss <= 0.0 {
                continue;
            }
            // The row's weight in this head (a one-vs-rest row's own head: times its class
            // weight); the joint multiclass step weighs the row's weight.
            let wi = wt.head(pb.rule, h, y);
            if !self.joint || i == 0 {
                step.mistakes += 1;
                step.criterion += loss as f64 * wi as f64;
                step.weighted += wi as f64;
            }
            if q > 0.0 {
                let a = self.eta * self.size(loss, q) * sign * wi;
                row.axpy(a, &mut self.w[h * da..h * da + d]);
                self.w[h * da + d] += a * bias;
            }
        }
        Ok(step)
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        self.w.clone()
    }

    fn finish(self, _pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(best.unwrap_or(self.w)))
    }
}
