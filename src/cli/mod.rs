//! Command-line interface: clap definitions, dispatch, and the helpers the commands share
//! (loading data, choosing a backend, progress bars, writing output files atomically).

mod commands;
mod demo;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use rosenblatt::algo::Progress;
use rosenblatt::backend::gpu::context::AdapterQuery;
use rosenblatt::backend::gpu::GpuOptions;
use rosenblatt::backend::{self, BackendChoice, Selected};
use rosenblatt::data::{self, Dataset, Format, LabelCol, LoadOptions};
use rosenblatt::params::{Algo, Init, Mode, MulticlassStrategy, MulticlassUpdate};

/// Train perceptrons on a GPU (wgpu) or the CPU.
#[derive(Parser, Debug)]
#[command(name = "rosenblatt", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train a perceptron on a data file.
    Train(TrainArgs),
    /// Predict labels for a data file with a trained model.
    Predict(PredictArgs),
    /// Evaluate a model on labelled data: accuracy and confusion matrix.
    Eval(EvalArgs),
    /// Generate a linearly separable data set (optionally with label noise).
    Gen(GenArgs),
    /// Generate data, train on it and print a report: no files needed.
    Demo(DemoArgs),
    /// List GPU adapters, their limits, and which one `--backend auto` picks.
    Info(InfoArgs),
    /// Time batch epochs on generated data: ms/epoch, GB/s against the roofline, GPU vs CPU.
    Bench(BenchArgs),
    /// Experiments that check what the theory says.
    #[command(subcommand)]
    Experiment(ExperimentCmd),
    /// Pictures: decision boundary, training curves, ROC (PNG or SVG by the extension).
    #[command(subcommand)]
    Plot(PlotCmd),
}

#[derive(Subcommand, Debug)]
enum PlotCmd {
    /// The decision boundary over 2-D data (or a slice through two features).
    Boundary(PlotModelArgs),
    /// Mistakes per epoch, cumulative mistakes against the Novikoff bound, and J.
    Training(PlotTrainingArgs),
    /// The ROC curve of a binary model, with its AUC.
    Roc(PlotModelArgs),
}

#[derive(Args, Debug)]
struct PlotSize {
    /// Width in pixels.
    #[arg(long, default_value_t = 800)]
    width: u32,
    /// Height in pixels.
    #[arg(long, default_value_t = 600)]
    height: u32,
}

#[derive(Args, Debug)]
struct PlotModelArgs {
    /// Model file.
    model: PathBuf,
    /// Labelled data.
    data: PathBuf,
    /// Output image (.png or .svg).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// For d > 2: the two features (1-based) to plot, others held at their mean.
    #[arg(long, value_name = "I,J", value_delimiter = ',')]
    features: Option<Vec<usize>>,
    #[command(flatten)]
    size: PlotSize,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    data_args: PlotDataArgs,
}

/// How to read the data of a plot (the feature count comes from the model).
#[derive(Args, Debug, Clone)]
struct PlotDataArgs {
    /// Label column: a header name, a 0-based index (negative from the end), or none.
    #[arg(long, value_name = "C", default_value = "auto")]
    label_col: LabelCol,
    /// File format: auto, csv, libsvm, npy or npz.
    #[arg(long, value_name = "F", default_value = "auto")]
    format: Format,
    /// NumPy features (.npy): the .npy file with the labels.
    #[arg(long, value_name = "FILE")]
    labels: Option<PathBuf>,
}

impl From<PlotDataArgs> for DataArgs {
    fn from(a: PlotDataArgs) -> Self {
        DataArgs {
            label_col: a.label_col,
            format: a.format,
            features: None,
            labels: a.labels,
        }
    }
}

#[derive(Args, Debug)]
struct PlotTrainingArgs {
    /// A `train --json` output or a model file.
    run: PathBuf,
    /// Output image (.png or .svg).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    size: PlotSize,
}

#[derive(Subcommand, Debug)]
enum ExperimentCmd {
    /// Online perceptron vs Winnow on committee streams: mistakes against the number of experts.
    Committee(CommitteeArgs),
}

#[derive(Args, Debug)]
struct CommitteeArgs {
    /// Numbers of experts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    p: Vec<usize>,
    /// Size of the hidden panel (odd).
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// Examples in each stream (one pass).
    #[arg(long, default_value_t = 3000)]
    n: usize,
    /// Winnow's learning rate eta, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    lr: f32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Rows.
    #[arg(long, default_value_t = 1_000_000)]
    n: usize,
    /// Features.
    #[arg(long, default_value_t = 64)]
    d: usize,
    /// Epochs to time (after a warm-up).
    #[arg(long, default_value_t = 20)]
    epochs: usize,
    /// Backends: all (CPU, and a hardware GPU if present), cpu, or gpu (software adapters too).
    #[arg(long, default_value = "all", value_parser = ["all", "cpu", "gpu"])]
    backend: String,
    /// GPU adapter: a case-insensitive part of its name.
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
    /// GPU peak memory bandwidth in GB/s (default: a table of known devices).
    #[arg(long, value_name = "F")]
    peak_gbs: Option<f64>,
    /// Skip timing training to convergence.
    #[arg(long)]
    no_converge: bool,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct InfoArgs {
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// How to read a data file.
#[derive(Args, Debug, Clone)]
struct DataArgs {
    /// Label column: a header name, a 0-based index (negative from the end), or none.
    /// Default: a column named label, y, target or class, else the last column.
    #[arg(long, value_name = "C", default_value = "auto")]
    label_col: LabelCol,
    /// File format: auto (by extension, else sniffed), csv, libsvm, npy or npz.
    #[arg(long, value_name = "F", default_value = "auto")]
    format: Format,
    /// LIBSVM: number of features (default: the largest index in the file).
    #[arg(long, value_name = "D")]
    features: Option<usize>,
    /// NumPy features (.npy): the .npy file with the labels.
    #[arg(long, value_name = "FILE")]
    labels: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct BackendArgs {
    /// Where batch epochs run: auto (a GPU if present, else CPU), cpu or gpu.
    #[arg(long, value_name = "B", default_value = "auto")]
    backend: BackendChoice,
    /// GPU adapter to use: a case-insensitive part of its name (see `rosenblatt info`).
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
}

#[derive(Args, Debug)]
struct TrainArgs {
    /// Training data (CSV or LIBSVM).
    data: PathBuf,
    /// Write the model (JSON) here; without it nothing is written.
    #[arg(short, long, value_name = "MODEL")]
    output: Option<PathBuf>,
    /// Algorithm: online, batch, multiclass, pocket, averaged, voted, winnow or kernel.
    #[arg(long, default_value = "batch")]
    algo: Algo,
    #[command(flatten)]
    backend: BackendArgs,
    /// Maximum number of epochs.
    #[arg(long, default_value_t = 1000)]
    epochs: usize,
    /// Learning rate eta, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    lr: f32,
    /// Batch: stop when ||eta * sum|| < TOL (default: off).
    #[arg(long)]
    tol: Option<f32>,
    /// Seed for shuffling and random initialisation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not append the constant 1 to x (no bias).
    #[arg(long)]
    no_bias: bool,
    /// Online: keep the file order instead of shuffling each epoch.
    #[arg(long)]
    no_shuffle: bool,
    /// Initial weights: zero or random (small seeded values).
    #[arg(long, default_value = "zero", value_parser = parse_init)]
    init: Init,
    /// Online or batch form (default: the algorithm's own; see the README's table).
    #[arg(long)]
    mode: Option<Mode>,
    /// A mistake is a margin <= TAU (>= 0), for a larger-margin separator.
    #[arg(long, value_name = "TAU", default_value_t = 0.0)]
    margin_threshold: f32,
    /// Multiclass update: argmax (-x to the highest wrong class) or all (-x to every other).
    #[arg(long, default_value = "argmax")]
    multiclass_update: MulticlassUpdate,
    /// More than two classes: direct (one joint multiclass perceptron) or ovr (one vs rest).
    #[arg(long, default_value = "direct")]
    multiclass: MulticlassStrategy,
    /// Voted perceptron: most weight vectors kept (one per mistake).
    #[arg(long, default_value_t = 100_000)]
    max_vectors: usize,
    /// Kernel perceptron: linear, poly or rbf.
    #[arg(long, default_value = "linear", value_parser = ["linear", "poly", "rbf"])]
    kernel: String,
    /// Kernel poly: degree.
    #[arg(long, default_value_t = 3)]
    degree: u32,
    /// Kernel poly and rbf: gamma.
    #[arg(long, default_value_t = 1.0)]
    gamma: f32,
    /// Kernel poly: coef0.
    #[arg(long, default_value_t = 1.0)]
    coef0: f32,
    #[command(flatten)]
    data_args: DataArgs,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    json: bool,
    /// Also draw the training curves to this image (.png or .svg).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// 2-D binary data: animate the boundary epoch by epoch (online: update by update) to
    /// this .gif (at most 150 frames, 640 x 480).
    #[arg(long, value_name = "FILE.gif")]
    animate: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct PredictArgs {
    /// Model file written by `train -o`.
    model: PathBuf,
    /// Data to predict (labels, if present, are ignored).
    data: PathBuf,
    /// Write predictions here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Print the decision value w.x + b beside each label.
    #[arg(long)]
    margins: bool,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    data_args: DataArgs,
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// Model file written by `train -o`.
    model: PathBuf,
    /// Labelled data.
    data: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    data_args: DataArgs,
}

#[derive(Args, Debug)]
struct GenArgs {
    /// What to generate: separable (a hyperplane with a margin) or committee (p experts
    /// voting ±1, labelled by the majority of a hidden panel of k).
    #[arg(long, default_value = "separable", value_parser = ["separable", "committee"])]
    kind: String,
    /// Number of points.
    #[arg(long)]
    n: usize,
    /// Number of features (separable).
    #[arg(long, required_if_eq("kind", "separable"))]
    d: Option<usize>,
    /// Committee: number of experts (features).
    #[arg(long, required_if_eq("kind", "committee"))]
    p: Option<usize>,
    /// Committee: size of the hidden panel (odd).
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// Geometric margin: no point is closer than this to the true hyperplane.
    #[arg(long, default_value_t = 0.1)]
    margin: f32,
    /// Fraction of labels flipped (non-separable data), in [0, 0.5].
    #[arg(long, default_value_t = 0.0)]
    noise: f32,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Output format: csv or libsvm.
    #[arg(long, default_value = "csv")]
    format: Format,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct DemoArgs {
    #[command(flatten)]
    backend: BackendArgs,
    /// Rows of the larger generated set.
    #[arg(long, default_value_t = 200_000)]
    n: usize,
    /// Features of the larger generated set.
    #[arg(long, default_value_t = 32)]
    d: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_init(s: &str) -> Result<Init, String> {
    match s {
        "zero" => Ok(Init::Zero),
        "random" => Ok(Init::Random),
        _ => Err(format!("unknown init {s:?} (expected zero or random)")),
    }
}

/// Runs the CLI and returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => commands::train(a),
        Command::Predict(a) => commands::predict(a),
        Command::Eval(a) => commands::eval(a),
        Command::Gen(a) => commands::gen(a),
        Command::Demo(a) => demo::run(a),
        Command::Info(a) => commands::info(a),
        Command::Bench(a) => commands::bench(a),
        Command::Experiment(ExperimentCmd::Committee(a)) => commands::committee(a),
        Command::Plot(PlotCmd::Boundary(a)) => commands::plot_boundary(a),
        Command::Plot(PlotCmd::Training(a)) => commands::plot_training(a),
        Command::Plot(PlotCmd::Roc(a)) => commands::plot_roc(a),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_code(&e)
        }
    }
}

/// 2 for the user's input or parameters, 1 for everything else.
fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<rosenblatt::Error>() {
        Some(le) if le.is_input_error() => 2,
        _ => 1,
    }
}

fn load_data(path: &Path, a: &DataArgs, features: Option<usize>) -> anyhow::Result<Dataset> {
    let opts = LoadOptions {
        format: a.format,
        label_col: a.label_col.clone(),
        features: a.features.or(features),
        labels: a.labels.clone(),
    };
    Ok(data::load(path, &opts)?)
}

/// Chooses the backend and says which on stderr.
fn select_backend(a: &BackendArgs, quiet: bool) -> anyhow::Result<Selected> {
    let opts = GpuOptions {
        adapter: AdapterQuery {
            name: a.adapter.clone(),
            hardware_only: false,
        },
        ..Default::default()
    };
    let sel = backend::select(a.backend, &opts)?;
    if !quiet || a.backend == BackendChoice::Auto {
        eprintln!("{}", sel.note);
    }
    Ok(sel)
}

/// Writes a file through a temporary in the same directory, renamed into place only when
/// everything was written, so a failure never leaves a partial file.
fn write_atomic(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut tmp = rosenblatt::output::temp_beside(path, ".tmp")
        .with_context(|| format!("cannot create {}", path.display()))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        f(&mut w).with_context(|| format!("writing {}", path.display()))?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    rosenblatt::output::persist(tmp, path)
        .with_context(|| format!("cannot write {}", path.display()))?;
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
            match f(&mut w).and_then(|_| w.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => Ok(r?),
            }
        }
    }
}

/// A progress bar on stderr, shown only when stderr is a terminal, not under `--json`, and
/// only once training has run for more than a moment.
struct Bar {
    enabled: bool,
    start: Instant,
    bar: Option<ProgressBar>,
    /// Weight snapshots for `--animate` (kept only when asked for).
    snapshots: Option<Vec<(usize, Vec<f32>)>>,
}

impl Bar {
    fn new(enabled: bool) -> Self {
        Bar {
            enabled: enabled && std::io::stderr().is_terminal(),
            start: Instant::now(),
            bar: None,
            snapshots: None,
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// Most snapshots kept for an animation (they are subsampled to 150 frames when drawn).
const MAX_SNAPSHOTS: usize = 100_000;

impl Progress for Bar {
    fn wants_snapshots(&self) -> bool {
        self.snapshots.is_some()
    }

    fn snapshot(&mut self, epoch: usize, w: &[f32]) {
        if let Some(s) = self.snapshots.as_mut() {
            if s.len() < MAX_SNAPSHOTS {
                s.push((epoch, w.to_vec()));
            }
        }
    }

    fn update(&mut self, done: usize, max: usize, mistakes: u64) {
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
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
