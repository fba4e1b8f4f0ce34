//! The command line as clap sees it: every command's arguments, and their conversion into the
//! library's checked parameters (`TrainArgs` -> `Params` through `TryFrom`). Flag names live
//! here and in `errors.rs`, nowhere in the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use rosenblatt_backend::{BackendChoice, Kernel, Storage};
use rosenblatt_core::data::{Format, LabelCol};
use rosenblatt_core::params::{
    default_epochs, Algo, Arow, ArowCovariance, ClassWeight, Init, Mode, MulticlassStrategy,
    MulticlassUpdate, PaVariant, Params, PassiveAggressive, Scale, TrainParams,
};

/// The training defaults, written once in the library ([`TrainParams::default`]): the flags'
/// defaults and `--help` read them here.
fn defaults() -> TrainParams {
    TrainParams::default()
}

/// Train perceptrons on a GPU (wgpu) or the CPU.
#[derive(Parser, Debug)]
#[command(name = "rosenblatt", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Train a perceptron on a data file.
    Train(Box<TrainArgs>),
    /// Predict labels for a data file with a trained model.
    Predict(PredictArgs),
    /// Evaluate a model on labelled data: accuracy and confusion matrix.
    Eval(EvalArgs),
    /// Export a linear model as an ONNX graph (onnxruntime and other runtimes serve it).
    Export(ExportArgs),
    /// Generate a linearly separable data set (optionally with label noise).
    Gen(GenArgs),
    /// Convert CSV or LIBSVM text to a float32 .npy that training memory-maps (streamed).
    Convert(ConvertArgs),
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
pub(crate) enum PlotCmd {
    /// The decision boundary over 2-D data (or a slice through two features).
    Boundary(PlotModelArgs),
    /// Mistakes per epoch, cumulative mistakes against the Novikoff bound, and J.
    Training(PlotTrainingArgs),
    /// The ROC curve of a binary model, with its AUC.
    Roc(PlotModelArgs),
}

#[derive(Args, Debug)]
pub(crate) struct PlotSize {
    /// Width in pixels.
    #[arg(long, default_value_t = 800)]
    pub(crate) width: u32,
    /// Height in pixels.
    #[arg(long, default_value_t = 600)]
    pub(crate) height: u32,
}

#[derive(Args, Debug)]
pub(crate) struct PlotModelArgs {
    /// Model file.
    pub(crate) model: PathBuf,
    /// Labelled data.
    pub(crate) data: PathBuf,
    /// Output image (.png or .svg).
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: PathBuf,
    /// For d > 2: the two features (1-based) to plot, others held at their mean.
    #[arg(long, value_name = "I,J", value_delimiter = ',')]
    pub(crate) features: Option<Vec<usize>>,
    #[command(flatten)]
    pub(crate) size: PlotSize,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[command(flatten)]
    pub(crate) data_args: PlotDataArgs,
}

/// How to read the data of a plot (the feature count comes from the model).
#[derive(Args, Debug, Clone)]
pub(crate) struct PlotDataArgs {
    /// Label column: a header name, a 0-based index (negative from the end), or none.
    #[arg(long, value_name = "C", default_value = "auto")]
    pub(crate) label_col: LabelCol,
    /// File format: auto, csv, libsvm, npy or npz.
    #[arg(long, value_name = "F", default_value = "auto")]
    pub(crate) format: Format,
    /// NumPy features (.npy) or a scipy sparse matrix (.npz): the .npy file with the labels.
    #[arg(long, value_name = "FILE")]
    pub(crate) labels: Option<PathBuf>,
    /// LIBSVM and scipy sparse .npz: hold the features dense (n x d values). By default
    /// they are held sparse (memory grows with the non-zeros) when fewer than 10% of
    /// the values are non-zero.
    #[arg(long, conflicts_with = "sparse")]
    pub(crate) dense: bool,
    /// LIBSVM and scipy sparse .npz: hold the features sparse (CSR) whatever their density.
    #[arg(long)]
    pub(crate) sparse: bool,
    /// CSV: the column holding per-row weights (a header name or 0-based index); it is not a
    /// feature.
    #[arg(long, value_name = "C")]
    pub(crate) weight_col: Option<LabelCol>,
}

impl From<PlotDataArgs> for DataArgs {
    fn from(a: PlotDataArgs) -> Self {
        DataArgs {
            label_col: a.label_col,
            format: a.format,
            features: None,
            labels: a.labels,
            dense: a.dense,
            sparse: a.sparse,
            weight_col: a.weight_col,
            hash: HashArgs::default(),
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct PlotTrainingArgs {
    /// A `train --json` output or a model file.
    pub(crate) run: PathBuf,
    /// Output image (.png or .svg).
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) size: PlotSize,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ExperimentCmd {
    /// Online perceptron vs Winnow on committee streams: mistakes against the number of experts.
    Committee(CommitteeArgs),
    /// Novikoff's theorem: the online perceptron's mistakes against (R/gamma)^2 on separable
    /// sets of controlled margin, many seeds per margin, on log-log axes.
    Margin(MarginArgs),
    /// Test error per epoch of the last, pocket, averaged and voted models on noisy data
    /// (Freund and Schapire, 1999).
    Averaging(AveragingArgs),
    /// Time per batch epoch against n x d, on the CPU and a GPU where there is one, with the
    /// fitted slope (the lecture's O(n d) per iteration).
    Complexity(ComplexityArgs),
    /// Test accuracy against wall time (upload included) of the CPU's default (the online
    /// averaged perceptron, sequential), and on a GPU of the batch rule and the online
    /// averaged perceptron in steps and streams, each trained from scratch for each epoch
    /// budget (without a GPU: the CPU's stepped rule in its place).
    TimeToAccuracy(TimeArgs),
}

#[derive(Args, Debug)]
pub(crate) struct TimeArgs {
    /// Training data.
    pub(crate) train: PathBuf,
    /// Test data, in the same format.
    pub(crate) test: PathBuf,
    /// NumPy test features: the .npy file with the test labels.
    #[arg(long, value_name = "FILE")]
    pub(crate) test_labels: Option<PathBuf>,
    /// Epoch budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub(crate) epochs: Vec<usize>,
    #[command(flatten)]
    pub(crate) data: DataArgs,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[command(flatten)]
    pub(crate) out: ExperimentOut,
}

#[derive(Args, Debug)]
pub(crate) struct MarginArgs {
    /// Margins gamma asked of the generator (input space), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.1,0.03,0.01,0.003")]
    pub(crate) margins: Vec<f32>,
    /// Seeds (data sets) per margin.
    #[arg(long, default_value_t = 10)]
    pub(crate) seeds: u64,
    /// Points per set.
    #[arg(long, default_value_t = 500)]
    pub(crate) n: usize,
    /// Features.
    #[arg(long, default_value_t = 5)]
    pub(crate) d: usize,
    /// Most epochs a run may take to converge.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) max_epochs: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) out: ExperimentOut,
}

#[derive(Args, Debug)]
pub(crate) struct AveragingArgs {
    /// Training points (as many test points again).
    #[arg(long, default_value_t = 2000)]
    pub(crate) n: usize,
    /// Features.
    #[arg(long, default_value_t = 20)]
    pub(crate) d: usize,
    /// Fraction of labels flipped.
    #[arg(long, default_value_t = 0.1)]
    pub(crate) noise: f32,
    /// Epochs (one training of each model per epoch count).
    #[arg(long, default_value_t = 30)]
    pub(crate) epochs: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) out: ExperimentOut,
}

#[derive(Args, Debug)]
pub(crate) struct ComplexityArgs {
    /// Rows, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,40000,160000")]
    pub(crate) n: Vec<usize>,
    /// Features, comma-separated (every n with every d).
    #[arg(long, value_delimiter = ',', default_value = "16,64,256")]
    pub(crate) d: Vec<usize>,
    /// Timed epochs per size (the median is reported).
    #[arg(long, default_value_t = 9)]
    pub(crate) reps: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[command(flatten)]
    pub(crate) out: ExperimentOut,
}

/// The outputs every experiment takes.
#[derive(Args, Debug)]
pub(crate) struct ExperimentOut {
    /// Draw the experiment's picture to this file (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Print one JSON object with every point on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CommitteeArgs {
    /// Numbers of experts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    pub(crate) p: Vec<usize>,
    /// Size of the hidden panel (odd).
    #[arg(long, default_value_t = 5)]
    pub(crate) k: usize,
    /// Examples in each stream (one pass).
    #[arg(long, default_value_t = 3000)]
    pub(crate) n: usize,
    /// Winnow's learning rate eta, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    pub(crate) lr: f32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Rows.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) n: usize,
    /// Features.
    #[arg(long, default_value_t = 64)]
    pub(crate) d: usize,
    /// Epochs to time (after a warm-up).
    #[arg(long, default_value_t = 20)]
    pub(crate) epochs: usize,
    /// Backends: all (CPU, and a hardware GPU if present), cpu, or gpu (software adapters too).
    #[arg(long, default_value = "all", value_parser = ["all", "cpu", "gpu"])]
    pub(crate) backend: String,
    /// GPU adapter: a case-insensitive part of its name.
    #[arg(long, value_name = "NAME")]
    pub(crate) adapter: Option<String>,
    /// Most device memory X may take (bytes; K, M, G suffixes): larger X streams through the
    /// GPU every epoch, and the report gives the host-to-device bandwidth next to the epoch.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) gpu_memory: Option<u64>,
    /// With --gpu-memory: stream X by writing each segment from the host before its kernels
    /// (one epoch a submit), the path taken when the host cannot hold a staged copy of X,
    /// instead of copies from staging filled once
    #[arg(long, requires = "gpu_memory")]
    pub(crate) stream_writes: bool,
    /// With --gpu-memory: copy staged X into the device's slots each epoch, instead of the
    /// kernels reading it in place over the bus (the default for dense rows on Vulkan)
    #[arg(long, requires = "gpu_memory", conflicts_with = "stream_writes")]
    pub(crate) stream_copies: bool,
    /// GPU peak memory bandwidth in GB/s (default: a table of known devices).
    #[arg(long, value_name = "F")]
    pub(crate) peak_gbs: Option<f64>,
    /// Skip timing training to convergence.
    #[arg(long)]
    pub(crate) no_converge: bool,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 7)]
    pub(crate) seed: u64,
    /// Classes: 2 times the binary epoch; K > 2 (at most 64) the multiclass argmax epoch
    /// with K heads on generated K-class data.
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub(crate) classes: usize,
    /// Also time each GPU kernel of the epoch (timestamp queries, where the adapter has them)
    /// and give the bytes the kernel plan moves against one read of X.
    #[arg(long)]
    pub(crate) profile: bool,
    /// How X is stored: f32 (the generated floats), or f16, u8, i8 (the same data quantized
    /// to values the storage holds exactly, so the epoch reads 2 or 1 bytes per value).
    #[arg(long, value_name = "S", default_value = "f32")]
    pub(crate) storage: Storage,
    /// GPU tuning: workgroups of the register pass's persistent grid per segment (default:
    /// the planner's choice, shown by --profile).
    #[arg(long, value_name = "N")]
    pub(crate) workgroups: Option<usize>,
    /// GPU tuning: most heads one thread of the register pass holds (default: the planner's).
    #[arg(long, value_name = "N")]
    pub(crate) heads_per_thread: Option<u32>,
    /// GPU tuning: rows each thread of the register pass loads before it uses the first,
    /// where rows can be in flight (default: the planner's, 64 bytes a thread; 0: off).
    #[arg(long, value_name = "N")]
    pub(crate) rows_per_thread: Option<u32>,
    /// GPU tuning: rows a tile per row group where a row spans several subgroups (4, 8 or
    /// 16; default: the planner's, 8 on 32-lane subgroups; 0: off, the loop by steps).
    #[arg(long, value_name = "N")]
    pub(crate) tile_rows: Option<u32>,
    /// GPU tuning: the two-kernel path (scores, then the update's sums: X read twice) even
    /// where the register pass fits.
    #[arg(long)]
    pub(crate) two_kernels: bool,
    /// GPU measurement: which of naga's runtime checks the kernels keep: full,
    /// no-loop-counters (bounds checks only), none (default: full on a software adapter,
    /// no-loop-counters on a GPU).
    #[arg(long, value_name = "C")]
    pub(crate) shader_checks: Option<rosenblatt_backend::gpu::ShaderChecks>,
    /// GPU measurement: how the kernels read their parameter blocks: uniform or storage
    /// (default: storage on a software adapter, uniform on a GPU).
    #[arg(long, value_name = "S")]
    pub(crate) params_space: Option<rosenblatt_backend::gpu::ParamsSpace>,
    /// Under `mpirun -np N` (a build with `--features mpi`): each process times the epoch on
    /// its CPU (with --backend gpu: on a GPU of its machine) over its share of the rows with
    /// the sums over all processes, and the first reports the time those sums take.
    #[arg(long)]
    pub(crate) distributed: bool,
    /// Time sparse epochs: each row has this share of its d features non-zero, held as CSR
    /// (binary rule; the figures count the values, columns and row starts read).
    #[arg(long, value_name = "P")]
    pub(crate) density: Option<f64>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct InfoArgs {
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// How to read a data file.
#[derive(Args, Debug, Clone)]
pub(crate) struct DataArgs {
    /// Label column: a header name, a 0-based index (negative from the end), or none.
    /// Default: a column named label, y, target or class, else the last column.
    #[arg(long, value_name = "C", default_value = "auto")]
    pub(crate) label_col: LabelCol,
    /// File format: auto (by extension, else sniffed), csv, libsvm, npy or npz.
    #[arg(long, value_name = "F", default_value = "auto")]
    pub(crate) format: Format,
    /// LIBSVM: number of features (default: the largest index in the file).
    #[arg(long, value_name = "D")]
    pub(crate) features: Option<usize>,
    /// NumPy features (.npy) or a scipy sparse matrix (.npz): the .npy file with the labels.
    #[arg(long, value_name = "FILE")]
    pub(crate) labels: Option<PathBuf>,
    /// LIBSVM and scipy sparse .npz: hold the features dense (n x d values). By default
    /// they are held sparse (memory grows with the non-zeros) when fewer than 10% of
    /// the values are non-zero.
    #[arg(long, conflicts_with = "sparse")]
    pub(crate) dense: bool,
    /// LIBSVM and scipy sparse .npz: hold the features sparse (CSR) whatever their density.
    #[arg(long)]
    pub(crate) sparse: bool,
    /// CSV: the column holding per-row weights (a header name or 0-based index); it is not a
    /// feature. `train` scales each row's updates by it.
    #[arg(long, value_name = "C")]
    pub(crate) weight_col: Option<LabelCol>,
    #[command(flatten)]
    pub(crate) hash: HashArgs,
}

/// How raw features are hashed: Vowpal Wabbit input, or CSV with categorical columns
/// (train; predict and eval take the model's).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct HashArgs {
    /// Vowpal Wabbit input, or CSV with --categorical: hash the features into 2^B columns (1
    /// to 28; default 18, as Vowpal Wabbit's -b).
    #[arg(long, value_name = "B")]
    pub(crate) hash_bits: Option<u32>,
    /// Hashed input: signed (each feature's value times +1 or -1 from its hash, so collisions
    /// cancel on average; the default) or unsigned (Vowpal Wabbit's own).
    #[arg(long, value_name = "S")]
    pub(crate) hash_sign: Option<rosenblatt_core::data::hashing::HashSign>,
    /// Vowpal Wabbit input: a quadratic interaction of the namespaces whose names start with
    /// the two characters AB (as Vowpal Wabbit's -q ab); repeat for more.
    #[arg(short = 'q', long, value_name = "AB")]
    pub(crate) quadratic: Vec<String>,
    /// CSV input: hash the rows, the columns COLS (header names or 0-based indices, comma
    /// separated) as categories: a value v in column c is the feature "c=v", every other
    /// feature column its name with its number as the value, an empty field missing (as the
    /// Vowpal Wabbit line "| c=v name:x" would be hashed).
    #[arg(long, value_name = "COLS", value_delimiter = ',')]
    pub(crate) categorical: Vec<String>,
}

#[derive(Args, Debug)]
pub(crate) struct BackendArgs {
    /// Where batch epochs run: auto (a GPU if present, else CPU), cpu or gpu.
    #[arg(long, value_name = "B", default_value = "auto")]
    pub(crate) backend: BackendChoice,
    /// GPU adapter to use: a case-insensitive part of its name (see `rosenblatt info`).
    #[arg(long, value_name = "NAME")]
    pub(crate) adapter: Option<String>,
    /// Most device memory X may take (bytes; K, M, G suffixes are powers of 1024): larger X
    /// streams through the GPU, two segments at a time, every epoch.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) gpu_memory: Option<u64>,
}

/// A byte count: digits with an optional K, M or G (powers of 1024).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{s:?} is not a positive byte count (e.g. 512M, 4G)"))
}

#[derive(Args, Debug)]
pub(crate) struct TrainArgs {
    /// Training data (CSV or LIBSVM).
    pub(crate) data: PathBuf,
    /// Write the model (JSON) here; without it nothing is written.
    #[arg(short, long, value_name = "MODEL")]
    pub(crate) output: Option<PathBuf>,
    /// Algorithm: online, batch, multiclass, pocket, averaged, voted, winnow, kernel, pa
    /// (passive-aggressive) or arow (per-feature confidences; binary or one-vs-rest).
    /// [default: averaged; Vowpal Wabbit text of 16 MiB or more with no --algo, --epochs or
    /// held-out rows named: one streamed pass of arow, as the report says]
    #[arg(long)]
    pub(crate) algo: Option<Algo>,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    /// Maximum number of epochs [default: 1000; 1 for arow].
    #[arg(long)]
    pub(crate) epochs: Option<usize>,
    /// Learning rate eta, in (0, 1].
    #[arg(long, default_value_t = defaults().lr)]
    pub(crate) lr: f32,
    /// Batch: stop when ||eta * sum|| < TOL (default: off).
    #[arg(long)]
    pub(crate) tol: Option<f32>,
    /// Seed for shuffling and random initialisation.
    #[arg(long, default_value_t = defaults().seed)]
    pub(crate) seed: u64,
    /// Do not append the constant 1 to x (no bias).
    #[arg(long)]
    pub(crate) no_bias: bool,
    /// Online: keep the file order instead of shuffling each epoch.
    #[arg(long)]
    pub(crate) no_shuffle: bool,
    /// Initial weights: zero or random (small seeded values).
    #[arg(long, default_value_t = defaults().init, value_parser = parse_init)]
    pub(crate) init: Init,
    /// Online or batch form (default: the algorithm's own; see the README's table).
    #[arg(long)]
    pub(crate) mode: Option<Mode>,
    /// A mistake is a margin <= TAU (>= 0), for a larger-margin separator.
    #[arg(long, value_name = "TAU", default_value_t = defaults().margin_threshold)]
    pub(crate) margin_threshold: f32,
    /// Multiclass update: argmax (-x to the highest wrong class) or all (-x to every other).
    #[arg(long, default_value_t = defaults().multiclass_update)]
    pub(crate) multiclass_update: MulticlassUpdate,
    /// More than two classes: direct (one joint multiclass perceptron) or ovr (one vs rest).
    #[arg(long, default_value_t = defaults().multiclass)]
    pub(crate) multiclass: MulticlassStrategy,
    /// Voted perceptron: most weight vectors kept (one per mistake).
    #[arg(long, default_value_t = defaults().max_vectors)]
    pub(crate) max_vectors: usize,
    /// Online perceptron, averaged perceptron, pa and arow: rows per step. A step's rows are
    /// scored by the weights it started with and their updates added together (the form a
    /// GPU runs in parallel); the average is over steps. 1 is the sequential rule.
    #[arg(long, value_name = "B", default_value_t = defaults().minibatch)]
    pub(crate) minibatch: usize,
    /// Online perceptron, averaged perceptron, pa and arow: split each epoch's rows into S
    /// streams trained from the same weights and mixed by their mean after the epoch (AROW's
    /// confidences too; the form a GPU runs as S workgroups). 1 is the sequential rule.
    #[arg(long, value_name = "S", default_value_t = defaults().streams)]
    pub(crate) streams: usize,
    /// Passive-aggressive (--algo pa): pa (unbounded steps), pa1 (steps at most C) or pa2
    /// (squared hinge).
    #[arg(long, default_value_t = PassiveAggressive::default().variant)]
    pub(crate) pa_variant: PaVariant,
    /// Passive-aggressive: the aggressiveness C of pa1 and pa2 (> 0).
    #[arg(long, value_name = "C", default_value_t = PassiveAggressive::default().c)]
    pub(crate) aggressiveness: f32,
    /// AROW (--algo arow): the regularization r (> 0); larger, the confidences grow slower.
    #[arg(long, value_name = "R", default_value_t = Arow::default().r)]
    pub(crate) arow_r: f32,
    /// AROW: the covariance kept, diagonal (a confidence per weight) or full (the whole
    /// matrix: at most 2,047 features, row by row on the CPU, and the report gives the
    /// paper's mistake bound).
    #[arg(long, value_name = "KIND", default_value_t = Arow::default().covariance)]
    pub(crate) arow_covariance: ArowCovariance,
    /// Kernel perceptron: linear, poly or rbf.
    #[arg(long, default_value = "linear", value_parser = ["linear", "poly", "rbf"])]
    pub(crate) kernel: String,
    /// Kernel poly: degree.
    #[arg(long, default_value_t = 3)]
    pub(crate) degree: u32,
    /// Kernel poly and rbf: gamma.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) gamma: f32,
    /// Kernel poly: coef0.
    #[arg(long, default_value_t = 1.0)]
    coef0: f32,
    #[command(flatten)]
    pub(crate) data_args: DataArgs,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also draw the training curves to this image (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// 2-D binary data: animate the boundary epoch by epoch (online: update by update) to
    /// this .gif (at most 150 frames, 640 x 480).
    #[arg(long, value_name = "FILE.gif")]
    pub(crate) animate: Option<PathBuf>,
    /// Data-parallel training under `mpirun -np N`: each process reads its share of the rows
    /// and trains on its CPU or GPU, and the batch epoch's sums are added over all (the
    /// single-process model; see the README's Scale section). Needs a build with
    /// `--features mpi`.
    #[arg(long)]
    pub(crate) distributed: bool,
    /// One pass over Vowpal Wabbit text read in blocks and never held whole (a file larger
    /// than memory; `-` for standard input): memory is the model plus a few 8 MiB blocks, and
    /// each block is parsed on every core while the one before trains. The online rules
    /// (online, averaged, multiclass, pa, arow, winnow), in file order, on the CPU; the
    /// accuracy reported is progressive (each row predicted as the model met it).
    #[arg(long, conflicts_with_all = [
        "distributed", "validation", "validation_fraction", "sample_weights", "init_model",
        "plot", "animate",
    ])]
    pub(crate) stream: bool,
    /// Continue from this saved model (same kind, features and classes) instead of w = 0.
    /// `-o` may name the same file: it is read before anything is written.
    #[arg(long, value_name = "MODEL", conflicts_with = "init")]
    pub(crate) init_model: Option<PathBuf>,
    /// Stop after N epochs without improvement of the monitored figure (training mistakes,
    /// or validation mistakes with --validation/--validation-fraction); 0: off. Default: 10
    /// for the online averaged perceptron, 30 otherwise.
    #[arg(long, value_name = "N")]
    pub(crate) patience: Option<u32>,
    /// An epoch improves when its figure is below (1 - F) times the figure at the last
    /// improvement (F in [0, 1)).
    #[arg(long, value_name = "F", default_value_t = defaults().min_improvement)]
    pub(crate) min_improvement: f32,
    /// Training mistakes only: while the fewest mistakes are at most this fraction of the rows
    /// (nearly separable data, which may still converge), patience also waits as many epochs
    /// after the best epoch as it took to reach it. Default: 0 for the online averaged
    /// perceptron (its average settles first), 0.01 otherwise.
    #[arg(long, value_name = "F")]
    pub(crate) patience_floor: Option<f32>,
    /// Hold out this fraction of the rows (seeded, stratified) for validation: patience
    /// watches its mistakes and the best validation epoch's model is kept.
    #[arg(long, value_name = "F", conflicts_with = "validation")]
    pub(crate) validation_fraction: Option<f32>,
    /// Validation data (same format options as DATA): patience watches its mistakes and the
    /// best validation epoch's model is kept.
    #[arg(long, value_name = "FILE")]
    pub(crate) validation: Option<PathBuf>,
    /// Class weights on the updates: balanced (n / (classes * rows of the class)) or
    /// NAME=W,NAME=W,... (1 for classes not named). With --multiclass ovr, in the class's own
    /// head only (as scikit-learn's one-vs-rest).
    #[arg(long, value_name = "W")]
    pub(crate) class_weight: Option<ClassWeight>,
    /// Per-row weights on the updates from a .npy file of n values (see also --weight-col).
    #[arg(long, value_name = "FILE.npy", conflicts_with = "weight_col")]
    pub(crate) sample_weights: Option<PathBuf>,
    /// Feature scaling kept in the model: online, maxabs, standard, minmax or none. Default:
    /// online (each feature divided by its largest magnitude, the maximum kept as the online
    /// rules read the rows, a streamed run too; the rules that read every row first take the
    /// whole set's: maxabs), but none for --algo kernel and --animate, and a continued run
    /// (--init-model) keeps the model's. none is the raw rule of the lecture notes (Novikoff's
    /// bound is stated on raw x).
    #[arg(long, value_name = "S")]
    pub(crate) scale: Option<Scale>,
    /// How X is stored for training: auto (the narrowest exact storage for batch epochs), f32,
    /// f16, u8 or i8. Results are the same; a compact storage reads fewer bytes per epoch. A
    /// storage that does not hold every value exactly is an error.
    #[arg(long, value_name = "S", default_value = "auto")]
    pub(crate) storage: StorageChoice,
}

/// `--storage`: `auto` or a storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StorageChoice(pub(crate) Option<Storage>);

impl std::str::FromStr for StorageChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(StorageChoice(None));
        }
        s.parse::<Storage>()
            .map(|s| StorageChoice(Some(s)))
            .map_err(|_| format!("unknown storage {s:?} (expected auto, f32, f16, u8 or i8)"))
    }
}

#[derive(Args, Debug)]
pub(crate) struct PredictArgs {
    /// Model file written by `train -o`.
    pub(crate) model: PathBuf,
    /// Data to predict (labels, if present, are ignored).
    pub(crate) data: PathBuf,
    /// Write predictions here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: Option<PathBuf>,
    /// Print the decision value w.x + b beside each label.
    #[arg(long)]
    pub(crate) margins: bool,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[command(flatten)]
    pub(crate) data_args: DataArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// Model file written by `train -o` (binary, multiclass, one-vs-rest; not voted or kernel).
    pub(crate) model: PathBuf,
    /// The ONNX file to write (input `X`: float32, rows x features; outputs `label`, the
    /// class names, and `scores`, the decision values).
    #[arg(short, long, value_name = "MODEL.onnx")]
    pub(crate) output: PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// Model file written by `train -o`.
    pub(crate) model: PathBuf,
    /// Labelled data.
    pub(crate) data: PathBuf,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    #[command(flatten)]
    pub(crate) data_args: DataArgs,
}

#[derive(Args, Debug)]
pub(crate) struct GenArgs {
    /// What to generate: separable (a hyperplane with a margin), committee (p experts
    /// voting ±1, labelled by the majority of a hidden panel of k) or clicks (a click log
    /// shaped as Criteo's: 13 counts, 26 categorical fields with skewed frequencies, a planted
    /// linear rule; Vowpal Wabbit text, or CSV with --format csv, written row by row).
    #[arg(long, default_value = "separable", value_parser = ["separable", "committee", "clicks"])]
    pub(crate) kind: String,
    /// Number of points.
    #[arg(long)]
    pub(crate) n: usize,
    /// Number of features (separable).
    #[arg(long, required_if_eq("kind", "separable"))]
    pub(crate) d: Option<usize>,
    /// Committee: number of experts (features).
    #[arg(long, required_if_eq("kind", "committee"))]
    pub(crate) p: Option<usize>,
    /// Committee: size of the hidden panel (odd).
    #[arg(long, default_value_t = 5)]
    pub(crate) k: usize,
    /// Geometric margin: no point is closer than this to the true hyperplane (default 0.1;
    /// with --density, a tenth of the typical |w*.x|, sqrt(density / 3)).
    #[arg(long)]
    pub(crate) margin: Option<f32>,
    /// Separable kind: make sparse rows with this share of non-zero features (in (0, 1]),
    /// through the origin (no bias); write them with --format libsvm.
    #[arg(long, value_name = "P")]
    pub(crate) density: Option<f64>,
    /// Fraction of labels flipped (non-separable data), in [0, 0.5].
    #[arg(long, default_value_t = 0.0)]
    pub(crate) noise: f32,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Output format: csv (the default), libsvm or vw (Vowpal Wabbit text, features named by
    /// their 0-based column); clicks: vw (the default) or csv (label,I1..I13,C1..C26: train
    /// it with --categorical C1,...,C26).
    #[arg(long)]
    pub(crate) format: Option<Format>,
    /// Write here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct ConvertArgs {
    /// CSV or LIBSVM data.
    pub(crate) data: PathBuf,
    /// The features, as a float32 C-order .npy.
    #[arg(short, long, value_name = "X.npy")]
    pub(crate) output: PathBuf,
    /// The labels, as a .npy of class names (default: the output's name with .labels.npy).
    #[arg(long, value_name = "Y.npy")]
    pub(crate) labels_out: Option<PathBuf>,
    /// Label column: a header name, a 0-based index (negative from the end), or none.
    #[arg(long, value_name = "C", default_value = "auto")]
    pub(crate) label_col: LabelCol,
    /// File format: auto, csv or libsvm.
    #[arg(long, value_name = "F", default_value = "auto")]
    pub(crate) format: Format,
    /// LIBSVM: number of features (default: the largest index in the file).
    #[arg(long, value_name = "D")]
    pub(crate) features: Option<usize>,
}

#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    #[command(flatten)]
    pub(crate) backend: BackendArgs,
    /// Rows of the larger generated set.
    #[arg(long, default_value_t = 200_000)]
    pub(crate) n: usize,
    /// Features of the larger generated set.
    #[arg(long, default_value_t = 32)]
    pub(crate) d: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

pub(crate) fn parse_init(s: &str) -> Result<Init, String> {
    match s {
        "zero" => Ok(Init::Zero),
        "random" => Ok(Init::Random),
        _ => Err(format!("unknown init {s:?} (expected zero or random)")),
    }
}

impl TryFrom<&TrainArgs> for Params {
    type Error = rosenblatt::Error;

    fn try_from(a: &TrainArgs) -> Result<Params, rosenblatt::Error> {
        let algo = a.algo.unwrap_or(defaults().algo);
        let stopping = rosenblatt_core::params::default_stopping(algo, a.mode);
        TrainParams {
            algo,
            epochs: a.epochs.unwrap_or(default_epochs(algo)),
            lr: a.lr,
            tol: a.tol,
            seed: a.seed,
            fit_bias: !a.no_bias,
            init: a.init,
            shuffle: !a.no_shuffle,
            mode: a.mode,
            margin_threshold: a.margin_threshold,
            multiclass_update: a.multiclass_update,
            multiclass: a.multiclass,
            max_vectors: a.max_vectors,
            minibatch: a.minibatch,
            streams: a.streams,
            patience: Some(a.patience.unwrap_or(stopping.0)),
            min_improvement: a.min_improvement,
            patience_floor: a.patience_floor.unwrap_or(stopping.1),
            validation_fraction: a.validation_fraction,
            // A large set holds out a share for the stopping rule (not in a data-parallel
            // run, whose processes may read only their share of the rows).
            auto_validation: !a.distributed,
            class_weight: a.class_weight.clone(),
            scale: a.scale.unwrap_or(match a.animate {
                // An animation draws the data as given.
                Some(_) => Scale::None,
                None => rosenblatt::default_scale(algo),
            }),
            storage: a.storage.0,
            passive_aggressive: (algo == Algo::PassiveAggressive).then_some(PassiveAggressive {
                variant: a.pa_variant,
                c: a.aggressiveness,
            }),
            arow: (algo == Algo::Arow).then_some(Arow {
                r: a.arow_r,
                covariance: a.arow_covariance,
            }),
            kernel: (algo == Algo::Kernel).then_some(match a.kernel.as_str() {
                "poly" => Kernel::Poly {
                    degree: a.degree,
                    gamma: a.gamma,
                    coef0: a.coef0,
                },
                "rbf" => Kernel::Rbf { gamma: a.gamma },
                _ => Kernel::Linear,
            }),
        }
        .validate()
    }
}
