//! The vector kernels under the CPU hot loops, and their run-time dispatch.
//!
//! A hot loop is written once, generic over [`Lanes`], and [`simd_dispatch!`](crate::simd_dispatch) instantiates it
//! twice: with [`Avx2`] (explicit 256-bit intrinsics, in a function compiled for AVX2 and FMA)
//! when the CPU has them, else with [`Portable`] (plain Rust, as built). Both compute the same
//! sums in the same order: 16 lanes (two 8-wide vectors, so additions are not one long
//! dependency chain), combined by halving (lane k gets k + 8, then k + 4, k + 2, k + 1), then
//! the scalar tail. Each product is added by one fused multiply-add (`f32::mul_add` in the
//! portable form: one rounding, so the same value as the vector FMA; Rust never fuses a plain
//! a * b + c by itself). So results are bit-identical with or without AVX2
//! (`ROSENBLATT_NO_SIMD=1` forces the portable path; tests compare them).
//!
//! Why fused: a multiply and an add are two instructions where an FMA is one, and the
//! register-tiled K-head epoch issues little else. On cores that issue two FMAs, or two
//! multiplies and two adds, per cycle (Zen 3) the peak is the same, but the tile's loop runs
//! out of issue slots with the separate pair, and the epoch is slower (docs/performance.md,
//! "Fused multiply-add"). On CPUs whose adds share the FMA ports (most Intel cores) the
//! separate pair also halves the peak.
//!
//! Why intrinsics: left to itself, LLVM vectorises the 16-lane portable dot into 128-bit
//! operations with lane shuffles (seen in the disassembly), which made the batch epoch
//! compute-bound at about a third of the read bandwidth even with X in cache.

pub use super::Elem;

/// The vector primitives a hot loop is written against. A value of the type is the proof
/// that the CPU can run it (see [`Avx2`]).
pub trait Lanes: Copy {
    /// Dot product of two equal-length slices (the fixed lane structure above).
    fn dot<E: Elem>(self, a: &[f32], b: &[E]) -> f32;

    /// `sum[j] += c[k] * xb[rows[k] * d + j]` for each listed row in turn (d = `sum.len()`,
    /// `rows` ascending rows of the block `xb`): the same additions, in the same order, as one
    /// [`axpy`] per listed row.
    fn axpy_rows<E: Elem>(self, rows: &[u32], c: &[f32], xb: &[E], sum: &mut [f32]);

    /// The binary rule over a block of rows with margins `m`, labels `y` and row weights
    /// `w`: row k is a mistake when `m[k] <= tau`; then `c[k] = y[k] * w[k]` and `m[k]` becomes
    /// `m[k] * w[k]`, else both are +0. Returns the number of mistakes. Branch-free.
    #[inline(always)]
    fn block_rule(self, tau: f32, m: &mut [f32], y: &[f32], w: &[f32], c: &mut [f32]) -> u32 {
        block_rule(tau, m, y, w, c)
    }

    /// Decision value of one row: `w[..d] . x + w[d] * bias`.
    #[inline(always)]
    fn decision<E: Elem>(self, w: &[f32], row: &[E], bias: f32) -> f32 {
        let d = row.len();
        self.dot(&w[..d], row) + w[d] * bias
    }

    /// `out[r][h] = dot(w[h], x[r])` for R rows and H weight vectors at once, each with the
    /// lanes and order of [`Lanes::dot`] (so bit-identical to R * H calls of it), loading
    /// each row and each weight vector once per 16 columns for the whole tile: the K-head
    /// epoch's register tile. Every slice is at least as long as `x[0]`.
    fn dot_tile<E: Elem, const R: usize, const H: usize>(
        self,
        x: [&[E]; R],
        w: [&[f32]; H],
    ) -> [[f32; H]; R];

    /// [`Lanes::dot_tile`], also prefetching the cache lines of `pf` (a hint; any slice),
    /// spread over the tile's columns so that the misses stream evenly.
    #[inline(always)]
    fn dot_tile_prefetch<E: Elem, const R: usize, const H: usize>(
        self,
        x: [&[E]; R],
        w: [&[f32]; H],
        pf: &[u8],
    ) -> [[f32; H]; R] {
        prefetch_ahead(pf, 0);
        self.dot_tile(x, w)
    }
    /// The scores of a group of four rows under all `k` heads: `s[r * k + h] = dot(w[h * ws..h
    /// * ws + d], x[r * d..(r + 1) * d])`, bit-identical to `dot` (a [`Lanes::dot_tile`] of 4
    /// rows x 2 heads per pair of heads), prefetching `pf` a share per pair of heads. `x` holds
    /// the four rows one after the other (4 * d values), `w` the k heads at stride `ws` >= d,
    /// `s` at least 4 * k scores.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn dot_group<E: Elem>(
        self,
        x: &[E],
        d: usize,
        w: &[f32],
        ws: usize,
        k: usize,
        pf: &[u8],
        s: &mut [f32],
    ) {
        dot_group(self, x, d, w, ws, k, pf, s)
    }
}

/// The body of [`Lanes::dot_group`], over [`Lanes::dot_tile_prefetch`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dot_group<L: Lanes, E: Elem>(
    l: L,
    x: &[E],
    d: usize,
    w: &[f32],
    ws: usize,
    k: usize,
    pf: &[u8],
    s: &mut [f32],
) {
    let rows: [&[E]; 4] = std::array::from_fn(|r| &x[r * d..(r + 1) * d]);
    let head = |h: usize| &w[h * ws..h * ws + d];
    let pairs = k.div_ceil(2);
    let share = |q: usize| &pf[pf.len() * q / pairs..pf.len() * (q + 1) / pairs];
    let mut h = 0;
    while h < k {
        if h + 1 < k {
            let t = l.dot_tile_prefetch(rows, [head(h), head(h + 1)], share(h / 2));
            for (q, t) in t.iter().enumerate() {
                (s[q * k + h], s[q * k + h + 1]) = (t[0], t[1]);
            }
            h += 2;
        } else {
            let t = l.dot_tile_prefetch(rows, [head(h)], share(h / 2));
            for (q, t) in t.iter().enumerate() {
                s[q * k + h] = t[0];
            }
            h += 1;
        }
    }
}

/// Plain Rust, for any CPU.
#[derive(Debug, Clone, Copy)]
pub struct Portable;

impl Lanes for Portable {
    #[inline(always)]
    fn dot<E: Elem>(self, a: &[f32], b: &[E]) -> f32 {
        dot_portable(a, b)
    }

    #[inline(always)]
    fn axpy_rows<E: Elem>(self, rows: &[u32], c: &[f32], xb: &[E], sum: &mut [f32]) {
        let d = sum.len();
        for (&ck, &r) in c.iter().zip(rows) {
            let r = r as usize;
            axpy(ck, &xb[r * d..(r + 1) * d], sum);
        }
    }

    #[inline(always)]
    fn dot_tile<E: Elem, const R: usize, const H: usize>(
        self,
        x: [&[E]; R],
        w: [&[f32]; H],
    ) -> [[f32; H]; R] {
        let mut out = [[0f32; H]; R];
        for (o, xr) in out.iter_mut().zip(x) {
            for (oh, wh) in o.iter_mut().zip(w) {
                *oh = dot_portable(&wh[..xr.len()], xr);
            }
        }
        out
    }
}

/// AVX2 intrinsics. Only [`simd_dispatch!`](crate::simd_dispatch) makes one, after checking that the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
pub struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    #[doc(hidden)]
    pub unsafe fn assume() -> Self {
        Avx2(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    fn block_rule(self, tau: f32, m: &mut [f32], y: &[f32], w: &[f32], c: &mut [f32]) -> u32 {
        // SAFETY: an Avx2 value exists only when the CPU supports AVX2, FMA and F16C.
        unsafe { block_rule_avx2(tau, m, y, w, c) }
    }

    #[inline(always)]
    fn dot<E: Elem>(self, a: &[f32], b: &[E]) -> f32 {
        // SAFETY: an Avx2 value exists only when the CPU supports AVX2, FMA and F16C.
        unsafe { dot_avx2(a, b) }
    }

    #[inline(always)]
    fn axpy_rows<E: Elem>(self, rows: &[u32], c: &[f32], xb: &[E], sum: &mut [f32]) {
        // SAFETY: as above.
        unsafe { axpy_rows_avx2(rows, c, xb, sum) }
    }

    #[inline(always)]
    fn dot_tile<E: Elem, const R: usize, const H: usize>(
        self,
        x: [&[E]; R],
        w: [&[f32]; H],
    ) -> [[f32; H]; R] {
        // SAFETY: as above.
        unsafe { dot_tile_avx2(x, w, &[]) }
    }

    #[inline(always)]
    fn dot_tile_prefetch<E: Elem, const R: usize, const H: usize>(
        self,
        x: [&[E]; R],
        w: [&[f32]; H],
        pf: &[u8],
    ) -> [[f32; H]; R] {
        // SAFETY: as above.
        unsafe { dot_tile_avx2(x, w, pf) }
    }
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn dot_group<E: Elem>(
        self,
        x: &[E],
        d: usize,
        w: &[f32],
        ws: usize,
        k: usize,
        pf: &[u8],
        s: &mut [f32],
    ) {
        // SAFETY: as above.
        unsafe { dot_group_avx2(x, d, w, ws, k, pf, s) }
    }
}

/// [`Lanes::dot_group`] with AVX2, out of line and with the group's rows addressed from one
/// pointer at a stride of d: inlined into the epoch's loop, or with a pointer per row, the
/// tile's row pointers ran out of registers and were reloaded from the stack every 16
/// columns, and how badly depended on the code around it (K = 64 at 60,000 x 784: 51 to 67
/// ms per epoch between builds that differed only in dead code).
///
/// For each pair of heads, the 4 x 2 tile of [`dot_tile_avx2`]: one pass per half of the 16
/// lanes (8 accumulators), two steps of 16 columns per loop test and per prefetched line,
/// then the same joint reduction, and the tails in column order ([`tails4`]). The last head
/// of an odd k goes through a 4 x 1 [`dot_tile_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline(never)]
unsafe fn dot_group_avx2<E: Elem>(
    x: &[E],
    d: usize,
    w: &[f32],
    ws: usize,
    k: usize,
    pf: &[u8],
    s: &mut [f32],
) {
    use std::arch::x86_64::*;
    assert!(x.len() == 4 * d && ws >= d && s.len() >= 4 * k);
    assert!(k == 0 || w.len() >= (k - 1) * ws + d);
    let rows: [&[E]; 4] = std::array::from_fn(|r| &x[r * d..(r + 1) * d]);
    let n16 = d - d % 16;
    let pairs = k.div_ceil(2);
    let share = |q: usize| &pf[pf.len() * q / pairs..pf.len() * (q + 1) / pairs];
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    let mut h = 0;
    while h + 1 < k {
        let sh = share(h / 2);
        // SAFETY: h + 1 < k, so both heads are in w (checked above).
        let (w0, w1) = unsafe { (wp.add(h * ws), wp.add((h + 1) * ws)) };
        // sums[r][head] (each the two halves' accumulators added, as in `dot_avx2`).
        let mut sums = [[_mm256_setzero_ps(); 2]; 4];
        // SAFETY: the pair's columns are within x and w (checked above).
        let halves = unsafe { pair_halves(xp, d, w0, w1, n16, sh) };
        for (r, sr) in sums.iter_mut().enumerate() {
            for (hh, v) in sr.iter_mut().enumerate() {
                *v = _mm256_add_ps(halves[0][hh * 4 + r], halves[1][hh * 4 + r]);
            }
        }
        let tails = tails4(
            rows,
            [&w[h * ws..h * ws + d], &w[(h + 1) * ws..(h + 1) * ws + d]],
        );
        for (hh, at) in [h, h + 1].into_iter().enumerate() {
            let lanes = reduce4(std::array::from_fn(|r| sums[r][hh]));
            for r in 0..4 {
                s[r * k + at] = lanes[r] + tails[hh * 4 + r];
            }
        }
        h += 2;
    }
    if h < k {
        // SAFETY: the caller's CPU has AVX2, FMA and F16C (this function's features).
        let t = unsafe { dot_tile_avx2(rows, [&w[h * ws..h * ws + d]], share(h / 2)) };
        for (r, t) in t.iter().enumerate() {
            s[r * k + h] = t[0];
        }
    }
}

/// The 4 x 2 tile's accumulators over columns 0..n16 (a multiple of 16) for one pair of heads
/// `w0`, `w1` and the four rows from `xp` at stride `d`: `[half][head * 4 + row]`, one pass
/// per half of the 16 lanes, two steps of 16 columns per loop test and per line of `pf`
/// prefetched (the rest of `pf` after). Out of line so that its loop has the registers to
/// itself: inlined into the loop over the heads, the row pointers were reloaded from the
/// stack every step, and how often depended on the code around it (so the epoch's time
/// changed between builds that differed only in dead code; docs/performance.md, "The tile's
/// loop out of line").
///
/// # Safety
/// AVX2, FMA and F16C; the rows `xp + r * d` (r < 4) and `w0`, `w1` readable for n16 values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline(never)]
unsafe fn pair_halves<E: Elem>(
    xp: *const E,
    d: usize,
    w0: *const f32,
    w1: *const f32,
    n16: usize,
    pf: &[u8],
) -> [[std::arch::x86_64::__m256; 8]; 2] {
    use std::arch::x86_64::*;
    let mut pf_at = pf.as_ptr() as *const i8;
    let pf_end = pf_at.wrapping_add(std::mem::size_of_val(pf));
    let mut halves = [[_mm256_setzero_ps(); 8]; 2];
    for (half, a) in halves.iter_mut().enumerate() {
        // One step: columns j..j + 8 of the four rows and the two heads.
        // SAFETY: j + 8 <= n16: within each row and each head (the caller's promise).
        let step = |a: &mut [__m256; 8], j: usize| unsafe {
            let p = xp.add(j);
            let xv = [
                E::load8(p),
                E::load8(p.add(d)),
                E::load8(p.add(2 * d)),
                E::load8(p.add(3 * d)),
            ];
            let v = _mm256_loadu_ps(w0.add(j));
            for r in 0..4 {
                a[r] = _mm256_fmadd_ps(xv[r], v, a[r]);
            }
            let v = _mm256_loadu_ps(w1.add(j));
            for r in 0..4 {
                a[4 + r] = _mm256_fmadd_ps(xv[r], v, a[4 + r]);
            }
        };
        let mut j = half * 8;
        while j + 16 < n16 {
            if pf_at < pf_end {
                _mm_prefetch::<_MM_HINT_T0>(pf_at);
                pf_at = pf_at.wrapping_add(64);
            }
            step(a, j);
            step(a, j + 16);
            j += 32;
        }
        if j < n16 {
            step(a, j);
        }
    }
    while pf_at < pf_end {
        _mm_prefetch::<_MM_HINT_T0>(pf_at);
        pf_at = pf_at.wrapping_add(64);
    }
    halves
}

/// The tails of four rows' dots under two heads (the columns after the last whole 16, of
/// `x[r]`'s length, at most 15), as eight lanes: `out[h * 4 + r]` = the scalar tail of
/// [`dot_avx2`] for row r and head h (fused products added in column order from +0), each
/// lane the same operations, so the same bits. Done one at a time, the eight tails were eight
/// dependency chains of up to 15 fused multiply-adds each, one after the other (`bench
/// --classes K --backend cpu`, medians of five alternated runs, ms per epoch before -> after:
/// n = 400,000, d = 54, K = 7: 23.6 -> 18.9; d = 100, K = 10: 34.7 -> 28.1; n = 120,000,
/// d = 392, K = 10: 19.0 -> 17.8). One head's four tails are four chains already, and stay
/// scalar.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
fn tails4<E: Elem>(x: [&[E]; 4], w: [&[f32]; 2]) -> [f32; 8] {
    use std::arch::x86_64::*;
    let len = x[0].len();
    let n16 = len - len % 16;
    let mut t = _mm256_setzero_ps();
    for j in n16..len {
        let xv = _mm_setr_ps(
            x[0][j].widen(),
            x[1][j].widen(),
            x[2][j].widen(),
            x[3][j].widen(),
        );
        let wv = _mm256_set_m128(_mm_set1_ps(w[1][j]), _mm_set1_ps(w[0][j]));
        t = _mm256_fmadd_ps(_mm256_set_m128(xv, xv), wv, t);
    }
    let mut out = [0f32; 8];
    // SAFETY: out holds 8 floats.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), t) };
    out
}

/// The four rows' dots from their 16-lane sums folded to 8 (`s[r]` = the two accumulators
/// added): the same additions as the one-row reduction of [`dot_avx2`] (lane k + 4, then
/// (0 + 2) + (1 + 3)), two rows per register, so the reductions of a group of rows overlap
/// instead of being four dependency chains.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
fn reduce4(s: [std::arch::x86_64::__m256; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    // [row 0 | row 1] and [row 2 | row 3], each lane k + 4 added to lane k.
    let p = _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(s[0], s[1]),
        _mm256_permute2f128_ps::<0x31>(s[0], s[1]),
    );
    let q = _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(s[2], s[3]),
        _mm256_permute2f128_ps::<0x31>(s[2], s[3]),
    );
    // (p0 + p2, p1 + p3, q0 + q2, q1 + q3) per half, then the two added.
    let e = _mm256_add_ps(
        _mm256_shuffle_ps::<0b01_00_01_00>(p, q),
        _mm256_shuffle_ps::<0b11_10_11_10>(p, q),
    );
    let f = _mm256_add_ps(
        _mm256_shuffle_ps::<0b10_00_10_00>(e, e),
        _mm256_shuffle_ps::<0b11_01_11_01>(e, e),
    );
    // f = (r0, r2, r0, r2 | r1, r3, r1, r3).
    let mut lanes = [0f32; 8];
    // SAFETY: 8 floats are stored into 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), f) };
    [lanes[0], lanes[4], lanes[1], lanes[5]]
}

/// [`Lanes::dot_tile`] with AVX2: two 8-wide accumulators per (row, head), as in
/// [`dot_avx2`], combined the same way; the tails in column order. Tiles of 8 or more pairs
/// fill them in two passes, one per half of the 16 lanes (see below). Also prefetches the
/// lines of `pf`, one per 16 columns, then any left at the end.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
unsafe fn dot_tile_avx2<E: Elem, const R: usize, const H: usize>(
    x: [&[E]; R],
    w: [&[f32]; H],
    pf: &[u8],
) -> [[f32; H]; R] {
    use std::arch::x86_64::*;
    let len = x[0].len();
    // The lines of `pf`, one per 16 columns until they are covered, then the rest at the end.
    let pf_base = pf.as_ptr() as *const i8;
    let pf_bytes = std::mem::size_of_val(pf);
    let mut pf_at = 0;
    for xr in &x {
        assert_eq!(xr.len(), len);
    }
    for wh in &w {
        assert!(wh.len() >= len);
    }
    let n16 = len - len % 16;
    let mut acc = [[[_mm256_setzero_ps(); 2]; H]; R];
    if R * H >= 8 {
        // Two accumulators per pair would not fit the 16 registers with the rows and a
        // head: one pass per half of the 16 lanes instead (the columns 16k..16k+8, then
        // 16k+8..16k+16), each with one accumulator per pair. Each lane adds the same
        // products in the same order. Measured at 4 rows x 2 heads against two 2 x 2 tiles
        // (K = 10, d = 784, in cache): 68 against 59 GFLOP/s on one core.
        for half in 0..2 {
            let mut a = [[_mm256_setzero_ps(); H]; R];
            let mut i = half * 8;
            // Two steps of 16 columns per prefetch and loop test.
            while i + 16 < n16 {
                if pf_at < pf_bytes {
                    _mm_prefetch::<_MM_HINT_T0>(pf_base.wrapping_add(pf_at));
                    pf_at += 64;
                }
                for j in [i, i + 16] {
                    // SAFETY: j + 8 <= n16 <= the length of every slice (checked above).
                    unsafe {
                        let xv: [__m256; R] =
                            std::array::from_fn(|r| E::load8(x[r].as_ptr().add(j)));
                        for (h, wh) in w.iter().enumerate() {
                            let wv = _mm256_loadu_ps(wh.as_ptr().add(j));
                            for (ar, v) in a.iter_mut().zip(&xv) {
                                ar[h] = _mm256_fmadd_ps(*v, wv, ar[h]);
                            }
                        }
                    }
                }
                i += 32;
            }
            while i < n16 {
                if pf_at < pf_bytes {
                    _mm_prefetch::<_MM_HINT_T0>(pf_base.wrapping_add(pf_at));
                    pf_at += 64;
                }
                // SAFETY: i + 8 <= n16 <= the length of every slice (checked above).
                unsafe {
                    let xv: [__m256; R] = std::array::from_fn(|r| E::load8(x[r].as_ptr().add(i)));
                    for (h, wh) in w.iter().enumerate() {
                        let wv = _mm256_loadu_ps(wh.as_ptr().add(i));
                        for (ar, v) in a.iter_mut().zip(&xv) {
                            ar[h] = _mm256_fmadd_ps(*v, wv, ar[h]);
                        }
                    }
                }
                i += 16;
            }
            for (accr, ar) in acc.iter_mut().zip(&a) {
                for (acch, &ah) in accr.iter_mut().zip(ar) {
                    acch[half] = ah;
                }
            }
        }
    }
    let mut i = if R * H >= 8 { n16 } else { 0 };
    while i < n16 {
        if pf_at < pf_bytes {
            _mm_prefetch::<_MM_HINT_T0>(pf_base.wrapping_add(pf_at));
            pf_at += 64;
        }
        // SAFETY: i + 16 <= n16 <= the length of every slice (checked above).
        unsafe {
            let mut xv = [[_mm256_setzero_ps(); 2]; R];
            for (v, xr) in xv.iter_mut().zip(&x) {
                v[0] = E::load8(xr.as_ptr().add(i));
                v[1] = E::load8(xr.as_ptr().add(i + 8));
            }
            for (h, wh) in w.iter().enumerate() {
                let w0 = _mm256_loadu_ps(wh.as_ptr().add(i));
                let w1 = _mm256_loadu_ps(wh.as_ptr().add(i + 8));
                for (a, v) in acc.iter_mut().zip(&xv) {
                    a[h][0] = _mm256_fmadd_ps(v[0], w0, a[h][0]);
                    a[h][1] = _mm256_fmadd_ps(v[1], w1, a[h][1]);
                }
            }
        }
        i += 16;
    }
    while pf_at < pf_bytes {
        _mm_prefetch::<_MM_HINT_T0>(pf_base.wrapping_add(pf_at));
        pf_at += 64;
    }
    let mut out = [[0f32; H]; R];
    let tail = |r: usize, h: usize| {
        let mut t = 0f32;
        for (a, b) in x[r][n16..].iter().zip(&w[h][n16..len]) {
            t = a.widen().mul_add(*b, t);
        }
        t
    };
    if R == 4 {
        // Four rows reduced together (see `reduce4`); under two heads, their tails in one
        // register (one head's four are four chains already).
        let rows: [&[E]; 4] = std::array::from_fn(|r| x[r]);
        let tails = match H {
            2 => tails4(rows, [w[0], w[1]]),
            _ => [0.0; 8],
        };
        for h in 0..H {
            let lanes = reduce4(std::array::from_fn(|r| {
                _mm256_add_ps(acc[r][h][0], acc[r][h][1])
            }));
            for (r, lane) in lanes.into_iter().enumerate() {
                out[r][h] = lane + if H == 2 { tails[h * 4 + r] } else { tail(r, h) };
            }
        }
        return out;
    }
    for r in 0..R {
        for h in 0..H {
            let tail = tail(r, h);
            let s = _mm256_add_ps(acc[r][h][0], acc[r][h][1]);
            let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
            let e = _mm_add_ps(q, _mm_movehl_ps(q, q));
            let t = _mm_add_ss(e, _mm_shuffle_ps::<1>(e, e));
            out[r][h] = _mm_cvtss_f32(t) + tail;
        }
    }
    out
}

/// [`Lanes::axpy_rows`] with AVX2: columns in tiles of 32 (four vectors held in registers
/// across the rows of the block), then of 8, then one by one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
unsafe fn axpy_rows_avx2<E: Elem>(rows: &[u32], c: &[f32], xb: &[E], sum: &mut [f32]) {
    use std::arch::x86_64::*;
    let d = sum.len();
    assert!(rows.len() == c.len());
    assert!(rows.iter().all(|&r| (r as usize + 1) * d <= xb.len()));
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
            for (&r, &ck) in rows.iter().zip(c) {
                let cv = _mm256_set1_ps(ck);
                let p = px.add(r as usize * d + t);
                for (v, acc) in a.iter_mut().enumerate() {
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(cv, E::load8(p.add(8 * v))));
                }
            }
            for (v, acc) in a.iter().enumerate() {
                _mm256_storeu_ps(ps.add(t + 8 * v), *acc);
            }
            t += 32;
        }
        while t + 8 <= d {
            let mut acc = _mm256_loadu_ps(ps.add(t));
            for (&r, &ck) in rows.iter().zip(c) {
                let x = E::load8(px.add(r as usize * d + t));
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(ck), x));
            }
            _mm256_storeu_ps(ps.add(t), acc);
            t += 8;
        }
    }
    for j in t..d {
        let mut acc = sum[j];
        for (&r, &ck) in rows.iter().zip(c) {
            acc += ck * xb[r as usize * d + j].widen();
        }
        sum[j] = acc;
    }
}

/// [`Lanes::block_rule`] with AVX2: eight rows per compare and mask (LLVM compiles the
/// portable form's selects into branches, which mispredict on random mistakes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
unsafe fn block_rule_avx2(tau: f32, m: &mut [f32], y: &[f32], w: &[f32], c: &mut [f32]) -> u32 {
    use std::arch::x86_64::*;
    let b = m.len();
    assert!(y.len() >= b && w.len() >= b && c.len() >= b);
    let b8 = b - b % 8;
    let t = _mm256_set1_ps(tau);
    let mut hits = 0u32;
    let mut k = 0;
    while k < b8 {
        // SAFETY: k + 8 <= b8 <= every slice's length (checked above).
        unsafe {
            let mv = _mm256_loadu_ps(m.as_ptr().add(k));
            let wv = _mm256_loadu_ps(w.as_ptr().add(k));
            let yv = _mm256_loadu_ps(y.as_ptr().add(k));
            let hit = _mm256_cmp_ps::<_CMP_LE_OQ>(mv, t);
            hits += (_mm256_movemask_ps(hit) as u32).count_ones();
            _mm256_storeu_ps(
                c.as_mut_ptr().add(k),
                _mm256_and_ps(_mm256_mul_ps(yv, wv), hit),
            );
            _mm256_storeu_ps(
                m.as_mut_ptr().add(k),
                _mm256_and_ps(_mm256_mul_ps(mv, wv), hit),
            );
        }
        k += 8;
    }
    hits + block_rule(tau, &mut m[b8..], &y[b8..b], &w[b8..b], &mut c[b8..b])
}

/// The portable form of [`Lanes::block_rule`].
#[inline(always)]
pub fn block_rule(tau: f32, m: &mut [f32], y: &[f32], w: &[f32], c: &mut [f32]) -> u32 {
    let mut hits = 0;
    for (((c, m), &y), &wk) in c.iter_mut().zip(m.iter_mut()).zip(y).zip(w) {
        let hit = *m <= tau;
        hits += hit as u32;
        *c = if hit { y * wk } else { 0.0 };
        *m = if hit { *m * wk } else { 0.0 };
    }
    hits
}

/// [`dot`] with AVX2 intrinsics: the same lanes, the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
#[inline]
unsafe fn dot_avx2<E: Elem>(a: &[f32], b: &[E]) -> f32 {
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
            let y0 = E::load8(pb.add(i));
            let x1 = _mm256_loadu_ps(pa.add(i + 8));
            let y1 = E::load8(pb.add(i + 8));
            lo = _mm256_fmadd_ps(x0, y0, lo);
            hi = _mm256_fmadd_ps(x1, y1, hi);
        }
        i += 16;
    }
    let mut tail = 0f32;
    for (x, y) in a[n16..].iter().zip(&b[n16..]) {
        tail = x.mul_add(y.widen(), tail);
    }
    let h = _mm256_add_ps(lo, hi);
    let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let e = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let r = _mm_add_ss(e, _mm_shuffle_ps::<1>(e, e));
    _mm_cvtss_f32(r) + tail
}

/// Dot product with the fixed lane structure of this module: with AVX2 where
/// [`simd_enabled`], else the portable form (the same bits either way). For callers outside
/// the dispatched hot loops (rows one at a time: the online epoch, scoring, the kernel
/// perceptron).
#[inline]
pub fn dot<E: Elem>(a: &[f32], b: &[E]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd_enabled() {
        // SAFETY: simd_enabled() is true only when the CPU supports AVX2, FMA and F16C.
        return unsafe { dot_avx2(a, b) };
    }
    dot_portable(a, b)
}

/// The portable form of the dot product. Fused with `f32::mul_add`: a native instruction
/// where the build targets FMA (aarch64 always), a call to the C library's `fmaf` per
/// product on an x86_64 build for CPUs without it, which is slow but exact; on x86_64 the
/// AVX2 form runs instead wherever the CPU has FMA.
#[inline(always)]
pub fn dot_portable<E: Elem>(a: &[f32], b: &[E]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n16 = a.len() - a.len() % 16;
    let mut acc = [0f32; 16];
    for (x, y) in a[..n16].chunks_exact(16).zip(b[..n16].chunks_exact(16)) {
        for k in 0..16 {
            acc[k] = x[k].mul_add(y[k].widen(), acc[k]);
        }
    }
    let mut tail = 0f32;
    for (x, y) in a[n16..].iter().zip(&b[n16..]) {
        tail = x.mul_add(y.widen(), tail);
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

/// Decision value of one row: `w[..d] . x + w[d] * bias`, with [`dot`] (the same bits as
/// [`Lanes::decision`] with either lanes).
#[inline]
pub fn decision<E: Elem>(w: &[f32], row: &[E], bias: f32) -> f32 {
    let d = row.len();
    dot(&w[..d], row) + w[d] * bias
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
pub fn axpy<E: Elem>(alpha: f32, x: &[E], acc: &mut [f32]) {
    for (a, v) in acc.iter_mut().zip(x) {
        *a += alpha * v.widen();
    }
}

/// Asks the CPU to start loading the cache lines `bytes` past the start of `row`, as many as
/// `row` spans. A hint: it never faults, so the lines may lie past the end of the data. A no-op
/// on CPUs other than x86_64.
#[inline(always)]
pub fn prefetch_ahead<T>(row: &[T], bytes: usize) {
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
#[macro_export]
#[doc(hidden)]
macro_rules! simd_dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident<$g:ident: $gb:path>($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path) => {
        $(#[$m])*
        $vis fn $name<$g: $gb>($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,f16c,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2<$g: $gb>($($arg: $ty),*) $(-> $ret)? {
                    // SAFETY: only called when the CPU supports AVX2, FMA and F16C.
                    $body(unsafe { $crate::matrix::simd::Avx2::assume() }, $($arg),*)
                }
                if $crate::matrix::simd::simd_enabled() {
                    // SAFETY: simd_enabled() is true only when the CPU supports AVX2, FMA and F16C.
                    return unsafe { avx2::<$g>($($arg),*) };
                }
            }
            $body($crate::matrix::simd::Portable, $($arg),*)
        }
    };
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,f16c,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    // SAFETY: only called when the CPU supports AVX2.
                    $body(unsafe { $crate::matrix::simd::Avx2::assume() }, $($arg),*)
                }
                if $crate::matrix::simd::simd_enabled() {
                    // SAFETY: simd_enabled() is true only when the CPU supports AVX2, FMA and F16C.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($crate::matrix::simd::Portable, $($arg),*)
        }
    };
}

/// True when the CPU kernels use AVX2 (with FMA, and F16C for f16 rows): the CPU has them
/// ([`avx2_supported`]) and `ROSENBLATT_NO_SIMD` is not set
/// (setting it gives the portable code path, for checking that both agree).
pub fn simd_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| avx2_supported() && std::env::var_os("ROSENBLATT_NO_SIMD").is_none())
}

/// True when the CPU has what the [`Avx2`] kernels use: AVX2, FMA and F16C (every CPU with
/// AVX2 but a few low-power ones has the other two).
pub fn avx2_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

simd_dispatch! {
    /// Sum of a slice (the read-roofline kernel), AVX2 where available.
    pub fn sum_simd(a: &[f32]) -> f32 => sum
}

/// Independent 8-lane chains in the arithmetic-peak probe: enough to cover the fused
/// multiply-add latency at two per cycle (4 cycles on Zen 3, so 8 in flight; 12 leave room),
/// and few enough that the chains and the two constants stay in the 16 AVX2 registers. With
/// 16 chains they did not: the spills halved the peak the probe found (docs/performance.md,
/// "Figures behind the code's choices").
pub const PROBE_CHAINS: usize = 12;

/// `iters` rounds of [`PROBE_CHAINS`] independent 8-lane chains acc = acc * m + a (one fused
/// multiply-add with AVX2, as the kernels compute; a separate multiply and add in the portable
/// form, see there), from `seed`: the arithmetic-peak probe. Returns a value that depends on
/// every chain.
pub fn flops_probe(iters: u64, seed: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if simd_enabled() {
        // SAFETY: simd_enabled() is true only when the CPU supports AVX2, FMA and F16C.
        return unsafe { flops_probe_avx2(iters, seed) };
    }
    let mut acc = [[seed; 8]; PROBE_CHAINS];
    let (m, a) = (0.999_999f32, 1e-6f32);
    for _ in 0..iters {
        for c in acc.iter_mut() {
            for v in c.iter_mut() {
                // Unfused here: on an x86_64 build without FMA a fused one is a library
                // call per value, and this form is what LLVM vectorises (the peak of the
                // same units; the portable path is for checking and for other CPUs).
                *v = *v * m + a;
            }
        }
    }
    acc.iter().flatten().map(|&v| v as f64).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
unsafe fn flops_probe_avx2(iters: u64, seed: f32) -> f64 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(seed); PROBE_CHAINS];
    let (m, a) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-6));
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm256_fmadd_ps(*c, m, a);
        }
    }
    let mut out = 0f64;
    for c in acc {
        let mut lanes = [0f32; 8];
        // SAFETY: 8 floats are stored into 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), c) };
        out += lanes.iter().map(|&v| v as f64).sum::<f64>();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The register tile gives exactly the dot of every (row, head) pair, with both lanes.
    #[test]
    fn dot_tile_equals_the_dots_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for len in (0..40).chain([255, 784, 1031]) {
            let rows: Vec<Vec<f32>> = (0..2)
                .map(|_| (0..len).map(|_| rng.random_range(-1e3..1e3)).collect())
                .collect();
            let ws: Vec<Vec<f32>> = (0..2)
                .map(|_| (0..len + 1).map(|_| rng.random_range(-1.0..1.0)).collect())
                .collect();
            let x = [&rows[0][..], &rows[1][..]];
            let w = [&ws[0][..], &ws[1][..]];
            let want = |r: usize, h: usize| dot_portable(&ws[h][..len], &rows[r]).to_bits();
            let p = Portable.dot_tile(x, w);
            #[cfg(target_arch = "x86_64")]
            let a = if avx2_supported() {
                // SAFETY: checked just above.
                Some(unsafe { Avx2::assume() }.dot_tile(x, w))
            } else {
                None
            };
            #[cfg(not(target_arch = "x86_64"))]
            let a: Option<[[f32; 2]; 2]> = None;
            for r in 0..2 {
                for h in 0..2 {
                    assert_eq!(p[r][h].to_bits(), want(r, h), "portable len {len}");
                    if let Some(a) = a {
                        assert_eq!(a[r][h].to_bits(), want(r, h), "avx2 len {len}");
                    }
                }
            }
            let one = Portable.dot_tile([x[1]], [w[0]]);
            assert_eq!(one[0][0].to_bits(), want(1, 0));
            // The four-row tile (its own joint reduction) and u8 rows widened on load.
            let four = [x[0], x[1], x[1], x[0]];
            let bytes: Vec<Vec<u8>> = (0..4)
                .map(|_| (0..len).map(|_| rng.random_range(0..=255u8)).collect())
                .collect();
            let b4 = [&bytes[0][..], &bytes[1][..], &bytes[2][..], &bytes[3][..]];
            #[cfg(target_arch = "x86_64")]
            if avx2_supported() {
                // SAFETY: checked just above.
                let l = unsafe { Avx2::assume() };
                // 4 x 2 goes in two passes, one per half of the lanes; 4 x 1 in one.
                let t = l.dot_tile(four, w);
                let tb = l.dot_tile_prefetch(b4, w, &bytes[0]);
                let tb1 = l.dot_tile(b4, [w[1]]);
                for (r, (tr, br)) in t.iter().zip(&tb).enumerate() {
                    for (h, v) in tr.iter().enumerate() {
                        assert_eq!(v.to_bits(), want([0, 1, 1, 0][r], h), "avx2 4 rows");
                        let wb = dot_portable(&ws[h][..len], &bytes[r]).to_bits();
                        assert_eq!(br[h].to_bits(), wb, "avx2 u8 len {len}");
                    }
                    assert_eq!(tb1[r][0].to_bits(), br[1].to_bits(), "avx2 u8 4 x 1");
                }
            }
        }
    }

    /// The AVX2 dot is bit-identical to the portable one, on every length class (whole
    /// 16-lane blocks, tails, empty) and on values whose sums round.
    #[test]
    fn avx2_dot_matches_portable_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        if avx2_supported() {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            // SAFETY: checked just above.
            let l = unsafe { Avx2::assume() };
            for len in (0..70).chain([255, 256, 1000, 5003]) {
                for _ in 0..20 {
                    let a: Vec<f32> = (0..len).map(|_| rng.random_range(-1e3..1e3)).collect();
                    let b: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
                    assert_eq!(
                        l.dot(&a, &b).to_bits(),
                        dot_portable(&a, &b).to_bits(),
                        "len {len}"
                    );
                    // The free function dispatches to the same bits.
                    assert_eq!(dot(&a, &b).to_bits(), dot_portable(&a, &b).to_bits());
                }
            }
        }
    }
}
