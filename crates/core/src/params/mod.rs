//! Training parameters: an unchecked [`TrainParams`] builder that validates into [`Params`],
//! the only form the training functions accept. Errors name the option and the bad value.

use serde::{Deserialize, Serialize};

use crate::matrix::Storage;

mod kernel;
use crate::error::{Error, Param, Result};
pub use kernel::Kernel;

/// Training algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// Rosenblatt's online rule: update on each mistake, point by point.
    Online,
    /// Batch rule: per epoch add eta times the sum of y*x over all mistakes.
    #[default]
    Batch,
    /// One weight vector per class, prediction argmax_k w_k.x (chosen automatically for
    /// more than two classes).
    Multiclass,
    /// Batch rule that returns the weights with the fewest training mistakes seen (Gallant).
    Pocket,
    /// Average of all intermediate weight vectors (online, lazy sums) or of the per-epoch
    /// weights (batch).
    Averaged,
    /// Freund and Schapire's voted perceptron: every intermediate weight vector votes with
    /// its survival count (online).
    Voted,
    /// Littlestone's Winnow: multiplicative updates beta_j *= exp(eta y x_j) (online or batch).
    Winnow,
    /// The dual (kernel) perceptron with batch updates of per-point counts.
    Kernel,
    /// Crammer et al.'s passive-aggressive rules (PA, PA-I, PA-II): on a margin below 1, the
    /// smallest step (capped by the aggressiveness C) that reaches it (online).
    #[serde(rename = "pa")]
    PassiveAggressive,
    /// Crammer, Kulesza and Dredze's AROW: a per-feature confidence (diagonal covariance)
    /// that makes steps large for rare features and small for frequent ones (online; binary
    /// or one-vs-rest).
    Arow,
}

impl Algo {
    /// Name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Online => "online",
            Algo::Batch => "batch",
            Algo::Multiclass => "multiclass",
            Algo::Pocket => "pocket",
            Algo::Averaged => "averaged",
            Algo::Voted => "voted",
            Algo::Winnow => "winnow",
            Algo::Kernel => "kernel",
            Algo::PassiveAggressive => "pa",
            Algo::Arow => "arow",
        }
    }

    /// The algorithm as reports title it: "batch perceptron", "passive-aggressive".
    pub fn title(self) -> String {
        match self {
            Algo::PassiveAggressive => "passive-aggressive".to_string(),
            Algo::Arow => "AROW".to_string(),
            Algo::Winnow => "Winnow".to_string(),
            a => format!("{} perceptron", a.name()),
        }
    }

    /// The form used when `--mode` is not given.
    pub fn default_mode(self) -> Mode {
        match self {
            Algo::Online
            | Algo::Averaged
            | Algo::Voted
            | Algo::Winnow
            | Algo::PassiveAggressive
            | Algo::Arow => Mode::Online,
            Algo::Batch | Algo::Multiclass | Algo::Pocket | Algo::Kernel => Mode::Batch,
        }
    }
}

impl std::str::FromStr for Algo {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "online" => Algo::Online,
            "batch" => Algo::Batch,
            "multiclass" => Algo::Multiclass,
            "pocket" => Algo::Pocket,
            "averaged" => Algo::Averaged,
            "voted" => Algo::Voted,
            "winnow" => Algo::Winnow,
            "kernel" => Algo::Kernel,
            "pa" => Algo::PassiveAggressive,
            "arow" => Algo::Arow,
            _ => {
                return Err(format!(
                    "unknown algorithm {s:?} (expected online, batch, multiclass, pocket, averaged, voted, winnow, kernel, pa or arow)"
                ))
            }
        })
    }
}

/// The passive-aggressive variant: how far a step goes (Crammer et al., JMLR 2006).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PaVariant {
    /// PA: the step that makes the margin exactly 1 (unbounded).
    Pa,
    /// PA-I: that step, at most C (scikit-learn's `loss="hinge"`).
    #[default]
    Pa1,
    /// PA-II: loss / (||x||^2 + 1 / (2 C)) (scikit-learn's `loss="squared_hinge"`).
    Pa2,
}

impl std::str::FromStr for PaVariant {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "pa" => Ok(PaVariant::Pa),
            "pa1" | "pa-i" => Ok(PaVariant::Pa1),
            "pa2" | "pa-ii" => Ok(PaVariant::Pa2),
            _ => Err(format!(
                "unknown passive-aggressive variant {s:?} (expected pa, pa1 or pa2)"
            )),
        }
    }
}

/// How far a passive-aggressive step goes (Crammer et al., JMLR 2006): for hinge loss `l`
/// when a unit step moves the margin by `q`, l / q (PA), at most C (PA-I), or
/// l / (q + 1 / (2 C)) (PA-II).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaSize {
    /// l / q.
    Pa,
    /// min(l / q, C).
    Pa1(f32),
    /// l / (q + 1 / (2 C)).
    Pa2(f32),
}

impl PaSize {
    /// The step for hinge loss `loss` when a unit step moves the margin by `q`.
    #[inline(always)]
    pub fn size(self, loss: f32, q: f32) -> f32 {
        match self {
            PaSize::Pa => loss / q,
            PaSize::Pa1(c) => (loss / q).min(c),
            PaSize::Pa2(c) => loss / (q + 0.5 / c),
        }
    }

    /// The code of the variant in shaders/steps.wgsl's parameters (1, 2, 3) and C.
    pub fn code(self) -> (u32, f32) {
        match self {
            PaSize::Pa => (1, 1.0),
            PaSize::Pa1(c) => (2, c),
            PaSize::Pa2(c) => (3, c),
        }
    }
}

/// The passive-aggressive rule's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassiveAggressive {
    /// PA, PA-I or PA-II.
    pub variant: PaVariant,
    /// The aggressiveness C of PA-I and PA-II (> 0).
    pub c: f32,
}

impl PassiveAggressive {
    /// The step size rule the backends take.
    pub fn size(self) -> PaSize {
        match self.variant {
            PaVariant::Pa => PaSize::Pa,
            PaVariant::Pa1 => PaSize::Pa1(self.c),
            PaVariant::Pa2 => PaSize::Pa2(self.c),
        }
    }
}

/// AROW's settings (Crammer, Kulesza and Dredze, NIPS 2009).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arow {
    /// The regularization r (> 0): how slowly the per-feature confidences grow.
    pub r: f32,
    /// The covariance kept: a confidence per weight (diagonal) or the whole matrix (full),
    /// for which the paper's mistake bound holds. (Serialized only when full, so that the
    /// diagonal rule's model files stay readable by earlier builds.)
    #[serde(default, skip_serializing_if = "ArowCovariance::is_diagonal")]
    pub covariance: ArowCovariance,
}

impl Default for Arow {
    fn default() -> Self {
        Arow {
            r: 30.0,
            covariance: ArowCovariance::Diagonal,
        }
    }
}

/// The covariance AROW keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ArowCovariance {
    /// A confidence per weight: memory and work per row as the weights' (sparse rows, hashed
    /// text); no mistake bound is known for it.
    #[default]
    Diagonal,
    /// The whole (d + 1) x (d + 1) matrix a head, at most [`AROW_FULL_MAX_COLUMNS`] columns,
    /// row by row on the CPU: work (d + 1)^2 a step, and the paper's mistake bound.
    Full,
}

impl ArowCovariance {
    /// True for the diagonal covariance (the default).
    pub fn is_diagonal(&self) -> bool {
        *self == ArowCovariance::Diagonal
    }

    /// The name the front ends use.
    pub fn name(self) -> &'static str {
        match self {
            ArowCovariance::Diagonal => "diagonal",
            ArowCovariance::Full => "full",
        }
    }
}

impl std::fmt::Display for ArowCovariance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ArowCovariance {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "diagonal" => Ok(ArowCovariance::Diagonal),
            "full" => Ok(ArowCovariance::Full),
            _ => Err(format!(
                "unknown AROW covariance {s:?} (expected diagonal or full)"
            )),
        }
    }
}

/// Most columns (the features and the bias) of AROW with a full covariance, whose matrix
/// holds their square a head (2,048^2 values: 32 MiB in f64).
pub const AROW_FULL_MAX_COLUMNS: usize = 2048;

impl Default for PassiveAggressive {
    fn default() -> Self {
        PassiveAggressive {
            variant: PaVariant::default(),
            c: 1.0,
        }
    }
}

/// Online (point by point, on the CPU) or batch (per epoch, on any backend) form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Update after each mistake.
    Online,
    /// Update once per epoch with the sum over the mistakes.
    Batch,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "online" => Ok(Mode::Online),
            "batch" => Ok(Mode::Batch),
            _ => Err(format!("unknown mode {s:?} (expected online or batch)")),
        }
    }
}

/// Multiclass update on a mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MulticlassUpdate {
    /// +x to the true class, -x to every other class (the lecture notes' Algorithm 2).
    All,
    /// +x to the true class, -x to the highest-scoring wrong class only.
    #[default]
    Argmax,
}

impl std::str::FromStr for MulticlassUpdate {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(MulticlassUpdate::All),
            "argmax" => Ok(MulticlassUpdate::Argmax),
            _ => Err(format!(
                "unknown multiclass update {s:?} (expected all or argmax)"
            )),
        }
    }
}

/// How more than two classes are learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MulticlassStrategy {
    /// One weight vector per class trained jointly (argmax rule).
    #[default]
    Direct,
    /// One binary perceptron per class (class k against the rest), trained in parallel.
    Ovr,
}

impl std::str::FromStr for MulticlassStrategy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "direct" => Ok(MulticlassStrategy::Direct),
            "ovr" => Ok(MulticlassStrategy::Ovr),
            _ => Err(format!(
                "unknown multiclass strategy {s:?} (expected direct or ovr)"
            )),
        }
    }
}

/// Initial weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// w = 0 (the convergence proof's start).
    #[default]
    Zero,
    /// Small seeded random values, uniform in [-0.01, 0.01].
    Random,
}

/// Feature scaling, fitted on the training data and kept in the model (applied again at
/// predict, eval and plot time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The features as given (the lecture notes' perceptron).
    #[default]
    None,
    /// (x - mean) / standard deviation per feature.
    Standard,
    /// (x - min) / (max - min) per feature, into [0, 1].
    Minmax,
    /// x / max |x| per feature, into [-1, 1]; keeps zeros zero (sparse data stays sparse).
    Maxabs,
    /// x / max(max |x|, floor) per feature, the maximum kept online: the sequential online
    /// rules (and a streamed run) scale each row by the largest magnitudes of the rows read so
    /// far, the row itself included, and when a feature's magnitude grows multiply what they
    /// keep of it so that the model on the features as given is unchanged; one pass needs no
    /// pass before it (normalised online learning, Ross, Mineiro and Langford 2013). The floor
    /// is 1 (features under 1 are left as they are) but for AROW, 0
    /// (`data::scale::online_floor`). The model keeps the final factors. The rules that read
    /// every row before they step (the batch forms, the stepped forms, the voted and kernel
    /// perceptrons) and AROW in memory take the whole training set's magnitudes at once.
    Online,
}

impl Scale {
    /// True for the scalings that divide by max |x| ([`Scale::Maxabs`], [`Scale::Online`]).
    pub fn is_max_abs(self) -> bool {
        matches!(self, Scale::Maxabs | Scale::Online)
    }

    /// Name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Scale::None => "none",
            Scale::Standard => "standard",
            Scale::Minmax => "minmax",
            Scale::Maxabs => "maxabs",
            Scale::Online => "online",
        }
    }
}

impl std::str::FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(Scale::None),
            "standard" => Ok(Scale::Standard),
            "minmax" => Ok(Scale::Minmax),
            "maxabs" => Ok(Scale::Maxabs),
            "online" => Ok(Scale::Online),
            _ => Err(format!(
                "unknown scaling {s:?} (expected online, maxabs, standard, minmax or none)"
            )),
        }
    }
}

/// Per-class weights: a factor on every update a row of the class makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassWeight {
    /// n / (classes * rows of the class), as scikit-learn's "balanced".
    Balanced,
    /// The given weight for each named class (1 for classes not named).
    Given(Vec<(String, f32)>),
}

impl std::str::FromStr for ClassWeight {
    type Err = String;
    /// `balanced`, or `NAME=W,NAME=W,...`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "balanced" {
            return Ok(ClassWeight::Balanced);
        }
        let mut out = Vec::new();
        for part in s.split(',') {
            let (name, w) = part.rsplit_once('=').ok_or_else(|| {
                format!("{part:?} is not NAME=WEIGHT (expected balanced or NAME=W,...)")
            })?;
            let w: f32 = w
                .trim()
                .parse()
                .map_err(|_| format!("the weight of class {name:?} is not a number: {w:?}"))?;
            out.push((name.trim().to_string(), w));
        }
        Ok(ClassWeight::Given(out))
    }
}

/// Each parameter enum displays as the name the command line and files use (so the CLI's
/// help shows the defaults of [`TrainParams::default`]).
macro_rules! display_names {
    ($($t:ty { $($v:ident => $n:literal),+ $(,)? })+) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self { $(<$t>::$v => $n),+ })
            }
        }
    )+};
}

display_names! {
    PaVariant { Pa => "pa", Pa1 => "pa1", Pa2 => "pa2" }
    Mode { Online => "online", Batch => "batch" }
    MulticlassUpdate { All => "all", Argmax => "argmax" }
    MulticlassStrategy { Direct => "direct", Ovr => "ovr" }
    Init { Zero => "zero", Random => "random" }
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Unchecked training parameters; call [`TrainParams::validate`] to use them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainParams {
    /// Algorithm.
    pub algo: Algo,
    /// Maximum number of epochs (passes over the data).
    pub epochs: usize,
    /// Learning rate eta, in (0, 1].
    pub lr: f32,
    /// Batch only: stop when ||eta * sum|| < tol. `None` disables the test.
    pub tol: Option<f32>,
    /// Seed for shuffling and random initialisation.
    pub seed: u64,
    /// Append the constant 1 to every x (learn a bias).
    pub fit_bias: bool,
    /// Initial weights.
    pub init: Init,
    /// Online only: visit points in a fresh seeded random order each epoch.
    pub shuffle: bool,
    /// Online or batch form; `None` takes the algorithm's default.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// A mistake is a margin <= tau (0: the classic rule).
    #[serde(default)]
    pub margin_threshold: f32,
    /// Multiclass update rule.
    #[serde(default)]
    pub multiclass_update: MulticlassUpdate,
    /// Multiclass strategy.
    #[serde(default)]
    pub multiclass: MulticlassStrategy,
    /// Voted perceptron: most weight vectors kept.
    #[serde(default = "default_max_vectors")]
    pub max_vectors: usize,
    /// Kernel perceptron: the kernel (default linear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Kernel>,
    /// Passive-aggressive: the variant and C (default PA-I, C = 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_aggressive: Option<PassiveAggressive>,
    /// AROW's settings (`None`: the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arow: Option<Arow>,
    /// Stop after this many epochs without improvement of the monitored figure (training
    /// mistakes, or validation mistakes with a validation set); `None` or 0: no such rule
    /// (files of earlier versions have none).
    #[serde(default)]
    pub patience: Option<u32>,
    /// The relative improvement that resets the patience count: an epoch improves when its
    /// figure is below (1 - this) times the figure at the last improvement. In [0, 1).
    #[serde(default = "default_min_improvement")]
    pub min_improvement: f32,
    /// Training mistakes only: while the fewest mistakes seen are at most this fraction of the
    /// rows (the data is then taken as nearly separable and may still converge), the patience
    /// rule also waits as many epochs after the best epoch as it took to reach it. In [0, 1].
    #[serde(default = "default_patience_floor")]
    pub patience_floor: f32,
    /// Hold out this fraction of the training rows (seeded, stratified by class) for
    /// validation: the patience rule watches their mistakes and the model of the best
    /// validation epoch is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_fraction: Option<f32>,
    /// With no `validation_fraction`: hold out [`AUTO_VALIDATION_FRACTION`] of the rows
    /// (seeded, stratified) for the stopping rule when the training set has at least
    /// [`AUTO_VALIDATION_ROWS`] rows and the run may take several epochs with patience: the
    /// front ends' default (a large set loses nothing by it; the patience rule then watches
    /// rows the model has not fitted). The library's default is false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_validation: bool,
    /// Per-class weights on the updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_weight: Option<ClassWeight>,
    /// Feature scaling fitted on the training data and kept in the model.
    #[serde(default)]
    pub scale: Scale,
    /// Online perceptron and averaged perceptron: rows per step. The rows of a step are
    /// scored by the weights the step started with and their updates are added together (the
    /// form a GPU runs in parallel); the averaged perceptron averages the weights after each
    /// step. 1 (the default) is the sequential rule.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub minibatch: usize,
    /// Online perceptron and averaged perceptron: streams. Each epoch's rows are split into
    /// this many contiguous parts, each trained from the same weights, and the streams
    /// continue from the mean of their weights (iterative parameter mixing; the model is the
    /// mean of the streams' averages). 1 (the default) is the sequential rule.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: usize,
    /// How X is stored for training: `None` picks the narrowest exact storage for batch
    /// epochs (f32 for the online forms); a storage given must hold every value exactly.
    /// Results do not depend on it, so it is not part of the model.
    #[serde(skip)]
    pub storage: Option<Storage>,
}

fn one() -> usize {
    1
}

fn is_one(v: &usize) -> bool {
    *v == 1
}

fn default_max_vectors() -> usize {
    100_000
}

fn default_min_improvement() -> f32 {
    0.01
}

fn default_patience_floor() -> f32 {
    0.01
}

/// Rows a stream of the online perceptron takes per epoch when a GPU picks the steps and
/// streams ([`gpu_steps`]): about this many steps each, where every public set of the guide's
/// table stays within 0.5 points of the sequential rule or above it.
pub const GPU_STEPS_PER_EPOCH: usize = 256;

/// Most streams a GPU picks ([`gpu_steps`]).
pub const GPU_MAX_STREAMS: usize = 16;

/// Most rows per step a GPU picks ([`gpu_steps`]).
pub const GPU_MAX_STEP_ROWS: usize = 32;

/// The (rows per step, streams) AROW runs in on a GPU where the user named neither. Its one
/// pass keeps the sequential rule's test accuracy at up to 8 rows a step in one stream, and
/// loses points to more (docs/guide.md, "AROW": on the generated click log 87.35% sequential,
/// 87.36% at 8 x 1, 84.30% at 16 x 1, 87.09% at 8 x 2, 81.60% at the perceptron's 32 x 16).
pub const GPU_AROW_STEPS: (usize, usize) = (8, 1);

/// The (rows per step, streams) of the online perceptron when a GPU trains `n` rows and the
/// user named neither: B S of about n / [`GPU_STEPS_PER_EPOCH`], streams first (up to
/// [`GPU_MAX_STREAMS`]), then rows per step (up to [`GPU_MAX_STEP_ROWS`]); (1, 1), the
/// sequential rule, below 512 rows.
pub fn gpu_steps(n: usize) -> (usize, usize) {
    let total = (n / GPU_STEPS_PER_EPOCH).max(1);
    let streams = total.min(GPU_MAX_STREAMS);
    let rows = (total / streams).clamp(1, GPU_MAX_STEP_ROWS);
    (rows, streams)
}

/// Most streams of the online perceptron (each keeps its own weights and average).
pub const MAX_STREAMS: usize = 4096;

/// Default epochs without improvement before stopping.
pub const DEFAULT_PATIENCE: u32 = 30;

/// The averaged perceptron's (online form) default patience: its model is the average, which
/// settles long before the last vector stops making mistakes (Fashion-MNIST: 0.855 test
/// accuracy after 24 epochs with patience 10, 0.851 after 118 with 30; README's defaults table).
pub const AVERAGED_PATIENCE: u32 = 10;

/// The front ends' default stopping rule for `algo` in `mode` (`None`: the algorithm's own
/// form): (patience, patience floor). The online averaged perceptron stops after
/// `AVERAGED_PATIENCE` (10) epochs without improvement and has no floor (nearly separable data
/// need not run to convergence: the average has settled); every other rule waits
/// `DEFAULT_PATIENCE` (30) epochs with a floor of 1% of the rows.
pub fn default_stopping(algo: Algo, mode: Option<Mode>) -> (u32, f32) {
    match (algo, mode.unwrap_or(algo.default_mode())) {
        (Algo::Averaged, Mode::Online) => (AVERAGED_PATIENCE, 0.0),
        _ => (DEFAULT_PATIENCE, default_patience_floor()),
    }
}

/// The front ends' default epoch budget for `algo`: 1,000 (the stopping rule ends training
/// well before), but one pass for AROW, whose confidences make its first pass its best on
/// noisy data (docs/guide.md, "AROW"), as one pass is Vowpal Wabbit's default.
pub fn default_epochs(algo: Algo) -> usize {
    match algo {
        Algo::Arow => 1,
        _ => 1000,
    }
}

/// The front ends' default scaling for `algo` (the command line's `--scale` and Python's
/// `scale`, one default for both): [`Scale::Online`] (each feature divided by its largest
/// magnitude, kept online by the online rules), so that a raw count beside tf-idf weights does
/// not swamp them; none for the kernel perceptron, whose kernel is given on the features as
/// they are, and for Winnow. The library's [`TrainParams::for_algo`] keeps `Scale::None`, the lecture notes'
/// raw rule (Novikoff's bound is stated on raw x), which its tests and experiments check.
pub fn default_scale(algo: Algo) -> Scale {
    // (Winnow's multiplicative weights cannot follow a growing scale, and its theory is on
    // features in [0, 1]: none.)
    match algo {
        Algo::Kernel | Algo::Winnow => Scale::None,
        _ => Scale::Online,
    }
}

/// Rows from which the front ends hold out a share for the stopping rule by default
/// ([`TrainParams::auto_validation`]). On generated noisy click logs the held-out rule gains
/// at every size measured (10,000 rows: 0.926 against 0.922 test accuracy; 30,000: 0.934
/// against 0.925; 100,000: 0.927 against 0.909, in 11 epochs instead of 90); the six public
/// sets of the README's table, all below this size, keep the stopping on training mistakes
/// their figures were measured with.
pub const AUTO_VALIDATION_ROWS: usize = 100_000;

/// The share held out by [`TrainParams::auto_validation`] (Vowpal Wabbit holds out every
/// tenth row when it makes several passes).
pub const AUTO_VALIDATION_FRACTION: f32 = 0.1;

/// The defaults: the averaged perceptron in its online form with its own stopping rule, which
/// is what `train` with no flags and Python's `Perceptron()` run.
impl Default for TrainParams {
    fn default() -> Self {
        TrainParams::for_algo(DEFAULT_ALGO)
    }
}

/// The algorithm trained when none is named (the CLI's `--algo`, Python's `Perceptron`).
pub const DEFAULT_ALGO: Algo = Algo::Averaged;

impl TrainParams {
    /// `algo` with every other parameter at its default: the one place the defaults are
    /// written, read by the command line's flags and help and by the Python package. The
    /// stopping rule is the algorithm's own ([`default_stopping`]).
    ///
    /// ```
    /// use rosenblatt::{Algo, TrainParams};
    /// let p = TrainParams::for_algo(Algo::Batch);
    /// assert_eq!((p.algo, p.epochs, p.patience), (Algo::Batch, 1000, Some(30)));
    /// assert_eq!(TrainParams::default(), TrainParams::for_algo(Algo::Averaged));
    /// ```
    pub fn for_algo(algo: Algo) -> Self {
        let (patience, patience_floor) = default_stopping(algo, None);
        TrainParams {
            algo,
            epochs: default_epochs(algo),
            lr: 1.0,
            tol: None,
            seed: 0,
            fit_bias: true,
            init: Init::Zero,
            shuffle: true,
            mode: None,
            margin_threshold: 0.0,
            multiclass_update: MulticlassUpdate::default(),
            multiclass: MulticlassStrategy::default(),
            max_vectors: default_max_vectors(),
            kernel: None,
            passive_aggressive: None,
            arow: None,
            patience: Some(patience),
            min_improvement: default_min_improvement(),
            patience_floor,
            validation_fraction: None,
            auto_validation: false,
            class_weight: None,
            scale: Scale::None,
            minibatch: 1,
            streams: 1,
            storage: None,
        }
    }
}

/// Validated training parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Params(TrainParams);

impl std::ops::Deref for Params {
    type Target = TrainParams;
    fn deref(&self) -> &TrainParams {
        &self.0
    }
}

impl TrainParams {
    /// Sets the algorithm and nothing else (its stopping rule stays as it was; start from
    /// [`TrainParams::for_algo`] for the algorithm's own).
    pub fn algo(mut self, a: Algo) -> Self {
        self.algo = a;
        self
    }
    /// Sets the maximum number of epochs.
    pub fn epochs(mut self, e: usize) -> Self {
        self.epochs = e;
        self
    }
    /// Sets the learning rate.
    pub fn lr(mut self, lr: f32) -> Self {
        self.lr = lr;
        self
    }
    /// Sets the batch tolerance.
    pub fn tol(mut self, tol: Option<f32>) -> Self {
        self.tol = tol;
        self
    }
    /// Sets the seed.
    pub fn seed(mut self, s: u64) -> Self {
        self.seed = s;
        self
    }
    /// Learn a bias (default true).
    pub fn fit_bias(mut self, b: bool) -> Self {
        self.fit_bias = b;
        self
    }
    /// Sets the initial weights.
    pub fn init(mut self, i: Init) -> Self {
        self.init = i;
        self
    }
    /// Shuffle each online epoch (default true).
    pub fn shuffle(mut self, s: bool) -> Self {
        self.shuffle = s;
        self
    }

    /// Sets the form.
    pub fn mode(mut self, m: Mode) -> Self {
        self.mode = Some(m);
        self
    }
    /// Sets the margin threshold tau.
    pub fn margin_threshold(mut self, t: f32) -> Self {
        self.margin_threshold = t;
        self
    }
    /// Sets the multiclass update rule.
    pub fn multiclass_update(mut self, u: MulticlassUpdate) -> Self {
        self.multiclass_update = u;
        self
    }
    /// Sets the multiclass strategy.
    pub fn multiclass(mut self, s: MulticlassStrategy) -> Self {
        self.multiclass = s;
        self
    }

    /// Sets the online perceptron's rows per step (1: the sequential rule).
    pub fn minibatch(mut self, rows: usize) -> Self {
        self.minibatch = rows;
        self
    }
    /// Sets the online perceptron's streams (1: the sequential rule).
    pub fn streams(mut self, s: usize) -> Self {
        self.streams = s;
        self
    }

    /// Sets the patience (epochs without improvement before stopping; 0 turns it off).
    pub fn patience(mut self, epochs: u32) -> Self {
        self.patience = Some(epochs);
        self
    }
    /// Sets the relative improvement the patience rule asks for.
    pub fn min_improvement(mut self, f: f32) -> Self {
        self.min_improvement = f;
        self
    }
    /// Sets the error rate under which the patience rule also waits the best epoch's number.
    pub fn patience_floor(mut self, f: f32) -> Self {
        self.patience_floor = f;
        self
    }
    /// Holds out this fraction of the rows for validation.
    pub fn validation_fraction(mut self, f: Option<f32>) -> Self {
        self.validation_fraction = f;
        self
    }
    /// Sets the class weights.
    pub fn class_weight(mut self, c: Option<ClassWeight>) -> Self {
        self.class_weight = c;
        self
    }
    /// Sets the feature scaling.
    pub fn scale(mut self, s: Scale) -> Self {
        self.scale = s;
        self
    }

    /// The patience in effect (0: none).
    pub fn effective_patience(&self) -> u32 {
        self.patience.unwrap_or(0)
    }

    /// The form in effect.
    pub fn effective_mode(&self) -> Mode {
        self.mode.unwrap_or(self.algo.default_mode())
    }

    /// Checks every value and returns the validated form.
    pub fn validate(self) -> Result<Params> {
        self.check_values()?;
        self.check_stopping()?;
        self.check_algorithm()?;
        Ok(Params(self))
    }

    /// The epochs, the learning rate, the tolerance, the margin, the voted perceptron's
    /// vectors and the kernel.
    fn check_values(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(Error::param(Param::Epochs, 0, "must be at least 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0 && self.lr <= 1.0) {
            return Err(Error::param(
                Param::LearningRate,
                self.lr,
                "should be in (0, 1]",
            ));
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::param(
                    Param::Tolerance,
                    t,
                    "should be finite and non-negative",
                ));
            }
        }
        if !(self.margin_threshold.is_finite() && self.margin_threshold >= 0.0) {
            return Err(Error::param(
                Param::MarginThreshold,
                self.margin_threshold,
                "should be finite and >= 0",
            ));
        }
        if self.max_vectors == 0 {
            return Err(Error::param(Param::MaxVectors, 0, "must be at least 1"));
        }
        if self.minibatch == 0 {
            return Err(Error::param(Param::Minibatch, 0, "must be at least 1"));
        }
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(Error::param(
                Param::Streams,
                self.streams,
                format!("should be in 1..={MAX_STREAMS}"),
            ));
        }
        if let Some(k) = &self.kernel {
            k.check()?;
        }
        Ok(())
    }

    /// The patience rule's fractions, the validation split and the class weights.
    fn check_stopping(&self) -> Result<()> {
        if !(self.min_improvement.is_finite() && (0.0..1.0).contains(&self.min_improvement)) {
            return Err(Error::param(
                Param::MinImprovement,
                self.min_improvement,
                "should be in [0, 1) (a fraction of the best figure so far)",
            ));
        }
        if !(self.patience_floor.is_finite() && (0.0..=1.0).contains(&self.patience_floor)) {
            return Err(Error::param(
                Param::PatienceFloor,
                self.patience_floor,
                "should be in [0, 1] (a fraction of the rows)",
            ));
        }
        if let Some(f) = self.validation_fraction {
            if !(f.is_finite() && f > 0.0 && f < 1.0) {
                return Err(Error::param(
                    Param::ValidationFraction,
                    f,
                    "should be in (0, 1)",
                ));
            }
        }
        if let Some(ClassWeight::Given(list)) = &self.class_weight {
            for (name, w) in list {
                if !(w.is_finite() && *w >= 0.0) {
                    return Err(Error::param(
                        Param::ClassWeight,
                        format!("{name}={w}"),
                        "should be finite and >= 0",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The options of the algorithm (passive-aggressive) and the mode it runs in.
    fn check_algorithm(&self) -> Result<()> {
        if let Some(pa) = &self.passive_aggressive {
            if !(pa.c.is_finite() && pa.c > 0.0) {
                return Err(Error::param(
                    Param::Aggressiveness,
                    pa.c,
                    "should be finite and > 0",
                ));
            }
        }
        if let Some(a) = &self.arow {
            if !(a.r.is_finite() && a.r > 0.0) {
                return Err(Error::param(Param::ArowR, a.r, "should be finite and > 0"));
            }
            if a.covariance == ArowCovariance::Full && (self.minibatch, self.streams) != (1, 1) {
                return Err(Error::param(
                    Param::ArowCovariance,
                    a.covariance,
                    "must be diagonal where the rule runs in steps or streams (the full \
                     covariance runs row by row)",
                ));
            }
        }
        if self.algo == Algo::Arow && self.margin_threshold != 0.0 {
            return Err(Error::param(
                Param::MarginThreshold,
                self.margin_threshold,
                "is not available for AROW, whose margin is 1 (the hinge loss)",
            ));
        }
        if self.algo == Algo::PassiveAggressive && self.margin_threshold != 0.0 {
            return Err(Error::param(
                Param::MarginThreshold,
                self.margin_threshold,
                "is not available for the passive-aggressive rules, whose margin is 1 (the \
                 hinge loss)",
            ));
        }
        if self.algo == Algo::PassiveAggressive && self.multiclass_update == MulticlassUpdate::All {
            return Err(Error::param(
                Param::MulticlassUpdate,
                "all",
                "is not available for the passive-aggressive rules, whose multiclass step \
                 moves the true class and the highest wrong one (argmax)",
            ));
        }
        let mode = self.effective_mode();
        let steps = matches!(
            self.algo,
            Algo::Online | Algo::Averaged | Algo::Multiclass | Algo::PassiveAggressive | Algo::Arow
        ) && mode == Mode::Online;
        if self.streams > 1 && !steps {
            return Err(Error::param(
                Param::Streams,
                self.streams,
                "is available for the online perceptron, averaged perceptron, \
                 passive-aggressive and AROW only",
            ));
        }
        if self.minibatch > 1 && !steps {
            return Err(Error::param(
                Param::Minibatch,
                self.minibatch,
                "is available for the online perceptron, averaged perceptron, \
                 passive-aggressive and AROW only (rows per step; 1 is every other rule's \
                 sequential form)",
            ));
        }
        let ok = match self.algo {
            Algo::Online | Algo::Voted | Algo::PassiveAggressive | Algo::Arow => {
                mode == Mode::Online
            }
            Algo::Batch | Algo::Pocket | Algo::Kernel => mode == Mode::Batch,
            Algo::Multiclass | Algo::Averaged | Algo::Winnow => true,
        };
        if !ok {
            return Err(Error::param(
                Param::Mode,
                format!("{mode:?}").to_lowercase(),
                match self.algo {
                    Algo::Online | Algo::Voted | Algo::PassiveAggressive | Algo::Arow => {
                        "is not available: this algorithm has an online form only"
                    }
                    _ => "is not available: this algorithm has a batch form only",
                },
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_online_averaged_perceptron_has_its_own_default_stopping_rule() {
        assert_eq!(default_stopping(Algo::Averaged, None), (10, 0.0));
        assert_eq!(
            default_stopping(Algo::Averaged, Some(Mode::Online)),
            (10, 0.0)
        );
        for (algo, mode) in [
            (Algo::Averaged, Some(Mode::Batch)),
            (Algo::Batch, None),
            (Algo::Online, None),
            (Algo::Voted, None),
            (Algo::Winnow, None),
        ] {
            assert_eq!(
                default_stopping(algo, mode),
                (30, 0.01),
                "{algo:?} {mode:?}"
            );
        }
    }

    #[test]
    fn validation_names_the_value() {
        let e = TrainParams::default().lr(0.0).validate().unwrap_err();
        assert_eq!(e.to_string(), "learning rate should be in (0, 1], but is 0");
        assert!(matches!(
            e,
            Error::InvalidParam {
                name: Param::LearningRate,
                ..
            }
        ));
        assert!(TrainParams::default().lr(1.5).validate().is_err());
        assert!(TrainParams::default().lr(f32::NAN).validate().is_err());
        assert!(TrainParams::default().epochs(0).validate().is_err());
        assert!(TrainParams::default().tol(Some(-1.0)).validate().is_err());
        assert!(TrainParams::default().lr(1.0).validate().is_ok());
    }
}
