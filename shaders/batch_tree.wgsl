// rosenblatt: the batch module's entry points for adapters without subgroups (appended to
// batch.wgsl by the host): the register pass's lane sums go through a workgroup tree.
// CPU twins: reference::epoch and reference::scores (crates/backend/src/reference/batch_register.rs).

// The KT values of each thread summed over the TPR threads of its row group (valid in lane 0).
fn lane_sums(p: array<f32, KT_MAX>, lid: u32, lane: u32, sgs: u32) -> array<f32, KT_MAX> {
    return lane_sums_tree(p, lid, lane);
}

// Rows in flight need subgroup shuffles: without them the register pass runs by steps.
fn rows_in_flight(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) -> bool {
    return false;
}

// So do tiles of rows (their partial sums are reduced by subgroup shuffles).
fn rows_by_tile(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) -> bool {
    return false;
}

@compute @workgroup_size(WG)
fn epoch(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    epoch_main(lid, wid.x, 0u);
    flush(E_EPOCH);
}

@compute @workgroup_size(WG)
fn scores(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    scores_main(lid, wid.x, nwg.x, 0u);
    flush(E_SCORES);
}
