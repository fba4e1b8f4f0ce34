//! What the kernels of a batch epoch cost: times and counted words.

use serde::Serialize;

/// What the kernels of a batch epoch cost ([`Bound::profile`]): their times, and the words
/// they load and store counted by instrumented kernels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelProfile {
    /// Epochs timed (0 where the device has no timestamp queries, or X streams by host
    /// writes: `kernels` is empty).
    pub epochs: usize,
    /// (entry point, milliseconds per epoch, summed over the X segments), in dispatch order.
    pub kernels: Vec<(String, f64)>,
    /// The words each entry point loaded and stored in one epoch, counted by instrumented
    /// kernels (summed over the X segments), in dispatch order.
    pub traffic: Vec<KernelTraffic>,
    /// 32-bit words of one read of X as the device stores it: the ideal (dense rows are
    /// padded to a multiple of 4 values; none when d is one).
    pub x_words: u64,
    /// How the epoch runs: the register pass (one read of X) or the two-kernel path, with its
    /// layout.
    pub plan: String,
}

/// What one kind of word is in [`KernelTraffic`] (the WGSL `CAT_*` codes, in order).
pub const TRAFFIC_CATEGORIES: [&str; 7] = [
    "X", "index", "rows", "coef", "partials", "weights", "control",
];

/// The words one entry point loaded and stored from global memory in one epoch, by
/// category ([`TRAFFIC_CATEGORIES`]: X values, CSR/CSC indices, labels and row weights,
/// per-row coefficients or scores, partial sums, weights (with the pocket, average and
/// squared steps), control and statistics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelTraffic {
    /// The entry point.
    pub kernel: String,
    /// Words loaded, by category.
    pub loads: [u64; 7],
    /// Words stored, by category.
    pub stores: [u64; 7],
    /// The most words one thread loaded (over the X segments, the largest): the longest
    /// serial walk of the entry point.
    pub longest_thread: u64,
}

impl KernelProfile {
    /// Words loaded (`stores`: false) or stored of category `cat` over all entry points.
    pub fn words(&self, cat: usize, stores: bool) -> u64 {
        self.traffic
            .iter()
            .map(|t| if stores { t.stores[cat] } else { t.loads[cat] })
            .sum()
    }

    /// Every word loaded and stored in the epoch.
    pub fn total_words(&self) -> u64 {
        self.traffic
            .iter()
            .map(|t| t.loads.iter().sum::<u64>() + t.stores.iter().sum::<u64>())
            .sum()
    }
}
