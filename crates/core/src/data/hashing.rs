//! Feature hashing: raw string features (tokens, `field=value` categoricals) mapped into 2^b
//! columns, as Vowpal Wabbit does, so text and categorical data need no vocabulary.
//!
//! A feature `name` in namespace `ns` (with value v, and the namespace's value u) lands in
//! column `h & (2^b - 1)` with value `s * u * v`, where
//! - `h = murmur3_32(name, seed)` with `seed = murmur3_32(ns, 0)` (0 for the default, unnamed
//!   namespace), or `name + seed` (wrapping) when `name` is a decimal integer below 2^32, as
//!   Vowpal Wabbit indexes numbered features;
//! - `s` is +1 or -1 from one bit of a second mix of `h` (signed hashing, [`HashSign`]): two
//!   features that collide cancel on average instead of adding a bias (scikit-learn's
//!   `HashingVectorizer(alternate_sign=True)`); +1 always with [`HashSign::Unsigned`].
//! - A quadratic interaction `ab` (Vowpal Wabbit's `-q ab`) adds, for every feature of a
//!   namespace whose name starts with `a` and every feature of one starting with `b`, the
//!   feature `h = h_a * 16777619 ^ h_b` (Vowpal Wabbit's FNV-style combination) with value
//!   `v_a * v_b` (for `aa`, each unordered pair of distinct features once).
//!
//! Features of a row that land in the same column are added. The scheme is recorded in the
//! model file, so `predict` on raw input makes the same columns. `murmur3_32` is
//! MurmurHash3's x86 32-bit form, the one scikit-learn's `murmurhash3_32` and Vowpal Wabbit
//! use (checked against published values in the tests).

use serde::{Deserialize, Serialize};

/// Most hash bits: 2^28 columns (a gigabyte of f32 weights for each weight vector).
pub const MAX_HASH_BITS: u32 = 28;

/// Vowpal Wabbit's default number of bits (`-b 18`), taken when none is given.
pub const DEFAULT_HASH_BITS: u32 = 18;

/// Whether hashed features carry a sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HashSign {
    /// Each feature's value times +1 or -1 from its hash (collisions cancel on average).
    #[default]
    Signed,
    /// Values as given (Vowpal Wabbit's own scheme).
    Unsigned,
}

impl HashSign {
    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            HashSign::Signed => "signed",
            HashSign::Unsigned => "unsigned",
        }
    }
}

impl std::fmt::Display for HashSign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for HashSign {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "signed" => Ok(HashSign::Signed),
            "unsigned" => Ok(HashSign::Unsigned),
            _ => Err(format!(
                "unknown hash sign {s:?} (expected signed or unsigned)"
            )),
        }
    }
}

/// How raw features become columns: kept in the model file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hashing {
    /// Columns are 2^bits (1 to 28).
    pub bits: u32,
    /// Signed or unsigned values.
    #[serde(default)]
    pub sign: HashSign,
    /// Quadratic interactions: pairs of namespace initials ("ab").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quadratic: Vec<String>,
    /// CSV input: the columns hashed as categories, each named by its header's name or its
    /// 0-based index. With any, the CSV's rows are hashed whole, as the Vowpal Wabbit line
    /// `| c=v ... name:x ...` would be: a categorical column `c` holding `v` is the feature
    /// `c=v` with value 1, every other feature column `name` the feature `name` with its
    /// number (a column's name is its header's, or its position among the feature columns
    /// where the file has none); an empty field is a missing feature.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categorical: Vec<String>,
    /// CSV input with categorical columns: the training file's feature columns, by name (its
    /// header's, or their positions where it had none), recorded by the loader. A later file
    /// must have these columns (by name, any case and order, and no other feature column), and
    /// one with exactly these many columns is read as unlabelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv_columns: Option<Vec<String>>,
}

impl Default for Hashing {
    fn default() -> Self {
        Hashing {
            bits: DEFAULT_HASH_BITS,
            sign: HashSign::Signed,
            quadratic: Vec::new(),
            categorical: Vec::new(),
            csv_columns: None,
        }
    }
}

impl Hashing {
    /// Checks the bits, the interactions (each two characters, and none for CSV input, whose
    /// columns are in no namespace) and the categorical columns' names (not empty).
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(1..=MAX_HASH_BITS).contains(&self.bits) {
            return Err(format!(
                "hash bits must be in [1, {MAX_HASH_BITS}], but is {}",
                self.bits
            ));
        }
        for q in &self.quadratic {
            if q.chars().count() != 2 {
                return Err(format!(
                    "a quadratic interaction names two namespaces by their first characters \
                     (such as \"ab\"), but is {q:?}"
                ));
            }
        }
        if !self.categorical.is_empty() && !self.quadratic.is_empty() {
            return Err(
                "quadratic interactions pair Vowpal Wabbit namespaces, and a CSV file's \
                 columns (hashed with categorical columns) are in none"
                    .into(),
            );
        }
        if self.categorical.iter().any(|c| c.trim().is_empty()) {
            return Err("a categorical column's name is empty".into());
        }
        if let Some(cols) = &self.csv_columns {
            if cols.is_empty() {
                return Err("a hashed CSV file had no feature columns".into());
            }
            let mut seen = std::collections::HashSet::new();
            if let Some(c) = cols.iter().find(|c| !seen.insert(c.to_lowercase())) {
                return Err(format!("the CSV column {c:?} is named twice"));
            }
        }
        Ok(())
    }

    /// Whether CSV input is hashed (some column is categorical).
    pub fn hashes_csv(&self) -> bool {
        !self.categorical.is_empty()
    }

    /// Whether `other` hashes raw features into the same columns (what a loader records
    /// about the training file, such as [`Hashing::csv_columns`], aside).
    pub fn same_scheme(&self, other: &Hashing) -> bool {
        (self.bits, self.sign, &self.quadratic, &self.categorical)
            == (other.bits, other.sign, &other.quadratic, &other.categorical)
    }

    /// Columns: 2^bits.
    pub fn columns(&self) -> usize {
        1usize << self.bits
    }

    /// The seed of namespace `ns` (0 for the default namespace, written as nothing).
    pub fn namespace_seed(ns: &[u8]) -> u32 {
        if ns.is_empty() {
            0
        } else {
            murmur3_32(ns, 0)
        }
    }

    /// The hash of feature `name` in a namespace with seed `seed`.
    pub fn feature_hash(name: &[u8], seed: u32) -> u32 {
        match decimal(name) {
            Some(i) => i.wrapping_add(seed),
            None => murmur3_32(name, seed),
        }
    }

    /// The hash of the interaction of two features' hashes.
    pub fn pair_hash(a: u32, b: u32) -> u32 {
        a.wrapping_mul(16_777_619) ^ b
    }

    /// The column and sign of hash `h`.
    pub fn place(&self, h: u32) -> (u32, f32) {
        let col = h & ((1u32 << self.bits) - 1);
        let sign = match self.sign {
            HashSign::Unsigned => 1.0,
            HashSign::Signed if fmix32(h ^ 0x9e37_79b9) >> 31 == 1 => -1.0,
            HashSign::Signed => 1.0,
        };
        (col, sign)
    }
}

/// A decimal integer below 2^32 with no sign or other characters (Vowpal Wabbit indexes such
/// feature names by their value).
fn decimal(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// MurmurHash3's finaliser: every bit of the input affects every bit of the output.
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// MurmurHash3 (x86, 32-bit) of `key` with `seed`, as Austin Appleby wrote it.
pub fn murmur3_32(key: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = key.chunks_exact(4);
    for b in &mut blocks {
        let mut k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= (b as u32) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    fmix32(h ^ key.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_gives_the_published_values() {
        // Reference values of MurmurHash3_x86_32 (Appleby's SMHasher; scikit-learn's
        // murmurhash3_32(key, seed, positive=True) gives the same).
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"hello", 0), 0x248b_fa47);
        assert_eq!(murmur3_32(b"Hello, world!", 1234), 0xfaf6_cdb3);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0),
            0x2e4f_f723
        );
        assert_eq!(murmur3_32(b"aaaa", 0x9747_b28c), 0x5a97_808a);
        assert_eq!(murmur3_32(b"abc", 0), 0xb3dd_93fa);
    }

    #[test]
    fn features_land_in_range_with_a_sign_from_their_hash() {
        let h = Hashing {
            bits: 4,
            ..Hashing::default()
        };
        let mut signs = [0usize; 2];
        for i in 0..1000u32 {
            let name = format!("tok{i}");
            let (col, s) = h.place(Hashing::feature_hash(name.as_bytes(), 0));
            assert!(col < 16);
            signs[(s > 0.0) as usize] += 1;
        }
        // Both signs, about half each.
        assert!(signs[0] > 400 && signs[1] > 400, "{signs:?}");
        let u = Hashing {
            sign: HashSign::Unsigned,
            ..h.clone()
        };
        assert_eq!(u.place(12345).1, 1.0);
        // Numbered features: their value plus the namespace's seed.
        assert_eq!(Hashing::feature_hash(b"42", 0), 42);
        assert_eq!(Hashing::feature_hash(b"42", 7), 49);
        assert_eq!(Hashing::feature_hash(b"-42", 0), murmur3_32(b"-42", 0));
        assert_eq!(
            Hashing::feature_hash(b"99999999999", 0),
            murmur3_32(b"99999999999", 0)
        );
        assert!(Hashing {
            bits: 0,
            ..h.clone()
        }
        .check()
        .is_err());
        assert!(Hashing {
            bits: 29,
            ..h.clone()
        }
        .check()
        .is_err());
        let q = Hashing {
            quadratic: vec!["abc".into()],
            ..h
        };
        assert!(q.check().unwrap_err().contains("\"abc\""));
    }
}
