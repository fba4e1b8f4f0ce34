//! `rosenblatt train`: options to checked parameters, training with a progress bar, the model
//! and pictures written, and the text or JSON report.

use std::path::Path;

use anyhow::Context;
use rosenblatt_app::plot;
use rosenblatt_backend::cpu::CpuBackend;
use rosenblatt_backend::{Backend, BackendChoice, BackendKind, StopReason};
use rosenblatt_core::data;
use rosenblatt_core::data::scale::range_spread;
use rosenblatt_core::output::{temp_beside, Temp};
use rosenblatt_core::params::{Algo, ClassWeight, Mode, Params, Scale};
use rosenblatt_train::algo::{self, Holdout, Problem, TrainReport};
use rosenblatt_train::model::{Model, ModelKind};

use rosenblatt_backend::{Distributed, Reduce, Selected};

use super::args::TrainArgs;
use super::errors::{flag_error, usage};
use super::{
    check_outputs, load_data, load_options, select_backend_nth, stage, world, Bar, Like, Voice,
};

/// What `--distributed` trains: the batch family and the online rules (on each process's CPU,
/// or GPU where the rule runs there).
/// (Every process reads the whole data set, so scaling and held-out rows are fitted and drawn
/// alike everywhere; each process then trains on, and scores, its share.)
fn check_distributed(a: &TrainArgs, params: &Params) -> anyhow::Result<()> {
    if matches!(params.algo, Algo::Kernel | Algo::Voted) {
        return Err(usage(
            "--distributed",
            "trains the batch forms (batch, multiclass, pocket, averaged, winnow) and the online \
             rules (online, averaged, winnow, pa, arow) by parameter mixing; the voted and \
             kernel perceptrons (a model of many vectors) run in one process",
        ));
    }
    if a.animate.is_some() {
        return Err(usage("--distributed", "cannot draw --animate"));
    }
    Ok(())
}

/// Vowpal Wabbit text of at least this many bytes trains by default as one streamed pass of
/// AROW with online scaling ([`auto_stream`]). On generated noisy click logs that pass beats
/// the in-memory default from 10,000 rows (4.6 MB: 0.927 against 0.922 test accuracy, in
/// 0.15 s against 0.52 s) to 900,000 (412 MB: 0.848 in 1.8 s at 36 MB, Vowpal Wabbit's one
/// pass 0.849 in 2.3 s at 41 MB, the in-memory default 0.795 in 99 s); a text set of 950 rows
/// with a count feature gains from several epochs (0.964 in memory, 0.954 streamed). The
/// threshold leaves sets of up to about 35,000 such rows in memory.
pub(crate) const AUTO_STREAM_BYTES: u64 = 16 << 20;

/// Why this run takes the streamed pass by default, when it does: `train DATA` with Vowpal
/// Wabbit text of [`AUTO_STREAM_BYTES`] or more, and nothing named that a pass cannot do or
/// that chooses the in-memory run (an algorithm, epochs, a mode, held-out rows, weights, a
/// GPU, pictures, a warm start, several processes or a scaling a pass cannot keep).
fn auto_stream(a: &TrainArgs) -> anyhow::Result<Option<String>> {
    let named = a.stream
        || a.algo.is_some()
        || a.epochs.is_some()
        || a.mode.is_some()
        || a.patience.is_some()
        || a.validation.is_some()
        || a.validation_fraction.is_some()
        || a.sample_weights.is_some()
        || a.init_model.is_some()
        || a.class_weight.is_some()
        || a.plot.is_some()
        || a.animate.is_some()
        || a.distributed
        || a.minibatch != 1
        || a.streams != 1
        || a.data_args.labels.is_some()
        || a.backend.backend == BackendChoice::Gpu
        || a.scale
            .is_some_and(|s| !matches!(s, Scale::Online | Scale::None));
    if named {
        return Ok(None);
    }
    let size = match std::fs::metadata(&a.data) {
        Ok(m) if m.is_file() => m.len(),
        _ => return Ok(None),
    };
    let opts = load_options(&a.data_args, Like::NONE)?;
    if size < AUTO_STREAM_BYTES || data::format_of(&a.data, &opts)? != Some(data::Format::Vw) {
        return Ok(None);
    }
    Ok(Some(format!(
        "one streamed pass of AROW, the default for Vowpal Wabbit text of {} MiB or more ({:.0} \
         MB here): on large logs one pass of a per-feature rule matches several epochs in a \
         fraction of the time and memory; name --algo or --epochs to train in memory",
        AUTO_STREAM_BYTES >> 20,
        size as f64 / 1e6
    )))
}

pub fn train(mut a: TrainArgs) -> anyhow::Result<()> {
    let auto = auto_stream(&a)?;
    if auto.is_some() {
        a.stream = true;
        a.algo = Some(Algo::Arow);
    }
    let params = Params::try_from(&a)?;
    if a.stream {
        return train_streamed(&a, &params, auto);
    }
    let world = if a.distributed {
        check_distributed(&a, &params)?;
        Some(world()?)
    } else {
        None
    };
    // Every process must do the same before any of them reads a share or sums: one started
    // with other epochs or another algorithm would end in a collective the others never
    // enter (Open MPI: "message truncated"), naming nothing.
    if let Some(w) = &world {
        same_everywhere(&**w, &run_fields(&a, &params))?;
    }
    let r = train_in(a, params, world.clone());
    if let (Err(e), Some(w)) = (&r, &world) {
        if super::errors::is_disagreement(e) {
            return r;
        }
        if w.size() > 1 {
            // The other processes may be waiting for this one in a sum: end them all.
            note!("error: {}", super::errors::message(e));
            w.abort(super::errors::exit_code(e));
        }
    }
    r
}

/// `train --stream`: one pass over Vowpal Wabbit text read in blocks, the model written and
/// the report printed as for any run.
fn train_streamed(a: &TrainArgs, params: &Params, chosen: Option<String>) -> anyhow::Result<()> {
    if let Some(e) = a.epochs.filter(|&e| e != 1) {
        return Err(usage(
            "--stream",
            &format!("makes one pass over the rows, not --epochs {e}"),
        ));
    }
    if a.data_args.labels.is_some() {
        return Err(usage(
            "--stream",
            "reads each row's label from its line: --labels names a file of them",
        ));
    }
    check_outputs(&[a.output.as_deref()], &[a.data.as_path()])?;
    if a.backend.backend == BackendChoice::Gpu {
        note!("note: --stream trains on the CPU: one row at a time, each block as it is read");
    }
    let opts = load_options(&a.data_args, Like::NONE)?;
    let mut bar = Bar::new(if a.json { Voice::Quiet } else { Voice::Speaks });
    bar.stream_bytes = std::fs::metadata(&a.data)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let trained = rosenblatt::Trainer::with_params(params.clone())
        .progress(&mut bar)
        .fit_stream(&a.data, &opts);
    bar.finish();
    let mut trained = trained?;
    if chosen.is_some() {
        trained.report.chosen = chosen;
        trained.model = trained.model.with_training(trained.report.clone());
    }
    if let Some(out) = &a.output {
        stage_model(out, &trained.model)?
            .persist()
            .with_context(|| format!("cannot write {}", out.display()))?;
        super::reached::WRITTEN.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&trained.report)?);
    } else {
        print_report(&trained.report, trained.model.kind())?;
        if let Some(mb) = peak_resident_mb() {
            outln!("  peak memory:       {mb:.0} MB (the process's largest resident set)");
        }
        if let Some(out) = &a.output {
            outln!("model written to {}", out.display());
        }
    }
    Ok(())
}

/// The process's largest resident set so far, in MB (1e6 bytes), where the system says:
/// Linux's VmHWM (this program's own: `getrusage` would count what a large parent had when
/// it forked this process), else `getrusage`.
fn peak_resident_mb() -> Option<f64> {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok());
        if let Some(kib) = kib {
            return Some(kib * 1024.0 / 1e6);
        }
    }
    #[cfg(unix)]
    {
        // SAFETY: an all-zero rusage is a valid value, which getrusage then fills.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes only the struct it is given.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0 {
            // macOS counts in bytes, the other systems in KiB.
            let unit = if cfg!(target_os = "macos") {
                1.0
            } else {
                1024.0
            };
            return Some(u.ru_maxrss as f64 * unit / 1e6);
        }
    }
    None
}

/// What every process of a data-parallel run must share before it loads anything: the
/// training parameters (each by its name in the model file's `params`), how the data is read
/// and each input file's name and size (paths may differ between machines; a file of another
/// size or name is another file).
fn run_fields(a: &TrainArgs, params: &Params) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(params) {
        for (k, v) in m {
            out.push((format!("params.{k}"), v.to_string()));
        }
    }
    let file = |p: Option<&std::path::Path>| match p {
        None => "(none)".to_string(),
        Some(p) => {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let size = std::fs::metadata(p).map(|m| m.len());
            match size {
                Ok(b) => format!("{} ({b} bytes)", name.unwrap_or_default()),
                Err(_) => format!("{} (unreadable)", name.unwrap_or_default()),
            }
        }
    };
    let d = &a.data_args;
    out.extend([
        ("training data".into(), file(Some(&a.data))),
        ("--labels".into(), file(d.labels.as_deref())),
        ("--validation".into(), file(a.validation.as_deref())),
        ("--sample-weights".into(), file(a.sample_weights.as_deref())),
        ("--init-model".into(), file(a.init_model.as_deref())),
        (
            "how the data is read (--label-col, --format, --features, --dense, --sparse, \
             --weight-col)"
                .into(),
            format!(
                "{:?} {:?} {:?} {} {} {:?}",
                d.label_col, d.format, d.features, d.dense, d.sparse, d.weight_col
            ),
        ),
    ]);
    out
}

/// Stops every process with exit 2 when `fields` differ between them; only the first process
/// says so, naming the first field that differs and the processes.
fn same_everywhere(w: &dyn Reduce, fields: &[(String, String)]) -> anyhow::Result<()> {
    let Some(d) = rosenblatt_backend::agree(w, fields) else {
        return Ok(());
    };
    let field = match d.field.strip_prefix("params.") {
        Some(p) => format!("the parameter {p}"),
        None => d.field.clone(),
    };
    let text = format!(
        "the processes of this --distributed run were started differently: {field} is {} on \
         process 0 and {} on process {}; start every process with the same options and data",
        d.first, d.value, d.rank
    );
    // The first process says so before any process ends: mpirun ends the others as soon as
    // one exits with an error, which could cut the message off.
    if w.rank() == 0 {
        note!("error: {text}");
    }
    w.sum_f64(&mut [0.0]);
    Err(super::errors::disagreement(text))
}

/// The shared world of a data-parallel run, when there is one.
type World = Option<std::rc::Rc<dyn Reduce>>;

fn train_in(a: TrainArgs, params: Params, world: World) -> anyhow::Result<()> {
    // Only the first process of a data-parallel run speaks and writes.
    let voice = match world.as_ref().is_none_or(|w| w.rank() == 0) {
        true => Voice::Speaks,
        false => Voice::Quiet,
    };
    let speaks = voice == Voice::Speaks;
    let mut inputs = vec![a.data.as_path()];
    inputs.extend(a.data_args.labels.as_deref());
    inputs.extend(a.validation.as_deref());
    inputs.extend(a.sample_weights.as_deref());
    check_outputs(
        &[a.output.as_deref(), a.plot.as_deref(), a.animate.as_deref()],
        &inputs,
    )?;
    let start = a.init_model.as_deref().map(Model::load).transpose()?;
    let (ds, shared) = load_training(&a, &params, &world)?;
    if let Some(w) = &world {
        // What the data turned out to be: the same everywhere (a share's rows may differ).
        let classes = ds.labels.as_ref().map(|l| l.classes.join(", "));
        let mut fields = vec![
            ("the features".to_string(), ds.d.to_string()),
            ("the classes".to_string(), classes.unwrap_or_default()),
        ];
        if !shared {
            fields.push(("the rows".to_string(), ds.n.to_string()));
        }
        same_everywhere(&**w, &fields)?;
    }
    let held = match &a.validation {
        // The validation file is read like the training data, with its feature count.
        Some(p) => Some(load_data(p, &a.data_args, Like::data(&ds))?),
        None => None,
    };
    if speaks {
        hints(&params, &ds, start.as_ref());
    }
    check_pictures(&a, &params, &ds, start.as_ref())?;
    let sel = choose_backend(
        &a,
        &params,
        &world,
        voice,
        (ds.n as u64).saturating_mul(ds.d as u64),
    )?;
    let cpu = CpuBackend::new();
    let mut bar = Bar::new(if a.json { Voice::Quiet } else { voice });
    if a.animate.is_some() {
        let w0 = match &start {
            Some(m) => m.augmented(),
            None => algo::initial_weights(ds.d, 1, &params),
        };
        bar.snapshots = Some(plot::Recording::new(w0, params.effective_mode()));
    }
    // Under auto, a GPU failure mid-training finishes on the CPU; an explicit gpu fails.
    // (Not in a data-parallel run: the other processes would not follow.)
    let fallback: Option<&dyn Backend> =
        (a.backend.backend == BackendChoice::Auto && world.is_none()).then_some(&cpu);
    let holdout = match &held {
        Some(v) => Holdout::Rows(v),
        None => Holdout::FromParams,
    };
    let trained = Problem::build(&ds, &params, holdout, start.as_ref()).and_then(|mut pb| {
        match (&world, shared) {
            (Some(w), true) => pb.distribute_local(w.clone())?,
            (Some(w), false) => pb.distribute(w.clone())?,
            _ => {}
        }
        algo::fit(pb, &params, &*sel.backend, fallback, &mut bar)
    });
    bar.finish();
    let trained = trained?;
    if let Some(note) = &trained.report.fallback {
        note!("warning: {note}");
    }
    if !speaks {
        return Ok(());
    }
    write_outputs(&a, &params, &ds, &trained, bar.snapshots.take())?;
    class_weight_hint(&params, start.as_ref(), trained.report.radius);
    if a.json {
        outln!("{}", serde_json::to_string(&trained.report)?);
    } else {
        print_report(&trained.report, trained.model.kind())?;
        for (what, f) in [
            ("model", &a.output),
            ("training plot", &a.plot),
            ("animation", &a.animate),
        ] {
            if let Some(f) = f {
                outln!("{what} written to {}", f.display());
            }
        }
    }
    Ok(())
}

/// The training rows with their per-row weights, checked against the classes; and whether
/// they are this process's share of a data-parallel run (true) rather than every row. A
/// data-parallel run reads only this process's share of a CSV or LIBSVM file, unless
/// something is fitted on, or drawn from, every row (scaling, a validation split, balanced
/// class weights, per-row weights from a file): then each process reads the whole file.
fn load_training(
    a: &TrainArgs,
    params: &Params,
    world: &World,
) -> anyhow::Result<(data::Dataset, bool)> {
    let opts = load_options(&a.data_args, Like::NONE)?;
    let whole_needed = params.scale != Scale::None
        || params.validation_fraction.is_some()
        || matches!(params.class_weight, Some(ClassWeight::Balanced))
        || a.sample_weights.is_some();
    let share = match world {
        Some(w) if !whole_needed && data::part::splits(&a.data, &opts)? => Some(w),
        _ => None,
    };
    let mut ds = match share {
        Some(w) => {
            let mut ds = data::part::load_part(&a.data, &opts, w.rank(), w.size())?;
            data::part::agree(&mut ds, &**w, opts.layout)?;
            ds
        }
        None => data::load(&a.data, &opts)?,
    };
    super::hashed_if_asked(&a.data_args.hash, &ds)?;
    if let Some(p) = &a.sample_weights {
        ds.weights = Some(rosenblatt_core::data::npy::load_weights(p, ds.n)?);
    }
    let classes = ds.labels.as_ref().map_or(1, |l| l.classes.len());
    rosenblatt_train::algo::weights_fit(&ds, if classes > 2 { classes } else { 1 })?;
    Ok((ds, share.is_some()))
}

/// Hints about the data that change what the user might ask for: sparse rows under the batch
/// rule or standard scaling, and feature ranges far apart without scaling.
fn hints(params: &Params, ds: &data::Dataset, start: Option<&Model>) {
    if ds.is_sparse() && params.fit_bias && params.effective_mode() == Mode::Batch {
        note!(
            "hint: the rows are sparse ({:.1} non-zeros each): the batch sums add the bias \
             column of every row, which can outweigh the rare features and swing from epoch to \
             epoch; if training does not settle, try --no-bias or --algo online",
            ds.stored() as f64 / ds.n.max(1) as f64
        );
    }
    if ds.is_sparse() {
        if params.scale == Scale::Standard {
            note!(
                "note: the rows are held sparse, so --scale standard divides by the standard \
                 deviation without centering (centering would make them dense; --dense centers)"
            );
        }
        return;
    }
    if params.scale != Scale::None || start.is_some_and(|m| m.scaling().is_some()) {
        return;
    }
    if let Some((ratio, wide, narrow)) = range_spread(&ds.x, ds.n, ds.d) {
        if ratio > 1000.0 {
            note!(
                "hint: feature ranges differ by {ratio:.0}x (feature {} spans the most, \
                 feature {} the least); --scale standard usually helps the perceptron",
                wide + 1,
                narrow + 1
            );
        }
    }
}

/// Class weights on unscaled features much larger than the bias's 1: a weight moves the bias
/// as much as each feature, and unscaled the heavy class needs many epochs to take it (the
/// batch rule, the pocket and the average may stop or settle first; with the features scaled
/// every rule favours it at once: docs/python.md, "Class weights").
fn class_weight_hint(params: &Params, start: Option<&Model>, radius: f64) {
    let scaled = params.scale != Scale::None || start.is_some_and(|m| m.scaling().is_some());
    if params.class_weight.is_some() && params.fit_bias && !scaled && radius > 10.0 {
        note!(
            "hint: class weights move the bias (the 1 of [x, 1]) as far as each feature, and \
             the features here reach R = {radius:.0}: unscaled, the heavy class takes the bias \
             slowly and the batch rule, the pocket or the average may stop first; \
             --scale maxabs (or standard) lets the weights act at once"
        );
    }
}

/// `--plot` names an image format; `--animate` can draw this data and model.
fn check_pictures(
    a: &TrainArgs,
    params: &Params,
    ds: &data::Dataset,
    start: Option<&Model>,
) -> anyhow::Result<()> {
    if let Some(p) = &a.plot {
        plot::image_kind(p).map_err(|e| flag_error(e, "--plot"))?;
    }
    if let Some(anim) = &a.animate {
        if params.scale != Scale::None || start.is_some_and(|m| m.scaling().is_some()) {
            return Err(usage(
                "--animate",
                "draws the data as given and cannot follow scaled training; leave out --scale \
                 (an animated run trains on the features as given)",
            ));
        }
        let classes = ds.labels.as_ref().map_or(0, |l| l.classes.len());
        let not_linear = match params.algo {
            Algo::Voted => Some("the voted perceptron keeps many vectors".to_string()),
            Algo::Kernel => Some("the kernel perceptron's boundary is not a line".to_string()),
            Algo::Multiclass => {
                Some("the multiclass perceptron keeps a vector a class".to_string())
            }
            _ if classes != 2 => Some(format!("the labels have {classes} classes")),
            _ => None,
        };
        plot::check_animation(anim, ds, not_linear.as_deref()).map_err(|e| match e {
            rosenblatt::Error::Data { path, msg } => usage(
                "--animate",
                &format!("cannot draw this run: {}: {msg}", path.display()),
            ),
            e => flag_error(e, "--animate"),
        })?;
    }
    Ok(())
}

/// The backend `--backend` asks for, each process its own in a data-parallel run (the GPUs of
/// a machine go to its processes in turn), with the notes on which one runs.
fn choose_backend(
    a: &TrainArgs,
    params: &Params,
    world: &World,
    voice: Voice,
    values: u64,
) -> anyhow::Result<Selected> {
    let speaks = voice == Voice::Speaks;
    let sel = match world {
        Some(w) => {
            let own = select_backend_nth(&a.backend, Voice::Quiet, Some(w.local_rank()), None)?;
            let backend = Box::new(Distributed {
                backend: own.backend,
                reduce: w.clone(),
            });
            let note = format!("backend: {} (--distributed)", backend.device());
            Selected { backend, note }
        }
        None => {
            let voice = if a.json { Voice::Quiet } else { voice };
            select_backend_nth(&a.backend, voice, None, Some(values))?
        }
    };
    if let (Some(w), true) = (world, speaks) {
        if !a.json {
            note!(
                "{} processes, each training on its share of the rows; {}",
                w.size(),
                sel.note
            );
        }
    }
    // The perceptron, averaged perceptron, passive-aggressive and AROW (diagonal) run on a
    // GPU in steps and streams; the other online rules run on the CPU.
    let full_arow = params.arow.is_some_and(|a| !a.covariance.is_diagonal());
    let cpu_only = matches!(params.algo, Algo::Voted | Algo::Winnow) || full_arow;
    if params.effective_mode() == Mode::Online
        && sel.backend.kind() == BackendKind::Gpu
        && speaks
        && cpu_only
    {
        let gpu_form = match params.algo {
            Algo::Winnow => "--mode batch runs its epochs on the GPU",
            Algo::Arow => "with --arow-covariance diagonal it runs in steps on the GPU",
            _ => "--algo batch runs its epochs on the GPU",
        };
        note!(
            "note: --algo {} is online (one update per mistake, sequential); it runs on the \
             CPU ({gpu_form})",
            params.algo.name()
        );
    }
    Ok(sel)
}

/// Writes the model, the training plot and the animation: each staged first, and renamed
/// into place only when all were written.
fn write_outputs(
    a: &TrainArgs,
    params: &Params,
    ds: &data::Dataset,
    trained: &algo::Trained,
    frames: Option<plot::Recording>,
) -> anyhow::Result<()> {
    let mut staged = Vec::new();
    if let Some(out) = &a.output {
        staged.push((stage_model(out, &trained.model)?, out));
    }
    if let Some(p) = &a.plot {
        let tmp = image_stage(p)?;
        plot::training(&trained.report, tmp.path(), (800, 600))?;
        staged.push((tmp, p));
    }
    if let (Some(p), Some(rec)) = (&a.animate, frames) {
        let tmp = image_stage(p)?;
        let (steps, thinned) = (rec.steps(), rec.thinned());
        let frames = rec.frames(&trained.model.augmented(), &saved_caption(params, trained));
        plot::animate(ds, &frames, tmp.path())?;
        if thinned {
            let what = if params.effective_mode() == Mode::Online {
                "updates"
            } else {
                "epochs"
            };
            note!(
                "note: the animation shows {} of the {steps} {what}, evenly spaced, then the \
                 saved model",
                plot::MAX_FRAMES - 2
            );
        }
        staged.push((tmp, p));
    }
    for (tmp, p) in staged {
        tmp.persist()
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    super::reached::WRITTEN.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// What the saved model is, for the last frame of an animation.
fn saved_caption(params: &Params, trained: &algo::Trained) -> String {
    let r = &trained.report;
    match params.algo {
        Algo::Averaged => "the saved model (the average)".to_string(),
        _ if r.best_epoch > 0 && r.best_epoch < r.epochs => {
            format!("the saved model (the pocket: epoch {})", r.best_epoch)
        }
        _ => "the saved model".to_string(),
    }
}

/// The model file staged beside `out`, proven to load back before anything is written: a
/// model that `train -o` writes is a model that loads. Streamed both ways (a voted model's
/// file can be hundreds of megabytes).
fn stage_model(out: &Path, model: &Model) -> anyhow::Result<Temp> {
    let tmp = stage(out, ".tmp", |w| model.write(w))?;
    Model::load(tmp.path()).context("the trained model does not read back (please report this)")?;
    Ok(tmp)
}

/// A temporary beside the image `p`, with its extension (the plot's format comes from it).
fn image_stage(p: &Path) -> anyhow::Result<Temp> {
    let ext = p
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    temp_beside(p, &ext).with_context(|| format!("cannot create {}", p.display()))
}

/// Mistakes per epoch, shortened in the middle when long.
pub fn epoch_list(m: &[u64]) -> String {
    let show = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    if m.len() <= 12 {
        show(m)
    } else {
        format!("{} ... {}", show(&m[..6]), show(&m[m.len() - 4..]))
    }
}

pub fn print_report(r: &TrainReport, kind: ModelKind) -> anyhow::Result<()> {
    outln!(
        "{} on {} ({}): n = {}, d = {}",
        r.algo
            .parse::<rosenblatt_core::params::Algo>()
            .map_or_else(|_| r.algo.clone(), |a| a.title()),
        r.backend,
        r.device,
        r.n,
        r.d
    );
    let figure = if r.n_validation.is_some() {
        "validation mistakes"
    } else {
        "training mistakes"
    };
    let why = match r.stop_reason {
        StopReason::Converged => "converged: an epoch with no mistake".to_string(),
        StopReason::Tolerance => "stopped: update norm under --tol".to_string(),
        StopReason::MaxEpochs if r.epochs == 1 => "one pass over the rows".to_string(),
        StopReason::MaxEpochs => "stopped at --epochs without converging".to_string(),
        StopReason::Patience => format!(
            "stopped by --patience: {figure} stopped improving; best epoch {}",
            r.best_epoch
        ),
        StopReason::MaxVectors => {
            "stopped: the voted perceptron kept --max-vectors vectors (one per mistake)".to_string()
        }
    };
    if let Some(s) = r.storage.as_deref().filter(|&s| s != "f32") {
        outln!("  storage:           {s} (X read in that storage, exactly; the arithmetic is f32)");
    }
    outln!("  epochs:            {} ({why})", r.epochs);
    if let Some(bytes) = r.streamed_bytes {
        outln!(
            "  streamed:          {} rows ({:.1} MB) read in blocks, never held: {:.0} rows/s",
            r.n,
            bytes as f64 / 1e6,
            r.n as f64 / r.seconds.max(1e-9)
        );
    }
    if let (Some(b), Some(s)) = (r.minibatch, r.streams) {
        outln!(
            "  steps:             {b} rows a step in {s} stream{}, mixed by their mean after \
             every epoch",
            if s == 1 { "" } else { "s" }
        );
    }
    if let Some(k) = r.gpu_plan.as_deref() {
        outln!("  GPU plan:          {k}");
    }
    if let Some(c) = &r.chosen {
        outln!("  chosen:            {c}");
    }
    if let Some(sc) = &r.scaling {
        outln!("  scaling:           {sc}");
    }
    if let Some(h) = &r.held_out {
        outln!("  held out:          {h}");
    }
    if let Some(a) = r.progressive_accuracy {
        outln!(
            "  progressive accuracy: {:.2}% (each row predicted by the model as it met the row, \
             before learning from it)",
            100.0 * a
        );
    }
    if let Some(a) = r.train_accuracy {
        outln!("  training accuracy: {:.2}%", 100.0 * a);
    }
    if let (Some(nv), Some(acc)) = (r.n_validation, r.validation_accuracy) {
        outln!(
            "  validation:        {:.2}% of {nv} rows (the model of epoch {}, the best)",
            100.0 * acc,
            r.best_epoch
        );
    }
    outln!(
        "  mistakes:          {} in all{}; per epoch: {}",
        r.total_mistakes,
        match r.heads {
            Some(k) => format!(
                ", counted per head (a row counts once in each of the {k} one-vs-rest heads \
                 that is wrong on it)"
            ),
            None => String::new(),
        },
        epoch_list(&r.mistakes_per_epoch)
    );
    if let Some(rows) = &r.wrong_rows_per_epoch {
        outln!(
            "  rows wrong:        per epoch (a row is wrong when its highest head is not its \
             class): {}",
            epoch_list(rows)
        );
    }
    match (r.margin, r.mistake_bound) {
        _ if r.streamed_bytes.is_some() => outln!(
            "  Novikoff:          R = {:.4}; the rows are not kept, so the saved model's margin \
             on them is unknown",
            r.radius
        ),
        (Some(g), Some(b)) => {
            outln!(
            "  Novikoff:          R = {:.4}, achieved margin gamma = {:.4e}, (R/gamma)^2 = {:.4e}",
            r.radius, g, b
        )
        }
        // The saved model may be an average or a pocket that does not separate the data
        // although the last weights did.
        _ if matches!(kind, ModelKind::Binary | ModelKind::Kernel) && r.converged => outln!(
            "  Novikoff:          R = {:.4}; no positive margin: the saved model (the {} \
             perceptron's) does not separate the training data, though the last epoch's \
             weights did, so no bound",
            r.radius,
            r.algo
        ),
        _ if matches!(kind, ModelKind::Binary | ModelKind::Kernel) => outln!(
            "  Novikoff:          R = {:.4}; no positive margin (the saved model does not \
             separate the training data), so no bound",
            r.radius
        ),
        _ => outln!(
            "  Novikoff:          R = {:.4}; a {} model has no single separating hyperplane, \
             so no margin or bound",
            r.radius,
            kind.describe()
        ),
    }
    if r.scaling.is_some() {
        outln!(
            "                     (R and gamma of the rows as scaled; Novikoff's bound is \
             stated on raw x, which --scale none trains on)"
        );
    }
    if let Some(b) = &r.arow_bound {
        let seen = format!(
            "{} mistakes, {} corrections (steps with margin in (0, 1))",
            b.mistakes, b.corrections
        );
        match b.bound {
            Some(m) => outln!(
                "  AROW bound:        {seen}; mistakes <= {m:.4e} (Crammer et al. 2009, Theorem 2, \
                 at u = w / min y w.x; log det(I + X_A / r) = {:.4})",
                b.log_det
            ),
            None => outln!(
                "  AROW bound:        {seen}; no bound at u = w / min y w.x: the trained weights \
                 do not separate the training rows"
            ),
        }
    }
    outln!("  time:              {:.3} s", r.seconds);
    Ok(())
}
