"""The Python package against the crate: the CLI's model, GPU == CPU, sparse == dense,
partial_fit, pipelines, errors, the model file, borrowed arrays and the GIL."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import rosenblatt
from rosenblatt import KernelPerceptron, Perceptron

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "tests" / "data" / "digits.csv"


def cli():
    """The rosenblatt binary: $ROSENBLATT_BIN, or the repository's build (made if missing)."""
    given = os.environ.get("ROSENBLATT_BIN")
    if given:
        return given
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "rosenblatt"
        if p.exists():
            return str(p)
    subprocess.run(["cargo", "build", "--bin", "rosenblatt"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "rosenblatt")


def digits():
    data = np.loadtxt(DIGITS, delimiter=",", skiprows=1, dtype=np.float32)
    return data[:, :-1], data[:, -1].astype(int)


def gpu_present():
    """A GPU adapter (software ones count); with ROSENBLATT_REQUIRE_GPU=1 a missing one
    fails instead of skipping."""
    if rosenblatt.adapters():
        return True
    if os.environ.get("ROSENBLATT_REQUIRE_GPU") == "1":
        pytest.fail("ROSENBLATT_REQUIRE_GPU=1 but no GPU adapter")
    return False


def test_coef_equals_the_cli_model_on_digits(tmp_path):
    # The command line and the estimator share their defaults (online scaling among them):
    # the same data and seed give the same model and the same predictions.
    out = tmp_path / "m.json"
    subprocess.run(
        [cli(), "train", str(DIGITS), "--backend", "cpu", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    m = json.loads(out.read_text())
    X, y = digits()
    clf = Perceptron(backend="cpu").fit(X, y)
    assert m["kind"] == "multiclass" and m["scaling"]["kind"] == "online"
    got = subprocess.run(
        [cli(), "predict", str(out), str(DIGITS), "--backend", "cpu"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert got == [str(v) for v in clf.predict(X)]
    assert [str(c) for c in clf.classes_] == m["classes"]
    clf.save(tmp_path / "py.json")
    mine = json.loads((tmp_path / "py.json").read_text())
    for key in ("scaling", "class_weights", "class_bias"):
        assert mine[key] == m[key]
    # coef_ is in the units of the features as given (the scaling folded in).
    df = clf.decision_function(X)
    np.testing.assert_allclose(X @ clf.coef_.T + clf.intercept_, df, atol=1e-5 * np.abs(df).max())
    assert clf.n_iter_ == m["training"]["epochs"]
    assert clf.report_["mistakes_per_epoch"] == m["training"]["mistakes_per_epoch"]


def test_the_saved_model_is_the_cli_format(tmp_path):
    X, y = digits()
    clf = Perceptron(algo="pocket", backend="cpu", max_iter=20).fit(X, y)
    path = tmp_path / "model.json"
    clf.save(path)
    r = subprocess.run(
        [cli(), "predict", str(path), str(DIGITS)], check=True, capture_output=True, text=True
    )
    assert [int(v) for v in r.stdout.split()] == list(clf.predict(X))
    back = rosenblatt.load(path)
    assert isinstance(back, Perceptron) and back.algo == "pocket" and back.max_iter == 20
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    np.testing.assert_array_equal(back.coef_, clf.coef_)
    k = KernelPerceptron(gamma=0.01, max_iter=5, backend="cpu").fit(X[y < 2], y[y < 2])
    k.save(tmp_path / "k.json")
    kb = rosenblatt.load(tmp_path / "k.json")
    assert isinstance(kb, KernelPerceptron)
    np.testing.assert_array_equal(kb.decision_function(X[:50]), k.decision_function(X[:50]))
    with pytest.raises(ValueError, match="model"):
        (tmp_path / "bad.json").write_text('{"format": "rosenblatt-model", "version": 99}')
        rosenblatt.load(tmp_path / "bad.json")


def test_gpu_equals_cpu_on_integer_data():
    if not gpu_present():
        pytest.skip("no GPU adapter")
    X, y = digits()
    for algo in ("batch", "pocket"):
        # Unscaled: integer features, so both backends' sums are exact.
        c = Perceptron(algo=algo, backend="cpu", max_iter=30, scale=None).fit(X, y)
        g = Perceptron(algo=algo, backend="gpu", max_iter=30, scale=None).fit(X, y)
        assert g.report_["backend"] == "gpu"
        np.testing.assert_array_equal(g.coef_, c.coef_)
        np.testing.assert_array_equal(g.intercept_, c.intercept_)
        np.testing.assert_array_equal(g.decision_function(X), c.decision_function(X))
    b = y < 2
    c = KernelPerceptron(gamma=0.001, max_iter=5, backend="cpu").fit(X[b], y[b])
    g = KernelPerceptron(gamma=0.001, max_iter=5, backend="gpu").fit(X[b], y[b])
    np.testing.assert_allclose(g.decision_function(X[b]), c.decision_function(X[b]), rtol=1e-4)
    with pytest.raises(RuntimeError, match="no-such-adapter"):
        Perceptron(backend="gpu", adapter="no-such-adapter").fit(X, y)


def test_the_online_rule_in_steps_and_streams_on_both_backends(tmp_path):
    X, y = digits()
    X = X.astype(np.float32)
    kw = dict(max_iter=6, n_iter_no_change=None, tol=None, scale=None, random_state=3)
    c = Perceptron(backend="cpu", minibatch=4, streams=2, **kw).fit(X, y)
    assert (c.report_["minibatch"], c.report_["streams"]) == (4, 2)
    assert c.get_params()["minibatch"] == 4 and c.score(X, y) > 0.9
    # The model file keeps them; loading gives the same estimator parameters.
    path = tmp_path / "m.json"
    c.save(str(path))
    assert json.loads(path.read_text())["params"]["streams"] == 2
    back = rosenblatt.load(str(path))
    assert (back.minibatch, back.streams) == (4, 2)
    for bad in (dict(minibatch=0), dict(streams=0), dict(streams=5000), dict(minibatch=1.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Perceptron(**bad).fit(X, y)
    with pytest.raises(ValueError, match="minibatch"):
        Perceptron(algo="voted", minibatch=2).fit(X, y)
    if gpu_present():
        # Integer pixels and two streams: the GPU's kernels give the CPU's model exactly.
        g = Perceptron(backend="gpu", minibatch=4, streams=2, **kw).fit(X, y)
        assert g.report_["backend"] == "gpu"
        np.testing.assert_array_equal(g.coef_, c.coef_)
        np.testing.assert_array_equal(g.intercept_, c.intercept_)


def test_sparse_equals_dense():
    X, y = digits()
    dense = Perceptron(backend="cpu", max_iter=40).fit(X, y)
    for make in (sp.csr_matrix, sp.csc_matrix, sp.csr_array):
        s = Perceptron(backend="cpu", max_iter=40).fit(make(X), y)
        np.testing.assert_array_equal(s.coef_, dense.coef_)
        np.testing.assert_array_equal(s.predict(make(X)), dense.predict(X))
    # Duplicate entries are summed, as scipy means them.
    m = sp.coo_matrix(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 3)).tocsr(copy=False)
    assert Perceptron(backend="cpu").fit(m, [0, 1]).n_features_in_ == 3


def batch_epoch(w, b, X, y):
    """The batch rule by hand: w += sum over the mistakes (y (w.x + b) <= 0) of y x."""
    s = np.where(y == 1, 1.0, -1.0)
    wrong = s * (X @ w + b) <= 0
    return w + (s[wrong, None] * X[wrong]).sum(0), b + s[wrong].sum()


def test_partial_fit_runs_one_batch_epoch_per_call():
    X, y = digits()
    X, y = X.astype(np.float64), (y >= 5).astype(int)
    half = len(y) // 2
    clf = Perceptron(algo="batch", backend="cpu", scale=None)
    clf.partial_fit(X[:half], y[:half], classes=[0, 1])
    clf.partial_fit(X[half:], y[half:])
    w, b = batch_epoch(np.zeros(X.shape[1]), 0.0, X[:half], y[:half])
    w, b = batch_epoch(w, b, X[half:], y[half:])
    np.testing.assert_array_equal(clf.coef_[0], w.astype(np.float32))
    assert clf.intercept_[0] == np.float32(b)
    # Every class is given on the first call; new ones later are refused.
    with pytest.raises(ValueError, match="classes"):
        Perceptron().partial_fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        clf.partial_fit(X[:3], [0, 1, 7])
    # The online rule: one pass per call, from the weights so far.
    o = Perceptron(algo="online", backend="cpu", shuffle=False, scale=None)
    o.partial_fit(X[:half], y[:half], classes=[0, 1])
    o.partial_fit(X[half:], y[half:])
    assert o.n_iter_ == 1 and o.score(X, y) > 0.8


def test_pipeline_and_grid_search():
    X, y = digits()
    pipe = make_pipeline(StandardScaler(), Perceptron(backend="cpu", max_iter=50))
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.9
    grid = GridSearchCV(
        Perceptron(backend="cpu", max_iter=20), {"algo": ["batch", "averaged"], "eta0": [1.0, 0.5]}, cv=3
    )
    grid.fit(X, y)
    assert grid.best_score_ > 0.85 and grid.best_params_["algo"] in ("batch", "averaged")


def test_the_report_and_novikoff():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    w = np.array([1, -2, 0.5, 1, 0], dtype=np.float32)
    m = X @ w
    keep = np.abs(m) > 0.5
    X, y = X[keep], (m[keep] > 0).astype(int)
    clf = Perceptron(algo="batch", backend="cpu").fit(X, y)
    r = clf.report_
    assert r["converged"] and r["train_accuracy"] == 1.0
    assert r["margin"] > 0
    assert r["mistake_bound"] == pytest.approx((r["radius"] / r["margin"]) ** 2)
    assert r["total_mistakes"] == sum(r["mistakes_per_epoch"])


def test_class_weight_and_sample_weight():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 0).astype(int)
    base = Perceptron(algo="pocket", backend="cpu", max_iter=50).fit(X, y)
    heavy = Perceptron(algo="pocket", backend="cpu", max_iter=50, class_weight={1: 50.0}).fit(X, y)
    # The heavy class is missed less.
    missed = lambda c: np.mean(c.predict(X)[y == 1] != 1)  # noqa: E731
    assert missed(heavy) < missed(base)
    sw = np.where(y == 1, 50.0, 1.0)
    weighted = Perceptron(algo="pocket", backend="cpu", max_iter=50).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(weighted.coef_, heavy.coef_)
    with pytest.raises(ValueError):
        Perceptron().fit(X, y, sample_weight=-sw)


def test_errors_are_python_exceptions():
    X, y = digits()
    with pytest.raises(ValueError, match="eta0 must be"):
        Perceptron(eta0=2.0, backend="cpu").fit(X, y)
    with pytest.raises(ValueError, match="backend"):
        Perceptron(backend="tpu").fit(X, y)
    bad = X.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError):
        Perceptron(backend="cpu").fit(bad, y)
    with pytest.raises(ValueError, match="two classes"):
        Perceptron(backend="cpu").fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="binary"):
        KernelPerceptron(backend="cpu").fit(X, y)
    with pytest.raises(ValueError, match="algo"):
        Perceptron(algo="kernel").fit(X, y)


def test_training_releases_the_gil():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400_000, 40)).astype(np.float32)
    y = (X @ rng.normal(size=40) + rng.normal(size=400_000) > 0).astype(int)
    state = {"in_fit": False, "done": False, "ticks": 0}

    def train():
        state["in_fit"] = True
        Perceptron(backend="cpu", max_iter=40, tol=None).fit(X, y)
        state["done"] = True

    t = threading.Thread(target=train)
    t.start()
    while not state["done"]:
        if state["in_fit"]:
            state["ticks"] += 1
        time.sleep(0.001)
    t.join()
    # Held GIL: this thread would get in at most once while the crate trains.
    assert state["ticks"] > 20, state


def test_two_classes_with_a_row_per_class_look_binary(tmp_path):
    X, y = digits()
    b = y < 2
    m = Perceptron(algo="multiclass", backend="cpu", max_iter=20).fit(X[b], y[b])
    assert m.coef_.shape == (1, X.shape[1]) and m.intercept_.shape == (1,)
    d = m.decision_function(X[b])
    assert d.shape == (b.sum(),)
    np.testing.assert_allclose(d, X[b] @ m.coef_[0] + m.intercept_[0], rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(m.predict(X[b]), np.where(d > 0, 1, 0))
    with pytest.raises(FileNotFoundError):
        rosenblatt.load(tmp_path / "missing.json")


def test_the_python_guide_example_runs():
    """The Python guide's example (docs/python.md), as written there, on the GPU."""
    if not gpu_present():
        pytest.skip("no GPU adapter")
    section = (ROOT / "docs" / "python.md").read_text()
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    assert 'backend="gpu"' in code and "report_" in code
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    accuracy, radius = float(out[0]), float(out[1])
    assert accuracy > 0.9 and radius > 0


def test_passive_aggressive_matches_scikit_learn():
    """PA-I and PA-II against scikit-learn's (SGDClassifier with learning_rate "pa1"/"pa2",
    what its PassiveAggressiveClassifier became) on the same splits, binary and 3 classes
    (one-vs-rest, as scikit-learn does it): mean held-out accuracy over twelve seeds within
    4 points (the last iterate of an online rule on noisy data varies by 10 points from seed
    to seed). The rules differ in details (the bias counts in ||x||^2 here), so the models
    are close, not equal."""
    import warnings

    from sklearn.datasets import make_classification
    from sklearn.linear_model import SGDClassifier

    warnings.simplefilter("ignore")
    for classes in (2, 3):
        for loss, rate in (("hinge", "pa1"), ("squared_hinge", "pa2")):
            ours, theirs = [], []
            for seed in range(12):
                X, y = make_classification(
                    n_samples=6000,
                    n_features=20,
                    n_informative=10,
                    n_classes=classes,
                    random_state=seed,
                )
                X = X.astype(np.float32)
                tr, te = slice(0, 4000), slice(4000, None)
                a = rosenblatt.PassiveAggressiveClassifier(
                    C=0.1, loss=loss, multiclass="ovr", max_iter=20, tol=None, random_state=seed,
                    backend="cpu",
                ).fit(X[tr], y[tr])
                b = SGDClassifier(
                    loss="hinge", penalty=None, learning_rate=rate, eta0=0.1, max_iter=20,
                    tol=None, random_state=seed,
                ).fit(X[tr], y[tr])
                assert a.coef_.shape == b.coef_.shape
                ours.append(a.score(X[te], y[te]))
                theirs.append(b.score(X[te], y[te]))
            assert np.mean(ours) > np.mean(theirs) - 0.04, (classes, loss, ours, theirs)


def test_arow_trains_one_pass_like_the_cli_and_saves_and_loads(tmp_path):
    """AROWClassifier is the CLI's `--algo arow` (one pass by default, one-vs-rest for more
    than two classes), and its model file loads back as an AROWClassifier."""
    X, y = digits()
    clf = rosenblatt.AROWClassifier(r=10.0, backend="cpu").fit(X, y)
    assert clf.n_iter_ == 1
    assert clf.report_["algo"] == "arow" and clf.report_["heads"] == 10
    assert clf.score(X, y) > 0.9
    assert not hasattr(clf, "partial_fit")
    clf.save(tmp_path / "arow.json")
    back = rosenblatt.load(tmp_path / "arow.json")
    assert isinstance(back, rosenblatt.AROWClassifier)
    assert (back.r, back.max_iter) == (10.0, 1)
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    # The same model as the command line's on the same rows.
    subprocess.run(
        [cli(), "train", str(DIGITS), "--algo", "arow", "--arow-r", "10",
         "--backend", "cpu", "-o", str(tmp_path / "cli.json")],
        check=True, capture_output=True,
    )
    theirs = rosenblatt.load(tmp_path / "cli.json")
    np.testing.assert_array_equal(theirs.coef_, clf.coef_)
    if gpu_present():
        # On a GPU: AROW's own steps (8 rows, one stream), the CPU twin's model to rounding.
        g = rosenblatt.AROWClassifier(r=10.0, backend="gpu").fit(X, y)
        assert g.report_["backend"] == "gpu"
        assert (g.report_["minibatch"], g.report_["streams"]) == (8, 1)
        subprocess.run(
            [cli(), "train", str(DIGITS), "--algo", "arow", "--arow-r", "10",
             "--backend", "cpu", "--minibatch", "8", "-o", str(tmp_path / "twin.json")],
            check=True, capture_output=True,
        )
        twin = rosenblatt.load(tmp_path / "twin.json")
        np.testing.assert_allclose(g.coef_, twin.coef_, rtol=1e-4, atol=1e-5)
        assert g.score(X, y) > 0.9
    with pytest.raises(ValueError, match="r must be"):
        rosenblatt.AROWClassifier(r=0.0).fit(X, y)
    # The full covariance: binary rows give the mistakes and the paper's bound; the model
    # file keeps the choice.
    b = y < 2
    full = rosenblatt.AROWClassifier(covariance="full", max_iter=3, backend="auto").fit(X[b], y[b])
    bound = full.report_["arow_bound"]
    assert bound["mistakes"] > 0 and bound["log_det"] > 0
    if bound["bound"] is not None:
        assert bound["mistakes"] <= bound["bound"]
    full.save(tmp_path / "full.json")
    assert rosenblatt.load(tmp_path / "full.json").covariance == "full"
    assert "arow_bound" not in rosenblatt.AROWClassifier().fit(X[b], y[b]).report_
    with pytest.raises(ValueError, match="covariance"):
        rosenblatt.AROWClassifier(covariance="dense").fit(X, y)


def test_passive_aggressive_saves_and_loads(tmp_path):
    X, y = digits()
    clf = rosenblatt.PassiveAggressiveClassifier(
        C=0.5, loss="squared_hinge", max_iter=5, backend="cpu"
    ).fit(X, y)
    clf.save(tmp_path / "pa.json")
    back = rosenblatt.load(tmp_path / "pa.json")
    assert isinstance(back, rosenblatt.PassiveAggressiveClassifier)
    assert (back.C, back.loss) == (0.5, "squared_hinge")
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    with pytest.raises(ValueError, match="loss"):
        rosenblatt.PassiveAggressiveClassifier(loss="log").fit(X, y)
    with pytest.raises(ValueError, match="C must be"):
        rosenblatt.PassiveAggressiveClassifier(C=0.0).fit(X, y)


def test_vw_hasher_gives_the_command_lines_columns(tmp_path):
    """VWHasher hashes raw features as `train data.vw` does: a model trained on its output
    equals the command line's trained on the same lines, and it sits in a Pipeline."""
    from sklearn.pipeline import make_pipeline

    lines = (ROOT / "tests" / "fixtures" / "v5" / "binary.vw").read_text().splitlines()
    y = np.array([int(line.split()[0]) for line in lines])
    features = [line[line.index("|"):] for line in lines]
    X = rosenblatt.VWHasher(n_bits=8, quadratic=["ab"]).fit_transform(features)
    assert X.shape == (len(lines), 256) and X.dtype == np.float32
    # The same columns and values from the whole lines (labels, importances, tags dropped).
    np.testing.assert_array_equal(
        rosenblatt.VWHasher(n_bits=8, quadratic=["ab"]).transform(lines).toarray(), X.toarray()
    )
    ours = rosenblatt.Perceptron(
        algo="online", max_iter=1, shuffle=False, scale=None, tol=None, backend="cpu"
    ).fit(X, y)
    # (The same lines without their importances, which the hasher drops.)
    (tmp_path / "t.vw").write_text("\n".join(f"{c} {f}" for c, f in zip(y, features)) + "\n")
    subprocess.run(
        [cli(), "train", str(tmp_path / "t.vw"), "--hash-bits", "8", "-q", "ab", "--algo",
         "online", "--epochs", "1", "--no-shuffle", "--backend", "cpu", "--scale", "none",
         "-o", str(tmp_path / "m.json")],
        check=True, capture_output=True,
    )
    theirs = rosenblatt.load(tmp_path / "m.json")
    np.testing.assert_array_equal(ours.coef_, theirs.coef_)
    np.testing.assert_array_equal(ours.intercept_, theirs.intercept_)
    pipe = make_pipeline(rosenblatt.VWHasher(n_bits=10), rosenblatt.AROWClassifier(backend="cpu"))
    assert pipe.fit(features, y).score(features, y) > 0.8
    with pytest.raises(ValueError, match="n_bits"):
        rosenblatt.VWHasher(n_bits=40).transform(features)
    with pytest.raises(ValueError, match="line break"):
        rosenblatt.VWHasher().transform(["|a x\n|a y"])
    with pytest.raises(ValueError, match="a sequence of strings"):
        rosenblatt.VWHasher().transform("|a x")


def test_column_hasher_hashes_a_table_as_the_command_line_hashes_its_csv(tmp_path):
    """ColumnHasher hashes a table as `train data.csv --categorical ...` does: the rows of
    the Vowpal Wabbit lines `| c=v name:x`, and a model trained on them is the command
    line's."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {"n1": [0.5, None, 3.0, 1.0], "color": ["red", "blue", None, "red"], "b": [2, 0, 1, 5]}
    )
    X = rosenblatt.ColumnHasher(categorical=["color"], n_bits=10).fit_transform(df)
    assert X.shape == (4, 1024) and X.dtype == np.float32
    lines = ["| n1:0.5 color=red b:2", "| color=blue", "| n1:3 b:1", "| n1:1 color=red b:5"]
    want = rosenblatt.VWHasher(n_bits=10).transform(lines)
    np.testing.assert_array_equal(X.toarray(), want.toarray())
    # Rows without names: columns named by position.
    rows = [[0.5, "red", 2], [None, "blue", 0]]
    got = rosenblatt.ColumnHasher(categorical=[1], n_bits=10).transform(rows)
    np.testing.assert_array_equal(
        got.toarray(), rosenblatt.VWHasher(n_bits=10).transform(["| 0:0.5 1=red 2:2", "| 1=blue"]).toarray()
    )
    # Any text is a category: commas, spaces, quotes, a leading '#', a line break.
    odd = pd.DataFrame({"c": ["a, b", "# x", 'say "hi"', "two\nlines", "a, b"], "x": [1] * 5})
    H = rosenblatt.ColumnHasher(categorical="c", n_bits=12).transform(odd).toarray()
    assert H.shape == (5, 4096)
    np.testing.assert_array_equal(H[0], H[4])
    assert len({H[i].tobytes() for i in range(4)}) == 4
    # The command line's model on the same table written as CSV, and ours on the hashed rows.
    y = np.array([1, -1, -1, 1])
    df.assign(label=y).to_csv(tmp_path / "t.csv", index=False)
    subprocess.run(
        [cli(), "train", str(tmp_path / "t.csv"), "--categorical", "color", "--hash-bits",
         "10", "--algo", "online", "--epochs", "1", "--no-shuffle", "--backend", "cpu",
         "--scale", "none", "-o", str(tmp_path / "m.json")],
        check=True, capture_output=True,
    )
    ours = rosenblatt.Perceptron(
        algo="online", max_iter=1, shuffle=False, scale=None, tol=None, backend="cpu"
    ).fit(X, y)
    theirs = rosenblatt.load(tmp_path / "m.json")
    np.testing.assert_array_equal(ours.coef_, theirs.coef_)
    np.testing.assert_array_equal(ours.intercept_, theirs.intercept_)
    with pytest.raises(ValueError, match="at least one column"):
        rosenblatt.ColumnHasher().transform(df)
    with pytest.raises(ValueError, match="no column named"):
        rosenblatt.ColumnHasher(categorical=["colour"]).transform(df)
    with pytest.raises(ValueError, match="not a number"):
        rosenblatt.ColumnHasher(categorical=["b"]).transform(df)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT from a timer")
def test_ctrl_c_stops_a_long_fit_within_a_second_and_keeps_the_estimator():
    # A fit of 10^12 epochs on rows no rule separates, interrupted by SIGINT one second in:
    # KeyboardInterrupt within a second, the estimator's fitted attributes as before.
    script = """
import json, os, signal, threading, time
import numpy as np
from rosenblatt import Perceptron
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 5)).astype(np.float32)
y = rng.integers(0, 2, 300)
clf = Perceptron(algo="online", backend="cpu", max_iter=5, tol=None).fit(X, y)
before = (clf.coef_.tolist(), clf.n_iter_, clf.report_)
clf.set_params(max_iter=10**12)
sent = []
threading.Timer(1.0, lambda: (sent.append(time.perf_counter()),
                              os.kill(os.getpid(), signal.SIGINT))).start()
try:
    clf.fit(X, y)
    out = {"raised": False}
except KeyboardInterrupt:
    out = {"raised": True, "delay": time.perf_counter() - sent[0],
           "same": (clf.coef_.tolist(), clf.n_iter_, clf.report_) == before}
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["raised"], out
    assert out["delay"] < 1.0, out
    assert out["same"], out
