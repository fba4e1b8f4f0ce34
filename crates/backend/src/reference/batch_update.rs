//! Twins of the update and the stop (shaders/batch_update.wgsl): `apply`, `fold`,
//! `finalize`, and the state a resident data set keeps between epochs.

use super::super::{winnow_weights, BatchRule, EpochStats, Keep, StopReason, StopState, Update};
use super::Margins;

/// What a resident data set keeps between epochs (the GPU's `w`, `aux` and `ctl` buffers).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochState {
    /// The weights rows are scored with (for the multiplicative update: the Winnow weights).
    pub w: Vec<f32>,
    /// The pocket's candidate: what the epoch started with (the weights, the log-weights, or
    /// for [`Keep::AveragePocket`] the running sum), and the epochs it includes.
    pub prev: Vec<f32>,
    /// Epochs `prev` includes.
    pub prev_updates: u64,
    /// The pocket and the epochs it includes.
    pub pocket: Vec<f32>,
    /// Epochs the pocket includes.
    pub pocket_updates: u64,
    /// Sum of the weights after each epoch.
    pub average_sum: Vec<f32>,
    /// Epochs in the sum.
    pub updates: u64,
    /// Log-weights (multiplicative update).
    pub logw: Vec<f32>,
    /// The stop rules' memory (the GPU's control word).
    pub stop: StopState,
}

impl EpochState {
    /// Fresh state for `len` weights.
    pub fn new(len: usize) -> Self {
        EpochState {
            w: vec![0.0; len],
            prev: vec![0.0; len],
            prev_updates: 0,
            pocket: vec![0.0; len],
            pocket_updates: 0,
            average_sum: vec![0.0; len],
            updates: 0,
            logw: vec![0.0; len],
            stop: StopState::default(),
        }
    }

    /// The weights held-out rows are scored with: the running sum for
    /// [`Keep::AveragePocket`] once it holds an epoch, else the scored weights.
    pub fn held_out_weights(&self, rule: &BatchRule) -> &[f32] {
        if rule.keep == Keep::AveragePocket && self.updates > 0 {
            &self.average_sum
        } else {
            &self.w
        }
    }
}

/// Twin of `apply`: sums the partials in chunk order, w += eta * sum (multiplicative: the
/// log-weights), keeps the pocket's candidate (what the epoch started with) and the running
/// sum after the update. Returns the squared steps (the GPU's `sq`).
pub fn apply(partials: &[f32], rule: &BatchRule, st: &mut EpochState) -> Vec<f32> {
    let len = st.w.len();
    let mut sq = vec![0f32; len];
    let from_sum = rule.keep == Keep::AveragePocket && st.updates > 0;
    for j in 0..len {
        let mut s = 0f32;
        for part in partials.chunks_exact(len) {
            s += part[j];
        }
        if rule.keep.pocket() {
            st.prev[j] = if from_sum {
                st.average_sum[j]
            } else if rule.update == Update::Multiplicative {
                st.logw[j]
            } else {
                st.w[j]
            };
        }
        let step = rule.eta * s;
        match rule.update {
            Update::Multiplicative => st.logw[j] += step,
            Update::Additive => st.w[j] += step,
        }
        sq[j] = step * step;
        if rule.keep.average() {
            st.average_sum[j] += st.w[j];
        }
    }
    st.prev_updates = if from_sum { st.updates } else { 0 };
    if rule.keep.average() {
        st.updates += 1;
    }
    sq
}

/// Twin of `fold` (one process of a data-parallel run): the chunks of `partials` (each
/// `len` long) added in order into the first, the others zeroed.
pub fn fold(partials: &mut [f32], len: usize) {
    if len == 0 {
        return;
    }
    let (first, rest) = partials.split_at_mut(len.min(partials.len()));
    for part in rest.chunks_exact_mut(len) {
        for (t, v) in first.iter_mut().zip(part.iter_mut()) {
            *t += *v;
            *v = 0.0;
        }
    }
}

/// Twin of `finalize`: the epoch's statistics from what `margins` counted and the squared
/// steps; the Winnow weights from the log-weights; the stop rules ([`StopState::record`]);
/// and the pocket when the epoch is the best so far.
pub fn finalize(
    m: Margins,
    sq: &[f32],
    rule: &BatchRule,
    st: &mut EpochState,
) -> (EpochStats, Option<StopReason>) {
    let q: f32 = sq.iter().sum();
    if rule.update == Update::Multiplicative {
        winnow_weights(&st.logw, &mut st.w);
    }
    let e = EpochStats {
        mistakes: m.mistakes,
        criterion: m.criterion,
        update_norm: q.sqrt() as f64,
        val_mistakes: m.val_mistakes,
        weighted: m.weighted,
        wrong_rows: m.wrong_rows,
    };
    let (better, stop) = st.stop.record(rule, &e);
    if rule.keep.pocket() && better {
        st.pocket.copy_from_slice(&st.prev);
        st.pocket_updates = st.prev_updates;
    }
    (e, stop)
}
