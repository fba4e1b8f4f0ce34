#!/usr/bin/env python3
"""A Fashion-MNIST-sized set for timing where the real one cannot be fetched (the GPU
machine): 60,000 training and 10,000 test rows of 784 pixels in [0, 1], 10 classes around
nearby prototypes with noise and 5% of the labels redrawn (the averaged perceptron reaches
about 0.95 in some 26 epochs). Writes X_train.npy, y_train.npy, X_test.npy, y_test.npy.

    python3 scripts/fashion_like.py DIR
"""
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(7)
k, dim, n = 10, 784, 70000
base = rng.random(dim, dtype=np.float32)
proto = np.clip(base + 0.12 * rng.standard_normal((k, dim)), 0, 1).astype(np.float32)
y = rng.integers(0, k, n)
X = np.clip(proto[y] + rng.normal(0, 0.45, (n, dim)), 0, 1).astype(np.float32)
flip = rng.random(n) < 0.05
y[flip] = rng.integers(0, k, flip.sum())
np.save(f"{d}/X_train.npy", X[:60000]); np.save(f"{d}/y_train.npy", y[:60000])
np.save(f"{d}/X_test.npy", X[60000:]); np.save(f"{d}/y_test.npy", y[60000:])
