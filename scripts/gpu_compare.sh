#!/usr/bin/env bash
# The prepared GPU check (issue 42): on a machine with a real GPU and nothing to build there,
# the baseline build and the current build side by side on the same card, PyTorch CUDA next
# to them, each kernel variant the current build offers, in one call of a few minutes.
#
# Here, before the call (release binaries, stripped, carried with the loaders):
#   git worktree add /tmp/base <baseline commit> && (cd /tmp/base && cargo build --release)
#   strip -o .gpu/rb-base /tmp/base/target/release/rosenblatt
#   cargo build --release && strip -o .gpu/rb-new target/release/rosenblatt
#   (optional, the GPU conformance tests: the integration-test binary, whose `conformance::`
#   topic holds them) cargo test --release --test it --no-run &&
#   strip -o .gpu/conformance target/release/deps/it-<hash>
#   (the Vulkan loader as debs in .gl/: /work/.library/device/README.md)
# There (device tool, carry .gpu and .gl):
#   bash scripts/gpu_compare.sh [PHASE]
# PHASE: (none) the issue's shapes, baseline and current, the checks, PyTorch, the sweeps;
# quick: without PyTorch and the sweeps; torch: without the sweeps; online: issue 43's online
# averaged perceptron on the GPU against the CPU (time an epoch, time to the model, test
# accuracy, on scripts/fashion_like.py's set), and the baseline's steps against the current
# build's, more streams, passive-aggressive and sparse rows; final: the defaults side
# by side with the baseline, what the per-row cost depends on, PyTorch; rows: rows in flight
# 1, 2, 4 a thread; checks: naga's runtime checks full / no-loop-counters / none, and the
# parameter blocks in uniform or storage buffers; tiles:
# tiles of rows (K = 10 and 4 at 60,000 x 784) against the previous build, PyTorch, the CPU.
# Prints one line a run (name, ms an epoch, GB/s for one read of X, each kernel's ms, the
# chain model) and packs every JSON report into $OUT/runs.tgz (the device tool brings back 8
# files). Nothing is asserted: it measures. Figures so measured: docs/performance.md, "GPU".
set -u
OUT=${OUT:-/tmp/gpu_compare}
RUNS=$(mktemp -d)
mkdir -p "$OUT"
trap 'tar czf "$OUT/runs.tgz" -C "$RUNS" . 2>/dev/null' EXIT
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done
ldconfig 2>/dev/null
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader \
  | tee "$OUT/device.txt"
date -u +%FT%TZ | tee -a "$OUT/device.txt"
B=.gpu/rb-base N=.gpu/rb-new
chmod +x $B $N 2>/dev/null
$N info 2>&1 | grep -iv xdg | head -8

# bench NAME BIN ARGS...: one JSON report, and a line of it.
bench() {
  local name=$1 bin=$2
  shift 2
  timeout 60 "$bin" bench --backend gpu --no-converge --profile --json "$@" \
    >"$RUNS/$name.json" 2>"$RUNS/$name.err"
  python3 - "$RUNS/$name.json" "$name" <<'EOF'
import json, sys
name = sys.argv[2]
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{name:28s} failed ({e})"); sys.exit()
g = r.get("gpu") or {}
p = g.get("profile") or {}
k = ", ".join(f"{a} {b:.3f}" for a, b in p.get("kernels", []))
chain = p.get("chain") or {}
c = " ".join(f"{a}={b}" for a, b in chain.items()) if chain else ""
print(f"{name:32s} {g.get('ms_per_epoch', float('nan')):8.4f} ms  {g.get('gbs', 0):7.0f} GB/s"
      f"  [{k}] {c}")
EOF
}

BIN1="--n 4194304 --d 64 --epochs 30"        # binary, 2^28 values
BIN0="--n 1048576 --d 64 --epochs 30"        # binary, 2^26 values
K10="--n 60000 --d 784 --classes 10 --epochs 30"
K4="--n 60000 --d 784 --classes 4 --epochs 30"
SMALL="--n 100000 --d 16 --epochs 100"

# The issue's shapes, the baseline build then the current one.
# PyTorch CUDA on the same card (plain, then torch.compile), at the issue's shapes.
torch_side() {
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    for s in "--n 4194304 --d 64" "--n 4194304 --d 64 --storage u8" "--n 60000 --d 784 --classes 10"; do
      for c in "" "--compile"; do
        echo "torch $s $c: $(timeout 100 python3 scripts/torch_batch.py $s --device cuda --epochs 30 $c 2>&1 | tail -1)"
      done
    done | tee "$OUT/torch.txt"
  fi
}

side_by_side() {
  for b in base new; do
    bin=$B; [ $b = new ] && bin=$N
    bench "$b.bin28.f32" $bin $BIN1
    bench "$b.bin28.u8" $bin $BIN1 --storage u8
    bench "$b.k10.f32" $bin $K10
    bench "$b.small" $bin $SMALL
  done
}

if [ "${1:-}" = online ]; then
  # Issue 43: the online averaged perceptron (train's default) on the GPU, in the steps and
  # streams it picks, against the CPU's sequential rule on the same machine: a
  # Fashion-MNIST-sized set (scripts/fashion_like.py), 5 epochs for the time an epoch, then
  # the default stopping for the time to the model (upload included) and its test accuracy.
  D=$(mktemp -d)
  python3 scripts/fashion_like.py "$D" || { echo "no numpy: online phase skipped"; exit 0; }
  for be in gpu cpu; do
    timeout 200 $N train "$D/X_train.npy" --labels "$D/y_train.npy" --backend $be --epochs 5 \
      --patience 0 --json >"$RUNS/online.$be.5.json" 2>"$RUNS/online.$be.5.err"
    timeout 300 $N train "$D/X_train.npy" --labels "$D/y_train.npy" --backend $be --json \
      -o "$D/m.$be.json" >"$RUNS/online.$be.json" 2>"$RUNS/online.$be.err"
    timeout 100 $N eval "$D/m.$be.json" "$D/X_test.npy" --labels "$D/y_test.npy" --json \
      >"$RUNS/online.$be.eval.json" 2>/dev/null
    python3 - "$RUNS" "$be" <<'EOF' | tee -a "$OUT/online.txt"
import json, sys
d, be = sys.argv[1:]
try:
    five = json.load(open(f"{d}/online.{be}.5.json"))
    full = json.load(open(f"{d}/online.{be}.json"))
    acc = json.load(open(f"{d}/online.{be}.eval.json"))["accuracy"]
except Exception as e:
    print(f"online {be}: failed ({e})"); sys.exit()
print(f"online {be:3s} B {full.get('minibatch', 1)} S {full.get('streams', 1)}: "
      f"{1000 * five['seconds'] / five['epochs']:.2f} ms an epoch (5 epochs, upload included), "
      f"{full['epochs']} epochs in {full['seconds']:.3f} s to test accuracy {acc:.4f}")
EOF
  done
  # The steps by subgroup lanes (current build) against by threads (the baseline, built
  # before them), and more streams, 5 epochs each: ms an epoch, upload included.
  # Then passive-aggressive in steps (GPU) against its sequential rule (CPU), and sparse rows
  # (a text-like set: 200,000 x 100,000, 25 non-zeros a row) by the CSR steps against the
  # CPU's sequential rule; AROW there too, in its own steps (8 rows, one stream) and in the
  # perceptron's (issue 45's GPU figure).
  timeout 100 $N gen --n 200000 --d 100000 --density 0.00025 --noise 0.05 --seed 7 \
    --format libsvm -o "$D/s.svm" >/dev/null 2>&1
  X="$D/X_train.npy --labels $D/y_train.npy"
  for run in "$B $X gpu" "$N $X gpu" "$N $X gpu --streams 64" \
    "$N $X gpu --minibatch 4 --streams 64" "$N $X gpu --algo pa" "$N $X cpu --algo pa" \
    "$N $D/s.svm gpu" "$N $D/s.svm cpu" "$N $D/s.svm gpu --algo pa" \
    "$N $D/s.svm gpu --algo arow" "$N $D/s.svm cpu --algo arow" \
    "$N $D/s.svm gpu --algo arow --minibatch 32 --streams 16"; do
    set -- $run
    bin=$1; shift
    args=()
    while [ "$1" != gpu ] && [ "$1" != cpu ]; do args+=("$1"); shift; done
    timeout 200 $bin train "${args[@]}" --backend "$@" \
      --epochs 5 --patience 0 --json >"$RUNS/steps.json" 2>/dev/null
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); ms=1000*r["seconds"]/r["epochs"]; print(sys.argv[2], "B", r.get("minibatch"), "S", r.get("streams"), "%.2f ms an epoch (5 epochs, upload included)" % ms, r.get("gpu_plan", ""))' \
      "$RUNS/steps.json" "$run" 2>&1 | tee -a "$OUT/online.txt"
  done
  # Test accuracy against wall time for the CPU default, the GPU batch rule and the GPU's
  # online rule, each trained from scratch for each budget: a table and a picture.
  timeout 300 $N experiment time-to-accuracy "$D/X_train.npy" "$D/X_test.npy" \
    --labels "$D/y_train.npy" --test-labels "$D/y_test.npy" --backend gpu --epochs 1,2,4,8,16 \
    --plot "$OUT/time_to_accuracy.png" | tee -a "$OUT/online.txt"
  exit 0
fi
if [ "${1:-}" = tiles2 ]; then
  # Tiles with the rule on every lane (.gpu/rb-tile1) against the rule once a row between a
  # third barrier (the current build), at K = 10 and K = 4; the GPU conformance of tiles.
  if [ -x .gpu/conformance ]; then
    ROSENBLATT_REQUIRE_GPU=1 timeout 100 .gpu/conformance --include-ignored tiles_of_rows 2>&1 \
      | grep -E "panicked|left|right|test result" | head -8 | tee "$OUT/conformance.txt"
  fi
  T1=.gpu/rb-tile1; chmod +x $T1
  for tt in 4 8; do
    bench "tile1.k10.f32.tt$tt" $T1 $K10 --tile-rows $tt
    bench "new.k10.f32.tt$tt" $N $K10 --tile-rows $tt
  done
  bench new.k10.f32.tt16 $N $K10 --tile-rows 16
  bench new.k10.u8.tt4 $N $K10 --storage u8 --tile-rows 4
  bench new.k10.u8.tt8 $N $K10 --storage u8 --tile-rows 8
  for tt in 0 4 8; do bench "new.k4.f32.tt$tt" $N $K4 --tile-rows $tt; done
  bench new.k10.f32.tt8.g512 $N $K10 --tile-rows 8 --workgroups 512
  exit 0
fi
if [ "${1:-}" = tiles ]; then
  # Tiles of rows for rows wider than a subgroup (K = 10 and 4 at 60,000 x 784): the
  # previous build against tiles of 4, 8 (the default) and 16 rows and the loop by steps;
  # naga's checks off; the grid; the GPU conformance test of tiles (the release
  # integration-test binary carried as .gpu/conformance, if there); PyTorch and the CPU at
  # K = 10.
  bench base.k10.f32 $B $K10
  for tt in 8 4 16 0; do bench "new.k10.f32.tt$tt" $N $K10 --tile-rows $tt; done
  bench new.k10.f32.tt8.unchecked $N $K10 --shader-checks none
  bench new.k10.f32.tt8.g1024 $N $K10 --workgroups 1024
  bench new.k10.f32.tt8.g132 $N $K10 --workgroups 132
  bench base.k10.u8 $B $K10 --storage u8
  bench new.k10.u8 $N $K10 --storage u8
  bench base.k4.f32 $B $K4
  bench new.k4.f32 $N $K4
  bench new.k4.f32.tt16 $N $K4 --tile-rows 16
  bench new.bin28.f32 $N $BIN1
  if [ -x .gpu/conformance ]; then
    # Both tiers (the tier 2 names begin tier2_), and tier 1's tour of every GPU path.
    ROSENBLATT_REQUIRE_GPU=1 timeout 120 .gpu/conformance --include-ignored tiles_of_rows \
      rows_in_flight batch_epochs_equal every_storage coverage:: 2>&1 | tail -5 | tee "$OUT/conformance.txt"
  fi
  timeout 90 $N bench --backend cpu --no-converge --json $K10 >"$RUNS/cpu.k10.json" 2>/dev/null \
    && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('cpu k10', r.get('cpu', r).get('ms_per_epoch'))" "$RUNS/cpu.k10.json"
  for c in "" "--compile"; do
    echo "torch k10 f32 $c: $(timeout 100 python3 scripts/torch_batch.py --n 60000 --d 784 --classes 10 --device cuda --epochs 30 $c 2>&1 | tail -1)"
  done | tee "$OUT/torch.txt"
  exit 0
fi
if [ "${1:-}" = rows ]; then
  # Rows in flight as separate registers (1, 2, 4 a thread) against the baseline.
  bench base.bin28.f32 $B $BIN1
  for rt in 1 2 4; do bench "new.bin28.f32.rt$rt" $N $BIN1 --rows-per-thread $rt; done
  for rt in 1 4; do bench "new.bin28.u8.rt$rt" $N $BIN1 --storage u8 --rows-per-thread $rt; done
  bench new.bin26.f32 $N $BIN0
  bench new.small $N $SMALL
  for c in "" "--compile"; do
    echo "torch bin28 f32 $c: $(timeout 100 python3 scripts/torch_batch.py --n 4194304 --d 64 --device cuda --epochs 30 $c 2>&1 | tail -1)"
  done | tee "$OUT/torch.txt"
  exit 0
fi
if [ "${1:-}" = final ]; then
  # The defaults side by side with the baseline, then what the per-row cost depends on.
  side_by_side
  bench new.bin26.f32 $N $BIN0
  bench new.k4.f32 $N $K4
  bench new.bin28.f32.rt1 $N $BIN1 --rows-per-thread 1
  bench new.bin28.f32.rt2 $N $BIN1 --rows-per-thread 2
  bench new.bin28.f32.rt0 $N $BIN1 --rows-per-thread 0
  bench new.bin28.f32.g132 $N $BIN1 --workgroups 132
  bench new.bin28.f32.g2048 $N $BIN1 --workgroups 2048
  bench new.d16.f32 $N --n 16777216 --d 16 --epochs 30
  bench new.d256.f32 $N --n 1048576 --d 256 --epochs 30
  bench new.k10.g1024 $N $K10 --workgroups 1024
  torch_side
  exit 0
fi
if [ "${1:-}" = checks ]; then
  # What each of naga's runtime checks costs, with rows in flight 4 and 16 a thread.
  bench base.bin28.f32 $B $BIN1
  for c in full no-loop-counters none; do
    for rt in 4 16; do bench "new.bin28.f32.$c.rt$rt" $N $BIN1 --shader-checks $c --rows-per-thread $rt; done
    bench "new.bin28.u8.$c" $N $BIN1 --storage u8 --shader-checks $c
    bench "new.k10.$c" $N $K10 --shader-checks $c
    bench "new.small.$c" $N $SMALL --shader-checks $c
  done
  bench new.k10.two.none $N $K10 --two-kernels --shader-checks none
  # Parameter blocks in storage buffers (the software adapters' choice) against uniform.
  for s in uniform storage; do
    bench "new.bin28.f32.params-$s" $N $BIN1 --params-space $s
    bench "new.k10.params-$s" $N $K10 --params-space $s
    bench "new.small.params-$s" $N $SMALL --params-space $s
  done
  exit 0
fi
side_by_side
# What naga's runtime checks cost (bounds checks, loop counters).
bench new.bin28.f32.unchecked $N $BIN1 --shader-checks none
bench new.bin28.u8.unchecked $N $BIN1 --storage u8 --shader-checks none
bench new.k10.unchecked $N $K10 --shader-checks none
bench new.k10.two $N $K10 --two-kernels
bench new.k4.f32 $N $K4
# Parameter blocks in storage buffers (the software adapters' choice) against uniform.
bench new.bin28.f32.params-storage $N $BIN1 --params-space storage
bench new.k10.params-storage $N $K10 --params-space storage
[ "${1:-}" = quick ] && exit 0
torch_side
[ "${1:-}" = torch ] && exit 0
# Rows in flight a thread, and the grid.
for rt in 8 16; do bench "new.bin28.f32.rt$rt" $N $BIN1 --rows-per-thread $rt; done
bench new.bin28.u8.rt8 $N $BIN1 --storage u8 --rows-per-thread 8
bench new.bin28.f32.g1024 $N $BIN1 --workgroups 1024
bench new.bin26.f32 $N $BIN0
