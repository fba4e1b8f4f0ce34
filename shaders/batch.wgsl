// rosenblatt: batch-perceptron kernels and scoring, for K weight vectors ("heads": K = 1 for a
// binary perceptron, K classes for multiclass or one-vs-rest). Weights are stored head after
// head, each d + 1 long (the last is the bias).
//
// The batch module is one WGSL module in files by stage, joined by the host in this order
// (`batch_source` in crates/backend/src/gpu/batch.rs): this file (the parameters, bindings, storage
// access and the rule every stage shares), batch_register.wgsl (the register pass),
// batch_two_kernels.wgsl (the two-kernel and sparse paths), batch_update.wgsl (the update and
// the stop), then batch_tree.wgsl (lane sums by a workgroup tree; any adapter) or
// batch_subgroup.wgsl (lane sums by subgroup shuffles; adapters with the subgroup feature).
// Those last hold the entry points that take subgroup built-ins (`epoch`, `scores`) and
// `lane_sums`. Each stage's CPU twins are in crates/backend/src/reference/, in the file of the same
// name.
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
// which then lived in local memory, and the epoch ran slower (docs/performance.md, "GPU
// kernels IV", naga's loop counters). Software adapters and the tests build them with every
// check.
//
// Rows whose K x V accumulators do not fit the register budget (very wide rows with many
// heads), and CSR rows, take the two-kernel path: `margins` (scores and coefficients into
// `coef`) then `accumulate` (dense) or `gather` (CSR, over a column-major copy): X is read
// twice there.
//
// Many epochs are recorded in one submit; `finalize` takes the stop decision (BatchRule::stop
// in crates/backend/src/lib.rs) and every entry point returns at once when `ctl.done` is set, so the
// epochs after a stop cost one load per workgroup.
//
// Every entry point has a plain CPU twin of the same name in crates/backend/src/reference/
// (`margins`, `accumulate`, `gather`, `epoch`, `apply`, `fold`, `finalize`, `scores`); tests
// keep the GPU bit-identical to them on integer data.
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
// The structs, rule and flag codes and MAX_HEADS are checked against crates/backend/src/gpu/mirror.rs,
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

// The stop rules' memory: StopState in crates/backend/src/lib.rs, plus the per-call counters and
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
// its own head under one-vs-rest. CPU twin: RowWeight::head (crates/backend/src/rule.rs).
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
