//! The batch perceptron: per epoch w += eta * sum of y*x over the mistakes, stopping when an
//! epoch has no mistake, when ||eta * sum|| < tol, or at the epoch limit. The epochs run on
//! whatever [`Bound`] it is given, several per call where the backend prefers it (the GPU
//! runs many epochs per submit and takes the stop decision itself).

use super::Progress;
use crate::backend::{BatchRule, Bound, EpochStats, HeadRule, StopReason};
use crate::error::Result;
use crate::params::Params;

/// The rule the backends apply for `params` with the per-row rule `head_rule`.
pub fn rule(params: &Params, head_rule: HeadRule) -> BatchRule {
    BatchRule {
        tau: params.margin_threshold,
        rule: head_rule,
        pocket: params.algo == crate::params::Algo::Pocket,
        average: params.algo == crate::params::Algo::Averaged,
        multiplicative: params.algo == crate::params::Algo::Winnow,
        ..BatchRule::new(params.lr, params.tol.unwrap_or(0.0))
    }
}

/// Continues training from `w` until a stop, appending to `stats` after every call to the
/// backend, so that on an error `w` and `stats` describe the last completed epoch and
/// training can resume elsewhere.
pub fn train(
    bound: &mut dyn Bound,
    params: &Params,
    rule: &BatchRule,
    w: &mut [f32],
    stats: &mut Vec<EpochStats>,
    epochs_per_call: usize,
    progress: &mut dyn Progress,
) -> Result<StopReason> {
    while stats.len() < params.epochs {
        let k = epochs_per_call.max(1).min(params.epochs - stats.len());
        let k = if progress.wants_snapshots() { 1 } else { k };
        let got = bound.batch_epochs(w, rule, k)?;
        stats.extend_from_slice(&got);
        if progress.wants_snapshots() {
            progress.snapshot(stats.len(), w);
        }
        let last = stats.last().copied().unwrap_or_default();
        progress.update(stats.len(), params.epochs, last.mistakes);
        if let Some(reason) = rule.stop(&last) {
            return Ok(reason);
        }
    }
    Ok(StopReason::MaxEpochs)
}
