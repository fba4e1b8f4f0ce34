// rosenblatt: the stepped perceptron's sparse rows (appended to steps.wgsl by the host, with
// steps_tree.wgsl): compressed sparse rows (values, their columns strictly ascending within a
// row, the n + 1 row starts from 0), and `steps_by_threads` over them. A step's scores are a
// thread's sums over the row's non-zeros in column order; the updates go row by row, in
// order, the row's non-zeros (and the bias column) shared out among the threads, a barrier
// after each row, so each weight takes its updates in the sequential rule's order. With
// averaging the sums are kept lazily: `last` holds the step through which a weight's sum is
// complete, a weight catches up (sum += weight x the steps since) just before it changes,
// and `mix` brings every weight up to the stream's step count before mixing (`catch_up`).
// CPU twins: backend::steps::steps on sparse rows and backend::steps::catch_up.

@group(0) @binding(1) var<storage, read> xv: array<f32>;  // values
@group(0) @binding(7) var<storage, read> xj: array<u32>;  // their columns
@group(0) @binding(8) var<storage, read> xp: array<u32>;  // row starts, n + 1
@group(0) @binding(9) var<storage, read_write> last: array<u32>; // streams x K (d + 1)

// Weight `at`'s sum brought up to step `t` (through which it is complete), before the weight
// changes.
fn lazy_sum(at: u32, t: u32) {
    let lag = t - last[at];
    if (lag > 0u) {
        sums[at] += w[at] * f32(lag);
        last[at] = t;
    }
}

// Stream s's weight i (of K (d + 1)) up to the stream's steps: `mix` calls it first.
fn catch_up(s: u32, i: u32) {
    if (P.average != 0u) {
        lazy_sum(s * P.heads * (P.d + 1u) + i, stat[s].steps);
    }
}

// The steps of stream `s` over positions [lo, hi) of `order` by the workgroup's threads (see
// the top of this file). Returns the steps taken.
fn steps_by_threads(lid: u32, s: u32, lo: u32, hi: u32) -> u32 {
    let K = P.heads;
    let d = P.d;
    let da = d + 1u;
    let base = s * K * da;
    let t0 = stat[s].steps;
    var taken = 0u;
    for (var start = lo; start < hi; start += P.step_rows) {
        let b = min(P.step_rows, hi - start);
        // The step's scores by the weights it started with.
        for (var p = lid; p < b * K; p += WG) {
            let r = p / K;
            let k = p % K;
            let row = order[start + r];
            let wo = base + k * da;
            // The score and, for AROW, the row's confidence x^T Sigma x (the bias column
            // first), in one walk over the row (docs/performance.md says why one).
            let arow = P.update == UPDATE_AROW;
            var acc = 0.0;
            var v = 0.0;
            if (arow) {
                v = sums[wo + d] * P.bias * P.bias;
            }
            for (var q = xp[row]; q < xp[row + 1u]; q++) {
                let j = wo + xj[q];
                let x = xv[q];
                acc += w[j] * x;
                if (arow) {
                    v += sums[j] * x * x;
                }
            }
            sc[p] = acc + w[wo + d] * P.bias;
            if (arow) {
                sc[AROW_STEP + p] = v;
            }
        }
        workgroupBarrier();
        for (var r = lid; r < b; r += WG) {
            decide(r * K, order[start + r]);
        }
        workgroupBarrier();
        // The updates, row by row; position q1 of a row stands for its bias column.
        let t = t0 + taken;
        for (var r = 0u; r < b; r++) {
            let row = order[start + r];
            let q1 = xp[row + 1u];
            for (var q = xp[row] + lid; q <= q1; q += WG) {
                var j = d;
                var xq = P.bias;
                if (q < q1) {
                    j = xj[q];
                    xq = xv[q];
                }
                for (var k = 0u; k < K; k++) {
                    let c = sc[r * K + k];
                    if (P.update == UPDATE_AROW) {
                        arow_update(base + k * da + j, xq, c, sc[AROW_STEP + r * K + k]);
                    } else if (c != 0.0) {
                        let at = base + k * da + j;
                        if (P.average != 0u) {
                            lazy_sum(at, t);
                        }
                        w[at] += (P.eta * c) * xq;
                    }
                }
            }
            storageBarrier();
            workgroupBarrier();
        }
        taken += 1u;
    }
    return taken;
}
