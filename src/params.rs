//! Training parameters: an unchecked [`TrainParams`] builder that validates into [`Params`],
//! the only form the training functions accept. Errors name the option and the bad value.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Training algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// Rosenblatt's online rule: update on each mistake, point by point.
    Online,
    /// Batch rule: per epoch add eta times the sum of y*x over all mistakes.
    #[default]
    Batch,
}

impl Algo {
    /// Name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Online => "online",
            Algo::Batch => "batch",
        }
    }
}

impl std::str::FromStr for Algo {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "online" => Ok(Algo::Online),
            "batch" => Ok(Algo::Batch),
            _ => Err(format!(
                "unknown algorithm {s:?} (expected online or batch)"
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
}

impl Default for TrainParams {
    fn default() -> Self {
        TrainParams {
            algo: Algo::Batch,
            epochs: 1000,
            lr: 1.0,
            tol: None,
            seed: 0,
            fit_bias: true,
            init: Init::Zero,
            shuffle: true,
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
    /// Sets the algorithm.
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

    /// Checks every value and returns the validated form.
    pub fn validate(self) -> Result<Params> {
        if self.epochs == 0 {
            return Err(Error::InvalidParam {
                name: "--epochs",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        if !(self.lr.is_finite() && self.lr > 0.0 && self.lr <= 1.0) {
            return Err(Error::InvalidParam {
                name: "--lr",
                value: self.lr.to_string(),
                reason: "should be in (0, 1]",
            });
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::InvalidParam {
                    name: "--tol",
                    value: t.to_string(),
                    reason: "should be finite and non-negative",
                });
            }
        }
        Ok(Params(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_value() {
        let e = TrainParams::default().lr(0.0).validate().unwrap_err();
        assert_eq!(e.to_string(), "--lr should be in (0, 1], but is 0");
        assert!(TrainParams::default().lr(1.5).validate().is_err());
        assert!(TrainParams::default().lr(f32::NAN).validate().is_err());
        assert!(TrainParams::default().epochs(0).validate().is_err());
        assert!(TrainParams::default().tol(Some(-1.0)).validate().is_err());
        assert!(TrainParams::default().lr(1.0).validate().is_ok());
    }
}
