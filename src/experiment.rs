//! `rosenblatt experiment committee`: the online perceptron and Winnow on the same committee
//! streams (one pass each), mistakes against the number of experts p, next to the
//! perceptron's bound p * k. The lecture notes claim Winnow's mistakes grow far more slowly
//! with p; this measures whether that holds.

use serde::Serialize;

use crate::algo::{online, winnow};
use crate::backend::{HeadRule, TrainView};
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
            let y = ds.binary_signs()?;
            let view = TrainView {
                x: &ds.x,
                y: &y,
                n,
                d: p,
                bias: 1.0,
                heads: 1,
            };
            // One pass over the stream in its order: the online setting of the mistake bounds.
            let base = TrainParams::default().epochs(1).shuffle(false);
            let pp = base.clone().algo(Algo::Online).validate()?;
            let mut w = vec![0f32; p + 1];
            let per = online::train(
                view,
                &pp,
                HeadRule::Binary,
                Default::default(),
                &mut w,
                &mut (),
            )?;
            let wp = base.algo(Algo::Winnow).lr(eta).validate()?;
            let wv = TrainView { bias: 0.0, ..view };
            let (_, ws, _) = winnow::train(wv, &wp, &mut ());
            Ok(CommitteeRow {
                p,
                k,
                n,
                perceptron_mistakes: per.stats.iter().map(|e| e.mistakes).sum(),
                winnow_mistakes: ws.iter().map(|e| e.mistakes).sum(),
                perceptron_bound: (p + 1) * k,
            })
        })
        .collect()
}
