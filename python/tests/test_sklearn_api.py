"""scikit-learn's parameter names and their meanings, the 0.1 names' deprecation, messages in
Python's words, warm starts, threads, DataFrames and ONNX export."""

import json
import pathlib
import re
import subprocess
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_digits, make_classification

import rosenblatt
from rosenblatt import (
    AROWClassifier,
    InvalidParameterError,
    KernelPerceptron,
    PassiveAggressiveClassifier,
    Perceptron,
    _rosenblatt,
)

from test_python import cli

PACKAGE = pathlib.Path(rosenblatt.__file__).parent


def digits():
    X, y = load_digits(return_X_y=True)
    return X.astype(np.float32), y


def params_of(est):
    return json.loads(est.model_)["params"]


# Estimator parameter -> the crate's TrainParams field it sets.
SHARED_DEFAULTS = {
    "max_iter": "epochs",
    "eta0": "lr",
    "fit_intercept": "fit_bias",
    "shuffle": "shuffle",
    "random_state": "seed",
    "margin_threshold": "margin_threshold",
    "multiclass": "multiclass",
    "multiclass_update": "multiclass_update",
    "max_vectors": "max_vectors",
    "minibatch": "minibatch",
    "streams": "streams",
}


@pytest.mark.parametrize("cls", [Perceptron, PassiveAggressiveClassifier, AROWClassifier])
def test_the_estimators_defaults_are_the_librarys(cls):
    """The defaults are written once, in the crate (TrainParams::for_algo): every default
    an estimator shares with the CLI is the crate's, and Perceptron() trains its algorithm."""
    est = cls()
    algo = est.algo
    if cls is Perceptron:
        assert algo == json.loads(_rosenblatt.defaults())["algo"]
    lib = json.loads(_rosenblatt.defaults(algo))
    shown = est.get_params()
    checked = [k for k in SHARED_DEFAULTS if k in shown]
    assert len(checked) >= 5
    for name in checked:
        field = SHARED_DEFAULTS[name]
        # (A model file writes minibatch and streams only when they are not 1.)
        expected = lib[field] if field in lib or field not in ("minibatch", "streams") else 1
        assert shown[name] == expected, name
    # ... and a fit sends them: the model file's parameters are the library's.
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    sent = params_of(cls(backend="cpu").fit(X, y))
    for key in ("init", "multiclass", "multiclass_update", "max_vectors", "epochs", "lr"):
        assert sent[key] == lib[key], key
    with pytest.raises(ValueError, match="unknown algorithm"):
        _rosenblatt.defaults("perceptron")


def test_scikit_learns_names_reach_the_crate():
    X, y = digits()
    m = Perceptron(
        algo="batch", max_iter=7, eta0=0.5, tol=0.05, n_iter_no_change=3, random_state=11,
        backend="cpu",
    ).fit(X, y)
    p = params_of(m)
    assert (p["epochs"], p["lr"], p["patience"], p["seed"]) == (7, 0.5, 3, 11)
    assert p["min_improvement"] == pytest.approx(0.05)
    assert "validation_fraction" not in p
    # tol=None: no early stop by improvement (scikit-learn's meaning), max_iter epochs.
    m = Perceptron(algo="batch", max_iter=12, tol=None, backend="cpu").fit(X, y)
    assert params_of(m)["patience"] == 0 and m.n_iter_ == 12
    # early_stopping holds validation_fraction of the rows out.
    m = Perceptron(early_stopping=True, validation_fraction=0.25, backend="cpu").fit(X, y)
    assert params_of(m)["validation_fraction"] == 0.25
    # None: the algorithm's default patience (10 for the averaged perceptron, else 30).
    assert params_of(Perceptron(backend="cpu").fit(X, y))["patience"] == 10
    assert params_of(Perceptron(algo="pocket", backend="cpu").fit(X, y))["patience"] == 30
    # random_state=None draws a seed from NumPy's generator.
    np.random.seed(5)
    a = params_of(Perceptron(random_state=None, max_iter=2, backend="cpu").fit(X, y))["seed"]
    np.random.seed(5)
    b = params_of(Perceptron(random_state=None, max_iter=2, backend="cpu").fit(X, y))["seed"]
    assert a == b
    rs = np.random.RandomState(3)
    m = Perceptron(random_state=rs, max_iter=2, backend="cpu").fit(X, y)
    assert params_of(m)["seed"] == np.random.RandomState(3).randint(0, 2**31 - 1)


@pytest.mark.parametrize(
    "old,new,value,expected",
    [
        ("epochs", "max_iter", 4, 4),
        ("lr", "eta0", 0.5, 0.5),
        ("seed", "random_state", 9, 9),
        ("patience", "n_iter_no_change", 4, 4),
        ("min_improvement", "tol", 0.2, 0.2),
    ],
)
def test_the_old_names_still_work_with_a_future_warning(old, new, value, expected):
    X, y = digits()
    with pytest.warns(FutureWarning, match=f"{old} was renamed {new}"):
        a = Perceptron(backend="cpu", **{old: value}).fit(X, y)
    b = Perceptron(backend="cpu", **{new: expected}).fit(X, y)
    assert params_of(a) == params_of(b)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    with pytest.raises(InvalidParameterError, match=f"{old} .deprecated. and {new}"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            Perceptron(backend="cpu", **{old: value, new: expected + 1}).fit(X, y)


def test_patience_zero_meant_tol_none():
    X, y = digits()
    with pytest.warns(FutureWarning, match="tol=None"):
        a = Perceptron(algo="batch", patience=0, max_iter=9, backend="cpu").fit(X, y)
    assert a.n_iter_ == 9 and params_of(a)["patience"] == 0


EVERY = {
    Perceptron: dict(
        algo="pocket", mode="batch", max_iter=50, tol=None, eta0=0.5, n_iter_no_change=4,
        early_stopping=True, validation_fraction=0.2, scale="standard",
        class_weight={0: 2.0}, margin_threshold=0.5, multiclass="ovr",
        multiclass_update="all", max_vectors=10, minibatch=3, streams=2, fit_intercept=False,
        shuffle=False,
        random_state=3, verbose=1, warm_start=True, n_jobs=1, update_tol=0.1, storage="f32",
        backend="cpu", adapter="x",
    ),
    PassiveAggressiveClassifier: dict(
        C=0.5, loss="squared_hinge", multiclass="ovr", max_iter=50, tol=0.1, eta0=0.5,
        n_iter_no_change=4, early_stopping=True, validation_fraction=0.2, scale=None,
        class_weight="balanced", fit_intercept=False, shuffle=False, random_state=3,
        verbose=1, warm_start=True, n_jobs=2, backend="cpu", adapter="x",
    ),
    AROWClassifier: dict(
        r=10.0, covariance="full", max_iter=50, tol=0.1, eta0=0.5, n_iter_no_change=4,
        early_stopping=True, validation_fraction=0.2, scale=None, class_weight="balanced",
        fit_intercept=False, shuffle=False, random_state=3, verbose=1, n_jobs=2,
        backend="cpu", adapter="x",
    ),
    KernelPerceptron: dict(
        kernel="poly", gamma=0.5, degree=2, coef0=0.0, max_iter=50, tol=0.1, eta0=0.5,
        n_iter_no_change=4, early_stopping=True, validation_fraction=0.2, scale="minmax",
        class_weight={1: 3.0}, margin_threshold=0.1, fit_intercept=False, shuffle=False,
        random_state=3, verbose=1, n_jobs=1, backend="cpu", adapter="x",
    ),
}


@pytest.mark.parametrize("cls", list(EVERY))
def test_every_parameter_round_trips_get_set_params_and_clone(cls):
    given = EVERY[cls]
    est = cls(**given)
    got = est.get_params()
    for k, v in given.items():
        assert got[k] == v, k
    # Every scikit-learn name is there, and every parameter is in the table above (the
    # deprecated names of rosenblatt 0.1 besides, on the estimators 0.1 had).
    deprecated = {"epochs", "lr", "seed", "patience", "min_improvement", "progress"}
    assert set(got) - set(given) == (set() if cls is AROWClassifier else deprecated)
    c = clone(est)
    assert c.get_params() == got
    back = cls().set_params(**given)
    assert back.get_params() == got


def test_warm_start_goes_on_from_the_fitted_weights():
    X, y = digits()
    a = Perceptron(algo="batch", max_iter=3, tol=None, warm_start=True, backend="cpu")
    a.fit(X, y).fit(X, y)
    b = Perceptron(algo="batch", max_iter=6, tol=None, backend="cpu").fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    # Without warm_start a second fit starts afresh.
    c = Perceptron(algo="batch", max_iter=3, tol=None, backend="cpu")
    c.fit(X, y).fit(X, y)
    assert not np.array_equal(c.coef_, a.coef_)
    with pytest.raises(ValueError, match="warm_start"):
        a.fit(X[y < 5], y[y < 5])
    with pytest.raises(InvalidParameterError, match="warm_start must be False for algo='voted'"):
        Perceptron(algo="voted", warm_start=True).fit(X, y)


def test_n_jobs_changes_threads_not_results():
    X, y = digits()
    a = Perceptron(algo="batch", n_jobs=1, backend="cpu").fit(X, y)
    b = Perceptron(algo="batch", n_jobs=None, backend="cpu").fit(X, y)
    c = Perceptron(algo="batch", n_jobs=-1, backend="cpu").fit(X, y)
    assert a.model_ != "" and a.report_["device"] == "CPU (1 thread)"
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.coef_, c.coef_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize(
    "params,message",
    [
        (dict(max_iter=-1), "max_iter must be an integer >= 1, got -1"),
        (dict(max_iter=2.5), "max_iter must be an integer >= 1, got 2.5"),
        (dict(max_iter=True), "max_iter must be an integer >= 1, got True"),
        (dict(eta0=float("nan")), r"eta0 must be a number in \(0, 1\], got nan"),
        (dict(eta0=0), r"eta0 must be a number in \(0, 1\], got 0"),
        (dict(tol=1.5), r"tol must be a number in \[0, 1\), got 1.5"),
        (dict(n_iter_no_change=0), r"n_iter_no_change must be an integer in \[1, 4294967295\], got 0"),
        (dict(validation_fraction=1.0), r"validation_fraction must be a number in \(0, 1\)"),
        (dict(early_stopping="yes"), "early_stopping must be True or False, got 'yes'"),
        (dict(random_state=-1), "random_state must be an integer in"),
        (dict(verbose=-1), "verbose must be an integer >= 0, got -1"),
        (dict(n_jobs=0), "n_jobs must be None or a non-zero integer, got 0"),
        (dict(scale="log"),
         "scale must be one of 'online', 'maxabs', 'standard', 'minmax', got 'log'"),
        (dict(class_weight=[1, 2]), "class_weight must be None, \"balanced\" or a dict"),
        (dict(class_weight={0: -1}), r"class_weight\[0\] must be a number >= 0, got -1"),
        (dict(class_weight={42: 1.0}), "class_weight names the class 42, which y does not have"),
        (dict(margin_threshold=-1), "margin_threshold must be a number >= 0, got -1"),
        (dict(multiclass="ovo"), "multiclass must be one of 'direct', 'ovr', got 'ovo'"),
        (dict(max_vectors=0), "max_vectors must be an integer >= 1, got 0"),
        (dict(storage="f64"), "storage must be one of 'f32', 'f16', 'u8', 'i8', got 'f64'"),
        (dict(backend="tpu"), "backend must be one of 'auto', 'cpu', 'gpu', got 'tpu'"),
        (dict(adapter=3), "adapter must be None or a part of an adapter's name, got 3"),
        (dict(algo="kernel"), "algo must be one of .*, got 'kernel'"),
        (dict(fit_intercept=None), "fit_intercept must be True or False, got None"),
    ],
)
def test_parameter_errors_name_the_parameter_and_value(params, message):
    X, y = digits()
    with pytest.raises(InvalidParameterError, match=message) as e:
        Perceptron(**params).fit(X, y)
    # No transport text (JSON positions, serde's words, placeholder paths).
    assert not re.search(r"line \d+ column|expected (usize|value)|<backend>|<array>", str(e.value))
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)


def test_other_estimators_name_their_parameters():
    X, y = digits()
    b = y < 2
    with pytest.raises(InvalidParameterError, match=r"C must be a number > 0, got 0"):
        PassiveAggressiveClassifier(C=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="loss must be one of"):
        PassiveAggressiveClassifier(loss="log").fit(X, y)
    with pytest.raises(InvalidParameterError, match="gamma must be a number > 0, got -1"):
        KernelPerceptron(gamma=-1).fit(X[b], y[b])
    with pytest.raises(InvalidParameterError, match=r"degree must be an integer in \[1, 16\], got 0"):
        KernelPerceptron(kernel="poly", degree=0).fit(X[b], y[b])
    with pytest.raises(InvalidParameterError, match="kernel must be one of"):
        KernelPerceptron(kernel="sigmoid").fit(X[b], y[b])


def test_the_extension_refuses_unknown_keys():
    X, y = digits()
    m = Perceptron(algo="batch", max_iter=2, backend="cpu").fit(X, y)
    params = params_of(m)
    options = {
        "sample_weight": None, "start": None, "backend": "cpu", "adapter": None,
        "progress": False, "threads": None, "storage": None, "label_type": None,
        "feature_names": None,
    }
    args = (np.ascontiguousarray(X), None, np.searchsorted(m.classes_, y).astype(np.int64),
            [str(c) for c in m.classes_])
    _rosenblatt.fit(*args, params, options)  # the parameters cross as Python values
    params["epohcs"] = 5
    with pytest.raises(ValueError, match='unknown training parameter "epohcs"'):
        _rosenblatt.fit(*args, params, options)
    # ... each checked for its type: a string where a number goes, an option missing.
    del params["epohcs"]
    with pytest.raises(RuntimeError, match="epochs"):
        _rosenblatt.fit(*args, {**params, "epochs": "5"}, options)
    with pytest.raises(TypeError):
        _rosenblatt.fit(*args, {**params, "epochs": object()}, options)
    with pytest.raises(KeyError, match="threads"):
        _rosenblatt.fit(*args, params, {k: v for k, v in options.items() if k != "threads"})
    with pytest.raises(TypeError, match="progress"):
        _rosenblatt.fit(*args, params, {**options, "progress": "yes"})


def test_only_public_scikit_learn_modules_are_imported():
    for path in PACKAGE.glob("*.py"):
        text = path.read_text()
        private = re.findall(r"^\s*(?:from|import) (sklearn[\w.]*\._\w+)", text, re.M)
        private += re.findall(r"^\s*from sklearn[\w.]* import .*\b(_\w+)", text, re.M)
        assert not private, (path.name, private)


def test_save_names_a_directory_or_a_missing_one(tmp_path):
    X, y = digits()
    m = Perceptron(max_iter=2, backend="cpu").fit(X, y)
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a directory"):
        m.save(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        m.save(tmp_path / "no" / "m.json")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_dataframes_give_feature_names(lib):
    mod = pytest.importorskip(lib)
    X, y = digits()
    names = [f"px{i}" for i in range(X.shape[1])]
    frame = mod.DataFrame({n: X[:, i] for i, n in enumerate(names)})
    m = Perceptron(backend="cpu").fit(frame, y)
    assert list(m.feature_names_in_) == names
    np.testing.assert_array_equal(m.predict(frame), Perceptron(backend="cpu").fit(X, y).predict(X))
    # Columns in another order: refused, as scikit-learn does.
    shuffled = frame.select(names[::-1]) if lib == "polars" else frame[names[::-1]]
    with pytest.raises(ValueError, match="feature names"):
        m.predict(shuffled)
    # An array where a frame was fitted: a warning, and the same predictions.
    with pytest.warns(UserWarning, match="feature names"):
        p = m.predict(X)
    np.testing.assert_array_equal(p, m.predict(frame))


def onnx_run(model_bytes, X):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    label, scores = session.run(["label", "scores"], {"X": np.asarray(X, dtype=np.float32)})
    return label, scores


def check_onnx(est, X_fit, X):
    label, scores = onnx_run(est.to_onnx(), X)
    np.testing.assert_array_equal(label, est.predict(X_fit))
    ours = est.decision_function(X_fit)
    # Scores equal to f32 rounding (the runtime sums in another order).
    np.testing.assert_allclose(scores, ours, rtol=0, atol=1e-5 * float(np.abs(ours).max()))
    onnx = pytest.importorskip("onnx")
    onnx.checker.check_model(onnx.load_from_string(est.to_onnx()), full_check=True)


def test_save_removes_the_temporaries_of_killed_processes_only(tmp_path):
    """A temporary is named with the machine and process id, as the CLI's; ``save`` removes
    those of this machine's finished processes (a SIGKILL mid-save leaves one) and no
    other."""
    import os

    from rosenblatt import _rosenblatt

    prefix = _rosenblatt.temp_prefix()
    assert prefix.startswith(".rosenblatt-") and prefix.endswith(f"-{os.getpid()}-")
    host = prefix.split("-")[1]
    dead = subprocess.Popen(["true"])
    dead.wait()
    planted = {
        f".rosenblatt-{host}-{dead.pid}-abc123.tmp": False,
        f"{prefix}abc123.tmp": True,
        f".rosenblatt-0123456789abcdef-{dead.pid}-abc123.tmp": True,
        ".rosenblatt-abc123.tmp": True,
    }
    for name in planted:
        (tmp_path / name).write_bytes(b"partial")
    X, y = digits()
    Perceptron(backend="cpu", max_iter=2).fit(X, y).save(tmp_path / "m.json")
    for name, kept in planted.items():
        assert (tmp_path / name).exists() == kept, name
    assert (tmp_path / "m.json").exists()


def test_class_weights_step_as_scikit_learns_perceptron():
    """The online rule unscaled and unshuffled is scikit-learn's Perceptron: with class weights
    the same weights, bit for bit, on two classes and on three one-vs-rest (a class weight
    scales its class's rows in the class's own head only)."""
    from sklearn.linear_model import Perceptron as SkPerceptron

    X, y = digits()
    for classes, cw in ((2, {0: 3.0, 1: 0.5}), (3, {0: 3.0, 1: 0.5, 2: 1.0})):
        b = y < classes
        kw = dict(class_weight=cw, shuffle=False, tol=None, max_iter=5)
        theirs = SkPerceptron(**kw).fit(X[b], y[b])
        ours = Perceptron(
            algo="online", multiclass="ovr", scale=None, backend="cpu", **kw
        ).fit(X[b], y[b])
        np.testing.assert_array_equal(ours.coef_, theirs.coef_.astype(np.float32))
        np.testing.assert_array_equal(ours.intercept_, theirs.intercept_.astype(np.float32))
    # The direct multiclass rule weighs a row's whole update by its class weight instead.
    direct = Perceptron(algo="online", scale=None, backend="cpu", **kw).fit(X[b], y[b])
    assert not np.array_equal(direct.coef_, ours.coef_)


def test_features_are_scaled_by_maximum_magnitude_unless_scale_is_none():
    X, y = digits()
    assert Perceptron().scale == "online" and KernelPerceptron().scale is None
    # One default for the command line and Python: the crate's, for each estimator's rules.
    from rosenblatt import _rosenblatt

    for algo in ("online", "averaged", "batch", "pocket", "voted", "pa", "arow"):
        assert _rosenblatt.default_scale(algo) == "online", algo
    assert _rosenblatt.default_scale("kernel") == "none"
    scaled = Perceptron(backend="cpu").fit(X, y)
    raw = Perceptron(scale=None, backend="cpu").fit(X, y)
    assert json.loads(scaled.model_)["scaling"]["kind"] == "online"
    assert json.loads(raw.model_).get("scaling") is None
    # Features are divided by their largest magnitude, never magnified (pixels reach 16):
    # the batch rule, which reads every row before it steps, by the whole set's.
    batch = Perceptron(algo="batch", backend="cpu").fit(X, y)
    factors = json.loads(batch.model_)["scaling"]["factor"]
    top = np.abs(X).max(axis=0)
    np.testing.assert_allclose(factors, 1 / np.maximum(top, 1), rtol=1e-6)
    # coef_ is in the units of X either way.
    for m in (scaled, raw):
        df = m.decision_function(X)
        np.testing.assert_allclose(X @ m.coef_.T + m.intercept_, df, atol=1e-5 * np.abs(df).max())


def test_onnx_export_predicts_as_predict(tmp_path):
    X, y = digits()
    # Digits: the default (averaged, 10 classes), one-vs-rest, a scaled model, a binary one
    # with string labels, and Winnow.
    for est in (
        Perceptron(backend="cpu"),
        Perceptron(algo="batch", multiclass="ovr", backend="cpu"),
        Perceptron(algo="online", scale=None, backend="cpu"),
        Perceptron(algo="pocket", scale="standard", backend="cpu"),
        PassiveAggressiveClassifier(scale="minmax", backend="cpu"),
    ):
        check_onnx(est.fit(X, y), X, X)
    b = y < 2
    s = np.where(y[b] == 1, "one", "zero")
    for est in (Perceptron(backend="cpu"), Perceptron(algo="winnow", backend="cpu")):
        check_onnx(est.fit(X[b], s), X[b], X[b])
    # A sparse set: fitted on CSR, the graph fed the same rows dense.
    Xs, ys = make_classification(600, 300, n_informative=20, random_state=0)
    Xs[np.abs(Xs) < 1.2] = 0
    csr = sp.csr_matrix(Xs.astype(np.float32))
    assert csr.nnz < 0.3 * np.prod(csr.shape)
    check_onnx(Perceptron(scale="maxabs", backend="cpu").fit(csr, ys), csr, csr.toarray())
    # Written atomically when given a path; the bytes are returned either way.
    m = Perceptron(backend="cpu").fit(X, y)
    assert m.to_onnx(tmp_path / "m.onnx") == (tmp_path / "m.onnx").read_bytes()
    # The CLI writes the same graph from the saved model.
    m.save(tmp_path / "m.json")
    subprocess.run(
        [cli(), "export", str(tmp_path / "m.json"), "-o", str(tmp_path / "cli.onnx")],
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "cli.onnx").read_bytes() == m.to_onnx()


def test_onnx_refuses_voted_and_kernel_models():
    X, y = digits()
    b = y < 2
    for est in (Perceptron(algo="voted", backend="cpu"), KernelPerceptron(backend="cpu")):
        est.fit(X[b], y[b])
        with pytest.raises(ValueError, match="no ONNX form"):
            est.to_onnx()


def test_old_names_together_and_old_defaults():
    X, y = digits()
    with pytest.warns(FutureWarning):
        m = Perceptron(algo="batch", patience=0, min_improvement=0.05, max_iter=7, backend="cpu")
        m.fit(X, y)
    assert m.n_iter_ == 7 and params_of(m)["patience"] == 0
    with pytest.warns(FutureWarning, match="progress was renamed verbose"):
        Perceptron(verbose=False, progress=False, max_iter=2, backend="cpu").fit(X, y)
    with pytest.warns(FutureWarning, match="validation_fraction=None"):
        m = Perceptron(validation_fraction=None, max_iter=2, backend="cpu").fit(X, y)
    assert "validation_fraction" not in params_of(m)
    # The warning points at the caller's line, not inside the package.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Perceptron(epochs=2, backend="cpu").fit(X, y)
    assert w and all(x.filename == __file__ for x in w), [x.filename for x in w]


def test_a_patience_given_keeps_the_algorithms_floor():
    # The floor (nearly separable data waits longer) is the algorithm's whether the patience
    # is its default (None) or given, as on the command line: 0 for the online averaged
    # perceptron, 1% for the others.
    X, y = digits()
    for algo, floor in (("averaged", 0.0), ("batch", 0.01)):
        a = params_of(Perceptron(algo=algo, max_iter=3, backend="cpu").fit(X, y))
        b = params_of(Perceptron(algo=algo, max_iter=3, n_iter_no_change=7, backend="cpu").fit(X, y))
        assert a["patience_floor"] == b["patience_floor"] == pytest.approx(floor)


def test_load_gives_back_class_weights_and_kernels(tmp_path):
    X, y = digits()
    m = Perceptron(algo="pocket", class_weight={3: 2.5, 7: 0.5}, max_iter=5, backend="cpu").fit(X, y)
    m.save(tmp_path / "m.json")
    back = rosenblatt.load(tmp_path / "m.json")
    assert back.class_weight == {3: 2.5, 7: 0.5}
    refit = clone(back).fit(X, y)
    np.testing.assert_array_equal(refit.coef_, m.coef_)
    b = y < 2
    k = KernelPerceptron(kernel="poly", degree=2, gamma=0.5, coef0=2.0, max_iter=3, backend="cpu")
    k.fit(X[b], y[b]).save(tmp_path / "k.json")
    kb = rosenblatt.load(tmp_path / "k.json")
    assert (kb.kernel, kb.degree, kb.gamma, kb.coef0) == ("poly", 2, 0.5, 2.0)
    with pytest.raises(InvalidParameterError, match=r"degree must be an integer in \[1, 16\]"):
        KernelPerceptron(kernel="poly", degree=17).fit(X[b], y[b])


def test_weights_equal_scikit_learns_exactly_where_the_docs_say():
    """docs/python.md: with scale=None, the online rule, shuffle=False, the weights equal
    scikit-learn's Perceptron's bit for bit for two classes and for multiclass="ovr", on
    float32 input; float64 input is rounded to float32 first (rosenblatt computes in
    float32, scikit-learn in float64, so a row whose margin rounds across 0 can change the
    run); the default direct multiclass rule is another rule."""
    from sklearn.linear_model import Perceptron as SkPerceptron

    X, y = digits()
    X32 = np.asarray(X, dtype=np.float32)
    kw = dict(shuffle=False, tol=None, max_iter=5)
    for classes in (2, 4):
        b = y < classes
        theirs = SkPerceptron(**kw).fit(X32[b], y[b])
        ours = Perceptron(algo="online", multiclass="ovr", scale=None, backend="cpu", **kw)
        ours.fit(X32[b], y[b])
        np.testing.assert_array_equal(ours.coef_, theirs.coef_.astype(np.float32))
        np.testing.assert_array_equal(ours.intercept_, theirs.intercept_.astype(np.float32))
        # float64 input: rounded to float32, then the same run.
        X64 = X32[b].astype(np.float64) * (1 + 1e-9)
        ours64 = Perceptron(algo="online", multiclass="ovr", scale=None, backend="cpu", **kw)
        ours64.fit(X64, y[b])
        rounded = Perceptron(algo="online", multiclass="ovr", scale=None, backend="cpu", **kw)
        rounded.fit(X64.astype(np.float32), y[b])
        np.testing.assert_array_equal(ours64.coef_, rounded.coef_)
    direct = Perceptron(algo="online", scale=None, backend="cpu", **kw).fit(X32[y < 4], y[y < 4])
    assert not np.array_equal(direct.coef_, ours.coef_)


ESTIMATORS = (Perceptron, PassiveAggressiveClassifier, AROWClassifier, KernelPerceptron)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_every_parameter_is_keyword_only_and_documented_with_its_default(cls):
    import inspect

    sig = inspect.signature(cls.__init__)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    assert params and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    # Python 3.13 strips a docstring's indentation when it compiles it; cleandoc makes every
    # version's text the same.
    doc = inspect.cleandoc(cls.__doc__)
    for p in params:
        if p.default == rosenblatt._params.DEPRECATED:
            continue
        want = "None" if p.default is None else repr(p.default).replace("'", '"')
        line = re.search(rf"^{p.name} : (.*)$", doc, re.M)
        assert line, f"{cls.__name__}.{p.name} is not documented"
        assert line.group(1).endswith(f"default={want}"), (cls.__name__, line.group(0), want)


def test_the_one_positional_parameter_of_01_warns_and_means_the_same():
    X, y = digits()
    with pytest.warns(FutureWarning, match='pass algo="pocket" by keyword|pass algo=\'pocket\''):
        old = Perceptron("pocket", max_iter=3, backend="cpu")
    assert old.get_params() == Perceptron(algo="pocket", max_iter=3, backend="cpu").get_params()
    with pytest.warns(FutureWarning, match="C=0.5"):
        assert PassiveAggressiveClassifier(0.5).C == 0.5
    with pytest.warns(FutureWarning, match="kernel="):
        assert KernelPerceptron("poly").kernel == "poly"
    with pytest.raises(TypeError, match="keyword only"):
        Perceptron("pocket", "online")
    with pytest.raises(TypeError, match="keyword only"):
        Perceptron("pocket", algo="online")
    np.testing.assert_array_equal(old.fit(X, y).coef_, clone(old).fit(X, y).coef_)


def test_the_fitted_model_is_held_natively_and_pickles_as_its_text():
    import pickle

    X, y = digits()
    m = Perceptron(max_iter=5, backend="cpu").fit(X, y)
    native = m._native[1]
    assert isinstance(native, _rosenblatt.Model) and native.json == m.model_
    m.predict(X[:10])
    m.decision_function(X)
    assert m._native[1] is native, "predict read the model again"
    state = m.__getstate__()
    assert "_native" not in state and state["model_"] == m.model_
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    # The handle pickles on its own as the model file's text.
    again = pickle.loads(pickle.dumps(native))
    assert again.json == native.json
    # A model_ replaced by hand (or an estimator pickled before 0.2's handle) is read anew.
    other = Perceptron(algo="batch", max_iter=2, backend="cpu").fit(X, y)
    m.model_ = other.model_
    np.testing.assert_array_equal(m.decision_function(X), other.decision_function(X))
    with pytest.raises(ValueError, match="model"):
        _rosenblatt.Model('{"format": "rosenblatt-model", "version": 99}')


def test_plain_arrays_score_as_scikit_learns_checks_would_have_them():
    """float64 and float32 C-contiguous arrays of the fitted width are scored as they are;
    float64 as its float32 rounding; every other X through scikit-learn's checks, which
    also word the errors of the fast path's X (NaN, infinity, the wrong width)."""
    X, y = digits()
    for algo, multiclass in (("averaged", "direct"), ("batch", "ovr")):
        m = Perceptron(algo=algo, multiclass=multiclass, max_iter=5, backend="cpu").fit(X, y)
        wide = X.astype(np.float64) * (1 + 1e-12)  # rounds back to X
        for same in (wide, np.asfortranarray(X), X.tolist(), X[::1]):
            np.testing.assert_array_equal(m.decision_function(same), m.decision_function(X))
        # Sparse rows sum their non-zeros only, in another order.
        np.testing.assert_allclose(
            m.decision_function(sp.csr_matrix(X)), m.decision_function(X), rtol=1e-5, atol=1e-4
        )
        two = (y < 2)
        b = Perceptron(max_iter=5, backend="cpu").fit(X[two], y[two])
        np.testing.assert_array_equal(b.predict(wide[two]), b.predict(X[two]))
        bad = X.copy()
        bad[3, 5] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN"):
            m.predict(bad)
        bad[3, 5] = np.inf
        with pytest.raises(ValueError, match="Input X contains infinity"):
            m.predict(bad.astype(np.float64))
        with pytest.raises(ValueError, match="X has 63 features, but Perceptron is expecting 64"):
            m.predict(X[:, :63])
