#!/usr/bin/env python3
"""Test accuracy of the averaged, batch, pocket and online rules with `--scale none`,
`maxabs` and `standard` on the README's six public splits (scripts/public_sets.py): the
figures behind the question of a default scaling (docs/python.md, "Class weights").

    cargo build --release
    python3 scripts/scale_defaults.py [--bin target/release/rosenblatt]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_sets  # noqa: E402
from defaults_table import rosenblatt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/rosenblatt")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rosenblatt-public"))
    a = ap.parse_args()
    scales = ["none", "maxabs", "standard"]
    algos = ["averaged", "batch", "pocket", "online"]
    print("| set | " + " | ".join(f"{r} ({' / '.join(scales)})" for r in algos) + " |")
    print("|---|" + "---|" * len(algos))
    for name, _, load in public_sets.sets(a.cache):
        paths = public_sets.write(a.cache, name, load())
        cells = []
        for algo in algos:
            accs = [rosenblatt(a.bin, paths, ["--algo", algo, "--scale", s])[0] for s in scales]
            cells.append(" / ".join(f"{x:.3f}" for x in accs))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
