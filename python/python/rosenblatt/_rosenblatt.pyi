"""Types of the compiled extension (python/src/lib.rs): the crate's training and scoring.
A fitted model is a native handle (``Model``), parsed and validated once."""

from typing import Any, Optional, TypedDict, Union

import numpy as np
import numpy.typing as npt

__version__: str

_Csr = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32], int]

class _FitOptions(TypedDict):
    sample_weight: Optional[npt.NDArray[np.float32]]
    start: Optional[str]
    backend: str
    adapter: Optional[str]
    progress: bool
    threads: Optional[int]
    storage: Optional[str]
    label_type: Optional[str]
    feature_names: Optional[list[str]]

def fit(
    x: Optional[npt.NDArray[np.float32]],
    csr: Optional[_Csr],
    y: npt.NDArray[np.int64],
    classes: list[str],
    params: dict[str, Any],
    options: _FitOptions,
) -> tuple[Model, str]:
    """Trains; returns the model and the training report's JSON. ``params``: the model
    file's ``params`` keys as Python values; ``options``: every key, each type-checked.
    ``label_type``
    ("int", "float", "bool", "str"): the classes' type, kept in the model file (version 4),
    which then compares them as that type; ``feature_names``: kept in the model file."""

_Description = tuple[
    str,
    list[str],
    int,
    Optional[tuple[list[list[float]], list[float]]],
    Optional[str],
]

class Model:
    """A fitted model held natively; pickles as the model file's text."""

    def __init__(self, json: str) -> None:
        """Reads and validates the model file's JSON text."""
    @staticmethod
    def load(path: str) -> Model:
        """Reads and validates the model file at ``path``."""
    @property
    def json(self) -> str:
        """The model file's JSON text."""
    def decide(
        self,
        x: Optional[Union[npt.NDArray[np.float32], npt.NDArray[np.float64]]],
        csr: Optional[_Csr] = None,
        *,
        backend: str = "auto",
        adapter: Optional[str] = None,
        threads: Optional[int] = None,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Raw scores (n x outputs) and predicted class indices."""
    def describe(self) -> _Description:
        """Kind, class names, features, weight rows and biases (linear models), report JSON."""
    def to_onnx(self) -> bytes:
        """The model as an ONNX graph's bytes."""
    def __reduce__(self) -> tuple[Any, tuple[str]]: ...

def temp_prefix() -> str:
    """The prefix of this process's temporaries (``.rosenblatt-MACHINE-PID-``)."""

def remove_stale_temps(dir: str) -> int:
    """Removes the temporaries this machine's finished processes left in ``dir``."""

def adapters() -> list[tuple[str, str, str]]:
    """(name, API, type) of each GPU adapter found."""
def hash_vw(
    text: bytes, bits: int, quadratic: list[str], signed: bool
) -> tuple[int, int, npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """Vowpal Wabbit lines hashed as the command line hashes them: (n, d, indptr, indices,
    values) of the CSR rows."""
def hash_csv(
    text: bytes, bits: int, categorical: list[str], signed: bool, header: bool
) -> tuple[int, int, npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """CSV rows (every column a feature) hashed as ``train data.csv --categorical`` hashes
    them: (n, d, indptr, indices, values) of the CSR rows."""
def defaults(algo: Optional[str] = None) -> str:
    """The crate's training defaults for ``algo`` (``TrainParams::for_algo``; None: the
    default algorithm's) as JSON."""
