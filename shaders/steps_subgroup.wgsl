// rosenblatt: the stepped perceptron's entry point for adapters with subgroups (appended to
// steps.wgsl, with subgroups.wgsl, by the host when the device has wgpu::Features::SUBGROUP).
// Where the host planned it (LANES, U, KH, PART) and the workgroup's subgroups allow it, a
// stream's steps run by lanes: each thread holds its columns (lid + u WG, u < U) of the
// stream's K heads in registers for the whole dispatch, with their sums, and per step
// - loads its columns of up to 16 of the step's rows before it uses the first;
// - sums each row's K partial dot products over its subgroup by recursive halving
//   (`subgroup_sums`) into workgroup memory (`part`);
// - after a barrier, one thread a row adds the subgroups' sums in a fixed order and applies
//   the rule (`decide`), the coefficients into `sc`;
// - after a second barrier, every thread adds coefficient x row to its registers, rows in
//   order, and the weights after the step to their sums.
// Two barriers a step; X read once from memory (twice where a step has more than 16 rows).
// Else by the workgroup's threads (steps.wgsl). CPU twin: backend::steps::steps.

override LANES: u32 = 0u; // 1: the host planned steps by lanes for this pipeline
override U: u32 = 1u;     // columns a thread
override KH: u32 = 1u;    // heads (K), so that the loops over them unroll
override PART: u32 = 1u;  // words of `part`: step rows x subgroups (smallest size) x KH

const U_MAX: u32 = 4u;
const KH_MAX: u32 = 16u;
const WR_MAX: u32 = 64u; // U_MAX x KH_MAX

// Each (row of the step, subgroup)'s K sums.
var<workgroup> part: array<f32, PART>;

// The thread's columns of the stream's weights, [u KH + k], and of their sums.
var<private> wr: array<f32, WR_MAX>;
var<private> sr: array<f32, WR_MAX>;

// The thread's columns of the row at position `at` of `order` (0 past the bias column; all 0
// when not `live`).
fn load_step_row(q: ptr<function, array<f32, U_MAX>>, at: u32, live: bool, lid: u32) {
    for (var u = 0u; u < U; u++) {
        (*q)[u] = 0.0;
    }
    if (!live) {
        return;
    }
    let row = order[at];
    let pt = row / P.part_rows;
    let o = (row - pt * P.part_rows) * P.d;
    for (var u = 0u; u < U; u++) {
        let j = lid + u * WG;
        if (j < P.d) {
            (*q)[u] = x_in(pt, o + j);
        } else if (j == P.d) {
            (*q)[u] = P.bias;
        }
    }
}

// Row `slot` of the step (loaded as `q`): the thread's K partial dot products, summed over its
// subgroup into part[(slot S + subgroup) KH + k], S the workgroup's subgroups.
fn step_partials(q: ptr<function, array<f32, U_MAX>>, slot: u32, live: bool, lid: u32, sgs: u32) {
    if (!live) {
        return;
    }
    var p: array<f32, 16>;
    for (var k = 0u; k < KH; k++) {
        var a = 0.0;
        for (var u = 0u; u < U; u++) {
            a += (*q)[u] * wr[u * KH + k];
        }
        p[k] = a;
    }
    let o = (slot * (WG / sgs) + lid / sgs) * KH;
    let hs = subgroup_sums(&p, KH, lid % sgs, sgs);
    if (hs.head == ALL_HEADS) {
        if (hs.lead) {
            for (var k = 0u; k < KH; k++) {
                part[o + k] = p[k];
            }
        }
    } else if (hs.lead) {
        part[o + hs.head] = hs.sum;
    }
}

// Row `slot` of the step (loaded as `q`), its coefficients in sc[slot KH ..]: coefficient x
// row into the thread's weights.
fn step_update(q: ptr<function, array<f32, U_MAX>>, slot: u32, live: bool) {
    if (!live) {
        return;
    }
    for (var k = 0u; k < KH; k++) {
        let c = sc[slot * KH + k];
        if (c != 0.0) {
            let e = P.eta * c;
            for (var u = 0u; u < U; u++) {
                wr[u * KH + k] += e * (*q)[u];
            }
        }
    }
}

// The steps of stream `s` over positions [lo, hi) of `order` by lanes (above); returns the
// steps taken, or NOT_TAKEN, having done nothing, where the pipeline, the shape or this
// workgroup's subgroups (`sgs` 0) do not allow it (uniform).
fn steps_by_lanes(lid: u32, s: u32, lo: u32, hi: u32, sgs: u32) -> u32 {
    let K = P.heads;
    let da = P.d + 1u;
    if (LANES == 0u || sgs == 0u || P.update == UPDATE_AROW || K != KH || KH > KH_MAX || U > U_MAX || U * WG < da
        || P.step_rows * (WG / sgs) * KH > PART) {
        return NOT_TAKEN;
    }
    let base = s * K * da;
    let avg = P.average != 0u;
    for (var u = 0u; u < U; u++) {
        let j = lid + u * WG;
        for (var k = 0u; k < KH; k++) {
            var v = 0.0;
            var t = 0.0;
            if (j < da) {
                v = w[base + k * da + j];
                if (avg) {
                    t = sums[base + k * da + j];
                }
            }
            wr[u * KH + k] = v;
            sr[u * KH + k] = t;
        }
    }
    let nsg = WG / sgs;
    var taken = 0u;
    for (var start = lo; start < hi; start += P.step_rows) {
        let b = min(P.step_rows, hi - start);
        // The step's rows as separate variables, loaded by the same 16 lines twice where a
        // step has more than 16 rows: as members of one struct passed by pointer, naga 30's
        // SPIR-V writer panicked; as an array indexed by a loop over rows, NVIDIA's compiler
        // put the batch tiles' rows in local memory (batch_subgroup.wgsl).
        var q0: array<f32, U_MAX>;
        var q1: array<f32, U_MAX>;
        var q2: array<f32, U_MAX>;
        var q3: array<f32, U_MAX>;
        var q4: array<f32, U_MAX>;
        var q5: array<f32, U_MAX>;
        var q6: array<f32, U_MAX>;
        var q7: array<f32, U_MAX>;
        var q8: array<f32, U_MAX>;
        var q9: array<f32, U_MAX>;
        var q10: array<f32, U_MAX>;
        var q11: array<f32, U_MAX>;
        var q12: array<f32, U_MAX>;
        var q13: array<f32, U_MAX>;
        var q14: array<f32, U_MAX>;
        var q15: array<f32, U_MAX>;
        // Scores: every load of 16 rows first, then their sums.
        for (var c0 = 0u; c0 < b; c0 += 16u) {
            load_step_row(&q0, start + c0 + 0u, c0 + 0u < b, lid);
            load_step_row(&q1, start + c0 + 1u, c0 + 1u < b, lid);
            load_step_row(&q2, start + c0 + 2u, c0 + 2u < b, lid);
            load_step_row(&q3, start + c0 + 3u, c0 + 3u < b, lid);
            load_step_row(&q4, start + c0 + 4u, c0 + 4u < b, lid);
            load_step_row(&q5, start + c0 + 5u, c0 + 5u < b, lid);
            load_step_row(&q6, start + c0 + 6u, c0 + 6u < b, lid);
            load_step_row(&q7, start + c0 + 7u, c0 + 7u < b, lid);
            load_step_row(&q8, start + c0 + 8u, c0 + 8u < b, lid);
            load_step_row(&q9, start + c0 + 9u, c0 + 9u < b, lid);
            load_step_row(&q10, start + c0 + 10u, c0 + 10u < b, lid);
            load_step_row(&q11, start + c0 + 11u, c0 + 11u < b, lid);
            load_step_row(&q12, start + c0 + 12u, c0 + 12u < b, lid);
            load_step_row(&q13, start + c0 + 13u, c0 + 13u < b, lid);
            load_step_row(&q14, start + c0 + 14u, c0 + 14u < b, lid);
            load_step_row(&q15, start + c0 + 15u, c0 + 15u < b, lid);
            step_partials(&q0, c0 + 0u, c0 + 0u < b, lid, sgs);
            step_partials(&q1, c0 + 1u, c0 + 1u < b, lid, sgs);
            step_partials(&q2, c0 + 2u, c0 + 2u < b, lid, sgs);
            step_partials(&q3, c0 + 3u, c0 + 3u < b, lid, sgs);
            step_partials(&q4, c0 + 4u, c0 + 4u < b, lid, sgs);
            step_partials(&q5, c0 + 5u, c0 + 5u < b, lid, sgs);
            step_partials(&q6, c0 + 6u, c0 + 6u < b, lid, sgs);
            step_partials(&q7, c0 + 7u, c0 + 7u < b, lid, sgs);
            step_partials(&q8, c0 + 8u, c0 + 8u < b, lid, sgs);
            step_partials(&q9, c0 + 9u, c0 + 9u < b, lid, sgs);
            step_partials(&q10, c0 + 10u, c0 + 10u < b, lid, sgs);
            step_partials(&q11, c0 + 11u, c0 + 11u < b, lid, sgs);
            step_partials(&q12, c0 + 12u, c0 + 12u < b, lid, sgs);
            step_partials(&q13, c0 + 13u, c0 + 13u < b, lid, sgs);
            step_partials(&q14, c0 + 14u, c0 + 14u < b, lid, sgs);
            step_partials(&q15, c0 + 15u, c0 + 15u < b, lid, sgs);
        }
        workgroupBarrier();
        // The rule, a thread a row: the subgroups' sums in order, then `decide`.
        for (var r = lid; r < b; r += WG) {
            for (var k = 0u; k < KH; k++) {
                var a = 0.0;
                for (var g = 0u; g < nsg; g++) {
                    a += part[(r * nsg + g) * KH + k];
                }
                sc[r * KH + k] = a;
            }
            decide(r * KH, order[start + r]);
        }
        workgroupBarrier();
        // The updates, rows in order; a step of more than 16 rows loads them again.
        for (var c0 = 0u; c0 < b; c0 += 16u) {
            if (b > 16u) {
                load_step_row(&q0, start + c0 + 0u, c0 + 0u < b, lid);
                load_step_row(&q1, start + c0 + 1u, c0 + 1u < b, lid);
                load_step_row(&q2, start + c0 + 2u, c0 + 2u < b, lid);
                load_step_row(&q3, start + c0 + 3u, c0 + 3u < b, lid);
                load_step_row(&q4, start + c0 + 4u, c0 + 4u < b, lid);
                load_step_row(&q5, start + c0 + 5u, c0 + 5u < b, lid);
                load_step_row(&q6, start + c0 + 6u, c0 + 6u < b, lid);
                load_step_row(&q7, start + c0 + 7u, c0 + 7u < b, lid);
                load_step_row(&q8, start + c0 + 8u, c0 + 8u < b, lid);
                load_step_row(&q9, start + c0 + 9u, c0 + 9u < b, lid);
                load_step_row(&q10, start + c0 + 10u, c0 + 10u < b, lid);
                load_step_row(&q11, start + c0 + 11u, c0 + 11u < b, lid);
                load_step_row(&q12, start + c0 + 12u, c0 + 12u < b, lid);
                load_step_row(&q13, start + c0 + 13u, c0 + 13u < b, lid);
                load_step_row(&q14, start + c0 + 14u, c0 + 14u < b, lid);
                load_step_row(&q15, start + c0 + 15u, c0 + 15u < b, lid);
            }
            step_update(&q0, c0 + 0u, c0 + 0u < b);
            step_update(&q1, c0 + 1u, c0 + 1u < b);
            step_update(&q2, c0 + 2u, c0 + 2u < b);
            step_update(&q3, c0 + 3u, c0 + 3u < b);
            step_update(&q4, c0 + 4u, c0 + 4u < b);
            step_update(&q5, c0 + 5u, c0 + 5u < b);
            step_update(&q6, c0 + 6u, c0 + 6u < b);
            step_update(&q7, c0 + 7u, c0 + 7u < b);
            step_update(&q8, c0 + 8u, c0 + 8u < b);
            step_update(&q9, c0 + 9u, c0 + 9u < b);
            step_update(&q10, c0 + 10u, c0 + 10u < b);
            step_update(&q11, c0 + 11u, c0 + 11u < b);
            step_update(&q12, c0 + 12u, c0 + 12u < b);
            step_update(&q13, c0 + 13u, c0 + 13u < b);
            step_update(&q14, c0 + 14u, c0 + 14u < b);
            step_update(&q15, c0 + 15u, c0 + 15u < b);
        }
        if (avg) {
            for (var i = 0u; i < U * KH; i++) {
                sr[i] += wr[i];
            }
        }
        taken += 1u;
    }
    for (var u = 0u; u < U; u++) {
        let j = lid + u * WG;
        if (j < da) {
            for (var k = 0u; k < KH; k++) {
                w[base + k * da + j] = wr[u * KH + k];
                if (avg) {
                    sums[base + k * da + j] = sr[u * KH + k];
                }
            }
        }
    }
    return taken;
}

@compute @workgroup_size(WG)
fn steps(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) sgl: u32,
    @builtin(subgroup_size) sgs: u32,
) {
    var lanes = 0u;
    if (LANES != 0u) {
        lanes = subgroup_layout(lid, sgl, sgs);
    }
    steps_main(lid, wid.x, lanes);
}
