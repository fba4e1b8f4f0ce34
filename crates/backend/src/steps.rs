//! The online perceptron (and the passive-aggressive and AROW rules) in steps of B rows and
//! S streams, bound to a backend: the GPU runs it as shaders/steps.wgsl (one workgroup a
//! stream); [`CpuSteps`] here is its CPU twin, the entry points' twins [`steps`] and [`mix`]
//! written plainly with the shader's arithmetic. The algorithm that drives either is
//! `algo::online` (the same rule as its row-by-row form with `--minibatch B --streams S`,
//! whose averages it keeps by lazy sums).

use super::{HeadRule, RowOutcome, RowWeight};
use crate::error::{Error, Result};

/// Most B x K scores of one step (`MAX_STEP` in shaders/steps.wgsl).
pub const MAX_STEP: usize = 2048;

/// Most B x K scores of one AROW step: each score keeps its confidence beside it, in the
/// upper half of the step's scores (`AROW_STEP` in shaders/steps.wgsl).
pub const AROW_STEP: usize = MAX_STEP / 2;

/// The rule a stepped run updates by.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum StepUpdate {
    /// The perceptron's: a head (or row) whose margin is at most tau steps by eta y x.
    #[default]
    Perceptron,
    /// The passive-aggressive rule of this step size (tau unused: a head steps where its
    /// margin is below 1).
    PassiveAggressive(super::PaSize),
    /// AROW with a diagonal covariance and regularization `r` (> 0), binary or one-vs-rest:
    /// each weight keeps a confidence (1 at the start), and a head whose margin is below 1
    /// moves w by alpha y Sigma x and shrinks the confidences by beta (Sigma x)^2 (tau
    /// unused). The twin of `algo::arow`'s row-by-row rule, [`super::arow_rule`].
    Arow {
        /// The regularization r.
        r: f32,
    },
}

impl StepUpdate {
    /// The rule's code in shaders/steps.wgsl's parameters (`update`: 0 the perceptron, 1, 2,
    /// 3 PA, PA-I, PA-II, 4 AROW) and its constant (`update_c`: C, or AROW's r).
    pub fn code(self) -> (u32, f32) {
        match self {
            StepUpdate::Perceptron => (0, 1.0),
            StepUpdate::PassiveAggressive(p) => p.code(),
            StepUpdate::Arow { r } => (4, r),
        }
    }

    /// Whether the rule needs each row's squared norm (the passive-aggressive rule).
    pub fn needs_sq_norms(self) -> bool {
        matches!(self, StepUpdate::PassiveAggressive(_))
    }

    /// Whether each weight keeps a confidence (AROW).
    pub fn keeps_confidence(self) -> bool {
        matches!(self, StepUpdate::Arow { .. })
    }
}

/// What a stepped run is: the rule, its steps and streams, and the starting weights.
#[derive(Debug, Clone, PartialEq)]
pub struct StepsSetup {
    /// How a row's scores decide its updates.
    pub rule: HeadRule,
    /// Margin threshold tau.
    pub tau: f32,
    /// Learning rate eta.
    pub eta: f32,
    /// Rows per step, B.
    pub step_rows: usize,
    /// Streams, S.
    pub streams: usize,
    /// Keep the sums of the weights after each step (the averaged perceptron).
    pub average: bool,
    /// The starting weights, `heads * (d + 1)`.
    pub w0: Vec<f32>,
    /// Heads, K.
    pub heads: usize,
    /// The rule the heads step by: the perceptron's, passive-aggressive or AROW.
    pub update: StepUpdate,
}

impl StepsSetup {
    /// [`StepsSetup::check`], and a step's scores within the kernels' [`MAX_STEP`].
    pub fn check_gpu(&self, d: usize) -> Result<()> {
        self.check(d)?;
        let most = match self.update {
            StepUpdate::Arow { .. } => AROW_STEP,
            _ => MAX_STEP,
        };
        if self.step_rows.saturating_mul(self.heads) > most {
            return Err(Error::Gpu(format!(
                "steps of {} rows with {} heads: more than {most} scores a step",
                self.step_rows, self.heads
            )));
        }
        Ok(())
    }

    /// Refuses a setup no backend can run: no rows per step or stream, starting weights of
    /// another length, a passive-aggressive C or an AROW r that is not positive, AROW with
    /// K classes jointly or with averaging. (The GPU also refuses steps of more than
    /// [`MAX_STEP`] scores, [`AROW_STEP`] for AROW: [`StepsSetup::check_gpu`].)
    pub fn check(&self, d: usize) -> Result<()> {
        if self.step_rows == 0 || self.streams == 0 || self.heads == 0 {
            return Err(Error::Gpu(
                "a stepped run needs rows, streams and heads".into(),
            ));
        }
        if self.w0.len() != self.heads * (d + 1) {
            return Err(Error::Gpu("starting weights of the wrong length".into()));
        }
        match self.update {
            StepUpdate::PassiveAggressive(super::PaSize::Pa1(c) | super::PaSize::Pa2(c))
                if !(c > 0.0 && c.is_finite()) =>
            {
                Err(Error::Gpu(format!("passive-aggressive C = {c}")))
            }
            StepUpdate::Arow { r } if !(r > 0.0 && r.is_finite()) => {
                Err(Error::Gpu(format!("AROW's r = {r}")))
            }
            StepUpdate::Arow { .. }
                if self.average || !matches!(self.rule, HeadRule::Binary | HeadRule::OneVsRest) =>
            {
                Err(Error::Gpu(
                    "AROW steps binary or one-vs-rest heads, without an average".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Rows bound for a stepped online run (see [`super::Backend::bind_steps`]).
pub trait StepsBound {
    /// One epoch: each stream walks its part of `order` (contiguous, stream s from position
    /// s n / S) in steps, then the streams are mixed. Returns the epoch's counts.
    fn epoch(&mut self, order: &[u32]) -> Result<RowOutcome>;
    /// The streams' (mixed) weights.
    fn weights(&mut self) -> Result<Vec<f32>>;
    /// Every stream continues from `w` (`heads * (d + 1)`): after the processes of a
    /// data-parallel run mixed their weights. The sums kept so far stay.
    fn set_weights(&mut self, w: &[f32]) -> Result<()>;
    /// The model: with averaging the mean over the streams of their weights' average over
    /// their steps (a stream without a step counts its weights), else the weights.
    fn model(&mut self) -> Result<Vec<f32>>;
    /// How the backend runs the steps, in words (for reports and tests).
    fn plan(&self) -> String {
        "row by row on the CPU".into()
    }
}

/// Refuses weights of another length than `len`.
pub(crate) fn check_len(w: &[f32], len: usize) -> Result<()> {
    match w.len() == len {
        true => Ok(()),
        false => Err(Error::Gpu(format!(
            "{} weights for a stepped run of {len}",
            w.len()
        ))),
    }
}

/// Stream `s`'s part [lo, hi) of an epoch of `n` rows in `streams` streams.
pub fn stream_part(s: usize, n: usize, streams: usize) -> (usize, usize) {
    let at = |s: usize| ((s as u128 * n as u128) / streams as u128) as usize;
    (at(s), at(s + 1))
}

/// The model from the streams' weights `w`, sums and steps (`len` a stream): the mean over
/// the streams of sums / steps in f64 rounded to f32, summed in stream order.
pub fn model_of(w: &[f32], sums: Option<&[f32]>, steps: &[u64], len: usize) -> Vec<f32> {
    let streams = steps.len().max(1);
    let mut out = vec![0f32; len];
    for (s, &t) in steps.iter().enumerate() {
        let ws = &w[s * len..(s + 1) * len];
        match sums {
            Some(sums) if t > 0 => {
                let ss = &sums[s * len..(s + 1) * len];
                for (o, &v) in out.iter_mut().zip(ss) {
                    *o += (v as f64 / t as f64) as f32;
                }
            }
            _ => out.iter_mut().zip(ws).for_each(|(o, v)| *o += v),
        }
    }
    out.iter_mut().for_each(|o| *o /= streams as f32);
    out
}

/// The features of a stepped run's rows, as f32.
#[derive(Debug, Clone, Copy)]
pub enum StepX<'a> {
    /// Row-major, `d` values a row.
    Dense(&'a [f32]),
    /// Compressed sparse rows.
    Csr {
        /// Row starts, n + 1 of them, non-decreasing (need not start at 0).
        indptr: &'a [usize],
        /// Column of each stored value, strictly ascending within a row, below d.
        indices: &'a [u32],
        /// The stored values.
        values: &'a [f32],
    },
}

impl<'a> From<&'a [f32]> for StepX<'a> {
    fn from(x: &'a [f32]) -> Self {
        StepX::Dense(x)
    }
}

impl<'a> From<&'a Vec<f32>> for StepX<'a> {
    fn from(x: &'a Vec<f32>) -> Self {
        StepX::Dense(x)
    }
}

impl<'a> From<&'a super::CsrBuf> for StepX<'a> {
    fn from(c: &'a super::CsrBuf) -> Self {
        StepX::Csr {
            indptr: &c.indptr,
            indices: &c.indices,
            values: &c.values,
        }
    }
}

impl StepX<'_> {
    /// Refuses features that are not `n` rows of `d`: a dense length other than n d, or row
    /// starts, columns and values that do not agree (a row's columns strictly ascending,
    /// below d: the kernels update a row's columns in parallel).
    pub fn check(&self, n: usize, d: usize) -> Result<()> {
        let ok = match *self {
            StepX::Dense(x) => x.len() == n.saturating_mul(d),
            StepX::Csr {
                indptr,
                indices,
                values,
            } => {
                indptr.len() == n + 1
                    && indptr.windows(2).all(|p| p[0] <= p[1])
                    && indptr[n] <= indices.len()
                    && indices.len() == values.len()
                    && indptr.windows(2).all(|p| {
                        let cols = &indices[p[0]..p[1]];
                        cols.windows(2).all(|c| c[0] < c[1])
                            && cols.last().is_none_or(|&j| (j as usize) < d)
                    })
            }
        };
        match ok {
            true => Ok(()),
            false => Err(Error::Gpu(format!(
                "a stepped run's features are not {n} rows of {d}"
            ))),
        }
    }

    /// Row `i`.
    fn row(&self, i: usize, d: usize) -> super::Row<'_> {
        match *self {
            StepX::Dense(x) => super::Row::Dense(&x[i * d..(i + 1) * d]),
            StepX::Csr {
                indptr,
                indices,
                values,
            } => {
                let at = indptr[i]..indptr[i + 1];
                super::Row::Sparse {
                    idx: &indices[at.clone()],
                    val: &values[at],
                }
            }
        }
    }
}

/// The rows of a stepped run: f32 features (`y.len()` rows of `d`), labels (±1, or the
/// class index), each row's weight where rows have weights, and the bias column's value.
#[derive(Debug, Clone, Copy)]
pub struct StepRows<'a> {
    /// Features.
    pub x: StepX<'a>,
    /// Labels.
    pub y: &'a [f32],
    /// Row weights (`y.len()`), or `None`: every row weighs 1.
    pub weights: Option<&'a [RowWeight]>,
    /// Features a row.
    pub d: usize,
    /// The bias column's value.
    pub bias: f32,
}

impl StepRows<'_> {
    /// Row `i`'s weight.
    fn weight(&self, i: usize) -> RowWeight {
        self.weights.map_or(RowWeight::ONE, |w| w[i])
    }

    /// Each row's squared norm, the bias column counted (the passive-aggressive rule's).
    pub fn sq_norms(&self) -> Vec<f32> {
        (0..self.y.len())
            .map(|i| self.x.row(i, self.d).sq_norm() + self.bias * self.bias)
            .collect()
    }

    /// Refuses rows whose features, labels and weights do not agree.
    pub fn check(&self) -> Result<()> {
        self.x.check(self.y.len(), self.d)?;
        match self.weights {
            Some(w) if w.len() != self.y.len() => Err(Error::Gpu(format!(
                "{} row weights for {} rows",
                w.len(),
                self.y.len()
            ))),
            _ => Ok(()),
        }
    }
}

/// Owned features of [`StepX`].
enum OwnedX {
    Dense(Vec<f32>),
    Csr(super::CsrBuf),
}

/// The CPU twin of shaders/steps.wgsl: the streams' weights and sums in f32 (for sparse
/// rows the sums kept lazily, with each weight's last step).
pub struct CpuSteps {
    x: OwnedX,
    y: Vec<f32>,
    weights: Option<Vec<RowWeight>>,
    d: usize,
    bias: f32,
    setup: StepsSetup,
    w: Vec<f32>,
    /// The sums of the weights (averaging), or AROW's confidences, laid out as `w`.
    sums: Vec<f32>,
    last: Vec<u32>,
    steps: Vec<u64>,
    /// Each row's squared norm (the passive-aggressive rule), else empty.
    sq: Vec<f32>,
}

impl CpuSteps {
    /// Binds a copy of `rows` for the run `setup`.
    pub fn new(rows: StepRows<'_>, setup: StepsSetup) -> Result<Self> {
        setup.check(rows.d)?;
        rows.check()?;
        let len = setup.w0.len();
        let s = setup.streams;
        let x = match rows.x {
            StepX::Dense(x) => OwnedX::Dense(x.to_vec()),
            StepX::Csr {
                indptr,
                indices,
                values,
            } => {
                let (a, b) = (indptr[0], indptr[indptr.len() - 1]);
                OwnedX::Csr(super::CsrBuf {
                    indptr: indptr.iter().map(|&p| p - a).collect(),
                    indices: indices[a..b].to_vec(),
                    values: values[a..b].to_vec(),
                })
            }
        };
        let lazy = setup.average && matches!(x, OwnedX::Csr(_));
        Ok(CpuSteps {
            sq: match setup.update.needs_sq_norms() {
                true => rows.sq_norms(),
                false => Vec::new(),
            },
            w: setup.w0.repeat(s),
            sums: match (setup.average, setup.update.keeps_confidence()) {
                (true, _) => vec![0.0; s * len],
                (false, true) => vec![1.0; s * len],
                (false, false) => Vec::new(),
            },
            last: vec![0; if lazy { s * len } else { 0 }],
            steps: vec![0; s],
            x,
            y: rows.y.to_vec(),
            weights: rows.weights.map(<[RowWeight]>::to_vec),
            d: rows.d,
            bias: rows.bias,
            setup,
        })
    }
}

/// A stream's sums of its weights after each step: kept eagerly (`last` empty: every weight
/// added after every step, as for dense rows), or lazily (sparse rows: `last[i]` the step
/// through which `sums[i]` is complete; `t0` the stream's steps before this call).
pub struct StreamSums<'s> {
    /// The sums, `heads * (d + 1)`.
    pub sums: &'s mut [f32],
    /// Lazily: each weight's last step; eagerly: empty.
    pub last: &'s mut [u32],
    /// The stream's steps so far.
    pub t0: u32,
}

/// What a stream keeps besides its weights: nothing, the sums of its weights (averaging), or
/// AROW's confidences (`heads * (d + 1)`, laid out as the weights).
pub enum StreamState<'s> {
    /// The weights alone.
    Plain,
    /// The sums of the weights after each step.
    Sums(StreamSums<'s>),
    /// Each weight's confidence.
    Confidence(&'s mut [f32]),
}

/// Twin of `lazy_sum` (shaders/steps_csr.wgsl): weight `at`'s sum brought up to step `t`.
fn lazy_sum(sums: &mut [f32], last: &mut [u32], w: &[f32], at: usize, t: u32) {
    let lag = t.wrapping_sub(last[at]);
    if lag > 0 {
        sums[at] += w[at] * lag as f32;
        last[at] = t;
    }
}

/// Twin of `steps`: one stream over its part of `order` (`part`), with its weights `w`
/// (`heads * (d + 1)`) and what it keeps besides (`state`); returns its counts and steps
/// taken. `sq`: the rows' squared norms where the rule is passive-aggressive.
pub fn steps(
    st: &StepsSetup,
    rows: StepRows<'_>,
    sq: &[f32],
    part: &[u32],
    w: &mut [f32],
    mut state: StreamState<'_>,
) -> (RowOutcome, u64) {
    let (y, d, bias) = (rows.y, rows.d, rows.bias);
    let k = st.heads;
    let da = d + 1;
    let mut out = RowOutcome::default();
    let mut taken = 0;
    // The step's scores (then coefficients) and, for AROW, the confidences x^T Sigma x (then
    // the betas), as sc and its upper half in the shader.
    let mut sc = vec![0f32; st.step_rows * k];
    let mut cf = vec![0f32; st.step_rows * k];
    let mut scratch = Vec::new();
    for step in part.chunks(st.step_rows) {
        for (r, &i) in step.iter().enumerate() {
            let row = rows.x.row(i as usize, d);
            for h in 0..k {
                let wh = &w[h * da..(h + 1) * da];
                let mut acc = 0f32;
                match row {
                    super::Row::Dense(x) => (0..d).for_each(|j| acc += wh[j] * x[j]),
                    super::Row::Sparse { idx, val } => idx
                        .iter()
                        .zip(val)
                        .for_each(|(&j, &v)| acc += wh[j as usize] * v),
                }
                sc[r * k + h] = acc + wh[d] * bias;
                if let StreamState::Confidence(sg) = &state {
                    let sg = &sg[h * da..(h + 1) * da];
                    let mut v = sg[d] * bias * bias;
                    match row {
                        super::Row::Dense(x) => (0..d).for_each(|j| v += sg[j] * x[j] * x[j]),
                        super::Row::Sparse { idx, val } => idx
                            .iter()
                            .zip(val)
                            .for_each(|(&j, &x)| v += sg[j as usize] * x * x),
                    }
                    cf[r * k + h] = v;
                }
            }
        }
        for (r, &i) in step.iter().enumerate() {
            let s = &mut sc[r * k..(r + 1) * k];
            let cs = &mut cf[r * k..(r + 1) * k];
            let (mut c, mut b) = (vec![0f32; k], vec![0f32; k]);
            let (yi, wi) = (y[i as usize], rows.weight(i as usize));
            let o = match st.update {
                StepUpdate::Perceptron => {
                    super::row_rule(st.rule, st.tau, s, yi, wi, |h, a| c[h] = a)
                }
                StepUpdate::PassiveAggressive(size) => {
                    let row = super::PaRow {
                        y: yi,
                        wt: wi,
                        sq: sq[i as usize],
                    };
                    super::pa_rule((st.rule, size), s, row, &mut scratch, |h, a| c[h] = a)
                }
                StepUpdate::Arow { r: reg } => super::arow_rule(
                    st.rule,
                    (reg, st.eta),
                    s,
                    (yi, wi),
                    |h| cs[h],
                    |h, a, beta| {
                        c[h] = a;
                        b[h] = beta;
                    },
                ),
            };
            s.copy_from_slice(&c);
            cs.copy_from_slice(&b);
            out += o;
        }
        // One weight's update by the coefficient (and beta) of row r's head h: AROW's, or
        // eta c x (in the shader's arithmetic and order).
        let update = |w: &mut [f32], state: &mut StreamState<'_>, at: usize, rh: usize, x: f32| {
            match state {
                StreamState::Confidence(sg) => {
                    let beta = cf[rh];
                    if beta != 0.0 {
                        let sx = sg[at] * x;
                        w[at] += sc[rh] * sx;
                        sg[at] -= beta * sx * sx;
                    }
                }
                _ => {
                    let c = sc[rh];
                    if c != 0.0 {
                        if let (StreamState::Sums(s), false) = (&mut *state, sums_eager(&rows)) {
                            lazy_sum(s.sums, s.last, w, at, s.t0.wrapping_add(taken as u32));
                        }
                        w[at] += (st.eta * c) * x;
                    }
                }
            }
        };
        match rows.x {
            StepX::Dense(x) => {
                for j in 0..da {
                    for (r, &i) in step.iter().enumerate() {
                        let xv = if j < d { x[i as usize * d + j] } else { bias };
                        for h in 0..k {
                            update(w, &mut state, h * da + j, r * k + h, xv);
                        }
                    }
                }
                if let StreamState::Sums(s) = &mut state {
                    s.sums.iter_mut().zip(w.iter()).for_each(|(s, v)| *s += v);
                }
            }
            StepX::Csr { .. } => {
                // Row by row, the bias column after the row's non-zeros.
                for (r, &i) in step.iter().enumerate() {
                    let (idx, val) = match rows.x.row(i as usize, d) {
                        super::Row::Sparse { idx, val } => (idx, val),
                        super::Row::Dense(_) => unreachable!("CSR rows are sparse"),
                    };
                    let cols = idx.iter().map(|&j| j as usize).zip(val.iter().copied());
                    for (j, xq) in cols.chain([(d, bias)]) {
                        for h in 0..k {
                            update(w, &mut state, h * da + j, r * k + h, xq);
                        }
                    }
                }
            }
        }
        taken += 1;
    }
    (out, taken)
}

/// Whether a stream's sums over `rows` are kept eagerly (dense rows: every weight added
/// after every step) rather than lazily (sparse rows).
fn sums_eager(rows: &StepRows<'_>) -> bool {
    matches!(rows.x, StepX::Dense(_))
}

/// Twin of `catch_up` (shaders/steps_csr.wgsl, called by `mix`): every weight's lazily kept
/// sum brought up to the stream's `t` steps.
pub fn catch_up(sums: &mut [f32], last: &mut [u32], w: &[f32], t: u32) {
    for at in 0..w.len() {
        lazy_sum(sums, last, w, at, t);
    }
}

/// Twin of `mix`: every stream's weights (`len` each) become their mean, summed in stream
/// order (called again for AROW's confidences).
pub fn mix(w: &mut [f32], len: usize) {
    let streams = w.len() / len.max(1);
    for i in 0..len {
        let mut acc = 0f32;
        for s in 0..streams {
            acc += w[s * len + i];
        }
        let m = acc / streams as f32;
        for s in 0..streams {
            w[s * len + i] = m;
        }
    }
}

impl StepsBound for CpuSteps {
    fn epoch(&mut self, order: &[u32]) -> Result<RowOutcome> {
        let len = self.setup.w0.len();
        let s_all = self.setup.streams;
        let lazy = !self.last.is_empty();
        let mut total = RowOutcome::default();
        for s in 0..s_all {
            let (lo, hi) = stream_part(s, order.len(), s_all);
            let part = s * len..(s + 1) * len;
            let state = match (self.setup.average, self.sums.is_empty()) {
                (true, _) => StreamState::Sums(StreamSums {
                    sums: &mut self.sums[part.clone()],
                    last: match lazy {
                        true => &mut self.last[part.clone()],
                        false => &mut [],
                    },
                    t0: self.steps[s] as u32,
                }),
                (false, false) => StreamState::Confidence(&mut self.sums[part.clone()]),
                (false, true) => StreamState::Plain,
            };
            let x = match &self.x {
                OwnedX::Dense(x) => StepX::Dense(x),
                OwnedX::Csr(c) => c.into(),
            };
            let rows = StepRows {
                x,
                y: &self.y,
                weights: self.weights.as_deref(),
                d: self.d,
                bias: self.bias,
            };
            let (o, t) = steps(
                &self.setup,
                rows,
                &self.sq,
                &order[lo..hi],
                &mut self.w[part.clone()],
                state,
            );
            total += o;
            self.steps[s] += t;
            if lazy {
                catch_up(
                    &mut self.sums[part.clone()],
                    &mut self.last[part.clone()],
                    &self.w[part],
                    self.steps[s] as u32,
                );
            }
        }
        mix(&mut self.w, len);
        if self.setup.update.keeps_confidence() {
            mix(&mut self.sums, len);
        }
        Ok(total)
    }

    fn weights(&mut self) -> Result<Vec<f32>> {
        Ok(self.w[..self.setup.w0.len()].to_vec())
    }

    fn set_weights(&mut self, w: &[f32]) -> Result<()> {
        check_len(w, self.setup.w0.len())?;
        self.w = w.repeat(self.setup.streams);
        Ok(())
    }

    fn model(&mut self) -> Result<Vec<f32>> {
        let sums = self.setup.average.then_some(&self.sums[..]);
        Ok(model_of(&self.w, sums, &self.steps, self.setup.w0.len()))
    }
}
