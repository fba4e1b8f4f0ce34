"""rosenblatt: the perceptron family trained on any GPU (Vulkan, Metal, DX12, GL) or the CPU,
as scikit-learn estimators.

    >>> from rosenblatt import Perceptron
    >>> clf = Perceptron(backend="gpu").fit(X, y)
    >>> clf.score(X_test, y_test), clf.report_["mistake_bound"]

Four estimators: :class:`Perceptron` (the linear family: the online and batch rules, pocket,
averaged, voted and Winnow, binary or multiclass, chosen by ``algo``),
:class:`PassiveAggressiveClassifier`, :class:`AROWClassifier` (a confidence per weight) and
:class:`KernelPerceptron` (the dual form with a linear, polynomial or RBF kernel). Their parameters are scikit-learn's where scikit-learn has
them (``max_iter``, ``eta0``, ``tol``, ``n_iter_no_change``, ``random_state``, ...). All train
through the Rust crate, whose model file (``save``/``load``) is the command line's, and the
linear models export to ONNX (``to_onnx``).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from typing import Any, Callable, Optional, TypeVar, Union, cast

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _params, _rosenblatt
from ._params import DEPRECATED, InvalidParameterError

__all__ = [
    "Perceptron",
    "PassiveAggressiveClassifier",
    "AROWClassifier",
    "VWHasher",
    "ColumnHasher",
    "KernelPerceptron",
    "InvalidParameterError",
    "load",
    "adapters",
    "__version__",
]
__version__: str = _rosenblatt.__version__

PathLike = Union[str, "os.PathLike[str]"]
_CsrParts = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32], int]


_F = TypeVar("_F", bound=Callable[..., Any])

# Dense X of these types is scored as it is (float64 rounded to float32 as it is read).
_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _available_if(check: Callable[[Any], bool]) -> Callable[[_F], _F]:
    """scikit-learn's ``available_if`` (the method exists only when ``check`` holds), typed."""
    return cast(Callable[[_F], _F], available_if(check))


def adapters() -> list[tuple[str, str, str]]:
    """The GPU adapters found here, as (name, API, type) tuples (software ones included)."""
    return _rosenblatt.adapters()


def _features(X: Any) -> tuple[Optional[npt.NDArray[np.float32]], Optional[_CsrParts]]:
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
            int(X.shape[1]),
        )
        return None, parts
    # Borrowed by the extension when already float32, C-contiguous and aligned.
    return np.require(X, dtype=np.float32, requirements=["C", "A"]), None


def _write_atomic(path: PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary beside it, renamed over it when whole."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory: give the path of a file to write")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise FileNotFoundError(f"cannot write {path}: the directory {d} does not exist")
    # Named as the CLI names its temporaries (machine and process id), and the ones finished
    # processes left here (a SIGKILL) removed first, by the same rule.
    _rosenblatt.remove_stale_temps(d)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=_rosenblatt.temp_prefix(), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# scikit-learn's names and the defaults the estimators give them (n_iter_no_change None: the
# algorithm's own patience, as the command line's).
_SK_DEFAULTS: dict[str, Any] = {
    "max_iter": 1000,
    "eta0": 1.0,
    "random_state": 0,
    "n_iter_no_change": None,
    "tol": 0.01,
    "verbose": 0,
    "validation_fraction": 0.1,
}


def _interruptible(method: _F) -> _F:
    """``fit`` and ``partial_fit`` stop on Ctrl-C (the native loop looks at Python's signals
    between epochs, about every 50 ms) and raise ``KeyboardInterrupt`` with the estimator as
    it was before the call: its attributes are put back."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except KeyboardInterrupt:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return cast(_F, wrapper)


class _Estimator(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """What the estimators share: parameters, fitting, scoring, the model file, ONNX."""

    backend: str
    adapter: Optional[str]
    n_jobs: Optional[int]
    class_weight: Any
    warm_start: bool
    model_: str
    _native: tuple[str, _rosenblatt.Model]
    classes_: np.ndarray
    report_: dict[str, Any]
    n_iter_: int
    kind_: str

    # -- to be given by each estimator -------------------------------------------------------
    def _train_params(self, classes: Optional[np.ndarray]) -> dict[str, Any]:
        raise NotImplementedError

    def _sk_defaults(self) -> dict[str, Any]:
        return _SK_DEFAULTS

    def _binary_only(self) -> Union[str, bool]:
        return False

    # -- scikit-learn ------------------------------------------------------------------------
    def _validate_fit(
        self, X: Any, y: Any, sample_weight: Any, reset: bool
    ) -> tuple[Any, np.ndarray, Optional[npt.NDArray[np.float32]]]:
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
            sample_weight = _sample_weight(sample_weight, X.shape[0])
        return X, y, sample_weight

    def _run(
        self,
        X: Any,
        y: np.ndarray,
        classes: np.ndarray,
        sample_weight: Optional[npt.NDArray[np.float32]],
        params: dict[str, Any],
        start: Optional[str],
    ) -> _Estimator:
        index = np.searchsorted(classes, y)
        if sample_weight is not None:
            # A row of weight 0 takes no part in training: leave it out (it would still count
            # as a mistake for the stopping rules).
            keep = sample_weight > 0
            if not keep.any():
                raise ValueError("every sample_weight is zero: nothing to train on")
            if not keep.all():
                X, index, sample_weight = X[keep], index[keep], sample_weight[keep]
            sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float32)
        x, csr = _features(X)
        label_type, names = _label_names(classes)
        feature_names = getattr(self, "feature_names_in_", None)
        native, report = _rosenblatt.fit(
            x,
            csr,
            np.ascontiguousarray(index, dtype=np.int64),
            names,
            params,
            {
                "sample_weight": sample_weight,
                "start": start,
                "backend": _params.backend(self.backend),
                "adapter": _params.adapter(self.adapter),
                "progress": _params.verbose(self),
                "threads": _params.n_jobs(self.n_jobs),
                "storage": _params.storage(getattr(self, "storage", None)),
                "label_type": label_type,
                "feature_names": (
                    None if feature_names is None else [str(f) for f in feature_names]
                ),
            },
        )
        self._set_model(native, classes)
        self.report_ = json.loads(report)
        self.n_iter_ = int(self.report_["epochs"])
        return self

    def _set_model(self, model: Union[str, _rosenblatt.Model], classes: np.ndarray) -> None:
        native = model if isinstance(model, _rosenblatt.Model) else _rosenblatt.Model(model)
        kind, names, d, linear, _ = native.describe()
        self.model_ = native.json
        self._native = (self.model_, native)
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

    @_interruptible
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _Estimator:
        """Trains on X (array, scipy.sparse CSR/CSC, or a pandas/polars DataFrame, whose column
        names become ``feature_names_in_``) and the labels y (any values NumPy can sort),
        optionally weighting the rows. With ``warm_start=True`` a fitted estimator goes on
        from its weights (the same classes and features), as the CLI's ``--init-model``."""
        go_on = bool(_params.boolean("warm_start", getattr(self, "warm_start", False)))
        go_on = go_on and hasattr(self, "model_")
        X, y, sample_weight = self._validate_fit(X, y, sample_weight, reset=not go_on)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"training needs at least two classes; y has one class only: {classes[0]!r}"
            )
        self._check_binary(y, classes)
        start = None
        if go_on:
            if not np.array_equal(classes, self.classes_):
                raise ValueError(
                    f"warm_start: y has the classes {classes!r}, the fitted model "
                    f"{self.classes_!r}; fit with warm_start=False to start afresh"
                )
            start = self.model_
        params = self._train_params(classes)
        return self._run(X, y, classes, sample_weight, params, start)

    def _check_binary(self, y: np.ndarray, classes: np.ndarray) -> None:
        rule = self._binary_only()
        if rule and len(classes) > 2:
            raise ValueError(
                "Only binary classification is supported. The type of the target is "
                f"{type_of_target(y, input_name='y')} ({len(classes)} classes; "
                f"{rule} is a two-class rule)."
            )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_class = not self._binary_only()
        # Winnow's weights are positive and it has no bias: it learns monotone combinations
        # of the features, not any hyperplane (centred data defeats it).
        tags.classifier_tags.poor_score = getattr(self, "algo", None) == "winnow"
        return tags

    def _native_model(self) -> _rosenblatt.Model:
        """The fitted model held natively (parsed once; again only when ``model_`` was
        replaced, or after unpickling, which keeps the text alone)."""
        kept = self.__dict__.get("_native")
        if kept is None or kept[0] is not self.model_:
            kept = (self.model_, _rosenblatt.Model(self.model_))
            self._native = kept
        return cast(_rosenblatt.Model, kept[1])

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_native", None)
        return state

    def _decide(self, X: Any) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        check_is_fitted(self, "model_")
        native = self._native_model()
        backend = _params.backend(self.backend)
        adapter = _params.adapter(self.adapter)
        threads = _params.n_jobs(self.n_jobs)
        if (
            type(X) is np.ndarray
            and X.ndim == 2
            and X.dtype in _FAST_DTYPES
            and X.flags.c_contiguous
            and X.flags.aligned
            and X.shape[0] > 0
            and X.shape[1] == self.n_features_in_
            and "feature_names_in_" not in self.__dict__
        ):
            # A plain float32/float64 array of the fitted width: scored as it is, its values
            # checked (finite) while scaled; scikit-learn's checks below would only repeat
            # that, and they name a bad value in their words, so they run when one is found.
            try:
                return native.decide(X, backend=backend, adapter=adapter, threads=threads)
            except ValueError:
                pass
        X = validate_data(
            self, X, accept_sparse=["csr", "csc"], dtype=np.float32, order="C", reset=False
        )
        x, csr = _features(X)
        return native.decide(x, csr, backend=backend, adapter=adapter, threads=threads)

    def decision_function(self, X: Any) -> npt.NDArray[np.float64]:
        """Decision values, float64 as scikit-learn's (computed in float32 and widened): one
        per row for two classes (positive: ``classes_[1]``), one per class and row otherwise
        (votes for a voted model)."""
        values, _ = self._decide(X)
        if values.shape[1] == 2 and len(self.classes_) == 2:
            # A two-class model with a row per class: the binary decision, s_1 - s_0.
            return np.asarray(values[:, 1] - values[:, 0], dtype=np.float64)
        out = values[:, 0] if values.shape[1] == 1 else values
        return np.asarray(out, dtype=np.float64)

    def predict(self, X: Any) -> np.ndarray:
        """The predicted class of each row (sgn(0) = +1: ties go to ``classes_[1]``)."""
        _, pred = self._decide(X)
        return self.classes_[pred]

    # -- the model file and ONNX --------------------------------------------------------------
    def save(self, path: PathLike) -> None:
        """Writes the model file the command line reads (``rosenblatt predict``); the file
        appears whole or not at all."""
        check_is_fitted(self, "model_")
        _write_atomic(path, self.model_.encode())

    def to_onnx(self, path: Optional[PathLike] = None) -> bytes:
        """The model as an ONNX graph (input ``X``: float32, n x n_features; outputs ``label``,
        the original classes, and ``scores``, the decision values), written to ``path`` when
        given, and returned. Linear models only: voted and kernel models are refused."""
        check_is_fitted(self, "model_")
        data = self._native_model().to_onnx()
        if path is not None:
            _write_atomic(path, data)
        return data

    @classmethod
    def load(cls, path: PathLike) -> Any:
        """An estimator holding the model file at ``path`` (written by ``save`` or by
        ``rosenblatt train -o``), ready to predict."""
        return load(path, cls)


def _sample_weight(sample_weight: Any, n: int) -> npt.NDArray[np.float32]:
    """sample_weight checked: a number (every row) or n finite numbers >= 0."""
    if np.isscalar(sample_weight):
        sample_weight = np.full(n, sample_weight)
    sw = check_array(
        sample_weight, ensure_2d=False, dtype=np.float32, order="C", input_name="sample_weight"
    )
    if sw.ndim != 1 or sw.shape[0] != n:
        raise ValueError(
            f"sample_weight has the shape {sw.shape}, expected ({n},): one weight per row of X"
        )
    if (sw < 0).any():
        i = int(np.flatnonzero(sw < 0)[0])
        raise ValueError(f"sample_weight must be >= 0, got {sw[i]} for row {i}")
    if n and not sw.any():
        raise ValueError("every sample_weight is zero: nothing to train on")
    return np.asarray(sw, dtype=np.float32)


class Perceptron(_Estimator):
    """The linear perceptron family on the GPU or the CPU.

    Every parameter is keyword-only; the names are scikit-learn's where scikit-learn's
    Perceptron has them.

    Parameters
    ----------
    algo : {"averaged", "batch", "online", "pocket", "voted", "winnow", "multiclass"}, default="averaged"
        The rule (see the README's "The perceptron family"); the default, the online averaged
        perceptron, generalised best on the public sets of the README's defaults table. More
        than two classes train one weight row per class (``multiclass``: argmax or
        one-vs-rest).
    mode : {None, "online", "batch"}, default=None
        For ``averaged`` and ``winnow``: update per row (online, the default) or per epoch.
    max_iter : int, default=1000
        Most passes over the data (epochs).
    tol : float in [0, 1) or None, default=0.01
        The relative fall of the watched mistakes (training mistakes, weighted with the rows'
        weights, or held-out ones with ``early_stopping``) that counts as an improvement;
        training stops after ``n_iter_no_change`` epochs without one. None: no such stop (run
        ``max_iter`` epochs or until an epoch makes no mistake), as in scikit-learn.
    eta0 : float in (0, 1], default=1.0
        The learning rate.
    n_iter_no_change : int or None, default=None
        Epochs without improvement before stopping; None: the algorithm's default (10 for the
        online averaged perceptron, else 30, as the command line's).
    early_stopping : bool or "auto", default="auto"
        True: hold out ``validation_fraction`` of the rows (stratified, seeded), watch their
        mistakes and keep the model of the best epoch. "auto" (the command line's default
        too): the same with a tenth of the rows when the training set has at least 100,000
        rows (a large set loses nothing by it, and the stopping rule then watches rows the
        model has not fitted), else as False. False: stop on the training mistakes.
    validation_fraction : float in (0, 1), default=0.1
        The share held out with ``early_stopping``.
    scale : {"online", "maxabs", None, "standard", "minmax"}, default="online"
        Feature scaling kept in the model (and in its ONNX graph). The default, ``"online"``
        (the command line's too), divides each feature by its largest magnitude (zeros stay
        zeros, sparse rows stay sparse), so a raw count beside tf-idf weights does not swamp
        them and the bias coordinate 1 of [x, 1] and the features move at the same rate; the
        online rules keep that magnitude as they read the rows (the first epoch scales each
        row by the rows before it and its own), the rules that read every row first take the
        whole set's (``"maxabs"``). ``None`` trains on the features as given (the lecture
        notes' rule, on which Novikoff's bound is stated).
    class_weight : None, "balanced" or dict, default=None
        Per-class weights on the updates: a row of class c steps ``class_weight[c]`` times as
        far and counts as many mistakes. With ``multiclass="ovr"`` as in scikit-learn: in
        class c's own head only (the other heads step its rows by their sample weight).
    margin_threshold : float, default=0.0
        A row is a mistake when y w.x <= this (0: the classic rule).
    multiclass : {"direct", "ovr"}, default="direct"
        More than two classes: one argmax model, or one binary model per class.
    multiclass_update : {"argmax", "all"}, default="argmax"
        The direct multiclass update: against the highest wrong class, or every class above.
    max_vectors : int, default=100000
        ``voted``: most vectors kept.
    minibatch : int, default=1
        ``online``, ``averaged`` (online form) and ``pa``: rows per step; a step's rows are
        scored by the weights it started with and their updates added together (the form a
        GPU runs in parallel). With ``streams``, both 1 on a GPU: the GPU's choice for the
        rows.
    streams : int, default=1
        ``online``, ``averaged`` (online form) and ``pa``: each epoch's rows split into this many
        streams trained from the same weights and mixed by their mean after the epoch
        (at most 4096).
    fit_intercept : bool, default=True
        Learn a bias (the augmented input [x, 1]).
    shuffle : bool, default=True
        Online forms: shuffle the rows each epoch (seeded).
    random_state : int, RandomState, Generator or None, default=0
        Seed of the shuffles and the validation split (None: drawn from NumPy's generator).
    verbose : int, default=0
        > 0: a progress bar on stderr while training.
    warm_start : bool, default=False
        ``fit`` goes on from the fitted weights (not for ``voted``).
    n_jobs : int or None, default=None
        CPU threads, joblib's convention (None or -1: every core, -2: all but one); never more
        than the cores (a larger value runs as -1); results do not depend on it.
    update_tol : float or None, default=None
        Batch forms: also stop when an epoch's update is shorter than this.
    storage : {None, "f32", "f16", "u8", "i8"}, default=None
        How the batch epochs store X (None: the narrowest exact one; results do not depend
        on it).
    backend : {"auto", "cpu", "gpu"}, default="auto"
        "auto": a hardware GPU when one is present and X has at least 4,194,304 values, else
        the CPU without opening any adapter (a GPU failure finishes on the CPU); "gpu": any
        adapter, software ones included.
    adapter : str or None, default=None
        Part of the adapter's name (see ``rosenblatt.adapters()``).
    epochs, lr, seed, patience, min_improvement, progress :
        rosenblatt 0.1's names of ``max_iter``, ``eta0``, ``random_state``,
        ``n_iter_no_change`` (``patience=0``: ``tol=None``), ``tol`` and ``verbose``:
        still taken, with a FutureWarning, until 0.3.

    Attributes
    ----------
    coef_ : ndarray (1, n_features) or (n_classes, n_features)
        Weights in the input's coordinates (scaling folded in); not for voted models.
    intercept_ : ndarray (1,) or (n_classes,)
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of a DataFrame X (pandas, polars), when it had string names.
    n_iter_ : int
        Epochs run.
    report_ : dict
        The training report: mistakes and criterion per epoch, the radius R, the margin
        gamma, Novikoff's bound (R / gamma)^2, accuracy, device, time.
    model_ : str
        The model file's text.
    """

    @_params.keyword_only
    def __init__(
        self,
        *,
        algo: str = "averaged",
        mode: Optional[str] = None,
        max_iter: int = 1000,
        tol: Optional[float] = 0.01,
        eta0: float = 1.0,
        n_iter_no_change: Optional[int] = None,
        early_stopping: Union[bool, str] = "auto",
        validation_fraction: float = 0.1,
        scale: Optional[str] = "online",
        class_weight: Any = None,
        margin_threshold: float = 0.0,
        multiclass: str = "direct",
        multiclass_update: str = "argmax",
        max_vectors: int = 100000,
        minibatch: int = 1,
        streams: int = 1,
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: Any = 0,
        verbose: int = 0,
        warm_start: bool = False,
        n_jobs: Optional[int] = None,
        update_tol: Optional[float] = None,
        storage: Optional[str] = None,
        backend: str = "auto",
        adapter: Optional[str] = None,
        epochs: Any = DEPRECATED,
        lr: Any = DEPRECATED,
        seed: Any = DEPRECATED,
        patience: Any = DEPRECATED,
        min_improvement: Any = DEPRECATED,
        progress: Any = DEPRECATED,
    ) -> None:
        self.algo = algo
        self.mode = mode
        self.max_iter = max_iter
        self.tol = tol
        self.eta0 = eta0
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.margin_threshold = margin_threshold
        self.multiclass = multiclass
        self.multiclass_update = multiclass_update
        self.max_vectors = max_vectors
        self.minibatch = minibatch
        self.streams = streams
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.update_tol = update_tol
        self.storage = storage
        self.backend = backend
        self.adapter = adapter
        self.epochs = epochs
        self.lr = lr
        self.seed = seed
        self.patience = patience
        self.min_improvement = min_improvement
        self.progress = progress

    def _train_params(self, classes: Optional[np.ndarray]) -> dict[str, Any]:
        if not (isinstance(self.algo, str) and self.algo in _params.LINEAR_ALGOS):
            raise InvalidParameterError(
                f"algo must be one of {', '.join(_params.LINEAR_ALGOS)}, got {self.algo!r} "
                "(the kernel perceptron is KernelPerceptron)"
            )
        if self.algo == "voted" and self.warm_start:
            raise InvalidParameterError(
                "warm_start must be False for algo='voted': a voted model keeps many vectors, "
                "not one to go on from"
            )
        p = _params.train_params(self, self.algo, self._sk_defaults())
        if self.mode is not None:
            p["mode"] = _params.choice("mode", self.mode, ("online", "batch"))
        p["multiclass"] = _params.choice("multiclass", self.multiclass, ("direct", "ovr"))
        p["multiclass_update"] = _params.choice(
            "multiclass_update", self.multiclass_update, ("argmax", "all")
        )
        p["max_vectors"] = _params.integer("max_vectors", self.max_vectors, 1)
        p["minibatch"] = _params.integer("minibatch", self.minibatch, 1)
        p["streams"] = _params.integer("streams", self.streams, 1, 4096)
        p["class_weight"] = _params.class_weight(self.class_weight, classes)
        return p

    def _binary_only(self) -> Union[str, bool]:
        return "Winnow" if self.algo == "winnow" else False

    def _continues(self) -> bool:
        # A voted model keeps many vectors: there is no single weight vector to go on from.
        return bool(self.algo != "voted")

    @_available_if(lambda self: self._continues())
    @_interruptible
    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> Perceptron:
        """One epoch on (X, y) from the current weights: for the online forms one pass of
        updates, for the batch rule one update from the sum over this data's mistakes.
        ``classes`` (every class there will be) is needed on the first call. The scaling is
        fitted on the first call's rows and kept. (Averaged and pocket models continue from
        the weights they keep, the average or the pocket.)"""
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
        params = self._train_params(all_classes)
        params.update(epochs=1, patience=0, validation_fraction=None)
        start = None if first else self.model_
        self._run(X, y, all_classes, sample_weight, params, start)
        return self


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
    C : float, default=1.0
        Aggressiveness (> 0) of PA-I and PA-II.
    loss : {"hinge", "squared_hinge", "unbounded"}, default="hinge"
        PA-I, PA-II or the unbounded rule.
    multiclass : {"direct", "ovr"}, default="direct"
        More than two classes: one joint model, or one binary model per class.
    max_iter : int, default=1000
        As for :class:`Perceptron`.
    tol : float in [0, 1) or None, default=0.01
        As for :class:`Perceptron`.
    eta0 : float in (0, 1], default=1.0
        As for :class:`Perceptron` (it scales every step; 1 is the rule itself).
    n_iter_no_change : int or None, default=None
        As for :class:`Perceptron` (None: 30).
    early_stopping : bool or "auto", default="auto"
        As for :class:`Perceptron`.
    validation_fraction : float in (0, 1), default=0.1
        As for :class:`Perceptron`.
    scale : {"online", "maxabs", None, "standard", "minmax"}, default="online"
        As for :class:`Perceptron`.
    class_weight : None, "balanced" or dict, default=None
        As for :class:`Perceptron`.
    fit_intercept : bool, default=True
        As for :class:`Perceptron`.
    shuffle : bool, default=True
        As for :class:`Perceptron`.
    random_state : int, RandomState, Generator or None, default=0
        As for :class:`Perceptron`.
    verbose : int, default=0
        As for :class:`Perceptron`.
    warm_start : bool, default=False
        As for :class:`Perceptron`.
    n_jobs : int or None, default=None
        As for :class:`Perceptron`.
    backend : {"auto", "cpu", "gpu"}, default="auto"
        As for :class:`Perceptron`.
    adapter : str or None, default=None
        As for :class:`Perceptron`.
    epochs, lr, seed, patience, min_improvement, progress :
        Deprecated, as for :class:`Perceptron`.

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, feature_names_in_, n_iter_, report_, model_ :
        As for :class:`Perceptron`; the report's mistakes are the rows stepped on (a positive
        hinge loss) and its criterion the sum of their losses.
    """

    algo = "pa"

    @_params.keyword_only
    def __init__(  # noqa: PLR0913
        self,
        *,
        C: float = 1.0,
        loss: str = "hinge",
        multiclass: str = "direct",
        max_iter: int = 1000,
        tol: Optional[float] = 0.01,
        eta0: float = 1.0,
        n_iter_no_change: Optional[int] = None,
        early_stopping: Union[bool, str] = "auto",
        validation_fraction: float = 0.1,
        scale: Optional[str] = "online",
        class_weight: Any = None,
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: Any = 0,
        verbose: int = 0,
        warm_start: bool = False,
        n_jobs: Optional[int] = None,
        backend: str = "auto",
        adapter: Optional[str] = None,
        epochs: Any = DEPRECATED,
        lr: Any = DEPRECATED,
        seed: Any = DEPRECATED,
        patience: Any = DEPRECATED,
        min_improvement: Any = DEPRECATED,
        progress: Any = DEPRECATED,
    ) -> None:
        self.C = C
        self.loss = loss
        self.multiclass = multiclass
        self.max_iter = max_iter
        self.tol = tol
        self.eta0 = eta0
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.backend = backend
        self.adapter = adapter
        self.epochs = epochs
        self.lr = lr
        self.seed = seed
        self.patience = patience
        self.min_improvement = min_improvement
        self.progress = progress

    def _train_params(self, classes: Optional[np.ndarray]) -> dict[str, Any]:
        loss = _params.choice("loss", self.loss, tuple(_params.PA_LOSSES))
        p = _params.train_params(self, "pa", self._sk_defaults())
        p["multiclass"] = _params.choice("multiclass", self.multiclass, ("direct", "ovr"))
        p["class_weight"] = _params.class_weight(self.class_weight, classes)
        p["passive_aggressive"] = {
            "variant": _params.PA_LOSSES[loss],
            "c": _params.real("C", self.C, 0.0, low_open=True),
        }
        return p

    def _binary_only(self) -> Union[str, bool]:
        return False

    def _continues(self) -> bool:
        return True


_AROW_DEFAULTS = dict(_SK_DEFAULTS, max_iter=1)


class AROWClassifier(Perceptron):
    """AROW, adaptive regularisation of weight vectors (Crammer, Kulesza and Dredze, NIPS
    2009), online: every weight keeps a confidence (a diagonal covariance, 1 at the start),
    and on a row with margin y w.x below 1 the weights step by the hinge loss
    times their confidences, which then shrink where the row had values; rare features keep
    large steps, common ones settle. What Vowpal Wabbit's adaptive, normalised steps learn
    in one pass, so one pass is the default (``max_iter=1``; more passes fit noisy labels).
    More than two classes: one binary model per class (one-vs-rest). The model file keeps
    the weights, not the confidences, so a fitted AROW model is not continued
    (``warm_start`` and ``partial_fit`` are not offered).

    Parameters
    ----------
    r : float, default=30.0
        The regularisation (> 0): larger r, smaller and steadier steps.
    covariance : {"diagonal", "full"}, default="diagonal"
        The covariance kept: a confidence per weight, or the whole matrix (at most 2,047
        features, row by row on the CPU), for which the paper's mistake bound holds: binary
        runs then report their mistakes and the bound in ``report_["arow_bound"]``.
    max_iter : int, default=1
        Passes over the rows (with ``n_iter_no_change``, at most this many).
    tol : float in [0, 1) or None, default=0.01
        As for :class:`Perceptron`.
    eta0 : float in (0, 1], default=1.0
        As for :class:`Perceptron` (it scales every step; 1 is the rule itself).
    n_iter_no_change : int or None, default=None
        As for :class:`Perceptron` (None: 30).
    early_stopping : bool or "auto", default="auto"
        As for :class:`Perceptron`.
    validation_fraction : float in (0, 1), default=0.1
        As for :class:`Perceptron`.
    scale : {"online", "maxabs", None, "standard", "minmax"}, default="online"
        As for :class:`Perceptron`.
    class_weight : None, "balanced" or dict, default=None
        As for :class:`Perceptron` (a row's weight counts as that many copies of it).
    fit_intercept : bool, default=True
        As for :class:`Perceptron`.
    shuffle : bool, default=True
        As for :class:`Perceptron`.
    random_state : int, RandomState, Generator or None, default=0
        As for :class:`Perceptron`.
    verbose : int, default=0
        As for :class:`Perceptron`.
    n_jobs : int or None, default=None
        As for :class:`Perceptron`.
    backend : {"auto", "cpu", "gpu"}, default="auto"
        As for :class:`Perceptron`; on a GPU, AROW runs in steps of 8 rows in one stream (the
        form that keeps its one pass's accuracy), the confidences on the GPU too.
    adapter : str or None, default=None
        As for :class:`Perceptron`.

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, feature_names_in_, n_iter_, report_, model_ :
        As for :class:`Perceptron`; the report's mistakes are the rows stepped on (a positive
        hinge loss) and its criterion the sum of their losses.
    """

    algo = "arow"

    def __init__(  # noqa: PLR0913
        self,
        *,
        r: float = 30.0,
        covariance: str = "diagonal",
        max_iter: int = 1,
        tol: Optional[float] = 0.01,
        eta0: float = 1.0,
        n_iter_no_change: Optional[int] = None,
        early_stopping: Union[bool, str] = "auto",
        validation_fraction: float = 0.1,
        scale: Optional[str] = "online",
        class_weight: Any = None,
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: Any = 0,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
        backend: str = "auto",
        adapter: Optional[str] = None,
    ) -> None:
        self.r = r
        self.covariance = covariance
        self.max_iter = max_iter
        self.tol = tol
        self.eta0 = eta0
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.backend = backend
        self.adapter = adapter

    def _sk_defaults(self) -> dict[str, Any]:
        return _AROW_DEFAULTS

    def _train_params(self, classes: Optional[np.ndarray]) -> dict[str, Any]:
        p = _params.train_params(self, "arow", self._sk_defaults())
        p["class_weight"] = _params.class_weight(self.class_weight, classes)
        p["arow"] = {"r": _params.real("r", self.r, 0.0, low_open=True)}
        cov = _params.choice("covariance", self.covariance, ("diagonal", "full"))
        if cov == "full":
            p["arow"]["covariance"] = cov
        return p

    def _binary_only(self) -> Union[str, bool]:
        return False

    def _continues(self) -> bool:
        return False


class VWHasher(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Raw features in Vowpal Wabbit's text form hashed into columns exactly as
    ``rosenblatt train data.vw`` hashes them (murmur3, as Vowpal Wabbit), as a scipy CSR
    matrix: so a model trained here on them equals the command line's on the same lines,
    and raw text and categorical fields reach every estimator (as scikit-learn's
    ``HashingVectorizer`` output does, which the estimators take as it is). Stateless:
    ``fit`` learns nothing.

    Each row of X is one example's features, ``|namespace feature[:value] ...`` (several
    namespaces, values, ``field=value`` categoricals); a label, importance or tag before the
    first ``|`` is dropped (the rows must all have one, or none).

    Parameters
    ----------
    n_bits : int, default=18
        Columns are 2^n_bits (1 to 28), Vowpal Wabbit's ``-b`` and the CLI's ``--hash-bits``.
    quadratic : sequence of str, default=()
        Interactions of the namespaces starting with each pair of characters, as ``-q ab``.
    sign : {"signed", "unsigned"}, default="signed"
        Signed hashing (each value times +1 or -1 from its hash, so that collisions cancel on
        average) or Vowpal Wabbit's own values.
    """

    def __init__(
        self, *, n_bits: int = 18, quadratic: Any = (), sign: str = "signed"
    ) -> None:
        self.n_bits = n_bits
        self.quadratic = quadratic
        self.sign = sign

    def fit(self, X: Any, y: Any = None) -> VWHasher:
        """Checks the parameters; there is nothing to learn."""
        self._checked()
        return self

    def _checked(self) -> tuple[int, list[str], bool]:
        bits = _params.integer("n_bits", self.n_bits, 1, 28)
        quadratic = [self.quadratic] if isinstance(self.quadratic, str) else self.quadratic
        pairs = [str(q) for q in quadratic]
        for q in pairs:
            if len(q) != 2:
                raise InvalidParameterError(
                    f"quadratic must hold pairs of namespace initials such as 'ab', got {q!r}"
                )
        sign = _params.choice("sign", self.sign, ("signed", "unsigned"))
        return bits, pairs, sign == "signed"

    def transform(self, X: Any) -> sp.csr_matrix:
        """The rows of X (strings, one example each) hashed: a CSR matrix of float32 with
        2^n_bits columns."""
        bits, pairs, signed = self._checked()
        if isinstance(X, (str, bytes)):
            raise ValueError("X must be a sequence of strings, one example each, not a string")
        lines = []
        for i, row in enumerate(X):
            text = row.decode() if isinstance(row, bytes) else row
            if not isinstance(text, str):
                raise ValueError(f"row {i} of X is {type(row).__name__}, not a string")
            if "\n" in text or "\r" in text:
                raise ValueError(f"row {i} of X holds a line break: one example a row")
            if "|" not in text:
                text = "| " + text
            lines.append(text)
        if not lines:
            return sp.csr_matrix((0, 1 << bits), dtype=np.float32)
        n, d, indptr, indices, values = _rosenblatt.hash_vw(
            ("\n".join(lines) + "\n").encode(), bits, pairs, signed
        )
        if n != len(lines):
            raise RuntimeError(f"{len(lines)} rows hashed into {n} (please report this)")
        return sp.csr_matrix((values, indices, indptr), shape=(n, d))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = False
        return tags


class ColumnHasher(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """A table's columns hashed into columns exactly as ``rosenblatt train data.csv
    --categorical ...`` hashes a CSV file's, as a scipy CSR matrix: a value ``v`` of a
    categorical column ``c`` is the feature ``c=v`` (value 1), every other column its name with
    its number as the value, a missing value (None, NaN, an empty string) no feature; so the
    rows are those of the Vowpal Wabbit lines ``| c=v name:x ...`` and a model trained on
    them equals the command line's. Stateless: ``fit`` learns nothing.

    X is a DataFrame (pandas or polars: its column names are the names hashed), or a 2-D
    sequence of rows whose columns are named by their 0-based position.

    Parameters
    ----------
    categorical : sequence of str or int, default=()
        The categorical columns, by name (any case) or 0-based position; the others hold
        numbers.
    n_bits : int, default=18
        Columns are 2^n_bits (1 to 28), the CLI's ``--hash-bits``.
    sign : {"signed", "unsigned"}, default="signed"
        Signed hashing (each value times +1 or -1 from its hash, so that collisions cancel on
        average) or the values as they are.
    """

    def __init__(
        self, *, categorical: Any = (), n_bits: int = 18, sign: str = "signed"
    ) -> None:
        self.categorical = categorical
        self.n_bits = n_bits
        self.sign = sign

    def fit(self, X: Any, y: Any = None) -> ColumnHasher:
        """Checks the parameters; there is nothing to learn."""
        self._checked()
        return self

    def _checked(self) -> tuple[int, list[str], bool]:
        bits = _params.integer("n_bits", self.n_bits, 1, 28)
        cols = [self.categorical] if isinstance(self.categorical, (str, int)) else self.categorical
        names = [str(c) for c in cols]
        if any(not n.strip() or "," in n for n in names):
            raise InvalidParameterError(
                f"categorical must name columns (no empty name, no comma), got {names!r}"
            )
        if not names:
            raise InvalidParameterError(
                "categorical must name at least one column (a table of numbers needs no "
                "hashing)"
            )
        sign = _params.choice("sign", self.sign, ("signed", "unsigned"))
        return bits, names, sign == "signed"

    def transform(self, X: Any) -> sp.csr_matrix:
        """The rows of X hashed: a CSR matrix of float32 with 2^n_bits columns."""
        import csv
        import io
        import math

        bits, names, signed = self._checked()
        columns = getattr(X, "columns", None)
        if columns is not None and hasattr(X, "iter_rows"):
            rows: Any = X.iter_rows()  # polars
        elif columns is not None and hasattr(X, "itertuples"):
            rows = X.itertuples(index=False, name=None)  # pandas
        elif isinstance(X, (str, bytes)):
            raise ValueError("X must be a table (a DataFrame or rows of values), not a string")
        else:
            rows = X

        def cell(v: Any) -> str:
            missing = v is None or type(v).__name__ == "NAType"  # pandas' NA
            if missing or (isinstance(v, (float, np.floating)) and math.isnan(v)):
                return ""
            if isinstance(v, (bool, np.bool_)):
                return str(int(v))
            if isinstance(v, (float, np.floating)):
                return repr(float(v))
            return str(v)

        buf = io.StringIO()
        # Every field quoted, so no value reads as a comment ("#...") or splits a row.
        w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
        if columns is not None:
            w.writerow([str(c) for c in columns])
        n = 0
        for row in rows:
            w.writerow([cell(v) for v in row])
            n += 1
        if n == 0:
            return sp.csr_matrix((0, 1 << bits), dtype=np.float32)
        got, d, indptr, indices, values = _rosenblatt.hash_csv(
            buf.getvalue().encode(), bits, names, signed, columns is not None
        )
        if got != n:
            raise RuntimeError(f"{n} rows hashed into {got} (please report this)")
        return sp.csr_matrix((values, indices, indptr), shape=(got, d))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        tags.requires_fit = False
        return tags


_KERNEL_DEFAULTS = dict(_SK_DEFAULTS, max_iter=100)


class KernelPerceptron(_Estimator):
    """The kernel perceptron (dual form): f(x) = sum over support vectors of
    alpha_i y_i (K(x_i, x) + 1), kernel scores computed on the GPU or the CPU. Two classes.

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear"}, default="rbf"
        The kernel function K(x, z).
    gamma : float, default=1.0
        RBF width, or the polynomial's scale of x.z.
    degree : int, default=3
        Polynomial degree.
    coef0 : float, default=1.0
        Polynomial constant.
    max_iter : int, default=100
        As for :class:`Perceptron` (here at most 100 epochs by default).
    tol : float in [0, 1) or None, default=0.01
        As for :class:`Perceptron`.
    eta0 : float in (0, 1], default=1.0
        As for :class:`Perceptron`.
    n_iter_no_change : int or None, default=None
        As for :class:`Perceptron`.
    early_stopping : bool or "auto", default="auto"
        As for :class:`Perceptron`.
    validation_fraction : float in (0, 1), default=0.1
        As for :class:`Perceptron`.
    scale : {"maxabs", None, "standard", "minmax"}, default=None
        As for :class:`Perceptron` (but None by default: ``gamma`` sets the kernel's scale).
    class_weight : None, "balanced" or dict, default=None
        As for :class:`Perceptron`.
    margin_threshold : float, default=0.0
        As for :class:`Perceptron`.
    fit_intercept : bool, default=True
        As for :class:`Perceptron`.
    shuffle : bool, default=True
        As for :class:`Perceptron`.
    random_state : int, RandomState, Generator or None, default=0
        As for :class:`Perceptron`.
    verbose : int, default=0
        As for :class:`Perceptron`.
    n_jobs : int or None, default=None
        As for :class:`Perceptron`.
    backend : {"auto", "cpu", "gpu"}, default="auto"
        As for :class:`Perceptron`.
    adapter : str or None, default=None
        As for :class:`Perceptron`.
    epochs, lr, seed, patience, min_improvement, progress :
        Deprecated, as for :class:`Perceptron`.

    There is no warm start: the dual form's support vectors are the model.

    Attributes
    ----------
    classes_, n_features_in_, feature_names_in_, n_iter_, report_, model_ : as for
    :class:`Perceptron`.
    """

    @_params.keyword_only
    def __init__(  # noqa: PLR0913
        self,
        *,
        kernel: str = "rbf",
        gamma: float = 1.0,
        degree: int = 3,
        coef0: float = 1.0,
        max_iter: int = 100,
        tol: Optional[float] = 0.01,
        eta0: float = 1.0,
        n_iter_no_change: Optional[int] = None,
        early_stopping: Union[bool, str] = "auto",
        validation_fraction: float = 0.1,
        scale: Optional[str] = None,
        class_weight: Any = None,
        margin_threshold: float = 0.0,
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: Any = 0,
        verbose: int = 0,
        n_jobs: Optional[int] = None,
        backend: str = "auto",
        adapter: Optional[str] = None,
        epochs: Any = DEPRECATED,
        lr: Any = DEPRECATED,
        seed: Any = DEPRECATED,
        patience: Any = DEPRECATED,
        min_improvement: Any = DEPRECATED,
        progress: Any = DEPRECATED,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.max_iter = max_iter
        self.tol = tol
        self.eta0 = eta0
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.scale = scale
        self.class_weight = class_weight
        self.margin_threshold = margin_threshold
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.backend = backend
        self.adapter = adapter
        self.epochs = epochs
        self.lr = lr
        self.seed = seed
        self.patience = patience
        self.min_improvement = min_improvement
        self.progress = progress

    def _sk_defaults(self) -> dict[str, Any]:
        return _KERNEL_DEFAULTS

    def _binary_only(self) -> Union[str, bool]:
        return "the kernel perceptron"

    def _train_params(self, classes: Optional[np.ndarray]) -> dict[str, Any]:
        kernel = _params.choice("kernel", self.kernel, ("rbf", "poly", "linear"))
        if kernel == "rbf":
            k: dict[str, Any] = {
                "kernel": "rbf",
                "gamma": _params.real("gamma", self.gamma, 0.0, low_open=True),
            }
        elif kernel == "poly":
            k = {
                "kernel": "poly",
                "degree": _params.integer("degree", self.degree, 1, 16),
                "gamma": _params.real("gamma", self.gamma, 0.0, low_open=True),
                "coef0": _params.real("coef0", self.coef0, -np.inf),
            }
        else:
            k = {"kernel": "linear"}
        p = _params.train_params(self, "kernel", self._sk_defaults())
        p["class_weight"] = _params.class_weight(self.class_weight, classes)
        p["kernel"] = k
        return p


def _label_names(classes: np.ndarray) -> tuple[str, list[str]]:
    """The labels' type and the names the model file keeps for them: integers of any width
    exactly, floats by their shortest round-trip form, bools as False/True, strings as they
    are (objects of mixed types by their str, as strings)."""
    kind = classes.dtype.kind
    values = classes.tolist()
    if kind == "b":
        return "bool", [str(bool(v)) for v in values]
    if kind in "iu":
        return "int", [str(int(v)) for v in values]
    if kind == "f":
        return "float", [repr(float(v)) for v in values]
    if kind == "O":
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            return "bool", [str(bool(v)) for v in values]
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
            return "int", [str(int(v)) for v in values]
        if all(isinstance(v, (float, np.floating)) for v in values):
            return "float", [repr(float(v)) for v in values]
    return "str", [str(v) for v in values]


def _typed_classes(names: list[str], label_type: Optional[str]) -> np.ndarray:
    """Class names from a model file as the labels they were, by the file's label type (files
    of the command line have none: numbers when they all are, else strings)."""
    if label_type == "bool":
        return np.asarray([n == "True" for n in names], dtype=bool)
    if label_type == "int":
        return np.asarray([int(n) for n in names])
    if label_type == "float":
        return np.asarray([float(n) for n in names], dtype=np.float64)
    if label_type == "str":
        return np.asarray(names)
    return _class_array(names)


def _class_array(names: list[str]) -> np.ndarray:
    """Class names from a model file as the labels they were: numbers when they all are."""
    for kind in (int, float):
        try:
            values = [kind(n) for n in names]
        except ValueError:
            continue
        if [str(v) for v in values] == list(names) or kind is float:
            return np.asarray(values)
    return np.asarray(names, dtype=object)


def load(path: PathLike, cls: Optional[type] = None) -> Any:
    """The estimator holding the model file at ``path``: a :class:`KernelPerceptron` for a
    kernel model, a :class:`PassiveAggressiveClassifier` for a passive-aggressive one, else a
    :class:`Perceptron` (or ``cls`` when given), with the parameters it was trained with."""
    native = _rosenblatt.Model.load(os.fspath(path))
    model = native.json
    kind, names, d, _, report = native.describe()
    wire = json.loads(model)
    params = wire.get("params", {})
    if cls is None:
        if kind == "kernel":
            cls = KernelPerceptron
        elif params.get("algo") == "pa":
            cls = PassiveAggressiveClassifier
        elif params.get("algo") == "arow":
            cls = AROWClassifier
        else:
            cls = Perceptron
    est = cls()
    settable = est.get_params()
    patience = params.get("patience")
    mapped = {
        "max_iter": params.get("epochs"),
        "eta0": params.get("lr"),
        "random_state": params.get("seed"),
        "fit_intercept": params.get("fit_bias"),
        "shuffle": params.get("shuffle"),
        "margin_threshold": params.get("margin_threshold"),
        "n_iter_no_change": patience if patience else None,
        "tol": params.get("min_improvement") if patience else None,
        "early_stopping": (
            True
            if params.get("validation_fraction") is not None
            else "auto" if params.get("auto_validation") else False
        ),
        "validation_fraction": params.get("validation_fraction"),
        "scale": None if params.get("scale") in (None, "none") else params.get("scale"),
    }
    if cls is PassiveAggressiveClassifier:
        pa = params.get("passive_aggressive") or {}
        losses = {v: k for k, v in _params.PA_LOSSES.items()}
        mapped.update(
            C=pa.get("c"),
            loss=losses.get(str(pa.get("variant"))),
            multiclass=params.get("multiclass"),
        )
    elif cls is AROWClassifier:
        arow = params.get("arow") or {}
        mapped.update(r=arow.get("r", 30.0), covariance=arow.get("covariance", "diagonal"))
    elif cls is Perceptron:
        mapped.update(
            algo=params.get("algo"),
            mode=params.get("mode"),
            update_tol=params.get("tol"),
            multiclass=params.get("multiclass"),
            multiclass_update=params.get("multiclass_update"),
            max_vectors=params.get("max_vectors"),
            minibatch=params.get("minibatch", 1),
            streams=params.get("streams", 1),
        )
    classes = _typed_classes(names, wire.get("label_type"))
    cw = params.get("class_weight")
    if cw == "balanced":
        mapped["class_weight"] = "balanced"
    elif isinstance(cw, dict) and "given" in cw:
        by_name = {str(c): c for c in classes}
        mapped["class_weight"] = {by_name.get(k, k): w for k, w in cw["given"]}
    kernel = params.get("kernel")
    if cls is KernelPerceptron and isinstance(kernel, dict):
        mapped.update(
            kernel=kernel.get("kernel"),
            gamma=kernel.get("gamma"),
            degree=kernel.get("degree"),
            coef0=kernel.get("coef0"),
        )
    keep_none = {"tol", "n_iter_no_change", "mode", "update_tol", "scale"}
    est.set_params(
        **{k: v for k, v in mapped.items() if k in settable and (v is not None or k in keep_none)}
    )
    est._set_model(native, classes)
    est.n_features_in_ = d
    if wire.get("feature_names") is not None:
        est.feature_names_in_ = np.asarray(wire["feature_names"], dtype=object)
    if report is not None:
        est.report_ = json.loads(report)
        est.n_iter_ = int(est.report_["epochs"])
    return est

