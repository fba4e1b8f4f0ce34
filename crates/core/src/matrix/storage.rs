//! How X is stored: f32, or a narrower copy that holds every value exactly (u8 or i8 for
//! integers in range, f16 for values that f16 holds). The arithmetic is f32 whatever the
//! storage: kernels widen each value exactly on load (simd::Elem on the CPU, `xat` in
//! shaders/batch.wgsl), so a compact copy gives bit-identical results to the f32 one while an
//! epoch reads a quarter (u8, i8) or half (f16) of the bytes.

use std::borrow::Cow;

use half::f16;

use super::Elem;

/// The element type X is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Storage {
    /// 4-byte floats: holds anything.
    #[default]
    F32,
    /// IEEE half floats: values with at most 11 significant bits and exponents in range (normal
    /// halves and zero).
    F16,
    /// The integers 0..=255.
    U8,
    /// The integers -128..=127.
    I8,
}

impl Storage {
    /// Every storage, narrowest first (the order `auto` tries them in, f32 last).
    pub const ALL: [Storage; 4] = [Storage::U8, Storage::I8, Storage::F16, Storage::F32];

    /// The name users write.
    pub fn name(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
            Storage::U8 => "u8",
            Storage::I8 => "i8",
        }
    }

    /// Bytes per value.
    pub fn bytes(self) -> usize {
        match self {
            Storage::F32 => 4,
            Storage::F16 => 2,
            Storage::U8 | Storage::I8 => 1,
        }
    }

    /// GPU code (`STORAGE_*` in shaders/batch.wgsl, checked equal by a test).
    pub fn code(self) -> u32 {
        match self {
            Storage::F32 => 0,
            Storage::F16 => 1,
            Storage::U8 => 2,
            Storage::I8 => 3,
        }
    }

    /// What the storage holds, for messages.
    pub fn holds_what(self) -> &'static str {
        match self {
            Storage::F32 => "any finite float",
            Storage::F16 => "values that a 16-bit float represents exactly",
            Storage::U8 => "the integers 0 to 255",
            Storage::I8 => "the integers -128 to 127",
        }
    }

    /// True when the storage holds `v` exactly, bit for bit (so -0.0 is not a u8).
    #[inline]
    pub fn holds(self, v: f32) -> bool {
        let b = v.to_bits();
        match self {
            Storage::F32 => true,
            // Subnormal halves are refused: some GPUs flush them when unpacking.
            Storage::F16 => {
                let h = f16::from_f32(v);
                h.to_f32().to_bits() == b && (h.is_normal() || v == 0.0)
            }
            Storage::U8 => (v as u8 as f32).to_bits() == b,
            Storage::I8 => (v as i8 as f32).to_bits() == b,
        }
    }

    /// Index of the first value of `x` the storage does not hold exactly.
    pub fn first_misfit(self, x: &[f32]) -> Option<usize> {
        if self == Storage::F32 {
            return None;
        }
        x.iter().position(|&v| !self.holds(v))
    }

    /// The narrowest storage that holds every value of every slice exactly.
    pub fn narrowest<'a>(xs: impl IntoIterator<Item = &'a [f32]> + Clone) -> Storage {
        Storage::ALL
            .into_iter()
            .find(|s| {
                xs.clone()
                    .into_iter()
                    .all(|x| x.iter().all(|&v| s.holds(v)))
            })
            .unwrap_or(Storage::F32)
    }
}

impl std::str::FromStr for Storage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Storage::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown storage {s:?}: f32, f16, u8 or i8"))
    }
}

/// Row-major features in one storage, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum Features<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// Half floats.
    F16(&'a [f16]),
    /// Bytes 0..=255.
    U8(&'a [u8]),
    /// Signed bytes.
    I8(&'a [i8]),
}

/// Runs `$body` with `$xs` bound to the typed slice of the [`Features`] `$f` (one copy of the
/// body per storage, each compiled for its element type).
#[macro_export]
#[doc(hidden)]
macro_rules! with_features {
    ($f:expr, $xs:ident => $body:expr) => {
        match $f {
            $crate::matrix::Features::F32($xs) => $body,
            $crate::matrix::Features::F16($xs) => $body,
            $crate::matrix::Features::U8($xs) => $body,
            $crate::matrix::Features::I8($xs) => $body,
        }
    };
}
pub use with_features;

impl<'a> Features<'a> {
    /// The storage.
    pub fn storage(&self) -> Storage {
        match self {
            Features::F32(_) => Storage::F32,
            Features::F16(_) => Storage::F16,
            Features::U8(_) => Storage::U8,
            Features::I8(_) => Storage::I8,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        with_features!(*self, x => x.len())
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, widened.
    #[inline]
    pub fn get(&self, i: usize) -> f32 {
        with_features!(*self, x => x[i].widen())
    }

    /// The values `range`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Features<'a> {
        match *self {
            Features::F32(x) => Features::F32(&x[range]),
            Features::F16(x) => Features::F16(&x[range]),
            Features::U8(x) => Features::U8(&x[range]),
            Features::I8(x) => Features::I8(&x[range]),
        }
    }

    /// The stored bytes.
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            Features::F32(x) => bytemuck::cast_slice(x),
            Features::F16(x) => bytemuck::cast_slice(x),
            Features::U8(x) => x,
            Features::I8(x) => bytemuck::cast_slice(x),
        }
    }

    /// Row `i` of `d` values as f32: the stored slice itself for f32, else widened into `buf`.
    #[inline]
    pub fn row<'b>(&'b self, i: usize, d: usize, buf: &'b mut Vec<f32>) -> &'b [f32] {
        match self {
            Features::F32(x) => &x[i * d..(i + 1) * d],
            _ => {
                buf.clear();
                with_features!(*self, x => buf.extend(x[i * d..(i + 1) * d].iter().map(|v| v.widen())));
                buf
            }
        }
    }

    /// Asks the CPU to start loading row `i` of `d` values, its first KiB at most (the
    /// hardware prefetcher follows a long row once it is being read). A hint; never faults.
    #[inline]
    pub fn prefetch_row(&self, i: usize, d: usize) {
        with_features!(*self, x => {
            let len = d.min(1024 / elem_size(x));
            if let Some(r) = x.get(i * d..i * d + len) {
                super::simd::prefetch_ahead(r, 0);
            }
        })
    }

    /// All values as f32 (borrowed for f32, widened otherwise).
    pub fn to_f32(self) -> Cow<'a, [f32]> {
        match self {
            Features::F32(x) => Cow::Borrowed(x),
            _ => Cow::Owned(with_features!(self, x => x.iter().map(|v| v.widen()).collect())),
        }
    }
}

/// Bytes per value of a slice.
fn elem_size<E>(_: &[E]) -> usize {
    std::mem::size_of::<E>()
}

impl<'a> From<&'a [f32]> for Features<'a> {
    fn from(x: &'a [f32]) -> Self {
        Features::F32(x)
    }
}

impl<'a> From<&'a Vec<f32>> for Features<'a> {
    fn from(x: &'a Vec<f32>) -> Self {
        Features::F32(x)
    }
}

impl<'a, const N: usize> From<&'a [f32; N]> for Features<'a> {
    fn from(x: &'a [f32; N]) -> Self {
        Features::F32(x)
    }
}

/// Row-major features in one storage, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureBuf {
    /// f32 values.
    F32(Vec<f32>),
    /// Half floats.
    F16(Vec<f16>),
    /// Bytes.
    U8(Vec<u8>),
    /// Signed bytes.
    I8(Vec<i8>),
}

impl FeatureBuf {
    /// `x` in `storage`, or the index of the first value it does not hold exactly.
    pub fn pack(x: &[f32], storage: Storage) -> Result<FeatureBuf, usize> {
        if let Some(i) = storage.first_misfit(x) {
            return Err(i);
        }
        Ok(match storage {
            Storage::F32 => FeatureBuf::F32(x.to_vec()),
            Storage::F16 => FeatureBuf::F16(x.iter().map(|&v| f16::from_f32(v)).collect()),
            Storage::U8 => FeatureBuf::U8(x.iter().map(|&v| v as u8).collect()),
            Storage::I8 => FeatureBuf::I8(x.iter().map(|&v| v as i8).collect()),
        })
    }

    /// The borrowed view.
    pub fn view(&self) -> Features<'_> {
        match self {
            FeatureBuf::F32(x) => Features::F32(x),
            FeatureBuf::F16(x) => Features::F16(x),
            FeatureBuf::U8(x) => Features::U8(x),
            FeatureBuf::I8(x) => Features::I8(x),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_storage_holds_exactly_its_values() {
        assert!(Storage::U8.holds(0.0) && Storage::U8.holds(255.0));
        assert!(!Storage::U8.holds(-0.0) && !Storage::U8.holds(256.0));
        assert!(!Storage::U8.holds(1.5) && !Storage::U8.holds(-1.0));
        assert!(Storage::I8.holds(-128.0) && Storage::I8.holds(127.0));
        assert!(!Storage::I8.holds(128.0) && !Storage::I8.holds(-129.0));
        assert!(Storage::F16.holds(0.5) && Storage::F16.holds(-2048.0));
        assert!(Storage::F16.holds(65504.0) && !Storage::F16.holds(2049.0));
        assert!(!Storage::F16.holds(0.1) && !Storage::F16.holds(1e6));
        assert!(Storage::F16.holds(-0.0) && !Storage::F16.holds(2f32.powi(-20)));
        assert!(Storage::F32.holds(0.1));
    }

    #[test]
    fn narrowest_picks_the_smallest_exact_storage() {
        let n = |x: &[f32]| Storage::narrowest([x]);
        assert_eq!(n(&[0.0, 1.0, 255.0]), Storage::U8);
        assert_eq!(n(&[0.0, -1.0, 127.0]), Storage::I8);
        assert_eq!(n(&[0.0, -1.0, 200.0]), Storage::F16);
        assert_eq!(n(&[0.25, 3.5]), Storage::F16);
        assert_eq!(n(&[0.1]), Storage::F32);
        assert_eq!(n(&[]), Storage::U8);
        assert_eq!(
            Storage::narrowest([&[1.0f32][..], &[-3.0][..]]),
            Storage::I8
        );
    }

    #[test]
    fn packed_values_widen_back_bit_for_bit() {
        let x = [0.0f32, 1.0, 7.0, 100.0, 255.0];
        for s in [Storage::U8, Storage::F16, Storage::F32] {
            let b = FeatureBuf::pack(&x, s).unwrap();
            let v = b.view();
            assert_eq!(v.storage(), s);
            assert_eq!(v.len(), 5);
            assert_eq!(v.bytes().len(), 5 * s.bytes());
            let back: Vec<u32> = v.to_f32().iter().map(|f| f.to_bits()).collect();
            let want: Vec<u32> = x.iter().map(|f| f.to_bits()).collect();
            assert_eq!(back, want, "{s:?}");
        }
        assert_eq!(FeatureBuf::pack(&x, Storage::I8), Err(4));
        let h = FeatureBuf::pack(&[-128.0, 127.0, -0.0], Storage::F16).unwrap();
        assert_eq!(h.view().to_f32()[2].to_bits(), (-0.0f32).to_bits());
        assert_eq!(FeatureBuf::pack(&[-0.0], Storage::I8), Err(0));
        let mut buf = Vec::new();
        let u = FeatureBuf::pack(&x[..4], Storage::U8).unwrap();
        assert_eq!(u.view().row(1, 2, &mut buf), &[7.0, 100.0]);
        assert_eq!(u.view().get(3), 100.0);
        assert_eq!("u8".parse::<Storage>(), Ok(Storage::U8));
        assert!("u16".parse::<Storage>().is_err());
    }
}
