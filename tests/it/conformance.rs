//! Backend conformance: the fast CPU backend and the GPU (when an adapter is present) against
//! the plain reference twins of the WGSL entry points (crates/backend/src/reference/). On integer
//! data every sum is exact, so all three must agree bit for bit, for every per-row rule,
//! update and kept extra, at sizes that break assumptions; on float data they agree within
//! tolerance. Kernel scores likewise.

use crate::common;

use approx::assert_relative_eq;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::gpu::GpuBackend;
use rosenblatt_backend::reference::ReferenceBackend;
use rosenblatt_backend::{
    Backend, BatchRule, DataView, EpochStats, HeadRule, Keep, Kernel, RowOutcome, Storage,
    TrainView, Update,
};
// (Patience and ValView are imported where used.)

use common::gpu;
use common::twins::{self, assert_same_run, integer_set, run, run_for, Run, Solo};

/// Whether the GPU under test runs on OpenGL (Mesa llvmpipe in CI). Two things differ there:
/// each new pipeline compiles for seconds, so the GL pass takes a subset of the sizes (see
/// [`tier`]); and Mesa's GL path rounds Winnow's scores differently from its SPIR-V path
/// (seen: one row of 1,000 flipped in the third epoch, f16 rows). Winnow's weights are exp
/// values, so its scores are inexact sums that a compiler may round otherwise (fused
/// multiply-adds, another exp); on integer data every product and sum is exact, and those
/// stay bit for bit (see [`assert_winnow_close`]).
fn on_gl() -> bool {
    gpu().is_some_and(twins::on_gl)
}

/// Tier 1's or tier 2's share of `all`: tier 1 takes the entries whose index is in `first`,
/// tier 2 (`tier2`) the others, so the two tiers together run what the test always ran. On
/// OpenGL both take only entries at `gl`: each size compiles its own pipelines there, for
/// about half a minute a shape (llvmpipe's GL path: 70% of it in LLVM, a quarter in coroutine
/// frames, measured with perf; lavapipe compiles the same shape in a second), so GL runs one
/// or two sizes of each test, chosen so that every rule family, storage, head blocks (K > 1
/// on one head per thread), held-out rows, row weights and thousands of rows still run there.
fn tier<T: Copy>(all: &[T], gl: &[usize], first: &[usize], tier2: bool) -> Vec<T> {
    let idx: Vec<usize> = if on_gl() {
        gl.to_vec()
    } else {
        (0..all.len()).collect()
    };
    idx.into_iter()
        .filter(|i| first.contains(i) != tier2)
        .map(|i| all[i])
        .collect()
}

/// Whether a run of `rule` on backend `name` must equal the reference bit for bit: always,
/// but for Winnow on OpenGL.
fn exact(name: &str, rule: &BatchRule) -> bool {
    name == "cpu" || rule.update == Update::Additive || !on_gl()
}

/// Winnow's training mistakes where the GPU rounds its exp-weighted scores otherwise: the
/// first epoch (every weight exp(0) = 1, so exact) equal, and the total within 2%.
fn assert_winnow_close(got: &Run, want: &Run, what: &str) {
    let m = |r: &Run| r.0.iter().map(|e| e.mistakes).collect::<Vec<_>>();
    let (g, w) = (m(got), m(want));
    assert_eq!(g.first(), w.first(), "{what}: first epoch's mistakes");
    let (tg, tw) = (g.iter().sum::<u64>() as f64, w.iter().sum::<u64>() as f64);
    assert!(
        (tg - tw).abs() <= 0.02 * tw,
        "{what}: mistakes {g:?} against {w:?}"
    );
}

/// The GPU variants held to the reference besides the default (the register pass with the
/// device's grid, lane sums by subgroups on a GPU that has them, else by the workgroup
/// tree): each lane sum forced (where the adapter has subgroups, so that both run), the
/// two-kernel path forced, and persistent grids of one and three workgroups (results do not
/// depend on it), the latter with one head per thread (head blocks sharing each row).
fn gpu_variants() -> Vec<(&'static str, GpuBackend)> {
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    let Some(base) = gpu() else {
        return Vec::new();
    };
    // OpenGL (Mesa llvmpipe in CI) compiles each pipeline for seconds, and the variants
    // differ only in host planning and in subgroup use that GL lacks: there the default and
    // the two-kernel path (which GL takes for rows too wide for one head per thread) are
    // held to the reference, the other variants on Vulkan.
    let gl = twins::on_gl(base);
    let subgroups = base.context().features.contains(wgpu::Features::SUBGROUP);
    let mut v = vec![
        (
            "gpu two kernels",
            ResidentOptions {
                two_kernels: true,
                ..Default::default()
            },
        ),
        (
            "gpu grid 1",
            ResidentOptions {
                workgroups: Some(1),
                ..Default::default()
            },
        ),
        (
            "gpu grid 3, a head a thread",
            ResidentOptions {
                workgroups: Some(3),
                heads_per_thread: Some(1),
                ..Default::default()
            },
        ),
    ];
    if gl {
        v.truncate(1);
    }
    if subgroups {
        // The lane sums the default does not use: the tree on a GPU with subgroups, the
        // subgroups on a software adapter (whose default is the tree).
        let software = base.context().info.device_type == wgpu::DeviceType::Cpu;
        let (name, on) = if software {
            ("gpu subgroups", true)
        } else {
            ("gpu tree", false)
        };
        v.push((
            name,
            ResidentOptions {
                subgroups: Some(on),
                ..Default::default()
            },
        ));
    }
    v.into_iter()
        .filter_map(|(name, resident)| {
            let opts = GpuOptions {
                resident,
                ..Default::default()
            };
            GpuBackend::new(&opts).ok().map(|g| (name, g))
        })
        .collect()
}

/// The backends held to the reference: the fast CPU, and the GPU when there is one (as it
/// chooses, and in every variant of [`gpu_variants`]). A test opens them once and they go
/// with it (the heap trimmed after them): Mesa's software adapter keeps memory for every
/// dispatch while a device lives, which held for the whole binary made most of its peak.
struct UnderTest {
    variants: Vec<(&'static str, GpuBackend)>,
}

impl UnderTest {
    fn open() -> UnderTest {
        UnderTest {
            variants: gpu_variants(),
        }
    }

    fn list(&self) -> Vec<(&'static str, &dyn Backend)> {
        static CPU: CpuBackend = CpuBackend;
        let mut v: Vec<(&str, &dyn Backend)> = vec![("cpu", &CPU)];
        if let Some(g) = gpu() {
            v.push(("gpu", g));
        }
        for (name, g) in &self.variants {
            v.push((name, g));
        }
        v
    }
}

impl Drop for UnderTest {
    fn drop(&mut self) {
        self.variants.clear();
        common::trim_heap();
    }
}

/// The GPU when it has subgroups (says "skipped" where it has none).
fn gpu_with_subgroups() -> Option<&'static GpuBackend> {
    let g = gpu()?;
    if !g.context().features.contains(wgpu::Features::SUBGROUP) {
        eprintln!("skipped: {} has no subgroups", g.device());
        return None;
    }
    Some(g)
}

/// The batch rules of [`twins::rules`] with nothing, the pocket or the average kept.
fn rules(heads: usize) -> Vec<BatchRule> {
    twins::rules(heads, &[Keep::Nothing, Keep::Pocket, Keep::Average])
}

#[test]
fn batch_epochs_equal_the_reference_bit_for_bit_on_integer_data() {
    batch_epochs_equal(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_batch_epochs_equal_the_reference_bit_for_bit_on_integer_data() {
    batch_epochs_equal(true);
}

fn batch_epochs_equal(tier2: bool) {
    let under = UnderTest::open();
    let all = [
        (1, 1, 1),
        (63, 3, 1),
        (255, 1, 1),
        (257, 257, 1),
        (1000, 7, 1),
        (200, 5, 3),
        (63, 1, 4),
        (257, 9, 10),
    ];
    for (n, d, heads) in tier(&all, &[3, 7], &[1, 5], tier2) {
        let (x, y) = integer_set(n, d, heads, (n * 31 + d) as u64);
        let v = TrainView::new(&x, &y, n, d, 1.0, heads);
        for rule in rules(heads) {
            let want = run(&ReferenceBackend, v, &rule);
            for (name, b) in under.list() {
                let got = run(b, v, &rule);
                let what = format!("{name} n={n} d={d} K={heads} {rule:?}");
                if !exact(name, &rule) {
                    assert_winnow_close(&got, &want, &what);
                    continue;
                }
                let m = |r: &Run| {
                    r.0.iter()
                        .map(|e| (e.mistakes, e.wrong_rows))
                        .collect::<Vec<_>>()
                };
                assert_eq!(m(&got), m(&want), "{what}: mistakes");
                assert_eq!(got.1, want.1, "{what}: weights");
                assert_eq!(got.3, want.3, "{what}: pocket/average");
                if rule.update == Update::Additive {
                    assert_eq!(got.2, want.2, "{what}: scores");
                } else {
                    // Winnow scores rows with exp(log-weights): not integers, so the sums
                    // depend on their order. The log-weights above are exact.
                    for (a, b) in got.2.iter().zip(&want.2) {
                        assert_relative_eq!(*a, *b, epsilon = 1e-4, max_relative = 1e-5);
                    }
                }
            }
        }
    }
}

/// One-vs-rest counts (row, head) errors as mistakes and, apart, the rows predicted wrong:
/// an epoch's `wrong_rows` are the rows whose first highest score, by the weights the epoch
/// starts with, is not their class, on every backend and path (register pass with one head
/// block or several, two-kernel path).
#[test]
fn one_vs_rest_counts_the_rows_predicted_wrong_apart() {
    one_vs_rest_counts(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_one_vs_rest_counts_the_rows_predicted_wrong_apart() {
    one_vs_rest_counts(true);
}

fn one_vs_rest_counts(tier2: bool) {
    let under = UnderTest::open();
    let all = [(300, 5, 3), (257, 9, 10), (100, 33, 40), (200, 700, 12)];
    for (n, d, heads) in tier(&all, &[0, 1, 2, 3], &[0], tier2) {
        let (x, y) = integer_set(n, d, heads, (n * 7 + d) as u64);
        let v = TrainView::new(&x, &y, n, d, 1.0, heads);
        let rule = BatchRule {
            rule: HeadRule::OneVsRest,
            ..BatchRule::new(1.0, 0.0)
        };
        for (name, b) in under.list() {
            let what = format!("{name} n={n} d={d} K={heads}");
            let mut bound = b.bind(v).unwrap();
            let mut w = vec![0f32; heads * (d + 1)];
            let mut stats = bound.batch_epochs(&mut w, &rule, 3).unwrap().stats;
            let scores = bound.scores(&w).unwrap();
            let predicted_wrong = (0..n)
                .filter(|&i| {
                    let s = &scores[i * heads..(i + 1) * heads];
                    let top = (0..heads).fold(0, |t, k| if s[k] > s[t] { k } else { t });
                    top != y[i] as usize
                })
                .count() as u64;
            stats.extend(bound.batch_epochs(&mut w, &rule, 1).unwrap().stats);
            let last = stats.last().unwrap();
            assert_eq!(last.wrong_rows, Some(predicted_wrong), "{what}");
            assert!(last.mistakes >= predicted_wrong, "{what}");
            // The first epoch starts at w = 0: every score ties at 0, class 0 is predicted.
            let not_zero = y.iter().filter(|&&c| c != 0.0).count() as u64;
            assert_eq!(stats[0].wrong_rows, Some(not_zero), "{what}: first epoch");
        }
    }
    if tier2 {
        return;
    }
    // Other rules have no separate row count.
    let (x, y) = integer_set(50, 3, 3, 1);
    let v = TrainView::new(&x, &y, 50, 3, 1.0, 3);
    let rule = BatchRule {
        rule: HeadRule::MulticlassArgmax,
        ..BatchRule::new(1.0, 0.0)
    };
    for (name, b) in under.list() {
        let mut w = vec![0f32; 3 * 4];
        let stats = b
            .bind(v)
            .unwrap()
            .batch_epochs(&mut w, &rule, 2)
            .unwrap()
            .stats;
        assert!(stats.iter().all(|e| e.wrong_rows.is_none()), "{name}");
    }
}

#[test]
fn many_chunks_reduce_in_a_tree_and_still_equal_the_reference() {
    many_chunks(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_many_chunks_reduce_in_a_tree_and_still_equal_the_reference() {
    many_chunks(true);
}

fn many_chunks(tier2: bool) {
    let under = UnderTest::open();
    // Thousands of rows in many chunks (the two-kernel path) or workgroups (the register
    // pass), whose partials `apply` sums in a fixed order; n not a multiple of anything,
    // d = 1, 2 and 3, one head and several.
    let all = [(20_011, 1, 1), (9_001, 3, 1), (12_345, 2, 5), (4_097, 1, 3)];
    for (n, d, heads) in tier(&all, &[2], &[3], tier2) {
        let (x, y) = integer_set(n, d, heads, (n + d) as u64);
        let v = TrainView::new(&x, &y, n, d, 1.0, heads);
        let rule = BatchRule {
            rule: if heads == 1 {
                HeadRule::Binary
            } else {
                HeadRule::MulticlassArgmax
            },
            keep: Keep::Pocket,
            ..BatchRule::new(1.0, 0.0)
        };
        let want = run(&ReferenceBackend, v, &rule);
        for (name, b) in under.list() {
            let got = run(b, v, &rule);
            let what = format!("{name} n={n} d={d} K={heads}");
            let m = |r: &Run| r.0.iter().map(|e| e.mistakes).collect::<Vec<_>>();
            assert_eq!(m(&got), m(&want), "{what}: mistakes");
            assert_eq!(got.1, want.1, "{what}: weights");
            assert_eq!(got.3, want.3, "{what}: pocket");
        }
    }
}

#[test]
fn row_weights_held_out_rows_and_patience_equal_the_reference_bit_for_bit() {
    row_weights_held_out_rows_and_patience(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_row_weights_held_out_rows_and_patience_equal_the_reference_bit_for_bit() {
    row_weights_held_out_rows_and_patience(true);
}

fn row_weights_held_out_rows_and_patience(tier2: bool) {
    let under = UnderTest::open();
    use rosenblatt_backend::{Patience, ValView};
    let all = [
        (1, 1, 1, 1),
        (63, 3, 1, 17),
        (257, 5, 1, 255),
        (300, 4, 3, 40),
        (63, 1, 4, 63),
        (200, 9, 10, 257),
    ];
    for (n, d, heads, nv) in tier(&all, &[2, 5], &[1, 3], tier2) {
        let (x, y) = integer_set(n, d, heads, (n * 7 + d) as u64);
        let (xv, yv) = integer_set(nv, d, heads, (nv * 3 + d) as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
        let sw: Vec<f32> = (0..n).map(|_| rng.random_range(0..4) as f32).collect();
        let v = TrainView {
            sw: Some(&sw),
            val: Some(ValView {
                x: (&xv).into(),
                y: &yv,
                n: nv,
            }),
            ..TrainView::new(&x, &y, n, d, 1.0, heads)
        };
        let head_rule = if heads == 1 {
            HeadRule::Binary
        } else {
            HeadRule::MulticlassArgmax
        };
        for (keep, update) in [
            (Keep::Nothing, Update::Additive),
            (Keep::Pocket, Update::Additive),
            (Keep::AveragePocket, Update::Additive),
            (Keep::Pocket, Update::Multiplicative),
        ] {
            if update == Update::Multiplicative && heads > 1 {
                continue;
            }
            let rule = BatchRule {
                rule: head_rule,
                keep,
                update,
                eta: if update == Update::Multiplicative {
                    0.25
                } else {
                    1.0
                },
                patience: Patience {
                    epochs: 2,
                    keep_fraction: 0.9,
                    floor: 1.0,
                },
                ..BatchRule::new(1.0, 0.0)
            };
            let want = run_for(&ReferenceBackend, v, &rule, [5, 9]);
            for (name, b) in under.list() {
                let got = run_for(b, v, &rule, [5, 9]);
                let what = format!("{name} n={n} d={d} K={heads} held-out {nv} {rule:?}");
                if !exact(name, &rule) {
                    assert_winnow_close(&got, &want, &what);
                    continue;
                }
                let m = |r: &Run| {
                    r.0.iter()
                        .map(|e| (e.mistakes, e.val_mistakes))
                        .collect::<Vec<_>>()
                };
                assert_eq!(m(&got), m(&want), "{what}: mistakes");
                assert_eq!(got.3, want.3, "{what}: pocket, average, stop state");
                if update == Update::Additive {
                    assert_eq!(got.1, want.1, "{what}: weights");
                    assert_eq!(got.2, want.2, "{what}: scores");
                }
            }
        }
    }
}

/// One-vs-rest with class weights (scikit-learn's weighting: a row of class c weighs its row
/// weight times c's factor in head c, its row weight elsewhere): every backend equals the
/// reference bit for bit, in the register pass and the row-per-thread path, and the factors
/// change the run (the test can fail).
#[test]
fn one_vs_rest_class_factors_equal_the_reference_bit_for_bit() {
    one_vs_rest_class_factors(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_one_vs_rest_class_factors_equal_the_reference_bit_for_bit() {
    one_vs_rest_class_factors(true);
}

fn one_vs_rest_class_factors(tier2: bool) {
    let under = UnderTest::open();
    use rosenblatt_backend::Patience;
    let all = [(300, 4, 3), (257, 9, 10), (63, 2, 4)];
    for (n, d, heads) in tier(&all, &[0, 1], &[0], tier2) {
        let (x, y) = integer_set(n, d, heads, (n * 5 + d) as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(d as u64);
        let sw: Vec<f32> = (0..n).map(|_| rng.random_range(0..3) as f32).collect();
        let own: Vec<f32> = (0..heads).map(|k| [4.0, 0.0, 1.0, 2.0][k % 4]).collect();
        let v = TrainView {
            sw: Some(&sw),
            own: Some(&own),
            ..TrainView::new(&x, &y, n, d, 1.0, heads)
        };
        let plain = TrainView { own: None, ..v };
        for keep in [Keep::Nothing, Keep::Pocket, Keep::AveragePocket] {
            let rule = BatchRule {
                rule: HeadRule::OneVsRest,
                keep,
                patience: Patience {
                    epochs: 3,
                    keep_fraction: 0.95,
                    floor: 0.0,
                },
                ..BatchRule::new(1.0, 0.0)
            };
            let want = run(&ReferenceBackend, v, &rule);
            let without = run(&ReferenceBackend, plain, &rule);
            assert_ne!(
                want.1, without.1,
                "n={n} K={heads}: the factors change nothing"
            );
            for (name, b) in under.list() {
                let got = run(b, v, &rule);
                let what = format!("{name} n={n} d={d} K={heads} {keep:?}");
                let m = |r: &Run| {
                    r.0.iter()
                        .map(|e| (e.mistakes, e.weighted))
                        .collect::<Vec<_>>()
                };
                assert_eq!(m(&got), m(&want), "{what}: mistakes and their weights");
                assert_eq!(got.1, want.1, "{what}: weights");
                assert_eq!(got.3, want.3, "{what}: pocket, average, stop state");
            }
        }
    }
}

#[test]
fn batch_epochs_agree_with_the_reference_on_float_data() {
    let under = UnderTest::open();
    let (n, d) = (500, 33);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let x: Vec<f32> = (0..n * d).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| {
            if x[i * d] + 0.3 * x[i * d + 1] > 0.05 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let v = TrainView::new(&x, &y, n, d, 1.0, 1);
    let rule = BatchRule::new(0.5, 0.0);
    let mut rb = ReferenceBackend.bind(v).unwrap();
    let mut want = vec![0f32; d + 1];
    rb.batch_epochs(&mut want, &rule, 1).unwrap();
    for (name, b) in under.list() {
        let mut bound = b.bind(v).unwrap();
        let mut w = vec![0f32; d + 1];
        bound.batch_epochs(&mut w, &rule, 1).unwrap();
        for (a, b) in w.iter().zip(&want) {
            assert_relative_eq!(*a, *b, epsilon = 1e-4, max_relative = 1e-4);
        }
        let s = b.scores(v.data(), &w).unwrap();
        let r = ReferenceBackend.scores(v.data(), &w).unwrap();
        for (a, b) in s.iter().zip(&r) {
            assert_relative_eq!(*a, *b, epsilon = 1e-4, max_relative = 1e-4);
        }
        let _ = name;
    }
}

#[test]
fn kernel_scores_equal_the_reference() {
    let under = UnderTest::open();
    let (n, d) = (300, 5);
    let (x, _) = integer_set(n, d, 1, 9);
    let view = DataView {
        x: (&x).into(),
        n,
        d,
        bias: 1.0,
    };
    let idx: Vec<u32> = (0..n as u32).filter(|i| i % 3 != 1).collect();
    let coef: Vec<f32> = idx.iter().map(|i| (*i % 5) as f32 - 2.0).collect();
    let kernels = [
        Kernel::Linear,
        Kernel::Poly {
            degree: 2,
            gamma: 1.0,
            coef0: 1.0,
        },
        Kernel::Rbf { gamma: 0.25 },
    ];
    for kernel in kernels {
        let want = ReferenceBackend
            .kernel_scores(view, view, &idx, &coef, &kernel)
            .unwrap();
        for (name, b) in under.list() {
            // Bound once, scored twice with different supports: the resident path.
            let mut bound = b.bind_dual(view, None).unwrap();
            let got = bound.kscores(&idx, &coef, &kernel).unwrap();
            let again = bound.kscores(&idx[..10], &coef[..10], &kernel).unwrap();
            let want10 = ReferenceBackend
                .kernel_scores(view, view, &idx[..10], &coef[..10], &kernel)
                .unwrap();
            if matches!(kernel, Kernel::Rbf { .. }) {
                for (a, b) in got.iter().zip(&want).chain(again.iter().zip(&want10)) {
                    assert_relative_eq!(*a, *b, epsilon = 1e-3, max_relative = 1e-5);
                }
            } else {
                assert_eq!(got, want, "{name} {kernel:?}");
                assert_eq!(again, want10, "{name} {kernel:?} second call");
            }
        }
    }
}

/// Values `storage` holds exactly, small enough that every sum stays exact: u8 0..=3, i8
/// -2..=2, f16 halves in [-2, 2], f32 as i8.
fn storage_set(
    storage: Storage,
    n: usize,
    d: usize,
    heads: usize,
    seed: u64,
) -> (Vec<f32>, Vec<f32>) {
    let (mut x, y) = integer_set(n, d, heads, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    for v in x.iter_mut() {
        *v = match storage {
            Storage::U8 => (*v + 2.0).min(3.0),
            Storage::F16 => *v * 0.5 + if rng.random_bool(0.5) { 0.5 } else { 0.0 },
            Storage::I8 | Storage::F32 => *v,
        };
    }
    (x, y)
}

#[test]
fn every_storage_gives_the_f32_results_bit_for_bit() {
    every_storage(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_every_storage_gives_the_f32_results_bit_for_bit() {
    every_storage(true);
}

fn every_storage(tier2: bool) {
    let under = UnderTest::open();
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    use rosenblatt_backend::{FeatureBuf, ValView};
    // A GPU whose bindings hold 1 KiB, so packed X is split into many segments whose rows do
    // not start on a word boundary.
    let split = gpu().and_then(|_| {
        GpuBackend::new(&GpuOptions {
            resident: ResidentOptions {
                max_binding: Some(1024),
                epochs_per_submit: Some(3),
                ..Default::default()
            },
            ..Default::default()
        })
        .ok()
    });
    for (si, storage) in [Storage::U8, Storage::I8, Storage::F16]
        .into_iter()
        .enumerate()
    {
        // d = 1, 3, 7 and 17 put rows at every offset within a packed word.
        let all = [
            (63, 1, 1, 0),
            (257, 7, 1, 30),
            (200, 3, 4, 0),
            (301, 17, 10, 41),
            (1000, 5, 1, 0),
            // K = 2 and K = MAX_HEADS (64), the ends of the head counts the GPU takes.
            (90, 9, 2, 20),
            (130, 2, 64, 0),
        ];
        // On OpenGL each storage takes one of the two sizes, in turn.
        for (n, d, heads, nv) in tier(&all, &[[3, 4][si % 2]], &[1], tier2) {
            let seed = (n * 7 + d * 3 + heads) as u64;
            let (x, y) = storage_set(storage, n, d, heads, seed);
            let (xv, yv) = storage_set(storage, nv, d, heads, seed + 1);
            let pack = |x: &[f32]| FeatureBuf::pack(x, storage).unwrap();
            let (px, pv) = (pack(&x), pack(&xv));
            let val = |x| (nv > 0).then_some(ValView { x, y: &yv, n: nv });
            let f32_view = TrainView {
                val: val((&xv).into()),
                ..TrainView::new(&x, &y, n, d, 1.0, heads)
            };
            let packed_view = TrainView {
                val: val(pv.view().into()),
                ..TrainView::new(px.view(), &y, n, d, 1.0, heads)
            };
            assert_eq!(packed_view.x.storage(), storage);
            let mut backends = under.list();
            // The split puts rows at odd offsets within the packed words; at K = 64 a segment
            // is cut by its 64 outputs a row (a few rows a segment), which packs nothing new
            // and on a software adapter took two thirds of this test's time.
            if let (Some(s), true) = (&split, heads < 64) {
                backends.push(("gpu split", s));
            }
            for rule in rules(heads).into_iter().take(4) {
                let want = run(&ReferenceBackend, f32_view, &rule);
                let packed_ref = run(&ReferenceBackend, packed_view, &rule);
                assert_eq!(packed_ref.1, want.1, "reference on {storage:?}");
                for (name, b) in &backends {
                    let got = run(*b, packed_view, &rule);
                    let what = format!("{name} {storage:?} n={n} d={d} K={heads} {rule:?}");
                    if !exact(name, &rule) {
                        assert_winnow_close(&got, &want, &what);
                        continue;
                    }
                    let m = |r: &Run| {
                        r.0.iter()
                            .map(|e| (e.mistakes, e.val_mistakes))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(m(&got), m(&want), "{what}: mistakes");
                    assert_eq!(got.1, want.1, "{what}: weights");
                    assert_eq!(got.3, want.3, "{what}: pocket/average");
                    if rule.update == Update::Additive {
                        assert_eq!(got.2, want.2, "{what}: scores");
                    }
                }
            }
        }
    }
}

#[test]
fn one_workgroup_over_thousands_of_rows_still_equals_the_reference() {
    // One workgroup of the register pass over every row: on Mesa's software adapters a shader
    // invocation stops every loop after 65,535 iterations in all, which 2,500 rows at K = 10
    // (about 36 each) pass; the plan splits such runs there (plan::software_steps), and a real
    // GPU takes them whole. Either way the sums equal the reference.
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    let Some(_) = gpu() else {
        return;
    };
    let one = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            workgroups: Some(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let (n, d, heads) = (2_500, 784, 10);
    let (x, y) = integer_set(n, d, heads, 77);
    let v = TrainView::new(&x, &y, n, d, 1.0, heads);
    let rule = BatchRule {
        rule: HeadRule::MulticlassArgmax,
        ..BatchRule::new(1.0, 0.0)
    };
    let want = run_for(&ReferenceBackend, v, &rule, [2, 1]);
    let got = run_for(&one, v, &rule, [2, 1]);
    let m = |r: &Run| r.0.iter().map(|e| e.mistakes).collect::<Vec<_>>();
    assert_eq!(m(&got), m(&want));
    assert_eq!(got.1, want.1);
    assert_eq!(got.2, want.2);
}

#[test]
fn a_data_parallel_process_folds_its_partials_on_the_device_and_equals_the_reference() {
    data_parallel_fold(false);
}

#[test]
#[ignore = "tier 2: the sizes tier 1 leaves"]
fn tier2_a_data_parallel_process_folds_its_partials_on_the_device_and_equals_the_reference() {
    data_parallel_fold(true);
}

fn data_parallel_fold(tier2: bool) {
    // The GPU bound of one process of a data-parallel run sums its chunks' partials with
    // `fold` (twin: reference::fold) and reads back K (d + 1) sums: with many workgroups,
    // one head and several, its epochs equal the reference's bit for bit on integer data.
    let Some(g) = gpu() else { return };
    let all = [(20_011, 3, 1), (9_001, 5, 4), (257, 9, 10)];
    for (n, d, heads) in tier(&all, &[2], &[2], tier2) {
        let (x, y) = integer_set(n, d, heads, (n * 7 + d) as u64);
        let v = TrainView::new(&x, &y, n, d, 1.0, heads);
        for rule in rules(heads)
            .into_iter()
            .filter(|r| r.update == Update::Additive)
        {
            let want = run(&ReferenceBackend, v, &rule);
            let mut bound = g.bind_reduced(v, &Solo).unwrap();
            let mut w = vec![0f32; heads * (d + 1)];
            let mut stats = Vec::new();
            for _ in 0..6 {
                let e = bound.batch_epochs(&mut w, &rule, 1).unwrap();
                stats.extend(e.stats);
                if e.stop.is_some() {
                    break;
                }
            }
            let what = format!("n={n} d={d} K={heads} {rule:?}");
            let m = |s: &[EpochStats]| s.iter().map(|e| e.mistakes).collect::<Vec<_>>();
            assert_eq!(m(&stats), m(&want.0), "{what}: mistakes");
            assert_eq!(w, want.1, "{what}: weights");
            assert_eq!(bound.extras().unwrap(), want.3, "{what}: pocket/average");
        }
    }
}

#[test]
fn the_fold_twin_adds_the_chunks_in_order_into_the_first() {
    let mut p = vec![1.0, 2.0, 10.0, 20.0, 100.0, 200.0];
    rosenblatt_backend::reference::fold(&mut p, 2);
    assert_eq!(p, [111.0, 222.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
#[ignore = "tier 2: every size and setting (tier 1: tests/it/coverage.rs)"]
fn tier2_rows_in_flight_equal_the_reference_with_one_two_and_four_rows_a_thread() {
    // The register pass with subgroups where a row's lanes fit one subgroup: each thread
    // loads 1, 2 or 4 rows before it uses the first and every lane applies the rule; with
    // naga's full checks (software adapters' default) and without its loop counters (a
    // GPU's). Row weights and held-out rows included; the plan must say rows are in flight.
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions, ShaderChecks};
    use rosenblatt_backend::ValView;
    if gpu_with_subgroups().is_none() {
        return;
    }
    let all = [
        (1000, 7, 1, 37),
        (257, 9, 10, 63),
        (63, 3, 1, 5),
        (130, 20, 3, 11),
    ];
    for (checks, rt) in [
        (ShaderChecks::Full, 1),
        (ShaderChecks::Full, 2),
        (ShaderChecks::Full, 4),
        (ShaderChecks::NoLoopCounters, 4),
    ] {
        {
            let g = GpuBackend::new(&GpuOptions {
                resident: ResidentOptions {
                    subgroups: Some(true),
                    rows_per_thread: Some(rt),
                    workgroups: Some(3),
                    ..Default::default()
                },
                shader_checks: Some(checks),
                ..Default::default()
            })
            .unwrap();
            for (n, d, heads, nv) in all {
                let (x, y) = integer_set(n, d, heads, (n * 11 + d) as u64);
                let (xv, yv) = integer_set(nv, d, heads, (nv * 5 + d) as u64);
                let mut rng = ChaCha8Rng::seed_from_u64(n as u64 + 1);
                let sw: Vec<f32> = (0..n).map(|_| rng.random_range(0..4) as f32).collect();
                let v = TrainView {
                    sw: Some(&sw),
                    val: Some(ValView {
                        x: (&xv).into(),
                        y: &yv,
                        n: nv,
                    }),
                    ..TrainView::new(&x, &y, n, d, 1.0, heads)
                };
                for rule in rules(heads) {
                    if rule.update != Update::Additive {
                        continue;
                    }
                    let what =
                        format!("{checks:?}, {rt} rows a thread, n={n} d={d} K={heads} {rule:?}");
                    let want = run(&ReferenceBackend, v, &rule);
                    let got = run(&g, v, &rule);
                    assert_same_run(&got, &want, &what);
                }
                let mut bound = g.bind(v).unwrap();
                let mut w = vec![0f32; heads * (d + 1)];
                let plan = bound
                    .profile(&mut w, &rules(heads)[0], 1)
                    .unwrap()
                    .map(|p| p.plan)
                    .unwrap_or_default();
                assert!(
                    plan.contains(&format!("({rt} in flight a thread")),
                    "{rt} rows, n={n} d={d} K={heads}: {plan}"
                );
            }
        }
    }
}

/// The register pass by tiles of rows (`rows_by_tile`: rows wider than a subgroup with one
/// head block, the rule on every lane, two barriers a tile) equals the reference bit for bit
/// on integer data: every additive rule, row weights and held-out rows, one row group a
/// workgroup (K = 10) and several (K = 4, binary); runs that end inside a tile. The plan must
/// say the epoch runs by tiles. On a software adapter (8-lane subgroups) the planner takes 4
/// rows a tile whatever is asked (more need TT (WG / 8 + WG / TPR) words of sums a head, more
/// than the WG of `redk`), so only that runs there; a GPU with 32-lane subgroups also runs 8
/// and 16, and without naga's loop counters.
#[test]
#[ignore = "tier 2: every size and setting (tier 1: tests/it/coverage.rs)"]
fn tier2_tiles_of_rows_equal_the_reference() {
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions, ShaderChecks};
    use rosenblatt_backend::ValView;
    let Some(base) = gpu_with_subgroups() else {
        return;
    };
    // (n, d, K, held-out rows): a row of d features spans several subgroups of 8 or 32 lanes.
    // (Rows of a 32-lane GPU's plan must span more than 32 threads too: K = 6 from d = 257,
    // binary from d = 1,025.)
    let all = [
        (401, 200, 10, 37),
        (150, 300, 6, 11),
        (258, 300, 4, 63),
        (77, 1200, 1, 9),
        (61, 2100, 1, 5),
    ];
    let mut configs = vec![(ShaderChecks::Full, 4)];
    if base.context().info.device_type != wgpu::DeviceType::Cpu {
        // (A software adapter plans 4 rows a tile whatever is asked.)
        configs.extend([
            (ShaderChecks::Full, 8),
            (ShaderChecks::NoLoopCounters, 8),
            (ShaderChecks::NoLoopCounters, 16),
        ]);
    }
    for (checks, tt) in configs {
        let g = GpuBackend::new(&GpuOptions {
            resident: ResidentOptions {
                subgroups: Some(true),
                tile_rows: Some(tt),
                workgroups: Some(3),
                ..Default::default()
            },
            shader_checks: Some(checks),
            ..Default::default()
        })
        .unwrap();
        for (n, d, heads, nv) in all {
            let (x, y) = integer_set(n, d, heads, (n * 13 + d) as u64);
            let (xv, yv) = integer_set(nv, d, heads, (nv * 7 + d) as u64);
            let mut rng = ChaCha8Rng::seed_from_u64(n as u64 + 3);
            let sw: Vec<f32> = (0..n).map(|_| rng.random_range(0..4) as f32).collect();
            // Row weights with several heads (binary rows take them the same way).
            let weightings: &[bool] = if heads > 1 { &[false, true] } else { &[false] };
            for &weighted in weightings {
                let v = TrainView {
                    sw: weighted.then_some(&sw[..]),
                    val: Some(ValView {
                        x: (&xv).into(),
                        y: &yv,
                        n: nv,
                    }),
                    ..TrainView::new(&x, &y, n, d, 1.0, heads)
                };
                for rule in rules(heads) {
                    if rule.update != Update::Additive {
                        continue;
                    }
                    let what = format!(
                        "{checks:?}, {tt} rows a tile, n={n} d={d} K={heads} weighted={weighted} \
                         {rule:?}"
                    );
                    let want = run(&ReferenceBackend, v, &rule);
                    let got = run(&g, v, &rule);
                    assert_same_run(&got, &want, &what);
                }
            }
            let v = TrainView::new(&x, &y, n, d, 1.0, heads);
            let mut bound = g.bind(v).unwrap();
            let mut w = vec![0f32; heads * (d + 1)];
            let plan = bound
                .profile(&mut w, &rules(heads)[0], 1)
                .unwrap()
                .map(|p| p.plan)
                .unwrap_or_default();
            // The planner takes fewer rows a tile where the device's smallest subgroup leaves
            // too little workgroup memory for more (8 lanes: 4 rows).
            assert!(
                plan.contains("tiles of ")
                    && (tt != 4 || plan.contains("tiles of 4 rows"))
                    && (tt == 16 || !plan.contains("tiles of 16 rows")),
                "{tt} rows a tile, n={n} d={d} K={heads}: {plan}"
            );
        }
    }
}

/// The stepped perceptron's kernels (`steps`, `mix`) equal their CPU twin bit for bit on
/// integer data (with streams a power of two, so that their mean stays exact): every rule, one
/// and several streams, steps of one row to more than a workgroup's threads, averaged or not,
/// over shuffled epochs; counts, weights and model. Both forms of `steps`: by subgroup lanes
/// (where the adapter has subgroups and the shape fits; the test checks it ran so) and by the
/// workgroup's threads.
#[test]
fn stepped_kernels_equal_their_cpu_twin_bit_for_bit_on_integer_data() {
    stepped_kernels_equal(false);
}

#[test]
#[ignore = "tier 2: the cases tier 1 leaves"]
fn tier2_stepped_kernels_equal_their_cpu_twin_bit_for_bit_on_integer_data() {
    stepped_kernels_equal(true);
}

fn stepped_kernels_equal(tier2: bool) {
    use rosenblatt_backend::gpu::steps::LanesShape;
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    use rosenblatt_backend::steps::StepsSetup;
    use rosenblatt_backend::HeadRule;
    let Some(g) = gpu() else { return };
    let ctx = g.context();
    let subgroups = ctx.features.contains(wgpu::Features::SUBGROUP);
    let by_threads = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            subgroups: Some(false),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cpu = CpuBackend::new();
    for (case, &(n, d, k, rule, b, s, average)) in [
        (50, 3, 1, HeadRule::Binary, 1, 1, true),
        (301, 7, 1, HeadRule::Binary, 16, 4, true),
        (200, 5, 3, HeadRule::MulticlassArgmax, 8, 2, true),
        (200, 5, 4, HeadRule::MulticlassAll, 5, 2, false),
        (257, 9, 5, HeadRule::OneVsRest, 4, 8, true),
        (300, 300, 2, HeadRule::MulticlassArgmax, 300, 1, true),
        (40, 2, 3, HeadRule::MulticlassArgmax, 2, 64, true),
        // Streams of 1,000 one-row steps at d = 64: past what a software adapter runs in one
        // dispatch (its loops end after 65,535 iterations an invocation), so taken in runs.
        (2000, 64, 10, HeadRule::MulticlassArgmax, 1, 2, true),
        // Steps of more than 16 rows (by lanes: loaded again for the updates), two and four
        // columns a thread.
        (400, 40, 3, HeadRule::OneVsRest, 20, 2, true),
        (500, 300, 10, HeadRule::MulticlassArgmax, 14, 4, true),
        (200, 1000, 4, HeadRule::MulticlassAll, 6, 2, false),
    ]
    .iter()
    .enumerate()
    .filter(|(case, _)| [0, 3, 4].contains(case) != tier2)
    {
        let mut rng = ChaCha8Rng::seed_from_u64(43 + case as u64);
        let x: Vec<f32> = (0..n * d)
            .map(|_| rng.random_range(-2i32..=2) as f32)
            .collect();
        let y: Vec<f32> = (0..n)
            .map(|i| match k {
                1 => {
                    let s: f32 = x[i * d..(i + 1) * d].iter().sum();
                    if s + (i % 7) as f32 - 3.0 >= 0.0 {
                        1.0
                    } else {
                        -1.0
                    }
                }
                _ => ((x[i * d] + 2.0) as usize + i % 3) as f32 % k as f32,
            })
            .collect();
        let setup = StepsSetup {
            rule,
            tau: (case % 2) as f32,
            eta: 1.0,
            step_rows: b,
            streams: s,
            average,
            w0: vec![0.0; k * (d + 1)],
            heads: k,
            update: Default::default(),
        };
        // Every other case with integer row weights (and twice that in a one-vs-rest row's
        // own head, as class weights give).
        let weights: Vec<rosenblatt_backend::RowWeight> = (0..n)
            .map(|i| rosenblatt_backend::RowWeight {
                row: (i % 3 + 1) as f32,
                own: (2 * (i % 3 + 1)) as f32,
            })
            .collect();
        let weighted = case % 2 == 1 || rule == HeadRule::OneVsRest;
        let what =
            format!("n {n} d {d} K {k} {rule:?} B {b} S {s} average {average} weighted {weighted}");
        let rows = rosenblatt_backend::steps::StepRows {
            weights: weighted.then_some(&weights[..]),
            ..rows(&x, &y, d)
        };
        let lanes = subgroups
            && LanesShape::plan(d, k, b, ctx.info.subgroup_min_size, &ctx.limits).is_some();
        let backends: [(&dyn Backend, bool); 2] = [(g, lanes), (&by_threads, false)];
        for (gb, lanes) in backends {
            let what = format!("{what}, by lanes {lanes}");
            let mut want = cpu.bind_steps(rows, setup.clone()).unwrap();
            let mut got = gb.bind_steps(rows, setup.clone()).unwrap();
            let mut order: Vec<u32> = (0..n as u32).collect();
            for epoch in 0..3 {
                for i in (1..n).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
                let (a, e) = (got.epoch(&order).unwrap(), want.epoch(&order).unwrap());
                assert_eq!(
                    (a.mistakes, a.wrong_rows, a.criterion, a.weighted),
                    (e.mistakes, e.wrong_rows, e.criterion, e.weighted),
                    "{what}: epoch {epoch} counts"
                );
                assert!(e.mistakes > 0, "{what}: epoch {epoch} has no mistake");
                assert_eq!(got.weights().unwrap(), want.weights().unwrap(), "{what}");
                assert_eq!(got.model().unwrap(), want.model().unwrap(), "{what}");
                if epoch == 0 {
                    // As after the processes of a data-parallel run mixed.
                    let w: Vec<f32> = want.weights().unwrap().iter().map(|v| v - 1.0).collect();
                    got.set_weights(&w).unwrap();
                    want.set_weights(&w).unwrap();
                }
            }
            let plan = got.plan();
            assert_eq!(plan.contains("by subgroup lanes"), lanes, "{what}: {plan}");
        }
        // The same rule on sparse rows (about a third of the values kept, so some rows are
        // empty; every other case's row starts not from 0): the GPU equals its CPU twin, and
        // the twin (lazily kept sums) equals the dense twin on the same rows.
        let xs: Vec<f32> = x
            .iter()
            .map(|&v| if rng.random_range(0..3) == 0 { v } else { 0.0 })
            .collect();
        let skip = 5 * (case % 2);
        let mut csr = rosenblatt_backend::CsrBuf {
            indptr: vec![skip],
            indices: vec![0; skip],
            values: vec![7.0; skip],
        };
        for row in xs.chunks(d) {
            csr.push_row(
                (0..d as u32)
                    .zip(row.iter().copied())
                    .filter(|e| e.1 != 0.0),
            );
        }
        let sparse = rosenblatt_backend::steps::StepRows {
            x: (&csr).into(),
            ..rows
        };
        let dense = rosenblatt_backend::steps::StepRows {
            x: (&xs).into(),
            ..rows
        };
        let what = format!("{what}, sparse rows");
        let mut plain = cpu.bind_steps(dense, setup.clone()).unwrap();
        let mut want = cpu.bind_steps(sparse, setup.clone()).unwrap();
        let mut got = g.bind_steps(sparse, setup.clone()).unwrap();
        let mut order: Vec<u32> = (0..n as u32).collect();
        for epoch in 0..3 {
            for i in (1..n).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
            let e = want.epoch(&order).unwrap();
            let outcomes = [got.epoch(&order).unwrap(), plain.epoch(&order).unwrap()];
            for a in outcomes {
                assert_eq!(
                    (a.mistakes, a.wrong_rows, a.criterion, a.weighted),
                    (e.mistakes, e.wrong_rows, e.criterion, e.weighted),
                    "{what}: epoch {epoch} counts"
                );
            }
            assert!(e.mistakes > 0, "{what}: epoch {epoch} has no mistake");
            let w = want.weights().unwrap();
            assert_eq!(got.weights().unwrap(), w, "{what}");
            assert_eq!(plain.weights().unwrap(), w, "{what}");
            let m = want.model().unwrap();
            assert_eq!(got.model().unwrap(), m, "{what}");
            assert_eq!(plain.model().unwrap(), m, "{what}");
            if epoch == 0 {
                let w: Vec<f32> = w.iter().map(|v| v - 1.0).collect();
                for b in [&mut got, &mut want, &mut plain] {
                    b.set_weights(&w).unwrap();
                }
            }
        }
        assert!(got.plan().contains("sparse rows"), "{what}: {}", got.plan());
    }
}

/// The passive-aggressive rule in steps and streams (`decide_pa`) equals its CPU twin: every
/// variant and rule, dense rows by both forms of `steps` and sparse rows. Its steps divide,
/// so the weights are fractions and the GPU's sums may round otherwise (by lanes another
/// order, a GPU's division within 2.5 ulp): the weights agree to rounding; on these rows
/// (entries in {-1, 0, 1}) every row's squared norm is a small integer and the mistakes and
/// the losses' sums agree over the epochs tested.
#[test]
fn stepped_passive_aggressive_equals_its_cpu_twin() {
    stepped_passive_aggressive(false);
}

#[test]
#[ignore = "tier 2: the cases tier 1 leaves"]
fn tier2_stepped_passive_aggressive_equals_its_cpu_twin() {
    stepped_passive_aggressive(true);
}

fn stepped_passive_aggressive(tier2: bool) {
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    use rosenblatt_backend::steps::{StepUpdate, StepsSetup};
    use rosenblatt_backend::{HeadRule, PaSize};
    let Some(g) = gpu() else { return };
    let by_threads = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            subgroups: Some(false),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cpu = CpuBackend::new();
    // Every case's rows are drawn in turn from one generator, whichever tier runs it: on other
    // rows the GPU's divisions (within 2.5 ulp) flipped one decision of 83 (all-heads PA).
    let mut rng = ChaCha8Rng::seed_from_u64(45);
    let cases = [
        (300, 9, 1, HeadRule::Binary, 4, 2, PaSize::Pa1(1.0)),
        (300, 9, 1, HeadRule::Binary, 1, 1, PaSize::Pa),
        (400, 12, 3, HeadRule::OneVsRest, 8, 2, PaSize::Pa2(0.5)),
        (
            400,
            12,
            4,
            HeadRule::MulticlassArgmax,
            2,
            4,
            PaSize::Pa1(0.25),
        ),
        (400, 12, 4, HeadRule::MulticlassAll, 4, 2, PaSize::Pa),
    ];
    for (case, (n, d, k, rule, b, s, size)) in cases.into_iter().enumerate() {
        let x: Vec<f32> = (0..n * d)
            .map(|_| rng.random_range(-1i32..=1) as f32)
            .collect();
        if [0, 3].contains(&case) == tier2 {
            continue;
        }
        let y: Vec<f32> = (0..n)
            .map(|i| match k {
                1 => {
                    let t: f32 = x[i * d..i * d + 3].iter().sum::<f32>() + (i % 5) as f32 - 2.0;
                    if t >= 0.0 {
                        1.0
                    } else {
                        -1.0
                    }
                }
                _ => ((x[i * d] + 1.0) as usize + i % 2) as f32 % k as f32,
            })
            .collect();
        let setup = StepsSetup {
            rule,
            tau: 0.0,
            eta: 1.0,
            step_rows: b,
            streams: s,
            average: false,
            w0: vec![0.0; k * (d + 1)],
            heads: k,
            update: StepUpdate::PassiveAggressive(size),
        };
        let csr = rosenblatt_backend::CsrBuf::from_dense(&x, d);
        let dense = rows(&x, &y, d);
        let sparse = rosenblatt_backend::steps::StepRows {
            x: (&csr).into(),
            ..dense
        };
        let runs: [(&dyn Backend, _, &str); 3] = [
            (g, dense, "dense"),
            (&by_threads, dense, "dense by threads"),
            (g, sparse, "sparse"),
        ];
        for (gb, r, form) in runs {
            let what = format!("{rule:?} {size:?} B {b} S {s} {form}");
            steps_close_to_twin(&cpu, gb, r, &setup, 2, &what, |_, _, _| {});
        }
    }
}

/// AROW in steps and streams (shaders/steps.wgsl's `decide_arow` and `arow_update`, the
/// confidences mixed with the weights) gives its CPU twin's counts and, to rounding, its
/// model: binary and one-vs-rest, with and without row weights, dense rows (the subgroup
/// variant's module too: AROW goes by threads there) and sparse rows. The GPU refuses more
/// than `AROW_STEP` scores a step and AROW by lanes.
#[test]
fn stepped_arow_equals_its_cpu_twin() {
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    use rosenblatt_backend::steps::{StepUpdate, StepsSetup, AROW_STEP};
    use rosenblatt_backend::{HeadRule, RowWeight};
    let Some(g) = gpu() else { return };
    let by_threads = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            subgroups: Some(false),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cpu = CpuBackend::new();
    let mut rng = ChaCha8Rng::seed_from_u64(46);
    for (n, d, k, rule, b, s, r, weighted) in [
        (300, 9, 1, HeadRule::Binary, 4, 2, 1.0, false),
        (300, 9, 1, HeadRule::Binary, 1, 1, 0.5, true),
        (400, 12, 3, HeadRule::OneVsRest, 8, 2, 2.0, false),
        (400, 12, 4, HeadRule::OneVsRest, 2, 4, 1.0, true),
    ] {
        // Real values, a third of them zeros: integer rows put margins at exactly 1, where
        // the last bit (a compiler may fuse a multiply-add) would decide whether a head
        // steps.
        let x: Vec<f32> = (0..n * d)
            .map(|_| match rng.random_range(0..3) {
                0 => 0.0,
                _ => rng.random_range(-1.0f32..1.0),
            })
            .collect();
        let y: Vec<f32> = (0..n)
            .map(|i| match k {
                1 => {
                    let t: f32 = x[i * d..i * d + 3].iter().sum::<f32>() + (i % 5) as f32 - 2.0;
                    if t >= 0.0 {
                        1.0
                    } else {
                        -1.0
                    }
                }
                _ => ((x[i * d] + 1.0) as usize + i % 2) as f32 % k as f32,
            })
            .collect();
        let wts: Vec<RowWeight> = (0..n)
            .map(|i| RowWeight {
                row: (i % 3) as f32 * 0.5,
                own: (i % 4) as f32,
            })
            .collect();
        let setup = StepsSetup {
            rule,
            tau: 0.0,
            eta: 1.0,
            step_rows: b,
            streams: s,
            average: false,
            w0: vec![0.0; k * (d + 1)],
            heads: k,
            update: StepUpdate::Arow { r },
        };
        let csr = rosenblatt_backend::CsrBuf::from_dense(&x, d);
        let dense = rosenblatt_backend::steps::StepRows {
            weights: weighted.then_some(&wts[..]),
            ..rows(&x, &y, d)
        };
        let sparse = rosenblatt_backend::steps::StepRows {
            x: (&csr).into(),
            ..dense
        };
        let runs: [(&dyn Backend, _, &str); 3] = [
            (g, dense, "dense"),
            (&by_threads, dense, "dense by threads"),
            (g, sparse, "sparse"),
        ];
        for (gb, rw, form) in runs {
            let what = format!("{rule:?} r {r} B {b} S {s} weighted {weighted} {form}");
            let got = steps_close_to_twin(&cpu, gb, rw, &setup, 3, &what, |a, e, cw| {
                assert!(close(a.weighted, e.weighted), "{what}: {a:?} {e:?}");
                assert!(cw.iter().any(|&v| v != 0.0), "{what}: no step moved w");
            });
            if form == "dense" {
                assert!(got.plan().contains("threads"), "{what}: {}", got.plan());
            }
        }
    }
    // More scores a step than AROW's half of the step's memory, and AROW by lanes: refused.
    let (x, y) = (vec![1.0; 8], vec![1.0, -1.0]);
    let too_many = StepsSetup {
        rule: HeadRule::OneVsRest,
        tau: 0.0,
        eta: 1.0,
        step_rows: AROW_STEP / 2 + 1,
        streams: 1,
        average: false,
        w0: vec![0.0; 2 * 5],
        heads: 2,
        update: StepUpdate::Arow { r: 1.0 },
    };
    let e = g
        .bind_steps(rows(&x, &y, 4), too_many.clone())
        .err()
        .unwrap();
    assert!(e.to_string().contains("1024 scores"), "{e}");
    assert!(cpu.bind_steps(rows(&x, &y, 4), too_many.clone()).is_ok());
    let by_lanes = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            subgroups: Some(true),
            ..Default::default()
        },
        ..Default::default()
    });
    if let Ok(l) = by_lanes {
        let one = StepsSetup {
            step_rows: 1,
            ..too_many
        };
        let e = l.bind_steps(rows(&x, &y, 4), one).err().unwrap();
        assert!(e.to_string().contains("lanes"), "{e}");
    }
}

/// X past one storage binding goes in up to four bindings: the kernels read across them as
/// from one; more than four is refused with the sizes.
#[test]
fn stepped_kernels_read_x_across_bindings() {
    use rosenblatt_backend::gpu::{GpuOptions, ResidentOptions};
    use rosenblatt_backend::steps::StepsSetup;
    use rosenblatt_backend::HeadRule;
    if gpu().is_none() {
        return;
    }
    let g = GpuBackend::new(&GpuOptions {
        resident: ResidentOptions {
            max_binding: Some(1024),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cpu = CpuBackend::new();
    // 200 rows of 5 values: 51 rows (1,020 bytes) a binding, four bindings.
    let (n, d, k) = (200, 5, 3);
    let (x, y) = integer_set(n, d, k, 8);
    let setup = StepsSetup {
        rule: HeadRule::MulticlassArgmax,
        tau: 0.0,
        eta: 1.0,
        step_rows: 4,
        streams: 2,
        average: true,
        w0: vec![0.0; k * (d + 1)],
        heads: k,
        update: Default::default(),
    };
    let mut want = cpu.bind_steps(rows(&x, &y, d), setup.clone()).unwrap();
    let mut got = g.bind_steps(rows(&x, &y, d), setup.clone()).unwrap();
    let order: Vec<u32> = (0..n as u32).rev().collect();
    for _ in 0..3 {
        let (a, e) = (got.epoch(&order).unwrap(), want.epoch(&order).unwrap());
        assert_eq!((a.mistakes, a.criterion), (e.mistakes, e.criterion));
    }
    assert_eq!(got.model().unwrap(), want.model().unwrap());
    drop(got);
    // 250 rows need five bindings (their labels, 1,000 bytes, still fit one).
    let (x, y) = integer_set(250, d, k, 9);
    match g.bind_steps(rows(&x, &y, d), setup) {
        Err(rosenblatt::Error::TooLarge(m)) => assert!(m.contains("4 bindings"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("five bindings taken"),
    };
}

/// Within rounding (1e-4, relative above 1): the stepped rules whose steps divide.
fn close(u: f64, v: f64) -> bool {
    (u - v).abs() <= 1e-4 * (1.0 + v.abs())
}

/// Runs `epochs` epochs of `setup` on `rows` on `gb` and on the CPU twin `cpu` (the rows in
/// reverse order) and checks each epoch: the same mistakes and wrong rows, at least one
/// step, the criterion and the model to rounding; `also` (GPU counts, CPU counts, CPU model)
/// checks what a rule adds. Returns the GPU's bound rows.
fn steps_close_to_twin<'a>(
    cpu: &CpuBackend,
    gb: &'a dyn Backend,
    rows: rosenblatt_backend::steps::StepRows<'_>,
    setup: &rosenblatt_backend::steps::StepsSetup,
    epochs: usize,
    what: &str,
    mut also: impl FnMut(&RowOutcome, &RowOutcome, &[f32]),
) -> Box<dyn rosenblatt_backend::steps::StepsBound + 'a> {
    let mut want = cpu.bind_steps(rows, setup.clone()).unwrap();
    let mut got = gb.bind_steps(rows, setup.clone()).unwrap();
    let order: Vec<u32> = (0..rows.y.len() as u32).rev().collect();
    for epoch in 0..epochs {
        let (a, e) = (got.epoch(&order).unwrap(), want.epoch(&order).unwrap());
        assert_eq!(
            (a.mistakes, a.wrong_rows),
            (e.mistakes, e.wrong_rows),
            "{what}: epoch {epoch}"
        );
        assert!(e.mistakes > 0, "{what}: epoch {epoch} has no step");
        assert!(close(a.criterion, e.criterion), "{what}: {a:?} {e:?}");
        let (gw, cw) = (got.model().unwrap(), want.model().unwrap());
        also(&a, &e, &cw);
        for (u, v) in gw.iter().zip(&cw) {
            assert!(close(*u as f64, *v as f64), "{what}: {gw:?} {cw:?}");
        }
    }
    got
}

/// Unweighted rows with a bias column of 1 for the stepped kernels.
fn rows<'a>(x: &'a [f32], y: &'a [f32], d: usize) -> rosenblatt_backend::steps::StepRows<'a> {
    rosenblatt_backend::steps::StepRows {
        x: x.into(),
        y,
        weights: None,
        d,
        bias: 1.0,
    }
}
