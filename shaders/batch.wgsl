// rosenblatt: batch-perceptron kernels (margins, accumulate, apply, finalize) and scoring,
// for K weight vectors ("heads": K = 1 for a binary perceptron, K classes for multiclass or
// one-vs-rest). Weights are stored head after head, each d + 1 long (the last is the bias).
//
// Sparse data (SPARSE = 1) is CSR rows: `row_score` strides over a row's stored values, and
// each training segment runs `margins` then `gather` (a column-major copy summed per column)
// instead of `accumulate`.
//
// One epoch is `fused` once per training segment (one pass over X: a workgroup per row
// chunk scores its rows and sums coef * x over them while they are in cache), or where the
// chunks are too few to fill the device `margins` then `accumulate` (X read twice); held-out
// segments run `margins`; then `apply` (or `apply_tree` when there are many chunks) and
// `finalize` once: three dispatches an epoch for one segment. Many epochs are recorded in one
// submit; `finalize` takes the stop decision (BatchRule::stop in src/backend/mod.rs) and every entry point returns at once when
// `ctl.done` is set, so epochs after convergence cost only empty dispatches.
// Every entry point has a plain CPU twin of the same name in src/backend/reference.rs
// (`row_score`, `margins`, `accumulate`, `apply`, `finalize`, `scores`; `fused` is `margins`
// then `accumulate` per chunk); tests keep the GPU
// bit-identical to them on integer data.
//
// Rows are row-major with an implicit last column of value `P.bias` (1 with a bias, 0
// without), stored as f32 or as a narrower exact copy (f16, u8, i8) packed into 32-bit words:
// `xat` widens each value exactly, so the arithmetic is f32 whatever the storage.
//
// The structs, rule and flag codes and MAX_HEADS are checked against src/backend/gpu/mirror.rs,
// HeadRule::code and backend::MAX_HEADS by the tests in mirror.rs (naga's layouter).

override WG: u32 = 256u;   // workgroup size (checked against the device limits by the host)
override TPR: u32 = 32u;   // threads per row in `margins` and `scores`: a power of two <= WG
override TC: u32 = 64u;    // columns per tile in `accumulate`: a power of two <= WG
override STORAGE: u32 = 0u; // how X is stored: STORAGE_* (Storage::code on the host)
override SPARSE: u32 = 0u;  // 1: X is CSR rows (`csr`), training segments have a CSC copy (`csc`)
override TPC: u32 = 1u;     // threads per column in `gather`: a power of two <= WG

const STORAGE_F32: u32 = 0u;
const STORAGE_F16: u32 = 1u;  // two IEEE halves per word, the first in the low bits
const STORAGE_U8: u32 = 2u;   // four bytes per word, the first in the low bits
const STORAGE_I8: u32 = 3u;   // four signed bytes per word

const MAX_HEADS: u32 = 64u;  // the host refuses more heads on the GPU (scores go in blocks)

const RULE_BINARY: u32 = 0u;      // y in {-1,+1}: mistake when y s <= tau, the head gets y x
const RULE_OVR: u32 = 1u;         // head k: +1 for class k, -1 otherwise, each head on its own
const RULE_MC_ALL: u32 = 2u;      // s_t - max_{k!=t} s_k <= tau: +x to t, -x to every other
const RULE_MC_ARGMAX: u32 = 3u;   // as above, -x only to the highest wrong class

const FLAG_POCKET: u32 = 1u;
const FLAG_AVERAGE: u32 = 2u;
const FLAG_MULTIPLICATIVE: u32 = 4u;  // Winnow: update log-weights, score with exp(lw - max)
const FLAG_WEIGHTS: u32 = 8u;         // per-row weights in `sw` scale each row's update
const FLAG_HELD_OUT: u32 = 16u;       // held-out segments exist: their mistakes are watched

const ROLE_TRAIN: u32 = 0u;     // a segment of training rows
const ROLE_HELD_OUT: u32 = 1u;  // a segment of held-out rows: scored, never trained on

const STOP_CONVERGED: u32 = 1u;
const STOP_TOLERANCE: u32 = 2u;
const STOP_PATIENCE: u32 = 3u;

struct Params {
    d: u32,            // features
    d_aug: u32,        // d + 1 (the bias column)
    bias: f32,         // value of the implicit last column
    eta: f32,          // learning rate
    tol: f32,          // stop when ||eta * sum|| < tol (0: off)
    total_chunks: u32, // rows of `partials` over all segments
    total_wgs: u32,    // entries of `wg_stats` over all segments
    heads: u32,        // K
    rule: u32,         // RULE_*
    tau: f32,          // margin threshold
    flags: u32,        // FLAG_*
    patience: u32,     // epochs without improvement before stopping (0: off)
    keep_fraction: f32, // an epoch improves when its figure < keep_fraction * reference
    floor: f32,        // when positive, the patience rule stops nothing while best <= floor
    _pad0: u32,
    _pad1: u32,
}

struct Segment {
    n: u32,            // rows in this segment
    chunk_base: u32,   // first `partials` row of this segment
    wg_base: u32,      // first `wg_stats` entry of this segment
    chunk_rows: u32,   // rows per `accumulate` chunk
    role: u32,         // ROLE_*
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// The stop rules' memory: StopState in src/backend/mod.rs, plus the per-submit counters and
// the averaged pocket's epoch counts. Everything but `done` and `epoch` persists across
// submits.
struct Control {
    done: u32,         // 0 running, else STOP_*
    epoch: u32,        // epochs run in this submit
    best: f32,         // fewest monitored mistakes seen (infinity before the first epoch)
    best_epoch: u32,   // the epoch (1-based, since binding) that saw them
    reference: f32,    // the monitored figure at the last improvement
    wait: u32,         // epochs since that improvement
    epochs: u32,       // epochs since binding
    updates: u32,      // epochs in the average sum
    pocket_updates: u32, // epochs in the pocket
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct WgStat {
    mistakes: u32,     // training rows: mistakes
    criterion: f32,    // training rows: criterion J (weighted)
    held_out: u32,     // held-out rows: predicted wrong
    weighted: f32,     // training rows: the mistakes' row weights, summed
}

struct EpochOut {
    mistakes: u32,
    criterion: f32,
    update_norm: f32,
    held_out: u32,
    weighted: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> ctl: Control;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;
@group(0) @binding(4) var<storage, read_write> wg_stats: array<WgStat>;
@group(0) @binding(5) var<storage, read_write> sq: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<EpochOut>;
// [prev | pocket | average sum | log-weights], each heads * d_aug long.
@group(0) @binding(7) var<storage, read_write> aux: array<f32>;

@group(1) @binding(0) var<uniform> S: Segment;
// X in STORAGE, read through `xat`.
@group(1) @binding(1) var<storage, read> x: array<u32>;
@group(1) @binding(2) var<storage, read> y: array<f32>;
// Per row and head: the coefficient of x in the update (`margins`), or the score (`scores`).
@group(1) @binding(3) var<storage, read_write> coef: array<f32>;
// Per-row weights (read when FLAG_WEIGHTS is set).
@group(1) @binding(4) var<storage, read> sw: array<f32>;
// SPARSE: this segment's rows in CSR form, [row starts (S.n + 1, from 0) | column of each
// value]; the values are `x`, read through `xat`. Dense segments bind a placeholder.
@group(1) @binding(5) var<storage, read> csr: array<u32>;
// SPARSE training segments: the same values column by column (CSC), [column starts (d + 1,
// from 0) | row of each entry | its position in `x`], rows ascending within a column.
@group(1) @binding(6) var<storage, read> csc: array<u32>;

var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;
var<workgroup> redu: array<u32, WG>;
var<workgroup> flag: u32;
var<workgroup> flag2: u32;

// Half i of this segment's X (STORAGE_F16) as f32, decoded with integer operations, so no
// optional capability is needed (naga gates unpack2x16float behind SHADER_FLOAT16_IN_FLOAT32).
// The host stores only normal halves and zeros (Storage::holds), so the exponent is rebiased
// (15 -> 127) and the mantissa shifted; a zero exponent is a signed zero.
fn half_at(i: u32) -> f32 {
    let h = (x[i >> 1u] >> (16u * (i & 1u))) & 0xffffu;
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let normal = sign | ((e + 112u) << 23u) | ((h & 0x3ffu) << 13u);
    return bitcast<f32>(select(normal, sign, e == 0u));
}

// Value i of this segment's X, widened exactly to f32. CPU twin: simd::Elem::widen.
fn xat(i: u32) -> f32 {
    switch STORAGE {
        case STORAGE_F16: {
            return half_at(i);
        }
        case STORAGE_U8: {
            return f32((x[i >> 2u] >> (8u * (i & 3u))) & 0xffu);
        }
        case STORAGE_I8: {
            return f32(bitcast<i32>(x[i >> 2u] << (24u - 8u * (i & 3u))) >> 24u);
        }
        default: {
            return bitcast<f32>(x[i]);
        }
    }
}

// True (uniformly across the workgroup) once training has stopped in this submit.
fn stopped(lid: u32) -> bool {
    if (lid == 0u) {
        flag = ctl.done;
    }
    return workgroupUniformLoad(&flag) != 0u;
}

// True (uniformly) when held-out rows are scored by the running average sum (averaging with
// a pocket, once the sum holds an epoch): EpochState::held_out_weights on the host.
fn held_out_by_sum(lid: u32) -> bool {
    let both = FLAG_POCKET | FLAG_AVERAGE;
    if (lid == 0u) {
        flag2 = select(0u, ctl.updates, (P.flags & both) == both && S.role == ROLE_HELD_OUT);
    }
    return workgroupUniformLoad(&flag2) != 0u;
}

// CPU twin: reference::row_score. w_k . [x_r, bias] summed by the TPR threads of a row group
// (weights from the running sum in `aux` when `by_sum`); the result is valid in lane 0.
// Must be called by the whole workgroup (it has barriers); rows at or past `end` (at most
// S.n) are not read and give the bias term.
fn row_score(lid: u32, r: u32, k: u32, by_sum: bool, end: u32) -> f32 {
    let lane = lid % TPR;
    let wo = k * P.d_aug;
    let so = 2u * P.heads * P.d_aug + wo;
    var acc = 0.0;
    if (SPARSE != 0u && r < end) {
        // CSR: the row's stored values, TPR threads striding over them.
        let ix = S.n + 1u;
        let p1 = csr[r + 1u];
        if (by_sum) {
            for (var p = csr[r] + lane; p < p1; p += TPR) {
                acc += xat(p) * aux[so + csr[ix + p]];
            }
        } else {
            for (var p = csr[r] + lane; p < p1; p += TPR) {
                acc += xat(p) * w[wo + csr[ix + p]];
            }
        }
    } else if (r < end) {
        let off = r * P.d;
        if (by_sum) {
            for (var j = lane; j < P.d; j += TPR) {
                acc += xat(off + j) * aux[so + j];
            }
        } else {
            for (var j = lane; j < P.d; j += TPR) {
                acc += xat(off + j) * w[wo + j];
            }
        }
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    var wb = w[wo + P.d];
    if (by_sum) {
        wb = aux[so + P.d];
    }
    let v = red[lid] + wb * P.bias;
    workgroupBarrier();
    return v;
}

// Training rows: the rule's coefficients (times the row's weight), mistakes and criterion.
// Held-out rows: the prediction rule (sgn(0) = +1; first highest score), counting the rows
// predicted wrong.
// CPU twin: reference::margins (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn margins(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let groups = WG / TPR;
    margins_rows(lid, wid.x, wid.x * groups, nwg.x * groups, S.n);
}

// `margins` for the row groups starting at `start`, `start + step`, ... below `end`, with
// this workgroup's counts in wg_stats slot `slot`. Called by the whole workgroup.
fn margins_rows(lid: u32, slot: u32, start: u32, step: u32, end: u32) {
    let by_sum = held_out_by_sum(lid);
    let held = S.role == ROLE_HELD_OUT;
    let lane = lid % TPR;
    let K = P.heads;
    var count = 0u;
    var crit = 0.0;
    var weighted = 0.0;
    for (var base = start; base < end; base += step) {
        let r = base + lid / TPR;
        // Only lane 0 of a row group with a row acts; the others help with the dots.
        let acts = lane == 0u && r < end;
        var yv = 0.0;
        var wr = 1.0;
        if (acts) {
            yv = y[r];
            if (!held && (P.flags & FLAG_WEIGHTS) != 0u) {
                wr = sw[r];
            }
        }
        let t = u32(max(yv, 0.0));
        let o = r * K;
        // Running scalars instead of a per-thread array of K scores (which would be zeroed
        // for every row and live in local memory): the binary and one-vs-rest rules decide
        // each head as its score arrives; the multiclass rules keep the true class's score
        // and the highest wrong one; held-out rows keep the highest score.
        var s_true = 0.0;
        var best = K;
        var s_best = 0.0;
        var top = 0u;
        var s_top = 0.0;
        for (var k = 0u; k < K; k++) {
            let sk = row_score(lid, r, k, by_sum, end);
            if (!acts) {
            } else if (held) {
                if (k == 0u || sk > s_top) {
                    top = k;
                    s_top = sk;
                }
            } else if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
                var yk = yv;
                if (P.rule == RULE_OVR) {
                    yk = select(-1.0, 1.0, k == t);
                }
                let m = yk * sk;
                if (m <= P.tau) {
                    coef[o + k] = yk * wr;
                    count += 1u;
                    crit -= m * wr;
                    weighted += wr;
                } else {
                    coef[o + k] = 0.0;
                }
            } else if (k == t) {
                s_true = sk;
            } else if (best == K || sk > s_best) {
                best = k;
                s_best = sk;
            }
        }
        if (acts && held) {
            var wrong = false;
            if (P.rule == RULE_BINARY) {
                wrong = (s_top >= 0.0) != (yv > 0.0);
            } else {
                wrong = top != t;
            }
            if (wrong) {
                count += 1u;
            }
        } else if (acts && P.rule != RULE_BINARY && P.rule != RULE_OVR) {
            let m = s_true - s_best;
            let miss = m <= P.tau;
            if (miss) {
                count += 1u;
                crit -= m * wr;
                weighted += wr;
            }
            for (var k = 0u; k < K; k++) {
                var c = 0.0;
                if (miss) {
                    if (k == t) {
                        c = wr;
                    } else if (P.rule == RULE_MC_ALL || k == best) {
                        c = -wr;
                    }
                }
                coef[o + k] = c;
            }
        }
    }
    redu[lid] = count;
    red[lid] = crit;
    red2[lid] = weighted;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            redu[lid] += redu[lid + s];
            red[lid] += red[lid + s];
            red2[lid] += red2[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        if (held) {
            wg_stats[S.wg_base + slot] = WgStat(0u, 0.0, redu[0], 0.0);
        } else {
            wg_stats[S.wg_base + slot] = WgStat(redu[0], red[0], 0u, red2[0]);
        }
    }
    workgroupBarrier();
}

// Grid: x = tile of TC "columns" over heads * d_aug (head k, column j), y = row chunk. Sums
// coef[r, k] * x[r, j] over the chunk's rows; rows whose coefficient is 0 are not read.
// CPU twin: reference::accumulate (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn accumulate(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    accumulate_tile(lid, wid.x, wid.y);
}

// One pass over X per epoch: a workgroup takes one chunk of training rows, scores them and
// decides their coefficients (`margins_rows`, counts in wg_stats slot = chunk), then sums
// coef * x over the same rows for every column tile (`accumulate_tile`): the rows read again
// were read just before, so they come from cache, not memory. Partial sums and counts are
// those of `margins` + `accumulate` with one workgroup per chunk, so `apply` and `finalize`
// follow unchanged. Used where the chunks give enough workgroups (the host decides).
// CPU twin: reference::margins then reference::accumulate over each chunk.
@compute @workgroup_size(WG)
fn fused(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let r0 = wid.x * S.chunk_rows;
    let r1 = min(r0 + S.chunk_rows, S.n);
    margins_rows(lid, wid.x, r0, WG / TPR, r1);
    // The coefficients this workgroup wrote are read by other threads below.
    storageBarrier();
    let tiles = (P.heads * P.d_aug + TC - 1u) / TC;
    for (var t = 0u; t < tiles; t++) {
        accumulate_tile(lid, t, wid.x);
    }
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
    var acc = 0.0;
    if (k < K) {
        for (var r = r0 + lane; r < r1; r += lanes) {
            let a = coef[r * K + k];
            if (a != 0.0) {
                if (j < P.d) {
                    acc += a * xat(r * P.d + j);
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
        partials[(S.chunk_base + chunk) * K * P.d_aug + col] = red[lid];
    }
    workgroupBarrier();
}

// SPARSE training segments, instead of `accumulate`: for every (head k, column j) the sum of
// coef[r, k] * x[r, j] over the column's entries in the CSC copy (rows ascending, TPC threads
// striding, then a fixed tree), and for the bias column over every row; written as this
// segment's one partial (chunk S.chunk_base), so `apply` and `finalize` follow unchanged. No
// atomics: each sum has one owner, so the result is deterministic and exact on integer data.
// Grid: WG / TPC columns per workgroup, folded over y past the per-dimension limit.
// CPU twin: reference::gather (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn gather(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let K = P.heads;
    let len = K * P.d_aug;
    let lane = lid % TPC;
    let col = (wid.x + wid.y * nwg.x) * (WG / TPC) + lid / TPC;
    let k = col / P.d_aug;
    let j = col % P.d_aug;
    var acc = 0.0;
    if (col < len && j < P.d) {
        let rows = P.d + 1u;
        let pos = rows + csc[P.d];
        let c1 = csc[j + 1u];
        for (var p = csc[j] + lane; p < c1; p += TPC) {
            let a = coef[csc[rows + p] * K + k];
            if (a != 0.0) {
                acc += a * xat(csc[pos + p]);
            }
        }
    } else if (col < len) {
        for (var r = lane; r < S.n; r += TPC) {
            let a = coef[r * K + k];
            if (a != 0.0) {
                acc += a * P.bias;
            }
        }
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var s = TPC / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u && col < len) {
        partials[S.chunk_base * len + col] = red[lid];
    }
}

// The update of weight j from its epoch sum s: w += eta * s (multiplicative: the
// log-weights); keeps the pocket's candidate (what the epoch started with: the weights, the
// log-weights, or the running sum when averaging with a pocket), the squared step and the
// running sum after the update.
fn update(j: u32, s: f32) {
    let len = P.heads * P.d_aug;
    if ((P.flags & FLAG_POCKET) != 0u) {
        let both = FLAG_POCKET | FLAG_AVERAGE;
        if ((P.flags & both) == both && ctl.updates > 0u) {
            aux[j] = aux[2u * len + j];
        } else if ((P.flags & FLAG_MULTIPLICATIVE) != 0u) {
            aux[j] = aux[3u * len + j];
        } else {
            aux[j] = w[j];
        }
    }
    let step = P.eta * s;
    if ((P.flags & FLAG_MULTIPLICATIVE) != 0u) {
        aux[3u * len + j] += step;
    } else {
        w[j] += step;
    }
    sq[j] = step * step;
    if ((P.flags & FLAG_AVERAGE) != 0u) {
        aux[2u * len + j] += w[j];
    }
}

// One thread per weight: the chunk partials summed in chunk order, then `update`. Used when
// there are few chunks (the host's choice, see resident.rs).
// CPU twin: reference::apply (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn apply(
    @builtin(local_invocation_index) lid: u32,
    @builtin(global_invocation_id) gid: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let len = P.heads * P.d_aug;
    let j = gid.x;
    if (j < len) {
        var s = 0.0;
        for (var c = 0u; c < P.total_chunks; c++) {
            s += partials[c * len + j];
        }
        update(j, s);
    }
}

// One workgroup per weight (the grid folded over y past 65,535): each thread sums the chunks
// lid, lid + WG, ... in order, then the workgroup adds the threads' sums in a fixed tree, so
// the result is deterministic and exact on integer data, and many chunks take log2(WG)
// dependent steps instead of one per chunk. Used when there are many chunks.
// CPU twin: reference::apply (src/backend/reference.rs; it sums the reference's own chunks in
// order, which equals this on integer data).
@compute @workgroup_size(WG)
fn apply_tree(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let len = P.heads * P.d_aug;
    let j = wid.x + wid.y * nwg.x;
    var s = 0.0;
    if (j < len) {
        for (var c = lid; c < P.total_chunks; c += WG) {
            s += partials[c * len + j];
        }
    }
    red[lid] = s;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (lid < k) {
            red[lid] += red[lid + k];
        }
        workgroupBarrier();
    }
    if (lid == 0u && j < len) {
        update(j, red[0]);
    }
}

// One workgroup: the epoch's mistakes, criterion, held-out mistakes and update norm, the
// Winnow weights, the pocket, and the stop rules (StopState::record in src/backend/mod.rs,
// with the same f32 arithmetic).
// CPU twin: reference::finalize (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn finalize(@builtin(local_invocation_index) lid: u32) {
    if (stopped(lid)) {
        return;
    }
    let len = P.heads * P.d_aug;
    var q = 0.0;
    for (var j = lid; j < len; j += WG) {
        q += sq[j];
    }
    var cnt = 0u;
    var cr = 0.0;
    var held = 0u;
    var wsum = 0.0;
    for (var k = lid; k < P.total_wgs; k += WG) {
        cnt += wg_stats[k].mistakes;
        cr += wg_stats[k].criterion;
        held += wg_stats[k].held_out;
        wsum += wg_stats[k].weighted;
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
    // The monitored figure: EpochStats::monitored on the host.
    var fig = f32(total);
    if ((P.flags & FLAG_HELD_OUT) != 0u) {
        fig = f32(held_total);
    } else if ((P.flags & FLAG_WEIGHTS) != 0u) {
        fig = weighted_total;
    }
    let better = fig < ctl.best;
    let keep_best = better && (P.flags & FLAG_POCKET) != 0u;
    workgroupBarrier();
    if ((P.flags & FLAG_MULTIPLICATIVE) != 0u) {
        // Winnow: the weights used are exp(lw - max lw), in (0, 1], never overflowing.
        var top = -3.0e38;
        for (var j = lid; j < len; j += WG) {
            top = max(top, aux[3u * len + j]);
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
            w[j] = exp(aux[3u * len + j] - m);
        }
    }
    if (keep_best) {
        for (var j = lid; j < len; j += WG) {
            aux[len + j] = aux[j];
        }
    }
    if (lid == 0u) {
        // The epochs the pocket's candidate holds, then the average's count.
        let both = FLAG_POCKET | FLAG_AVERAGE;
        let from_sum = (P.flags & both) == both && ctl.updates > 0u;
        let prev_updates = select(0u, ctl.updates, from_sum);
        if ((P.flags & FLAG_AVERAGE) != 0u) {
            ctl.updates += 1u;
        }
        if (keep_best) {
            ctl.pocket_updates = prev_updates;
        }
        let epochs = ctl.epochs + 1u;
        ctl.epochs = epochs;
        if (better) {
            ctl.best = fig;
            ctl.best_epoch = epochs;
        }
        if (fig < ctl.reference * P.keep_fraction) {
            ctl.reference = fig;
            ctl.wait = 0u;
        } else if (ctl.wait < 0xffffffffu) {
            ctl.wait += 1u;
        }
        let norm = sqrt(q_total);
        let e = ctl.epoch;
        stats[e] = EpochOut(total, crit_total, norm, held_total, weighted_total, 0u, 0u, 0u);
        ctl.epoch = e + 1u;
        if (total == 0u) {
            ctl.done = STOP_CONVERGED;
        } else if (norm < P.tol) {
            ctl.done = STOP_TOLERANCE;
        } else if (P.patience > 0u && ctl.wait >= P.patience
                   && (ctl.best > P.floor || P.floor <= 0.0)) {
            ctl.done = STOP_PATIENCE;
        }
    }
}

// Scores w_k . [x_r, bias] into coef (row-major, heads per row), for prediction and the
// training summary.
// CPU twin: reference::scores (src/backend/reference.rs).
@compute @workgroup_size(WG)
fn scores(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let groups = WG / TPR;
    for (var base = wid.x * groups; base < S.n; base += nwg.x * groups) {
        let r = base + lid / TPR;
        for (var k = 0u; k < P.heads; k++) {
            let s = row_score(lid, r, k, false, S.n);
            if (lid % TPR == 0u && r < S.n) {
                coef[r * P.heads + k] = s;
            }
        }
    }
}
