// rosenblatt: the batch module by stage, the two-kernel and sparse paths: `margins`, `accumulate` and `gather`.
// Joined after batch.wgsl, which declares what this uses (see its header); the CPU twins
// are in crates/backend/src/reference/batch_two_kernels.rs.

// ---- The two-kernel path (CSR rows; dense rows too wide for the register pass) ---------

// Heads scored together by the two-kernel path: each stored value of a row is loaded once for
// a block of KB heads (once for all of them when K <= KB).
const KB: u32 = KT_MAX;

// CPU twin: reference::row_score, head by head. The scores w_k . [x_r, bias] of heads k0 ..
// k0 + kb - 1 (kb = min(KB, K - k0)) of row r, each summed by the TPR threads of a row group
// (each thread's values striding, then a fixed tree; weights from the running sum in `aux`
// when `by_sum`); valid in lane 0. Each stored value of the row (CSR or dense) is loaded once
// for the block. Must be called by the whole workgroup (it has barriers); rows at or past
// `end` (at most S.n) are not read and give the bias terms.
fn row_scores(lid: u32, r: u32, k0: u32, by_sum: bool, end: u32, skip_long: bool) -> array<f32, KT_MAX> {
    let lane = lid % TPR;
    let kb = min(KB, P.heads - k0);
    var acc: array<f32, KT_MAX>;
    if (SPARSE != 0u && r < end) {
        // CSR: the row's stored values, TPR threads striding over them (none for a long row
        // when `skip_long`: `margins_long` scores it).
        let ix = S.n + 1u;
        let p0 = get_csr(r);
        var p1 = get_csr(r + 1u);
        if (skip_long && p1 - p0 > LONG_WALK * TPR) {
            p1 = p0;
        }
        for (var p = p0 + lane; p < p1; p += TPR) {
            let v = xat(p);
            let j = get_csr(ix + p);
            for (var kt = 0u; kt < kb; kt++) {
                acc[kt] += v * weight(k0 + kt, j, by_sum);
            }
        }
    } else if (r < end) {
        let off = r * 4u * P.units;
        for (var j = lane; j < P.d; j += TPR) {
            let v = xat(off + j);
            for (var kt = 0u; kt < kb; kt++) {
                acc[kt] += v * weight(k0 + kt, j, by_sum);
            }
        }
    }
    var out: array<f32, KT_MAX>;
    for (var kt = 0u; kt < kb; kt++) {
        let sum = group_sum(lid, TPR, acc[kt]);
        if (lane == 0u) {
            out[kt] = sum + weight(k0 + kt, P.d, by_sum) * P.bias;
        }
    }
    return out;
}

// Training rows: the rule's coefficients (times the row's weight), mistakes and criterion.
// Held-out rows: the prediction rule (sgn(0) = +1; first highest score), counting the rows
// predicted wrong. SPARSE: a long row (more than LONG_WALK entries a thread of its row group)
// is left to the workgroups after the first S.wgs - long_wgs(), which take the long rows one
// at a time with every thread (`margins_long`), so one row holding a large share of the
// entries is not walked by a few threads while the rest wait at the barriers.
// CPU twin: reference::margins (crates/backend/src/reference/batch_two_kernels.rs).
@compute @workgroup_size(WG)
fn margins(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if (!stopped(lid)) {
        let groups = WG / TPR;
        let normal = S.wgs - long_wgs();
        if (wid.x < normal) {
            margins_rows(lid, wid.x, wid.x * groups, normal * groups, S.n);
        } else {
            margins_long(lid, wid.x, wid.x - normal);
        }
    }
    flush(E_MARGINS);
}

// Workgroups of this segment's long rows (SPARSE: the host lists S.long_rows of them after
// the CSR columns); at most LONG_WGS, each taking every LONG_WGS-th.
fn long_wgs() -> u32 {
    return min(S.long_rows, LONG_WGS);
}

// Whether CSR row r (below S.n) is long: more than LONG_WALK entries for each of its TPR
// threads. The host lists exactly these rows.
fn long_row(r: u32) -> bool {
    return SPARSE != 0u && get_csr(r + 1u) - get_csr(r) > LONG_WALK * TPR;
}

// What the rule keeps of a row while its heads' scores arrive: its label, weight and class,
// and for the multiclass rules the true class's score and the highest wrong one; for
// held-out rows the highest score. (Running scalars, not a per-thread array of K scores,
// which would be zeroed for every row and live in local memory.)
struct RowState {
    yv: f32,
    wr: f32,
    t: u32,
    s_true: f32,
    best: u32,
    s_best: f32,
    top: u32,
    s_top: f32,
}

// The state of row r before its first head: its label and (training, weighted) its weight;
// the counts go to st_count, st_crit and st_weighted.
fn row_begin(r: u32, held: bool) -> RowState {
    let yv = get_y(r);
    var wr = 1.0;
    if (!held && (P.flags & FLAG_WEIGHTS) != 0u) {
        wr = get_sw(r);
    }
    return RowState(yv, wr, u32(max(yv, 0.0)), 0.0, P.heads, 0.0, 0u, 0.0);
}

// Head k's score sk of the row whose coefficients start at coef[o]: the binary and
// one-vs-rest rules decide the head now; the others keep what they need.
fn row_head(st: ptr<function, RowState>, o: u32, k: u32, sk: f32, held: bool) {
    if (held || P.rule == RULE_OVR) {
        if (k == 0u || sk > (*st).s_top) {
            (*st).top = k;
            (*st).s_top = sk;
        }
    }
    if (held) {
        return;
    } else if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var yk = (*st).yv;
        if (P.rule == RULE_OVR) {
            yk = select(-1.0, 1.0, k == (*st).t);
        }
        let m = yk * sk;
        if (m <= P.tau) {
            let wk = head_weight((*st).wr, k, (*st).t);
            set_coef(o + k, yk * wk);
            bias_add(k, yk * wk);
            st_count += 1u;
            st_crit -= m * wk;
            st_weighted += wk;
        } else {
            set_coef(o + k, 0.0);
        }
    } else if (k == (*st).t) {
        (*st).s_true = sk;
    } else if ((*st).best == P.heads || sk > (*st).s_best) {
        (*st).best = k;
        (*st).s_best = sk;
    }
}

// After the row's last head: held-out rows count a wrong prediction; the multiclass rules
// decide and write every head's coefficient.
fn row_end(st: RowState, o: u32, held: bool) {
    let K = P.heads;
    if (held) {
        var wrong = false;
        if (P.rule == RULE_BINARY) {
            wrong = (st.s_top >= 0.0) != (st.yv > 0.0);
        } else {
            wrong = st.top != st.t;
        }
        if (wrong) {
            st_count += 1u;
        }
    } else if (P.rule == RULE_OVR) {
        ovr_row(st.top, st.t, true);
    } else if (P.rule != RULE_BINARY) {
        let m = st.s_true - st.s_best;
        let miss = m <= P.tau;
        if (miss) {
            st_count += 1u;
            st_crit -= m * st.wr;
            st_weighted += st.wr;
        }
        for (var k = 0u; k < K; k++) {
            var c = 0.0;
            if (miss) {
                if (k == st.t) {
                    c = st.wr;
                } else if (P.rule == RULE_MC_ALL || k == st.best) {
                    c = -st.wr;
                }
            }
            set_coef(o + k, c);
            bias_add(k, c);
        }
    }
}

// `margins` for the row groups starting at `start`, `start + step`, ... below `end`, with
// this workgroup's counts in wg_stats slot `slot`. Called by the whole workgroup.
fn margins_rows(lid: u32, slot: u32, start: u32, step: u32, end: u32) {
    let by_sum = held_out_by_sum(lid);
    let held = S.role == ROLE_HELD_OUT;
    let lane = lid % TPR;
    let K = P.heads;
    for (var base = start; base < end; base += step) {
        let r = base + lid / TPR;
        // Only lane 0 of a row group with a (short) row acts; the others help with the dots.
        let acts = lane == 0u && r < end && !long_row(r);
        var st: RowState;
        if (acts) {
            st = row_begin(r, held);
        }
        for (var k0 = 0u; k0 < K; k0 += KB) {
            let blk = row_scores(lid, r, k0, by_sum, end, true);
            for (var k = k0; k < min(k0 + KB, K); k++) {
                if (acts) {
                    row_head(&st, r * K, k, blk[k - k0], held);
                }
            }
        }
        if (acts) {
            row_end(st, r * K, held);
        }
    }
    write_wg_stat(lid, slot, held, st_count, st_crit, st_weighted, st_rows);
    if (SPARSE != 0u && !held) {
        write_bias_sums(lid, slot);
    }
}

// The long rows q, q + LONG_WGS, ... of the host's list (after the CSR columns), each scored
// by the whole workgroup (its entries striding over every thread, then a fixed tree per head)
// and decided by thread 0; counts in wg_stats slot `slot`. Called by the whole workgroup.
fn margins_long(lid: u32, slot: u32, q0: u32) {
    let by_sum = held_out_by_sum(lid);
    let held = S.role == ROLE_HELD_OUT;
    let K = P.heads;
    let list = S.n + 1u + get_csr(S.n);
    for (var q = q0; q < S.long_rows; q += LONG_WGS) {
        let r = get_csr(list + 1u + q);
        let p0 = get_csr(r);
        let p1 = get_csr(r + 1u);
        var st: RowState;
        if (lid == 0u) {
            st = row_begin(r, held);
        }
        for (var k0 = 0u; k0 < K; k0 += KB) {
            let kb = min(KB, K - k0);
            var acc: array<f32, KT_MAX>;
            for (var p = p0 + lid; p < p1; p += WG) {
                let v = xat(p);
                let j = get_csr(S.n + 1u + p);
                for (var kt = 0u; kt < kb; kt++) {
                    acc[kt] += v * weight(k0 + kt, j, by_sum);
                }
            }
            for (var kt = 0u; kt < kb; kt++) {
                let sum = group_sum(lid, WG, acc[kt]);
                if (lid == 0u) {
                    let sk = sum + weight(k0 + kt, P.d, by_sum) * P.bias;
                    row_head(&st, r * K, k0 + kt, sk, held);
                }
            }
        }
        if (lid == 0u) {
            row_end(st, r * K, held);
        }
    }
    write_wg_stat(lid, slot, held, st_count, st_crit, st_weighted, st_rows);
    if (!held) {
        write_bias_sums(lid, slot);
    }
}

// SPARSE training rows: each thread's sum of its rows' coefficients per head, in row order
// (only the thread acting for a row adds), for the bias column: the workgroup's sums go after
// the n K coefficients (`write_bias_sums`), and `gather` adds the workgroups' in order, so
// no thread walks every row. Private: zero at the start of every invocation.
var<private> bias_acc: array<f32, MAX_HEADS>;

fn bias_add(k: u32, c: f32) {
    if (SPARSE != 0u) {
        bias_acc[k] += c;
    }
}

// The workgroup's per-head sums of bias_acc (a fixed tree over the threads), stored at
// coef[S.n K + slot K + k]. Called by the whole workgroup.
fn write_bias_sums(lid: u32, slot: u32) {
    for (var k = 0u; k < P.heads; k++) {
        let sum = group_sum(lid, WG, bias_acc[k]);
        if (lid == 0u) {
            set_coef(S.n * P.heads + slot * P.heads + k, sum);
        }
    }
}

// v summed over the `width` threads of lid's group (threads lid - lid % width onwards;
// width a power of two <= WG) by a fixed tree in `red`: valid in the group's first thread.
// Called by the whole workgroup; `red` is free again when it returns.
fn group_sum(lid: u32, width: u32, v: f32) -> f32 {
    let lane = lid % width;
    red[lid] = v;
    workgroupBarrier();
    for (var s = width / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let sum = red[lid];
    workgroupBarrier();
    return sum;
}

// Grid: x = tile of TC "columns" over heads * d_aug (head k, column j), y = row chunk. Sums
// coef[r, k] * x[r, j] over the chunk's rows; rows whose coefficient is 0 are not read.
// CPU twin: reference::accumulate (crates/backend/src/reference/batch_two_kernels.rs).
@compute @workgroup_size(WG)
fn accumulate(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if (!stopped(lid)) {
        accumulate_tile(lid, wid.x, wid.y);
    }
    flush(E_ACCUMULATE);
}

// `accumulate` for column tile `tile` of row chunk `chunk`. Called by the whole workgroup.
fn accumulate_tile(lid: u32, tile: u32, chunk: u32) {
    let c = lid % TC;
    let lane = lid / TC;
    let lanes = WG / TC;
    let col = tile * TC + c;
    let K = P.heads;
    let k = col / P.d_aug;
    let j = col % P.d_aug;
    let r0 = chunk * S.chunk_rows;
    let r1 = min(r0 + S.chunk_rows, S.n);
    let stride = 4u * P.units;
    var acc = 0.0;
    if (k < K) {
        for (var r = r0 + lane; r < r1; r += lanes) {
            let a = get_coef(r * K + k);
            if (a != 0.0) {
                if (j < P.d) {
                    acc += a * xat(r * stride + j);
                } else {
                    acc += a * P.bias;
                }
            }
        }
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s * TC];
        }
        workgroupBarrier();
    }
    if (lane == 0u && k < K) {
        set_partial((S.chunk_base + chunk) * K * P.d_aug + col, red[lid]);
    }
    workgroupBarrier();
}


// SPARSE training segments, instead of `accumulate`: for every column j and every head k the
// sum of coef[r, k] * x[r, j] over the column's entries in the CSC copy (rows ascending,
// threads striding, then a fixed tree per head), each entry's row and value loaded once for a
// block of KB heads, the value only when a head's coefficient is not 0; the bias column
// (j = d) from the `margins` workgroups' coefficient sums, in order. TPC threads sum a column,
// WG / TPC columns to a workgroup; a long column (LONG_WALK entries a thread or more) is
// left to a workgroup of its own after those (S.long_cols of them), so no thread walks a
// column that holds a large share of the entries. Written as this segment's one partial
// (chunk S.chunk_base), so `apply` and `finalize` follow unchanged. No atomics: each sum has
// one owner, so the result is deterministic and exact on integer data.
// Grid: the column groups, then the long columns, folded over y past the per-dimension limit.
// CPU twin: reference::gather (crates/backend/src/reference/batch_two_kernels.rs).
@compute @workgroup_size(WG)
fn gather(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (!stopped(lid)) {
        let group = wid.x + wid.y * nwg.x;
        let short = (P.d + WG / TPC) / (WG / TPC);
        if (group < short) {
            gather_columns(lid, group);
        } else if (group < short + S.long_cols) {
            gather_long(lid, group - short);
        }
    }
    flush(E_GATHER);
}

// The column sums of one block of heads: `threads` threads (lane = 0 .. threads - 1) striding
// over entries c0 .. c1 - 1 from `first`, each adding its share into acc.
fn column_block(c0: u32, c1: u32, first: u32, threads: u32, k0: u32, kb: u32) -> array<f32, KT_MAX> {
    let K = P.heads;
    let rows = P.d + 1u;
    let vals = rows + get_csc(P.d);
    var acc: array<f32, KT_MAX>;
    for (var p = c0 + first; p < c1; p += threads) {
        let o = get_csc(rows + p) * K + k0;
        var v = 0.0;
        var loaded = false;
        for (var kt = 0u; kt < kb; kt++) {
            let a = get_coef(o + kt);
            if (a != 0.0) {
                if (!loaded) {
                    v = csc_value(vals, p);
                    loaded = true;
                }
                acc[kt] += a * v;
            }
        }
    }
    return acc;
}

fn gather_columns(lid: u32, group: u32) {
    let K = P.heads;
    let len = K * P.d_aug;
    let lane = lid % TPC;
    let j = group * (WG / TPC) + lid / TPC;
    var c0 = 0u;
    var c1 = 0u;
    if (j < P.d) {
        c0 = get_csc(j);
        c1 = get_csc(j + 1u);
    }
    // A long column is summed by `gather_long`.
    let mine = j == P.d || (j < P.d && c1 - c0 <= LONG_WALK * TPC);
    for (var k0 = 0u; k0 < K; k0 += KB) {
        let kb = min(KB, K - k0);
        var acc: array<f32, KT_MAX>;
        if (j < P.d && mine) {
            acc = column_block(c0, c1, lane, TPC, k0, kb);
        } else if (j == P.d) {
            for (var q = lane; q < S.wgs; q += TPC) {
                let o = S.n * K + q * K + k0;
                for (var kt = 0u; kt < kb; kt++) {
                    acc[kt] += get_coef(o + kt);
                }
            }
        }
        for (var kt = 0u; kt < kb; kt++) {
            var v = group_sum(lid, TPC, acc[kt]);
            if (lane == 0u && mine) {
                if (j == P.d) {
                    v *= P.bias;
                }
                set_partial(S.chunk_base * len + (k0 + kt) * P.d_aug + j, v);
            }
        }
    }
}

// Long column q of the host's list: the whole workgroup strides over its entries, then a
// fixed tree per head.
fn gather_long(lid: u32, q: u32) {
    let K = P.heads;
    let len = K * P.d_aug;
    let list = P.d + 1u + 2u * get_csc(P.d);
    let j = get_csc(list + 1u + q);
    let c0 = get_csc(j);
    let c1 = get_csc(j + 1u);
    for (var k0 = 0u; k0 < K; k0 += KB) {
        let kb = min(KB, K - k0);
        let acc = column_block(c0, c1, lid, WG, k0, kb);
        for (var kt = 0u; kt < kb; kt++) {
            let sum = group_sum(lid, WG, acc[kt]);
            if (lid == 0u) {
                set_partial(S.chunk_base * len + (k0 + kt) * P.d_aug + j, sum);
            }
        }
    }
}
