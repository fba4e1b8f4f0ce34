//! `rosenblatt experiment committee`: the online perceptron and Winnow on the same committee
//! streams (one pass each), mistakes against the number of experts p, next to the
//! perceptron's bound p * k. The lecture notes claim Winnow's mistakes grow far more slowly
//! with p; this measures whether that holds.

use serde::Serialize;

use crate::algo::{fitter, Backends, Problem};
use crate::backend::cpu::CpuBackend;
use crate::data::synth::committee;
use crate::error::Result;
use crate::params::{Algo, TrainParams};

/// One row of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct CommitteeRow {
    /// Experts.
    pub p: usize,
    /// Panel size.
    pub k: usize,
    /// Examples in the stream.
    pub n: usize,
    /// Online perceptron mistakes in one pass.
    pub perceptron_mistakes: u64,
    /// Winnow mistakes in one pass.
    pub winnow_mistakes: u64,
    /// The perceptron's Novikoff bound for this problem, p * k (with the bias: (p + 1) * k).
    pub perceptron_bound: usize,
}

/// Runs one pass of each algorithm over a committee stream of `n` examples for each p.
/// `eta` is Winnow's learning rate (the perceptron's is 1).
pub fn committee_experiment(
    ps: &[usize],
    k: usize,
    n: usize,
    eta: f32,
    seed: u64,
) -> Result<Vec<CommitteeRow>> {
    ps.iter()
        .map(|&p| {
            let (ds, _) = committee(n, p, k, seed ^ p as u64)?;
            // One pass over the stream in its order: the online setting of the mistake bounds.
            let base = TrainParams::default().epochs(1).shuffle(false);
            let mistakes = |params: TrainParams| -> Result<u64> {
                let params = params.validate()?;
                let pb = Problem::new(&ds, &params)?;
                let cpu = CpuBackend::new();
                let backends = Backends {
                    primary: &cpu,
                    fallback: None,
                };
                let fitted = fitter(&params)(&pb, &params, &backends, &mut ())?;
                Ok(fitted.stats.iter().map(|e| e.mistakes).sum())
            };
            let perceptron_mistakes = mistakes(base.clone().algo(Algo::Online))?;
            let winnow_mistakes = mistakes(base.algo(Algo::Winnow).lr(eta))?;
            Ok(CommitteeRow {
                p,
                k,
                n,
                perceptron_mistakes,
                winnow_mistakes,
                perceptron_bound: (p + 1) * k,
            })
        })
        .collect()
}
