//! The batch perceptron and its batch family (pocket, averaged, multiclass, one-vs-rest,
//! Winnow): per epoch W += eta * the sum over the mistakes, stopping when an epoch has no
//! mistake, when ||eta * sum|| < tol, or at the epoch limit. The epochs run on whatever
//! [`Bound`] data the backend gives, several per call where the backend prefers it (the GPU
//! runs many epochs per submit and takes the stop decision itself). The pocket, average and
//! Winnow weights are read off the bound data when the epochs are done.

use super::{Backends, Checkpoint, Fitted, Problem, Progress};
use crate::backend::{winnow_weights, BatchRule, Bound, Keep, StopReason, Update};
use crate::error::Result;
use crate::params::{Algo, Params};

/// The rule the backends apply for `params` on `pb`. The pocket is kept by the pocket
/// algorithm, and by every batch form that may need the best epoch's weights: with held-out
/// rows (the best validation epoch is the model) and under a patience rule (a run the rule
/// stops keeps its best epoch). Averaging with held-out rows keeps the best epoch's average.
pub fn rule(params: &Params, pb: &Problem<'_>) -> BatchRule {
    let patience = pb.patience(params);
    let validating = pb.val.is_some();
    BatchRule {
        tau: params.margin_threshold,
        rule: pb.rule,
        keep: match params.algo {
            Algo::Pocket => Keep::Pocket,
            Algo::Averaged if validating => Keep::AveragePocket,
            Algo::Averaged => Keep::Average,
            _ if validating || patience.epochs > 0 => Keep::Pocket,
            _ => Keep::Nothing,
        },
        update: match params.algo {
            Algo::Winnow => Update::Multiplicative,
            _ => Update::Additive,
        },
        patience,
        ..BatchRule::new(params.lr, params.tol.unwrap_or(0.0))
    }
}

/// The weights and the epochs so far; what a fallback backend resumes from.
type State = Checkpoint<Vec<f32>>;

/// Trains the batch form of `params.algo`.
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let rule = rule(params, pb);
    let mut state = State {
        state: pb.initial_weights(params),
        stats: Vec::new(),
    };
    // A resumed run restarts the pocket, the average and the patience count (the bound data
    // keeps them); the weights and the trace carry on.
    let ((stop, w, scores, best), ran) = backends.resume(&mut state, |b, st| {
        let mut bound = b.bind(pb.view())?;
        let stop = epochs(&mut *bound, params, &rule, st, progress)?;
        let kept = Kept {
            best: params.algo == Algo::Pocket || pb.val.is_some() || stop == StopReason::Patience,
        };
        let (w, best) = final_weights(&mut *bound, &rule, kept, &st.state)?;
        let scores = bound.scores(&w)?;
        let done = st.stats.len() - best.1;
        Ok((stop, w, scores, done + best.0))
    })?;
    Ok(Fitted {
        body: pb.linear_body(&w),
        stats: state.stats,
        stop,
        scores: Some(scores),
        ran,
        best_epoch: best,
        arow_bound: None,
    })
}

/// Continues training from the weights in `st` until a stop, appending to `st.stats` after
/// every call to the backend, so that on an error the state describes the last completed
/// epoch.
fn epochs(
    bound: &mut dyn Bound,
    params: &Params,
    rule: &BatchRule,
    st: &mut State,
    progress: &mut dyn Progress,
) -> Result<StopReason> {
    let per_call = if progress.wants_snapshots() {
        1
    } else {
        bound.epochs_per_call().max(1)
    };
    while st.stats.len() < params.epochs {
        let k = per_call.min(params.epochs - st.stats.len());
        let got = bound.batch_epochs(&mut st.state, rule, k)?;
        st.stats.extend_from_slice(&got.stats);
        if progress.wants_snapshots() {
            progress.snapshot(st.stats.len(), &st.state);
        }
        let last = st.stats.last().copied().unwrap_or_default();
        progress.update(st.stats.len(), params.epochs, last.mistakes);
        if progress.cancelled() {
            return Err(crate::error::Error::Interrupted {
                done: st.stats.len() as u64,
                what: "epochs",
            });
        }
        if let Some(reason) = got.stop {
            return Ok(reason);
        }
    }
    Ok(StopReason::MaxEpochs)
}

/// Which weights the model keeps besides what the algorithm always keeps.
#[derive(Clone, Copy)]
struct Kept {
    /// The best epoch's (the pocket): the pocket algorithm, a validation run, a run stopped
    /// by the patience rule.
    best: bool,
}

/// The weights the model keeps, and (best epoch among the bound epochs, bound epochs): the
/// pocket; the average of the per-epoch weights (with held-out rows: the best epoch's
/// average); the Winnow weights of the log-weights (no bias); or the last weights.
fn final_weights(
    bound: &mut dyn Bound,
    rule: &BatchRule,
    kept: Kept,
    w: &[f32],
) -> Result<(Vec<f32>, (usize, usize))> {
    let ex = bound.extras()?;
    let best = (ex.stop.best_epoch as usize, ex.stop.epochs as usize);
    let mean = |sum: &[f32], t: u64| -> Vec<f32> {
        let t = t.max(1) as f32;
        sum.iter().map(|v| v / t).collect()
    };
    let mut out = match (rule.keep, ex.pocket, ex.average) {
        (Keep::AveragePocket, Some(p), _) if p.updates > 0 => mean(&p.w, p.updates),
        (Keep::AveragePocket, Some(p), _) => p.w,
        (Keep::Pocket, Some(p), _) if kept.best => p.w,
        (Keep::Average, _, Some((sum, t))) => mean(&sum, t),
        _ => w.to_vec(),
    };
    if rule.update == Update::Multiplicative {
        let logw = out.clone();
        winnow_weights(&logw, &mut out);
        if let Some(bias) = out.last_mut() {
            *bias = 0.0;
        }
    }
    Ok((out, best))
}
