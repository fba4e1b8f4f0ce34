"""rosenblatt: the perceptron family trained on any GPU (Vulkan, Metal, DX12, GL) or the CPU,
as scikit-learn estimators.

    >>> from rosenblatt import Perceptron
    >>> clf = Perceptron(backend="gpu").fit(X, y)
    >>> clf.score(X_test, y_test), clf.report_["mistake_bound"]

Two estimators: :class:`Perceptron` (the linear family: the online and batch rules, pocket,
averaged, voted and Winnow, binary or multiclass, chosen by ``algo``) and
:class:`KernelPerceptron` (the dual form with a linear, polynomial or RBF kernel). Both train
through the Rust crate, whose model file (``save``/``load``) is the command line's.
"""

import json
import os
import tempfile

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import _rosenblatt

__all__ = [
    "Perceptron",
    "PassiveAggressiveClassifier",
    "KernelPerceptron",
    "load",
    "adapters",
    "__version__",
]
__version__ = _rosenblatt.__version__

_LINEAR_ALGOS = ("online", "batch", "multiclass", "pocket", "averaged", "voted", "winnow")


def adapters():
    """The GPU adapters found here, as (name, API, type) tuples (software ones included)."""
    return _rosenblatt.adapters()


def _features(X):
    """X (validated float32) as the extension takes it: dense, or CSR parts."""
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        parts = (
            np.ascontiguousarray(X.indptr, dtype=np.int64),
            np.ascontiguousarray(X.indices, dtype=np.int64),
            np.ascontiguousarray(X.data, dtype=np.float32),
            X.shape[1],
        )
        return None, parts
    # Borrowed by the extension when already float32, C-contiguous and aligned.
    return np.require(X, dtype=np.float32, requirements=["C", "A"]), None


class _Estimator(ClassifierMixin, BaseEstimator):
    """What the two estimators share: fitting, scoring, the model file."""

    # -- to be given by each estimator -------------------------------------------------------
    def _train_params(self):
        raise NotImplementedError

    # -- scikit-learn ------------------------------------------------------------------------
    def _params_json(self, **override):
        p = self._train_params()
        p.update(override)
        return json.dumps(p)

    def _validate_fit(self, X, y, sample_weight, reset):
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc"],
            dtype=np.float32,
            order="C",
            reset=reset,
        )
        check_classification_targets(y)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(
                sample_weight, X, dtype=np.float32, ensure_non_negative=True
            )
        return X, y, sample_weight

    def _train(self, X, y, classes, sample_weight, params, start):
        index = np.searchsorted(classes, y)
        if sample_weight is not None:
            # A row of weight 0 takes no part in training: leave it out (it would still count
            # as a mistake for the stopping rules).
            keep = sample_weight > 0
            if not keep.any():
                raise ValueError("every sample_weight is 0: nothing to train on")
            if not keep.all():
                X, index, sample_weight = X[keep], index[keep], sample_weight[keep]
            sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float32)
        x, csr = _features(X)
        model, report = _rosenblatt.fit(
            x,
            csr,
            np.ascontiguousarray(index, dtype=np.int64),
            [str(c) for c in classes],
            params,
            sample_weight=sample_weight,
            start=start,
            backend=self.backend,
            adapter=self.adapter,
            progress=bool(self.progress),
        )
        self._set_model(model, classes)
        self.report_ = json.loads(report)
        self.n_iter_ = self.report_["epochs"]
        return self

    def _set_model(self, model, classes):
        kind, names, d, linear, _ = _rosenblatt.describe(model)
        self.model_ = model
        self.kind_ = kind
        self.classes_ = classes
        if linear is not None:
            coef = np.asarray(linear[0], dtype=np.float32).reshape(len(linear[0]), d)
            intercept = np.asarray(linear[1], dtype=np.float32)
            if len(classes) == 2 and len(coef) == 2:
                # One row per class for two classes (algo="multiclass"): the binary form
                # scikit-learn expects, row 1 less row 0.
                coef, intercept = (coef[1] - coef[0])[None, :], intercept[1:] - intercept[:1]
            self.coef_ = coef
            self.intercept_ = intercept
        else:
            # Voted and kernel models keep many vectors, not one weight row per class.
            for a in ("coef_", "intercept_"):
                if hasattr(self, a):
                    delattr(self, a)

    def fit(self, X, y, sample_weight=None):
        """Trains on X (dense array or scipy.sparse CSR/CSC) and the labels y (any values
        NumPy can sort), optionally weighting the rows."""
        X, y, sample_weight = self._validate_fit(X, y, sample_weight, reset=True)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"training needs at least two classes; y has one class only: {classes[0]!r}"
            )
        self._check_binary(y, classes)
        return self._train(X, y, classes, sample_weight, self._params_json(), None)

    def _binary_only(self):
        return False

    def _check_binary(self, y, classes):
        if self._binary_only() and len(classes) > 2:
            raise ValueError(
                "Only binary classification is supported. The type of the target is "
                f"{type_of_target(y, input_name='y')} ({len(classes)} classes; "
                f"{self._binary_only()} is a two-class rule)."
            )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_class = not self._binary_only()
        # Winnow's weights are positive and it has no bias: it learns monotone combinations
        # of the features, not any hyperplane (centred data defeats it).
        tags.classifier_tags.poor_score = getattr(self, "algo", None) == "winnow"
        return tags

    def _decide(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(
            self, X, accept_sparse=["csr", "csc"], dtype=np.float32, order="C", reset=False
        )
        x, csr = _features(X)
        return _rosenblatt.decide(self.model_, x, csr, backend=self.backend, adapter=self.adapter)

    def decision_function(self, X):
        """Decision values: one per row for two classes (positive: ``classes_[1]``), one per
        class and row otherwise (votes for a voted model)."""
        values, _ = self._decide(X)
        if values.shape[1] == 2 and len(self.classes_) == 2:
            # A two-class model with a row per class: the binary decision, s_1 - s_0.
            return values[:, 1] - values[:, 0]
        return values[:, 0] if values.shape[1] == 1 else values

    def predict(self, X):
        """The predicted class of each row (sgn(0) = +1: ties go to ``classes_[1]``)."""
        _, pred = self._decide(X)
        return self.classes_[pred]

    # -- the model file -----------------------------------------------------------------------
    def save(self, path):
        """Writes the model file the command line reads (``rosenblatt predict``)."""
        check_is_fitted(self, "model_")
        path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".rosenblatt-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.model_)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path):
        """An estimator holding the model file at ``path`` (written by ``save`` or by
        ``rosenblatt train -o``), ready to predict."""
        return load(path, cls)


class Perceptron(_Estimator):
    """The linear perceptron family on the GPU or the CPU.

    Parameters
    ----------
    algo : {"averaged", "batch", "online", "pocket", "voted", "winnow", "multiclass"}
        The rule (see the README's "The perceptron family"); the default, the online averaged
        perceptron, generalised best on the public sets of the README's defaults table. More
        than two classes train one weight row per class (``multiclass``: argmax or
        one-vs-rest).
    mode : {None, "online", "batch"}
        For ``averaged`` and ``winnow``: update per row (online, the default) or per epoch.
    epochs : int
        Most passes over the data.
    lr : float
        Learning rate eta in (0, 1].
    tol : float or None
        Stop when an epoch's update is shorter than this.
    patience : int or None
        Stop after this many epochs without fewer mistakes (0: never); with
        ``validation_fraction`` the held-out mistakes are watched and the best epoch kept.
        None: the algorithm's default (10 for the online averaged perceptron, else 30, as
        the CLI's).
    min_improvement : float
        The relative improvement that resets the patience count.
    validation_fraction : float or None
        Hold out this fraction of the rows (stratified, seeded) for the patience rule.
    scale : {None, "standard", "minmax", "maxabs"}
        Feature scaling fitted on the training rows and kept in the model.
    class_weight : None, "balanced" or dict
        Per-class weights on the updates.
    margin_threshold : float
        A row is a mistake when y w.x <= this (0: the classic rule).
    multiclass : {"direct", "ovr"}
        More than two classes: one argmax model, or one binary model per class.
    multiclass_update : {"argmax", "all"}
        The direct multiclass update: against the highest wrong class, or every class above.
    max_vectors : int
        ``voted``: most vectors kept.
    fit_intercept : bool
        Learn a bias (the augmented input [x, 1]).
    shuffle : bool
        Online forms: shuffle the rows each epoch (seeded).
    seed : int
        Seed of the shuffles and the validation split.
    backend : {"auto", "cpu", "gpu"}
        "auto": a hardware GPU when one is present, else the CPU (a GPU failure finishes on
        the CPU); "gpu": any adapter, software ones included.
    adapter : str or None
        Part of the adapter's name (see ``rosenblatt.adapters()``).
    progress : bool
        A progress bar on stderr while training.

    Attributes
    ----------
    coef_ : ndarray (1, n_features) or (n_classes, n_features)
        Weights in the input's coordinates (scaling folded in); not for voted models.
    intercept_ : ndarray (1,) or (n_classes,)
    classes_ : ndarray
    n_features_in_ : int
    n_iter_ : int
        Epochs run.
    report_ : dict
        The training report: mistakes and criterion per epoch, the radius R, the margin
        gamma, Novikoff's bound (R / gamma)^2, accuracy, device, time.
    model_ : str
        The model file's text.
    """

    def __init__(
        self,
        algo="averaged",
        *,
        mode=None,
        epochs=1000,
        lr=1.0,
        tol=None,
        patience=None,
        min_improvement=0.01,
        validation_fraction=None,
        scale=None,
        class_weight=None,
        margin_threshold=0.0,
        multiclass="direct",
        multiclass_update="argmax",
        max_vectors=100000,
        fit_intercept=True,
        shuffle=True,
        seed=0,
        backend="auto",
        adapter=None,
        progress=False,
    ):
        self.algo = algo
        self.mode = mode
        self.epochs = epochs
        self.lr = lr
        self.tol = tol
        self.patience = patience
        self.min_improvement = min_improvement
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.margin_threshold = margin_threshold
        self.multiclass = multiclass
        self.multiclass_update = multiclass_update
        self.max_vectors = max_vectors
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.seed = seed
        self.backend = backend
        self.adapter = adapter
        self.progress = progress

    def _train_params(self):
        if self.algo not in _LINEAR_ALGOS:
            raise ValueError(
                f"algo must be one of {', '.join(_LINEAR_ALGOS)}, not {self.algo!r} "
                "(the kernel perceptron is KernelPerceptron)"
            )
        return _common_params(self, algo=self.algo)

    def _binary_only(self):
        return "Winnow" if self.algo == "winnow" else False

    def _continues(self):
        # A voted model keeps many vectors: there is no single weight vector to go on from.
        return self.algo != "voted"

    @available_if(_continues)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch on (X, y) from the current weights: for the online forms one pass of
        updates, for the batch rule one update from the sum over this data's mistakes.
        ``classes`` (every class there will be) is needed on the first call. (Averaged and
        pocket models continue from the weights they keep, the average or the pocket.)"""
        first = not hasattr(self, "model_")
        X, y, sample_weight = self._validate_fit(X, y, sample_weight, reset=first)
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            all_classes = np.unique(classes)
            if len(all_classes) < 2:
                raise ValueError("training needs at least two classes")
        else:
            all_classes = self.classes_
            if classes is not None and not np.array_equal(np.unique(classes), all_classes):
                raise ValueError(
                    f"classes {np.unique(classes)!r} differ from those of the first call "
                    f"{all_classes!r}"
                )
        unknown = np.setdiff1d(np.unique(y), all_classes)
        if len(unknown):
            raise ValueError(f"y holds classes not in classes: {unknown!r}")
        self._check_binary(y, all_classes)
        params = self._params_json(epochs=1, patience=0, validation_fraction=None)
        start = None if first else self.model_
        return self._train(X, y, all_classes, sample_weight, params, start)


_PA_LOSSES = {"hinge": "pa1", "squared_hinge": "pa2", "unbounded": "pa"}


class PassiveAggressiveClassifier(Perceptron):
    """Crammer et al.'s passive-aggressive rules (JMLR 2006), online, on the CPU: on a row
    with margin y w.x below 1, the smallest step that brings it to 1, at most ``C`` (PA-I,
    ``loss="hinge"``, scikit-learn's default), or loss / (||x||^2 + 1 / (2 C)) (PA-II,
    ``loss="squared_hinge"``), or unbounded (PA, ``loss="unbounded"``). x is augmented
    ([x, 1]) when ``fit_intercept``. More than two classes: one joint model stepping the true
    class and the highest wrong one (``multiclass="direct"``), or one binary model per class
    (``"ovr"``, as scikit-learn does).

    Parameters
    ----------
    C : float
        Aggressiveness (> 0) of PA-I and PA-II.
    loss : {"hinge", "squared_hinge", "unbounded"}
    multiclass : {"direct", "ovr"}
    epochs, lr, patience, min_improvement, validation_fraction, scale, class_weight,
    fit_intercept, shuffle, seed, backend, adapter, progress :
        As for :class:`Perceptron` (``lr`` scales every step; 1 is the rule itself).

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_iter_, report_, model_ : as for
    :class:`Perceptron`; the report's mistakes are the rows stepped on (a positive hinge
    loss) and its criterion the sum of their losses.
    """

    algo = "pa"

    def __init__(
        self,
        C=1.0,
        *,
        loss="hinge",
        multiclass="direct",
        epochs=1000,
        lr=1.0,
        patience=30,
        min_improvement=0.01,
        validation_fraction=None,
        scale=None,
        class_weight=None,
        fit_intercept=True,
        shuffle=True,
        seed=0,
        backend="auto",
        adapter=None,
        progress=False,
    ):
        self.C = C
        self.loss = loss
        self.multiclass = multiclass
        self.epochs = epochs
        self.lr = lr
        self.patience = patience
        self.min_improvement = min_improvement
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.seed = seed
        self.backend = backend
        self.adapter = adapter
        self.progress = progress

    def _train_params(self):
        if self.loss not in _PA_LOSSES:
            raise ValueError(
                f"loss must be one of {', '.join(_PA_LOSSES)}, not {self.loss!r}"
            )
        p = _common_params(self, algo="pa")
        p["passive_aggressive"] = {"variant": _PA_LOSSES[self.loss], "c": float(self.C)}
        return p


class KernelPerceptron(_Estimator):
    """The kernel perceptron (dual form): f(x) = sum over support vectors of
    alpha_i y_i (K(x_i, x) + 1), kernel scores computed on the GPU or the CPU.

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear"}
    gamma : float
        RBF width, or the polynomial's scale of x.z.
    degree : int
        Polynomial degree.
    coef0 : float
        Polynomial constant.
    epochs, lr, patience, min_improvement, validation_fraction, scale, class_weight,
    margin_threshold, fit_intercept, shuffle, seed, backend, adapter, progress :
        As for :class:`Perceptron`.

    Attributes
    ----------
    classes_, n_features_in_, n_iter_, report_, model_ : as for :class:`Perceptron`.
    """

    def __init__(
        self,
        kernel="rbf",
        *,
        gamma=1.0,
        degree=3,
        coef0=1.0,
        epochs=100,
        lr=1.0,
        patience=30,
        min_improvement=0.01,
        validation_fraction=None,
        scale=None,
        class_weight=None,
        margin_threshold=0.0,
        fit_intercept=True,
        shuffle=True,
        seed=0,
        backend="auto",
        adapter=None,
        progress=False,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.epochs = epochs
        self.lr = lr
        self.patience = patience
        self.min_improvement = min_improvement
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.margin_threshold = margin_threshold
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.seed = seed
        self.backend = backend
        self.adapter = adapter
        self.progress = progress

    def _binary_only(self):
        return "the kernel perceptron"

    def _train_params(self):
        kernels = {
            "rbf": {"kernel": "rbf", "gamma": float(self.gamma)},
            "poly": {
                "kernel": "poly",
                "degree": int(self.degree),
                "gamma": float(self.gamma),
                "coef0": float(self.coef0),
            },
            "linear": {"kernel": "linear"},
        }
        if self.kernel not in kernels:
            raise ValueError(f"kernel must be rbf, poly or linear, not {self.kernel!r}")
        p = _common_params(self, algo="kernel")
        p["kernel"] = kernels[self.kernel]
        return p


def _common_params(est, algo):
    """The training parameters of the model file (TrainParams in the crate)."""
    cw = est.class_weight
    if isinstance(cw, dict):
        cw = {"given": [[str(k), float(v)] for k, v in cw.items()]}
    elif cw is not None and cw != "balanced":
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, not {cw!r}")
    return {
        "algo": algo,
        "mode": getattr(est, "mode", None),
        "epochs": int(est.epochs),
        "lr": float(est.lr),
        "tol": None if getattr(est, "tol", None) is None else float(est.tol),
        "seed": int(est.seed),
        "fit_bias": bool(est.fit_intercept),
        "init": "zero",
        "shuffle": bool(est.shuffle),
        "margin_threshold": float(getattr(est, "margin_threshold", 0.0)),
        "multiclass": getattr(est, "multiclass", "direct"),
        "multiclass_update": getattr(est, "multiclass_update", "argmax"),
        "max_vectors": int(getattr(est, "max_vectors", 100000)),
        "patience": None if est.patience is None else int(est.patience),
        "min_improvement": float(est.min_improvement),
        "validation_fraction": None
        if est.validation_fraction is None
        else float(est.validation_fraction),
        "class_weight": cw,
        "scale": "none" if est.scale is None else str(est.scale),
    }


def _class_array(names):
    """Class names from a model file as the labels they were: numbers when they all are."""
    for kind in (int, float):
        try:
            values = [kind(n) for n in names]
        except ValueError:
            continue
        if [str(v) for v in values] == list(names) or kind is float:
            return np.asarray(values)
    return np.asarray(names, dtype=object)


def load(path, cls=None):
    """The estimator holding the model file at ``path``: a :class:`KernelPerceptron` for a
    kernel model, else a :class:`Perceptron` (or ``cls`` when given)."""
    model = _rosenblatt.load_model(os.fspath(path))
    kind, names, d, _, report = _rosenblatt.describe(model)
    params = json.loads(model).get("params", {})
    if cls is None:
        if kind == "kernel":
            cls = KernelPerceptron
        elif params.get("algo") == "pa":
            cls = PassiveAggressiveClassifier
        else:
            cls = Perceptron
    est = cls()
    settable = est.get_params()
    mapped = {
        "epochs": params.get("epochs"),
        "lr": params.get("lr"),
        "seed": params.get("seed"),
        "fit_intercept": params.get("fit_bias"),
        "shuffle": params.get("shuffle"),
        "margin_threshold": params.get("margin_threshold"),
        "patience": params.get("patience"),
        "min_improvement": params.get("min_improvement"),
        "validation_fraction": params.get("validation_fraction"),
        "scale": None if params.get("scale") in (None, "none") else params.get("scale"),
    }
    if cls is PassiveAggressiveClassifier:
        pa = params.get("passive_aggressive") or {}
        losses = {v: k for k, v in _PA_LOSSES.items()}
        mapped.update(
            C=pa.get("c"),
            loss=losses.get(pa.get("variant")),
            multiclass=params.get("multiclass"),
        )
    elif cls is Perceptron:
        mapped.update(
            algo=params.get("algo"),
            mode=params.get("mode"),
            tol=params.get("tol"),
            multiclass=params.get("multiclass"),
            multiclass_update=params.get("multiclass_update"),
            max_vectors=params.get("max_vectors"),
        )
    est.set_params(**{k: v for k, v in mapped.items() if k in settable and v is not None})
    est._set_model(model, _class_array(names))
    est.n_features_in_ = d
    if report is not None:
        est.report_ = json.loads(report)
        est.n_iter_ = est.report_["epochs"]
    return est
