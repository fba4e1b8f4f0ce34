// rosenblatt: subgroup helpers shared by the modules that sum lanes by shuffles (appended by
// the host after batch_subgroup.wgsl and steps_subgroup.wgsl, only where the device has
// wgpu::Features::SUBGROUP). Each such module declares `override WG: u32` (its workgroup).

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

// Element j of a halving step: keep the lower or upper half's value (`upper`), send the other
// half's to the partner lane `off` away, add what it sent.
fn halve(p: ptr<function, array<f32, 16>>, j: u32, half: u32, off: u32, upper: bool) {
    let lo = (*p)[j];
    let hi = (*p)[j + half];
    (*p)[j] = select(lo, hi, upper) + subgroupShuffleXor(select(hi, lo, upper), off);
}

// What `subgroup_sums` leaves a lane: the head whose sum over the subgroup it holds, and
// whether it is the lane that stores it. `head == ALL_HEADS`: every head's sum is in p, in
// every lane.
struct HeadSum {
    head: u32,
    sum: f32,
    lead: bool,
}

const ALL_HEADS: u32 = 0xffffffffu;

// The n (<= 16) values p of every lane summed over the subgroup (`sl` the lane, `sgs` lanes).
// Recursive halving (P2 = n rounded up to a power of two, at most the subgroup): at each of
// log2 P2 steps a lane keeps half of its values and adds its partner's copy of that half, so
// that after them a lane holds one head's sum over the lanes that differ in those bits; a
// butterfly over the remaining low bits completes it. P2 - 1 + log2(sgs / P2) shuffles where
// subgroupAdd takes n log2(sgs) (16 against 50 for n = 10 on 32 lanes). The steps are written
// out, without loops, so that the array indices are constants. Where P2 exceeds the
// subgroup, subgroupAdd per value (ALL_HEADS).
fn subgroup_sums(p: ptr<function, array<f32, 16>>, n: u32, sl: u32, sgs: u32) -> HeadSum {
    let p2 = 1u << (32u - countLeadingZeros(max(n, 1u) - 1u));
    if (p2 > sgs) {
        for (var k = 0u; k < n; k++) {
            (*p)[k] = subgroupAdd((*p)[k]);
        }
        return HeadSum(ALL_HEADS, 0.0, sl == 0u);
    }
    var off = sgs / 2u;
    var h = 0u;
    if (p2 >= 16u) {
        let up = (sl & off) != 0u;
        halve(p, 0u, 8u, off, up);
        halve(p, 1u, 8u, off, up);
        halve(p, 2u, 8u, off, up);
        halve(p, 3u, 8u, off, up);
        halve(p, 4u, 8u, off, up);
        halve(p, 5u, 8u, off, up);
        halve(p, 6u, 8u, off, up);
        halve(p, 7u, 8u, off, up);
        h += select(0u, 8u, up);
        off >>= 1u;
    }
    if (p2 >= 8u) {
        let up = (sl & off) != 0u;
        halve(p, 0u, 4u, off, up);
        halve(p, 1u, 4u, off, up);
        halve(p, 2u, 4u, off, up);
        halve(p, 3u, 4u, off, up);
        h += select(0u, 4u, up);
        off >>= 1u;
    }
    if (p2 >= 4u) {
        let up = (sl & off) != 0u;
        halve(p, 0u, 2u, off, up);
        halve(p, 1u, 2u, off, up);
        h += select(0u, 2u, up);
        off >>= 1u;
    }
    if (p2 >= 2u) {
        let up = (sl & off) != 0u;
        halve(p, 0u, 1u, off, up);
        h += select(0u, 1u, up);
        off >>= 1u;
    }
    // The lanes that share a head: a butterfly over the low log2(sgs / P2) bits.
    var s = (*p)[0];
    for (; off > 0u; off >>= 1u) {
        s += subgroupShuffleXor(s, off);
    }
    return HeadSum(h, s, (sl & (sgs / p2 - 1u)) == 0u && h < n);
}
