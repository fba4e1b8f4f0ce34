//! The element types X is stored in, widened exactly to f32 on load (the CPU kernels' view of
//! storage; `xat` in the shaders is the GPU's).

/// A stored feature type: f32, or a narrower exact copy (see `matrix::storage`). Kernels
/// read rows of any of them and compute in f32: each value is widened exactly on load, so a
/// kernel gives bit-identical results whatever the storage of the same values.
pub trait Elem: Copy + Send + Sync + bytemuck::Pod + 'static {
    /// The value as f32 (exact).
    fn widen(self) -> f32;

    /// Eight consecutive values from `p`, widened.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C, and `p..p + 8` must be readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl Elem for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller guarantees 8 readable values and AVX.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
}

impl Elem for u8 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self as f32
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees 8 readable bytes and AVX2.
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()))) }
    }
}

impl Elem for i8 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self as f32
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees 8 readable bytes and AVX2.
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))) }
    }
}

impl Elem for half::f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees 8 readable halves and F16C.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
}
