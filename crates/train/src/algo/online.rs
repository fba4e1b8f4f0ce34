//! Online training (the lecture notes' Algorithm 1 and its family): each epoch visits the rows
//! in a seeded random order (or file order), and each mistake updates the weights at once
//! (by eta times the row's weight). Sequential by nature, so it runs on the host.
//!
//! One loop (`run`) serves every online rule: it shuffles, prefetches, counts the mistakes,
//! mixes the processes' weights in a data-parallel run, scores held-out rows, applies the stop
//! rules (`Watch`, shared with the kernel perceptron), keeps the best epoch's model and
//! reports progress. A rule (`OnlineRule`) is the state a row updates and the model it
//! yields: the perceptron here (binary, multiclass and one-vs-rest through [`row_rule`], the
//! averaged perceptron with lazy sums, the voted perceptron with every intermediate vector
//! and its survival count), Winnow (`winnow.rs`) and the passive-aggressive rules (`pa.rs`).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Backends, Fitted, Problem, Progress, RowWeights, Shard, PREFETCH_ROWS};
use crate::backend::cpu::{val_mistakes, CpuBackend};
use crate::backend::steps::{stream_part, StepRows, StepUpdate, StepX, StepsBound, StepsSetup};
use crate::backend::Features;
use crate::backend::{
    predicted_wrong, row_rule, update_norm, Backend, BackendKind, BatchRule, EpochStats, HeadRule,
    Reduce, Row, RowWeight, StopReason, StopState,
};
use crate::data::scale::{online_floor, RunningScale};
use crate::error::{Error, Result};
use crate::model::{Body, Rows, SparseRow, VoteScorer, VoteSteps, Voted};
use crate::params::{Algo, Params};

/// An online rule: the state one row at a time updates, and the model it yields.
pub(crate) trait OnlineRule {
    /// The model kept for the best validation epoch.
    type Best;

    /// The rule's own mistake bound on the run, where it has one (AROW with a full
    /// covariance), from its state after the last epoch.
    fn arow_bound(&self, _pb: &Problem<'_>) -> Result<Option<crate::report::ArowBound>> {
        Ok(None)
    }

    /// The current augmented weights (`heads * (d + 1)`): the update norm, progress
    /// snapshots and the default held-out scoring use them.
    fn weights(&self) -> &[f32];

    /// One row `row` (row `i` of the training rows) with label `y` (±1, or the class index)
    /// and weight `wt`: update on a mistake; returns the row's mistakes and weighted
    /// criterion, or why training stops.
    fn step(
        &mut self,
        pb: &Problem<'_>,
        i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step>;

    /// The end of an epoch in a data-parallel run: every process continues from the mean
    /// of the processes' weights, and the epoch's counts become their sums.
    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, rw: RowWeights) -> Result<()> {
        shard.mix(self.weights_mut(), e, rw);
        Ok(())
    }

    /// The linear model `predict` would use if training stopped now, on this process (the
    /// averaged perceptron's running average): what an animation's frames show.
    fn model_now(&self) -> Vec<f32> {
        self.weights().to_vec()
    }

    /// The end of an epoch's rows (before any mixing): a rule that steps by groups of rows
    /// closes its last, partial group.
    fn epoch_end(&mut self) {}

    /// Online scaling grew feature `j`'s scale by `k` (> 1): the rule multiplies what it keeps
    /// of feature j on the scaled features (the weights, the average's sums, AROW's
    /// confidences by k^2) by k, so that the model on the features as given is unchanged.
    /// The rules that read rows in order implement it (those [`reads_online`] admits).
    ///
    /// [`reads_online`]: super::reads_online
    fn rescale(&mut self, _j: usize, _k: f32) {}

    /// A whole epoch over the rows in `order` where the rule runs on a backend, its counts
    /// added to `e`: true when it ran, false when the rows go one by one through
    /// [`OnlineRule::step`].
    fn epoch(&mut self, _order: &[usize], _e: &mut EpochStats) -> Result<bool> {
        Ok(false)
    }

    /// The weights to mix (the default [`OnlineRule::mix`]).
    fn weights_mut(&mut self) -> &mut [f32];

    /// How a backend ran the rule, in words; `None` on the host.
    fn plan(&self) -> Option<String> {
        None
    }

    /// The held-out rows' mistakes of the model now (summed over the processes).
    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        let m = val_mistakes(&pb.view(), self.weights(), pb.rule);
        Ok(match &pb.shard {
            Some(sh) => sh.total(m),
            None => m,
        }
        .unwrap_or(0))
    }

    /// The model now, kept as the best so far.
    fn best(&self, pb: &Problem<'_>) -> Self::Best;

    /// The model trained: the best epoch's when one was kept, else the model now.
    fn finish(self, pb: &Problem<'_>, best: Option<Self::Best>) -> Result<Snapshot>;

    /// The scores of the last row stepped (one per head), as they were before its update:
    /// what a streamed run's progressive accuracy counts. `None` where the rule keeps none.
    fn row_scores(&self) -> Option<&[f32]> {
        None
    }
}

/// What one row did.
#[derive(Default)]
pub(crate) struct Step {
    /// Mistakes (heads for one-vs-rest, else 0 or 1).
    pub mistakes: u64,
    /// Their perceptron criterion, each times the row's weight in its head.
    pub criterion: f64,
    /// The row's weights in the heads of its mistakes, summed.
    pub weighted: f64,
    /// One-vs-rest: 1 when the row's first highest score (before its update) was not its
    /// class.
    pub wrong_rows: u64,
    /// Stop training after this row (its counts still go into the epoch).
    pub stop: Option<StopReason>,
}

/// The stop rules, the statistics and the progress of an epoch loop: the bookkeeping every
/// loop shares (the online loop and the kernel perceptron's).
pub(crate) struct Watch {
    rule: BatchRule,
    state: StopState,
    max_epochs: usize,
}

impl Watch {
    /// The stop rules of `params` (the patience rule among them), with the update-norm
    /// tolerance `tol` (0: none).
    pub(crate) fn new(pb: &Problem<'_>, params: &Params, tol: f32) -> Watch {
        Watch {
            rule: BatchRule {
                patience: pb.patience(params),
                ..BatchRule::new(params.lr, tol)
            },
            state: StopState::default(),
            max_epochs: params.epochs,
        }
    }

    /// Ends an epoch: records `e` in `stats` and reports progress; returns whether it is
    /// the best epoch so far and why to stop, if the stop rules say so.
    pub(crate) fn end(
        &mut self,
        stats: &mut Vec<EpochStats>,
        e: EpochStats,
        progress: &mut dyn Progress,
    ) -> (bool, Option<StopReason>) {
        let (better, why) = self.state.record(&self.rule, &e);
        stats.push(e);
        progress.update(stats.len(), self.max_epochs, e.mistakes);
        (better, why)
    }

    /// The error that ends a run whose caller asked it to stop after `epochs`, if it did.
    pub(crate) fn cancelled(progress: &mut dyn Progress, epochs: usize) -> Result<()> {
        match progress.cancelled() {
            true => Err(Error::Interrupted {
                done: epochs as u64,
                what: "epochs",
            }),
            false => Ok(()),
        }
    }

    /// The epoch (1-based) with the fewest monitored mistakes; 0 when none ran.
    pub(crate) fn best_epoch(&self) -> usize {
        self.state.best_epoch as usize
    }
}

/// A model the run can return: weights (the last or the average), or a vote.
#[derive(Debug, Clone)]
pub(crate) enum Snapshot {
    /// Augmented weights, `heads * (d + 1)`.
    Linear(Vec<f32>),
    /// The voted perceptron: the first vector (augmented, `heads * (d + 1)`), each step's
    /// training row and coefficients (`heads` a step), and each vector's count.
    Voted {
        start: Vec<f32>,
        rows: Vec<u32>,
        coef: Vec<f32>,
        counts: Vec<u64>,
    },
}

/// The result of an online run.
pub(crate) struct Online {
    stats: Vec<EpochStats>,
    stop: StopReason,
    model: Snapshot,
    best_epoch: usize,
    plan: Option<String>,
    arow_bound: Option<crate::report::ArowBound>,
}

/// Runs `rule` over the problem's rows epoch after epoch until a stop rule says so.
pub(crate) fn run<R: OnlineRule>(
    pb: &Problem<'_>,
    params: &Params,
    mut rule: R,
    progress: &mut dyn Progress,
) -> Result<Online> {
    let v = pb.view();
    let d = v.d;
    // (The update-norm tolerance is the batch rule's: online runs have none.)
    let mut watch = Watch::new(pb, params, 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut order: Vec<usize> = (0..v.n).collect();
    let mut start = rule.weights().to_vec();
    let mut stats = Vec::new();
    let mut best = None;
    let mut stop = StopReason::MaxEpochs;
    let snapshots = progress.wants_snapshots();
    let mut row_buf = Vec::new();
    let mut scaled = Vec::new();
    let on_read = pb.scale_on_read.as_ref();
    // Online scaling: the first epoch scales each row by the maxima of the rows before it and
    // itself; at its end the maxima are the whole set's, the scaling the model keeps (a warm
    // start keeps the model's).
    let mut running = on_read
        .filter(|_| pb.scales_online(params))
        .map(|sc| RunningScale::new(sc.factor.len(), online_floor(params.algo)));
    'epochs: for epoch in 0..params.epochs {
        if params.shuffle {
            order.shuffle(&mut rng);
        }
        start.copy_from_slice(rule.weights());
        let mut e = EpochStats {
            wrong_rows: (pb.rule == HeadRule::OneVsRest).then_some(0),
            ..EpochStats::default()
        };
        let on_device = rule.epoch(&order, &mut e)?;
        for (j, &i) in order.iter().enumerate().filter(|_| !on_device) {
            // Shuffled rows are random reads: start fetching a row some steps ahead, which
            // makes a shuffled epoch faster (docs/performance.md, "The online epoch").
            if let Some(&a) = order.get(j + PREFETCH_ROWS) {
                v.x.prefetch_row(a, d);
            }
            let mut row = v.x.row(i, d, &mut row_buf);
            if let Some(sc) = on_read {
                row = match running.as_mut().filter(|_| epoch == 0) {
                    Some(r) => {
                        let row = r.scale_row(row, &mut scaled, i, &pb.ds.source)?;
                        for &(j, k) in r.grown() {
                            rule.rescale(j as usize, k);
                        }
                        row
                    }
                    None => sc.scale_row(row, &mut scaled, i, &pb.ds.source)?,
                };
            }
            let step = rule.step(pb, i, row, v.y[i], v.row_weight(i))?;
            e.mistakes += step.mistakes;
            e.criterion += step.criterion;
            if let Some(r) = e.wrong_rows.as_mut() {
                *r += step.wrong_rows;
            }
            if v.sw.is_some() {
                *e.weighted.get_or_insert(0.0) += step.weighted;
            }
            if step.mistakes > 0 && snapshots {
                progress.snapshot(epoch + 1, &rule.model_now());
            }
            if let Some(why) = step.stop {
                e.update_norm = update_norm(rule.weights(), &start);
                stats.push(e);
                stop = why;
                break 'epochs;
            }
        }
        rule.epoch_end();
        if let Some(sh) = &pb.shard {
            // Iterative parameter mixing (McDonald, Hall and Mann, 2010): each process ran one
            // online epoch on its rows from the same weights; all continue from their mean.
            rule.mix(sh, &mut e, RowWeights::of(v.sw))?;
        }
        e.update_norm = update_norm(rule.weights(), &start);
        if pb.val.is_some() {
            e.val_mistakes = Some(rule.val_mistakes(pb)?);
        }
        let (better, why) = watch.end(&mut stats, e, progress);
        Watch::cancelled(progress, stats.len())?;
        if better && pb.val.is_some() {
            best = Some(rule.best(pb));
        }
        if let Some(why) = why {
            stop = why;
            break;
        }
    }
    Ok(Online {
        stats,
        stop,
        plan: rule.plan(),
        arow_bound: rule.arow_bound(pb)?,
        model: rule.finish(pb, best)?,
        best_epoch: watch.best_epoch(),
    })
}

/// The fitted model of an online run (in a data-parallel run with this process's rows'
/// scores of a linear model, gathered by the caller).
pub(crate) fn fitted(pb: &Problem<'_>, out: Online) -> Result<Fitted> {
    let mut scores = None;
    let plan = out.plan;
    let body = match out.model {
        Snapshot::Voted {
            start,
            rows,
            coef,
            counts,
        } => Body::Voted(Voted {
            rows: match Rows::from_augmented(&start, pb.ds.d) {
                rows if pb.fit_bias => rows,
                rows => rows.without_bias(),
            },
            counts,
            steps: Some(support_of(pb, rows, coef)),
        }),
        Snapshot::Linear(w) => {
            if pb.shard.is_some() {
                scores = Some(CpuBackend::new().scores(pb.view().data(), &w)?);
            }
            pb.linear_body(&w)
        }
    };
    let mut f = Fitted::on_cpu(body, out.stats, out.stop, out.best_epoch);
    f.ran.gpu_plan = plan;
    f.arow_bound = out.arow_bound;
    Ok(Fitted { scores, ..f })
}

/// The voted steps of training rows `rows`: the distinct rows in order of first use (in the
/// training space), each step's row an index among them.
fn support_of(pb: &Problem<'_>, rows: Vec<u32>, coef: Vec<f32>) -> VoteSteps {
    let v = pb.view();
    let mut at = std::collections::HashMap::new();
    let mut support = Vec::new();
    let mut buf = Vec::new();
    let rows = rows
        .into_iter()
        .map(|i| {
            *at.entry(i).or_insert_with(|| {
                let r = match v.x.row(i as usize, v.d, &mut buf) {
                    Row::Dense(x) => {
                        let idx: Vec<u32> = (0..x.len() as u32)
                            .filter(|&j| x[j as usize] != 0.0)
                            .collect();
                        let val = idx.iter().map(|&j| x[j as usize]).collect();
                        SparseRow { idx, val }
                    }
                    Row::Sparse { idx, val } => SparseRow {
                        idx: idx.to_vec(),
                        val: val.to_vec(),
                    },
                };
                support.push(r);
                support.len() as u32 - 1
            })
        })
        .collect();
    VoteSteps {
        support,
        rows,
        coef,
    }
}

/// Trains the online form of `params.algo` (the perceptron, averaged or voted) on the host
/// CPU (whatever the backends).
pub fn fit(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    progress: &mut dyn Progress,
) -> Result<Fitted> {
    let keep = Keep::of(params);
    let w = pb.initial_weights(params);
    let choice = match keep.voted {
        None => StepsChoice::GpuMayPick,
        Some(_) => StepsChoice::AsNamed,
    };
    let steps = steps_for(pb, params, backends.primary, choice);
    let stepped = |f: Result<Fitted>, ran: crate::report::Ran| {
        f.map(|mut f| {
            f.ran = crate::report::Ran {
                steps: Some(steps),
                gpu_plan: f.ran.gpu_plan.take(),
                ..ran
            };
            f
        })
    };
    let mut cpu = crate::report::Ran::on(&CpuBackend::new());
    let run_as = Stepped {
        steps,
        keep,
        update: StepUpdate::Perceptron,
    };
    match stepped_on(pb, params, run_as, backends.primary, &w, progress)? {
        Ok(f) => return Ok(f),
        Err(why) => cpu.fallback = why,
    }
    if params.streams > 1 {
        let rule = Streams::new(pb, params, keep, w);
        return stepped(fitted(pb, run(pb, params, rule, progress)?), cpu);
    }
    let rule = Perceptron::new(pb, params, keep, w);
    match params.minibatch {
        1 => fitted(pb, run(pb, params, rule, progress)?).map(|mut f| {
            f.ran.fallback = cpu.fallback;
            f
        }),
        _ => stepped(fitted(pb, run(pb, params, rule, progress)?), cpu),
    }
}

/// The perceptron's sequential rule (plain, averaged or voted as `params` say, in steps of
/// `params.minibatch` rows) from the problem's initial weights.
pub(crate) fn perceptron(pb: &Problem<'_>, params: &Params) -> impl OnlineRule {
    Perceptron::new(pb, params, Keep::of(params), pb.initial_weights(params))
}

/// Who sets a run's steps and streams where the user named neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepsChoice {
    /// On a GPU, the GPU's choice for the rows (`params::gpu_steps`).
    GpuMayPick,
    /// One row a step, one stream (a rule the steps would change, as the voted perceptron).
    AsNamed,
}

/// The steps and streams of a run: those the user named, or where they named neither and
/// `choice` lets it, the GPU's choice for the rows.
pub(crate) fn steps_for(
    pb: &Problem<'_>,
    params: &Params,
    backend: &dyn Backend,
    choice: StepsChoice,
) -> (usize, usize) {
    match (params.minibatch, params.streams) {
        (1, 1) if backend.kind() == BackendKind::Gpu && choice == StepsChoice::GpuMayPick => {
            // In a data-parallel run every process picks from the same count (the mean share),
            // so that all run the same rule.
            let n = pb.view().n;
            let n = match &pb.shard {
                Some(sh) => sh.total(Some(n as u64)).unwrap_or(0) as usize / sh.reduce.size(),
                None => n,
            };
            crate::params::gpu_steps(n)
        }
        given => given,
    }
}

/// What a stepped run keeps and which rule it steps by.
#[derive(Clone, Copy)]
pub(crate) struct Stepped {
    /// Rows a step and streams.
    pub(crate) steps: (usize, usize),
    /// The average or the votes.
    pub(crate) keep: Keep,
    /// The rule: the perceptron's, passive-aggressive or AROW.
    pub(crate) update: StepUpdate,
}

/// Trains a rule that has a stepped form besides its sequential one (passive-aggressive,
/// AROW): `run_as` on the primary backend (a GPU's kernels; on a CPU their twin, where the
/// user named the steps), then, where the user named the steps and a GPU could not take
/// them, as the kernels' CPU twin; else the sequential `rule` row by row on the host CPU.
/// The report's fallback says why the stepped form did not run where it was meant to.
pub(crate) fn fit_stepped_or<R: OnlineRule>(
    pb: &Problem<'_>,
    params: &Params,
    backends: &Backends<'_>,
    run_as: Stepped,
    progress: &mut dyn Progress,
    rule: impl FnOnce() -> R,
) -> Result<Fitted> {
    let w = pb.initial_weights(params);
    let named = (params.minibatch, params.streams) != (1, 1);
    let cpu = CpuBackend::new();
    let mut fallback = None;
    let tries: [&dyn Backend; 2] = [backends.primary, &cpu];
    for (k, backend) in tries.into_iter().enumerate() {
        // The twin on the CPU only where the user named the steps.
        if k == 1 && (fallback.is_none() || !named || backends.primary.kind() == BackendKind::Cpu) {
            break;
        }
        match stepped_on(pb, params, run_as, backend, &w, progress)? {
            Ok(mut f) => {
                f.ran.fallback = fallback;
                return Ok(f);
            }
            Err(why) => fallback = fallback.or(why),
        }
    }
    let mut f = fitted(pb, run(pb, params, rule(), progress)?)?;
    f.ran.fallback = fallback;
    Ok(f)
}

/// The online rule in steps and streams (`run`) bound to `backend` and run from the weights
/// `w`: `Err(None)` where it does not run so (not stepped, or the perceptron on a CPU, whose
/// row-by-row form runs it), `Err(Some(why))` where the backend could not take it.
pub(crate) fn stepped_on(
    pb: &Problem<'_>,
    params: &Params,
    run_as: Stepped,
    backend: &dyn Backend,
    w: &[f32],
    progress: &mut dyn Progress,
) -> Result<std::result::Result<Fitted, Option<String>>> {
    let steps = run_as.steps;
    let mut bound = DeviceSteps::bind(pb, params, run_as, backend, w, progress)?;
    if let Some(sh) = &pb.shard {
        // Every process binds, or none: a process whose backend refused makes all fall back.
        let ok = bound.is_ok() as u64;
        if sh.total(Some(ok)) != Some(sh.reduce.size() as u64) && ok == 1 {
            bound = Err(Some(
                "another process's backend could not take the stepped rule; every process \
                 ran the CPU's form"
                    .into(),
            ));
        }
    }
    match bound {
        Ok(rule) => {
            let mut f = fitted(pb, run(pb, params, rule, progress)?)?;
            let on_gpu = backend.kind() == BackendKind::Gpu;
            f.ran = crate::report::Ran {
                steps: Some(steps),
                gpu_plan: f.ran.gpu_plan.take().filter(|_| on_gpu),
                ..crate::report::Ran::on(backend)
            };
            Ok(Ok(f))
        }
        Err(why) => Ok(Err(why)),
    }
}

/// The perceptron or passive-aggressive rule in steps and streams run by a backend (a GPU:
/// `backend::steps`, shaders/steps.wgsl; the CPU: their twin):
/// an epoch is one call, the weights and the model are read back after it.
struct DeviceSteps<'a> {
    bound: Box<dyn StepsBound + 'a>,
    /// The (mixed) weights after the last epoch.
    w: Vec<f32>,
    /// The model after the last epoch, once read back (held-out rows score it).
    model: Option<Vec<f32>>,
    /// Rows have weights: epochs count their mistakes' weights.
    weighted: RowWeights,
    order: Vec<u32>,
}

impl<'a> DeviceSteps<'a> {
    /// Binds the rows to `backend` when the run is stepped or streamed and `backend` is a GPU
    /// (or, for the passive-aggressive and AROW rules, any backend: on the CPU the kernels'
    /// twin), and
    /// the kernels take it (no per-step snapshots, no voted perceptron). Otherwise the CPU
    /// runs the rule: `Err(None)` where no GPU was asked for or the rule is sequential,
    /// `Err(Some(why))` where the GPU could not take the run.
    fn bind(
        pb: &Problem<'_>,
        params: &Params,
        run_as: Stepped,
        backend: &'a dyn Backend,
        w0: &[f32],
        progress: &dyn Progress,
    ) -> Result<std::result::Result<DeviceSteps<'a>, Option<String>>> {
        let Stepped {
            steps: (step_rows, streams),
            keep,
            update,
        } = run_as;
        let v = pb.view();
        let stepped = step_rows > 1 || streams > 1;
        let on_gpu = backend.kind() == BackendKind::Gpu;
        let perceptron = update == StepUpdate::Perceptron;
        if on_gpu && perceptron && (!stepped || keep.voted.is_some()) {
            // A GPU was asked for, and the CPU runs the rule: the report says why.
            return Ok(Err(Some(match keep.voted {
                Some(_) => "the voted perceptron keeps every vector on the host; the CPU ran it"
                    .to_string(),
                None => format!(
                    "the GPU's online perceptron takes steps from {} rows (B S of about n / \
                     {}); below that, on these {} rows, the CPU ran the sequential rule",
                    2 * crate::params::GPU_STEPS_PER_EPOCH,
                    crate::params::GPU_STEPS_PER_EPOCH,
                    v.n
                ),
            })));
        }
        if (perceptron && !on_gpu) || !stepped || keep.voted.is_some() {
            return Ok(Err(None));
        }
        // (The passive-aggressive and AROW rules' steps run only as the kernels' twin on a
        // CPU, which takes no snapshots either.)
        let snapshots = progress.wants_snapshots();
        let ran_as = match (params.minibatch, params.streams) {
            (1, 1) => "the sequential rule",
            _ if snapshots && !perceptron => "the sequential rule",
            _ => "the same steps and streams",
        };
        let (gpus, rule) = match update {
            StepUpdate::PassiveAggressive(_) => ("the stepped", "passive-aggressive rule"),
            StepUpdate::Arow { .. } => ("the stepped", "AROW rule"),
            StepUpdate::Perceptron => ("the GPU's", "online perceptron"),
        };
        if snapshots {
            return Ok(Err(Some(format!(
                "{gpus} {rule} does not take an animation of every step yet; the CPU ran \
                 {ran_as}"
            ))));
        }
        // X as the kernels take it: borrowed where it is f32 rows already, else a copy
        // (widened, scaled as read), dense or sparse as given.
        let (mut dense, mut csr) = (Vec::new(), crate::backend::CsrBuf::new());
        let x = match (v.x, pb.scale_on_read.as_ref()) {
            (crate::backend::Matrix::Dense(Features::F32(x)), None) if x.len() == v.n * v.d => {
                StepX::Dense(x)
            }
            (crate::backend::Matrix::Csr(c), None) => match c.values {
                Features::F32(values) => StepX::Csr {
                    indptr: c.indptr,
                    indices: c.indices,
                    values,
                },
                _ => copy_rows(pb, &mut dense, &mut csr)?,
            },
            _ => copy_rows(pb, &mut dense, &mut csr)?,
        };
        let setup = StepsSetup {
            rule: pb.rule,
            tau: params.margin_threshold,
            eta: params.lr,
            step_rows,
            streams,
            average: keep.average,
            w0: w0.to_vec(),
            heads: pb.heads,
            update,
        };
        let weighted = v.sw.is_some() || v.own.is_some();
        let weights: Option<Vec<RowWeight>> =
            weighted.then(|| (0..v.n).map(|i| v.row_weight(i)).collect());
        let rows = StepRows {
            x,
            y: v.y,
            weights: weights.as_deref(),
            d: v.d,
            bias: v.bias,
        };
        match backend.bind_steps(rows, setup) {
            Ok(bound) => Ok(Ok(DeviceSteps {
                weighted: RowWeights::of(v.sw),
                bound,
                w: w0.to_vec(),
                model: None,
                order: Vec::with_capacity(v.n),
            })),
            Err(e @ (Error::Gpu(_) | Error::TooLarge(_))) => Ok(Err(Some(format!(
                "the GPU could not take the {rule}'s rows ({e}); the CPU ran {ran_as}"
            )))),
            Err(e) => Err(e),
        }
    }
}

/// The training rows as f32, scaled as read, into `dense` or (sparse rows) `csr`.
fn copy_rows<'x>(
    pb: &Problem<'_>,
    dense: &'x mut Vec<f32>,
    csr: &'x mut crate::backend::CsrBuf,
) -> Result<StepX<'x>> {
    let v = pb.view();
    let sparse = v.x.is_sparse();
    if !sparse {
        dense.reserve(v.n.saturating_mul(v.d));
    }
    let (mut buf, mut scaled) = (Vec::new(), Vec::new());
    for i in 0..v.n {
        let mut row = v.x.row(i, v.d, &mut buf);
        if let Some(sc) = pb.scale_on_read.as_ref() {
            row = sc.scale_row(row, &mut scaled, i, &pb.ds.source)?;
        }
        match row {
            Row::Dense(r) => dense.extend_from_slice(r),
            Row::Sparse { idx, val } => csr.push_row(idx.iter().copied().zip(val.iter().copied())),
        }
    }
    Ok(match sparse {
        true => StepX::from(&*csr),
        false => StepX::Dense(dense),
    })
}

impl DeviceSteps<'_> {
    /// The model read back; in a data-parallel run the mean of the processes' models (every
    /// process calls this at the same points).
    fn mixed_model(&mut self, pb: &Problem<'_>) -> Result<Vec<f32>> {
        let mut m = self.bound.model()?;
        if let Some(sh) = &pb.shard {
            sh.reduce.sum_f32(&mut m);
            let k = sh.reduce.size() as f32;
            m.iter_mut().for_each(|v| *v /= k);
        }
        Ok(m)
    }
}

impl OnlineRule for DeviceSteps<'_> {
    type Best = Vec<f32>;

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn model_now(&self) -> Vec<f32> {
        self.model.clone().unwrap_or_else(|| self.w.clone())
    }

    fn step(
        &mut self,
        _: &Problem<'_>,
        _: usize,
        _: Row<'_>,
        _: f32,
        _: RowWeight,
    ) -> Result<Step> {
        Err(Error::Gpu(
            "the stepped perceptron on a GPU runs whole epochs, not rows".into(),
        ))
    }

    fn epoch(&mut self, order: &[usize], e: &mut EpochStats) -> Result<bool> {
        self.order.clear();
        self.order.extend(order.iter().map(|&i| i as u32));
        let o = self.bound.epoch(&self.order)?;
        e.mistakes += o.mistakes;
        e.criterion += o.criterion;
        if let Some(r) = e.wrong_rows.as_mut() {
            *r += o.wrong_rows;
        }
        if self.weighted == RowWeights::Weighted {
            *e.weighted.get_or_insert(0.0) += o.weighted;
        }
        // The mixed weights (for the update norm); the model only where it is scored.
        self.w = self.bound.weights()?;
        self.model = None;
        Ok(true)
    }

    fn plan(&self) -> Option<String> {
        Some(self.bound.plan())
    }

    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, rw: RowWeights) -> Result<()> {
        // Every stream of every process continues from the processes' mean.
        shard.mix(&mut self.w, e, rw);
        self.bound.set_weights(&self.w)?;
        self.model = None;
        Ok(())
    }

    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        let model = self.mixed_model(pb)?;
        let m = val_mistakes(&pb.view(), &model, pb.rule);
        self.model = Some(model);
        Ok(match &pb.shard {
            // Over every process's share of the held-out rows.
            Some(sh) => sh.total(m),
            None => m,
        }
        .unwrap_or(0))
    }

    fn best(&self, _pb: &Problem<'_>) -> Vec<f32> {
        // (Asked right after `val_mistakes`, which read the model back.)
        self.model_now()
    }

    fn finish(mut self, pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        Ok(Snapshot::Linear(match best {
            Some(b) => b,
            None => self.mixed_model(pb)?,
        }))
    }
}

/// S streams of the perceptron over contiguous parts of each epoch's row order, every one
/// from the same weights, mixed by their mean at the end of the epoch: iterative parameter
/// mixing (as between MPI processes) inside one process, the form a GPU runs as S
/// independent workgroups. Each stream keeps its own average, which counts the mix as a
/// jump; the model is the mean of the streams' averages (or weights).
struct Streams {
    rules: Vec<Perceptron>,
    /// The epoch's rows met so far.
    pos: usize,
    /// The stream taking the current row.
    cur: usize,
    /// Rows an epoch.
    n: usize,
    /// The mixed weights (the start, then after every epoch).
    w: Vec<f32>,
}

impl Streams {
    fn new(pb: &Problem<'_>, params: &Params, keep: Keep, w: Vec<f32>) -> Streams {
        let rules = (0..params.streams)
            .map(|_| Perceptron::new(pb, params, keep, w.clone()))
            .collect();
        Streams {
            rules,
            pos: 0,
            cur: 0,
            n: pb.view().n,
            w,
        }
    }

    /// The first row position (in the epoch's order) of stream `s`.
    fn start(&self, s: usize) -> usize {
        stream_part(s, self.n, self.rules.len()).0
    }

    /// The mean of the streams' models (weights or averages) on this process.
    fn local_model(&self) -> Vec<f32> {
        mean(self.rules.iter().map(|r| r.model_now()))
    }

    /// Every stream continues from `w`, its average recording the jump.
    fn set_all(&mut self, w: &[f32]) {
        for r in &mut self.rules {
            if let Some(avg) = r.avg.as_mut() {
                avg.jump(&r.w, w);
            }
            r.w.copy_from_slice(w);
        }
    }
}

/// The element-wise mean of equally long vectors, summed in their order.
fn mean(vs: impl Iterator<Item = Vec<f32>>) -> Vec<f32> {
    let mut k = 0;
    let mut sum: Vec<f32> = Vec::new();
    for v in vs {
        if sum.is_empty() {
            sum = v;
        } else {
            sum.iter_mut().zip(&v).for_each(|(s, x)| *s += x);
        }
        k += 1;
    }
    let k = k.max(1) as f32;
    sum.iter_mut().for_each(|s| *s /= k);
    sum
}

impl OnlineRule for Streams {
    type Best = Vec<f32>;

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn model_now(&self) -> Vec<f32> {
        self.local_model()
    }

    fn step(
        &mut self,
        pb: &Problem<'_>,
        i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step> {
        while self.cur + 1 < self.rules.len() && self.pos >= self.start(self.cur + 1) {
            self.cur += 1;
        }
        self.pos += 1;
        self.rules[self.cur].step(pb, i, row, y, wt)
    }

    fn epoch_end(&mut self) {
        for r in &mut self.rules {
            r.epoch_end();
        }
        let w = mean(self.rules.iter().map(|r| r.w.clone()));
        self.set_all(&w);
        self.w = w;
        (self.pos, self.cur) = (0, 0);
    }

    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, rw: RowWeights) -> Result<()> {
        let mut w = self.w.clone();
        shard.mix(&mut w, e, rw);
        self.set_all(&w);
        self.w = w;
        Ok(())
    }

    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        let m = val_mistakes(&pb.view(), &self.best(pb), pb.rule);
        Ok(match &pb.shard {
            Some(sh) => sh.total(m),
            None => m,
        }
        .unwrap_or(0))
    }

    fn best(&self, pb: &Problem<'_>) -> Vec<f32> {
        let mut a = self.local_model();
        if let Some(sh) = &pb.shard {
            sh.reduce.sum_f32(&mut a);
            let k = sh.reduce.size() as f32;
            a.iter_mut().for_each(|v| *v /= k);
        }
        a
    }

    fn finish(self, pb: &Problem<'_>, best: Option<Vec<f32>>) -> Result<Snapshot> {
        let model = best.unwrap_or_else(|| self.best(pb));
        Ok(Snapshot::Linear(model))
    }
}

/// What to keep besides the final weights.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Keep {
    /// The average of the weights over all steps (Daume's lazy-sum trick).
    pub(crate) average: bool,
    /// Every intermediate weight vector with its survival count, at most this many.
    pub(crate) voted: Option<usize>,
}

impl Keep {
    /// What the perceptron of `params` keeps: the average (averaged), the vectors (voted).
    pub(crate) fn of(params: &Params) -> Keep {
        Keep {
            average: params.algo == Algo::Averaged,
            voted: (params.algo == Algo::Voted).then_some(params.max_vectors),
        }
    }
}

/// The vote at some step: the steps taken then and the count of the vector then current.
#[derive(Debug, Clone, Copy)]
struct VotePrefix {
    steps: usize,
    survived: u64,
}

/// The averaged perceptron's lazy sums. Averaging over the weights after each of the T steps:
/// with u = sum over updates of (step index) * update and c = T + 1 at the end, the average
/// is (c w - w0 - u) / (c - 1). The step counter is an integer and u is summed in f64, so on
/// integer data both stay exact up to 2^53 (an f32 counter stops moving at 2^24 steps).
struct Average {
    w0: Vec<f32>,
    u: Vec<f64>,
    c: u64,
}

impl Average {
    fn new(w: &[f32]) -> Self {
        Average {
            w0: w.to_vec(),
            u: vec![0.0; w.len()],
            c: 1,
        }
    }

    /// Records the update `a * [row, bias]` of the head at `off` (d + 1 weights): O(d) for a
    /// dense row, O(non-zeros) for a sparse one.
    fn add(&mut self, off: usize, d: usize, a: f32, row: Row<'_>, bias: f32) {
        let ca = self.c as f64 * a as f64;
        let u = &mut self.u[off..off + d];
        match row {
            Row::Dense(x) => {
                for (u, &x) in u.iter_mut().zip(x) {
                    *u += ca * x as f64;
                }
            }
            Row::Sparse { idx, val } => {
                for (&j, &x) in idx.iter().zip(val) {
                    u[j as usize] += ca * x as f64;
                }
            }
        }
        self.u[off + d] += ca * bias as f64;
    }

    /// Records a jump of the weights from `old` to `new` (parameter mixing) as an update.
    fn jump(&mut self, old: &[f32], new: &[f32]) {
        let c = self.c as f64;
        for ((u, &a), &b) in self.u.iter_mut().zip(old).zip(new) {
            *u += c * (b as f64 - a as f64);
        }
    }

    fn finish(&self, w: &[f32]) -> Vec<f32> {
        if self.c <= 1 {
            return w.to_vec();
        }
        let c = self.c as f64;
        w.iter()
            .zip(&self.u)
            .zip(&self.w0)
            .map(|((&wj, &uj), &w0j)| ((c * wj as f64 - w0j as f64 - uj) / (c - 1.0)) as f32)
            .collect()
    }
}

/// The linear model now: the weights, or their average; in a data-parallel run the mean of
/// the processes' averages (every process calls this at the same points).
fn mixed_average(pb: &Problem<'_>, avg: &Option<Average>, w: &[f32]) -> Vec<f32> {
    let Some(avg) = avg else {
        return w.to_vec();
    };
    let mut a = avg.finish(w);
    if let Some(sh) = &pb.shard {
        sh.reduce.sum_f32(&mut a);
        let k = sh.reduce.size() as f32;
        a.iter_mut().for_each(|v| *v /= k);
    }
    a
}

/// The voted perceptron kept compactly: the first vector, then each mistake's step (the
/// training row and its coefficient for each head) and the count of the vector it retired.
struct Votes {
    cap: usize,
    /// Most steps that fit the memory budget.
    fit: usize,
    heads: usize,
    start: Vec<f32>,
    rows: Vec<u32>,
    coef: Vec<f32>,
    /// The counts of the vectors before the current one (the first may be 0).
    counts: Vec<u64>,
    /// Vectors among them that vote (count > 0).
    voting: usize,
    survived: u64,
}

impl Votes {
    fn new(cap: usize, w: &[f32], heads: usize) -> Votes {
        Votes {
            cap,
            fit: (crate::limits::budget() / (12 + 4 * heads as u64)) as usize,
            heads,
            start: w.to_vec(),
            rows: Vec::new(),
            coef: Vec::new(),
            counts: Vec::new(),
            voting: 0,
            survived: 0,
        }
    }

    /// One step: `mistake` is the row a mistake added and its coefficients (None: no
    /// mistake). Returns false when the vector cap is reached (the vector is not retired;
    /// training stops).
    fn step(&mut self, mistake: Option<(usize, &[f32])>) -> Result<bool> {
        match mistake {
            // A mistake: the vector before the update retires with its count.
            Some((i, a)) => {
                if self.survived > 0 && self.voting + 1 >= self.cap {
                    return Ok(false);
                }
                self.reserve_one()?;
                self.voting += usize::from(self.survived > 0);
                self.counts.push(self.survived);
                self.rows.push(i as u32);
                self.coef.extend_from_slice(a);
                self.survived = 1;
            }
            None => self.survived += 1,
        }
        Ok(true)
    }

    /// Room for one more step within the memory budget, never by an aborting allocation.
    fn reserve_one(&mut self) -> Result<()> {
        let steps = self.rows.len() + 1;
        let too_big = || Error::Memory {
            what: format!("the voted perceptron's {steps} steps"),
            bytes: steps as u64 * (12 + 4 * self.heads as u64),
            available: self.fit as u64 * (12 + 4 * self.heads as u64),
        };
        if steps > self.fit {
            return Err(too_big());
        }
        let ok = self.rows.try_reserve(1).is_ok()
            && self.counts.try_reserve(1).is_ok()
            && self.coef.try_reserve(self.heads).is_ok();
        ok.then_some(()).ok_or_else(too_big)
    }

    /// The vote at this step.
    fn prefix(&self) -> VotePrefix {
        VotePrefix {
            steps: self.rows.len(),
            survived: self.survived,
        }
    }

    /// The vote of `p`.
    fn into_model(mut self, p: VotePrefix) -> Snapshot {
        self.rows.truncate(p.steps);
        self.coef.truncate(p.steps * self.heads);
        self.counts.truncate(p.steps);
        self.counts.push(p.survived);
        Snapshot::Voted {
            start: self.start,
            rows: self.rows,
            coef: self.coef,
            counts: self.counts,
        }
    }
}

/// Scores held-out rows for the voted perceptron as it grows: the steps since the last call
/// move each row's running scores and votes on (the training rows are the steps' rows), and
/// the current vector votes on top with its count so far.
struct VotedValidation {
    scorer: Option<VoteScorer>,
    scored: usize,
    outputs: usize,
}

impl VotedValidation {
    fn mistakes(&mut self, pb: &Problem<'_>, votes: &Votes) -> Result<u64> {
        let (Some(data), Some((_, yv))) = (pb.view().val_data(), &pb.val) else {
            return Ok(0);
        };
        let cpu = CpuBackend::new();
        let scorer = match &mut self.scorer {
            Some(s) => s,
            None => self.scorer.insert(VoteScorer::new(
                data,
                &votes.start,
                pb.heads,
                self.outputs,
                &cpu,
            )?),
        };
        let (from, upto, h) = (self.scored, votes.rows.len(), votes.heads);
        scorer.advance(
            data,
            pb.view().x,
            &votes.rows[from..upto],
            &votes.coef[from * h..upto * h],
            &votes.counts[from..upto],
            &cpu,
        )?;
        self.scored = upto;
        let now = scorer.votes_with(votes.survived);
        let wrong = now
            .chunks_exact(self.outputs)
            .zip(yv)
            .filter(|(v, &y)| predicted_wrong(pb.rule, v, y))
            .count();
        Ok(wrong as u64)
    }
}

/// The perceptron's online rule: binary, multiclass or one-vs-rest (the problem's head rule),
/// with the average or the vote kept when asked.
struct Perceptron {
    w: Vec<f32>,
    /// The weights before the row's update (the voted perceptron retires them).
    before: Vec<f32>,
    /// The row's scores, one per head.
    s: Vec<f32>,
    eta: f32,
    tau: f32,
    avg: Option<Average>,
    votes: Option<Votes>,
    voted_val: VotedValidation,
    /// The row's coefficient for each head (the voted perceptron's step).
    step_coef: Vec<f32>,
    /// Rows per step (1: the sequential rule). The rows of a step are scored by the weights
    /// the step started with and their updates added together; the average is over steps.
    step_rows: usize,
    /// Rows of the current step so far.
    in_step: usize,
    /// The weights the current step scores with (when `step_rows` > 1).
    w_step: Vec<f32>,
}

/// The best epoch's model: the weights (or their average), or the vote then.
enum PerceptronBest {
    Linear(Vec<f32>),
    Vote(VotePrefix),
}

impl Perceptron {
    fn new(pb: &Problem<'_>, params: &Params, keep: Keep, w: Vec<f32>) -> Perceptron {
        let outputs = if pb.heads == 1 { 1 } else { pb.heads };
        Perceptron {
            before: w.clone(),
            s: vec![0f32; pb.heads],
            eta: params.lr,
            tau: params.margin_threshold,
            avg: keep.average.then(|| Average::new(&w)),
            votes: keep.voted.map(|cap| Votes::new(cap, &w, pb.heads)),
            voted_val: VotedValidation {
                scorer: None,
                scored: 0,
                outputs,
            },
            step_coef: vec![0f32; pb.heads],
            step_rows: params.minibatch.max(1),
            in_step: 0,
            w_step: if params.minibatch > 1 {
                w.clone()
            } else {
                Vec::new()
            },
            w,
        }
    }

    /// Ends the current step: the average counts the weights after it once more.
    fn end_step(&mut self) {
        self.in_step = 0;
        if let Some(avg) = self.avg.as_mut() {
            avg.c += 1;
        }
    }
}

impl OnlineRule for Perceptron {
    type Best = PerceptronBest;

    fn rescale(&mut self, j: usize, k: f32) {
        let da = self.w.len() / self.s.len().max(1);
        for h in 0..self.s.len() {
            let at = h * da + j;
            self.w[at] *= k;
            self.before[at] *= k;
            if let Some(v) = self.w_step.get_mut(at) {
                *v *= k;
            }
            if let Some(avg) = self.avg.as_mut() {
                avg.u[at] *= f64::from(k);
                avg.w0[at] *= k;
            }
        }
    }

    fn row_scores(&self) -> Option<&[f32]> {
        Some(&self.s)
    }

    fn weights(&self) -> &[f32] {
        &self.w
    }

    fn weights_mut(&mut self) -> &mut [f32] {
        &mut self.w
    }

    fn model_now(&self) -> Vec<f32> {
        match &self.avg {
            Some(avg) => avg.finish(&self.w),
            None => self.w.clone(),
        }
    }

    fn step(
        &mut self,
        pb: &Problem<'_>,
        i: usize,
        row: Row<'_>,
        y: f32,
        wt: RowWeight,
    ) -> Result<Step> {
        let v = pb.view();
        let (d, bias) = (v.d, v.bias);
        let da = d + 1;
        let Perceptron {
            w,
            before,
            s,
            eta,
            avg,
            votes,
            step_coef,
            w_step,
            in_step,
            ..
        } = self;
        let scoring: &[f32] = if w_step.is_empty() {
            w
        } else {
            if *in_step == 0 {
                w_step.copy_from_slice(w);
            }
            w_step
        };
        for (h, sh) in s.iter_mut().enumerate() {
            *sh = row.decision(&scoring[h * da..(h + 1) * da], bias);
        }
        let voting = votes.is_some();
        let mut updated = false;
        let o = row_rule(pb.rule, self.tau, s, y, wt, |h, coef| {
            if voting && !updated {
                before.copy_from_slice(w);
                step_coef.fill(0.0);
            }
            updated = true;
            let a = *eta * coef;
            row.axpy(a, &mut w[h * da..h * da + d]);
            w[h * da + d] += a * bias;
            if voting {
                step_coef[h] += a;
            }
            if let Some(avg) = avg.as_mut() {
                avg.add(h * da, d, a, row, bias);
            }
        });
        let mut step = Step {
            mistakes: o.mistakes,
            criterion: o.criterion,
            weighted: o.weighted,
            wrong_rows: o.wrong_rows,
            stop: None,
        };
        if let Some(votes) = votes.as_mut() {
            if !votes.step(updated.then_some((i, &step_coef[..])))? {
                // The cap is reached: the vote keeps the vector before this update.
                w.copy_from_slice(before);
                step.stop = Some(StopReason::MaxVectors);
                return Ok(step);
            }
        }
        self.in_step += 1;
        if self.in_step == self.step_rows {
            self.end_step();
        }
        Ok(step)
    }

    fn epoch_end(&mut self) {
        if self.in_step > 0 {
            self.end_step();
        }
    }

    fn mix(&mut self, shard: &Shard, e: &mut EpochStats, rw: RowWeights) -> Result<()> {
        let before_mix = self.w.clone();
        shard.mix(&mut self.w, e, rw);
        if let Some(avg) = self.avg.as_mut() {
            // The jump to the mean counts as one more update in the lazy sums, so the
            // average stays that of the weights this process went through.
            avg.jump(&before_mix, &self.w);
        }
        Ok(())
    }

    fn val_mistakes(&mut self, pb: &Problem<'_>) -> Result<u64> {
        match &self.votes {
            Some(votes) => self.voted_val.mistakes(pb, votes),
            None => {
                let m = val_mistakes(&pb.view(), &mixed_average(pb, &self.avg, &self.w), pb.rule);
                Ok(match &pb.shard {
                    // Over every process's share of the held-out rows.
                    Some(sh) => sh.total(m),
                    None => m,
                }
                .unwrap_or(0))
            }
        }
    }

    fn best(&self, pb: &Problem<'_>) -> PerceptronBest {
        match &self.votes {
            Some(votes) => PerceptronBest::Vote(votes.prefix()),
            None => PerceptronBest::Linear(mixed_average(pb, &self.avg, &self.w)),
        }
    }

    fn finish(self, pb: &Problem<'_>, best: Option<PerceptronBest>) -> Result<Snapshot> {
        Ok(match (best, self.votes) {
            (best, Some(votes)) => {
                let p = match best {
                    Some(PerceptronBest::Vote(p)) => p,
                    _ => votes.prefix(),
                };
                votes.into_model(p)
            }
            (Some(PerceptronBest::Linear(b)), None) => Snapshot::Linear(b),
            (_, None) => Snapshot::Linear(mixed_average(pb, &self.avg, &self.w)),
        })
    }
}
