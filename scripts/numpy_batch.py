#!/usr/bin/env python3
"""The batch perceptron epoch in NumPy (and scikit-learn's Perceptron, one epoch per call),
timed on data of the same shape and kind as `rosenblatt bench`: the CPU baselines for the
README's Performance section.

    python3 scripts/numpy_batch.py --n 1048576 --d 64 --epochs 30

The rule is the one rosenblatt runs: s = X w + b, mistakes where y s <= 0, then
w += eta * X^T (y * mistake) (two passes over X: one matrix-vector product each way).
Prints the median ms per epoch (first epoch excluded) and the GB/s that means for one
read of X. BLAS threads: as OpenBLAS sets them (all cores) unless OPENBLAS_NUM_THREADS says.
"""
import argparse
import statistics
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sklearn", action="store_true", help="also time sklearn Perceptron")
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    X = rng.standard_normal((a.n, a.d), dtype=np.float32)
    w_true = rng.standard_normal(a.d).astype(np.float32)
    y = np.where(X @ w_true >= 0, 1.0, -1.0).astype(np.float32)
    flip = rng.random(a.n) < a.noise
    y[flip] = -y[flip]

    w = np.zeros(a.d, dtype=np.float32)
    b = np.float32(0.0)
    times, mistakes = [], []
    for _ in range(a.epochs + 1):
        t = time.perf_counter()
        m = y * (X @ w + b)
        c = np.where(m <= 0, y, np.float32(0.0))
        w += X.T @ c
        b += c.sum()
        times.append(time.perf_counter() - t)
        mistakes.append(int(np.count_nonzero(c)))
    ms = statistics.median(times[1:]) * 1e3
    gb = X.nbytes / 1e9
    print(f"numpy {np.__version__}: n = {a.n}, d = {a.d}: {ms:.2f} ms/epoch median over "
          f"{a.epochs} epochs, {gb / ms * 1e3:.1f} GB/s for one read of X "
          f"(mistakes per epoch {min(mistakes[1:])}-{max(mistakes[1:])})")

    if a.sklearn:
        import sklearn
        from sklearn.linear_model import Perceptron

        # float64 up front, so the timed calls do not include sklearn's conversion.
        X64, y64 = X.astype(np.float64), y.astype(np.float64)
        from sklearn.linear_model import SGDClassifier

        classes = np.array([-1.0, 1.0])
        models = [
            ("Perceptron, shuffle=False", Perceptron(shuffle=False)),
            ("Perceptron, shuffle=True (its default)", Perceptron(shuffle=True, random_state=0)),
            # The averaged perceptron: the perceptron loss, constant step 1, no penalty.
            ("SGDClassifier averaged perceptron, shuffle=True", SGDClassifier(
                loss="perceptron", penalty=None, learning_rate="constant", eta0=1.0,
                average=True, shuffle=True, random_state=0)),
        ]
        for name, p in models:
            t = []
            for _ in range(4):
                s = time.perf_counter()
                p.partial_fit(X64, y64, classes=classes)
                t.append(time.perf_counter() - s)
            print(f"sklearn {sklearn.__version__} {name}: partial_fit (one online epoch, "
                  f"one core): {statistics.median(t[1:]) * 1e3:.1f} ms/epoch")


if __name__ == "__main__":
    main()
