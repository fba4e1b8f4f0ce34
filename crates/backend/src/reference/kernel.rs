//! Twin of the kernel perceptron's scoring (shaders/kernel.wgsl): `kscores`.

use super::super::{DataView, Kernel};
use super::dot;

/// Twin of `kscores` (kernel.wgsl): `f_i = sum over s of coef[s] * (K(sv[idx[s]], x_i) +
/// bias^2)`, with the squared norms `sv_sq` of the support rows (indexed by row).
pub fn kscores(
    eval: DataView<'_>,
    sv: DataView<'_>,
    sv_sq: &[f32],
    idx: &[u32],
    coef: &[f32],
    kernel: &Kernel,
) -> Vec<f32> {
    let d = eval.d;
    let b2 = eval.bias * eval.bias;
    let (ex, sx) = (eval.x.to_dense(eval.n, d), sv.x.to_dense(sv.n, d));
    (0..eval.n)
        .map(|i| {
            let x = &ex[i * d..(i + 1) * d];
            let xx = dot(x, x);
            let mut f = 0f32;
            for (&j, &a) in idx.iter().zip(coef) {
                let j = j as usize;
                let z = &sx[j * d..(j + 1) * d];
                let xz = dot(x, z);
                f += a * (kernel.eval(xz, xx, sv_sq[j]) + b2);
            }
            f
        })
        .collect()
}
