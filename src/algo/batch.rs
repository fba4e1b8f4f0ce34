//! The batch perceptron and its batch family (pocket, averaged, multiclass, one-vs-rest,
//! Winnow): per epoch W += eta * the sum over the mistakes, stopping when an epoch has no
//! mistake, when ||eta * sum|| < tol, or at the epoch limit. The epochs run on whatever
//! [`Bound`] data the backend gives, several per call where the backend prefers it (the GPU
//! runs many epochs per submit and takes the stop decision itself). The pocket, average and
//! Winnow weights are read off the bound data when the epochs are done.

use super::{Backends, Checkpoint, Fitted, Problem, Progress};
use crate::backend::{winnow_weights, BatchRule, Bound, HeadRule, Keep, StopReason, Update};
use crate::error::Result;
use crate::params::{Algo, Params};

/// The rule the backends apply for `params` with the per-row rule `head_rule`.
pub fn rule(params: &Params, head_rule: HeadRule) -> BatchRule {
    BatchRule {
        tau: params.margin_threshold,
        rule: head_rule,
        keep: match params.algo {
            Algo::Pocket => Keep::Pocket,
            Algo::Averaged => Keep::Average,
            _ => Keep::Nothing,
        },
        update: match params.algo {
            Algo::Winnow => Update::Multiplicative,
            _ => Update::Additive,
        },
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
    let rule = rule(params, pb.rule);
    let mut state = State {
        state: pb.initial_weights(params),
        stats: Vec::new(),
    };
    // A resumed run restarts the pocket and the average (the bound data keeps them); the
    // weights and the trace carry on.
    let ((stop, w, scores), ran) = backends.resume(&mut state, |b, st| {
        let mut bound = b.bind(pb.view())?;
        let stop = epochs(&mut *bound, params, &rule, st, progress)?;
        let w = final_weights(&mut *bound, &rule, &st.state, st.stats.len())?;
        let scores = bound.scores(&w)?;
        Ok((stop, w, scores))
    })?;
    Ok(Fitted {
        body: pb.linear_body(&w),
        stats: state.stats,
        stop,
        scores: Some(scores),
        ran,
    })
}

/// Continues training from the weights in `st` until a stop, appending to `st.stats` after every call to
/// the backend, so that on an error the state describes the last completed epoch.
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
        st.stats.extend_from_slice(&got);
        if progress.wants_snapshots() {
            progress.snapshot(st.stats.len(), &st.state);
        }
        let last = st.stats.last().copied().unwrap_or_default();
        progress.update(st.stats.len(), params.epochs, last.mistakes);
        if let Some(reason) = rule.stop(&last) {
            return Ok(reason);
        }
    }
    Ok(StopReason::MaxEpochs)
}

/// The weights the model keeps: the pocket, the average of the per-epoch weights, the Winnow
/// weights of the log-weights (no bias), or the last weights.
fn final_weights(
    bound: &mut dyn Bound,
    rule: &BatchRule,
    w: &[f32],
    epochs: usize,
) -> Result<Vec<f32>> {
    let ex = bound.extras()?;
    let mut out = match (rule.keep, ex.pocket, ex.average_sum) {
        (Keep::Pocket, Some((pocket, _)), _) => pocket,
        (Keep::Average, _, Some(sum)) => {
            let t = epochs.max(1) as f32;
            sum.iter().map(|v| v / t).collect()
        }
        _ => w.to_vec(),
    };
    if rule.update == Update::Multiplicative {
        let logw = out.clone();
        winnow_weights(&logw, &mut out);
        if let Some(bias) = out.last_mut() {
            *bias = 0.0;
        }
    }
    Ok(out)
}
