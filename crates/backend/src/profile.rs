//! What the kernels of a batch epoch cost: times and counted words.

use serde::Serialize;

/// What the kernels of a batch epoch cost ([`Bound::profile`](crate::Bound::profile)): their times, and the words
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
    /// The register pass's chain of dependent steps, from its plan (`None` on the other
    /// paths).
    pub chain: Option<Chain>,
}

/// What a workgroup's time is made of when the loads are coalesced and the bytes are right:
/// the register pass's chain of dependent steps, computed from its plan alone (no GPU
/// needed), so that a layout can be judged before a real GPU runs it. Latency hiding wants
/// many bytes in flight per compute unit (Little's law: bandwidth times latency;
/// docs/performance.md, "Figures behind the code's choices"), many bytes of X per barrier,
/// and no lane working while the others of its row wait.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Chain {
    /// Steps of the row loop one workgroup runs one after the other (its largest run).
    pub steps_per_workgroup: usize,
    /// Bytes of X one thread loads before it uses the first of them.
    pub x_bytes_in_flight_per_thread: usize,
    /// The same for a compute unit running [`CHAIN_WORKGROUPS_PER_CU`] workgroups (the
    /// planner's grid on a discrete GPU: 512 workgroups for ~128 compute units).
    pub x_bytes_in_flight_per_cu: usize,
    /// Bytes of X a workgroup reads per workgroup barrier it passes.
    pub x_bytes_per_barrier: usize,
    /// Share of the workgroup's lanes idle while the rows' rule runs.
    pub idle_lanes_in_rule: f64,
    /// Head iterations of the rule one lane runs per row while the row's other lanes wait:
    /// 0 where every lane applies the rule itself.
    pub one_lane_work_per_row: usize,
}

/// Workgroups a compute unit runs at once in [`Chain`]'s figures.
pub const CHAIN_WORKGROUPS_PER_CU: usize = 4;

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
    /// Words of category `cat` loaded over all entry points.
    pub fn loaded(&self, cat: usize) -> u64 {
        self.traffic.iter().map(|t| t.loads[cat]).sum()
    }

    /// Words of category `cat` stored over all entry points.
    pub fn stored(&self, cat: usize) -> u64 {
        self.traffic.iter().map(|t| t.stores[cat]).sum()
    }

    /// Every word loaded and stored in the epoch.
    pub fn total_words(&self) -> u64 {
        self.traffic
            .iter()
            .map(|t| t.loads.iter().sum::<u64>() + t.stores.iter().sum::<u64>())
            .sum()
    }
}
