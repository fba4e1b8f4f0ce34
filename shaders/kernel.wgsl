// rosenblatt: dual (kernel) perceptron scores, computed on the fly without a Gram matrix.
//
// f_i = sum over s < m of coef[s] * (K(xs[idx[s]], xe[i]) + bias2), for every eval row i.
// Each workgroup takes WG eval rows (one per thread, striding over the rows); the support
// vectors are streamed through workgroup memory in tiles of TJ vectors x TD features shared
// by the whole workgroup. svsq holds the squared norm of every row of xs.
//
// CPU twin: `kscores` in crates/backend/src/reference/kernel.rs. KParams, the kernel codes and the tile size
// are checked against crates/backend/src/gpu/mirror.rs and Kernel::code by its tests.

override WG: u32 = 256u;
const TJ: u32 = 16u;   // support vectors per tile
const TD: u32 = 64u;   // features per tile

const KERNEL_LINEAR: u32 = 0u;
const KERNEL_POLY: u32 = 1u;
const KERNEL_RBF: u32 = 2u;

struct KParams {
    n: u32,        // eval rows
    m: u32,        // support vectors
    d: u32,        // features
    kind: u32,     // KERNEL_*
    gamma: f32,
    coef0: f32,
    degree: u32,
    bias2: f32,    // bias column value squared, added to every kernel value
}

@group(0) @binding(0) var<uniform> K: KParams;
@group(0) @binding(1) var<storage, read> xe: array<f32>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> idx: array<u32>;
@group(0) @binding(4) var<storage, read> coef: array<f32>;
@group(0) @binding(5) var<storage, read> svsq: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> tile: array<f32, 1024>;  // TJ * TD

fn kern(xz: f32, xx: f32, zz: f32) -> f32 {
    if (K.kind == KERNEL_POLY) {
        // Repeated products: pow() is undefined for a negative base.
        let b = K.gamma * xz + K.coef0;
        var p = 1.0;
        for (var k = 0u; k < K.degree; k++) {
            p *= b;
        }
        return p;
    } else if (K.kind == KERNEL_RBF) {
        return exp(-K.gamma * max(xx + zz - 2.0 * xz, 0.0));
    }
    return xz;
}

// CPU twin: reference::kscores (crates/backend/src/reference/kernel.rs).
@compute @workgroup_size(WG)
fn kscores(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    for (var base = wid.x * WG; base < K.n; base += nwg.x * WG) {
        let i = base + lid;
        let live = i < K.n;
        var xx = 0.0;
        if (live) {
            for (var j = 0u; j < K.d; j++) {
                let v = xe[i * K.d + j];
                xx += v * v;
            }
        }
        var f = 0.0;
        for (var s0 = 0u; s0 < K.m; s0 += TJ) {
            var acc: array<f32, TJ>;
            for (var j0 = 0u; j0 < K.d; j0 += TD) {
                for (var t = lid; t < TJ * TD; t += WG) {
                    let s = s0 + t / TD;
                    let j = j0 + t % TD;
                    var v = 0.0;
                    if (s < K.m && j < K.d) {
                        v = xs[idx[s] * K.d + j];
                    }
                    tile[t] = v;
                }
                workgroupBarrier();
                if (live) {
                    let jn = min(TD, K.d - j0);
                    for (var jj = 0u; jj < jn; jj++) {
                        let xv = xe[i * K.d + j0 + jj];
                        for (var s = 0u; s < TJ; s++) {
                            acc[s] += xv * tile[s * TD + jj];
                        }
                    }
                }
                workgroupBarrier();
            }
            if (live) {
                for (var s = 0u; s < TJ; s++) {
                    let sg = s0 + s;
                    if (sg < K.m) {
                        f += coef[sg] * (kern(acc[s], xx, svsq[idx[sg]]) + K.bias2);
                    }
                }
            }
        }
        if (live) {
            out[i] = f;
        }
    }
}
