//! A data set made resident on the GPU: X split by rows into segments that each fit one
//! storage binding (dense rows padded to whole units of 4 values), y and a per-row output per
//! segment, and the shared buffers of the batch epoch. Everything is allocated once; an epoch
//! only dispatches. Epochs go 64 to a submit with two submits in flight, each with its own
//! read-back buffer (the per-epoch stats, the control word and w), so the host reads one
//! while the GPU runs the next. How rows become one (plan, layout, buffers) is upload.rs.

use std::collections::VecDeque;

use super::batch::{BatchPipelines, Entry, Shape};
use super::buffers::{read_back, write_dense};
use super::context::GpuContext;
use super::mirror::{
    flags, Control, EpochOut, Params, WgStat, FLAG_HELD_OUT, FLAG_WEIGHTS, STOP_CONVERGED,
    STOP_PATIENCE, STOP_TOLERANCE,
};
use super::paths::GpuPath;
use super::plan::{fold, rows_per_step, Plan};
use super::upload::{
    check_rows, prepare, x_words, Feed, Layout, ResidentOptions, Rows, SegBuf, Shared, Sizes, Slot,
    CTL, IN_FLIGHT,
};
use crate::error::{Error, Result};
use crate::{
    winnow_weights, BatchRule, EpochStats, Epochs, Extras, HeadRule, Pocket, Reduce, StopReason,
    StopState, Storage, Update,
};

/// Submits per call to [`Resident::batch_epochs`] that the host asks for (the caller reports
/// progress between calls).
const SUBMITS_PER_CALL: usize = 4;

/// A submit of training epochs in flight: its read-back buffer and the epochs it covers.
struct InFlight {
    slot: usize,
    first: usize,
    epochs: usize,
    index: wgpu::SubmissionIndex,
    mapped: std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// Data and buffers on the GPU for repeated epochs or scoring.
pub struct Resident<'c> {
    pub(super) ctx: &'c GpuContext,
    pub(super) batch: &'c BatchPipelines,
    /// Streamed X: where each segment comes from into slot (segment % 2) before its kernels
    /// run; `None`: X is resident.
    stream: Option<Feed<'c>>,
    slots: Option<[Slot; 2]>,
    pub(super) d: usize,
    n: usize,
    storage: Storage,
    /// 32-bit words of X as the device stores it (dense rows padded; CSR: the values).
    pub(super) x_words: u64,
    pub(super) plan: Plan,
    pub(super) params: Params,
    pub(super) shared: Shared,
    pub(super) heads: usize,
    /// Read-back buffers of the submits in flight: control, the epochs' stats, w.
    readbacks: [wgpu::Buffer; IN_FLIGHT],
    /// The data's own `Params::flags` bits (weights, held-out rows).
    data_flags: u32,
    kept_pocket: bool,
    kept_average: bool,
    pub(super) segs: Vec<SegBuf>,
    epochs_per_submit: usize,
    submits: usize,
    fail_after_submits: Option<usize>,
    /// In a data-parallel run: the sums across processes (see [`Resident::reduce_with`]), and
    /// the read-back buffer of the partials and counts.
    reduce: Option<&'c dyn Reduce>,
    reduce_staging: Option<wgpu::Buffer>,
    /// A failure after some of a call's epochs had completed: that call returned them, and
    /// the next use of the data returns this.
    failed: Option<Error>,
}

impl<'c> Resident<'c> {
    /// Uploads `rows`: the features and, for training, the labels, weights and held-out rows.
    pub fn new(
        ctx: &'c GpuContext,
        batch: &'c BatchPipelines,
        rows: Rows<'c>,
        heads: usize,
        opts: &ResidentOptions,
    ) -> Result<Self> {
        let heads = heads.max(1);
        check_rows(rows)?;
        let (mut train_vals, mut held_own) = (None, None);
        let prep = prepare(rows, &mut train_vals, &mut held_own)?;
        let layout = Layout::new(ctx, batch, rows, &prep, heads, opts)?;
        let Sizes {
            x,
            held_x,
            n,
            held_n,
            d,
            ..
        } = layout.sizes;
        let what = format!(
            "uploading {n} x {d} ({} bytes) to {}",
            x.bytes(n, d),
            ctx.describe()
        );
        ctx.scoped(&what, || {
            let up = layout.upload(ctx, batch, rows);
            let data_flags = if rows.sw.is_some() { FLAG_WEIGHTS } else { 0 }
                | if rows.held.is_some() {
                    FLAG_HELD_OUT
                } else {
                    0
                };
            Ok(Resident {
                ctx,
                batch,
                stream: up.stream,
                slots: up.slots,
                d,
                n,
                storage: x.storage(),
                x_words: x_words(x, n, d) + held_x.map_or(0, |h| x_words(h, held_n, d)),
                plan: layout.plan.clone(),
                params: layout.params,
                shared: up.shared,
                heads,
                readbacks: up.readbacks,
                data_flags,
                kept_pocket: false,
                kept_average: false,
                segs: up.segs,
                epochs_per_submit: layout.epochs_per_submit,
                submits: 0,
                fail_after_submits: opts.fail_after_submits,
                reduce: None,
                reduce_staging: None,
                failed: None,
            })
        })?
    }

    /// Makes this one process's share of a data-parallel run: every epoch stops after the
    /// segments' kernels and `fold`, which sums the chunks' partials into the first on the
    /// device; those K (d + 1) sums and the workgroups' counts are read back, summed over the
    /// processes by `reduce`, and written back as the only partial and the only workgroup;
    /// `apply` and `finalize` then run unchanged on the totals. One epoch a submit.
    pub fn reduce_with(&mut self, reduce: &'c dyn Reduce) -> Result<()> {
        // The kernel that sums the chunks' partials on the device first.
        self.batch
            .pipeline(self.ctx, Entry::Fold, self.plan.shape)?;
        self.reduce = Some(reduce);
        self.epochs_per_submit = 1;
        Ok(())
    }

    /// Epochs a caller should ask of [`Resident::batch_epochs`] at once: several submits'
    /// worth where submits are pipelined (two in flight), one submit's otherwise.
    pub fn epochs_per_call(&self) -> usize {
        if self.pipelined() {
            SUBMITS_PER_CALL * self.epochs_per_submit
        } else {
            self.epochs_per_submit
        }
    }

    /// Whether training submits overlap (resident or staged X, one process).
    fn pipelined(&self) -> bool {
        !matches!(self.stream, Some(Feed::Writes(_))) && self.reduce.is_none()
    }

    /// Whether this is one process of a data-parallel run.
    pub(super) fn has_reduce(&self) -> bool {
        self.reduce.is_some()
    }

    /// Whether X streams through two device slots.
    pub(super) fn is_streamed(&self) -> bool {
        self.stream.is_some()
    }

    /// Whether X streams by host writes between submits (no kernel timing there).
    pub(super) fn streams_by_writes(&self) -> bool {
        matches!(self.stream, Some(Feed::Writes(_)))
    }

    /// Bytes one epoch moves to the device (0: X is resident).
    pub fn streamed_bytes(&self) -> u64 {
        self.stream.as_ref().map_or(0, |f| f.epoch_bytes())
    }

    /// Brings segment `k` into its slot before its kernels: staged X by copies recorded in
    /// `enc`; written X by submitting what `enc` holds and writing the segment's arrays (the
    /// queue keeps them in order). Resident X: nothing.
    pub(super) fn feed(&self, enc: &mut wgpu::CommandEncoder, k: usize) {
        let (Some(feed), Some(slots)) = (&self.stream, &self.slots) else {
            return;
        };
        match feed {
            Feed::Writes(_) => {
                let done = std::mem::replace(enc, self.encoder());
                self.ctx.queue.submit([done.finish()]);
                self.upload(k);
            }
            Feed::InPlace(_) => {}
            Feed::Mapped(segs) => {
                let (m, slot) = (&segs[k], &slots[k % 2]);
                enc.copy_buffer_to_buffer(&m.x, 0, &slot.x, 0, m.x.size());
                if let Some(b) = &m.csr {
                    enc.copy_buffer_to_buffer(b, 0, &slot.csr, 0, b.size());
                }
                if let Some(b) = &m.csc {
                    enc.copy_buffer_to_buffer(b, 0, &slot.csc, 0, b.size());
                }
            }
        }
    }

    /// Epochs recorded per submit.
    pub(super) fn epochs_per_submit_count(&self) -> usize {
        self.epochs_per_submit
    }

    /// How the epoch runs, for reports: the kernel plan, and how X streams where it does.
    pub fn describe_plan(&self) -> String {
        let plan = self.describe_kernels();
        match &self.stream {
            None => plan,
            Some(Feed::Mapped(_)) => format!(
                "{plan}; X streams from host staging filled once: {:.1} MB copied by the queue \
                 each epoch, {} epoch(s) a submit",
                self.streamed_bytes() as f64 / 1e6,
                self.epochs_per_submit
            ),
            Some(Feed::InPlace(_)) => format!(
                "{plan}; X streams from host staging filled once, read in place by the kernels \
                 over the bus (no copies): {:.1} MB an epoch, {} epoch(s) a submit",
                self.streamed_bytes() as f64 / 1e6,
                self.epochs_per_submit
            ),
            Some(Feed::Writes(_)) => format!(
                "{plan}; X streams by host writes: {:.1} MB written before each segment's \
                 kernels every epoch, one epoch a submit",
                self.streamed_bytes() as f64 / 1e6
            ),
        }
    }

    /// The register pass's chain of dependent steps ([`plan::chain`](super::plan::chain)),
    /// for the largest run of rows of a training segment's workgroup.
    pub(super) fn chain(&self) -> Option<crate::Chain> {
        let run = self
            .segs
            .iter()
            .filter(|g| !g.held_out && g.wgs > 0)
            .map(|g| g.n.div_ceil(g.wgs))
            .max()
            .unwrap_or(0);
        super::plan::chain(&self.plan.shape, self.heads, self.d, self.storage, run)
    }

    /// The kernel plan, for reports.
    fn describe_kernels(&self) -> String {
        let s = &self.plan.shape;
        let wgs: usize = self
            .segs
            .iter()
            .filter(|g| !g.held_out)
            .map(|g| g.wgs)
            .sum();
        if self.plan.register_pass() {
            format!(
                "register pass (one read of X): {} threads per row, {} units of 4 values and \
                 {} heads per thread, {} rows per step{}, {} workgroup(s) over {} segment(s), \
                 lane sums by {}",
                s.tpr,
                s.v,
                s.kt,
                rows_per_step(s, self.heads),
                if s.rt > 0 {
                    format!(" ({} in flight a thread, the rule on every lane)", s.rt)
                } else if s.tt > 0 {
                    format!(
                        " (tiles of {} rows a row group, the rule on every lane, two barriers \
                         a tile)",
                        s.tt
                    )
                } else {
                    String::new()
                },
                wgs,
                self.segs.len(),
                if s.subgroups {
                    "subgroups"
                } else {
                    "a workgroup tree"
                }
            )
        } else if s.sparse != 0 {
            "CSR rows: margins then gather (values read twice)".into()
        } else {
            format!(
                "two kernels (margins then accumulate, X read twice): the K x V registers of \
                 a row exceed the register pass's budget, or on OpenGL (one head per thread) \
                 its K thread groups a workgroup ({} heads, {} features)",
                self.heads, self.d
            )
        }
    }

    pub(super) fn encoder(&self) -> wgpu::CommandEncoder {
        self.ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rosenblatt.batch_epochs"),
            })
    }

    /// Streamed X: writes segment `k`'s arrays into its slot (dense rows padded to units).
    pub(super) fn upload(&self, k: usize) {
        let (Some(Feed::Writes(stream)), Some(slots)) = (&self.stream, &self.slots) else {
            return;
        };
        let (seg, slot) = (&stream[k], &slots[k % 2]);
        let q = &self.ctx.queue;
        match seg.dense_rows {
            Some(rows) => write_dense(q, &slot.x, seg.x, rows, self.d, self.storage),
            None => {
                let len = seg.x.len().next_multiple_of(4);
                if let Some(size) = wgpu::BufferSize::new(len as u64) {
                    if let Some(mut view) = q.write_buffer_with(&slot.x, 0, size) {
                        let mut all = view.slice(..);
                        all.fill(0);
                        view.slice(..seg.x.len()).copy_from_slice(seg.x);
                    }
                }
            }
        }
        if !seg.csr.is_empty() {
            q.write_buffer(&slot.csr, 0, bytemuck::cast_slice(&seg.csr));
        }
        if !seg.csc.is_empty() {
            q.write_buffer(&slot.csc, 0, bytemuck::cast_slice(&seg.csc));
        }
    }

    pub(super) fn staging(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    pub(super) fn read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        read_back(self.ctx, staging)
    }

    /// Runs up to `k` epochs from `w`, stopping on the GPU per `rule`; updates `w` and returns
    /// the stats of the epochs run and the stop. Resident X: submits of `epochs_per_submit`
    /// epochs, two in flight (the GPU has the next while the host reads one back; a submit
    /// queued behind a stop finds `done` set and costs one load per workgroup per dispatch).
    pub fn batch_epochs(&mut self, w: &mut [f32], rule: &BatchRule, k: usize) -> Result<Epochs> {
        let mut out = Epochs::default();
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if k == 0 {
            return Ok(out);
        }
        if !self.pipelined() {
            let mut cur = w.to_vec();
            while out.stats.len() < k {
                let kk = self.epochs_per_submit.min(k - out.stats.len());
                let (stats, stop) = self.submit_sequential(&mut cur, rule, kk)?;
                out.stats.extend(stats);
                if stop.is_some() {
                    out.stop = stop;
                    break;
                }
            }
            w.copy_from_slice(&cur);
            return Ok(out);
        }
        let ctx = self.ctx;
        ctx.scoped("running batch epochs", || {
            self.upload_rule_and_weights(w, rule)
        })?;
        let mut pending: VecDeque<InFlight> = VecDeque::new();
        let mut next = 0;
        let mut last_w: Option<Vec<f32>> = None;
        let mut result = Ok(());
        loop {
            // (The lost-device test hook fires only with nothing in flight, so that the
            // epochs before it are read back, as after a real loss between two submits.)
            while next < k
                && pending.len() < IN_FLIGHT
                && (pending.is_empty() || self.fail_after_submits != Some(self.submits))
            {
                let e = self.epochs_per_submit.min(k - next);
                let slot = (self.submits) % IN_FLIGHT;
                match self.submit(rule, next, e, slot) {
                    Ok(s) => pending.push_back(s),
                    Err(err) => {
                        result = Err(err);
                        break;
                    }
                }
                next += e;
            }
            if result.is_err() {
                break;
            }
            let Some(f) = pending.pop_front() else {
                break;
            };
            match self.finish(f) {
                Ok((stats, stop, wv)) => {
                    out.stats.extend(stats);
                    last_w = Some(wv);
                    if stop.is_some() {
                        out.stop = stop;
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // Submits queued behind a stop or an error ran nothing that matters; wait for them so
        // that their read-back buffers are free.
        for f in pending.drain(..) {
            if self.wait(&f).is_ok() {
                self.readbacks[f.slot].unmap();
            }
        }
        if let Err(e) = result {
            if out.stats.is_empty() {
                return Err(e);
            }
            // The epochs read back stand (the caller keeps them as its checkpoint); the
            // failure is the answer to the next call.
            self.failed = Some(e);
        }
        if let Some(v) = last_w {
            w.copy_from_slice(&v);
        }
        Ok(out)
    }

    /// Records `epochs` epochs (the call's epochs `first`..) and their read-back into
    /// read-back slot `slot`, submits, and starts mapping the read-back.
    fn submit(
        &mut self,
        rule: &BatchRule,
        first: usize,
        epochs: usize,
        slot: usize,
    ) -> Result<InFlight> {
        if self.fail_after_submits == Some(self.submits) {
            self.ctx.device.destroy();
        }
        self.submits += 1;
        let ctx = self.ctx;
        let plan = self.epoch_dispatches();
        let rb = &self.readbacks[slot];
        let index = ctx.scoped("running batch epochs", || {
            let mut enc = self.encoder();
            self.record(&mut enc, &plan, epochs);
            self.copy_results(&mut enc, rule, rb, first, epochs);
            ctx.queue.submit([enc.finish()])
        })?;
        let (tx, rx) = std::sync::mpsc::channel();
        rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        Ok(InFlight {
            slot,
            first,
            epochs,
            index,
            mapped: rx,
        })
    }

    /// Copies the control word, the stats of epochs `first..first + epochs` (stats ring
    /// entries) and the weights (log-weights for Winnow) into `rb`.
    fn copy_results(
        &self,
        enc: &mut wgpu::CommandEncoder,
        rule: &BatchRule,
        rb: &wgpu::Buffer,
        first: usize,
        epochs: usize,
    ) {
        let sh = &self.shared;
        let w_bytes = (self.heads * (self.d + 1) * 4) as u64;
        let one = size_of::<EpochOut>() as u64;
        let at = (first % self.params.ring as usize) as u64 * one;
        let stats_bytes = epochs as u64 * one;
        enc.copy_buffer_to_buffer(&sh.ctl_buf, 0, rb, 0, CTL as u64);
        enc.copy_buffer_to_buffer(&sh.stats_buf, at, rb, CTL as u64, stats_bytes);
        let to = CTL as u64 + stats_bytes;
        if rule.update == Update::Multiplicative {
            enc.copy_buffer_to_buffer(&sh.aux, 3 * w_bytes, rb, to, w_bytes);
        } else {
            enc.copy_buffer_to_buffer(&sh.w_buf, 0, rb, to, w_bytes);
        }
    }

    /// Waits for a submit and its read-back mapping.
    fn wait(&self, f: &InFlight) -> Result<()> {
        self.ctx
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(f.index.clone()),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        f.mapped
            .recv()
            .map_err(|_| Error::Gpu("the GPU never answered the read-back".into()))?
            .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))
    }

    /// Waits for a submit and decodes its read-back: the stats of the epochs it ran, the
    /// stop, and the weights after them.
    fn finish(&self, f: InFlight) -> Result<(Vec<EpochStats>, Option<StopReason>, Vec<f32>)> {
        self.wait(&f)?;
        let rb = &self.readbacks[f.slot];
        let bytes = rb
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading back from the GPU: {e}")))
            .map(|m| m.to_vec());
        rb.unmap();
        let bytes = bytes?;
        self.ctx.check("running batch epochs")?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let run = (ctl.epoch as usize).saturating_sub(f.first).min(f.epochs);
        let stats = self.decode_stats(&bytes[CTL..], run);
        let len = self.heads * (self.d + 1);
        let at = CTL + f.epochs * size_of::<EpochOut>();
        let w: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[at..at + len * 4]);
        Ok((stats, stop_of(&ctl), w))
    }

    fn decode_stats(&self, bytes: &[u8], run: usize) -> Vec<EpochStats> {
        let held = self.data_flags & FLAG_HELD_OUT != 0;
        let weighted = self.data_flags & FLAG_WEIGHTS != 0;
        let ovr = self.params.rule == HeadRule::OneVsRest.code();
        (0..run)
            .map(|e| {
                let at = e * size_of::<EpochOut>();
                let o: EpochOut =
                    bytemuck::pod_read_unaligned(&bytes[at..at + size_of::<EpochOut>()]);
                EpochStats {
                    mistakes: o.mistakes as u64,
                    criterion: o.criterion as f64,
                    update_norm: o.update_norm as f64,
                    val_mistakes: held.then_some(o.held_out as u64),
                    weighted: weighted.then_some(o.weighted as f64),
                    wrong_rows: ovr.then_some(o.rows as u64),
                }
            })
            .collect()
    }

    /// Writes the rule's parameters, the weights (for a multiplicative update: the log-weights
    /// and the Winnow weights) and a fresh per-call control word.
    pub(super) fn upload_rule_and_weights(&mut self, w: &[f32], rule: &BatchRule) {
        let ctx = self.ctx;
        self.kept_pocket |= rule.keep.pocket();
        self.kept_average |= rule.keep.average();
        self.params.eta = rule.eta;
        self.params.tol = rule.tol;
        self.params.tau = rule.tau;
        self.params.rule = rule.rule.code();
        self.params.flags = flags(rule) | self.data_flags;
        self.params.patience = rule.patience.epochs;
        self.params.keep_fraction = rule.patience.keep_fraction;
        self.params.floor = rule.patience.floor;
        let sh = &self.shared;
        ctx.queue
            .write_buffer(&sh.params_buf, 0, bytemuck::bytes_of(&self.params));
        if rule.update == Update::Multiplicative {
            // w holds log-weights: they go to aux[3 len..], the weights used to w_buf.
            let mut beta = vec![0f32; w.len()];
            winnow_weights(w, &mut beta);
            ctx.queue
                .write_buffer(&sh.w_buf, 0, bytemuck::cast_slice(&beta));
            let w_bytes = (w.len() * 4) as u64;
            ctx.queue
                .write_buffer(&sh.aux, 3 * w_bytes, bytemuck::cast_slice(w));
        } else {
            ctx.queue
                .write_buffer(&sh.w_buf, 0, bytemuck::cast_slice(w));
        }
        ctx.queue
            .write_buffer(&sh.ctl_buf, 0, bytemuck::cast_slice(&[0u32, 0u32]));
    }

    /// The dispatches of one epoch, in order: (entry, segment or none, grid).
    pub(super) fn epoch_dispatches(&self) -> Vec<(Entry, Option<usize>, (u32, u32))> {
        let len = self.heads * (self.d + 1);
        let shape = &self.plan.shape;
        let tiles = len.div_ceil(shape.tc as usize) as u32;
        let per_dim = self.ctx.limits.max_compute_workgroups_per_dimension as usize;
        let mut out = Vec::new();
        for (k, seg) in self.segs.iter().enumerate() {
            if self.plan.register_pass() {
                out.push((Entry::Epoch, Some(k), (seg.wgs as u32, 1)));
                continue;
            }
            out.push((Entry::Margins, Some(k), (seg.wgs as u32, 1)));
            if seg.gather {
                let wgs = (self.d + 1).div_ceil((shape.wg / shape.tpc) as usize) + seg.long_cols;
                out.push((Entry::Gather, Some(k), fold(wgs, per_dim)));
            } else if !seg.held_out {
                out.push((Entry::Accumulate, Some(k), (tiles, seg.chunks as u32)));
            }
        }
        out.push((Entry::Apply, None, fold(len.div_ceil(32), per_dim)));
        out.push((Entry::Finalize, None, (1, 1)));
        out
    }

    /// Records `k` epochs of the dispatches `plan` with pipelines of `shape` into `enc`.
    /// Streamed X: before a segment's first kernel, what is recorded goes to the queue and the
    /// segment's rows to its slot (the other slot's segment may still be running); the queue
    /// keeps them in order.
    pub(super) fn record_with(
        &self,
        enc: &mut wgpu::CommandEncoder,
        plan: &[(Entry, Option<usize>, (u32, u32))],
        k: usize,
        shape: Shape,
    ) -> Result<()> {
        let pipes: Vec<wgpu::ComputePipeline> = plan
            .iter()
            .map(|&(e, _, _)| self.batch.pipeline(self.ctx, e, shape))
            .collect::<Result<_>>()?;
        self.count_paths(plan, shape);
        let global = &self.shared.global;
        if self.stream.is_none() {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("rosenblatt.batch_epochs"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, global, &[]);
            if let Some(first) = self.segs.first() {
                // Entries without a segment still need one bound (a plan may start with them).
                pass.set_bind_group(1, &first.bind, &[]);
            }
            for _ in 0..k {
                for (&(_, seg, grid), pipe) in plan.iter().zip(&pipes) {
                    if let Some(s) = seg {
                        pass.set_bind_group(1, &self.segs[s].bind, &[]);
                    }
                    pass.set_pipeline(pipe);
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            return Ok(());
        }
        for _ in 0..k {
            let mut last = None;
            for (&(_, seg, grid), pipe) in plan.iter().zip(&pipes) {
                if let Some(s) = seg.filter(|&s| last != Some(s)) {
                    self.feed(enc, s);
                    last = Some(s);
                }
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rosenblatt.batch_epochs"),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, global, &[]);
                pass.set_bind_group(1, &self.segs[seg.or(last).unwrap_or(0)].bind, &[]);
                pass.set_pipeline(pipe);
                pass.dispatch_workgroups(grid.0, grid.1, 1);
            }
        }
        Ok(())
    }

    /// Counts the paths that recording `plan` with `shape` runs ([`GpuPath`]).
    fn count_paths(&self, plan: &[(Entry, Option<usize>, (u32, u32))], shape: Shape) {
        let ctx = self.ctx;
        if plan.iter().any(|p| p.0 != Entry::Fold) {
            ctx.ran(GpuPath::of_shape(&shape));
        }
        if plan.iter().any(|p| p.0 == Entry::Fold) {
            ctx.ran(GpuPath::DataParallelFold);
        }
        match &self.stream {
            None if self.segs.iter().filter(|g| !g.held_out).count() > 1 => {
                ctx.ran(GpuPath::SplitSegments)
            }
            None => {}
            Some(Feed::Writes(_)) => ctx.ran(GpuPath::StreamedWrites),
            Some(Feed::Mapped(_)) => ctx.ran(GpuPath::StreamedStaged),
            Some(Feed::InPlace(_)) => ctx.ran(GpuPath::StreamedInPlace),
        }
    }

    fn record(
        &self,
        enc: &mut wgpu::CommandEncoder,
        plan: &[(Entry, Option<usize>, (u32, u32))],
        k: usize,
    ) {
        // Every pipeline of the plan was built at bind time: this cannot fail.
        let _ = self.record_with(enc, plan, k, self.plan.shape);
    }

    /// `k` epochs in one submit, waited for (streamed X; or one process of a data-parallel
    /// run, one epoch that stops after the segments' kernels for the sums over processes).
    fn submit_sequential(
        &mut self,
        w: &mut [f32],
        rule: &BatchRule,
        k: usize,
    ) -> Result<(Vec<EpochStats>, Option<StopReason>)> {
        if self.fail_after_submits == Some(self.submits) {
            self.ctx.device.destroy();
        }
        self.submits += 1;
        let ctx = self.ctx;
        let plan = self.epoch_dispatches();
        let (local, global) = match self.reduce {
            Some(_) => plan.split_at(plan.iter().position(|p| p.1.is_none()).unwrap_or(0)),
            None => (&plan[..], &[][..]),
        };
        // A data-parallel epoch sums its chunks on the device before the read-back (the grid
        // of `apply`, the first of the global dispatches).
        let mut local = local.to_vec();
        if let (Some(_), Some(&(Entry::Apply, None, grid))) = (self.reduce, global.first()) {
            local.push((Entry::Fold, None, grid));
        }
        let mut enc = ctx.scoped("running batch epochs", || {
            self.upload_rule_and_weights(w, rule);
            let mut enc = self.encoder();
            self.record(&mut enc, &local, k);
            enc
        })?;
        if let Some(r) = self.reduce {
            self.reduce_epoch(enc, r)?;
            enc = ctx.scoped("running batch epochs", || {
                let mut enc = self.encoder();
                self.record(&mut enc, global, k);
                enc
            })?;
        }
        let rb = &self.readbacks[0];
        ctx.scoped("running batch epochs", || {
            self.copy_results(&mut enc, rule, rb, 0, k);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(rb)?;
        ctx.check("running batch epochs")?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let stats = self.decode_stats(&bytes[CTL..], (ctl.epoch as usize).min(k));
        let len = self.heads * (self.d + 1);
        let at = CTL + k * size_of::<EpochOut>();
        w.copy_from_slice(bytemuck::cast_slice(&bytes[at..at + len * 4]));
        let mut stop = stop_of(&ctl);
        if let Some(r) = self.reduce {
            stop = crate::agreed_stop(r, stop);
        }
        Ok((stats, stop))
    }

    /// The pocket (with its figure and epochs), the average sum (with its epochs) and the
    /// stop rules' memory, as kept by the rules used.
    pub fn extras(&mut self) -> Result<Extras> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let ctx = self.ctx;
        let len = (self.heads * (self.d + 1) * 4) as u64;
        let staging = self.staging("rosenblatt.extras_readback", CTL as u64 + 2 * len);
        ctx.scoped("reading the pocket and average", || {
            let mut enc = self.encoder();
            enc.copy_buffer_to_buffer(&self.shared.ctl_buf, 0, &staging, 0, CTL as u64);
            enc.copy_buffer_to_buffer(&self.shared.aux, len, &staging, CTL as u64, 2 * len);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        let ctl: Control = bytemuck::pod_read_unaligned(&bytes[..CTL]);
        let floats: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[CTL..]);
        let (pocket, avg) = floats.split_at(floats.len() / 2);
        Ok(Extras {
            pocket: (self.kept_pocket && ctl.epochs > 0).then(|| Pocket {
                w: pocket.to_vec(),
                figure: ctl.best,
                updates: ctl.pocket_updates as u64,
            }),
            average: self
                .kept_average
                .then(|| (avg.to_vec(), ctl.updates as u64)),
            stop: StopState {
                best: ctl.best,
                best_epoch: ctl.best_epoch,
                reference: ctl.reference,
                wait: ctl.wait,
                epochs: ctl.epochs,
            },
        })
    }

    /// Scores w_k . [x_i, bias] for every resident row, `heads` per row.
    pub fn scores(&mut self, w: &[f32]) -> Result<Vec<f32>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let ctx = self.ctx;
        let staging = self.staging(
            "rosenblatt.scores_readback",
            (self.n * self.heads * 4) as u64,
        );
        let pipe = self.batch.pipeline(ctx, Entry::Scores, self.plan.shape)?;
        ctx.ran(GpuPath::Scoring);
        ctx.scoped("scoring", || {
            ctx.queue
                .write_buffer(&self.shared.w_buf, 0, bytemuck::cast_slice(w));
            let mut enc = self.encoder();
            for (k, seg) in self.segs.iter().enumerate().filter(|(_, s)| !s.held_out) {
                // Streamed X: this segment's rows into its slot first.
                self.feed(&mut enc, k);
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("rosenblatt.scores"),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, &self.shared.global, &[]);
                pass.set_pipeline(&pipe);
                pass.set_bind_group(1, &seg.bind, &[]);
                pass.dispatch_workgroups(seg.wgs as u32, 1, 1);
            }
            let mut off = 0u64;
            for seg in self.segs.iter().filter(|s| !s.held_out) {
                let len = (seg.n * self.heads * 4) as u64;
                enc.copy_buffer_to_buffer(&seg.coef, 0, &staging, off, len);
                off += len;
            }
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        ctx.check("scoring")?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The middle of a data-parallel epoch (`enc` holds its segment kernels and `fold`):
    /// reads back the first chunk of the partials (the sums `fold` left there, the other
    /// chunks zero) and the workgroups' counts, adds the counts, sums both over the
    /// processes, and writes the totals back as partial 0 and workgroup 0, for `apply` and
    /// `finalize`.
    fn reduce_epoch(&mut self, mut enc: wgpu::CommandEncoder, r: &dyn Reduce) -> Result<()> {
        let ctx = self.ctx;
        let len = self.heads * (self.d + 1);
        let wgs = self.params.total_wgs as usize;
        let (p_bytes, s_bytes) = ((len * 4) as u64, (wgs * size_of::<WgStat>()) as u64);
        let staging = match self.reduce_staging.take() {
            Some(b) => b,
            None => self.staging("rosenblatt.reduce_readback", p_bytes + s_bytes),
        };
        ctx.scoped("running batch epochs", || {
            if p_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.shared.partials, 0, &staging, 0, p_bytes);
            }
            if s_bytes > 0 {
                enc.copy_buffer_to_buffer(&self.shared.wg_stats, 0, &staging, p_bytes, s_bytes);
            }
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        self.reduce_staging = Some(staging);
        ctx.check("running batch epochs")?;
        // (Copied out: a byte vector's start need not be aligned for f32.)
        let mut total: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes[..p_bytes as usize]);
        let mut counts = [0f64; 5];
        for st in bytes[p_bytes as usize..(p_bytes + s_bytes) as usize]
            .chunks_exact(size_of::<WgStat>())
            .map(bytemuck::pod_read_unaligned::<WgStat>)
        {
            counts[0] += st.mistakes as f64;
            counts[1] += st.criterion as f64;
            counts[2] += st.held_out as f64;
            counts[3] += st.weighted as f64;
            counts[4] += st.rows as f64;
        }
        // The same sums, in the same order, as the CPU's bound (a process without rows takes
        // part through that): the update sums, the counts, the held-out mistakes.
        r.sum_f32(&mut total);
        let mut c = [counts[0], counts[1], counts[3], counts[4]];
        r.sum_f64(&mut c);
        (counts[0], counts[1], counts[3], counts[4]) = (c[0], c[1], c[2], c[3]);
        if self.data_flags & FLAG_HELD_OUT != 0 {
            let mut h = [counts[2]];
            r.sum_f64(&mut h);
            counts[2] = h[0];
        }
        let zero = WgStat {
            mistakes: 0,
            criterion: 0.0,
            held_out: 0,
            weighted: 0.0,
            rows: 0,
        };
        let mut stats = vec![zero; wgs.max(1)];
        stats[0] = WgStat {
            mistakes: u32::try_from(counts[0] as u64).unwrap_or(u32::MAX),
            criterion: counts[1] as f32,
            held_out: u32::try_from(counts[2] as u64).unwrap_or(u32::MAX),
            weighted: counts[3] as f32,
            rows: u32::try_from(counts[4] as u64).unwrap_or(u32::MAX),
        };
        ctx.scoped("running batch epochs", || {
            if p_bytes > 0 {
                ctx.queue
                    .write_buffer(&self.shared.partials, 0, bytemuck::cast_slice(&total));
            }
            ctx.queue
                .write_buffer(&self.shared.wg_stats, 0, bytemuck::cast_slice(&stats));
        })
    }
}

/// The stop the control word records.
fn stop_of(ctl: &Control) -> Option<StopReason> {
    match ctl.done {
        STOP_CONVERGED => Some(StopReason::Converged),
        STOP_TOLERANCE => Some(StopReason::Tolerance),
        STOP_PATIENCE => Some(StopReason::Patience),
        _ => None,
    }
}
