//! The online perceptron in steps of B rows and S streams, bound to a backend: the GPU runs
//! it as shaders/steps.wgsl (one workgroup a stream); [`CpuSteps`] here is its CPU twin, the
//! entry points' twins [`steps`] and [`mix`] written plainly with the shader's arithmetic.
//! The algorithm that drives either is `algo::online` (the same rule as its row-by-row form
//! with `--minibatch B --streams S`, whose averages it keeps by lazy sums).

use super::{HeadRule, RowOutcome, RowWeight};
use crate::error::{Error, Result};

/// Most B x K scores of one step (`MAX_STEP` in shaders/steps.wgsl).
pub const MAX_STEP: usize = 2048;

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
}

impl StepsSetup {
    /// Refuses a setup the kernels cannot run: no rows per step or stream, or a step's
    /// scores beyond [`MAX_STEP`].
    pub fn check(&self, d: usize) -> Result<()> {
        if self.step_rows == 0 || self.streams == 0 || self.heads == 0 {
            return Err(Error::Gpu(
                "a stepped run needs rows, streams and heads".into(),
            ));
        }
        if self.step_rows.saturating_mul(self.heads) > MAX_STEP {
            return Err(Error::Gpu(format!(
                "steps of {} rows with {} heads: more than {MAX_STEP} scores a step",
                self.step_rows, self.heads
            )));
        }
        if self.w0.len() != self.heads * (d + 1) {
            return Err(Error::Gpu("starting weights of the wrong length".into()));
        }
        Ok(())
    }
}

/// Rows bound for a stepped online run (see [`super::Backend::bind_steps`]).
pub trait StepsBound {
    /// One epoch: each stream walks its part of `order` (contiguous, stream s from position
    /// s n / S) in steps, then the streams are mixed. Returns the epoch's counts.
    fn epoch(&mut self, order: &[u32]) -> Result<RowOutcome>;
    /// The streams' (mixed) weights.
    fn weights(&mut self) -> Result<Vec<f32>>;
    /// The model: with averaging the mean over the streams of their weights' average over
    /// their steps (a stream without a step counts its weights), else the weights.
    fn model(&mut self) -> Result<Vec<f32>>;
    /// How the backend runs the steps, in words (for reports and tests).
    fn plan(&self) -> String {
        "row by row on the CPU".into()
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

/// The rows of a stepped run: dense f32 features (`y.len()` rows of `d`, row-major), labels
/// (±1, or the class index), each row's weight where rows have weights, and the bias
/// column's value.
#[derive(Debug, Clone, Copy)]
pub struct StepRows<'a> {
    /// Features, row-major.
    pub x: &'a [f32],
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
}

/// The CPU twin of shaders/steps.wgsl: the streams' weights and sums in f32.
pub struct CpuSteps {
    x: Vec<f32>,
    y: Vec<f32>,
    weights: Option<Vec<RowWeight>>,
    d: usize,
    bias: f32,
    setup: StepsSetup,
    w: Vec<f32>,
    sums: Vec<f32>,
    steps: Vec<u64>,
}

impl CpuSteps {
    /// Binds a copy of `rows` for the run `setup`.
    pub fn new(rows: StepRows<'_>, setup: StepsSetup) -> Result<Self> {
        setup.check(rows.d)?;
        let len = setup.w0.len();
        let s = setup.streams;
        Ok(CpuSteps {
            w: setup.w0.repeat(s),
            sums: vec![0.0; if setup.average { s * len } else { 0 }],
            steps: vec![0; s],
            x: rows.x.to_vec(),
            y: rows.y.to_vec(),
            weights: rows.weights.map(<[RowWeight]>::to_vec),
            d: rows.d,
            bias: rows.bias,
            setup,
        })
    }
}

/// Twin of `steps`: one stream over its part of `order` (`part`), with its weights `w` and
/// sums `sums` (`heads * (d + 1)` each); returns its counts and steps taken.
pub fn steps(
    st: &StepsSetup,
    rows: StepRows<'_>,
    part: &[u32],
    w: &mut [f32],
    mut sums: Option<&mut [f32]>,
) -> (RowOutcome, u64) {
    let (x, y, d, bias) = (rows.x, rows.y, rows.d, rows.bias);
    let k = st.heads;
    let da = d + 1;
    let mut out = RowOutcome::default();
    let mut taken = 0;
    let mut sc = vec![0f32; st.step_rows * k];
    for step in part.chunks(st.step_rows) {
        for (r, &i) in step.iter().enumerate() {
            let row = &x[i as usize * d..(i as usize + 1) * d];
            for h in 0..k {
                let wh = &w[h * da..(h + 1) * da];
                let mut acc = 0f32;
                for j in 0..d {
                    acc += wh[j] * row[j];
                }
                sc[r * k + h] = acc + wh[d] * bias;
            }
        }
        for (r, &i) in step.iter().enumerate() {
            let s = &mut sc[r * k..(r + 1) * k];
            let mut c = vec![0f32; k];
            let o = super::row_rule(
                st.rule,
                st.tau,
                s,
                y[i as usize],
                rows.weight(i as usize),
                |h, a| c[h] = a,
            );
            s.copy_from_slice(&c);
            out += o;
        }
        for j in 0..da {
            for (r, &i) in step.iter().enumerate() {
                let xv = if j < d { x[i as usize * d + j] } else { bias };
                for h in 0..k {
                    let c = sc[r * k + h];
                    if c != 0.0 {
                        w[h * da + j] += (st.eta * c) * xv;
                    }
                }
            }
        }
        if let Some(s) = sums.as_deref_mut() {
            s.iter_mut().zip(w.iter()).for_each(|(s, v)| *s += v);
        }
        taken += 1;
    }
    (out, taken)
}

/// Twin of `mix`: every stream's weights (`len` each) become their mean, summed in stream
/// order.
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
        let mut total = RowOutcome::default();
        for s in 0..s_all {
            let (lo, hi) = stream_part(s, order.len(), s_all);
            let sums = match self.setup.average {
                true => Some(&mut self.sums[s * len..(s + 1) * len]),
                false => None,
            };
            let rows = StepRows {
                x: &self.x,
                y: &self.y,
                weights: self.weights.as_deref(),
                d: self.d,
                bias: self.bias,
            };
            let (o, t) = steps(
                &self.setup,
                rows,
                &order[lo..hi],
                &mut self.w[s * len..(s + 1) * len],
                sums,
            );
            total += o;
            self.steps[s] += t;
        }
        mix(&mut self.w, len);
        Ok(total)
    }

    fn weights(&mut self) -> Result<Vec<f32>> {
        Ok(self.w[..self.setup.w0.len()].to_vec())
    }

    fn model(&mut self) -> Result<Vec<f32>> {
        let sums = self.setup.average.then_some(&self.sums[..]);
        Ok(model_of(&self.w, sums, &self.steps, self.setup.w0.len()))
    }
}
