// rosenblatt: batch-perceptron kernels (margins, accumulate, apply, finalize) and scoring.
//
// One epoch is four dispatches: `margins` and `accumulate` once per X segment, then `apply`
// and `finalize` once. Many epochs are recorded in one submit; `finalize` takes the stop
// decision (the twin of BatchRule::stop in src/backend/mod.rs) and every kernel returns at
// once when `ctl.done` is set, so epochs after convergence cost only empty dispatches.
//
// Rows are row-major f32 with an implicit last column of value `P.bias` (1 with a bias,
// 0 without). A mistake is y * (w . x) <= 0.
//
// Keep the structs in sync with src/backend/gpu/kernels.rs.

override WG: u32 = 256u;   // workgroup size (checked against the device limits by the host)
override TPR: u32 = 32u;   // threads per row in `margins` and `scores`: a power of two <= WG
override TC: u32 = 64u;    // columns per tile in `accumulate`: a power of two <= WG

struct Params {
    d: u32,            // features
    d_aug: u32,        // d + 1 (the bias column)
    bias: f32,         // value of the implicit last column
    eta: f32,          // learning rate
    tol: f32,          // stop when ||eta * sum|| < tol (0: off)
    total_chunks: u32, // rows of `partials` over all segments
    total_wgs: u32,    // entries of `wg_stats` over all segments
    _pad: u32,
}

struct Segment {
    n: u32,            // rows in this segment
    chunk_base: u32,   // first `partials` row of this segment
    wg_base: u32,      // first `wg_stats` entry of this segment
    chunk_rows: u32,   // rows per `accumulate` chunk
}

struct Control {
    done: u32,         // 0 running, 1 converged (no mistake), 2 update under tol
    epoch: u32,        // epochs run in this submit
}

struct WgStat {
    mistakes: u32,
    criterion: f32,
}

struct EpochOut {
    mistakes: u32,
    criterion: f32,
    update_norm: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> ctl: Control;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;
@group(0) @binding(4) var<storage, read_write> wg_stats: array<WgStat>;
@group(0) @binding(5) var<storage, read_write> sq: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<EpochOut>;

@group(1) @binding(0) var<uniform> S: Segment;
@group(1) @binding(1) var<storage, read> x: array<f32>;
@group(1) @binding(2) var<storage, read> y: array<f32>;
// Per-row output: y_i on a mistake, else 0 (`margins`); the decision value (`scores`).
@group(1) @binding(3) var<storage, read_write> coef: array<f32>;

var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;
var<workgroup> redu: array<u32, WG>;
var<workgroup> flag: u32;

// True (uniformly across the workgroup) once training has stopped in this submit.
fn stopped(lid: u32) -> bool {
    if (lid == 0u) {
        flag = ctl.done;
    }
    return workgroupUniformLoad(&flag) != 0u;
}

// w[..d] . x[r] summed by the TPR threads of a row group; the result is valid in lane 0.
// Must be called by the whole workgroup (it has barriers); rows past S.n contribute 0.
fn row_dot(lid: u32, r: u32) -> f32 {
    let lane = lid % TPR;
    var acc = 0.0;
    if (r < S.n) {
        let off = r * P.d;
        for (var j = lane; j < P.d; j += TPR) {
            acc += x[off + j] * w[j];
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
    let v = red[lid];
    workgroupBarrier();
    return v;
}

@compute @workgroup_size(WG)
fn margins(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let lane = lid % TPR;
    let groups = WG / TPR;
    var count = 0u;
    var crit = 0.0;
    for (var base = wid.x * groups; base < S.n; base += nwg.x * groups) {
        let r = base + lid / TPR;
        let s = row_dot(lid, r);
        if (lane == 0u && r < S.n) {
            let yr = y[r];
            let m = yr * (s + w[P.d] * P.bias);
            if (m <= 0.0) {
                coef[r] = yr;
                count += 1u;
                crit -= m;
            } else {
                coef[r] = 0.0;
            }
        }
    }
    redu[lid] = count;
    red[lid] = crit;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            redu[lid] += redu[lid + s];
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        wg_stats[S.wg_base + wid.x] = WgStat(redu[0], red[0]);
    }
}

// Grid: x = column tile (TC columns), y = row chunk. Sums coef[r] * x[r, j] over the chunk's
// mistake rows; rows with coef 0 are not read.
@compute @workgroup_size(WG)
fn accumulate(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let c = lid % TC;
    let lane = lid / TC;
    let lanes = WG / TC;
    let j = wid.x * TC + c;
    let r0 = wid.y * S.chunk_rows;
    let r1 = min(r0 + S.chunk_rows, S.n);
    var acc = 0.0;
    if (j < P.d_aug) {
        for (var r = r0 + lane; r < r1; r += lanes) {
            let k = coef[r];
            if (k != 0.0) {
                if (j < P.d) {
                    acc += k * x[r * P.d + j];
                } else {
                    acc += k * P.bias;
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
    if (lane == 0u && j < P.d_aug) {
        partials[(S.chunk_base + wid.y) * P.d_aug + j] = red[lid];
    }
}

// One thread per weight: sum the chunk partials in chunk order, w += eta * sum.
@compute @workgroup_size(WG)
fn apply(
    @builtin(local_invocation_index) lid: u32,
    @builtin(global_invocation_id) gid: vec3<u32>,
) {
    if (stopped(lid)) {
        return;
    }
    let j = gid.x;
    if (j < P.d_aug) {
        var s = 0.0;
        for (var c = 0u; c < P.total_chunks; c++) {
            s += partials[c * P.d_aug + j];
        }
        let step = P.eta * s;
        w[j] += step;
        sq[j] = step * step;
    }
}

// One workgroup: the epoch's mistakes, criterion and update norm, and the stop decision.
@compute @workgroup_size(WG)
fn finalize(@builtin(local_invocation_index) lid: u32) {
    if (stopped(lid)) {
        return;
    }
    var q = 0.0;
    for (var j = lid; j < P.d_aug; j += WG) {
        q += sq[j];
    }
    var cnt = 0u;
    var cr = 0.0;
    for (var k = lid; k < P.total_wgs; k += WG) {
        cnt += wg_stats[k].mistakes;
        cr += wg_stats[k].criterion;
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
    if (lid == 0u) {
        let norm = sqrt(red[0]);
        let e = ctl.epoch;
        stats[e] = EpochOut(redu[0], red2[0], norm, 0u);
        ctl.epoch = e + 1u;
        if (redu[0] == 0u) {
            ctl.done = 1u;
        } else if (norm < P.tol) {
            ctl.done = 2u;
        }
    }
}

// Decision values w . [x_r, bias] into coef, for prediction and the training summary.
@compute @workgroup_size(WG)
fn scores(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let groups = WG / TPR;
    for (var base = wid.x * groups; base < S.n; base += nwg.x * groups) {
        let r = base + lid / TPR;
        let s = row_dot(lid, r);
        if (lid % TPR == 0u && r < S.n) {
            coef[r] = s + w[P.d] * P.bias;
        }
    }
}
