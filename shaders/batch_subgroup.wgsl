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
