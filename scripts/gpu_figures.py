#!/usr/bin/env python3
"""Every GPU figure the README's Performance section asks for, in one run on a machine with a
real GPU, printed as Markdown rows ready to paste (with the device and the date).

    cargo build --release
    python3 scripts/gpu_figures.py [--bin target/release/rosenblatt] [--peak-gbs F] [--torch]

It runs `rosenblatt bench --backend all --profile --json` at the shapes the issues name
(binary 1,048,576 x 64, binary 2^28 values as 4,194,304 x 64, K = 10 at 60,000 x 784, u8
storage of the first two, and sparse rows: 100,000 x 4,000,000 with 40 non-zeros a row) and, with --torch, scripts/torch_batch.py on CUDA at the same shapes
(plain and --compile). Nothing here is asserted: it measures and prints. Runs that fail are
reported as such and the rest go on.
"""
import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

SHAPES = [
    # (label, n, d, classes, storage, density of sparse rows)
    ("binary", 1_048_576, 64, 2, "f32", None),
    ("binary, 2^28 values", 4_194_304, 64, 2, "f32", None),
    ("binary, u8", 1_048_576, 64, 2, "u8", None),
    ("binary, 2^28 values, u8", 4_194_304, 64, 2, "u8", None),
    ("argmax K = 10", 60_000, 784, 10, "f32", None),
    ("argmax K = 10, u8", 60_000, 784, 10, "u8", None),
    ("sparse, 40 non-zeros a row", 100_000, 4_000_000, 2, "f32", 0.00001),
]


def bench(binary, backend, n, d, classes, storage, peak, epochs, density=None):
    cmd = [binary, "bench", "--backend", backend, "--profile", "--json", "--no-converge",
           "--n", str(n), "--d", str(d), "--classes", str(classes), "--storage", storage,
           "--epochs", str(epochs)]
    if density:
        cmd += ["--density", repr(density)]
    if peak:
        cmd += ["--peak-gbs", str(peak)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    return json.loads(out.stdout), None


def traffic(prof):
    """X loaded against one read of X, and every other word as a share of it (the counted epoch)."""
    t = prof.get("traffic") or []
    if not t:
        return ""
    x = sum(k["loads"][0] for k in t)
    total = sum(sum(k["loads"]) + sum(k["stores"]) for k in t)
    one = max(prof.get("x_words", 1), 1)
    return f"{x / one:.3f}x; +{100 * (total - x) / one:.1f}%"


def torch_run(n, d, classes, storage, compiled):
    script = Path(__file__).with_name("torch_batch.py")
    cmd = [sys.executable, str(script), "--n", str(n), "--d", str(d), "--classes", str(classes),
           "--storage", storage, "--device", "cuda"]
    if compiled:
        cmd.append("--compile")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
    line = out.stdout.strip()
    # "...: 1.234 ms/epoch median ..."
    try:
        return line.split(": ")[2].split(" ms/epoch")[0] + " ms"
    except IndexError:
        return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/rosenblatt")
    ap.add_argument("--peak-gbs", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--torch", action="store_true", help="also run scripts/torch_batch.py on CUDA")
    ap.add_argument("--backend", default="all", choices=["all", "gpu"],
                    help="gpu: software adapters too (a smoke test of this script)")
    ap.add_argument("--shrink", type=int, default=1, help="divide every n by this (smoke tests)")
    a = ap.parse_args()

    device = None
    rows = []
    for label, n, d, classes, storage, density in SHAPES:
        n = max(1, n // a.shrink)
        r, err = bench(a.bin, a.backend, n, d, classes, storage, a.peak_gbs, a.epochs, density)
        if r is None:
            rows.append(f"| {label} | {n:,} x {d} | failed: {' '.join(err)} | | | | | | |")
            continue
        g, c = r.get("gpu"), r.get("cpu")
        if g is None:
            rows.append(f"| {label} | {n:,} x {d} | no GPU measured: {r.get('gpu_skipped')} | | | | | | |")
            continue
        device = g["device"]
        roof = f"{100 * g['roofline_fraction']:.0f}%" if g.get("roofline_fraction") else "?"
        prof = g.get("profile")
        kernels = ", ".join(f"{k} {ms:.3f}" for k, ms in prof["kernels"]) if prof else g.get("profile_note", "")
        words = traffic(prof) if prof else ""
        t = ""
        if a.torch and density:
            t = "- (dense only)"
        elif a.torch:
            t = f"{torch_run(n, d, classes, storage, False)} / {torch_run(n, d, classes, storage, True)}"
        cpu_ms = f"{c['ms_per_epoch']:.2f}" if c else ""
        rows.append(
            f"| {label} | {n:,} x {d} | {g['ms_per_epoch']:.3f} | {g['gbs']:.0f} GB/s, {roof} "
            f"| {g.get('submit_overhead_ms') or 0:.3f} | {kernels} | {words} | {cpu_ms} | {t} |")
    print(f"GPU: {device or 'none'}; {datetime.date.today().isoformat()}; "
          f"`python3 scripts/gpu_figures.py{' --torch' if a.torch else ''}`\n")
    print("| epoch | n x d | GPU ms/epoch | bandwidth, % of peak | per-submit overhead ms "
          "| kernels, ms per epoch | words counted (X loaded / one read; the rest) "
          "| CPU ms/epoch | torch CUDA ms (plain / compiled) |")
    print("|---|---|---:|---|---:|---|---|---:|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
