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

use super::online::{self, Keep, OnlineRule, Snapshot, Step, Stepped};
use super::{Backends, Fitted, Problem, Progress};
use crate::backend::steps::StepUpdate;
use crate::backend::{pa_rule, PaRow, PaSize, Row, RowWeight};
use crate::error::Result;
use crate::params::Params;

/// Trains the passive-aggressive rule of `params`: in steps and streams on a GPU (the
/// steps the user named, or the GPU's choice; shaders/steps.wgsl's `decide_pa`) or, where the
/// user named steps, as the kernels' CPU twin; else row by row on the host CPU.
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let run_as = Stepped {
        steps: online::steps_for(
            pb,
            params,
            backends.primary,
            online::StepsChoice::GpuMayPick,
        ),
        keep: Keep {
            average: false,
            voted: None,
        },
        update: StepUpdate::PassiveAggressive(params.passive_aggressive.unwrap_or_default().size()),
    };
    online::fit_stepped_or(pb, params, backends, run_as, progress, || rule(pb, params))
}

/// The sequential passive-aggressive rule of `params` from the problem's initial weights.
pub(crate) fn rule(pb: &Problem<'_>, params: &Params) -> impl OnlineRule {
    Pa {
        w: pb.initial_weights(params),
        s: vec![0.0; pb.heads],
        steps: Vec::new(),
        size: params.passive_aggressive.unwrap_or_default().size(),
        eta: params.lr,
    }
}

struct Pa {
    /// Augmented weights, `heads * (d + 1)`.
    w: Vec<f32>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    /// The heads with a margin of at most 1 and the sign of their step (scratch).
    steps: Vec<(usize, f32)>,
    size: PaSize,
    eta: f32,
}

impl OnlineRule for Pa {
    fn rescale(&mut self, j: usize, k: f32) {
        let da = self.w.len() / self.s.len().max(1);
        for h in 0..self.s.len() {
            self.w[h * da + j] *= k;
        }
    }

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
        let (w, eta) = (&mut self.w, self.eta);
        let sq = row.sq_norm() + bias * bias;
        let pa_row = PaRow { y, wt, sq };
        let o = pa_rule(
            (pb.rule, self.size),
            &self.s,
            pa_row,
            &mut self.steps,
            |h, c| {
                let a = eta * c;
                row.axpy(a, &mut w[h * da..h * da + d]);
                w[h * da + d] += a * bias;
            },
        );
        Ok(Step {
            mistakes: o.mistakes,
            criterion: o.criterion,
            weighted: o.weighted,
            wrong_rows: o.wrong_rows,
            ..Step::default()
        })
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        self.w.clone()
    }

    fn finish(self, _pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(best.unwrap_or(self.w)))
    }
}
