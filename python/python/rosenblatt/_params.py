"""The estimators' parameters: checked in Python's words (the parameter and the value), old
names mapped to scikit-learn's with a warning, and turned into the crate's training
parameters (TrainParams, the model file's ``params``)."""

from __future__ import annotations

import functools
import inspect
import json
import math
import numbers
import os
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

import numpy as np
from sklearn.utils import check_random_state


class InvalidParameterError(ValueError, TypeError):
    """A parameter of an estimator has a value it cannot take (a ValueError and a TypeError,
    as scikit-learn's own parameter errors are)."""


# The sentinel default of a renamed parameter: set to anything else, it is used (with a
# FutureWarning) in place of its new name.
DEPRECATED = "deprecated"

# Old name -> scikit-learn's name (rosenblatt 0.1 -> 0.2); the old names go in 0.3.
RENAMED = {
    "epochs": "max_iter",
    "lr": "eta0",
    "seed": "random_state",
    "patience": "n_iter_no_change",
    "min_improvement": "tol",
    "progress": "verbose",
}

_Init = TypeVar("_Init", bound=Callable[..., None])


def keyword_only(init: _Init) -> _Init:
    """Every parameter of ``init`` is keyword-only, as in scikit-learn; the one positional
    parameter 0.1 took (Perceptron's ``algo``, PassiveAggressiveClassifier's ``C``,
    KernelPerceptron's ``kernel``: the first keyword) is still taken by position, with a
    FutureWarning, until 0.3. The signature seen by ``get_params`` (``inspect.signature``,
    through ``__wrapped__``) is ``init``'s own."""
    first = next(
        p.name
        for p in inspect.signature(init).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    )

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > 1 or first in kwargs:
                raise TypeError(
                    f"{type(self).__name__}() takes its parameters by keyword only "
                    f"(got {len(args)} positional)"
                )
            warnings.warn(
                f"pass {first}={args[0]!r} by keyword: {type(self).__name__}'s parameters "
                "are keyword-only as in scikit-learn (positional taken until 0.3)",
                FutureWarning,
                stacklevel=2,
            )
            kwargs[first] = args[0]
        init(self, **kwargs)

    return cast_init(wrapper, init)


def cast_init(wrapper: Callable[..., None], init: _Init) -> _Init:
    """``wrapper`` typed as the ``init`` it wraps (so type checkers see the keyword-only
    signature)."""
    return wrapper  # type: ignore[return-value]


LINEAR_ALGOS = ("averaged", "batch", "online", "pocket", "voted", "winnow", "multiclass")
PA_LOSSES = {"hinge": "pa1", "squared_hinge": "pa2", "unbounded": "pa"}
STORAGES = ("f32", "f16", "u8", "i8")


def _fail(name: str, what: str, value: Any) -> InvalidParameterError:
    return InvalidParameterError(f"{name} must be {what}, got {value!r}")


# The widest integers the crate's parameters hold: counts are u64 (epochs, vectors), the
# patience a u32; floats are float32.
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
F32_MAX = float(np.finfo(np.float32).max)


def integer(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    """An integer in [low, high] (bools refused); every integer the crate takes fits 64 bits,
    so ``high`` is at most 2**64 - 1."""
    top = U64_MAX if high is None else min(high, U64_MAX)
    what = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(name, what, value)
    v = int(value)
    if v > top and high is None:
        raise _fail(name, f"an integer in [{low}, 2**64 - 1]", value)
    if v < low or v > top:
        raise _fail(name, what, value)
    return v


def real(
    name: str,
    value: Any,
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite number in the interval given that float32 holds (the crate's parameters are
    float32: a value past its range, or one that rounds to an open end, is refused here
    rather than reaching the crate as inf or 0; bools refused)."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    what = (
        f"a number {'>' if low_open else '>='} {low:g}"
        if math.isinf(high)
        else f"a number in {left}{low:g}, {high:g}{right}"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(name, what, value)
    v = float(value)
    if not math.isfinite(v):
        raise _fail(name, what, value)
    if v < low or (low_open and v == low) or v > high or (high_open and v == high):
        raise _fail(name, what, value)
    if abs(v) > F32_MAX:
        raise _fail(name, f"{what} and at most {F32_MAX:g} in size (float32)", value)
    v32 = float(np.float32(v))
    if (low_open and v32 <= low) or (high_open and v32 >= high):
        raise _fail(name, f"{what} after rounding to float32 (it rounds to {v32!r})", value)
    return v


def choice(name: str, value: Any, options: Sequence[Any]) -> Any:
    """One of the options (compared with ==, types included)."""
    for o in options:
        if type(value) is type(o) and value == o:
            return o
    shown = ", ".join(repr(o) for o in options)
    raise _fail(name, f"one of {shown}", value)


def boolean(name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise _fail(name, "True or False", value)


def seed(name: str, value: Any) -> int:
    """random_state as the crate's seed: an int is the seed; None draws one from NumPy's global
    generator, a RandomState or Generator from itself (so clones with the same object
    differ, as in scikit-learn)."""
    if isinstance(value, np.random.Generator):
        return int(value.integers(0, 2**32))
    if value is None or isinstance(value, np.random.RandomState):
        return int(check_random_state(value).randint(0, 2**31 - 1))
    return integer(name, value, 0, 2**64 - 1)


def n_jobs(value: Any) -> Optional[int]:
    """n_jobs as CPU threads, joblib's convention: None or -1 every core, -2 all but one, and
    so on (at least 1); k >= 1: k, but never more than the cores (a larger k runs as -1)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value == 0:
        raise _fail("n_jobs", "None or a non-zero integer", value)
    cores = _cores()
    v = int(value)
    return min(v, cores) if v > 0 else max(1, cores + 1 + max(v, -cores))


def _cores() -> int:
    """The cores this process may use (its affinity where the OS says, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def class_weight(value: Any, classes: Optional[np.ndarray]) -> Any:
    """None, "balanced" or {class: weight >= 0}; with the training classes, a dict's keys
    must be among them and are sent as the crate names them."""
    if value is None or (isinstance(value, str) and value == "balanced"):
        return value
    if not isinstance(value, Mapping):
        raise _fail("class_weight", 'None, "balanced" or a dict {class: weight}', value)
    out = []
    for k, w in value.items():
        weight = real(f"class_weight[{k!r}]", w, 0.0)
        name = str(k)
        if classes is not None:
            hits = [c for c in classes if c == k]
            if not hits:
                raise InvalidParameterError(
                    f"class_weight names the class {k!r}, which y does not have "
                    f"(classes: {', '.join(str(c) for c in classes)})"
                )
            name = str(hits[0])
        out.append([name, weight])
    return {"given": out}


def renamed(est: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The estimator's values of scikit-learn's names, taking a renamed parameter's value (with
    a FutureWarning) where it was set; an old name and its new one both set is an error."""
    values = {new: getattr(est, new) for new in RENAMED.values() if new in defaults}
    for old, new in RENAMED.items():
        if new not in defaults or not hasattr(est, old):
            continue
        v = getattr(est, old)
        if isinstance(v, str) and v == DEPRECATED:
            continue
        never = old == "patience" and not isinstance(v, bool) and v == 0
        use = "tol=None" if never else f"{new}={v!r}"
        warnings.warn(
            f"{old} was renamed {new} (scikit-learn's name) in rosenblatt 0.2 and will be "
            f"removed in 0.3: use {use}",
            FutureWarning,
            stacklevel=6,
        )
        given = getattr(est, new)
        if _differs(given, defaults[new]):
            raise InvalidParameterError(
                f"{old} (deprecated) and {new} are both set ({v!r}, {given!r}): set {new} only"
            )
        if never:
            # patience=0 meant "never stop early": scikit-learn says tol=None (which a
            # min_improvement given beside it no longer changes).
            values["tol"] = None
            values["n_iter_no_change"] = None
            continue
        if new == "tol" and values["tol"] is None:
            continue
        values[new] = v
    return values


def _differs(a: Any, b: Any) -> bool:
    """Whether a parameter's value differs from its default (None only equals None)."""
    if a is None or b is None:
        return (a is None) != (b is None)
    return bool(a != b)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


@functools.lru_cache(maxsize=None)
def library_defaults(algo: str) -> Mapping[str, Any]:
    """The crate's training defaults for ``algo`` (``TrainParams::for_algo``, the one place
    they are written, as the CLI's flags read them)."""
    from . import _rosenblatt

    out: Mapping[str, Any] = json.loads(_rosenblatt.defaults(algo))
    return out


def train_params(est: Any, algo: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Checks every parameter the estimator shares with the others and returns the crate's
    TrainParams (as JSON-ready values) for ``algo``."""
    v = renamed(est, {k: d for k, d in defaults.items() if k != "verbose"})
    tol = v["tol"]
    if tol is not None:
        tol = real("tol", tol, 0.0, 1.0, high_open=True)
    n_iter = v["n_iter_no_change"]
    if n_iter is not None:
        n_iter = integer("n_iter_no_change", n_iter, 1, U32_MAX)
    auto = isinstance(est.early_stopping, str) and est.early_stopping == "auto"
    early = False if auto else boolean("early_stopping", est.early_stopping)
    fraction_given = est.validation_fraction
    if fraction_given is None:
        # rosenblatt 0.1's default ("no held-out rows"): early_stopping=False says so now.
        warnings.warn(
            "validation_fraction=None is rosenblatt 0.1's; rows are held out only with "
            "early_stopping=True (as in scikit-learn): leave validation_fraction at its default",
            FutureWarning,
            stacklevel=5,
        )
        fraction_given = defaults["validation_fraction"]
    fraction = real(
        "validation_fraction", fraction_given, 0.0, 1.0, low_open=True, high_open=True
    )
    if not early and not _same(fraction_given, defaults["validation_fraction"]):
        warnings.warn(
            "validation_fraction is only used with early_stopping=True (as in scikit-learn); "
            "rosenblatt 0.1 held rows out whenever it was set",
            UserWarning,
            stacklevel=5,
        )
    scale = est.scale
    if scale is not None:
        scale = choice("scale", scale, ("online", "maxabs", "standard", "minmax"))
    update_tol = getattr(est, "update_tol", None)
    if update_tol is not None:
        update_tol = real("update_tol", update_tol, 0.0)
    lib = library_defaults(algo)
    margin = getattr(est, "margin_threshold", lib["margin_threshold"])
    return {
        "algo": algo,
        "mode": None,
        "epochs": integer("max_iter", v["max_iter"], 1),
        "lr": real("eta0", v["eta0"], 0.0, 1.0, low_open=True),
        "tol": update_tol,
        "seed": seed("random_state", v["random_state"]),
        "fit_bias": boolean("fit_intercept", est.fit_intercept),
        "init": lib["init"],
        "shuffle": boolean("shuffle", est.shuffle),
        "margin_threshold": real("margin_threshold", margin, 0.0),
        "multiclass": lib["multiclass"],
        "multiclass_update": lib["multiclass_update"],
        "max_vectors": lib["max_vectors"],
        # tol=None: no early stop by improvement; None: the algorithm's default patience.
        "patience": 0 if tol is None else n_iter,
        "min_improvement": 0.0 if tol is None else tol,
        "validation_fraction": fraction if early else None,
        "auto_validation": auto,
        "scale": "none" if scale is None else scale,
    }


def verbose(est: Any) -> bool:
    v = renamed(est, {"verbose": 0}).get("verbose", 0)
    if isinstance(v, bool):
        return v
    return integer("verbose", v, 0) > 0


def storage(value: Any) -> Optional[str]:
    if value is None:
        return None
    return str(choice("storage", value, STORAGES))


def backend(value: Any) -> str:
    return str(choice("backend", value, ("auto", "cpu", "gpu")))


def adapter(value: Any) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise _fail("adapter", "None or a part of an adapter's name", value)
