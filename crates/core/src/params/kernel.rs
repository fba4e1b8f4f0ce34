//! Kernels of the dual (kernel) perceptron.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Param, Result};

/// A kernel for the dual (kernel) perceptron. The bias column adds `bias^2` to every value,
/// as the augmented input [x, bias] does for the linear kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "lowercase")]
pub enum Kernel {
    /// x . z
    Linear,
    /// (gamma x . z + coef0)^degree
    Poly {
        /// Degree (>= 1).
        degree: u32,
        /// Scale of the dot product.
        gamma: f32,
        /// Additive constant.
        coef0: f32,
    },
    /// exp(-gamma ||x - z||^2)
    Rbf {
        /// Width (> 0).
        gamma: f32,
    },
}

impl Kernel {
    /// Checks the parameters: degree 1 to 16, gamma positive and finite, coef0 finite.
    pub fn check(&self) -> Result<()> {
        match *self {
            Kernel::Linear => Ok(()),
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => {
                if degree == 0 || degree > 16 {
                    Err(Error::param(
                        Param::Degree,
                        degree,
                        "should be between 1 and 16",
                    ))
                } else if !(gamma.is_finite() && gamma > 0.0) {
                    Err(Error::param(
                        Param::Gamma,
                        gamma,
                        "should be positive and finite",
                    ))
                } else if !coef0.is_finite() {
                    Err(Error::param(Param::Coef0, coef0, "should be finite"))
                } else {
                    Ok(())
                }
            }
            Kernel::Rbf { gamma } if !(gamma.is_finite() && gamma > 0.0) => Err(Error::param(
                Param::Gamma,
                gamma,
                "should be positive and finite",
            )),
            Kernel::Rbf { .. } => Ok(()),
        }
    }

    /// GPU code (`KERNEL_*` in shaders/kernel.wgsl, checked equal by a test).
    pub fn code(&self) -> u32 {
        match self {
            Kernel::Linear => 0,
            Kernel::Poly { .. } => 1,
            Kernel::Rbf { .. } => 2,
        }
    }

    /// The kernel from the dot product `xz` and the squared norms `xx`, `zz`.
    #[inline(always)]
    pub fn eval(&self, xz: f32, xx: f32, zz: f32) -> f32 {
        match *self {
            Kernel::Linear => xz,
            Kernel::Poly {
                degree,
                gamma,
                coef0,
            } => (gamma * xz + coef0).powi(degree as i32),
            Kernel::Rbf { gamma } => (-gamma * (xx + zz - 2.0 * xz).max(0.0)).exp(),
        }
    }
}
