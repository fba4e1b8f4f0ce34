//! Helpers for the tests that hold a backend to its twin (conformance, sparse, traffic,
//! coverage): integer data whose sums are exact, the batch rules to run, runs of epochs and
//! their comparison bit for bit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::gpu::GpuBackend;
use rosenblatt_backend::{
    Backend, BatchRule, EpochStats, Extras, HeadRule, Keep, TrainView, Update,
};

/// Whether `g` runs on OpenGL (Mesa llvmpipe in CI): each new pipeline compiles for seconds
/// there, one head per thread (`plan::GL_KT_CAP`), and no subgroups.
pub fn on_gl(g: &GpuBackend) -> bool {
    g.context().info.backend == wgpu::Backend::Gl
}

/// Integer features in [-2, 2] and labels for `heads` (±1 for one head, class indices
/// otherwise).
pub fn integer_set(n: usize, d: usize, heads: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = (0..n * d)
        .map(|_| rng.random_range(-2i32..=2) as f32)
        .collect();
    let y = (0..n)
        .map(|_| {
            if heads == 1 {
                if rng.random_bool(0.5) {
                    1.0
                } else {
                    -1.0
                }
            } else {
                rng.random_range(0..heads) as f32
            }
        })
        .collect();
    (x, y)
}

/// The batch rules a test runs for `heads` heads: each head rule (binary for one head;
/// one-vs-rest, all-heads and argmax multiclass otherwise, tau alternating 0 and 1) with each
/// of `keeps`, and for one head batch Winnow (a multiplicative update, eta 0.25).
pub fn rules(heads: usize, keeps: &[Keep]) -> Vec<BatchRule> {
    let head_rules: &[HeadRule] = if heads == 1 {
        &[HeadRule::Binary]
    } else {
        &[
            HeadRule::OneVsRest,
            HeadRule::MulticlassAll,
            HeadRule::MulticlassArgmax,
        ]
    };
    let mut out = Vec::new();
    for (i, &rule) in head_rules.iter().enumerate() {
        for &keep in keeps {
            out.push(BatchRule {
                rule,
                keep,
                tau: (i % 2) as f32,
                ..BatchRule::new(1.0, 0.0)
            });
        }
    }
    if heads == 1 {
        out.push(BatchRule {
            update: Update::Multiplicative,
            eta: 0.25,
            ..BatchRule::new(1.0, 0.0)
        });
    }
    out
}

/// A run of epochs: each epoch's stats, the weights, the scores of the rows and the extras.
pub type Run = (Vec<EpochStats>, Vec<f32>, Vec<f32>, Extras);

/// 6 epochs in two calls, then the scores and the extras.
pub fn run(b: &dyn Backend, v: TrainView<'_>, rule: &BatchRule) -> Run {
    run_for(b, v, rule, [4, 2])
}

/// Epochs in calls of `calls[0]` then `calls[1]` (unless the first stops), then the scores
/// and the extras.
pub fn run_for(b: &dyn Backend, v: TrainView<'_>, rule: &BatchRule, calls: [usize; 2]) -> Run {
    let mut bound = b.bind(v).unwrap();
    let mut w = vec![0f32; v.heads * (v.d + 1)];
    let first = bound.batch_epochs(&mut w, rule, calls[0]).unwrap();
    let mut stats = first.stats;
    if first.stop.is_none() {
        stats.extend(bound.batch_epochs(&mut w, rule, calls[1]).unwrap().stats);
    }
    let scores = bound.scores(&w).unwrap();
    (stats, w, scores, bound.extras().unwrap())
}

/// Two runs equal in every epoch's mistakes and wrongly predicted rows, the weights, the
/// scores, and the pocket and average.
pub fn assert_same_run(got: &Run, want: &Run, what: &str) {
    let m = |r: &Run| {
        r.0.iter()
            .map(|e| (e.mistakes, e.wrong_rows, e.val_mistakes))
            .collect::<Vec<_>>()
    };
    assert_eq!(m(got), m(want), "{what}: mistakes");
    assert_eq!(got.1, want.1, "{what}: weights");
    assert_eq!(got.2, want.2, "{what}: scores");
    assert_eq!(got.3, want.3, "{what}: pocket/average");
}

/// One process of a "data-parallel run" of one process: sums over processes are the
/// process's own values.
#[derive(Debug)]
pub struct Solo;

impl rosenblatt_backend::Reduce for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn sum_f32(&self, _: &mut [f32]) {}
    fn sum_f64(&self, _: &mut [f64]) {}
    fn max_f64(&self, v: f64) -> f64 {
        v
    }
    fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
        local.to_vec()
    }
    fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
        local.to_vec()
    }
}
