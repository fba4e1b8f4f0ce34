//! Tier 1 reaches every GPU path. Each path the planner can take ([`GpuPath::ALL`]: the
//! register pass's four forms, the two-kernel path, CSR rows, scoring, split and streamed
//! segments, the data-parallel fold, the stepped kernels by lanes, by threads and on sparse
//! rows, the kernel perceptron, both parameter spaces) runs here on a small shape, bit for
//! bit against its CPU twin on integer data, on backends of this test's own, which count the
//! work they recorded by path. The test then fails naming every path that never ran, so a
//! planner change that stops taking a path (or a path the tour forgets) cannot pass unseen.
//! The exhaustive matrices of sizes, storages and rules per path are tier 2 (conformance,
//! sparse, traffic: the tests named `tier2_*`).

use std::collections::BTreeSet;

use crate::common;
use common::gpu;
use common::twins::{self, assert_same_run, integer_set, rules, run, Run, Solo};

use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::gpu::{GpuBackend, GpuOptions, GpuPath, ParamsSpace, ResidentOptions};
use rosenblatt_backend::reference::ReferenceBackend;
use rosenblatt_backend::steps::{StepRows, StepsSetup};
use rosenblatt_backend::{
    Backend, BatchRule, CsrBuf, DataView, EpochStats, HeadRule, Keep, Kernel, Matrix, Storage,
    TrainView, Update, ValView,
};

/// The paths run so far by the tour's backends.
#[derive(Default)]
struct Tour {
    ran: BTreeSet<GpuPath>,
}

impl Tour {
    /// Adds the paths `g` ran.
    fn collect(&mut self, g: &GpuBackend) {
        self.ran
            .extend(g.context().paths_run().into_iter().map(|(p, _)| p));
    }
}

/// A backend of the tour's own with `resident` options (and `params`), or `None` where the
/// adapter refuses them (said in a visible line).
fn open(what: &str, resident: ResidentOptions, params: Option<ParamsSpace>) -> Option<GpuBackend> {
    match GpuBackend::new(&GpuOptions {
        resident,
        params_space: params,
        ..Default::default()
    }) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipped: the {what} backend ({e})");
            None
        }
    }
}

/// Binary and three-class integer sets (with held-out rows and row weights for the binary
/// one), each with the rules run on it: every kept extra and Winnow for one head, argmax and
/// one-vs-rest with the pocket for three. `d` features a row, `n` rows.
struct Sets {
    binary: (Vec<f32>, Vec<f32>),
    held: (Vec<f32>, Vec<f32>),
    sw: Vec<f32>,
    classes: (Vec<f32>, Vec<f32>),
    n: usize,
    d: usize,
}

impl Sets {
    fn new(n: usize, d: usize, seed: u64) -> Sets {
        Sets {
            binary: integer_set(n, d, 1, seed),
            held: integer_set(37, d, 1, seed + 1),
            sw: (0..n).map(|i| (i % 3) as f32).collect(),
            classes: integer_set(n, d, 3, seed + 2),
            n,
            d,
        }
    }

    /// The binary case over `x` (held-out rows `held`) and the three-class case, each with
    /// its rules.
    fn cases<'a>(&'a self, x: Matrix<'a>, held: Matrix<'a>) -> Vec<Case<'a>> {
        let Sets { n, d, .. } = *self;
        let binary = TrainView {
            sw: Some(&self.sw),
            val: Some(ValView {
                x: held,
                y: &self.held.1,
                n: 37,
            }),
            ..TrainView::new(x, &self.binary.1, n, d, 1.0, 1)
        };
        let keeps = [Keep::Nothing, Keep::Pocket, Keep::Average];
        let classes = TrainView::new(&self.classes.0, &self.classes.1, n, d, 1.0, 3);
        let multiclass: Vec<BatchRule> = rules(3, &[Keep::Pocket])
            .into_iter()
            .filter(|r| r.rule != HeadRule::MulticlassAll)
            .collect();
        vec![(binary, rules(1, &keeps)), (classes, multiclass)]
    }
}

type Case<'a> = (TrainView<'a>, Vec<BatchRule>);

/// Runs every rule of `cases` on `g` and on the reference, equal bit for bit (Winnow's
/// exp-weighted scores aside, which a GPU's exp may round otherwise: its mistakes and
/// log-weights equal).
fn batch_equal(g: &GpuBackend, cases: &[Case<'_>], what: &str) {
    for (v, rules) in cases {
        for rule in rules {
            let want: Run = run(&ReferenceBackend, *v, rule);
            let got = run(g, *v, rule);
            let what = format!("{what}: n={} d={} K={} {rule:?}", v.n, v.d, v.heads);
            if rule.update == Update::Multiplicative {
                let m = |r: &Run| r.0.iter().map(|e| e.mistakes).collect::<Vec<_>>();
                assert_eq!(m(&got), m(&want), "{what}: mistakes");
                assert_eq!(got.1, want.1, "{what}: log-weights");
                continue;
            }
            assert_same_run(&got, &want, &what);
        }
    }
}

/// One batch case of `heads` heads over `n` x `d` integer rows (argmax for several heads,
/// binary with the pocket for one), equal to the reference bit for bit.
fn one_batch(g: &GpuBackend, n: usize, d: usize, heads: usize, what: &str) {
    let (x, y) = integer_set(n, d, heads, (n * 7 + d + heads) as u64);
    let rule = BatchRule {
        rule: if heads == 1 {
            HeadRule::Binary
        } else {
            HeadRule::MulticlassArgmax
        },
        keep: Keep::Average,
        ..BatchRule::new(1.0, 0.0)
    };
    let v = TrainView::new(&x, &y, n, d, 1.0, heads);
    let want = run(&ReferenceBackend, v, &rule);
    assert_same_run(&run(g, v, &rule), &want, what);
}

/// `epochs` stepped epochs of `setup` over `rows` (a seeded shuffle each) on `g` and its CPU
/// twin: the same counts, weights and model in every bit.
fn steps_equal(g: &GpuBackend, rows: StepRows<'_>, setup: &StepsSetup, what: &str) -> String {
    let cpu = CpuBackend::new();
    let mut want = cpu.bind_steps(rows, setup.clone()).unwrap();
    let mut got = g.bind_steps(rows, setup.clone()).unwrap();
    let n = rows.y.len();
    for epoch in 0..3 {
        let order: Vec<u32> = (0..n as u32).map(|i| (i * 7 + epoch) % n as u32).collect();
        let (a, e) = (got.epoch(&order).unwrap(), want.epoch(&order).unwrap());
        assert_eq!(
            (a.mistakes, a.wrong_rows, a.criterion, a.weighted),
            (e.mistakes, e.wrong_rows, e.criterion, e.weighted),
            "{what}: epoch {epoch} counts"
        );
        assert!(e.mistakes > 0, "{what}: epoch {epoch} has no mistake");
        assert_eq!(got.weights().unwrap(), want.weights().unwrap(), "{what}");
        assert_eq!(got.model().unwrap(), want.model().unwrap(), "{what}");
    }
    got.plan()
}

/// The stepped setup of the tour: `heads` heads (argmax, or binary for one), steps of 4 rows,
/// 4 streams (a power of two: their mean stays exact), averaged.
fn setup(d: usize, heads: usize) -> StepsSetup {
    StepsSetup {
        rule: if heads == 1 {
            HeadRule::Binary
        } else {
            HeadRule::MulticlassArgmax
        },
        tau: 0.0,
        eta: 1.0,
        step_rows: 4,
        streams: 4,
        average: true,
        w0: vec![0.0; heads * (d + 1)],
        heads,
        update: Default::default(),
    }
}

/// Rows of `x` with about three values in seven kept (the rest 0): dense, and as CSR rows.
fn thinned(x: &[f32], d: usize) -> (Vec<f32>, CsrBuf) {
    let kept: Vec<f32> = (x.iter().enumerate())
        .map(|(i, &v)| if (i * 5) % 7 < 3 { v } else { 0.0 })
        .collect();
    let csr = CsrBuf::from_dense(&kept, d);
    (kept, csr)
}

/// The paths of one backend that runs on lane sums by a workgroup tree: the register pass, its
/// scores, CSR rows, the data-parallel fold, the kernel perceptron and the stepped kernels by
/// threads on dense and sparse rows.
fn tree_paths(g: &GpuBackend, s: &Sets) {
    let (n, d) = (s.n, s.d);
    let cases = s.cases((&s.binary.0).into(), (&s.held.0).into());
    batch_equal(g, &cases, "tree");
    // CSR rows: the same rules on thinned rows, against the reference on the same rows dense.
    let (dx, cx) = thinned(&s.binary.0, d);
    let (dh, ch) = thinned(&s.held.0, d);
    let (dc, cc) = thinned(&s.classes.0, d);
    let mut csr = s.cases(Matrix::Csr(cx.view()), Matrix::Csr(ch.view()));
    csr[1].0.x = Matrix::Csr(cc.view());
    let mut want = s.cases((&dx).into(), (&dh).into());
    want[1].0.x = (&dc).into();
    for ((got, rules), (dense, _)) in csr.iter().zip(&want) {
        for rule in rules.iter().filter(|r| r.update == Update::Additive) {
            let what = format!("tree, CSR rows: K={} {rule:?}", got.heads);
            assert_same_run(
                &run(g, *got, rule),
                &run(&ReferenceBackend, *dense, rule),
                &what,
            );
        }
    }
    // One process of a data-parallel run: its chunks folded on the device.
    let (x, y) = &s.classes;
    let v = TrainView::new(x, y, n, d, 1.0, 3);
    let rule = BatchRule {
        rule: HeadRule::OneVsRest,
        keep: Keep::Average,
        ..BatchRule::new(1.0, 0.0)
    };
    let want = run(&ReferenceBackend, v, &rule);
    let mut bound = g.bind_reduced(v, &Solo).unwrap();
    let mut w = vec![0f32; 3 * (d + 1)];
    let mut stats: Vec<EpochStats> = Vec::new();
    for _ in 0..6 {
        let e = bound.batch_epochs(&mut w, &rule, 1).unwrap();
        stats.extend(e.stats);
        if e.stop.is_some() {
            break;
        }
    }
    let m = |s: &[EpochStats]| s.iter().map(|e| e.mistakes).collect::<Vec<_>>();
    assert_eq!(m(&stats), m(&want.0), "fold: mistakes");
    assert_eq!(w, want.1, "fold: weights");
    assert_eq!(bound.extras().unwrap(), want.3, "fold: average");
    drop(bound);
    // The kernel perceptron's scores.
    let view = DataView {
        x: (&s.binary.0).into(),
        n,
        d,
        bias: 1.0,
    };
    let idx: Vec<u32> = (0..n as u32).filter(|i| i % 3 != 1).collect();
    let coef: Vec<f32> = idx.iter().map(|i| (*i % 5) as f32 - 2.0).collect();
    for kernel in [
        Kernel::Linear,
        Kernel::Poly {
            degree: 2,
            gamma: 1.0,
            coef0: 1.0,
        },
    ] {
        let want = ReferenceBackend
            .kernel_scores(view, view, &idx, &coef, &kernel)
            .unwrap();
        let got = g
            .bind_dual(view, None)
            .unwrap()
            .kscores(&idx, &coef, &kernel);
        assert_eq!(got.unwrap(), want, "kernel perceptron {kernel:?}");
    }
    // The stepped kernels by the workgroup's threads, on dense and on sparse rows.
    let rows = StepRows {
        x: (&s.classes.0).into(),
        y: &s.classes.1,
        weights: None,
        d,
        bias: 1.0,
    };
    let plan = steps_equal(g, rows, &setup(d, 3), "stepped, by threads");
    assert!(plan.contains("threads"), "{plan}");
    let rows = StepRows {
        x: (&cc).into(),
        ..rows
    };
    let plan = steps_equal(g, rows, &setup(d, 3), "stepped, sparse rows");
    assert!(plan.contains("sparse rows"), "{plan}");
}

/// The register pass's forms with subgroup lane sums: rows in flight (rows within a subgroup,
/// one head block), tiles of rows (rows across subgroups, one head block: K = 10 at d = 200),
/// by steps (head blocks sharing a row: 13 heads, more than a thread holds); and the stepped
/// kernels by lanes.
fn subgroup_paths(g: &GpuBackend, s: &Sets) {
    let cases = s.cases((&s.binary.0).into(), (&s.held.0).into());
    batch_equal(g, &cases, "subgroups, rows in flight");
    one_batch(g, 150, 200, 10, "subgroups, tiles of rows");
    one_batch(g, 130, 9, 13, "subgroups, by steps (head blocks)");
    let rows = StepRows {
        x: (&s.binary.0).into(),
        y: &s.binary.1,
        weights: None,
        d: s.d,
        bias: 1.0,
    };
    let plan = steps_equal(g, rows, &setup(s.d, 1), "stepped, by lanes");
    assert!(plan.contains("by subgroup lanes"), "{plan}");
}

#[test]
fn every_gpu_path_the_planner_can_take_runs_and_equals_its_twin() {
    let Some(base) = gpu() else { return };
    let ctx = base.context();
    let features = ctx.features;
    let s = Sets::new(257, 7, 60);
    let mut tour = Tour::default();
    let take = |tour: &mut Tour, g: Option<GpuBackend>, f: &dyn Fn(&GpuBackend)| {
        if let Some(g) = g {
            f(&g);
            tour.collect(&g);
            drop(g);
            common::trim_heap();
        }
    };
    let grid = |resident: ResidentOptions| ResidentOptions {
        workgroups: Some(3),
        epochs_per_submit: Some(3),
        ..resident
    };
    // Lane sums by the workgroup's tree.
    let tree = open(
        "tree",
        grid(ResidentOptions {
            subgroups: Some(false),
            ..Default::default()
        }),
        None,
    );
    take(&mut tour, tree, &|g| tree_paths(g, &s));
    // The two-kernel path.
    let two = open(
        "two-kernel",
        grid(ResidentOptions {
            two_kernels: true,
            ..Default::default()
        }),
        None,
    );
    take(&mut tour, two, &|g| {
        let cases = s.cases((&s.binary.0).into(), (&s.held.0).into());
        batch_equal(g, &cases, "two kernels");
    });
    // Lane sums by subgroups.
    if features.contains(wgpu::Features::SUBGROUP) {
        let sub = open(
            "subgroup",
            grid(ResidentOptions {
                subgroups: Some(true),
                ..Default::default()
            }),
            None,
        );
        take(&mut tour, sub, &|g| subgroup_paths(g, &s));
    }
    // X over several bindings of 1 KiB, packed as bytes too (rows at odd offsets).
    let split = open(
        "split",
        grid(ResidentOptions {
            max_binding: Some(1024),
            ..Default::default()
        }),
        None,
    );
    take(&mut tour, split, &|g| {
        let cases = s.cases((&s.binary.0).into(), (&s.held.0).into());
        batch_equal(g, &cases, "split");
        let (x, y) = integer_set(301, 17, 4, 5);
        let packed = rosenblatt_backend::FeatureBuf::pack(&x, Storage::I8).unwrap();
        let rule = &rules(4, &[Keep::Pocket])[0];
        let want = run(
            &ReferenceBackend,
            TrainView::new(&x, &y, 301, 17, 1.0, 4),
            rule,
        );
        let got = run(g, TrainView::new(packed.view(), &y, 301, 17, 1.0, 4), rule);
        assert_same_run(&got, &want, "split, i8 rows");
    });
    // X streamed through two slots of a 4 KiB budget, each way it can stream.
    for (what, mapped, in_place) in [
        ("streamed by writes", false, Some(false)),
        ("streamed from staging", true, Some(false)),
        ("streamed in place", true, None),
    ] {
        let g = open(
            what,
            ResidentOptions {
                gpu_memory: Some(4096),
                mapped_staging: Some(mapped),
                read_in_place: in_place,
                ..Default::default()
            },
            None,
        );
        take(&mut tour, g, &|g| {
            let cases = s.cases((&s.binary.0).into(), (&s.held.0).into());
            batch_equal(g, &cases[..1], what);
        });
    }
    // The parameter blocks in the space the default does not take.
    let other = match ctx.params {
        ParamsSpace::Uniform => ParamsSpace::Storage,
        ParamsSpace::Storage => ParamsSpace::Uniform,
    };
    let g = open(
        "other parameter space",
        grid(Default::default()),
        Some(other),
    );
    take(&mut tour, g, &|g| one_batch(g, 257, 7, 1, other.name()));

    let missing: Vec<GpuPath> = GpuPath::ALL
        .into_iter()
        .filter(|p| !tour.ran.contains(p))
        .collect();
    let (unavailable, unrun): (Vec<GpuPath>, Vec<GpuPath>) = missing
        .into_iter()
        .partition(|p| !features.contains(p.needs()) || unavailable_here(*p, base));
    for p in &unavailable {
        eprintln!(
            "skipped: the path \"{}\" ({:?}): {} cannot take it",
            p.name(),
            p,
            base.device()
        );
    }
    let names = |v: &[GpuPath]| {
        v.iter()
            .map(|p| format!("\"{}\" ({p:?})", p.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(
        unrun.is_empty(),
        "tier 1 never ran these GPU paths on {}: {}",
        base.device(),
        names(&unrun)
    );
    if std::env::var("ROSENBLATT_REQUIRE_GPU").is_ok_and(|v| v == "1") && !twins::on_gl(base) {
        assert!(
            unavailable.is_empty(),
            "ROSENBLATT_REQUIRE_GPU=1 and {} cannot take these GPU paths: {}",
            base.device(),
            names(&unavailable)
        );
    }
}

/// Whether the adapter cannot take `p` for a reason other than a feature: parameter blocks in
/// storage buffers need more storage bindings a stage than OpenGL has.
fn unavailable_here(p: GpuPath, g: &GpuBackend) -> bool {
    p == GpuPath::ParamsStorage
        && g.context().limits.max_storage_buffers_per_shader_stage
            < rosenblatt_backend::gpu::context::PARAMS_STORAGE_BINDINGS
}
