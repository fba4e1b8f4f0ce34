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

use super::online::{self, Keep, OnlineRule, Snapshot, Step, Stepped};
use super::{Backends, Fitted, Problem, Progress};
use crate::backend::cpu::CpuBackend;
use crate::backend::steps::{StepUpdate, AROW_STEP};
use crate::backend::{arow_rule, BackendKind, HeadRule, Row, RowWeight};
use crate::error::Result;
use crate::params::{Params, GPU_AROW_STEPS};

/// Trains AROW of `params`: in steps and streams on a GPU (the steps the user named, or
/// [`GPU_AROW_STEPS`] within `AROW_STEP` scores a step; shaders/steps.wgsl's `decide_arow`)
/// or, where the user named steps, as the kernels' CPU twin; else row by row on the host
/// CPU. The streams' confidences are mixed as their weights are (their mean).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let keep = Keep {
        average: false,
        voted: None,
    };
    let w = pb.initial_weights(params);
    let named = (params.minibatch, params.streams) != (1, 1);
    // Where the user named neither, a GPU takes AROW's own steps (what keeps its one pass's
    // accuracy), within AROW's scores a step; the user's are checked as given.
    let on_gpu = backends.primary.kind() == BackendKind::Gpu;
    let steps = match (named, on_gpu) {
        (false, true) => {
            let (rows, streams) = GPU_AROW_STEPS;
            (rows.min(AROW_STEP / pb.heads.max(1)).max(1), streams)
        }
        _ => (params.minibatch, params.streams),
    };
    let update = StepUpdate::Arow {
        r: params.arow.unwrap_or_default().r,
    };
    let cpu = CpuBackend::new();
    let mut fallback = None;
    let tries: [&dyn crate::backend::Backend; 2] = [backends.primary, &cpu];
    for (k, backend) in tries.into_iter().enumerate() {
        // The twin on the CPU only where the user named the steps.
        if k == 1 && (fallback.is_none() || !named || backends.primary.kind() == BackendKind::Cpu) {
            break;
        }
        let run_as = Stepped {
            steps,
            keep,
            update,
        };
        match online::stepped_on(pb, params, run_as, backend, &w, progress)? {
            Ok(mut f) => {
                f.ran.fallback = fallback;
                return Ok(f);
            }
            Err(why) => fallback = fallback.or(why),
        }
    }
    let mut f = online::fitted(pb, online::run(pb, params, rule(pb, params), progress)?)?;
    f.ran.fallback = fallback;
    Ok(f)
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
    /// The heads that step, with eta alpha y and beta (scratch).
    steps: Vec<(usize, f32, f32)>,
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
        // (The rule is binary or one-vs-rest: `Problem` gives AROW no joint multiclass rule.)
        let rule = pb.rule;
        debug_assert!(matches!(rule, HeadRule::Binary | HeadRule::OneVsRest));
        self.steps.clear();
        let (steps, sigma) = (&mut self.steps, &self.sigma);
        // A head's confidence in the row, x^T Sigma x, the bias column first (as the twin).
        let conf = |h: usize| {
            let sg = &sigma[h * da..(h + 1) * da];
            let mut v = sg[d] * bias * bias;
            row.for_each_nonzero(|j, x| v += sg[j] * x * x);
            v
        };
        let o = arow_rule(
            rule,
            (self.r, self.eta),
            &self.s,
            (y, wt),
            conf,
            |h, a, beta| steps.push((h, a, beta)),
        );
        for &(h, a, beta) in self.steps.iter() {
            let (w, sg) = (
                &mut self.w[h * da..(h + 1) * da],
                &mut self.sigma[h * da..(h + 1) * da],
            );
            row.for_each_nonzero(|j, x| {
                let sx = sg[j] * x;
                w[j] += a * sx;
                sg[j] -= beta * sx * sx;
            });
            let sx = sg[d] * bias;
            w[d] += a * sx;
            sg[d] -= beta * sx * sx;
        }
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
