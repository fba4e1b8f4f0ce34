#!/usr/bin/env python3
"""Test accuracy of the online averaged perceptron (`train`'s default rule) taken in steps of
B rows (`--minibatch B`: a step's rows scored by the weights it started with, their updates
added together) and in S streams (`--streams S`: each epoch's rows split into S parts trained
from the same weights and mixed by their mean), on the public sets of the README's defaults
table, raw and standardised. B = S = 1 is the CPU default. The table picks the GPU rule's
shape (issue 43): many small steps in one stream, or many streams.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scipy scikit-learn
    cargo build --release
    /tmp/venv/bin/python scripts/steps_table.py [--bin target/release/rosenblatt] [--json F]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_sets  # noqa: E402
from defaults_table import rosenblatt  # noqa: E402

GRID = [(1, 1), (16, 1), (64, 1), (256, 1), (1, 8), (1, 64), (16, 8), (64, 8), (16, 64)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/rosenblatt")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rosenblatt-public"))
    ap.add_argument("--json", help="also write every figure to this JSON file")
    ap.add_argument("--only", help="comma-separated set names (first word, lower case)")
    ap.add_argument("--grid", help="B:S pairs, comma-separated (default: %s)" %
                    ",".join(f"{b}:{s}" for b, s in GRID))
    a = ap.parse_args()
    grid = GRID
    if a.grid:
        grid = [tuple(int(v) for v in p.split(":")) for p in a.grid.split(",")]
    rows = []
    for name, shape, load in public_sets.sets(a.cache):
        if a.only and name.split()[0].lower() not in a.only.split(","):
            continue
        paths = public_sets.write(a.cache, name, load())
        cells = {}
        for b, s in grid:
            for scaled in (False, True):
                flags = ["--minibatch", str(b), "--streams", str(s)]
                flags += ["--scale", "standard"] if scaled else []
                cells[f"{b}:{s}:{int(scaled)}"] = rosenblatt(a.bin, paths, flags)
        rows.append({"set": name, "cells": cells})
        print(f"{name}: done", file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"grid": grid, "rows": rows}, f, indent=1)
    print("| set | " + " | ".join(f"B {b}, S {s}" for b, s in grid) + " |")
    print("|---|" + "---|" * len(grid))
    for r in rows:
        c = r["cells"]
        print(f"| {r['set']} | " + " | ".join(
            f"{c[f'{b}:{s}:0'][0]:.3f} / {c[f'{b}:{s}:1'][0]:.3f}" for b, s in grid) + " |")
    print()
    print("epochs (raw / standardised):")
    for r in rows:
        c = r["cells"]
        print(f"| {r['set']} | " + " | ".join(
            f"{c[f'{b}:{s}:0'][2]} / {c[f'{b}:{s}:1'][2]}" for b, s in grid) + " |")


if __name__ == "__main__":
    main()
