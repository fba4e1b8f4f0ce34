"""Times rosenblatt's Python estimators against scikit-learn's Perceptron on the same data
(the Python guide's table): python3 scripts/python_timing.py [n] [d].

make_classification n x d (float32, 5% flipped labels), 80% to train and 20% held out; each
fit is the best of 3. Two groups: the same 20 epochs for every estimator (tol=None), and each
library's defaults (scikit-learn's Perceptron(): max_iter=1000, tol=1e-3,
n_iter_no_change=5; rosenblatt's Perceptron(): the averaged perceptron, patience 10, features
scaled by their largest magnitude)."""

import sys
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import Perceptron as SkPerceptron

import rosenblatt

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
d = int(sys.argv[2]) if len(sys.argv) > 2 else 100
X, y = make_classification(
    n_samples=n, n_features=d, n_informative=d // 2, flip_y=0.05, random_state=0
)
X = X.astype(np.float32)
cut = int(0.8 * n)
Xtr, ytr, Xte, yte = X[:cut], y[:cut], X[cut:], y[cut:]


def best_of(make, reps=3):
    best = None
    for _ in range(reps):
        est = make()
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        s = time.perf_counter() - t
        if best is None or s < best[0]:
            best = (s, est)
    return best


def predict_seconds(est):
    t = time.perf_counter()
    est.predict(Xte)
    return time.perf_counter() - t


epochs = 20
R = rosenblatt.Perceptron
rows = [
    ("scikit-learn `Perceptron(max_iter=20, tol=None)` (online)",
     lambda: SkPerceptron(max_iter=epochs, tol=None, random_state=0)),
    ("rosenblatt `Perceptron(\"online\", max_iter=20, tol=None, scale=None)` (scikit-learn's rule)",
     lambda: R(algo="online", max_iter=epochs, tol=None, scale=None, backend="cpu")),
    ("rosenblatt `Perceptron(\"online\", max_iter=20, tol=None)` (max-abs scaled)",
     lambda: R(algo="online", max_iter=epochs, tol=None, backend="cpu")),
    ("rosenblatt `Perceptron(max_iter=20, tol=None)` (averaged)",
     lambda: R(max_iter=epochs, tol=None, backend="cpu")),
    ("rosenblatt `Perceptron(\"batch\", max_iter=20, tol=None)`",
     lambda: R(algo="batch", max_iter=epochs, tol=None, backend="cpu")),
]
if any(t != "Cpu" for _, _, t in rosenblatt.adapters()):
    rows.append(("rosenblatt `Perceptron(\"batch\", max_iter=20, tol=None, backend=\"gpu\")`",
                 lambda: R(algo="batch", max_iter=epochs, tol=None, backend="gpu")))
rows += [
    ("scikit-learn `Perceptron()` (defaults)", lambda: SkPerceptron()),
    ("rosenblatt `Perceptron()` (defaults)", lambda: R(backend="cpu")),
]
print(f"{n} x {d} float32 ({cut} to train, {n - cut} held out), best of 3 fits")
print("| estimator | fit s | epochs | ms per epoch | held-out accuracy | predict ms |")
print("|---|---:|---:|---:|---:|---:|")
for name, make in rows:
    s, est = best_of(make)
    it = int(np.max(est.n_iter_))
    print(
        f"| {name} | {s:.3f} | {it} | {1e3 * s / it:.1f} | {est.score(Xte, yte):.4f} "
        f"| {1e3 * predict_seconds(est):.1f} |"
    )
