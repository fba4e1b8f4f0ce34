// rosenblatt: the online perceptron (binary, multiclass, one-vs-rest; averaged or not), and
// the passive-aggressive and AROW rules, in steps of B rows, in S streams: one workgroup a
// stream. Each epoch the host writes the row
// order and each stream's part of it [lo, hi); a stream walks its part in steps of B rows:
// the step's B x K scores by the weights the step started with (`sc`, workgroup memory), the
// rule on one thread a row (scores turned into coefficients in place), then every thread adds
// coefficient x row to its columns of the stream's weights, rows in order (the sequential
// rule's order for each weight), and with averaging adds the weights after the step to the
// stream's sums. `mix` then sets every stream's weights to their mean (summed in stream
// order). The model is the mean over the streams of sums / steps (the host divides). AROW
// keeps each weight's confidence in `sums` (no average), reads the row's confidence
// x^T Sigma x beside its scores, and `mix` takes the confidences' mean too.
//
// The module is this file with the rows' form, steps_dense.wgsl (f32 rows, row-major, d a row,
// in up to four bindings of P.part_rows rows) or steps_csr.wgsl (compressed sparse rows),
// and the `steps` entry point's variant: steps_tree.wgsl (a workgroup's threads share out the
// step's dot products and columns: any adapter), or for dense rows steps_subgroup.wgsl and
// subgroups.wgsl (where the device has subgroups: each thread holds its columns of the
// stream's weights in registers and the lanes' sums meet by shuffles), appended by the host.
// Each rows' file holds `steps_by_threads` and `catch_up`.
//
// CPU twins of the same names: backend::steps::{steps, mix} (crates/backend/src/steps.rs); tests
// keep them equal bit for bit on integer data. The bias column's value is P.bias (1, or 0
// without a bias); rows' weights (sample weight, and class weights) ride with the labels.
//
// Loops run to bounds the host set in P or in `stat` (below 2^31), by positive steps.

override WG: u32 = 256u;
const MAX_STEP: u32 = 2048u; // B x K scores of a step (checked by the host)
const AROW_STEP: u32 = 1024u; // AROW: B x K scores, their confidences at sc[AROW_STEP + p]

const RULE_BINARY: u32 = 0u;
const RULE_OVR: u32 = 1u;
const RULE_MC_ALL: u32 = 2u;
const RULE_MC_ARGMAX: u32 = 3u;

const UPDATE_AROW: u32 = 4u; // `update`: 0 the perceptron, 1, 2, 3 PA, PA-I, PA-II, 4 AROW

struct StepParams {
    n: u32,          // rows bound
    d: u32,          // features
    heads: u32,      // K
    rule: u32,       // RULE_*
    streams: u32,    // S
    step_rows: u32,  // B
    average: u32,    // 1: keep the sums of the weights after each step
    part_rows: u32,  // rows in each of the bindings x0 .. x3 (the last may hold fewer)
    tau: f32,        // a mistake is a margin <= tau
    eta: f32,        // learning rate
    bias: f32,       // the bias column's value
    max_steps: u32,  // steps a stream takes in one dispatch (the host dispatches again)
    weighted: u32,   // 1: `y` holds (label, row weight, weight in the own head) a row; 2: and
                     // the row's squared norm (bias column counted)
    update: u32,     // 0: the perceptron; 1, 2, 3: passive-aggressive PA, PA-I, PA-II; 4: AROW
    update_c: f32,   // PA-I's and PA-II's C, AROW's r
    _pad2: u32,
}

struct StreamStat {
    lo: u32,         // the stream's next position in `order` (host, then each dispatch)
    hi: u32,         // one past its last (host)
    mistakes: u32,   // this epoch's mistakes (one-vs-rest: per head)
    wrong_rows: u32, // one-vs-rest: rows whose first highest head is not their class
    steps: u32,      // steps taken since binding
    criterion: f32,  // this epoch's criterion (weighted), summed over the stream's rows
    weighted: f32,   // this epoch's mistakes' weights, summed
    lanes: u32,      // 1: the last dispatch ran this stream by subgroup lanes
}

@group(0) @binding(0) var<uniform> P: StepParams;
@group(0) @binding(2) var<storage, read> y: array<f32>; // labels (with weights: see P)
@group(0) @binding(3) var<storage, read> order: array<u32>;
@group(0) @binding(4) var<storage, read_write> w: array<f32>;    // streams x K (d + 1)
@group(0) @binding(5) var<storage, read_write> sums: array<f32>; // streams x K (d + 1): the
                                                                 // sums, or AROW's confidences
@group(0) @binding(6) var<storage, read_write> stat: array<StreamStat>;
var<workgroup> sc: array<f32, MAX_STEP>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_v: array<u32, WG>;
var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_g: array<f32, WG>;

// The thread's counts of the rows it decides.
var<private> n_miss: u32;
var<private> n_wrong: u32;
var<private> crit: f32;
var<private> n_weighted: f32;

// Words of `y` a row: the label, then (weighted) its weights, then (passive-aggressive) its
// squared norm.
fn y_stride() -> u32 {
    return select(1u, P.weighted + 2u, P.weighted != 0u);
}

// Row `row`'s label, and its weight in every head and in its own class's head (one-vs-rest).
fn label(row: u32) -> f32 {
    return y[y_stride() * row];
}

fn row_weights(row: u32) -> vec2<f32> {
    if (P.weighted != 0u) {
        let o = y_stride() * row;
        return vec2(y[o + 1u], y[o + 2u]);
    }
    return vec2(1.0, 1.0);
}

// The rule on the K scores at sc[o..o + K] of row `row`: the scores become the coefficients
// of x, times the row's weight in the head (0 where the head is not updated). The twin of
// backend::row_rule (the passive-aggressive rule: `decide_pa`; AROW: `decide_arow`).
fn decide(o: u32, row: u32) {
    if (P.update == UPDATE_AROW) {
        decide_arow(o, row);
        return;
    }
    if (P.update != 0u) {
        decide_pa(o, row);
        return;
    }
    let K = P.heads;
    let yv = label(row);
    let rw = row_weights(row);
    let t = u32(max(yv, 0.0));
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = sc[o];
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (sk > s_top) {
                top = k;
                s_top = sk;
            }
            var yk = yv;
            if (P.rule == RULE_OVR) {
                yk = select(-1.0, 1.0, k == t);
            }
            let m = yk * sk;
            var c = 0.0;
            if (m <= P.tau) {
                var wk = rw.x;
                if (P.rule == RULE_OVR && k == t) {
                    wk = rw.y;
                }
                c = yk * wk;
                n_miss += 1u;
                crit -= m * wk;
                n_weighted += wk;
            }
            sc[o + k] = c;
        }
        if (P.rule == RULE_OVR && top != t) {
            n_wrong += 1u;
        }
        return;
    }
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
    let m = s_true - s_best;
    let miss = m <= P.tau;
    if (miss) {
        n_miss += 1u;
        crit -= m * rw.x;
        n_weighted += rw.x;
    }
    for (var k = 0u; k < K; k++) {
        var c = 0.0;
        if (miss) {
            if (k == t) {
                c = rw.x;
            } else if (P.rule == RULE_MC_ALL || k == best) {
                c = -rw.x;
            }
        }
        sc[o + k] = c;
    }
}

// The passive-aggressive step for hinge loss `loss` when a unit step moves the margin by `q`.
fn pa_size(loss: f32, q: f32) -> f32 {
    switch P.update {
        case 1u: {
            return loss / q;
        }
        case 2u: {
            return min(loss / q, P.update_c);
        }
        default: {
            return loss / (q + 0.5 / P.update_c);
        }
    }
}

// The passive-aggressive rule on the K scores at sc[o..o + K] of row `row`: a head (binary,
// one-vs-rest) or the row (K classes, jointly: the true class and the highest wrong one, or
// every wrong one) steps where its margin is below 1, by the step size times the sign times
// the row's weight in the head. The twin of backend::pa_rule.
fn decide_pa(o: u32, row: u32) {
    let K = P.heads;
    let yv = label(row);
    let rw = row_weights(row);
    let sq = y[y_stride() * row + 3u];
    let t = u32(max(yv, 0.0));
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = sc[o];
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (sk > s_top) {
                top = k;
                s_top = sk;
            }
            var yk = yv;
            if (P.rule == RULE_OVR) {
                yk = select(-1.0, 1.0, k == t);
            }
            let m = yk * sk;
            var c = 0.0;
            if (m <= 1.0) {
                let loss = 1.0 - m;
                if (loss > 0.0) {
                    var wk = rw.x;
                    if (P.rule == RULE_OVR && k == t) {
                        wk = rw.y;
                    }
                    n_miss += 1u;
                    crit += loss * wk;
                    n_weighted += wk;
                    if (sq > 0.0) {
                        c = pa_size(loss, sq) * yk * wk;
                    }
                }
            }
            sc[o + k] = c;
        }
        if (P.rule == RULE_OVR && top != t) {
            n_wrong += 1u;
        }
        return;
    }
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
    var size = 0.0;
    if (s_true - s_best <= 1.0) {
        // One loss: 1 - the signed scores of the heads that step, summed in head order.
        var m = 0.0;
        for (var k = 0u; k < K; k++) {
            if (k == t) {
                m += sc[o + k];
            } else if (P.rule == RULE_MC_ALL || k == best) {
                m -= sc[o + k];
            }
        }
        let loss = 1.0 - m;
        if (loss > 0.0) {
            n_miss += 1u;
            crit += loss * rw.x;
            n_weighted += rw.x;
            if (sq > 0.0) {
                size = pa_size(loss, 2.0 * sq);
            }
        }
    }
    for (var k = 0u; k < K; k++) {
        var c = 0.0;
        if (k == t) {
            c = size * rw.x;
        } else if (P.rule == RULE_MC_ALL || k == best) {
            c = -size * rw.x;
        }
        sc[o + k] = c;
    }
}

// AROW's rule on the K scores at sc[o..o + K] of row `row` and their confidences
// x^T Sigma x at sc[AROW_STEP + o..]: a head (binary, one-vs-rest) steps where its margin
// m is below 1, with beta = c / (c v + r) (c the row's weight in the head) and
// alpha = (1 - m) beta; its score becomes eta alpha y, its confidence beta (0, 0 where it
// does not step). The twin of backend::arow_rule.
fn decide_arow(o: u32, row: u32) {
    let K = P.heads;
    let yv = label(row);
    let rw = row_weights(row);
    let t = u32(max(yv, 0.0));
    var top = 0u;
    var s_top = sc[o];
    for (var k = 0u; k < K; k++) {
        let sk = sc[o + k];
        if (sk > s_top) {
            top = k;
            s_top = sk;
        }
        var yk = yv;
        if (P.rule == RULE_OVR) {
            yk = select(-1.0, 1.0, k == t);
        }
        let loss = 1.0 - yk * sk;
        var a = 0.0;
        var beta = 0.0;
        if (loss > 0.0) {
            var wk = rw.x;
            if (P.rule == RULE_OVR && k == t) {
                wk = rw.y;
            }
            n_miss += 1u;
            crit += loss * wk;
            n_weighted += wk;
            beta = wk / (wk * sc[AROW_STEP + o + k] + P.update_c);
            a = P.eta * loss * beta * yk;
        }
        sc[o + k] = a;
        sc[AROW_STEP + o + k] = beta;
    }
    if (P.rule == RULE_OVR && top != t) {
        n_wrong += 1u;
    }
}

// AROW's update of weight `at` by row value `x` with coefficient `a` and `beta`:
// w += a sigma x, then sigma -= beta (sigma x)^2. (Twin: the update in backend::steps::steps.)
fn arow_update(at: u32, x: f32, a: f32, beta: f32) {
    if (beta != 0.0) {
        let sx = sums[at] * x;
        w[at] += a * sx;
        sums[at] -= beta * sx * sx;
    }
}

// Up to P.max_steps steps of stream `s` over its part of `order`, from stat.lo on; the host
// dispatches until every stream reaches its hi (software adapters cut loops that run long, so
// there a dispatch takes a few steps). `sgs`: the subgroup size where the workgroup's
// subgroups allow lane sums by shuffles (subgroup_layout), else 0. By subgroup lanes where
// the variant and the shape allow (`steps_by_lanes`), else by the workgroup's threads.
// CPU twin: backend::steps::steps.
fn steps_main(lid: u32, s: u32, sgs: u32) {
    let lo = stat[s].lo;
    let hi = min(stat[s].hi, lo + P.max_steps * P.step_rows);
    n_miss = 0u;
    n_wrong = 0u;
    crit = 0.0;
    n_weighted = 0.0;
    var taken = steps_by_lanes(lid, s, lo, hi, sgs);
    let lanes = taken != NOT_TAKEN;
    if (!lanes) {
        taken = steps_by_threads(lid, s, lo, hi);
    }
    // The stream's counts, summed over its threads in a fixed tree (row r of a step is
    // decided by thread r mod WG).
    red_u[lid] = n_miss;
    red_v[lid] = n_wrong;
    red_f[lid] = crit;
    red_g[lid] = n_weighted;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if (lid < h) {
            red_u[lid] += red_u[lid + h];
            red_v[lid] += red_v[lid + h];
            red_f[lid] += red_f[lid + h];
            red_g[lid] += red_g[lid + h];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        stat[s].lo = hi;
        stat[s].mistakes += red_u[0];
        stat[s].wrong_rows += red_v[0];
        stat[s].criterion += red_f[0];
        stat[s].weighted += red_g[0];
        stat[s].steps += taken;
        stat[s].lanes = select(0u, 1u, lanes);
    }
}

// `steps_by_lanes` did not run the stream.
const NOT_TAKEN: u32 = 0xffffffffu;

// Every stream's weights become their mean, summed in stream order, once each weight's
// average is complete (`catch_up`: lazily kept sums, sparse rows); AROW's confidences too.
// CPU twins: backend::steps::{catch_up, mix}.
@compute @workgroup_size(WG)
fn mix(@builtin(global_invocation_id) gid: vec3<u32>) {
    let len = P.heads * (P.d + 1u);
    let i = gid.x;
    if (i >= len) {
        return;
    }
    var acc = 0.0;
    for (var s = 0u; s < P.streams; s++) {
        catch_up(s, i);
        acc += w[s * len + i];
    }
    let m = acc / f32(P.streams);
    for (var s = 0u; s < P.streams; s++) {
        w[s * len + i] = m;
    }
    if (P.update == UPDATE_AROW) {
        var conf = 0.0;
        for (var s = 0u; s < P.streams; s++) {
            conf += sums[s * len + i];
        }
        let c = conf / f32(P.streams);
        for (var s = 0u; s < P.streams; s++) {
            sums[s * len + i] = c;
        }
    }
}
