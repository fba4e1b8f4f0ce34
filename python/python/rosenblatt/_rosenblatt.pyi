"""Types of the compiled extension (python/src/lib.rs): the crate's training and scoring.
Models cross as the model file's JSON text."""

from typing import Optional

import numpy as np
import numpy.typing as npt

__version__: str

_Csr = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32], int]

def fit(
    x: Optional[npt.NDArray[np.float32]],
    csr: Optional[_Csr],
    y: npt.NDArray[np.int64],
    classes: list[str],
    params: str,
    sample_weight: Optional[npt.NDArray[np.float32]] = None,
    start: Optional[str] = None,
    backend: str = "auto",
    adapter: Optional[str] = None,
    progress: bool = False,
    threads: Optional[int] = None,
    storage: Optional[str] = None,
    label_type: Optional[str] = None,
    feature_names: Optional[list[str]] = None,
) -> tuple[str, str]:
    """Trains; returns the model file's JSON and the training report's JSON. ``label_type``
    ("int", "float", "bool", "str"): the classes' type, kept in the model file (version 4),
    which then compares them as that type; ``feature_names``: kept in the model file."""

def decide(
    model: str,
    x: Optional[npt.NDArray[np.float32]],
    csr: Optional[_Csr],
    backend: str = "auto",
    adapter: Optional[str] = None,
    threads: Optional[int] = None,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Raw scores (n x outputs) and predicted class indices."""

def describe(
    model: str,
) -> tuple[
    str,
    list[str],
    int,
    Optional[tuple[list[list[float]], list[float]]],
    Optional[str],
]:
    """Kind, class names, features, weight rows and biases (linear models), report JSON."""

def load_model(path: str) -> str:
    """Reads and validates a model file; returns its JSON."""

def temp_prefix() -> str:
    """The prefix of this process's temporaries (``.rosenblatt-MACHINE-PID-``)."""

def remove_stale_temps(dir: str) -> int:
    """Removes the temporaries this machine's finished processes left in ``dir``."""
def to_onnx(model: str) -> bytes:
    """The model as an ONNX graph's bytes."""

def adapters() -> list[tuple[str, str, str]]:
    """(name, API, type) of each GPU adapter found."""
