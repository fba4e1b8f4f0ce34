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
//! this diagonal form, so its report gives none. `FullArow`, below, keeps the whole matrix
//! for a few features and reports the bound: docs/guide.md, "AROW".) x is augmented ([x, 1]), so the bias has its own confidence. `r` (> 0) sets
//! how fast the confidence grows: larger is slower (default 30, chosen on the one-pass
//! figures of docs/guide.md, "AROW"). Binary; with K classes one head per class
//! against the rest (one-vs-rest), each head with its own confidences. A row's and its
//! class's weight c enters as c copies would in AROW's objective (r / c in place of r, so
//! beta = c / (c v + r): weight 0 changes nothing), and eta scales alpha. A "mistake" in the reports is a row the rule steps on (margin below
//! 1), and the criterion the sum of the hinge losses, as for passive-aggressive. A warm start
//! takes the model's weights with every confidence 1 again (model files hold no covariance).

use super::online::{self, Keep, OnlineRule, Snapshot, Step, Stepped};
use super::{Backends, Fitted, Problem, Progress};
use crate::backend::steps::{StepUpdate, AROW_STEP};
use crate::backend::{arow_rule, BackendKind, HeadRule, Row, RowWeight};
use crate::error::{Error, Param, Result};
use crate::params::{ArowCovariance, Params, AROW_FULL_MAX_COLUMNS, GPU_AROW_STEPS};
use crate::report::ArowBound;

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
    if params.arow.unwrap_or_default().covariance == ArowCovariance::Full {
        // Row by row on the host CPU: the full matrices have no GPU form.
        let rule = full_rule(pb, params)?;
        return online::fitted(pb, online::run(pb, params, rule, progress)?);
    }
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
    let run_as = Stepped {
        steps,
        keep: Keep {
            average: false,
            voted: None,
        },
        update: StepUpdate::Arow {
            r: params.arow.unwrap_or_default().r,
        },
    };
    online::fit_stepped_or(pb, params, backends, run_as, progress, || rule(pb, params))
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
    fn rescale(&mut self, j: usize, k: f32) {
        let da = self.w.len() / self.s.len().max(1);
        for h in 0..self.s.len() {
            self.w[h * da + j] *= k;
            self.sigma[h * da + j] *= k * k;
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

/// AROW with a full covariance (`--arow-covariance full`), row by row: each head keeps the
/// whole (d + 1) x (d + 1) matrix Sigma (f64, the identity at the start); a head whose
/// margin is below 1 moves w by alpha y Sigma x and Sigma shrinks by beta (Sigma x)(Sigma x)^T,
/// so that Sigma^-1 grows by exactly x x^T / r (Sherman-Morrison), what the paper's mistake
/// bound rests on. Binary runs from zero weights with unit row weights and eta 1 count their
/// mistakes and corrections and give the bound ([`crate::report::ArowBound`]).
pub(crate) struct FullArow {
    /// Augmented weights, `heads * (d + 1)`.
    w: Vec<f32>,
    /// Each head's covariance, `(d + 1)^2` values, row-major.
    sigma: Vec<f64>,
    /// Each head's Sigma x for the row (scratch), `d + 1` values.
    sx: Vec<f64>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    /// The heads that step, with eta alpha y and beta (scratch).
    steps: Vec<(usize, f32, f32)>,
    r: f32,
    eta: f32,
    /// The bound's counts, where the run is one the bound covers: each row's steps, the
    /// steps that were mistakes and those that were not.
    count: Option<BoundCounts>,
}

struct BoundCounts {
    steps: Vec<u32>,
    mistakes: u64,
    corrections: u64,
}

/// AROW with a full covariance from the problem's initial weights, or an error naming the
/// parameter when the matrices would be too large.
pub(crate) fn full_rule(pb: &Problem<'_>, params: &Params) -> Result<FullArow> {
    let v = pb.view();
    let da = v.d + 1;
    let values = pb.heads.checked_mul(da).and_then(|h| h.checked_mul(da));
    if da > AROW_FULL_MAX_COLUMNS || values.is_none_or(|n| n > FULL_MAX_VALUES) {
        return Err(Error::param(
            Param::ArowCovariance,
            ArowCovariance::Full,
            format!(
                "must be diagonal for {} features and {} heads: the full covariance keeps a \
                 {da} x {da} matrix a head, and takes at most {} columns (the features and \
                 the bias) and {FULL_MAX_VALUES} values in all",
                v.d, pb.heads, AROW_FULL_MAX_COLUMNS
            ),
        ));
    }
    let w = pb.initial_weights(params);
    let mut sigma = vec![0f64; pb.heads * da * da];
    for h in 0..pb.heads {
        for j in 0..da {
            sigma[h * da * da + j * da + j] = 1.0;
        }
    }
    // The bound's setting: binary, from zero, every row weighing 1, eta 1, one process, and
    // features that keep their scale (AROW in memory takes the whole set's magnitudes before
    // its first step: no rescaling of the covariance, which would break Sigma^-1 = I + X_A /
    // r; a streamed run, which scales online, keeps no full covariance).
    let covered = pb.rule == HeadRule::Binary
        && w.iter().all(|&x| x == 0.0)
        && (0..v.n).all(|i| v.row_weight(i) == RowWeight::ONE)
        && params.lr == 1.0
        && pb.shard.is_none()
        && !super::reads_online(params);
    Ok(FullArow {
        sigma,
        sx: vec![0.0; pb.heads * da],
        s: vec![0.0; pb.heads],
        steps: Vec::new(),
        r: params.arow.unwrap_or_default().r,
        eta: params.lr,
        count: covered.then(|| BoundCounts {
            steps: vec![0; v.n],
            mistakes: 0,
            corrections: 0,
        }),
        w,
    })
}

/// Most covariance values of AROW with a full covariance, over all heads (1 GiB in f64).
const FULL_MAX_VALUES: usize = 1 << 27;

impl OnlineRule for FullArow {
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
        i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step> {
        let a = self;
        let v = pb.view();
        let (d, bias) = (v.d, v.bias);
        let da = d + 1;
        row.decisions(&a.w, bias, &mut a.s);
        let rule = pb.rule;
        a.steps.clear();
        let (steps, sigma, sx) = (&mut a.steps, &a.sigma, &mut a.sx);
        // A head's confidence in the row, x^T Sigma x, with Sigma x kept for its update.
        let conf = |h: usize| {
            let sg = &sigma[h * da * da..(h + 1) * da * da];
            let out = &mut sx[h * da..(h + 1) * da];
            let b = f64::from(bias);
            out.iter_mut()
                .zip(&sg[d * da..])
                .for_each(|(o, &s)| *o = s * b);
            row.for_each_nonzero(|j, x| {
                let x = f64::from(x);
                out.iter_mut()
                    .zip(&sg[j * da..(j + 1) * da])
                    .for_each(|(o, &s)| *o += s * x);
            });
            let mut v = out[d] * b;
            row.for_each_nonzero(|j, x| v += out[j] * f64::from(x));
            v as f32
        };
        let o = arow_rule(rule, (a.r, a.eta), &a.s, (y, wt), conf, |h, c, beta| {
            steps.push((h, c, beta))
        });
        for &(h, c, beta) in a.steps.iter() {
            let sx = &a.sx[h * da..(h + 1) * da];
            let (c, beta) = (f64::from(c), f64::from(beta));
            for (wj, &s) in a.w[h * da..(h + 1) * da].iter_mut().zip(sx) {
                *wj += (c * s) as f32;
            }
            let sg = &mut a.sigma[h * da * da..(h + 1) * da * da];
            for (j, &sj) in sx.iter().enumerate() {
                let bj = beta * sj;
                for (s, &sk) in sg[j * da..(j + 1) * da].iter_mut().zip(sx) {
                    *s -= bj * sk;
                }
            }
        }
        if let (Some(n), false) = (a.count.as_mut(), a.steps.is_empty()) {
            n.steps[i] += 1;
            match y * a.s[0] <= 0.0 {
                true => n.mistakes += 1,
                false => n.corrections += 1,
            }
        }
        Ok(Step {
            mistakes: o.mistakes,
            criterion: o.criterion,
            weighted: o.weighted,
            wrong_rows: o.wrong_rows,
            ..Step::default()
        })
    }

    fn arow_bound(&self, pb: &Problem<'_>) -> Result<Option<ArowBound>> {
        let a = self;
        let Some(n) = &a.count else { return Ok(None) };
        let v = pb.view();
        let da = v.d + 1;
        // log det(I + X_A / r) = -log det Sigma: Sigma^-1 = I + X_A / r.
        let Some(log_det_sigma) = log_det_spd(&a.sigma[..da * da], da) else {
            return Ok(None);
        };
        // The trained weights' smallest functional margin and w^T X_A w.
        let (mut gamma, mut q) = (f64::INFINITY, 0f64);
        let (mut buf, mut scaled) = (Vec::new(), Vec::new());
        for i in 0..v.n {
            let mut row = v.x.row(i, v.d, &mut buf);
            if let Some(sc) = pb.scale_on_read.as_ref() {
                row = sc.scale_row(row, &mut scaled, i, &pb.ds.source)?;
            }
            let score = f64::from(row.decision(&a.w, v.bias));
            gamma = gamma.min(f64::from(v.y[i]) * score);
            q += f64::from(n.steps[i]) * score * score;
        }
        let w2: f64 = a.w.iter().map(|&x| f64::from(x).powi(2)).sum();
        let u = n.corrections as f64;
        let log_det = -log_det_sigma;
        let bound = (gamma > 0.0)
            .then(|| (f64::from(a.r) * w2 + q).sqrt() * (log_det + u).sqrt() / gamma - u);
        Ok(Some(ArowBound {
            mistakes: n.mistakes,
            corrections: n.corrections,
            log_det,
            bound,
        }))
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        self.w.clone()
    }

    fn finish(self, _pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(best.unwrap_or(self.w)))
    }
}

/// log det of the symmetric positive definite `n` x `n` matrix `m` (row-major) by Cholesky;
/// `None` where a pivot is not positive (not positive definite to rounding).
fn log_det_spd(m: &[f64], n: usize) -> Option<f64> {
    let mut l = vec![0f64; n * n];
    let mut log_det = 0.0;
    for j in 0..n {
        let mut diag = m[j * n + j];
        for k in 0..j {
            diag -= l[j * n + k] * l[j * n + k];
        }
        if diag.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let ljj = diag.sqrt();
        l[j * n + j] = ljj;
        log_det += 2.0 * ljj.ln();
        for i in j + 1..n {
            let mut s = m[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / ljj;
        }
    }
    Some(log_det)
}
