// rosenblatt: the batch module's entry points for adapters with subgroups (appended to
// batch.wgsl by the host when the device has wgpu::Features::SUBGROUP): the register pass's
// lane sums are butterflies of subgroup shuffles, with no barrier when a row's TPR threads
// fit in one subgroup. Used only where every subgroup of the workgroup is a contiguous,
// aligned run of local_invocation_index of one power-of-two size (checked per workgroup at
// the start; WGSL does not promise it), else the workgroup tree of batch.wgsl.
// CPU twins: reference::epoch and reference::scores (src/backend/reference.rs).

var<workgroup> sg_bad: atomic<u32>;
var<workgroup> sg_size: u32;

// The subgroup size when every invocation's subgroup lane is lid % size for one power-of-two
// size <= WG, else 0 (use the tree); uniform across the workgroup.
fn subgroup_layout(lid: u32, sgl: u32, sgs: u32) -> u32 {
    if (lid == 0u) {
        atomicStore(&sg_bad, 0u);
        sg_size = sgs;
    }
    workgroupBarrier();
    let pow2 = sgs != 0u && (sgs & (sgs - 1u)) == 0u && sgs <= WG;
    if (!pow2 || sgs != sg_size || sgl != lid % sgs) {
        atomicOr(&sg_bad, 1u);
    }
    workgroupBarrier();
    if (lid == 0u) {
        if (atomicLoad(&sg_bad) != 0u) {
            sg_size = 0u;
        }
    }
    return workgroupUniformLoad(&sg_size);
}

// The KT values of each thread summed over the TPR threads of its row group (valid in lane 0):
// a butterfly over TPR lanes when a subgroup holds several rows, else each subgroup's sum
// (subgroupAdd) and then, when a row spans several subgroups, a tree over their sums.
fn lane_sums(p: array<f32, KT_MAX>, lid: u32, lane: u32, sgs: u32) -> array<f32, KT_MAX> {
    if (sgs == 0u) {
        return lane_sums_tree(p, lid, lane);
    }
    var q = p;
    if (TPR < sgs) {
        // Several rows in a subgroup: a butterfly within each row's TPR lanes.
        for (var o = 1u; o < TPR; o <<= 1u) {
            for (var kt = 0u; kt < KT; kt++) {
                q[kt] += subgroupShuffleXor(q[kt], o);
            }
        }
        return q;
    }
    // A row spans whole subgroups: each subgroup's sum, then (TPR > sgs) a fixed tree over
    // the subgroups' sums (a loop of constant trip count, so compilers unroll it; the steps
    // below the subgroup size do nothing).
    for (var kt = 0u; kt < KT; kt++) {
        q[kt] = subgroupAdd(q[kt]);
    }
    if (TPR == sgs) {
        return q;
    }
    for (var kt = 0u; kt < KT; kt++) {
        redk[kt * WG + lid] = q[kt];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (s >= sgs) {
            if (lane < s && lane % sgs == 0u) {
                for (var kt = 0u; kt < KT; kt++) {
                    redk[kt * WG + lid] += redk[kt * WG + lid + s];
                }
            }
            workgroupBarrier();
        }
    }
    for (var kt = 0u; kt < KT; kt++) {
        q[kt] = redk[kt * WG + lid];
    }
    return q;
}

// The register pass's row loop with rows in flight (RT > 0, planned where one head block
// holds a row and a row's TPR lanes fit in one subgroup): each thread loads its units of RT
// consecutive rows (RT = 1, 2 or 4) before it uses the first, the lanes of
// a row sum by a butterfly of shuffles so that every lane holds the row's K scores, and every
// lane applies the rule itself (`decide_regs`) and adds coefficient x its units. No
// workgroup memory and no barrier inside the loop: a workgroup's chain per step is its loads
// and its arithmetic. A row group's label word (four rows) and row weights are loaded once by
// its lane 0 and shuffled to its lanes. The rows in flight are separate variables, not an array indexed by
// a loop over them: NVIDIA's compiler kept such a loop (it holds subgroup operations) and
// put the array in local memory (H200, 4,194,304 x 64 f32: 3.13 ms an epoch with 2 rows a
// thread in an array, 0.56 ms with 1; docs/performance.md). Returns false, having done
// nothing, where the shape or this workgroup's subgroups do not allow it (uniform).
// CPU twin: reference::epoch, reference::scores (the rule: backend::row_rule).
fn rows_in_flight(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) -> bool {
    if (RT == 0u || sgs < TPR || P.heads > KT) {
        return false;
    }
    let lane = lid % TPR;
    let rg = lid / TPR;
    let rgs = WG / TPR;
    // The row's lane 0 in this subgroup (subgroup lanes are lid % sgs: subgroup_layout).
    let lead = lid % sgs - lane;
    // Every lane of a row holds the bias weights (loaded by lane 0 in `pass_rows`).
    var wball: array<f32, KT_MAX>;
    for (var kt = 0u; kt < KT; kt++) {
        wball[kt] = subgroupShuffle(wb[kt], lead);
    }
    let weighted = mode == MODE_TRAIN && (P.flags & FLAG_WEIGHTS) != 0u;
    let labels = mode != MODE_SCORES;
    // A row group takes four consecutive rows (one word of labels, loaded once) in 4 / RT
    // steps of RT rows; the row groups of a workgroup take consecutive fours.
    for (var base = r0; base < r1; base += rgs * 4u) {
        let r4 = base + rg * 4u;
        var yw = 0u;
        if (labels && lane == 0u && r4 < r1) {
            yw = get_yword(r4 >> 2u);
        }
        if (labels) {
            yw = subgroupShuffle(yw, lead);
        }
        for (var h = 0u; h < 4u; h += RT) {
            // Every load of the step first.
            let rb = r4 + h;
            var q0: array<vec4<u32>, V_MAX>;
            var q1: array<vec4<u32>, V_MAX>;
            var q2: array<vec4<u32>, V_MAX>;
            var q3: array<vec4<u32>, V_MAX>;
            load_row(&q0, rb, r1, lane);
            if (RT > 1u) {
                load_row(&q1, rb + 1u, r1, lane);
            }
            if (RT > 2u) {
                load_row(&q2, rb + 2u, r1, lane);
                load_row(&q3, rb + 3u, r1, lane);
            }
            var ws = vec4(1.0);
            if (weighted) {
                if (lane == 0u) {
                    for (var i = 0u; i < RT; i++) {
                        if (rb + i < r1) {
                            ws[i] = get_sw(rb + i);
                        }
                    }
                }
                ws = subgroupShuffle(ws, lead);
            }
            in_flight_row(&q0, rb, r1, lane, yw, ws.x, &wball, mode);
            if (RT > 1u) {
                in_flight_row(&q1, rb + 1u, r1, lane, yw, ws.y, &wball, mode);
            }
            if (RT > 2u) {
                in_flight_row(&q2, rb + 2u, r1, lane, yw, ws.z, &wball, mode);
                in_flight_row(&q3, rb + 3u, r1, lane, yw, ws.w, &wball, mode);
            }
        }
    }
    return true;
}

// This thread's units of row r (zeros past the row and past r1), as loaded.
fn load_row(q: ptr<function, array<vec4<u32>, V_MAX>>, r: u32, r1: u32, lane: u32) {
    for (var v = 0u; v < V; v++) {
        let u = lane + v * TPR;
        var t = vec4(0u);
        if (r < r1 && u < P.units) {
            t = raw_unit(r, u);
        }
        (*q)[v] = t;
    }
}

// One row of `rows_in_flight` on every lane of the row: the scores (a butterfly over the
// row's TPR lanes), then the scores written (MODE_SCORES) or the rule and the update into
// the thread's accumulators. `yw` is the row's word of labels, `wr` its row weight.
fn in_flight_row(q: ptr<function, array<vec4<u32>, V_MAX>>, r: u32, r1: u32, lane: u32, yw: u32, wr: f32, wball: ptr<function, array<f32, KT_MAX>>, mode: u32) {
    let K = P.heads;
    let live = r < r1;
    var xr: array<vec4<f32>, V_MAX>;
    for (var v = 0u; v < V; v++) {
        xr[v] = widen((*q)[v]);
    }
    var s: array<f32, KT_MAX>;
    for (var kt = 0u; kt < KT; kt++) {
        var a = 0.0;
        for (var v = 0u; v < V; v++) {
            a += dot(xr[v], wv[kt * V + v]);
        }
        s[kt] = a;
    }
    for (var o = 1u; o < TPR; o <<= 1u) {
        for (var kt = 0u; kt < KT; kt++) {
            s[kt] += subgroupShuffleXor(s[kt], o);
        }
    }
    for (var kt = 0u; kt < KT; kt++) {
        s[kt] += (*wball)[kt] * P.bias;
    }
    if (mode == MODE_SCORES) {
        if (live && lane == 0u) {
            for (var kt = 0u; kt < KT; kt++) {
                if (kt < K) {
                    set_coef(r * K + kt, s[kt]);
                }
            }
        }
        return;
    }
    let c = decide_regs(s, label(yw, r & 3u), wr, mode, live && lane == 0u);
    if (mode == MODE_TRAIN && live) {
        for (var kt = 0u; kt < KT; kt++) {
            for (var v = 0u; v < V; v++) {
                acc[kt * V + v] += c[kt] * xr[v];
            }
            if (lane == 0u) {
                accb[kt] += c[kt] * P.bias;
            }
        }
    }
}

@compute @workgroup_size(WG)
fn epoch(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) sgl: u32,
    @builtin(subgroup_size) sgs: u32,
) {
    let s = subgroup_layout(lid, sgl, sgs);
    epoch_main(lid, wid.x, s);
    flush(E_EPOCH);
}

@compute @workgroup_size(WG)
fn scores(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) sgl: u32,
    @builtin(subgroup_size) sgs: u32,
) {
    let s = subgroup_layout(lid, sgl, sgs);
    scores_main(lid, wid.x, nwg.x, s);
    flush(E_SCORES);
}
