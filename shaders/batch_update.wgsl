// rosenblatt: the batch module by stage, the update and the stop: `apply`, `fold` and `finalize`.
// Joined after batch.wgsl, which declares what this uses (see its header); the CPU twins
// are in crates/backend/src/reference/batch_update.rs.

// ---- The update and the stop -----------------------------------------------------------

// The update of weight j from its epoch sum s: w += eta * s (multiplicative: the
// log-weights); keeps the pocket's candidate (what the epoch started with: the weights, the
// log-weights, or the running sum when averaging with a pocket) and the running sum after the
// update; returns the squared step. `updates` is ctl.updates.
fn update(j: u32, s: f32, updates: u32) -> f32 {
    let len = P.heads * P.d_aug;
    let mult = (P.flags & FLAG_MULTIPLICATIVE) != 0u;
    if ((P.flags & FLAG_POCKET) != 0u) {
        let both = FLAG_POCKET | FLAG_AVERAGE;
        var prev = 0.0;
        if ((P.flags & both) == both && updates > 0u) {
            prev = get_aux(2u * len + j);
        } else if (mult) {
            prev = get_aux(3u * len + j);
        } else {
            prev = get_w(j);
        }
        set_aux(j, prev);
    }
    let step = P.eta * s;
    var wj = 0.0;
    if (mult) {
        set_aux(3u * len + j, get_aux(3u * len + j) + step);
    } else {
        wj = get_w(j) + step;
        set_w(j, wj);
    }
    if ((P.flags & FLAG_AVERAGE) != 0u) {
        if (mult) {
            wj = get_w(j);
        }
        set_aux(2u * len + j, get_aux(2u * len + j) + wj);
    }
    return step * step;
}

// AJ consecutive weights per workgroup, WG / AJ lanes over the partials: lane l sums partials
// l, l + WG / AJ, ... in order, then the lanes are added in a fixed tree, and `update`. Reads
// are coalesced (a lane's AJ threads read consecutive words of one partial); the result is
// deterministic and exact on integer data. Grid folded over y past 65,535.
// CPU twin: reference::apply (crates/backend/src/reference/batch_update.rs; it sums the partials in order, which
// equals this on integer data).
@compute @workgroup_size(WG)
fn apply(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (!stopped(lid)) {
        apply_weights(lid, wid.x + wid.y * nwg.x);
    }
    flush(E_APPLY);
}

fn apply_weights(lid: u32, group: u32) {
    if (lid == 0u) {
        var u = 0u;
        if ((P.flags & FLAG_POCKET) != 0u) {
            ld(CAT_CONTROL, 1u);
            u = ctl.updates;
        }
        flag2 = u;
    }
    let updates = workgroupUniformLoad(&flag2);
    let j = sum_partials(lid, group);
    var sq = 0.0;
    if (lid / AJ == 0u && j < P.heads * P.d_aug) {
        sq = update(j, red[lid], updates);
    }
    // The workgroup's squared steps summed in a fixed tree, one word a group for `finalize`
    // (which summed all K (d + 1) of them in its one workgroup: most of a sparse epoch at
    // large d; docs/performance.md, "Figures behind the code's choices").
    let q = group_sum(lid, AJ, sq);
    if (lid == 0u) {
        set_aux(4u * P.heads * P.d_aug + group, q);
    }
}

// The sum over the partials of weight j = group * AJ + lid % AJ, the same for `apply` and
// `fold`: WG / AJ lanes, lane l adding partials l, l + WG / AJ, ... in order, then the lanes
// in a fixed tree; the total is left in red[lid] of lane 0. Returns j.
fn sum_partials(lid: u32, group: u32) -> u32 {
    let len = P.heads * P.d_aug;
    let lanes = WG / AJ;
    let j = group * AJ + lid % AJ;
    let l = lid / AJ;
    var s = 0.0;
    if (j < len) {
        for (var c = l; c < P.total_chunks; c += lanes) {
            s += get_partial(c * len + j);
        }
    }
    red[lid] = s;
    workgroupBarrier();
    for (var h = lanes / 2u; h > 0u; h >>= 1u) {
        if (l < h) {
            red[lid] += red[lid + h * AJ];
        }
        workgroupBarrier();
    }
    return j;
}

// One process of a data-parallel run: the chunks' partials summed into chunk 0 with the lanes
// and tree of `apply`, the other chunks zeroed, no update, so that the host reads back and
// sums over the processes K (d + 1) words an epoch instead of every chunk's. Each thread
// writes only the words it read. Grid as `apply`'s.
// CPU twin: reference::fold (crates/backend/src/reference/batch_update.rs; it adds the chunks in order, which
// equals this on integer data).
@compute @workgroup_size(WG)
fn fold(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (!stopped(lid)) {
        fold_partials(lid, wid.x + wid.y * nwg.x);
    }
    flush(E_FOLD);
}

fn fold_partials(lid: u32, group: u32) {
    let len = P.heads * P.d_aug;
    let j = sum_partials(lid, group);
    if (j < len) {
        // Lane l rewrites the partials it read: the total into chunk 0 (lane 0), zeros.
        for (var c = lid / AJ; c < P.total_chunks; c += WG / AJ) {
            set_partial(c * len + j, select(0.0, red[lid], c == 0u));
        }
    }
}

// One workgroup: the epoch's mistakes, criterion, held-out mistakes and update norm, the
// Winnow weights, the pocket, and the stop rules (StopState::record in crates/backend/src/lib.rs,
// with the same f32 arithmetic). Reads each workgroup's statistics once (strided by WG).
// CPU twin: reference::finalize (crates/backend/src/reference/batch_update.rs).
@compute @workgroup_size(WG)
fn finalize(@builtin(local_invocation_index) lid: u32) {
    if (!stopped(lid)) {
        finalize_epoch(lid);
    }
    flush(E_FINALIZE);
}

fn finalize_epoch(lid: u32) {
    let len = P.heads * P.d_aug;
    var q = 0.0;
    // Each `apply` workgroup's sum of its AJ squared steps.
    for (var g = lid; g < (len + AJ - 1u) / AJ; g += WG) {
        q += get_aux(4u * len + g);
    }
    var cnt = 0u;
    var cr = 0.0;
    var held = 0u;
    var wsum = 0.0;
    var rows = 0u;
    for (var k = lid; k < P.total_wgs; k += WG) {
        ld(CAT_CONTROL, 5u);
        let s = wg_stats[k];
        cnt += s.mistakes;
        cr += s.criterion;
        held += s.held_out;
        wsum += s.weighted;
        rows += s.rows;
    }
    red[lid] = q;
    red2[lid] = cr;
    redu[lid] = cnt;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
            red2[lid] += red2[lid + s];
            redu[lid] += redu[lid + s];
        }
        workgroupBarrier();
    }
    let total = redu[0];
    let q_total = red[0];
    let crit_total = red2[0];
    workgroupBarrier();
    redu[lid] = held;
    red[lid] = wsum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            redu[lid] += redu[lid + s];
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let held_total = redu[0];
    let weighted_total = red[0];
    var rows_total = 0u;
    if (P.rule == RULE_OVR) {
        rows_total = sum_u32(lid, rows);
    }
    // The stop rules' memory, read once for the workgroup.
    if (lid == 0u) {
        ld(CAT_CONTROL, 1u);
        red2[0] = ctl.best;
    }
    let best = workgroupUniformLoad(&red2[0]);
    // The monitored figure: EpochStats::monitored on the host.
    var fig = f32(total);
    if ((P.flags & FLAG_HELD_OUT) != 0u) {
        fig = f32(held_total);
    } else if ((P.flags & FLAG_WEIGHTS) != 0u) {
        fig = weighted_total;
    }
    let better = fig < best;
    let keep_best = better && (P.flags & FLAG_POCKET) != 0u;
    if ((P.flags & FLAG_MULTIPLICATIVE) != 0u) {
        // Winnow: the weights used are exp(lw - max lw), in (0, 1], never overflowing.
        var top = -3.0e38;
        for (var j = lid; j < len; j += WG) {
            top = max(top, get_aux(3u * len + j));
        }
        red[lid] = top;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s) {
                red[lid] = max(red[lid], red[lid + s]);
            }
            workgroupBarrier();
        }
        let m = red[0];
        for (var j = lid; j < len; j += WG) {
            set_w(j, exp(get_aux(3u * len + j) - m));
        }
    }
    if (keep_best) {
        for (var j = lid; j < len; j += WG) {
            set_aux(len + j, get_aux(j));
        }
    }
    if (lid == 0u) {
        // The control word, read and written whole (12 words each way).
        ld(CAT_CONTROL, 12u);
        var c = ctl;
        // The epochs the pocket's candidate holds, then the average's count.
        let both = FLAG_POCKET | FLAG_AVERAGE;
        let from_sum = (P.flags & both) == both && c.updates > 0u;
        let prev_updates = select(0u, c.updates, from_sum);
        if ((P.flags & FLAG_AVERAGE) != 0u) {
            c.updates += 1u;
        }
        if (keep_best) {
            c.pocket_updates = prev_updates;
        }
        let epochs = c.epochs + 1u;
        c.epochs = epochs;
        if (better) {
            c.best = fig;
            c.best_epoch = epochs;
        }
        if (fig < c.reference * P.keep_fraction) {
            c.reference = fig;
            c.wait = 0u;
        } else if (c.wait < 0xffffffffu) {
            c.wait += 1u;
        }
        let norm = sqrt(q_total);
        let e = c.epoch;
        st(CAT_CONTROL, 8u);
        stats[e % P.ring] = EpochOut(total, crit_total, norm, held_total, weighted_total, rows_total, 0u, 0u);
        c.epoch = e + 1u;
        if (total == 0u) {
            c.done = STOP_CONVERGED;
        } else if (norm < P.tol) {
            c.done = STOP_TOLERANCE;
        } else if (P.patience > 0u && c.wait >= P.patience
                   && (c.best > P.floor || P.floor <= 0.0
                       || epochs - c.best_epoch >= c.best_epoch)) {
            c.done = STOP_PATIENCE;
        }
        st(CAT_CONTROL, 12u);
        ctl = c;
    }
}
