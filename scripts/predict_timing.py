"""Times predict of rosenblatt's Perceptron against scikit-learn's on the same fitted data
(the Python guide's table): python3 scripts/predict_timing.py [reps].

Both fitted on make_classification 2,000 x 100 with their default parameters (rosenblatt:
backend="auto", the averaged perceptron with max-abs scaling); then predict on 10 rows and
on 40,000 x 100 rows, as float64 (NumPy's default) and as float32. Each figure is the median
of `reps` calls (200 for 10 rows, a tenth of that for 40,000) after one warm-up call."""

import statistics
import sys
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import Perceptron as SkPerceptron

import rosenblatt

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
X, y = make_classification(n_samples=2000, n_features=100, n_informative=50, random_state=0)
ours = rosenblatt.Perceptron().fit(X, y)
theirs = SkPerceptron().fit(X, y)
rng = np.random.default_rng(1)


def median_ms(f, n):
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


print("| predict | rosenblatt | scikit-learn |")
print("|---|---:|---:|")
for rows in (10, 40_000):
    for dtype in (np.float64, np.float32):
        Xp = rng.standard_normal((rows, 100)).astype(dtype)
        n = reps if rows == 10 else max(reps // 10, 5)
        a = median_ms(lambda: ours.predict(Xp), n)
        b = median_ms(lambda: theirs.predict(Xp), n)
        assert np.mean(ours.predict(Xp) == theirs.predict(Xp)) > 0.5
        print(f"| {rows:,} x 100 {np.dtype(dtype).name} | {a:.3f} ms | {b:.3f} ms |")
