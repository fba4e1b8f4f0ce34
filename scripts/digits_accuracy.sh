#!/usr/bin/env bash
# Reproduces the README's accuracy table: scikit-learn's digits (tests/data/digits.csv,
# 1,797 8x8 images, 10 classes), every 5th row held out, 200 epochs (no patience rule), each
# algorithm.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
R=./target/release/rosenblatt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v tr="$tmp/train.csv" -v te="$tmp/test.csv" \
  'NR == 1 { print > tr; print > te; next } { if ((NR - 2) % 5 == 0) print > te; else print > tr }' \
  tests/data/digits.csv
echo "| command | train acc | held-out acc | epochs | time |"
echo "|---|---:|---:|---:|---:|"
for args in "--algo online" "--algo online --multiclass-update all" "--algo batch" \
            "--algo batch --multiclass-update all" "--algo batch --multiclass ovr" \
            "--algo averaged" "--algo averaged --mode batch" "--algo pocket"; do
  # shellcheck disable=SC2086
  $R train "$tmp/train.csv" $args --epochs 200 --patience 0 --backend cpu -o "$tmp/m.json" --json > "$tmp/r.json"
  acc=$($R eval "$tmp/m.json" "$tmp/test.csv" --json --backend cpu | python3 -c 'import json,sys; print(round(100*json.load(sys.stdin)["accuracy"],1))')
  python3 - "$tmp/r.json" "$args" "$acc" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| `{sys.argv[2]}` | {100*r['train_accuracy']:.1f}% | {sys.argv[3]}% | {r['epochs']} | {1000*r['seconds']:.0f} ms |")
PY
done
