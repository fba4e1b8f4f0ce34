//! One pass over rows that arrive in blocks, never held whole: training on a file larger
//! than memory. Each block is a data set of its own (a share of 8 MiB of text, the shares
//! parsed on every core while the rule trains on the text before), made a [`Problem`] with
//! the classes of the first 8 MiB, and its rows are stepped through the same online rule the in-memory run
//! steps (`OnlineRule`): the perceptron (plain, averaged, multiclass, one-vs-rest),
//! passive-aggressive, AROW and Winnow. Memory is the rule's state (the weights, and the
//! running average or the confidences) plus two texts' blocks.
//!
//! Online scaling ([`Scale::Online`]) is kept across the blocks: each row is scaled by the
//! largest magnitudes of the rows before it and its own, and the model keeps the final ones.
//! What a pass cannot do is refused, not approximated: held-out rows and patience (no rows
//! are kept), a fitted scaling and balanced class weights (both need every row first), the
//! voted and kernel perceptrons and the batch forms (they keep rows or need them again), and
//! mixed streams. Rows come in file order (no shuffle). The report's accuracy is progressive
//! (each row predicted by the model before the row updated it, as Vowpal Wabbit reports its
//! loss): the rows are gone by the end, so the final model is never scored on them, and the
//! achieved margin is not known; R is.

use std::path::Path;

use super::online::{self, OnlineRule, Snapshot};
use super::{arow, overflow, pa, winnow, Holdout, Problem, Progress, Trained};
use crate::backend::cpu::CpuBackend;
use crate::backend::{predicted_wrong, EpochStats, HeadRule, StopReason};
use crate::data::scale::{online_floor, RunningScale, Scaler};
use crate::data::vw::Block;
use crate::data::{LabelBuilder, Labels};
use crate::error::{Error, Param, Result};
use crate::matrix::Row;
use crate::model::Model;
use crate::params::{Algo, ClassWeight, Mode, Params, Scale, TrainParams};
use crate::report::{radius, Ran, TrainReport};

/// Trains `params`' online rule in one pass over `blocks` (in order), on the CPU.
/// `source` names the input in errors.
pub fn fit(
    source: &Path,
    blocks: impl Iterator<Item = Result<Block>>,
    params: &Params,
    progress: &mut dyn Progress,
) -> Result<Trained> {
    check(params)?;
    let input = Input { source, blocks };
    match params.algo {
        Algo::PassiveAggressive => run(input, params, progress, pa::rule),
        Algo::Arow => run(input, params, progress, arow::rule),
        Algo::Winnow => run(input, params, progress, winnow::rule),
        _ => run(input, params, progress, online::perceptron),
    }
}

/// The blocks of rows, and the name of the input they come from.
struct Input<'p, I> {
    source: &'p Path,
    blocks: I,
}

/// Refuses what one pass over rows it does not keep cannot do.
fn check(params: &Params) -> Result<()> {
    let refuse = |p: Param, v: String, why: &str| Err(Error::param(p, v, why.to_string()));
    let online_rule = match params.algo {
        Algo::PassiveAggressive | Algo::Arow => true,
        Algo::Online | Algo::Averaged | Algo::Winnow | Algo::Multiclass => {
            params.effective_mode() == Mode::Online
        }
        _ => false,
    };
    if !online_rule {
        return refuse(
            Param::Algo,
            params.algo.name().to_string(),
            "must be a rule that keeps no rows in a streamed run: online, averaged, pa, arow, \
             or multiclass or winnow in online mode",
        );
    }
    if let Some(f) = params.validation_fraction {
        return refuse(
            Param::ValidationFraction,
            f.to_string(),
            "must be unset in a streamed run, which keeps no rows to hold out",
        );
    }
    if !matches!(params.scale, Scale::None | Scale::Online) {
        return refuse(
            Param::Scale,
            params.scale.name().to_string(),
            "must be online or none in a streamed run: fitting a scaling needs every row before \
             training, and online scaling keeps each feature's largest magnitude as it reads",
        );
    }
    if params.scale == Scale::Online && params.algo == Algo::Winnow {
        return refuse(
            Param::Scale,
            "online".to_string(),
            "must be none for winnow in a streamed run: its multiplicative weights cannot \
             follow a feature's scale as it grows",
        );
    }
    if matches!(params.class_weight, Some(ClassWeight::Balanced)) {
        return refuse(
            Param::ClassWeight,
            "balanced".to_string(),
            "cannot be balanced in a streamed run, which cannot count the classes first (give \
             each class its weight)",
        );
    }
    if params.streams > 1 {
        return refuse(
            Param::Streams,
            params.streams.to_string(),
            "must be 1 in a streamed run: one stream of rows, in file order",
        );
    }
    if params.arow.is_some_and(|a| !a.covariance.is_diagonal()) {
        return refuse(
            Param::ArowCovariance,
            "full".to_string(),
            "must be diagonal in a streamed run (the full covariance is for a few features \
             held in memory)",
        );
    }
    Ok(())
}

/// What the pass has counted so far.
#[derive(Default)]
struct Tally {
    e: EpochStats,
    /// Rows seen, and those the model predicted wrong as it met them.
    n: usize,
    wrong: u64,
    /// R so far: the largest ||[x, bias]||.
    radius: f64,
    /// Bytes of input read.
    bytes: u64,
}

/// The pass: the rule `make` builds from the first block, stepped through every row.
fn run<R: OnlineRule>(
    Input { source, blocks }: Input<'_, impl Iterator<Item = Result<Block>>>,
    params: &Params,
    progress: &mut dyn Progress,
    make: impl FnOnce(&Problem<'_>, &Params) -> R,
) -> Result<Trained> {
    let t0 = std::time::Instant::now();
    let mut blocks = blocks.peekable();
    let Some(first) = blocks.next().transpose()? else {
        return Err(Error::data(source, "empty input: no examples"));
    };
    // The classes: those of the first text read (every block parsed from its 8 MiB), held
    // already; a class first met later is an error.
    let mut head = vec![first];
    let text_end = head[0].bytes;
    while let Some(b) = blocks.next_if(|b| matches!(b, Ok(b) if b.bytes == text_end)) {
        head.push(b?);
    }
    let ty = head[0].data.require_labels()?.ty;
    let mut names = LabelBuilder::default();
    for b in &head {
        for c in &b.data.require_labels()?.classes {
            names.push(c);
        }
    }
    let classes = names.finish().classes;
    let mut blocks = head.into_iter().map(Ok).chain(blocks);
    let mut block = blocks
        .next()
        .transpose()?
        .ok_or_else(|| Error::data(source, "no rows"))?;
    let relabel = |block: &mut Block| -> Result<()> {
        let index = block
            .data
            .class_indices_in(&classes, ty, "the stream's first 8 MiB's")?;
        block.data.labels = Some(Labels {
            classes: classes.clone(),
            index,
            ty,
        });
        Ok(())
    };
    relabel(&mut block)?;
    // Each block is a problem of its own, unscaled: online scaling is kept across the blocks
    // here, each row scaled by the maxima of the rows before it and its own.
    let raw = TrainParams {
        scale: Scale::None,
        ..(**params).clone()
    }
    .validate()?;
    let mut rule = make(
        &Problem::build(&block.data, &raw, Holdout::FromParams, None)?,
        params,
    );
    let mut t = Tally::default();
    let mut running = (params.scale == Scale::Online)
        .then(|| RunningScale::new(block.data.d, online_floor(params.algo)));
    loop {
        let pb = Problem::build(&block.data, &raw, Holdout::FromParams, None)?;
        let stop = pass(&mut rule, &pb, &mut t, running.as_mut())?;
        t.bytes = block.bytes;
        progress.rows(t.n as u64, t.bytes);
        if progress.cancelled() {
            return Err(Error::Interrupted {
                done: t.n as u64,
                what: "rows",
            });
        }
        let next = match stop {
            None => blocks.next().transpose()?,
            Some(_) => None,
        };
        match next {
            Some(mut b) => {
                relabel(&mut b)?;
                block = b;
            }
            None => {
                let scaling = running.map(|r| r.scaler());
                let seconds = t0.elapsed().as_secs_f64();
                return finish(rule, &pb, params, t, stop, scaling, seconds);
            }
        }
    }
}

/// Steps `rule` through the rows of one block; why training stops, if a row says so.
fn pass<R: OnlineRule>(
    rule: &mut R,
    pb: &Problem<'_>,
    t: &mut Tally,
    mut scale: Option<&mut RunningScale>,
) -> Result<Option<StopReason>> {
    let v = pb.view();
    if pb.rule == HeadRule::OneVsRest {
        t.e.wrong_rows.get_or_insert(0);
    }
    if scale.as_ref().is_some_and(|sc| sc.d() != v.d) {
        return Err(Error::data(
            &pb.ds.source,
            format!(
                "a block of {} features in a stream of {}",
                v.d,
                scale.map_or(0, |s| s.d())
            ),
        ));
    }
    if scale.is_none() {
        t.radius = t.radius.max(radius(&pb.ds.x, v.d, v.bias));
    }
    let (mut buf, mut scaled) = (Vec::new(), Vec::new());
    for i in 0..v.n {
        let mut row = v.x.row(i, v.d, &mut buf);
        if let Some(sc) = scale.as_deref_mut() {
            // Row numbers in errors count from the stream's start.
            row = sc.scale_row(row, &mut scaled, t.n, &pb.ds.source)?;
            for &(j, k) in sc.grown() {
                rule.rescale(j as usize, k);
            }
            // R of the rows as the rule met them (each scaled by the maxima then).
            let norm2 = match row {
                Row::Dense(x) => x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>(),
                Row::Sparse { val, .. } => val.iter().map(|&v| f64::from(v).powi(2)).sum(),
            };
            t.radius = t.radius.max((norm2 + f64::from(v.bias).powi(2)).sqrt());
        }
        let step = rule.step(pb, i, row, v.y[i], v.row_weight(i))?;
        if let Some(s) = rule.row_scores() {
            t.wrong += predicted_wrong(pb.rule, s, v.y[i]) as u64;
        }
        t.n += 1;
        t.e.mistakes += step.mistakes;
        t.e.criterion += step.criterion;
        if let Some(r) = t.e.wrong_rows.as_mut() {
            *r += step.wrong_rows;
        }
        if v.sw.is_some() {
            *t.e.weighted.get_or_insert(0.0) += step.weighted;
        }
        if step.stop.is_some() {
            return Ok(step.stop);
        }
    }
    Ok(None)
}

/// The model and report of a finished pass; `pb` is the last block's problem (its kind,
/// heads and bias are every block's).
fn finish<R: OnlineRule>(
    mut rule: R,
    pb: &Problem<'_>,
    params: &Params,
    mut t: Tally,
    stop: Option<StopReason>,
    scaling: Option<Scaler>,
    seconds: f64,
) -> Result<Trained> {
    let ds = &pb.ds;
    let scaling_note = scaling.as_ref().map(|_| {
        format!(
            "online (each row scaled by the largest magnitudes of the rows before it and its \
             own{})",
            match online_floor(params.algo) {
                f if f > 0.0 => "; features under 1 are left as they are",
                _ => "",
            }
        )
    });
    rule.epoch_end();
    t.e.update_norm = rule
        .weights()
        .iter()
        .map(|&w| (w as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    let body = match rule.finish(pb, None)? {
        Snapshot::Linear(w) => pb.linear_body(&w),
        Snapshot::Voted { .. } => {
            return Err(Error::param(
                Param::Algo,
                params.algo.name(),
                "a streamed run cannot keep a vote".to_string(),
            ))
        }
    };
    if !(body.is_finite() && t.e.criterion.is_finite()) {
        return Err(overflow(ds));
    }
    let labels = ds.require_labels()?;
    let model = Model::typed(
        params.algo,
        labels.classes.clone(),
        labels.ty,
        ds.d,
        body,
        (**params).clone(),
    )
    .and_then(|m| m.with_hashing(ds.hashing.clone()))
    .and_then(|m| m.with_scaling(scaling))
    .map_err(|m| Error::data(&ds.source, format!("the trained model is invalid: {m}")))?;
    let ran = Ran::on(&CpuBackend::new());
    let ovr = pb.rule == HeadRule::OneVsRest;
    let e = t.e;
    let report = TrainReport {
        algo: params.algo.name().to_string(),
        backend: ran.backend.name().to_string(),
        device: ran.device,
        n: t.n,
        d: ds.d,
        epochs: 1,
        converged: e.mistakes == 0,
        stop_reason: match (stop, e.mistakes) {
            (Some(why), _) => why,
            (None, 0) => StopReason::Converged,
            (None, _) => StopReason::MaxEpochs,
        },
        train_accuracy: None,
        progressive_accuracy: Some(1.0 - t.wrong as f64 / t.n.max(1) as f64),
        scaling: scaling_note,
        held_out: None,
        chosen: None,
        mistakes_per_epoch: vec![e.mistakes],
        criterion_per_epoch: vec![e.criterion],
        update_norm_per_epoch: vec![e.update_norm],
        total_mistakes: e.mistakes,
        radius: t.radius,
        margin: None,
        mistake_bound: None,
        seconds,
        fallback: None,
        best_epoch: 1,
        n_validation: None,
        validation_accuracy: None,
        validation_accuracy_per_epoch: None,
        heads: ovr.then_some(pb.heads),
        wrong_rows_per_epoch: e.wrong_rows.map(|r| vec![r]),
        minibatch: (params.minibatch > 1).then_some(params.minibatch),
        streams: (params.minibatch > 1).then_some(1),
        gpu_plan: None,
        storage: Some("f32".to_string()),
        arow_bound: None,
        streamed_bytes: Some(t.bytes),
    };
    Ok(Trained {
        model: model.with_training(report.clone()),
        report,
    })
}
