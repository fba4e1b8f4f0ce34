// rosenblatt: the batch module's entry points for adapters with subgroups (appended to
// batch.wgsl by the host when the device has wgpu::Features::SUBGROUP): the register pass's
// lane sums are butterflies of subgroup shuffles, with no barrier when a row's TPR threads
// fit in one subgroup. Used only where every subgroup of the workgroup is a contiguous,
// aligned run of local_invocation_index of one power-of-two size (checked per workgroup at
// the start; WGSL does not promise it), else the workgroup tree of batch.wgsl.
// CPU twins: reference::epoch and reference::scores (crates/backend/src/reference/batch_register.rs).
// subgroup_layout and subgroup_sums: shaders/subgroups.wgsl, appended after this file.

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
// put the array in local memory, where 2 rows a thread in an array ran several times slower
// than 1 (docs/performance.md, "Figures behind the code's choices"). Returns false, having done
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

// The register pass's row loop by tiles (TT > 0, planned where one head block holds a row
// that spans several subgroups, as K = 10 at d = 784 with one unit a thread and 256 threads a
// row): each thread loads its units of the TT rows of its row group's share of a tile (the
// rows are separate variables, as in `rows_in_flight`) before it uses the first; each row's
// KT partial dot products are summed over each subgroup by recursive halving (`tile_partials`:
// a lane ends with one head's sum, P2 - 1 + log2(sgs / P2) shuffles a row where subgroupAdd
// takes KT log2(sgs)) into workgroup memory. Barrier. One thread per (row, head) of the tile
// adds the row's subgroup sums in a fixed order and the bias, and the tile's labels and row
// weights are loaded (one word of labels per four rows). Barrier. One thread a row applies
// the rule (`decide_regs`, the tile's rows at once) and writes the coefficients over the
// scores with a flag for rows that change nothing. Barrier (training). Every lane adds
// coefficient x its units, still in registers, for the rows that change something. Three
// barriers a tile where `rows_by_step` takes two a row, and X is read once. The rule on every
// lane instead (no third barrier) ran slower on a GPU: each lane's copy of the rule
// is a long chain of dependent instructions a row (docs/performance.md, "Tiles of rows"). Workgroup memory: the subgroup sums at the start
// of `redk`, the scores (then coefficients) after them, labels in `red`, row weights in
// `red2`, the flags in `redu`, the bias weights in `sc`. Returns false, having done nothing,
// where the shape or this workgroup's subgroups do not allow it (uniform). CPU twin:
// reference::epoch, reference::scores (the rule: backend::row_rule).
fn rows_by_tile(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) -> bool {
    let K = P.heads;
    if (TT == 0u || sgs == 0u || TPR <= sgs || K > KT || TT * (WG / sgs + WG / TPR) > WG) {
        return false;
    }
    let lane = lid % TPR;
    let rg = lid / TPR;
    let rgs = WG / TPR;
    let nsub = TPR / sgs;
    let sub = lane / sgs;
    let sl = lid % sgs;
    let tile = rgs * TT;
    // The subgroup sums take (rgs TT rows) x (nsub subgroups) x KT words of `redk`, the
    // scores the next tile x KT.
    let scores_at = (WG / sgs) * TT * KT;
    if (lid == 0u) {
        for (var kt = 0u; kt < KT; kt++) {
            sc[kt] = wb[kt];
        }
    }
    let weighted = mode == MODE_TRAIN && (P.flags & FLAG_WEIGHTS) != 0u;
    for (var base = r0; base < r1; base += tile) {
        let rb = base + rg * TT;
        var q0: array<vec4<u32>, V_MAX>;
        var q1: array<vec4<u32>, V_MAX>;
        var q2: array<vec4<u32>, V_MAX>;
        var q3: array<vec4<u32>, V_MAX>;
        var q4: array<vec4<u32>, V_MAX>;
        var q5: array<vec4<u32>, V_MAX>;
        var q6: array<vec4<u32>, V_MAX>;
        var q7: array<vec4<u32>, V_MAX>;
        var q8: array<vec4<u32>, V_MAX>;
        var q9: array<vec4<u32>, V_MAX>;
        var q10: array<vec4<u32>, V_MAX>;
        var q11: array<vec4<u32>, V_MAX>;
        var q12: array<vec4<u32>, V_MAX>;
        var q13: array<vec4<u32>, V_MAX>;
        var q14: array<vec4<u32>, V_MAX>;
        var q15: array<vec4<u32>, V_MAX>;
        load_row(&q0, rb + 0u, r1, lane);
        load_row(&q1, rb + 1u, r1, lane);
        load_row(&q2, rb + 2u, r1, lane);
        load_row(&q3, rb + 3u, r1, lane);
        if (TT > 4u) {
            load_row(&q4, rb + 4u, r1, lane);
            load_row(&q5, rb + 5u, r1, lane);
            load_row(&q6, rb + 6u, r1, lane);
            load_row(&q7, rb + 7u, r1, lane);
        }
        if (TT > 8u) {
            load_row(&q8, rb + 8u, r1, lane);
            load_row(&q9, rb + 9u, r1, lane);
            load_row(&q10, rb + 10u, r1, lane);
            load_row(&q11, rb + 11u, r1, lane);
            load_row(&q12, rb + 12u, r1, lane);
            load_row(&q13, rb + 13u, r1, lane);
            load_row(&q14, rb + 14u, r1, lane);
            load_row(&q15, rb + 15u, r1, lane);
        }
        tile_partials(&q0, (rg * TT + 0u) * nsub + sub, sl, sgs);
        tile_partials(&q1, (rg * TT + 1u) * nsub + sub, sl, sgs);
        tile_partials(&q2, (rg * TT + 2u) * nsub + sub, sl, sgs);
        tile_partials(&q3, (rg * TT + 3u) * nsub + sub, sl, sgs);
        if (TT > 4u) {
            tile_partials(&q4, (rg * TT + 4u) * nsub + sub, sl, sgs);
            tile_partials(&q5, (rg * TT + 5u) * nsub + sub, sl, sgs);
            tile_partials(&q6, (rg * TT + 6u) * nsub + sub, sl, sgs);
            tile_partials(&q7, (rg * TT + 7u) * nsub + sub, sl, sgs);
        }
        if (TT > 8u) {
            tile_partials(&q8, (rg * TT + 8u) * nsub + sub, sl, sgs);
            tile_partials(&q9, (rg * TT + 9u) * nsub + sub, sl, sgs);
            tile_partials(&q10, (rg * TT + 10u) * nsub + sub, sl, sgs);
            tile_partials(&q11, (rg * TT + 11u) * nsub + sub, sl, sgs);
            tile_partials(&q12, (rg * TT + 12u) * nsub + sub, sl, sgs);
            tile_partials(&q13, (rg * TT + 13u) * nsub + sub, sl, sgs);
            tile_partials(&q14, (rg * TT + 14u) * nsub + sub, sl, sgs);
            tile_partials(&q15, (rg * TT + 15u) * nsub + sub, sl, sgs);
        }
        workgroupBarrier();
        // The tile's scores: the subgroups' sums of a row in a fixed order, plus the bias.
        for (var e = lid; e < tile * KT; e += WG) {
            let slot = e / KT;
            let k = e % KT;
            var a = 0.0;
            for (var g = 0u; g < nsub; g++) {
                a += redk[(slot * nsub + g) * KT + k];
            }
            a += sc[k] * P.bias;
            let r = base + slot;
            if (mode == MODE_SCORES) {
                if (r < r1 && k < K) {
                    set_coef(r * K + k, a);
                }
            } else {
                redk[scores_at + e] = a;
            }
        }
        if (mode != MODE_SCORES) {
            // Labels: the tile starts at a multiple of 4 rows and holds whole words.
            for (var e = lid; e < tile / 4u; e += WG) {
                let r = base + 4u * e;
                if (r < r1) {
                    let q = get_yword(r >> 2u);
                    for (var i = 0u; i < 4u; i++) {
                        red[4u * e + i] = label(q, i);
                    }
                }
            }
            if (weighted) {
                for (var e = lid; e < tile; e += WG) {
                    if (base + e < r1) {
                        red2[e] = get_sw(base + e);
                    }
                }
            }
        }
        workgroupBarrier();
        if (mode == MODE_SCORES) {
            continue;
        }
        // The rule, one thread a row of the tile: the coefficients replace the scores, and a
        // flag says whether the row changes anything.
        for (var e = lid; e < tile; e += WG) {
            var s: array<f32, KT_MAX>;
            for (var kt = 0u; kt < KT; kt++) {
                s[kt] = redk[scores_at + e * KT + kt];
            }
            var wr = 1.0;
            if (weighted) {
                wr = red2[e];
            }
            let live = base + e < r1;
            let c = decide_regs(s, red[e], wr, mode, live);
            if (mode == MODE_TRAIN) {
                var any = false;
                for (var kt = 0u; kt < KT; kt++) {
                    redk[scores_at + e * KT + kt] = c[kt];
                    any = any || c[kt] != 0.0;
                }
                redu[e] = select(0u, 1u, live && any);
            }
        }
        if (mode == MODE_TRAIN) {
            workgroupBarrier();
            tile_row(&q0, rg * TT + 0u, scores_at, lane);
            tile_row(&q1, rg * TT + 1u, scores_at, lane);
            tile_row(&q2, rg * TT + 2u, scores_at, lane);
            tile_row(&q3, rg * TT + 3u, scores_at, lane);
            if (TT > 4u) {
                tile_row(&q4, rg * TT + 4u, scores_at, lane);
                tile_row(&q5, rg * TT + 5u, scores_at, lane);
                tile_row(&q6, rg * TT + 6u, scores_at, lane);
                tile_row(&q7, rg * TT + 7u, scores_at, lane);
            }
            if (TT > 8u) {
                tile_row(&q8, rg * TT + 8u, scores_at, lane);
                tile_row(&q9, rg * TT + 9u, scores_at, lane);
                tile_row(&q10, rg * TT + 10u, scores_at, lane);
                tile_row(&q11, rg * TT + 11u, scores_at, lane);
                tile_row(&q12, rg * TT + 12u, scores_at, lane);
                tile_row(&q13, rg * TT + 13u, scores_at, lane);
                tile_row(&q14, rg * TT + 14u, scores_at, lane);
                tile_row(&q15, rg * TT + 15u, scores_at, lane);
            }
        }
    }
    // Every lane has read the last tile's scores, labels and weights before the sums after
    // the loop (write_wg_stat, the row groups' accumulators) reuse that memory.
    workgroupBarrier();
    return true;
}

// The KT partial dot products of this thread's units of one row (loaded as `q`), summed over
// the subgroup into redk[o KT + k] (o: the row's slot and this subgroup) by recursive halving
// (`subgroup_sums`, shaders/subgroups.wgsl).
fn tile_partials(q: ptr<function, array<vec4<u32>, V_MAX>>, o: u32, sl: u32, sgs: u32) {
    var p: array<f32, 16>;
    var xr: array<vec4<f32>, V_MAX>;
    for (var v = 0u; v < V; v++) {
        xr[v] = widen((*q)[v]);
    }
    for (var kt = 0u; kt < KT; kt++) {
        var a = 0.0;
        for (var v = 0u; v < V; v++) {
            a += dot(xr[v], wv[kt * V + v]);
        }
        p[kt] = a;
    }
    let hs = subgroup_sums(&p, KT, sl, sgs);
    if (hs.head == ALL_HEADS) {
        if (hs.lead) {
            for (var kt = 0u; kt < KT; kt++) {
                redk[o * KT + kt] = p[kt];
            }
        }
    } else if (hs.lead) {
        redk[o * KT + hs.head] = hs.sum;
    }
}

// One row of a tile on every lane of its row group, after its coefficients are in workgroup
// memory (from `scores_at` on, at `slot`) and its flag in `redu`: coefficient x this thread's
// units into its accumulators, nothing for a row that changes nothing.
fn tile_row(q: ptr<function, array<vec4<u32>, V_MAX>>, slot: u32, scores_at: u32, lane: u32) {
    if (redu[slot] == 0u) {
        return;
    }
    for (var kt = 0u; kt < KT; kt++) {
        let c = redk[scores_at + slot * KT + kt];
        for (var v = 0u; v < V; v++) {
            acc[kt * V + v] += c * widen((*q)[v]);
        }
        if (lane == 0u) {
            accb[kt] += c * P.bias;
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
