//! What epochs did and when training stops: the epoch statistics, the stop rules' memory (the
//! host twin of `finalize`'s), the pocket and the average a backend keeps.

use serde::{Deserialize, Serialize};

use super::{BatchRule, Patience};

/// What a backend kept besides the current weights, when asked by [`BatchRule`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extras {
    /// The pocket, when kept and an epoch has run.
    pub pocket: Option<Pocket>,
    /// Sum of the weights after each epoch run so far, and the number of those epochs.
    pub average: Option<(Vec<f32>, u64)>,
    /// The stop rules' memory (the best epoch among them).
    pub stop: StopState,
}

/// The weights the best epoch started with (for [`Keep::AveragePocket`](super::Keep::AveragePocket): the running sum
/// then, over `updates` epochs).
#[derive(Debug, Clone, PartialEq)]
pub struct Pocket {
    /// The weights (for a multiplicative update: the log-weights).
    pub w: Vec<f32>,
    /// The monitored figure of the best epoch.
    pub figure: f32,
    /// Epochs whose updates the weights include.
    pub updates: u64,
}

/// Why training stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// An epoch made no mistake.
    Converged,
    /// The update norm fell under the tolerance.
    Tolerance,
    /// The epoch limit was reached.
    MaxEpochs,
    /// The monitored figure stopped improving (the patience rule).
    Patience,
    /// The voted perceptron kept as many vectors as it may.
    MaxVectors,
}

impl StopReason {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::Tolerance => "tolerance",
            StopReason::MaxEpochs => "max_epochs",
            StopReason::Patience => "patience",
            StopReason::MaxVectors => "max_vectors",
        }
    }
}

/// What one epoch did, measured with the weights at the start of the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EpochStats {
    /// Points with y w^T x <= 0 (J1).
    pub mistakes: u64,
    /// Perceptron criterion J(w) = sum over mistakes of -y w^T x.
    pub criterion: f64,
    /// ||w_after - w_before||: for batch, ||eta * sum||.
    pub update_norm: f64,
    /// Held-out rows predicted wrong (batch: by the weights the epoch started with; online:
    /// by the model after the epoch), when there are held-out rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_mistakes: Option<u64>,
    /// The sum of the mistakes' row weights, when rows have weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<f64>,
    /// One-vs-rest: the training rows whose first highest head score is not their class (the
    /// rows the prediction rule gets wrong), where `mistakes` counts (row, head) errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong_rows: Option<u64>,
}

impl EpochStats {
    /// The figure the patience rule and the pocket watch, in f32 as the GPU keeps it:
    /// held-out mistakes when there are held-out rows, else the weighted training mistakes
    /// when rows have weights, else the training mistakes.
    pub fn monitored(&self) -> f32 {
        match (self.val_mistakes, self.weighted) {
            (Some(v), _) => v as f32,
            (None, Some(w)) => w as f32,
            (None, None) => self.mistakes as f32,
        }
    }
}

/// What the stop rules remember between epochs: the one home of the patience rule and the
/// best epoch on the host (the GPU keeps the same fields in its control word and applies the
/// same f32 arithmetic in `finalize`, shaders/batch_update.wgsl).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopState {
    /// Fewest monitored mistakes seen (infinity before the first epoch).
    pub best: f32,
    /// The epoch (1-based) that saw them; 0 before the first epoch.
    pub best_epoch: u32,
    /// The monitored figure at the last improvement by the patience rule's margin.
    pub reference: f32,
    /// Epochs since that improvement.
    pub wait: u32,
    /// Epochs recorded.
    pub epochs: u32,
}

impl Default for StopState {
    fn default() -> Self {
        StopState {
            best: f32::INFINITY,
            best_epoch: 0,
            reference: f32::INFINITY,
            wait: 0,
            epochs: 0,
        }
    }
}

impl StopState {
    /// Records epoch `e`: returns whether it is a new best (fewest monitored mistakes, the
    /// pocket's test) and whether training stops after it: [`BatchRule::stop`], else the
    /// patience rule.
    pub fn record(&mut self, rule: &BatchRule, e: &EpochStats) -> (bool, Option<StopReason>) {
        self.epochs += 1;
        let fig = e.monitored();
        let better = fig < self.best;
        if better {
            self.best = fig;
            self.best_epoch = self.epochs;
        }
        let p = rule.patience;
        if fig < self.reference * p.keep_fraction {
            self.reference = fig;
            self.wait = 0;
        } else {
            self.wait = self.wait.saturating_add(1);
        }
        let stop = rule
            .stop(e)
            .or_else(|| self.patience_ran_out(p).then_some(StopReason::Patience));
        (better, stop)
    }
}

impl StopState {
    /// The patience rule after an epoch is recorded: `p.epochs` epochs without improvement;
    /// while the fewest mistakes are at most a positive floor (nearly separated data, which may
    /// still converge), also as many epochs since the best as it took to reach it, so a run
    /// that is still finding new lows goes on and one stuck on a plateau stops by twice the
    /// best epoch. The twin of `finalize`'s test in shaders/batch_update.wgsl.
    pub fn patience_ran_out(&self, p: Patience) -> bool {
        let near_separated = p.floor > 0.0 && self.best <= p.floor;
        p.epochs > 0
            && self.wait >= p.epochs
            && (!near_separated || self.epochs - self.best_epoch >= self.best_epoch)
    }
}

impl BatchRule {
    /// The stop decision after an epoch: no mistake (no update is applied), or an update
    /// (already applied) whose norm is under the tolerance.
    pub fn stop(&self, e: &EpochStats) -> Option<StopReason> {
        if e.mistakes == 0 {
            Some(StopReason::Converged)
        } else if (e.update_norm as f32) < self.tol {
            Some(StopReason::Tolerance)
        } else {
            None
        }
    }
}

/// What a call to [`Bound::batch_epochs`](super::Bound::batch_epochs) ran.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Epochs {
    /// One entry per epoch run.
    pub stats: Vec<EpochStats>,
    /// Why the last epoch stopped training, if it did.
    pub stop: Option<StopReason>,
}
