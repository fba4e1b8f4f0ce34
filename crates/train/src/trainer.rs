//! [`Trainer`]: the one way in for a program that trains. Parameters, then where to run
//! (backend, adapter, fallback), then what to watch (progress, held-out rows, a model to go on
//! from), then [`Trainer::fit`] on a data set.

use crate::algo::{self, Holdout, Problem, Progress, Trained};
use crate::backend::{self, cpu::CpuBackend, Backend, BackendChoice};
use crate::data::{Dataset, LoadOptions};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::params::{Params, TrainParams};

use crate::backend::gpu_options::GpuOptions;

/// What a run on a GPU does when the GPU fails part way (a lost device, memory it cannot
/// get).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Under [`BackendChoice::Auto`], finish on the CPU from the last epoch the GPU completed
    /// (the report says so); a backend asked for by name fails instead.
    #[default]
    CpuUnderAuto,
    /// Never: a GPU failure is the run's error.
    Never,
}

/// Trains a perceptron: a builder over the validated parameters, the backend and what the
/// run reports to, ended by [`Trainer::fit`].
///
/// ```
/// use rosenblatt::{synth, Algo, BackendChoice, SynthSpec, TrainParams, Trainer};
///
/// let data = synth::generate(&SynthSpec { n: 200, d: 2, ..Default::default() })?.data;
/// let trained = Trainer::new(TrainParams::default().algo(Algo::Averaged))?
///     .backend(BackendChoice::Cpu)
///     .fit(&data)?;
/// assert_eq!(trained.report.train_accuracy, Some(1.0));
/// let model = trained.model;
/// assert_eq!(model.n_features(), 2);
/// # Ok::<(), rosenblatt::Error>(())
/// ```
pub struct Trainer<'a> {
    params: Params,
    choice: BackendChoice,
    backend: Option<&'a dyn Backend>,
    gpu: GpuOptions,
    fallback: Fallback,
    progress: Option<&'a mut dyn Progress>,
    validation: Option<&'a Dataset>,
    start: Option<&'a Model>,
}

impl<'a> Trainer<'a> {
    /// A trainer for `params`, validated here: a value out of range is an
    /// [`Error::InvalidParam`] naming the parameter and the value.
    /// Runs on [`BackendChoice::Auto`] with the CPU fallback unless told otherwise.
    pub fn new(params: TrainParams) -> Result<Self> {
        Ok(Trainer::with_params(params.validate()?))
    }

    /// A trainer for parameters already validated.
    pub fn with_params(params: Params) -> Self {
        Trainer {
            params,
            choice: BackendChoice::Auto,
            backend: None,
            gpu: GpuOptions::default(),
            fallback: Fallback::default(),
            progress: None,
            validation: None,
            start: None,
        }
    }

    /// Which backend runs: [`BackendChoice::Auto`] (the default: a hardware GPU for jobs
    /// large enough to gain from one, else the CPU without opening any adapter), `Cpu` or
    /// `Gpu` (any adapter, software ones included).
    pub fn backend(mut self, choice: BackendChoice) -> Self {
        self.choice = choice;
        self
    }

    /// Runs on a backend the caller opened (and keeps, for several runs), in place of the
    /// choice of [`Trainer::backend`].
    pub fn on(mut self, backend: &'a dyn Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Which GPU adapter, and how the GPU backend is set up (see [`GpuOptions`]).
    pub fn gpu(mut self, options: GpuOptions) -> Self {
        self.gpu = options;
        self
    }

    /// What a GPU failure part way does (default [`Fallback::CpuUnderAuto`]).
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Reports each epoch (and, where asked for, the weights) to `progress`.
    pub fn progress(mut self, progress: &'a mut dyn Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Watches the mistakes on these held-out rows (in place of the parameters' validation
    /// fraction) for the stopping rule, keeping the best epoch's model.
    pub fn validation(mut self, rows: &'a Dataset) -> Self {
        self.validation = Some(rows);
        self
    }

    /// Goes on from `model`'s weights (the same classes and features; its scaling is kept).
    pub fn warm_start(mut self, model: &'a Model) -> Self {
        self.start = Some(model);
        self
    }

    /// The parameters the run uses.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Trains in one pass over the Vowpal Wabbit text at `path` (`-`: standard input), read
    /// in blocks and never held whole: memory is the model's state plus a few blocks of 8 MiB,
    /// whatever the size of the input, and each block is parsed on every core while the rule
    /// trains on the one before. Runs on the CPU (the backend choice is not used). Takes the
    /// online rules that keep no rows (online, averaged, multiclass in online mode,
    /// passive-aggressive, AROW, Winnow), in file order, with the classes of its first 8 MiB;
    /// held-out rows, a scaling fitted on every row (online scaling is kept as the rows are
    /// read), balanced class weights, mixed streams and a warm start are refused. The report's
    /// accuracy is progressive (`progressive_accuracy`): each row as the model met it, before
    /// its update. Progress comes after each block ([`Progress::rows`]), which
    /// [`Progress::cancelled`] may stop.
    ///
    /// ```
    /// use rosenblatt::{Algo, LoadOptions, TrainParams, Trainer};
    ///
    /// let dir = std::env::temp_dir().join(format!("rosenblatt-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("clicks.vw");
    /// let rows: String = (0..400)
    ///     .map(|i| if i % 2 == 0 { "1 |a red big\n" } else { "-1 |a blue small\n" })
    ///     .collect();
    /// std::fs::write(&path, rows).unwrap();
    /// let trained = Trainer::new(TrainParams::default().algo(Algo::Arow))?
    ///     .fit_stream(&path, &LoadOptions::default())?;
    /// assert_eq!(trained.report.n, 400);
    /// assert!(trained.report.progressive_accuracy > Some(0.99));
    /// assert_eq!(trained.report.train_accuracy, None);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), rosenblatt::Error>(())
    /// ```
    pub fn fit_stream(self, path: &std::path::Path, options: &LoadOptions) -> Result<Trained> {
        if self.validation.is_some() || self.start.is_some() {
            return Err(Error::data(
                path,
                "a streamed run takes neither held-out rows nor a model to go on from",
            ));
        }
        let blocks = crate::data::stream(path, options)?;
        let mut none = ();
        let progress: &mut dyn Progress = match self.progress {
            Some(p) => p,
            None => &mut none,
        };
        algo::stream::fit(path, blocks, &self.params, progress)
    }

    /// Trains on `data` (labelled) and returns the model with its report.
    pub fn fit(self, data: &Dataset) -> Result<Trained> {
        let values = (data.n as u64).saturating_mul(data.d as u64);
        let selected;
        let primary: &dyn Backend = match self.backend {
            Some(b) => b,
            None => {
                selected = self.select(values)?;
                &*selected
            }
        };
        let cpu = CpuBackend::new();
        let fallback: Option<&dyn Backend> = (self.fallback == Fallback::CpuUnderAuto
            && self.choice == BackendChoice::Auto
            && self.backend.is_none())
        .then_some(&cpu);
        let holdout = match self.validation {
            Some(rows) => Holdout::Rows(rows),
            None => Holdout::FromParams,
        };
        let pb = Problem::build(data, &self.params, holdout, self.start)?;
        let mut silent = ();
        let progress: &mut dyn Progress = match self.progress {
            Some(p) => p,
            None => &mut silent,
        };
        algo::fit(pb, &self.params, primary, fallback, progress)
    }

    fn select(&self, values: u64) -> Result<Box<dyn Backend>> {
        Ok(backend::select_for(self.choice, &self.gpu, values)?.backend)
    }
}
