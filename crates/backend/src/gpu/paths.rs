//! The paths the GPU backend can take: every way the planner lays out work on a device (the
//! register pass's four forms, the two-kernel path, CSR rows, split and streamed segments,
//! the data-parallel fold, the stepped online kernels, the kernel perceptron, both parameter
//! spaces), and the counts of dispatches each context ran by path. The tests hold the fast
//! tier to running every one of them at least once (tests/it/coverage.rs).

use std::sync::atomic::{AtomicU64, Ordering};

use super::batch::Shape;
use super::context::ParamsSpace;

/// One path the planner can choose. Each is a distinct kernel, shader variant or host
/// schedule; a dispatch runs on several at once (a form of the epoch, how X reaches it, the
/// parameter blocks' space).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuPath {
    /// The register pass (one read of X), lane sums by a workgroup tree.
    RegisterTree,
    /// The register pass, lane sums by subgroups, rows a step at a time.
    RegisterSubgroupSteps,
    /// The register pass, several rows in flight a thread (`rows_in_flight`).
    RowsInFlight,
    /// The register pass by tiles of rows (`rows_by_tile`).
    TilesOfRows,
    /// Dense rows by two kernels (`margins` then `accumulate`, X read twice).
    TwoKernels,
    /// CSR rows (`margins` then `gather`).
    SparseRows,
    /// Scores of resident rows (`scores`).
    Scoring,
    /// X over several storage bindings (segments), resident.
    SplitSegments,
    /// X streamed through two device slots by host writes before each segment.
    StreamedWrites,
    /// X streamed from host staging filled once, copied into the slots by the queue.
    StreamedStaged,
    /// X streamed from host staging, read in place by the kernels.
    StreamedInPlace,
    /// One process of a data-parallel run: the chunks' partials folded on the device.
    DataParallelFold,
    /// The stepped online kernels by subgroup lanes (dense rows).
    SteppedLanes,
    /// The stepped online kernels by the workgroup's threads (dense rows).
    SteppedThreads,
    /// The stepped online kernels on CSR rows.
    SteppedSparse,
    /// The kernel perceptron's scores (`kscores`).
    KernelPerceptron,
    /// Parameter blocks in uniform buffers.
    ParamsUniform,
    /// Parameter blocks in storage buffers.
    ParamsStorage,
}

impl GpuPath {
    /// Every path, in order.
    pub const ALL: [GpuPath; 18] = [
        GpuPath::RegisterTree,
        GpuPath::RegisterSubgroupSteps,
        GpuPath::RowsInFlight,
        GpuPath::TilesOfRows,
        GpuPath::TwoKernels,
        GpuPath::SparseRows,
        GpuPath::Scoring,
        GpuPath::SplitSegments,
        GpuPath::StreamedWrites,
        GpuPath::StreamedStaged,
        GpuPath::StreamedInPlace,
        GpuPath::DataParallelFold,
        GpuPath::SteppedLanes,
        GpuPath::SteppedThreads,
        GpuPath::SteppedSparse,
        GpuPath::KernelPerceptron,
        GpuPath::ParamsUniform,
        GpuPath::ParamsStorage,
    ];

    /// A short name for reports and test failures.
    pub fn name(self) -> &'static str {
        match self {
            GpuPath::RegisterTree => "register pass, workgroup tree",
            GpuPath::RegisterSubgroupSteps => "register pass, subgroups by steps",
            GpuPath::RowsInFlight => "register pass, rows in flight",
            GpuPath::TilesOfRows => "register pass, tiles of rows",
            GpuPath::TwoKernels => "two kernels",
            GpuPath::SparseRows => "sparse (CSR) rows",
            GpuPath::Scoring => "scoring",
            GpuPath::SplitSegments => "X split over several bindings",
            GpuPath::StreamedWrites => "streamed segments, host writes",
            GpuPath::StreamedStaged => "streamed segments, staged copies",
            GpuPath::StreamedInPlace => "streamed segments, read in place",
            GpuPath::DataParallelFold => "data-parallel fold",
            GpuPath::SteppedLanes => "stepped kernels, subgroup lanes",
            GpuPath::SteppedThreads => "stepped kernels, workgroup threads",
            GpuPath::SteppedSparse => "stepped kernels, sparse rows",
            GpuPath::KernelPerceptron => "kernel perceptron",
            GpuPath::ParamsUniform => "parameter blocks in uniform buffers",
            GpuPath::ParamsStorage => "parameter blocks in storage buffers",
        }
    }

    /// The optional device features the path needs (it is never taken without them).
    pub fn needs(self) -> wgpu::Features {
        match self {
            GpuPath::RegisterSubgroupSteps
            | GpuPath::RowsInFlight
            | GpuPath::TilesOfRows
            | GpuPath::SteppedLanes => wgpu::Features::SUBGROUP,
            GpuPath::StreamedInPlace => wgpu::Features::MAPPABLE_PRIMARY_BUFFERS,
            _ => wgpu::Features::empty(),
        }
    }

    /// The form of the batch epoch a pipeline `shape` runs (the planner's [`Shape`]).
    pub fn of_shape(shape: &Shape) -> GpuPath {
        if shape.v == 0 {
            return if shape.sparse != 0 {
                GpuPath::SparseRows
            } else {
                GpuPath::TwoKernels
            };
        }
        match (shape.subgroups, shape.rt > 0, shape.tt > 0) {
            (false, _, _) => GpuPath::RegisterTree,
            (true, true, _) => GpuPath::RowsInFlight,
            (true, false, true) => GpuPath::TilesOfRows,
            (true, false, false) => GpuPath::RegisterSubgroupSteps,
        }
    }

    /// The path of a parameter space.
    pub fn of_params(space: ParamsSpace) -> GpuPath {
        match space {
            ParamsSpace::Uniform => GpuPath::ParamsUniform,
            ParamsSpace::Storage => GpuPath::ParamsStorage,
        }
    }
}

/// Dispatches recorded by path, for one context.
#[derive(Debug, Default)]
pub(crate) struct PathCounts([AtomicU64; GpuPath::ALL.len()]);

impl PathCounts {
    /// Counts one recording of work on `path`.
    pub(crate) fn add(&self, path: GpuPath) {
        self.0[path as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The paths run so far, with their counts (those never run left out).
    pub(crate) fn snapshot(&self) -> Vec<(GpuPath, u64)> {
        GpuPath::ALL
            .iter()
            .map(|&p| (p, self.0[p as usize].load(Ordering::Relaxed)))
            .filter(|&(_, c)| c > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_batch_form_is_a_shape_the_planner_can_choose() {
        use std::collections::BTreeSet;
        let reachable: BTreeSet<GpuPath> = super::super::plan::reachable_shapes()
            .iter()
            .map(GpuPath::of_shape)
            .collect();
        let forms = [
            GpuPath::RegisterTree,
            GpuPath::RegisterSubgroupSteps,
            GpuPath::RowsInFlight,
            GpuPath::TilesOfRows,
            GpuPath::TwoKernels,
            GpuPath::SparseRows,
        ];
        assert_eq!(reachable, forms.into_iter().collect());
    }

    #[test]
    fn the_list_is_in_the_enum_order() {
        for (i, p) in GpuPath::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i, "{p:?}");
        }
    }
}
