// rosenblatt: batch-perceptron kernels and scoring, for K weight vectors ("heads": K = 1 for a
// binary perceptron, K classes for multiclass or one-vs-rest). Weights are stored head after
// head, each d + 1 long (the last is the bias).
//
// This file is one of two parts of the batch module: the host appends batch_tree.wgsl (lane
// sums by a workgroup tree; any adapter) or batch_subgroup.wgsl (lane sums by subgroup
// shuffles; adapters with the subgroup feature). Those files hold the entry points that take
// subgroup built-ins (`epoch`, `scores`) and `lane_sums`.
//
// One epoch over dense rows is `epoch` once per segment of rows, then `apply` and `finalize`:
// three dispatches. `epoch` is the register pass: a persistent grid of G workgroups, each
// taking one run of the segment's rows. Each thread holds V units (4 values each) of a row in
// registers (loaded once: vec4 words for f32, vec2 words of halves, one word of four bytes),
// the weights of KT heads for those units, and KT x V accumulators. Per row group: the KT
// partial dot products are summed over the TPR threads of the row together (`lane_sums`), the
// rule turns the K scores into coefficients (one thread per row, in workgroup memory), and
// every thread adds coefficient x its units to its accumulators from the same registers. X is
// read once; nothing per row goes through global memory but the label and the row weight.
// At the end the row groups' accumulators are added in a fixed order and each workgroup
// writes ONE partial (K (d + 1) sums) and one WgStat. `apply` sums the partials per weight in
// a fixed order (coalesced: a warp reads consecutive weights of one partial), `finalize`
// takes the epoch's statistics and the stop decision. When K > KT, the heads go in HB blocks
// of KT threads' groups that share each row through workgroup memory (`xs`).
//
// Rows in flight: where one head block holds a row (K <= KT) and a row's TPR lanes lie in one
// subgroup, the subgroup module runs the row loop without workgroup memory or barriers
// (`rows_in_flight` in batch_subgroup.wgsl, RT = 1, 2 or 4 rows loaded a thread before the
// first is used): the lanes' sums are a butterfly of shuffles, so every lane holds the row's
// scores and applies the rule itself (`decide_regs`). Tiles: where one head block holds a row
// that spans several subgroups (K = 10 at d = 784), the subgroup module takes TT rows a row
// group at a time (`rows_by_tile`, TT = 4, 8 or 16): three barriers a tile instead of two a
// row. Elsewhere (no subgroups, head blocks, several units a thread by default) the loop goes
// by steps (`rows_by_step`): the rule on one lane a row, through workgroup memory, between two
// barriers.
//
// Loops: every loop here runs to a bound that is a constant, an override, a size the host
// set in P or S, or a CSR offset the host validated, all below 2^31, by a positive step of
// at most 2^16 (or halves a power of two), so every loop ends without naga's loop counters;
// on a GPU the modules are built without them (ShaderChecks::NoLoopCounters, bounds checks
// kept): the counters kept compilers from unrolling the loops over the per-thread arrays,
// which then lived in local memory (H200: 3.66 against 1.64 ms an epoch at K = 10,
// docs/performance.md). Software adapters and the tests build them with every check.
//
// Rows whose K x V accumulators do not fit the register budget (very wide rows with many
// heads), and CSR rows, take the two-kernel path: `margins` (scores and coefficients into
// `coef`) then `accumulate` (dense) or `gather` (CSR, over a column-major copy): X is read
// twice there.
//
// Many epochs are recorded in one submit; `finalize` takes the stop decision (BatchRule::stop
// in src/backend/mod.rs) and every entry point returns at once when `ctl.done` is set, so the
// epochs after a stop cost one load per workgroup.
//
// Every entry point has a plain CPU twin of the same name in src/backend/reference.rs
// (`margins`, `accumulate`, `gather`, `epoch`, `apply`, `finalize`, `scores`); tests keep the
// GPU bit-identical to them on integer data.
//
// Dense rows are row-major, each padded with zeros to a whole number of units (4 values:
// P.units per row), with an implicit last column of value `P.bias` (1 with a bias, 0
// without), stored as f32 or as a narrower exact copy (f16, u8, i8) packed into 32-bit words,
// widened exactly to f32: the arithmetic is f32 whatever the storage. CSR values are packed
// the same way without padding.
//
// COUNT = 1 builds the instrumented variant: every load and store of a storage buffer adds
// its 32-bit words to a per-thread tally by category (X, indices, labels and row weights,
// coefficients, partials, weights, control), added into `counters` at the end of the entry
// point (64-bit sums). Off (0) in normal pipelines, where the tallies fold away.
//
// The structs, rule and flag codes and MAX_HEADS are checked against src/backend/gpu/mirror.rs,
// HeadRule::code and backend::MAX_HEADS by the tests in mirror.rs (naga's layouter).

override WG: u32 = 256u;   // workgroup size (checked against the device limits by the host)
override TPR: u32 = 32u;   // threads per row: a power of two <= WG
override TC: u32 = 64u;    // columns per tile in `accumulate`: a power of two <= WG
override STORAGE: u32 = 0u; // how X is stored: STORAGE_* (Storage::code on the host)
override SPARSE: u32 = 0u;  // 1: X is CSR rows (`csr`), training segments have a CSC copy (`csc`)
override TPC: u32 = 1u;     // threads per column in `gather`: a power of two <= WG
override V: u32 = 0u;       // register pass: units per thread and row (1..=V_MAX); 0: not used
override KT: u32 = 1u;      // register pass: heads per thread (1..=KT_MAX, KT * V <= KV_MAX)
override XS: u32 = 1u;      // register pass: units staged in `xs` (WG / 2 * V when HB > 1, else 1)
override COUNT: u32 = 0u;   // 1: the instrumented variant (counts words loaded and stored)
override RT: u32 = 0u;      // register pass with subgroups: rows a thread loads before it uses the first (1, 2, 4; 0: off)
override TT: u32 = 0u;      // register pass with subgroups, rows wider than a subgroup: rows a tile per row group (4, 8, 16; 0: off)

const V_MAX: u32 = 8u;
const KT_MAX: u32 = 12u;
const KV_MAX: u32 = 12u;
const RT_MAX: u32 = 4u;   // rows in flight a thread: 1, 2 or 4 (one word of labels)

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

// What the register pass does with a row group's scores.
const MODE_TRAIN: u32 = 0u;   // the rule, coefficients, accumulators, one partial
const MODE_HELD: u32 = 1u;    // the prediction rule: count the rows predicted wrong
const MODE_SCORES: u32 = 2u;  // write the scores to `coef`

// Traffic categories of the instrumented variant (gpu/mirror.rs: Category).
const CAT_X: u32 = 0u;        // the values of X
const CAT_INDEX: u32 = 1u;    // CSR row starts and columns, the CSC copy
const CAT_ROWS: u32 = 2u;     // labels and row weights
const CAT_COEF: u32 = 3u;     // per-row coefficients or scores
const CAT_PARTIAL: u32 = 4u;  // partial sums
const CAT_WEIGHTS: u32 = 5u;  // weights, pocket, average, log-weights, squared steps
const CAT_CONTROL: u32 = 6u;  // control word, per-workgroup and per-epoch statistics
const NCAT: u32 = 7u;

// Entry points as the counters index them (gpu/batch.rs: Entry::code).
const E_MARGINS: u32 = 0u;
const E_ACCUMULATE: u32 = 1u;
const E_GATHER: u32 = 2u;
const E_EPOCH: u32 = 3u;
const E_APPLY: u32 = 4u;
const E_FINALIZE: u32 = 5u;
const E_SCORES: u32 = 6u;
const E_FOLD: u32 = 7u;
const NE: u32 = 8u;       // entry points counted

// SPARSE: a row (column) is long when each of the TPR (TPC) threads of its row (column) group
// would walk more than this many entries: `margins` (`gather`) gives it whole workgroups
// (the host lists them after the CSR columns and the CSC values); at most LONG_WGS
// workgroups take a segment's long rows.
const LONG_WALK: u32 = 64u;
const LONG_WGS: u32 = 1024u;


// Weights per workgroup in `apply` (consecutive weights of a partial: coalesced reads).
const AJ: u32 = 32u;

struct Params {
    d: u32,            // features
    d_aug: u32,        // d + 1 (the bias column)
    bias: f32,         // value of the implicit last column
    eta: f32,          // learning rate
    tol: f32,          // stop when ||eta * sum|| < tol (0: off)
    total_chunks: u32, // partials (rows of `partials`) over all segments
    total_wgs: u32,    // entries of `wg_stats` over all segments
    heads: u32,        // K
    rule: u32,         // RULE_*
    tau: f32,          // margin threshold
    flags: u32,        // FLAG_*
    patience: u32,     // epochs without improvement before stopping (0: off)
    keep_fraction: f32, // an epoch improves when its figure < keep_fraction * reference
    floor: f32,        // when positive and best <= floor, patience also waits best_epoch epochs
    units: u32,        // units (4 values) per dense row: ceil(d / 4)
    ring: u32,         // entries of `stats` (epoch e writes entry e % ring)
    // One-vs-rest: a row of class c weighs its row weight times own[c] in head c (its class
    // weight; scikit-learn's one-vs-rest weighting) and its row weight elsewhere; 1 when the
    // run has no class weights. MAX_HEADS entries, four to a vec4 (uniform arrays stride 16).
    own: array<vec4<f32>, 16>,
}

struct Segment {
    n: u32,            // rows in this segment
    chunk_base: u32,   // first `partials` row of this segment
    wg_base: u32,      // first `wg_stats` entry of this segment
    chunk_rows: u32,   // rows per workgroup (`epoch`, register `scores`) or chunk (`accumulate`)
    role: u32,         // ROLE_*
    wgs: u32,          // the segment's `margins` workgroups (sparse training: its bias sums)
    long_cols: u32,    // sparse training: long columns, each summed by a `gather` workgroup
    long_rows: u32,    // sparse: long rows, scored by the last workgroups of `margins`
}

// The stop rules' memory: StopState in src/backend/mod.rs, plus the per-call counters and
// the averaged pocket's epoch counts. Everything but `done` and `epoch` persists across
// calls.
struct Control {
    done: u32,         // 0 running, else STOP_*
    epoch: u32,        // epochs run in this call (stats entry: epoch % ring)
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
    rows: u32,         // training rows, one-vs-rest: rows whose first highest score is wrong
}

struct EpochOut {
    mistakes: u32,
    criterion: f32,
    update_norm: f32,
    held_out: u32,
    weighted: f32,
    rows: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> ctl: Control;
@group(0) @binding(3) var<storage, read_write> partials: array<f32>;
@group(0) @binding(4) var<storage, read_write> wg_stats: array<WgStat>;
// COUNT = 1: words loaded and stored, [entry][category][load, store] as (low, high) pairs,
// then per entry the most words one thread loaded.
@group(0) @binding(5) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> stats: array<EpochOut>;
// [prev | pocket | average sum | log-weights | squared steps], each heads * d_aug long.
@group(0) @binding(7) var<storage, read_write> aux: array<f32>;

@group(1) @binding(0) var<uniform> S: Segment;
// X in STORAGE, read through `xat` (one value) or `unit_at` (four values). The same buffer is
// bound three times: as words, pairs of words (f16 units) and quadruples (f32 units).
@group(1) @binding(1) var<storage, read> x: array<u32>;
// Labels, one signed byte a row (four to a word): -1/+1, or the class index.
@group(1) @binding(2) var<storage, read> y: array<u32>;
// Per row and head: the coefficient of x in the update (`margins`), or the score (`scores`).
@group(1) @binding(3) var<storage, read_write> coef: array<f32>;
// Per-row weights (read when FLAG_WEIGHTS is set).
@group(1) @binding(4) var<storage, read> sw: array<f32>;
// SPARSE: this segment's rows in CSR form, [row starts (S.n + 1, from 0) | column of each
// value]; the values are `x`, read through `xat`. Dense segments bind a placeholder.
@group(1) @binding(5) var<storage, read> csr: array<u32>;
// SPARSE training segments: the same values column by column (CSC), [column starts (d + 1,
// from 0) | row of each entry | its value as f32 bits], rows ascending within a column: the
// values in the order `gather` reads them (consecutive entries: coalesced).
@group(1) @binding(6) var<storage, read> csc: array<u32>;
@group(1) @binding(7) var<storage, read> x2: array<vec2<u32>>;
@group(1) @binding(8) var<storage, read> x4: array<vec4<u32>>;

// The two-kernel path's reductions and every kernel's statistics.
var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;
var<workgroup> redu: array<u32, WG>;
var<workgroup> flag: u32;
var<workgroup> flag2: u32;
// The register pass: lane sums (KT per thread), the K scores then coefficients of each row
// group in flight (two sets, alternating by step), their labels and row weights, and the
// staged units when head blocks share a row.
var<workgroup> redk: array<f32, WG * KT>;
var<workgroup> sc: array<f32, 2u * (WG / TPR) * KT>;
var<workgroup> rowy: array<f32, 2u * (WG / TPR)>;
var<workgroup> roww: array<f32, 2u * (WG / TPR)>;
var<workgroup> xs: array<vec4<f32>, XS>;

// ---- The instrumented variant's tallies ------------------------------------------------

var<private> tally: array<u32, 14>;  // [category * 2 + (0 load, 1 store)], 14 = 2 * NCAT

fn ld(cat: u32, words: u32) {
    if (COUNT != 0u) {
        tally[2u * cat] += words;
    }
}

fn st(cat: u32, words: u32) {
    if (COUNT != 0u) {
        tally[2u * cat + 1u] += words;
    }
}

// Adds this thread's tallies to entry `e`'s counters (64-bit: a carry goes to the high word),
// and keeps the most words one thread of the entry loaded (after the NE x NCAT x 2 pairs): the
// longest walk, which a skewed input must not make serial.
fn flush(e: u32) {
    if (COUNT == 0u) {
        return;
    }
    var loaded = 0u;
    for (var c = 0u; c < NCAT; c++) {
        loaded += tally[2u * c];
    }
    if (loaded != 0u) {
        atomicMax(&counters[4u * NE * NCAT + e], loaded);
    }
    for (var i = 0u; i < 2u * NCAT; i++) {
        let v = tally[i];
        if (v != 0u) {
            let at = 2u * (e * 2u * NCAT + i);
            let old = atomicAdd(&counters[at], v);
            if (old + v < old) {
                atomicAdd(&counters[at + 1u], 1u);
            }
        }
    }
}

// ---- Storage access (each counted in the instrumented variant) -------------------------

fn get_w(i: u32) -> f32 {
    ld(CAT_WEIGHTS, 1u);
    return w[i];
}

fn set_w(i: u32, v: f32) {
    st(CAT_WEIGHTS, 1u);
    w[i] = v;
}

fn get_aux(i: u32) -> f32 {
    ld(CAT_WEIGHTS, 1u);
    return aux[i];
}

fn set_aux(i: u32, v: f32) {
    st(CAT_WEIGHTS, 1u);
    aux[i] = v;
}

fn get_coef(i: u32) -> f32 {
    ld(CAT_COEF, 1u);
    return coef[i];
}

fn set_coef(i: u32, v: f32) {
    st(CAT_COEF, 1u);
    coef[i] = v;
}

fn get_partial(i: u32) -> f32 {
    ld(CAT_PARTIAL, 1u);
    return partials[i];
}

fn set_partial(i: u32, v: f32) {
    st(CAT_PARTIAL, 1u);
    partials[i] = v;
}

// The word of labels of rows 4i..4i+3.
fn get_yword(i: u32) -> u32 {
    ld(CAT_ROWS, 1u);
    return y[i];
}

// Label i (0..3) of a word of labels.
fn label(q: u32, i: u32) -> f32 {
    return f32(bitcast<i32>(q << (24u - 8u * i)) >> 24u);
}

// The label of row r (one word loaded).
fn get_y(r: u32) -> f32 {
    return label(get_yword(r >> 2u), r & 3u);
}

fn get_sw(r: u32) -> f32 {
    ld(CAT_ROWS, 1u);
    return sw[r];
}

// The weight in head k of a row of class t and row weight wr: times the class's factor in
// its own head under one-vs-rest. CPU twin: RowWeight::head (src/backend/rule.rs).
fn head_weight(wr: f32, k: u32, t: u32) -> f32 {
    if (P.rule == RULE_OVR && k == t) {
        return wr * P.own[t / 4u][t % 4u];
    }
    return wr;
}

fn get_csr(i: u32) -> u32 {
    ld(CAT_INDEX, 1u);
    return csr[i];
}

fn get_csc(i: u32) -> u32 {
    ld(CAT_INDEX, 1u);
    return csc[i];
}

// Entry i's value in the CSC copy's values (from word `at`): f32 bits, widened by the host.
fn csc_value(at: u32, i: u32) -> f32 {
    ld(CAT_X, 1u);
    return bitcast<f32>(csc[at + i]);
}

fn set_wg_stat(i: u32, s: WgStat) {
    st(CAT_CONTROL, 4u);
    wg_stats[i] = s;
}

// ---- X ---------------------------------------------------------------------------------

// A half (IEEE binary16 in the low 16 bits) as f32, decoded with integer operations, so no
// optional capability is needed (naga gates unpack2x16float behind SHADER_FLOAT16_IN_FLOAT32).
// The host stores only normal halves and zeros (Storage::holds), so the exponent is rebiased
// (15 -> 127) and the mantissa shifted; a zero exponent is a signed zero.
fn half(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let normal = sign | ((e + 112u) << 23u) | ((h & 0x3ffu) << 13u);
    return bitcast<f32>(select(normal, sign, e == 0u));
}

// Four unsigned (u8) or signed (i8) bytes of a word, the first in the low bits.
fn bytes4(q: u32) -> vec4<f32> {
    if (STORAGE == STORAGE_I8) {
        let s = bitcast<vec4<i32>>(vec4(q << 24u, q << 16u, q << 8u, q)) >> vec4(24u);
        return vec4<f32>(s);
    }
    return vec4<f32>((vec4(q) >> vec4(0u, 8u, 16u, 24u)) & vec4(0xffu));
}

// Value i of this segment's X, widened exactly to f32 (one word loaded per value). CPU twin:
// simd::Elem::widen. Used by the two-kernel path (a dense row r starts at value 4 r P.units).
fn xat(i: u32) -> f32 {
    ld(CAT_X, 1u);
    switch STORAGE {
        case STORAGE_F16: {
            return half((x[i >> 1u] >> (16u * (i & 1u))) & 0xffffu);
        }
        case STORAGE_U8, STORAGE_I8: {
            return bytes4(x[i >> 2u])[i & 3u];
        }
        default: {
            return bitcast<f32>(x[i]);
        }
    }
}

// Unit u (values 4u..4u+3) of dense row r of this segment, in one load of 16 bytes (f32),
// 8 bytes (f16) or 4 bytes (u8, i8), widened exactly. CPU twin: simd::Elem::widen.
fn unit_at(r: u32, u: u32) -> vec4<f32> {
    return widen(raw_unit(r, u));
}

// Unit u of dense row r as loaded, not yet widened: four f32 words, two words of halves
// (x, y) or one word of bytes (x); the rest zero. `widen` makes the four values of it.
fn raw_unit(r: u32, u: u32) -> vec4<u32> {
    let i = r * P.units + u;
    switch STORAGE {
        case STORAGE_F16: {
            ld(CAT_X, 2u);
            return vec4(x2[i], 0u, 0u);
        }
        case STORAGE_U8, STORAGE_I8: {
            ld(CAT_X, 1u);
            return vec4(x[i], 0u, 0u, 0u);
        }
        default: {
            ld(CAT_X, 4u);
            return x4[i];
        }
    }
}

// The four values of a unit as `raw_unit` loaded it, widened exactly to f32.
fn widen(q: vec4<u32>) -> vec4<f32> {
    switch STORAGE {
        case STORAGE_F16: {
            return vec4(half(q.x & 0xffffu), half(q.x >> 16u), half(q.y & 0xffffu), half(q.y >> 16u));
        }
        case STORAGE_U8, STORAGE_I8: {
            return bytes4(q.x);
        }
        default: {
            return bitcast<vec4<f32>>(q);
        }
    }
}

// ---- Shared steps ----------------------------------------------------------------------

// True (uniformly across the workgroup) once training has stopped in this submit.
fn stopped(lid: u32) -> bool {
    if (lid == 0u) {
        ld(CAT_CONTROL, 1u);
        flag = ctl.done;
    }
    return workgroupUniformLoad(&flag) != 0u;
}

// True (uniformly) when held-out rows are scored by the running average sum (averaging with
// a pocket, once the sum holds an epoch): EpochState::held_out_weights on the host.
fn held_out_by_sum(lid: u32) -> bool {
    let both = FLAG_POCKET | FLAG_AVERAGE;
    if (lid == 0u) {
        var v = 0u;
        if ((P.flags & both) == both && S.role == ROLE_HELD_OUT) {
            ld(CAT_CONTROL, 1u);
            v = ctl.updates;
        }
        flag2 = v;
    }
    return workgroupUniformLoad(&flag2) != 0u;
}

// Weight j of head k (j == d: the bias): from w, or from the running sum when `by_sum`.
fn weight(k: u32, j: u32, by_sum: bool) -> f32 {
    let i = k * P.d_aug + j;
    if (by_sum) {
        return get_aux(2u * P.heads * P.d_aug + i);
    }
    return get_w(i);
}

// The weights of head k for unit u (zeros past d).
fn weights4(k: u32, u: u32, by_sum: bool) -> vec4<f32> {
    var v = vec4(0.0);
    for (var c = 0u; c < 4u; c++) {
        let j = 4u * u + c;
        if (j < P.d) {
            v[c] = weight(k, j, by_sum);
        }
    }
    return v;
}

// v summed over the workgroup's threads (a fixed tree in `redu`, free when called). Called by
// the whole workgroup.
fn sum_u32(lid: u32, v: u32) -> u32 {
    workgroupBarrier();
    redu[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            redu[lid] += redu[lid + s];
        }
        workgroupBarrier();
    }
    return redu[0];
}

// Sums this workgroup's statistics over its threads (a fixed tree) into wg_stats `slot`.
// Called by the whole workgroup.
fn write_wg_stat(lid: u32, slot: u32, held: bool, count: u32, crit: f32, weighted: f32, rows: u32) {
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
    let total = redu[0];
    var wrong_rows = 0u;
    if (!held && P.rule == RULE_OVR) {
        wrong_rows = sum_u32(lid, rows);
    }
    if (lid == 0u) {
        if (held) {
            set_wg_stat(S.wg_base + slot, WgStat(0u, 0.0, total, 0.0, 0u));
        } else {
            set_wg_stat(S.wg_base + slot, WgStat(total, red[0], 0u, red2[0], wrong_rows));
        }
    }
    workgroupBarrier();
}

// ---- The register pass (`epoch`, dense `scores`) ---------------------------------------

// KT values per thread summed over the TPR threads of each row group by a fixed tree in
// workgroup memory (log2 TPR steps); the sums are valid in lane 0. Called by the whole
// workgroup.
fn lane_sums_tree(p: array<f32, KT_MAX>, lid: u32, lane: u32) -> array<f32, KT_MAX> {
    var out = p;
    if (TPR == 1u) {
        return out;
    }
    for (var kt = 0u; kt < KT; kt++) {
        redk[kt * WG + lid] = p[kt];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var kt = 0u; kt < KT; kt++) {
                redk[kt * WG + lid] += redk[kt * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    for (var kt = 0u; kt < KT; kt++) {
        out[kt] = redk[kt * WG + lid];
    }
    return out;
}

// The thread's statistics of the rows it decides (summed per workgroup by write_wg_stat).
var<private> st_count: u32;
var<private> st_crit: f32;
var<private> st_weighted: f32;
var<private> st_rows: u32; // one-vs-rest training rows whose first highest score is wrong

// One-vs-rest: the first highest of a row's heads, counted into st_rows when it is not the
// row's class t (the prediction rule, as predicted_wrong).
fn ovr_row(top: u32, t: u32, count: bool) {
    if (count && top != t) {
        st_rows += 1u;
    }
}

// The rule's pieces, shared by `decide` (one thread a row, scores in workgroup memory) and
// `decide_regs` (every lane of a row, scores in registers). CPU twin: backend::row_rule.
//
// The coefficient of binary or one-vs-rest head k with score sk, for a row of label yv (class
// t) and row weight wr; a mistake is counted into the thread's statistics when `count`.
fn head_coef(k: u32, sk: f32, yv: f32, t: u32, wr: f32, count: bool) -> f32 {
    var yk = yv;
    if (P.rule == RULE_OVR) {
        yk = select(-1.0, 1.0, k == t);
    }
    let m = yk * sk;
    if (m > P.tau) {
        return 0.0;
    }
    let wk = head_weight(wr, k, t);
    if (count) {
        st_count += 1u;
        st_crit -= m * wk;
        st_weighted += wk;
    }
    return yk * wk;
}

// Multiclass: whether the row (true score minus the first highest wrong one: m) is a mistake,
// counted when `count`.
fn mc_miss(m: f32, wr: f32, count: bool) -> bool {
    let miss = m <= P.tau;
    if (miss && count) {
        st_count += 1u;
        st_crit -= m * wr;
        st_weighted += wr;
    }
    return miss;
}

// Multiclass: head k's coefficient (class t, highest wrong class `best`).
fn mc_coef(k: u32, t: u32, best: u32, miss: bool, wr: f32) -> f32 {
    if (!miss) {
        return 0.0;
    }
    if (k == t) {
        return wr;
    }
    if (P.rule == RULE_MC_ALL || k == best) {
        return -wr;
    }
    return 0.0;
}

// The prediction rule's verdict (held-out rows): sgn(0) = +1; the first highest score.
// CPU twin: backend::predicted_wrong.
fn predicted_wrong(top: u32, s_top: f32, yv: f32) -> bool {
    if (P.rule == RULE_BINARY) {
        return (s_top >= 0.0) != (yv > 0.0);
    }
    return top != u32(max(yv, 0.0));
}

// The rule for the row whose K scores are at sc[o..o + K] (train: turned into coefficients
// in place) and whose label and weight are rowy[yo] and roww[yo]; counts into the thread's
// statistics. One thread per row. CPU twin: backend::row_rule (training),
// backend::predicted_wrong (held-out rows).
fn decide(o: u32, yo: u32, mode: u32) {
    let K = P.heads;
    let yv = rowy[yo];
    let t = u32(max(yv, 0.0));
    if (mode == MODE_HELD) {
        var top = 0u;
        var s_top = 0.0;
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (k == 0u || sk > s_top) {
                top = k;
                s_top = sk;
            }
        }
        if (predicted_wrong(top, s_top, yv)) {
            st_count += 1u;
        }
        return;
    }
    let wr = roww[yo];
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = 0.0;
        for (var k = 0u; k < K; k++) {
            let sk = sc[o + k];
            if (k == 0u || sk > s_top) {
                top = k;
                s_top = sk;
            }
            sc[o + k] = head_coef(k, sk, yv, t, wr, true);
        }
        ovr_row(top, t, P.rule == RULE_OVR);
        return;
    }
    // Multiclass: the true class's score against the first highest wrong one.
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
    let miss = mc_miss(s_true - s_best, wr, true);
    for (var k = 0u; k < K; k++) {
        sc[o + k] = mc_coef(k, t, best, miss, wr);
    }
}

// The same rule on a row's K <= KT scores held in registers by every lane of the row (the
// register pass with rows in flight): returns the coefficients (train); the statistics are
// counted where `count` (one lane a row). Loops run over KT, a constant, so they unroll.
fn decide_regs(s: array<f32, KT_MAX>, yv: f32, wr: f32, mode: u32, count: bool) -> array<f32, KT_MAX> {
    let K = P.heads;
    let t = u32(max(yv, 0.0));
    var c: array<f32, KT_MAX>;
    if (mode == MODE_HELD) {
        var top = 0u;
        var s_top = s[0];
        for (var k = 1u; k < KT; k++) {
            if (k < K && s[k] > s_top) {
                top = k;
                s_top = s[k];
            }
        }
        if (count && predicted_wrong(top, s_top, yv)) {
            st_count += 1u;
        }
        return c;
    }
    if (P.rule == RULE_BINARY || P.rule == RULE_OVR) {
        var top = 0u;
        var s_top = s[0];
        for (var k = 0u; k < KT; k++) {
            if (k < K) {
                if (s[k] > s_top) {
                    top = k;
                    s_top = s[k];
                }
                c[k] = head_coef(k, s[k], yv, t, wr, count);
            }
        }
        ovr_row(top, t, count && P.rule == RULE_OVR);
        return c;
    }
    var s_true = 0.0;
    var best = K;
    var s_best = 0.0;
    for (var k = 0u; k < KT; k++) {
        if (k < K) {
            if (k == t) {
                s_true = s[k];
            } else if (best == K || s[k] > s_best) {
                best = k;
                s_best = s[k];
            }
        }
    }
    let miss = mc_miss(s_true - s_best, wr, count);
    for (var k = 0u; k < KT; k++) {
        if (k < K) {
            c[k] = mc_coef(k, t, best, miss, wr);
        }
    }
    return c;
}

// The register pass's per-thread state (module scope, so that the row loop with rows in
// flight, `rows_in_flight` in batch_subgroup.wgsl, shares it): the weights of KT heads for
// V units, their accumulators, and the bias weights and sums (lane 0 of a row).
var<private> wv: array<vec4<f32>, KV_MAX>;
var<private> acc: array<vec4<f32>, KV_MAX>;
var<private> wb: array<f32, KT_MAX>;
var<private> accb: array<f32, KT_MAX>;

// The register pass over this workgroup's run of the segment's rows (rows wid * S.chunk_rows
// and on). Thread lid is (row group rg, head block hb, lane): lid = (rg HB + hb) TPR + lane;
// threads past the last whole row group only join the barriers. `sgs` is the subgroup size
// for `lane_sums` (0: the tree). Called by the whole workgroup.
// CPU twin: reference::epoch (MODE_TRAIN, MODE_HELD), reference::scores (MODE_SCORES).
fn pass_rows(lid: u32, wid: u32, mode: u32, sgs: u32) {
    let K = P.heads;
    let hbs = (K + KT - 1u) / KT;
    let per_row = hbs * TPR;
    // Row groups: the largest power of two that fits (plan.rs: rows_per_step).
    let rgs = 1u << firstLeadingBit(WG / per_row);
    let lane = lid % TPR;
    let hb = (lid / TPR) % hbs;
    let rg = lid / per_row;
    let on = rg < rgs;
    let U = P.units;
    let k0 = hb * KT;
    var by_sum = false;
    if (mode == MODE_HELD) {
        by_sum = held_out_by_sum(lid);
    }
    // This thread's weights (head k0 + kt, units lane + v TPR). Row
    // group 0 loads the weights (K (d + 1) words per workgroup); the other row groups take
    // them from it through `redk`, one component of one unit at a time (v == V: the bias).
    let loads = on && rg == 0u;
    for (var kt = 0u; kt < KT; kt++) {
        let k = k0 + kt;
        for (var v = 0u; v < V; v++) {
            let u = lane + v * TPR;
            if (loads && k < K && u < U) {
                wv[kt * V + v] = weights4(k, u, by_sum);
            }
        }
        if (loads && k < K && lane == 0u) {
            wb[kt] = weight(k, P.d, by_sum);
        }
    }
    if (rgs > 1u) {
        for (var v = 0u; v <= V; v++) {
            for (var c = 0u; c < 4u; c++) {
                if (v == V && c > 0u) {
                    break;
                }
                workgroupBarrier();
                if (loads) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var a = wb[kt];
                        if (v < V) {
                            a = wv[kt * V + v][c];
                        }
                        redk[kt * WG + lid] = a;
                    }
                }
                workgroupBarrier();
                if (on && rg > 0u) {
                    for (var kt = 0u; kt < KT; kt++) {
                        let a = redk[kt * WG + lid % per_row];
                        if (v < V) {
                            wv[kt * V + v][c] = a;
                        } else {
                            wb[kt] = a;
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }
    let r0 = wid * S.chunk_rows;
    let r1 = min(r0 + S.chunk_rows, S.n);
    // Rows in flight and the rule on every lane where the shape and the subgroups allow it;
    // rows wider than a subgroup by tiles of rows (three barriers a tile, the rule on one
    // lane a row for the tile's rows at once); else a step of rgs rows at a time, the rule on
    // one lane a row between two barriers.
    if (!rows_in_flight(lid, r0, r1, mode, sgs) && !rows_by_tile(lid, r0, r1, mode, sgs)) {
        rows_by_step(lid, r0, r1, mode, sgs);
    }
    if (mode == MODE_SCORES) {
        return;
    }
    write_wg_stat(lid, wid, mode == MODE_HELD, st_count, st_crit, st_weighted, st_rows);
    if (mode != MODE_TRAIN) {
        return;
    }
    // Row groups after the first add their accumulators into the first's, in order, one
    // component of one unit at a time through `redk` (v == V: the bias sums).
    if (rgs > 1u) {
        for (var v = 0u; v <= V; v++) {
            for (var c = 0u; c < 4u; c++) {
                if (v == V && c > 0u) {
                    break;
                }
                if (on) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var a = accb[kt];
                        if (v < V) {
                            a = acc[kt * V + v][c];
                        }
                        redk[kt * WG + lid] = a;
                    }
                }
                workgroupBarrier();
                if (on && rg == 0u) {
                    for (var kt = 0u; kt < KT; kt++) {
                        var t = redk[kt * WG + lid];
                        for (var g = 1u; g < rgs; g++) {
                            t += redk[kt * WG + lid + g * per_row];
                        }
                        if (v < V) {
                            acc[kt * V + v][c] = t;
                        } else {
                            accb[kt] = t;
                        }
                    }
                }
                workgroupBarrier();
            }
        }
    }
    // The workgroup's one partial: K (d + 1) sums.
    if (on && rg == 0u) {
        let base = (S.chunk_base + wid) * K * P.d_aug;
        for (var kt = 0u; kt < KT; kt++) {
            let k = k0 + kt;
            if (k < K) {
                let hk = base + k * P.d_aug;
                for (var v = 0u; v < V; v++) {
                    let u = lane + v * TPR;
                    for (var c = 0u; c < 4u; c++) {
                        let j = 4u * u + c;
                        if (u < U && j < P.d) {
                            set_partial(hk + j, acc[kt * V + v][c]);
                        }
                    }
                }
                if (lane == 0u) {
                    set_partial(hk + P.d, accb[kt]);
                }
            }
        }
    }
}

// The register pass's row loop, a step of rgs rows at a time: each thread loads its units of
// one row, the row's lanes sum (`lane_sums`), one lane a row applies the rule through
// workgroup memory (`decide`), then every lane adds coefficient x its units. Two barriers a
// step. Called by the whole workgroup (by `pass_rows`, after the weights are in registers).
fn rows_by_step(lid: u32, r0: u32, r1: u32, mode: u32, sgs: u32) {
    let K = P.heads;
    let hbs = (K + KT - 1u) / KT;
    let per_row = hbs * TPR;
    let rgs = 1u << firstLeadingBit(WG / per_row);
    let lane = lid % TPR;
    let hb = (lid / TPR) % hbs;
    let rg = lid / per_row;
    let on = rg < rgs;
    let U = P.units;
    let k0 = hb * KT;
    let scw = hbs * KT;
    let half_sc = (WG / TPR) * KT;
    var xr: array<vec4<f32>, V_MAX>;
    var step = 0u;
    var y_at = 0xffffffffu;
    var y_word = 0u;
    for (var base = r0; base < r1; base += rgs) {
        let r = base + rg;
        let live = on && r < r1;
        // The row's units into registers; head blocks share them through `xs`.
        if (hbs == 1u) {
            for (var v = 0u; v < V; v++) {
                let u = lane + v * TPR;
                xr[v] = vec4(0.0);
                if (live && u < U) {
                    xr[v] = unit_at(r, u);
                }
            }
        } else {
            // (Every thread has read the previous row's units: scoring has no other barrier
            // between steps when TPR = 1.)
            workgroupBarrier();
            if (on && hb == 0u) {
                for (var v = 0u; v < V; v++) {
                    let u = lane + v * TPR;
                    var q = vec4(0.0);
                    if (live && u < U) {
                        q = unit_at(r, u);
                    }
                    xs[(rg * TPR + lane) * V + v] = q;
                }
            }
            workgroupBarrier();
            if (on) {
                for (var v = 0u; v < V; v++) {
                    xr[v] = xs[(rg * TPR + lane) * V + v];
                }
            }
        }
        // KT partial dot products, summed over the row's lanes together.
        var p: array<f32, KT_MAX>;
        for (var kt = 0u; kt < KT; kt++) {
            var s = 0.0;
            for (var v = 0u; v < V; v++) {
                s += dot(xr[v], wv[kt * V + v]);
            }
            p[kt] = s;
        }
        let sums = lane_sums(p, lid, lane, sgs);
        // Scores, labels and weights of this step go to one of two sets (by parity), so a
        // set is rewritten only after the barriers of the step in between.
        let o = (step & 1u) * half_sc + rg * scw;
        let yo = (step & 1u) * (WG / TPR);
        step++;
        if (live && lane == 0u) {
            for (var kt = 0u; kt < KT; kt++) {
                let k = k0 + kt;
                if (k < K) {
                    let sk = sums[kt] + wb[kt] * P.bias;
                    if (mode == MODE_SCORES) {
                        set_coef(r * K + k, sk);
                    } else {
                        sc[o + k] = sk;
                    }
                }
            }
        }
        // Labels: a word holds four rows' (runs start at multiples of 4). With 4 or more rows
        // a step, every fourth row group loads one word; with fewer, row group 0 loads each
        // word once (kept across steps).
        if (mode != MODE_SCORES && on && lane == 0u && hb == 0u) {
            if (rgs >= 4u) {
                if (rg % 4u == 0u && r < r1) {
                    let q = get_yword(r >> 2u);
                    for (var i = 0u; i < 4u; i++) {
                        rowy[yo + rg + i] = label(q, i);
                    }
                }
            } else if (rg == 0u) {
                if ((base >> 2u) != y_at) {
                    y_at = base >> 2u;
                    y_word = get_yword(y_at);
                }
                for (var i = 0u; i < rgs; i++) {
                    rowy[yo + i] = label(y_word, (base + i) & 3u);
                }
            }
            if (live) {
                var wr = 1.0;
                if (mode == MODE_TRAIN && (P.flags & FLAG_WEIGHTS) != 0u) {
                    wr = get_sw(r);
                }
                roww[yo + rg] = wr;
            }
        }
        if (mode == MODE_SCORES) {
            continue;
        }
        workgroupBarrier();
        if (live && lane == 0u && hb == 0u) {
            decide(o, yo + rg, mode);
        }
        if (mode == MODE_TRAIN) {
            workgroupBarrier();
            if (live) {
                for (var kt = 0u; kt < KT; kt++) {
                    let k = k0 + kt;
                    if (k < K) {
                        let c = sc[o + k];
                        for (var v = 0u; v < V; v++) {
                            acc[kt * V + v] += c * xr[v];
                        }
                        if (lane == 0u) {
                            accb[kt] += c * P.bias;
                        }
                    }
                }
            }
        }
    }
}

// One epoch over this workgroup's run of a dense segment's rows: training rows (the rule,
// one partial and one WgStat per workgroup) or held-out rows (the rows predicted wrong).
// Called by the `epoch` entry point of batch_tree.wgsl / batch_subgroup.wgsl.
// CPU twin: reference::epoch (src/backend/reference.rs).
fn epoch_main(lid: u32, wid: u32, sgs: u32) {
    if (stopped(lid)) {
        return;
    }
    pass_rows(lid, wid, select(MODE_TRAIN, MODE_HELD, S.role == ROLE_HELD_OUT), sgs);
}

// Scores w_k . [x_r, bias] into coef (row-major, heads per row), for prediction and the
// training summary: the register pass where it is planned (V > 0, dense rows, one run of rows
// per workgroup), else TPR threads per row striding over the workgroups.
// CPU twin: reference::scores (src/backend/reference.rs).
fn scores_main(lid: u32, wid: u32, nwg: u32, sgs: u32) {
    if (V != 0u && SPARSE == 0u) {
        pass_rows(lid, wid, MODE_SCORES, sgs);
        return;
    }
    let groups = WG / TPR;
    for (var base = wid * groups; base < S.n; base += nwg * groups) {
        let r = base + lid / TPR;
        for (var k0 = 0u; k0 < P.heads; k0 += KB) {
            let s = row_scores(lid, r, k0, false, S.n, false);
            if (lid % TPR == 0u && r < S.n) {
                for (var kt = 0u; kt < min(KB, P.heads - k0); kt++) {
                    set_coef(r * P.heads + k0 + kt, s[kt]);
                }
            }
        }
    }
}

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
// CPU twin: reference::margins (src/backend/reference.rs).
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
// CPU twin: reference::accumulate (src/backend/reference.rs).
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
// CPU twin: reference::gather (src/backend/reference.rs).
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
// CPU twin: reference::apply (src/backend/reference.rs; it sums the partials in order, which
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
    // (which summed all K (d + 1) of them in its one workgroup: 4 ms of a 5.4 ms sparse epoch
    // at d = 4,000,000 on an H200).
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
// CPU twin: reference::fold (src/backend/reference.rs; it adds the chunks in order, which
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
// Winnow weights, the pocket, and the stop rules (StopState::record in src/backend/mod.rs,
// with the same f32 arithmetic). Reads each workgroup's statistics once (strided by WG).
// CPU twin: reference::finalize (src/backend/reference.rs).
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
