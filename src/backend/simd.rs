//! The vector kernels under the CPU hot loops, and their run-time dispatch.
//!
//! A hot loop is written once, generic over [`Lanes`], and [`simd_dispatch!`] instantiates it
//! twice: with [`Avx2`] (explicit 256-bit intrinsics, in a function compiled for AVX2) when the
//! CPU has AVX2, else with [`Portable`] (plain Rust, as built). Both compute the same sums in
//! the same order: 16 lanes (two 8-wide vectors, so additions are not one long dependency
//! chain), combined by halving (lane k gets k + 8, then k + 4, k + 2, k + 1), then the scalar
//! tail; Rust never contracts a * b + c into an FMA. So results are bit-identical with or
//! without AVX2 (`ROSENBLATT_NO_SIMD=1` forces the portable path; tests compare them).
//!
//! Why intrinsics: left to itself, LLVM vectorises the 16-lane portable dot into 128-bit
//! operations with lane shuffles (seen in the disassembly), which made the batch epoch
//! compute-bound at about a third of the read bandwidth even with X in cache.

/// The vector primitives a hot loop is written against. A value of the type is the proof
/// that the CPU can run it (see [`Avx2`]).
pub trait Lanes: Copy {
    /// Dot product of two equal-length slices (the fixed lane structure above).
    fn dot(self, a: &[f32], b: &[f32]) -> f32;

    /// `sum[j] += c[k] * xb[k * d + j]` for each row k of the block `xb` in turn (d =
    /// `sum.len()`): the same additions, in the same order, as one [`axpy`] per row.
    fn axpy_rows(self, c: &[f32], xb: &[f32], sum: &mut [f32]);

    /// Decision value of one row: w[..d] . x + w[d] * bias.
    #[inline(always)]
    fn decision(self, w: &[f32], row: &[f32], bias: f32) -> f32 {
        let d = row.len();
        self.dot(&w[..d], row) + w[d] * bias
    }
}

/// Plain Rust, for any CPU.
#[derive(Debug, Clone, Copy)]
pub struct Portable;

impl Lanes for Portable {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        dot(a, b)
    }

    #[inline(always)]
    fn axpy_rows(self, c: &[f32], xb: &[f32], sum: &mut [f32]) {
        let d = sum.len();
        for (&ck, row) in c.iter().zip(xb.chunks_exact(d.max(1))) {
            axpy(ck, row, sum);
        }
    }
}

/// AVX2 intrinsics. Only [`simd_dispatch!`] makes one, after checking that the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
pub struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2.
    #[doc(hidden)]
    pub unsafe fn assume() -> Self {
        Avx2(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: an Avx2 value exists only when the CPU supports AVX2.
        unsafe { dot_avx2(a, b) }
    }

    #[inline(always)]
    fn axpy_rows(self, c: &[f32], xb: &[f32], sum: &mut [f32]) {
        // SAFETY: as above.
        unsafe { axpy_rows_avx2(c, xb, sum) }
    }
}

/// [`Lanes::axpy_rows`] with AVX2: columns in tiles of 32 (four vectors held in registers
/// across the rows of the block), then of 8, then one by one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn axpy_rows_avx2(c: &[f32], xb: &[f32], sum: &mut [f32]) {
    use std::arch::x86_64::*;
    let d = sum.len();
    assert!(xb.len() >= c.len() * d);
    let (px, ps) = (xb.as_ptr(), sum.as_mut_ptr());
    let mut t = 0;
    // SAFETY: every access is at column < d of row k < c.len() (checked above) or of sum.
    unsafe {
        while t + 32 <= d {
            let mut a = [
                _mm256_loadu_ps(ps.add(t)),
                _mm256_loadu_ps(ps.add(t + 8)),
                _mm256_loadu_ps(ps.add(t + 16)),
                _mm256_loadu_ps(ps.add(t + 24)),
            ];
            for (k, &ck) in c.iter().enumerate() {
                let cv = _mm256_set1_ps(ck);
                let p = px.add(k * d + t);
                for (v, acc) in a.iter_mut().enumerate() {
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(cv, _mm256_loadu_ps(p.add(8 * v))));
                }
            }
            for (v, acc) in a.iter().enumerate() {
                _mm256_storeu_ps(ps.add(t + 8 * v), *acc);
            }
            t += 32;
        }
        while t + 8 <= d {
            let mut acc = _mm256_loadu_ps(ps.add(t));
            for (k, &ck) in c.iter().enumerate() {
                let x = _mm256_loadu_ps(px.add(k * d + t));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(ck), x));
            }
            _mm256_storeu_ps(ps.add(t), acc);
            t += 8;
        }
    }
    for j in t..d {
        let mut acc = sum[j];
        for (k, &ck) in c.iter().enumerate() {
            acc += ck * xb[k * d + j];
        }
        sum[j] = acc;
    }
}

/// [`dot`] with AVX2 intrinsics: the same lanes, the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    assert_eq!(a.len(), b.len());
    let n16 = a.len() - a.len() % 16;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 <= n16 <= len of both slices.
        unsafe {
            let x0 = _mm256_loadu_ps(pa.add(i));
            let y0 = _mm256_loadu_ps(pb.add(i));
            let x1 = _mm256_loadu_ps(pa.add(i + 8));
            let y1 = _mm256_loadu_ps(pb.add(i + 8));
            lo = _mm256_add_ps(lo, _mm256_mul_ps(x0, y0));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(x1, y1));
        }
        i += 16;
    }
    let mut tail = 0f32;
    for (x, y) in a[n16..].iter().zip(&b[n16..]) {
        tail += x * y;
    }
    let h = _mm256_add_ps(lo, hi);
    let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let e = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let r = _mm_add_ss(e, _mm_shuffle_ps::<1>(e, e));
    _mm_cvtss_f32(r) + tail
}

/// Dot product with the fixed lane structure of this module (the portable form).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n16 = a.len() - a.len() % 16;
    let mut acc = [0f32; 16];
    for (x, y) in a[..n16].chunks_exact(16).zip(b[..n16].chunks_exact(16)) {
        for k in 0..16 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0f32;
    for (x, y) in a[n16..].iter().zip(&b[n16..]) {
        tail += x * y;
    }
    let mut h = [0f32; 8];
    for k in 0..8 {
        h[k] = acc[k] + acc[k + 8];
    }
    let mut q = [0f32; 4];
    for k in 0..4 {
        q[k] = h[k] + h[k + 4];
    }
    ((q[0] + q[2]) + (q[1] + q[3])) + tail
}

/// Decision value of one row with the portable lanes: w[..d] . x + w[d] * bias.
#[inline(always)]
pub fn decision(w: &[f32], row: &[f32], bias: f32) -> f32 {
    Portable.decision(w, row, bias)
}

/// Sum of a slice with 32 lanes (the read roofline's kernel; LLVM vectorises this one well).
#[inline(always)]
pub fn sum<L: Lanes>(_: L, a: &[f32]) -> f32 {
    let n32 = a.len() - a.len() % 32;
    let mut acc = [0f32; 32];
    for x in a[..n32].chunks_exact(32) {
        for k in 0..32 {
            acc[k] += x[k];
        }
    }
    acc.iter().sum::<f32>() + a[n32..].iter().sum::<f32>()
}

/// `acc += alpha * x` (LLVM vectorises this loop at full width).
#[inline(always)]
pub fn axpy(alpha: f32, x: &[f32], acc: &mut [f32]) {
    for (a, v) in acc.iter_mut().zip(x) {
        *a += alpha * v;
    }
}

/// Asks the CPU to start loading the cache lines `bytes` past the start of `row`, as many as
/// `row` spans. A hint: it never faults, so the lines may lie past the end of the data. A no-op
/// on CPUs other than x86_64.
#[inline(always)]
pub fn prefetch_ahead(row: &[f32], bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let base = (row.as_ptr() as *const i8).wrapping_add(bytes);
        let mut o = 0;
        while o < std::mem::size_of_val(row) {
            // SAFETY: prefetch is a hint with no architectural effect; any address is allowed.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(o)) };
            o += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, bytes);
}

/// Defines `$name`, which runs the `#[inline(always)]` function `$body`, generic over
/// [`Lanes`] and taking the lanes as its first argument, with [`Avx2`] in a function compiled
/// for AVX2 when [`simd_enabled`], else with [`Portable`].
macro_rules! simd_dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    // SAFETY: only called when the CPU supports AVX2.
                    $body(unsafe { $crate::backend::simd::Avx2::assume() }, $($arg),*)
                }
                if $crate::backend::simd_enabled() {
                    // SAFETY: simd_enabled() is true only when the CPU supports AVX2.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($crate::backend::simd::Portable, $($arg),*)
        }
    };
}
pub(crate) use simd_dispatch;

/// True when the CPU kernels use AVX2: the CPU has it and `ROSENBLATT_NO_SIMD` is not set
/// (setting it gives the portable code path, for checking that both agree).
pub fn simd_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        let has = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let has = false;
        has && std::env::var_os("ROSENBLATT_NO_SIMD").is_none()
    })
}

simd_dispatch! {
    /// Sum of a slice (the read-roofline kernel), AVX2 where available.
    pub fn sum_simd(a: &[f32]) -> f32 => sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 dot is bit-identical to the portable one, on every length class (whole
    /// 16-lane blocks, tails, empty) and on values whose sums round.
    #[test]
    fn avx2_dot_matches_portable_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            // SAFETY: checked just above.
            let l = unsafe { Avx2::assume() };
            for len in (0..70).chain([255, 256, 1000, 5003]) {
                for _ in 0..20 {
                    let a: Vec<f32> = (0..len).map(|_| rng.random_range(-1e3..1e3)).collect();
                    let b: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
                    assert_eq!(l.dot(&a, &b).to_bits(), dot(&a, &b).to_bits(), "len {len}");
                }
            }
        }
    }
}
