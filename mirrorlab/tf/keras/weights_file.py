"""``Model.save_weights``/``load_weights`` files: Keras 3's ``.weights.h5`` names and checks, mirrorlab's own format.

Keras 3 writes HDF5 through h5py, which mirrorlab does not depend on. mirrorlab writes the same information, each
layer's variables in order, as an uncompressed NumPy ``.npz`` archive (``layers/<index>/vars/<index>``) under the
``.weights.h5`` name Keras requires: a deliberate difference, so Keras cannot read mirrorlab's files nor mirrorlab
Keras'. The file is written to a temporary name and renamed, so every worker of a cluster may save the same path.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from typing import Any

import numpy as np

from ... import errors
from ...tensor import to_host

__all__ = ["save", "load", "layer_arrays", "assign_layers", "counted_arrays"]

SUFFIX = ".weights.h5"


def layer_arrays(layers: list[Any]) -> dict[str, np.ndarray]:
    """Every layer's weights as host arrays (``layers/<i>/vars/<j>``, with ``layers/<i>/count``)."""
    arrays = {f"layers/{i}/vars/{j}": np.asarray(to_host(var.numpy()))
              for i, layer in enumerate(layers) for j, var in enumerate(layer.weights)}
    arrays.update({f"layers/{i}/count": np.int64(len(layer.weights)) for i, layer in enumerate(layers)})
    return arrays


def assign_layers(layers: list[Any], arrays: dict[str, np.ndarray], filepath: str) -> None:
    """Give ``layers`` the weights ``layer_arrays`` saved, after checking every count and shape (Keras' error)."""
    problems = []
    saved = [counted_arrays(arrays, f"layers/{i}/", filepath) for i in range(len(layers))]
    for layer, values in zip(layers, saved):
        if len(values) != len(layer.weights):
            problems.append(f"Layer '{layer.name}' expected {len(layer.weights)} variables, but received "
                            f"{len(values)} variables during loading.")
        else:
            problems += [f"Layer '{layer.name}': variable.shape={var.shape}, saved value.shape={value.shape}"
                         for var, value in zip(layer.weights, values) if tuple(var.shape) != value.shape]
    if problems:
        raise ValueError(f"A total of {len(problems)} objects could not be loaded from {filepath}: "
                         + " ".join(problems))
    for layer, values in zip(layers, saved):
        for var, value in zip(layer.weights, values):
            var.assign(value)


def counted_arrays(arrays: dict[str, np.ndarray], prefix: str, filepath: str) -> list[np.ndarray]:
    """The arrays ``<prefix>vars/0..n-1`` where ``<prefix>count`` says n (none without a count); DataLossError
    naming the file where the count is no integer scalar or an array it counts is missing or not numeric."""
    count = arrays.get(f"{prefix}count", np.int64(0))
    if count.shape != () or count.dtype.kind not in "iu" or count < 0:
        raise errors.DataLossError(f"{filepath} is damaged: {prefix}count is {count.dtype} {list(count.shape)}, not "
                                   "a count.")
    values = [arrays.get(f"{prefix}vars/{j}") for j in range(int(count))]
    damaged = [j for j, value in enumerate(values) if value is None or value.dtype.kind not in "biufc"]
    if damaged:
        raise errors.DataLossError(f"{filepath} is damaged: {prefix}vars/{damaged[0]} is missing or not numeric.")
    return values


def save(layers: list[Any], filepath: str | os.PathLike) -> None:
    """Write every layer's variables to ``filepath`` (which must end in ``.weights.h5``, as in Keras 3)."""
    filepath = os.fspath(filepath)
    if not filepath.endswith(SUFFIX):
        raise ValueError(f"The filename must end in `{SUFFIX}`. Received: filepath={filepath}")
    arrays = layer_arrays(layers)
    directory = os.path.dirname(os.path.abspath(filepath))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp_weights_")
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
        os.replace(temporary, filepath)
    except BaseException:
        os.unlink(temporary)
        raise


def load(layers: list[Any], filepath: str | os.PathLike) -> None:
    """Assign the variables saved in ``filepath`` to ``layers``, checking counts and shapes first."""
    filepath = os.fspath(filepath)
    if not filepath.endswith((SUFFIX, ".keras", ".h5")):
        raise ValueError(f"File format not supported: filepath={filepath}. Keras 3 only supports V3 `.keras` files, "
                         "`.weights.h5` files, legacy H5 format files (`.h5` extension), or Orbax checkpoints.")
    if not filepath.endswith(SUFFIX):
        raise ValueError(f"mirrorlab loads only the `{SUFFIX}` files its save_weights writes. Received: "
                         f"filepath={filepath}")
    try:
        with np.load(filepath, allow_pickle=False) as saved:
            arrays = dict(saved)
    except (zipfile.BadZipFile, ValueError) as error:
        raise ValueError(f"{filepath} is not a weights file written by mirrorlab's save_weights (mirrorlab stores "
                         "NumPy archives under the .weights.h5 name; Keras' HDF5 files cannot be read without "
                         f"h5py): {error}") from None
    assign_layers(layers, arrays, filepath)
