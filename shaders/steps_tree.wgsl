// rosenblatt: the stepped perceptron's entry point for adapters without subgroups (appended to
// steps.wgsl by the host): every step by the workgroup's threads, the weights in storage.
// CPU twin: backend::steps::steps (crates/backend/src/steps.rs).

// Lanes' sums need subgroup shuffles.
fn steps_by_lanes(lid: u32, s: u32, lo: u32, hi: u32, sgs: u32) -> u32 {
    return NOT_TAKEN;
}

@compute @workgroup_size(WG)
fn steps(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    steps_main(lid, wid.x, 0u);
}
