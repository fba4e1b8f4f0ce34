// rosenblatt: the batch module by stage, the register pass: `epoch` and dense `scores` (their lane sums are in
// batch_tree.wgsl or batch_subgroup.wgsl).
// Joined after batch.wgsl, which declares what this uses (see its header); the CPU twins
// are in crates/backend/src/reference/batch_register.rs.

// ---- The register pass (`epoch`, dense `scores`) ---------------------------------------

// KT values per thread summed over the TPR threads of each row group by a fixed tree in
// workgroup memory (log2 TPR steps); the sums are valid in lane 0. Called by the whole
// workgroup.
fn lane_sums_tree(p: array<f32, KT_MAX>, lid: u32, lane: u32) -> array<f32, KT_MAX> {
    var out = p;
    if (TPR == 1u) {
        return out;
    }
    for (var kt = 0u; kt < KT; kt++) {
        redk[kt * WG + lid] = p[kt];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var kt = 0u; kt < KT; kt++) {
                redk[kt * WG + lid] += redk[kt * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    for (var kt = 0u; kt < KT; kt++) {
        out[kt] = redk[kt * WG + lid];
    }
    return out;
}

// The thread's statistics of the rows it decides (summed per workgroup by write_wg_stat).
var<private> st_count: u32;
var<private> st_crit: f32;
var<private> st_weighted: f32;
var<private> st_rows: u32; // one-vs-rest training rows whose first highest score is wrong

// One-vs-rest: the first highest of a row's heads, counted into st_rows when it is not the
// row's class t (the prediction rule, as predicted_wrong).
fn ovr_row(top: u32, t: u32, count: bool) {
    if (count && top != t) {
        st_rows += 1u;
    }
}

// The rule's pieces, shared by `decide` (one thread a row, scores in workgroup memory) and
// `decide_regs` (every lane of a row, scores in registers). CPU twin: backend::row_rule.
//
// The coefficient of binary or one-vs-rest head k with score sk, for a row of label yv (class
// t) and row weight wr; a mistake is counted into the thread's statistics when `count`.
fn head_coef(k: u32, sk: f32, yv: f32, t: u32, wr: f32, count: bool) -> f32 {
    var yk = yv;
    if (P.rule == RULE_OVR) {
        yk = select(-1.0, 1.0, k == t);
    }
    let m = yk * sk;
    if (m > P.tau) {
        return 0.0;
    }
    let wk = head_weight(wr, k, t);
    if (count) {
        st_count += 1u;
        st_crit -= m * wk;
        st_weighted += wk;
    }
    return yk * wk;
}

// Multiclass: whether the row (true score minus the first highest wrong one: m) is a mistake,
// counted when `count`.
fn mc_miss(m: f32, wr: f32, count: bool) -> bool {
    let miss = m <= P.tau;
    if (miss && count) {
        st_count += 1u;
        st_crit -= m * wr;
        st_weighted += wr;
    }
    return miss;
}

// Multiclass: head k's coefficient (class t, highest wrong class `best`).
fn mc_coef(k: u32, t: u32, best: u32, miss: bool, wr: f32) -> f32 {
    if (!miss) {
        return 0.0;
    }
    if (k == t) {
        return wr;
    }
    if (P.rule == RULE_MC_ALL || k == best) {
        return -wr;
    }
    return 0.0;
}

// The prediction rule's verdict (held-out rows): sgn(0) = +1; the first highest score.
// CPU twin: backend::predicted_wrong.
fn predicted_wrong(top: u32, s_top: f32, yv: f32) -> bool {
    if (P.rule == RULE_BINARY) {
        return (s_top >= 0.0) != (yv > 0.0);
    }
    return top != u32(max(yv, 0.0));
}

// The rule for the row whose K scores are at sc[o..o + K] (train: turned into coefficients
// in place) and whose label and weight are rowy[yo] and roww[yo]; counts into the thread's
// statistics. One thread per row. CPU twin: backend::row_rule (training),
// backend::predicted_wrong (held-out rows).
fn decide(o: u32, yo: u32, mode: u32) {
    let K = P.heads;
    let yv = rowy[yo];
    let t = u32(max(yv, 0.0));
    if (mode == MODE_HELD) {
        var top = 0u;
        var s_top = 0.0;
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (k == 0u || sk > s_top) {
                top = k;
                s_top = sk;
            }
        }
        if (predicted_wrong(top, s_top, yv)) {
            st_count += 1u;
        }
        return;
    }
    let wr = roww[yo];
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = 0.0;
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (k == 0u || sk > s_top) {
                top = k;
                s_top = sk;
            }
            sc[o + k] = head_coef(k, sk, yv, t, wr, true);
        }
        ovr_row(top, t, P.rule == RULE_OVR);
        return;
    }
    // Multiclass: the true class's score against the first highest wrong one.
    var s_true = 0.0;
    var best = K;
    var s_best = 0.0;
    for (var k = 0u; k < K; k++) {
        let sk = sc[o + k];
        if (k == t) {
            s_true = sk;
        } else if (best == K || sk > s_best) {
            best = k;
            s_best = sk;
        }
    }
    let miss = mc_miss(s_true - s_best, wr, true);
    for (var k = 0u; k < K; k++) {
        sc[o + k] = mc_coef(k, t, best, miss, wr);
    }
}

// The same rule on a row's K <= KT scores held in registers by every lane of the row (the
// register pass with rows in flight): returns the coefficients (train); the statistics are
// counted where `count` (one lane a row). Loops run over KT, a constant, so they unroll.
fn decide_regs(s: array<f32, KT_MAX>, yv: f32, wr: f32, mode: u32, count: bool) -> array<f32, KT_MAX> {
    let K = P.heads;
    let t = u32(max(yv, 0.0));
    var c: array<f32, KT_MAX>;
    if (mode == MODE_HELD) {
        var top = 0u;
        var s_top = s[0];
        for (var k = 1u; k < KT; k++) {
            if (k < K && s[k] > s_top) {
                top = k;
                s_top = s[k];
            }
        }
        if (count && predicted_wrong(top, s_top, yv)) {
            st_count += 1u;
        }
        return c;
    }
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = s[0];
        for (var k = 0u; k < KT; k++) {
            if (k < K) {
                if (s[k] > s_top) {
                    top = k;
                    s_top = s[k];
                }
                c[k] = head_coef(k, s[k], yv, t, wr, count);
            }
        }
        ovr_row(top, t, count && P.rule == RULE_OVR);
        return c;
    }
    var s_true = 0.0;
    var best = K;
    var s_best = 0.0;
    for (var k = 0u; k < KT; k++) {
        if (k < K) {
            if (k == t) {
                s_true = s[k];
            } else if (best == K || s[k] > s_best) {
                best = k;
                s_best = s[k];
            }
        }
    }
    let miss = mc_miss(s_true - s_best, wr, count);
    for (var k = 0u; k < KT; k++) {
        if (k < K) {
            c[k] = mc_coef(k, t, best, miss, wr);
        }
    }
    return c;
}

// The register pass's per-thread state (module scope, so that the row loop with rows in
// flight, `rows_in_flight` in batch_subgroup.wgsl, shares it): the weights of KT heads for
// V units, their accumulators, and the bias weights and sums (lane 0 of a row).
var<private> wv: array<vec4<f32>, KV_MAX>;
var<private> acc: array<vec4<f32>, KV_MAX>;
var<private> wb: array<f32, KT_MAX>;
var<private> accb: array<f32, KT_MAX>;

// The register pass over this workgroup's run of the segment's rows (rows wid * S.chunk_rows
// and on). Thread lid is (row group rg, head block hb, lane): lid = (rg HB + hb) TPR + lane;
// threads past the last whole row group only join the barriers. `sgs` is the subgroup size
// for `lane_sums` (0: the tree). Called by the whole workgroup.
// CPU twin: reference::epoch (MODE_TRAIN, MODE_HELD), reference::scores (MODE_SCORES).
fn pass_rows(lid: u32, wid: u32, mode: u32, sgs: u32) {
    let K = P.heads;
    let hbs = (K + KT - 1u) / KT;
    let per_row = hbs * TPR;
    // Row groups: the largest power of two that fits (plan.rs: rows_per_step).
    let rgs = 1u << firstLeadingBit(WG / per_row);
    let lane = lid % TPR;
    let hb = (lid / TPR) % hbs;
    let rg = lid / per_row;
    let on = rg < rgs;
    let U = P.units;
    let k0 = hb * KT;
    var by_sum = false;
    if (mode == MODE_HELD) {
        by_sum = held_out_by_sum(lid);
    }
    // This thread's weights (head k0 + kt, units lane + v TPR). Row
    // group 0 loads the weights (K (d + 1) words per workgroup); the other row groups take
    // them from it through `redk`, one component of one unit at a time (v == V: the bias).
    let loads = on && rg == 0u;
    for (var kt = 0u; kt < KT; kt++) {
        let k = k0 + kt;
        for (var v = 0u; v < V; v++) {
            let u = lane + v * TPR;
            if (loads && k < K && u < U) {
                wv[kt * V + v] = weights4(k, u, by_sum);
            }
        }
        if (loads && k < K && lane == 0u) {
            wb[kt] = weight(k, P.d, by_sum);
        }
    }
    if (rgs > 1u) {
        for (var v = 0u; v <= V; v++) {
            for (var c = 0u; c < 4u; c++) {
                if (v == V && c > 0u) {
                    break;
                }
                workgroupBarrier();
                if (loads) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var a = wb[kt];
                        if (v < V) {
                            a = wv[kt * V + v][c];
                        }
                        redk[kt * WG + lid] = a;
                    }
                }
                workgroupBarrier();
                if (on && rg > 0u) {
                    for (var kt = 0u; kt < KT; kt++) {
                        let a = redk[kt * WG + lid % per_row];
                        if (v < V) {
                            wv[kt * V + v][c] = a;
                        } else {
                            wb[kt] = a;
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }
    let r0 = wid * S.chunk_rows;
    let r1 = min(r0 + S.chunk_rows, S.n);
    // Rows in flight and the rule on every lane where the shape and the subgroups allow it;
    // rows wider than a subgroup by tiles of rows (three barriers a tile, the rule on one
    // lane a row for the tile's rows at once); else a step of rgs rows at a time, the rule on
    // one lane a row between two barriers.
    if (!rows_in_flight(lid, r0, r1, mode, sgs) && !rows_by_tile(lid, r0, r1, mode, sgs)) {
        rows_by_step(lid, r0, r1, mode, sgs);
    }
    if (mode == MODE_SCORES) {
        return;
    }
    write_wg_stat(lid, wid, mode == MODE_HELD, st_count, st_crit, st_weighted, st_rows);
    if (mode != MODE_TRAIN) {
        return;
    }
    // Row groups after the first add their accumulators into the first's, in order, one
    // component of one unit at a time through `redk` (v == V: the bias sums).
    if (rgs > 1u) {
        for (var v = 0u; v <= V; v++) {
            for (var c = 0u; c < 4u; c++) {
                if (v == V && c > 0u) {
                    break;
                }
                if (on) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var a = accb[kt];
                        if (v < V) {
                            a = acc[kt * V + v][c];
                        }
                        redk[kt * WG + lid] = a;
                    }
                }
                workgroupBarrier();
                if (on && rg == 0u) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var t = redk[kt * WG + lid];
                        for (var g = 1u; g < rgs; g++) {
                            t += redk[kt * WG + lid + g * per_row];
                        }
                        if (v < V) {
                            acc[kt * V + v][c] = t;
                        } else {
                            accb[kt] = t;
                        }
                    }
                }
                workgroupBarrier();
            }
        }
    }
    // The workgroup's one partial: K (d + 1) sums.
    if (on && rg == 0u) {
        let base = (S.chunk_base + wid) * K * P.d_aug;
        for (var kt = 0u; kt < KT; kt++) {
            let k = k0 + kt;
            if (k < K) {
                let hk = base + k * P.d_aug;
                for (var v = 0u; v < V; v++) {
                    let u = lane + v * TPR;
                    for (var c = 0u; c < 4u; c++) {
                        let j = 4u * u + c;
                        if (u < U && j < P.d) {
                            set_partial(hk + j, acc[kt * V + v][c]);
                        }
                    }
                }
                if (lane == 0u) {
                    set_partial(hk + P.d, accb[kt]);
                }
            }
        }
    }
}

// The register pass's row loop, a step of rgs rows at a time: each thread loads its units of
// one row, the row's lanes sum (`lane_sums`), one lane a row applies the rule through
// workgroup memory (`decide`), then every lane adds coefficient x its units. Two barriers a
// step. Called by the whole workgroup (by `pass_rows`, after the weights are in registers).
fn rows_by_step(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) {
    let K = P.heads;
    let hbs = (K + KT - 1u) / KT;
    let per_row = hbs * TPR;
    let rgs = 1u << firstLeadingBit(WG / per_row);
    let lane = lid % TPR;
    let hb = (lid / TPR) % hbs;
    let rg = lid / per_row;
    let on = rg < rgs;
    let U = P.units;
    let k0 = hb * KT;
    let scw = hbs * KT;
    let half_sc = (WG / TPR) * KT;
    var xr: array<vec4<f32>, V_MAX>;
    var step = 0u;
    var y_at = 0xffffffffu;
    var y_word = 0u;
    for (var base = r0; base < r1; base += rgs) {
        let r = base + rg;
        let live = on && r < r1;
        // The row's units into registers; head blocks share them through `xs`.
        if (hbs == 1u) {
            for (var v = 0u; v < V; v++) {
                let u = lane + v * TPR;
                xr[v] = vec4(0.0);
                if (live && u < U) {
                    xr[v] = unit_at(r, u);
                }
            }
        } else {
            // (Every thread has read the previous row's units: scoring has no other barrier
            // between steps when TPR = 1.)
            workgroupBarrier();
            if (on && hb == 0u) {
                for (var v = 0u; v < V; v++) {
                    let u = lane + v * TPR;
                    var q = vec4(0.0);
                    if (live && u < U) {
                        q = unit_at(r, u);
                    }
                    xs[(rg * TPR + lane) * V + v] = q;
                }
            }
            workgroupBarrier();
            if (on) {
                for (var v = 0u; v < V; v++) {
                    xr[v] = xs[(rg * TPR + lane) * V + v];
                }
            }
        }
        // KT partial dot products, summed over the row's lanes together.
        var p: array<f32, KT_MAX>;
        for (var kt = 0u; kt < KT; kt++) {
            var s = 0.0;
            for (var v = 0u; v < V; v++) {
                s += dot(xr[v], wv[kt * V + v]);
            }
            p[kt] = s;
        }
        let sums = lane_sums(p, lid, lane, sgs);
        // Scores, labels and weights of this step go to one of two sets (by parity), so a
        // set is rewritten only after the barriers of the step in between.
        let o = (step & 1u) * half_sc + rg * scw;
        let yo = (step & 1u) * (WG / TPR);
        step++;
        if (live && lane == 0u) {
            for (var kt = 0u; kt < KT; kt++) {
                let k = k0 + kt;
                if (k < K) {
                    let sk = sums[kt] + wb[kt] * P.bias;
                    if (mode == MODE_SCORES) {
                        set_coef(r * K + k, sk);
                    } else {
                        sc[o + k] = sk;
                    }
                }
            }
        }
        // Labels: a word holds four rows' (runs start at multiples of 4). With 4 or more rows
        // a step, every fourth row group loads one word; with fewer, row group 0 loads each
        // word once (kept across steps).
        if (mode != MODE_SCORES && on && lane == 0u && hb == 0u) {
            if (rgs >= 4u) {
                if (rg % 4u == 0u && r < r1) {
                    let q = get_yword(r >> 2u);
                    for (var i = 0u; i < 4u; i++) {
                        rowy[yo + rg + i] = label(q, i);
                    }
                }
            } else if (rg == 0u) {
                if ((base >> 2u) != y_at) {
                    y_at = base >> 2u;
                    y_word = get_yword(y_at);
                }
                for (var i = 0u; i < rgs; i++) {
                    rowy[yo + i] = label(y_word, (base + i) & 3u);
                }
            }
            if (live) {
                var wr = 1.0;
                if (mode == MODE_TRAIN && (P.flags & FLAG_WEIGHTS) != 0u) {
                    wr = get_sw(r);
                }
                roww[yo + rg] = wr;
            }
        }
        if (mode == MODE_SCORES) {
            continue;
        }
        workgroupBarrier();
        if (live && lane == 0u && hb == 0u) {
            decide(o, yo + rg, mode);
        }
        if (mode == MODE_TRAIN) {
            workgroupBarrier();
            if (live) {
                for (var kt = 0u; kt < KT; kt++) {
                    let k = k0 + kt;
                    if (k < K) {
                        let c = sc[o + k];
                        for (var v = 0u; v < V; v++) {
                            acc[kt * V + v] += c * xr[v];
                        }
                        if (lane == 0u) {
                            accb[kt] += c * P.bias;
                        }
                    }
                }
            }
        }
    }
}

// One epoch over this workgroup's run of a dense segment's rows: training rows (the rule,
// one partial and one WgStat per workgroup) or held-out rows (the rows predicted wrong).
// Called by the `epoch` entry point of batch_tree.wgsl / batch_subgroup.wgsl.
// CPU twin: reference::epoch (crates/backend/src/reference/batch_register.rs).
fn epoch_main(lid: u32, wid: u32, sgs: u32) {
    if (stopped(lid)) {
        return;
    }
    pass_rows(lid, wid, select(MODE_TRAIN, MODE_HELD, S.role == ROLE_HELD_OUT), sgs);
}

// Scores w_k . [x_r, bias] into coef (row-major, heads per row), for prediction and the
// training summary: the register pass where it is planned (V > 0, dense rows, one run of rows
// per workgroup), else TPR threads per row striding over the workgroups.
// CPU twin: reference::scores (crates/backend/src/reference/batch_register.rs).
fn scores_main(lid: u32, wid: u32, nwg: u32, sgs: u32) {
    if (V != 0u && SPARSE == 0u) {
        pass_rows(lid, wid, MODE_SCORES, sgs);
        return;
    }
    let groups = WG / TPR;
    for (var base = wid * groups; base < S.n; base += nwg * groups) {
        let r = base + lid / TPR;
        for (var k0 = 0u; k0 < P.heads; k0 += KB) {
            let s = row_scores(lid, r, k0, false, S.n, false);
            if (lid % TPR == 0u && r < S.n) {
                for (var kt = 0u; kt < min(KB, P.heads - k0); kt++) {
                    set_coef(r * P.heads + k0 + kt, s[kt]);
                }
            }
        }
    }
}
