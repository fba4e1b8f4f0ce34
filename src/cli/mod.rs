//! Command-line interface: dispatch to one file per command family, and the helpers the
//! commands share (loading data, choosing a backend, progress bars, writing output files
//! atomically). Arguments are in `args.rs`; library errors become messages with flag names and
//! exit codes in `errors.rs`.

/// Writes a line to standard output; a closed pipe or a full disk becomes an error (see
/// [`stdout_line`]) instead of a panic.
macro_rules! outln {
    () => { $crate::cli::stdout_write(format_args!("\n"))? };
    ($($arg:tt)*) => { $crate::cli::stdout_write(format_args!("{}\n", format_args!($($arg)*)))? };
}

/// Writes to standard output without a newline (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::stdout_write(format_args!($($arg)*))? };
}

/// A note on standard error; ignored if standard error is closed.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
#[cfg(unix)]
mod bus;
mod demo;
mod errors;
mod experiment;
mod gen;
mod hardware;
mod plot;
mod predict;
mod train;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use errors::usage;
use rosenblatt_backend::gpu::context::AdapterQuery;
use rosenblatt_backend::gpu::GpuOptions;
use rosenblatt_backend::{self as backend, BackendChoice, Selected};
use rosenblatt_core::data::hashing::{Hashing, DEFAULT_HASH_BITS, MAX_HASH_BITS};
use rosenblatt_core::data::{self, Dataset, Layout, LoadOptions};
use rosenblatt_core::output::{check_distinct, check_target, temp_beside, Temp};
use rosenblatt_train::algo::Progress;

use args::{BackendArgs, Cli, Command, DataArgs, ExperimentCmd, HashArgs, PlotCmd};

/// How far a run had got, for the message of an interrupt: the epochs its progress reached
/// (of how many at most), the rows of a streamed run, and whether its outputs are in place.
pub(crate) mod reached {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    pub(crate) static EPOCHS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static MAX_EPOCHS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static ROWS: AtomicU64 = AtomicU64::new(0);
    pub(crate) static WRITTEN: AtomicBool = AtomicBool::new(false);

    /// What an interrupt stopped, in words.
    pub(crate) fn message() -> String {
        let (e, max, rows) = (
            EPOCHS.load(Relaxed),
            MAX_EPOCHS.load(Relaxed),
            ROWS.load(Relaxed),
        );
        let at = match (e, rows) {
            (_, r) if r > 0 => format!(" after {r} rows of the stream"),
            (0, _) if max > 0 => " in the first epoch".to_string(),
            (e, _) if e > 0 => format!(" after epoch {e} of at most {max}"),
            _ => String::new(),
        };
        match WRITTEN.load(Relaxed) {
            true => format!("interrupted{at}: the outputs were already written"),
            false => format!("interrupted{at}: nothing was written (no model, no partial file)"),
        }
    }
}

/// Runs the CLI and returns the process exit code.
pub fn run() -> i32 {
    // SIGINT and SIGTERM remove the temporary files of outputs not yet in place, say what
    // they stopped and exit 130.
    let _ = ctrlc::set_handler(|| {
        rosenblatt_core::output::remove_temps();
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\nrosenblatt: {}", reached::message());
        std::process::exit(130);
    });
    #[cfg(unix)]
    bus::install();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => train::train(*a),
        Command::Predict(a) => predict::predict(a),
        Command::Eval(a) => predict::eval(a),
        Command::Export(a) => predict::export(a),
        Command::Gen(a) => gen::gen(a),
        Command::Convert(a) => gen::convert(a),
        Command::Demo(a) => demo::run(a),
        Command::Info(a) => hardware::info(a),
        Command::Bench(a) => hardware::bench(a),
        Command::Experiment(ExperimentCmd::Committee(a)) => experiment::committee(a),
        Command::Experiment(ExperimentCmd::Margin(a)) => experiment::margin(a),
        Command::Experiment(ExperimentCmd::Averaging(a)) => experiment::averaging(a),
        Command::Experiment(ExperimentCmd::Complexity(a)) => experiment::complexity(a),
        Command::Experiment(ExperimentCmd::TimeToAccuracy(a)) => experiment::time_to_accuracy(a),
        Command::Plot(PlotCmd::Boundary(a)) => plot::plot_boundary(a),
        Command::Plot(PlotCmd::Training(a)) => plot::plot_training(a),
        Command::Plot(PlotCmd::Roc(a)) => plot::plot_roc(a),
    };
    let result = result.and_then(|()| std::io::stdout().flush().map_err(stdout_error));
    match result {
        Ok(()) => 0,
        // A closed pipe (`| head`) ends quietly, as other Unix tools do.
        Err(e) if e.downcast_ref::<StdoutClosed>().is_some() => 0,
        Err(e) => {
            if errors::printed(&e) {
                note!("error: {}", errors::message(&e));
            }
            errors::exit_code(&e)
        }
    }
}

/// Standard output was closed by the reader.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutClosed.into()
    } else {
        anyhow::anyhow!("cannot write to standard output: {e}")
    }
}

/// Writes formatted text to standard output: a closed pipe is [`StdoutClosed`] (exit 0,
/// quietly), any other failure (a full disk) an error (exit 1).
pub fn stdout_write(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(stdout_error)
}

/// What data must match: the features and hashing of a model, or of the training data.
#[derive(Clone, Copy, Default)]
pub(crate) struct Like<'a> {
    /// The number of features.
    pub(crate) features: Option<usize>,
    /// How raw features are hashed.
    pub(crate) hashing: Option<&'a Hashing>,
}

impl<'a> Like<'a> {
    /// Nothing to match: the training data.
    pub(crate) const NONE: Like<'static> = Like {
        features: None,
        hashing: None,
    };

    /// A model's features and hashing.
    pub(crate) fn model(m: &'a rosenblatt::Model) -> Self {
        Like {
            features: Some(m.n_features()),
            hashing: m.hashing(),
        }
    }

    /// The training data's features and hashing (a validation or test file).
    pub(crate) fn data(ds: &'a Dataset) -> Self {
        Like {
            features: Some(ds.d),
            hashing: ds.hashing.as_ref(),
        }
    }
}

fn load_data(path: &Path, a: &DataArgs, like: Like<'_>) -> anyhow::Result<Dataset> {
    let ds = data::load(path, &load_options(a, like)?)?;
    hashed_if_asked(&a.hash, &ds)?;
    Ok(ds)
}

/// Whether any hashing flag is given.
fn hash_named(a: &HashArgs) -> bool {
    a.hash_bits.is_some()
        || a.hash_sign.is_some()
        || !a.quadratic.is_empty()
        || !a.categorical.is_empty()
}

/// Hashing flags on input that is not hashed (not Vowpal Wabbit text, nor CSV with
/// categorical columns) would be ignored: an error instead.
fn hashed_if_asked(a: &HashArgs, ds: &Dataset) -> anyhow::Result<()> {
    if hash_named(a) && ds.hashing.is_none() {
        let flag = if a.categorical.is_empty() {
            "--hash-bits"
        } else {
            "--categorical"
        };
        return Err(usage(
            flag,
            &format!(
                "and the other hashing flags apply to Vowpal Wabbit text and to CSV with \
                 --categorical, and {} is neither (its features are columns already)",
                ds.source.display()
            ),
        ));
    }
    Ok(())
}

/// The hashing the flags ask for (`None` when they name none), refused where it differs
/// from the model's or the training data's (`like`), which is used otherwise.
fn hashing(a: &HashArgs, like: Option<&Hashing>) -> anyhow::Result<Option<Hashing>> {
    let named = hash_named(a);
    let given = named.then(|| Hashing {
        bits: a.hash_bits.unwrap_or(DEFAULT_HASH_BITS),
        sign: a.hash_sign.unwrap_or_default(),
        quadratic: a.quadratic.clone(),
        categorical: a.categorical.clone(),
        csv_columns: None,
    });
    if let Some(g) = &given {
        if g.check().is_err() {
            return Err(match a.hash_bits {
                Some(b) if !(1..=MAX_HASH_BITS).contains(&b) => usage(
                    "--hash-bits",
                    &format!("must be in [1, {MAX_HASH_BITS}], but is {b}"),
                ),
                _ if !g.categorical.is_empty() && !g.quadratic.is_empty() => usage(
                    "--quadratic",
                    "pairs Vowpal Wabbit namespaces, and a CSV file's columns are in none: \
                     leave it out with --categorical",
                ),
                _ if g.categorical.iter().any(|c| c.trim().is_empty()) => usage(
                    "--categorical",
                    &format!(
                        "names columns separated by commas, and one is empty in {:?}",
                        g.categorical.join(",")
                    ),
                ),
                _ => usage(
                    "--quadratic",
                    &format!(
                        "names two namespaces by their first characters (such as ab), but is \
                         {:?}",
                        a.quadratic
                            .iter()
                            .find(|q| q.chars().count() != 2)
                            .map_or("", String::as_str)
                    ),
                ),
            });
        }
    }
    match (given, like) {
        (Some(g), Some(l)) if !g.same_scheme(l) => Err(usage(
            if g.categorical != l.categorical {
                "--categorical"
            } else {
                "--hash-bits"
            },
            &format!(
                "and the other hashing flags must be left out: the data is hashed as the \
                 model's or the training data's were ({} bits, {}, quadratic {:?}, \
                 categorical {:?})",
                l.bits, l.sign, l.quadratic, l.categorical
            ),
        )),
        (g, l) => Ok(l.cloned().or(g)),
    }
}

fn load_options(a: &DataArgs, like: Like<'_>) -> anyhow::Result<LoadOptions> {
    let features = like.features;
    Ok(LoadOptions {
        format: a.format,
        label_col: a.label_col.clone(),
        features: a.features.or(features),
        labels: a.labels.clone(),
        weight_col: a.weight_col.clone(),
        layout: match (a.dense, a.sparse) {
            (true, _) => Layout::Dense,
            (_, true) => Layout::Sparse,
            _ => Layout::Auto,
        },
        csv_header: None,
        hashing: hashing(&a.hash, like.hashing)?,
    })
}

/// The MPI world of a `--distributed` run.
#[cfg(feature = "mpi")]
pub(crate) fn world() -> anyhow::Result<std::rc::Rc<dyn rosenblatt_backend::Reduce>> {
    Ok(std::rc::Rc::new(rosenblatt_train::distributed::Mpi::init()?))
}

#[cfg(not(feature = "mpi"))]
pub(crate) fn world() -> anyhow::Result<std::rc::Rc<dyn rosenblatt_backend::Reduce>> {
    Err(errors::usage(
        "--distributed",
        "needs a rosenblatt built with MPI: cargo build --release --features mpi (with Open \
         MPI and libclang installed), then mpirun -np N rosenblatt train ... --distributed",
    ))
}

/// Whether a command (or a process of a data-parallel run) writes its notes on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Voice {
    /// Notes and progress on stderr.
    Speaks,
    /// Only what was asked for (JSON output, the processes after the first).
    Quiet,
}

/// Chooses the backend and says which on stderr.
fn select_backend(a: &BackendArgs, voice: Voice) -> anyhow::Result<Selected> {
    select_backend_nth(a, voice, None, None)
}

/// As [`select_backend`], for one of several processes on a machine: the process with local
/// index `nth` takes the nth adapter (see [`AdapterQuery::nth`]); for a job of `values`
/// values of X, where known (too few take the CPU under auto: `backend::select_for`).
fn select_backend_nth(
    a: &BackendArgs,
    voice: Voice,
    nth: Option<usize>,
    values: Option<u64>,
) -> anyhow::Result<Selected> {
    let opts = GpuOptions {
        adapter: AdapterQuery {
            name: a.adapter.clone(),
            hardware_only: false,
            nth,
        },
        resident: rosenblatt_backend::gpu::ResidentOptions {
            gpu_memory: a.gpu_memory,
            ..Default::default()
        },
        shader_checks: Default::default(),
        params_space: None,
    };
    let sel = match values {
        Some(v) => backend::select_for(a.backend, &opts, v),
        None => backend::select(a.backend, &opts),
    }
    .map_err(|e| match e {
        rosenblatt::Error::NoGpu(m) if a.adapter.is_none() => {
            rosenblatt::Error::NoGpu(format!("--backend gpu: {m}"))
        }
        other => other,
    })?;
    // (One of several processes says nothing: the first one's report names its backend.)
    // (`--backend cpu` gets what it asked for: no note.)
    if nth.is_none()
        && a.backend != BackendChoice::Cpu
        && (voice == Voice::Speaks || a.backend == BackendChoice::Auto)
    {
        note!("{}", sel.note);
    }
    Ok(sel)
}

/// Writes a file through a temporary beside its target, renamed into place only when
/// everything was written, so a failure never leaves a partial file (see
/// `rosenblatt_core::output` for the rules).
fn write_atomic(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    stage(path, ".tmp", f)?
        .persist()
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the contents of `path` to a temporary beside it, to be renamed into place later
/// with the other outputs of the command.
fn stage(
    path: &Path,
    suffix: &str,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<Temp> {
    let mut tmp =
        temp_beside(path, suffix).with_context(|| format!("cannot create {}", path.display()))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        f(&mut w).with_context(|| format!("writing {}", path.display()))?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(tmp)
}

/// Checks every output of a command before any work: each can be written under the output
/// rules, none is an input, no two are the same file.
fn check_outputs(outputs: &[Option<&Path>], inputs: &[&Path]) -> anyhow::Result<()> {
    let outs: Vec<&Path> = outputs.iter().flatten().copied().collect();
    for o in &outs {
        check_target(o, inputs)?;
    }
    check_distinct(&outs)?;
    Ok(())
}

/// Writes to `path` atomically, or to stdout when `path` is `None`.
fn write_output(
    path: Option<&Path>,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    match path {
        Some(p) => write_atomic(p, f),
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            f(&mut w).and_then(|_| w.flush()).map_err(stdout_error)
        }
    }
}

/// A progress bar on stderr, shown only when stderr is a terminal, not under `--json`, and
/// only once training has run for more than a moment.
struct Bar {
    enabled: bool,
    start: Instant,
    bar: Option<ProgressBar>,
    /// The weights as training goes, for `--animate` (kept only when asked for).
    snapshots: Option<rosenblatt_app::plot::Recording>,
    /// A streamed run: the size of its input, when known.
    stream_bytes: Option<u64>,
}

impl Bar {
    fn new(voice: Voice) -> Self {
        Bar {
            enabled: voice == Voice::Speaks && std::io::stderr().is_terminal(),
            start: Instant::now(),
            bar: None,
            snapshots: None,
            stream_bytes: None,
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn wants_snapshots(&self) -> bool {
        self.snapshots.is_some()
    }

    fn snapshot(&mut self, epoch: usize, w: &[f32]) {
        if let Some(s) = self.snapshots.as_mut() {
            s.record(epoch, w);
        }
    }

    fn update(&mut self, done: usize, max: usize, mistakes: u64) {
        reached::EPOCHS.store(done as u64, std::sync::atomic::Ordering::Relaxed);
        reached::MAX_EPOCHS.store(max as u64, std::sync::atomic::Ordering::Relaxed);
        if !self.enabled || self.start.elapsed() < Duration::from_millis(300) {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::with_draw_target(Some(max as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] epoch {pos}/{len} {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            b
        });
        bar.set_position(done as u64);
        bar.set_message(format!("mistakes {mistakes}"));
    }

    fn rows(&mut self, rows: u64, bytes: u64) {
        reached::ROWS.store(rows, std::sync::atomic::Ordering::Relaxed);
        if !self.enabled || self.start.elapsed() < Duration::from_millis(300) {
            return;
        }
        let total = self.stream_bytes;
        let bar = self.bar.get_or_insert_with(|| {
            let (b, template) = match total {
                Some(t) => (
                    ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr()),
                    "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {msg}",
                ),
                None => (
                    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                    "{elapsed_precise} {bytes} read {msg}",
                ),
            };
            b.set_style(
                ProgressStyle::with_template(template)
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b
        });
        bar.set_position(bytes);
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        bar.set_message(format!("{rows} rows, {:.0} rows/s", rows as f64 / secs));
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::args::Cli::command().debug_assert();
    }
}
