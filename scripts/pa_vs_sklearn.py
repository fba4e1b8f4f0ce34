"""The passive-aggressive rules against scikit-learn's on the same data: held-out accuracy
and fit time of rosenblatt's PassiveAggressiveClassifier and scikit-learn's SGDClassifier with
learning_rate="pa1"/"pa2" (what its deprecated PassiveAggressiveClassifier became in 1.8),
both one-vs-rest for several classes, over several seeds; prints Markdown rows.

    python3 scripts/pa_vs_sklearn.py [--seeds 5] [--epochs 20] [--C 0.1]
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.linear_model import SGDClassifier

import rosenblatt


def datasets(seed):
    for classes in (2, 3):
        X, y = make_classification(
            n_samples=20000,
            n_features=50,
            n_informative=20,
            n_classes=classes,
            random_state=seed,
        )
        yield f"make_classification 20,000 x 50, {classes} classes", X.astype(np.float32), y
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    p = rng.permutation(len(y))
    yield "digits 1,797 x 64, 10 classes", (X[p] / 16).astype(np.float32), y[p]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--C", type=float, default=0.1)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = {}
    for seed in range(a.seeds):
        for name, X, y in datasets(seed):
            cut = len(y) * 2 // 3
            tr, te = slice(0, cut), slice(cut, None)
            for loss, lr in (("hinge", "pa1"), ("squared_hinge", "pa2")):
                ests = [
                    (
                        "rosenblatt",
                        rosenblatt.PassiveAggressiveClassifier(
                            C=a.C,
                            loss=loss,
                            multiclass="ovr",
                            max_iter=a.epochs,
                            tol=None,
                            random_state=seed,
                            backend="cpu",
                        ),
                    ),
                    (
                        "scikit-learn",
                        SGDClassifier(
                            loss="hinge",
                            penalty=None,
                            learning_rate=lr,
                            eta0=a.C,
                            max_iter=a.epochs,
                            tol=None,
                            random_state=seed,
                        ),
                    ),
                ]
                if len(np.unique(y)) > 2:
                    ests.append(
                        (
                            "rosenblatt, direct multiclass",
                            rosenblatt.PassiveAggressiveClassifier(
                                C=a.C,
                                loss=loss,
                                max_iter=a.epochs,
                                tol=None,
                                random_state=seed,
                                backend="cpu",
                            ),
                        )
                    )
                for who, est in ests:
                    t = time.perf_counter()
                    est.fit(X[tr], y[tr])
                    dt = time.perf_counter() - t
                    acc = est.score(X[te], y[te])
                    rows.setdefault((name, loss, who), []).append((acc, dt))
    print(f"| data | loss | library | held-out accuracy (mean, min-max over {a.seeds} seeds) | fit s |")
    print("|---|---|---|---:|---:|")
    for (name, loss, who), v in rows.items():
        acc = np.array([x[0] for x in v])
        dt = np.median([x[1] for x in v])
        print(
            f"| {name} | {loss} | {who} | {100 * acc.mean():.1f}% ({100 * acc.min():.1f}-"
            f"{100 * acc.max():.1f}) | {dt:.3f} |"
        )


if __name__ == "__main__":
    main()
