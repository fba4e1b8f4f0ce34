// rosenblatt: the stepped perceptron's dense rows (appended to steps.wgsl by the host, before
// steps_tree.wgsl or steps_subgroup.wgsl): f32 rows, row-major, d a row, in up to four
// bindings of P.part_rows rows, and `steps_by_threads` over them. The averages are kept
// eagerly (every weight added to its sum after every step), so `catch_up` has nothing to do.
// CPU twin: backend::steps::steps on dense rows.

@group(0) @binding(1) var<storage, read> x0: array<f32>;
// X past one storage binding goes on in these (unused ones are bound to x0).
@group(0) @binding(7) var<storage, read> x1: array<f32>;
@group(0) @binding(8) var<storage, read> x2: array<f32>;
@group(0) @binding(9) var<storage, read> x3: array<f32>;

// Value i of X's binding `part`.
fn x_in(part: u32, i: u32) -> f32 {
    switch part {
        case 0u: {
            return x0[i];
        }
        case 1u: {
            return x1[i];
        }
        case 2u: {
            return x2[i];
        }
        default: {
            return x3[i];
        }
    }
}

// Value j of row `row`.
fn xat(row: u32, j: u32) -> f32 {
    let part = row / P.part_rows;
    return x_in(part, (row - part * P.part_rows) * P.d + j);
}

// The steps of stream `s` over positions [lo, hi) of `order` by the workgroup's threads, the
// weights in storage: each (row, head) score of a step a thread's dot product, the rule a
// thread a row, then each column's updates on one thread, rows in order. Returns the steps
// taken.
fn steps_by_threads(lid: u32, s: u32, lo: u32, hi: u32) -> u32 {
    let K = P.heads;
    let d = P.d;
    let da = d + 1u;
    let base = s * K * da;
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
            // first), in one walk over the row.
            let arow = P.update == UPDATE_AROW;
            var acc = 0.0;
            var v = 0.0;
            if (arow) {
                v = sums[wo + d] * P.bias * P.bias;
            }
            for (var j = 0u; j < d; j++) {
                let x = xat(row, j);
                acc += w[wo + j] * x;
                if (arow) {
                    v += sums[wo + j] * x * x;
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
        // The updates, a thread a column, rows in order.
        for (var j = lid; j < da; j += WG) {
            for (var r = 0u; r < b; r++) {
                var xv = P.bias;
                if (j < d) {
                    xv = xat(order[start + r], j);
                }
                for (var k = 0u; k < K; k++) {
                    let c = sc[r * K + k];
                    if (P.update == UPDATE_AROW) {
                        arow_update(base + k * da + j, xv, c, sc[AROW_STEP + r * K + k]);
                    } else if (c != 0.0) {
                        w[base + k * da + j] += (P.eta * c) * xv;
                    }
                }
            }
            if (P.average != 0u) {
                for (var k = 0u; k < K; k++) {
                    sums[base + k * da + j] += w[base + k * da + j];
                }
            }
        }
        storageBarrier();
        workgroupBarrier();
        taken += 1u;
    }
    return taken;
}

// The averages are complete after every step.
fn catch_up(s: u32, i: u32) {
}
