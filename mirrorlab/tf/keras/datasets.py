"""Local copies of Keras's example datasets (``keras.datasets.mnist.load_data()``); never downloads.

The file is looked up as Keras does: ``$KERAS_HOME/datasets/<path>`` (default ``~/.keras/datasets``).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np

__all__ = ["mnist"]


def _dataset_file(path: str) -> Path:
    home = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"))
    return Path(path) if os.path.isabs(path) else home / "datasets" / path


def _load_mnist(path: str = "mnist.npz") -> tuple:
    """``((x_train, y_train), (x_test, y_test))`` from Keras's ``mnist.npz`` file."""
    file = _dataset_file(path)
    if not file.exists():
        raise FileNotFoundError(
            f"{file} not found: mirrorlab never downloads data. Fix: copy Keras's mnist.npz (arrays x_train, "
            "y_train, x_test, y_test) there, or set KERAS_HOME to the folder that holds datasets/mnist.npz.")
    with np.load(file, allow_pickle=False) as f:
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])


mnist = SimpleNamespace(load_data=_load_mnist)
