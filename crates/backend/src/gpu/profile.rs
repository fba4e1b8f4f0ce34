//! What `bench --profile` measures on the GPU: each kernel of the epoch timed with timestamp
//! queries (a pass per dispatch, where the adapter has them), and one epoch run by the
//! instrumented pipelines (`COUNT = 1`) that count the 32-bit words every kernel loads and
//! stores from global memory, by category. The counts are exact and need no timer, so they
//! work on every adapter; they are what tests hold the kernels to (one read of X).

use super::batch::{Entry, Shape};
use super::resident::Resident;
use super::upload::{COUNTER_WORDS, CTL};
use crate::error::Result;
use crate::{BatchRule, KernelProfile, KernelTraffic, TRAFFIC_CATEGORIES};

impl Resident<'_> {
    /// Times up to `epochs` epochs from `w` kernel by kernel (none where the adapter has no
    /// timestamp queries, or X streams), then counts the words of one more epoch from the
    /// weights those reached. The bound data's state moves on by the epochs run; `w` is left
    /// as it was. `None` for one process of a data-parallel run (its epoch is split around
    /// the sums over processes).
    pub fn profile(
        &mut self,
        w: &[f32],
        rule: &BatchRule,
        epochs: usize,
    ) -> Result<Option<KernelProfile>> {
        if self.has_reduce() {
            return Ok(None);
        }
        let (timed, kernels) = self.time_kernels(w, rule, epochs)?;
        let traffic = self.count_traffic(w, rule)?;
        Ok(Some(KernelProfile {
            epochs: timed,
            kernels,
            traffic,
            x_words: self.x_words,
            plan: self.describe_plan(),
            chain: self.chain(),
        }))
    }

    /// Every dispatch in its own compute pass between two timestamps: (epochs timed, each
    /// entry point's milliseconds per epoch). (0, nothing) without timestamp queries.
    fn time_kernels(
        &mut self,
        w: &[f32],
        rule: &BatchRule,
        epochs: usize,
    ) -> Result<(usize, Vec<(String, f64)>)> {
        let ctx = self.ctx;
        if !ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY) || self.streams_by_writes() {
            return Ok((0, Vec::new()));
        }
        let plan = self.epoch_dispatches();
        let pipes: Vec<wgpu::ComputePipeline> = plan
            .iter()
            .map(|&(e, _, _)| self.batch.pipeline(ctx, e, self.plan.shape))
            .collect::<Result<_>>()?;
        // wgpu allows 4096 queries in a set; two per dispatch. The stats ring holds at least
        // one submit's epochs.
        let epochs = epochs
            .min(4096 / (2 * plan.len()))
            .min(self.epochs_per_submit_count())
            .max(1);
        let count = 2 * plan.len() * epochs;
        let ticks_bytes = (count * 8) as u64;
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rosenblatt.profile_resolve"),
            size: ticks_bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = self.staging("rosenblatt.profile_readback", ticks_bytes);
        ctx.scoped("profiling batch epochs", || {
            self.upload_rule_and_weights(w, rule);
            let qs = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rosenblatt.profile"),
                ty: wgpu::QueryType::Timestamp,
                count: count as u32,
            });
            let mut enc = self.encoder();
            let mut q = 0u32;
            for _ in 0..epochs {
                let mut last = None;
                for (&(_, seg, grid), pipe) in plan.iter().zip(&pipes) {
                    // Staged X: the segment's copies go between the timed passes.
                    if let Some(s) = seg.filter(|&s| last != Some(s) && self.is_streamed()) {
                        self.feed(&mut enc, s);
                        last = Some(s);
                    }
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("rosenblatt.profile_pass"),
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &qs,
                            beginning_of_pass_write_index: Some(q),
                            end_of_pass_write_index: Some(q + 1),
                        }),
                    });
                    q += 2;
                    pass.set_bind_group(0, &self.shared.global, &[]);
                    pass.set_bind_group(1, &self.segs[seg.unwrap_or(0)].bind, &[]);
                    pass.set_pipeline(pipe);
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            enc.resolve_query_set(&qs, 0..count as u32, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, ticks_bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let bytes = self.read(&staging)?;
        ctx.check("profiling batch epochs")?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes);
        let period = ctx.queue.get_timestamp_period() as f64;
        let mut kernels: Vec<(String, f64)> = Vec::new();
        for (i, &(entry, _, _)) in plan.iter().enumerate() {
            let mut ns = 0f64;
            for e in 0..epochs {
                let at = 2 * (e * plan.len() + i);
                ns += ticks[at + 1].saturating_sub(ticks[at]) as f64 * period;
            }
            let ms = ns / 1e6 / epochs as f64;
            match kernels.iter_mut().find(|(n, _)| n == entry.name()) {
                Some(k) => k.1 += ms,
                None => kernels.push((entry.name().to_string(), ms)),
            }
        }
        Ok((epochs, kernels))
    }

    /// One epoch from `w` with the instrumented pipelines: the words each entry point loaded
    /// and stored, by category, in dispatch order.
    pub fn count_traffic(&mut self, w: &[f32], rule: &BatchRule) -> Result<Vec<KernelTraffic>> {
        let ctx = self.ctx;
        let shape = Shape {
            count: true,
            ..self.plan.shape
        };
        let plan = self.epoch_dispatches();
        let bytes = (COUNTER_WORDS * 4) as u64;
        let staging = self.staging("rosenblatt.counters_readback", bytes + CTL as u64);
        let mut enc = ctx.scoped("counting the epoch's traffic", || {
            self.upload_rule_and_weights(w, rule);
            ctx.queue.write_buffer(
                &self.shared.counters,
                0,
                bytemuck::cast_slice(&vec![0u32; COUNTER_WORDS]),
            );
            self.encoder()
        })?;
        self.record_with(&mut enc, &plan, 1, shape)?;
        ctx.scoped("counting the epoch's traffic", || {
            enc.copy_buffer_to_buffer(&self.shared.counters, 0, &staging, 0, bytes);
            ctx.queue.submit([enc.finish()]);
        })?;
        let raw = self.read(&staging)?;
        ctx.check("counting the epoch's traffic")?;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&raw[..bytes as usize]);
        let ncat = TRAFFIC_CATEGORIES.len();
        let word = |e: Entry, cat: usize, store: usize| {
            let at = 2 * ((e.code() as usize * ncat + cat) * 2 + store);
            words[at] as u64 | (words[at + 1] as u64) << 32
        };
        let mut out: Vec<KernelTraffic> = Vec::new();
        for &(e, _, _) in &plan {
            if out.iter().any(|t| t.kernel == e.name()) {
                continue;
            }
            out.push(KernelTraffic {
                kernel: e.name().to_string(),
                loads: std::array::from_fn(|c| word(e, c, 0)),
                stores: std::array::from_fn(|c| word(e, c, 1)),
                longest_thread: words[Entry::ALL.len() * ncat * 4 + e.code() as usize] as u64,
            });
        }
        Ok(out)
    }
}
