"""Times rosenblatt's Python estimators against scikit-learn's Perceptron on the same data
(the README's Python table): python3 scripts/python_timing.py [n] [d]."""

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


def best_of(make, reps=3):
    best = None
    for _ in range(reps):
        est = make()
        t = time.perf_counter()
        est.fit(X, y)
        s = time.perf_counter() - t
        if best is None or s < best[0]:
            best = (s, est)
    return best


epochs = 20
rows = [
    ("scikit-learn Perceptron (SGD, online)", lambda: SkPerceptron(max_iter=epochs, tol=None, shuffle=True, random_state=0)),
    ("rosenblatt Perceptron('online', backend='cpu')", lambda: rosenblatt.Perceptron("online", epochs=epochs, patience=0, backend="cpu")),
    ("rosenblatt Perceptron('averaged', backend='cpu')", lambda: rosenblatt.Perceptron("averaged", epochs=epochs, patience=0, backend="cpu")),
    ("rosenblatt Perceptron('batch', backend='cpu')", lambda: rosenblatt.Perceptron("batch", epochs=epochs, patience=0, backend="cpu")),
]
if any(t != "Cpu" for _, _, t in rosenblatt.adapters()):
    rows.append(("rosenblatt Perceptron('batch', backend='gpu')", lambda: rosenblatt.Perceptron("batch", epochs=epochs, patience=0, backend="gpu")))
print(f"{n} x {d} float32, {epochs} epochs, best of 3 fits")
print("| estimator | fit s | ms per epoch | training accuracy |")
print("|---|---:|---:|---:|")
for name, make in rows:
    s, est = best_of(make)
    print(f"| {name} | {s:.3f} | {1e3 * s / epochs:.1f} | {est.score(X, y):.4f} |")
