"""Whole-model ``.keras`` files: ``model.save(path)`` and ``keras.models.load_model(path)``.

A ``.keras`` file is a zip archive, as Keras 3's: ``config.json`` (the model's config with its build and compile
configs, in Keras' format), ``metadata.json``, and the variables. Keras stores those as ``model.weights.h5`` (HDF5,
through h5py, which mirrorlab does not depend on); mirrorlab stores them as ``model.weights.npz``, an uncompressed
NumPy archive read with ``allow_pickle=False``: each layer's weights (``layers/<index>/vars/<index>``) and the
optimizer's variables (``optimizer/vars/<index>``, Keras' order). So Keras cannot load mirrorlab's files nor
mirrorlab Keras', but configs are interchangeable.

Under a strategy, every worker saves (reading an ON_READ variable aggregates it across the workers), each to its own
path (the tutorial's ``write_filepath``); the archive is written to a temporary name, flushed to disk and renamed,
so a crash mid-save never leaves a half-written file under the real name.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import tempfile
import warnings
import zipfile
import zlib
from typing import Any

import numpy as np

from .... import errors
from ...._version import __version__
from ....tensor import to_host
from ....train.file_checks import check, fields, kind, parse_json, read_npz
from ..weights_file import assign_layers, counted_arrays, layer_arrays
from .serialization import custom_object_scope, deserialize_keras_object, serialize_keras_object

__all__ = ["save_model", "load_model"]

CONFIG, METADATA, WEIGHTS = "config.json", "metadata.json", "model.weights.npz"
MAX_MEMBER_BYTES = 16 << 30  # a member claiming more than this is damaged
_CONFIG = fields({"class_name": kind(str), "config": kind(dict, list)})


def _check_save_path(filepath: str) -> None:
    if filepath.endswith(".h5") or filepath.endswith(".hdf5"):
        raise ValueError(f"mirrorlab does not write Keras' legacy HDF5 format (it needs h5py). Received: "
                         f"filepath={filepath}\nFix: save to a path ending in `.keras`.")
    if not filepath.endswith(".keras"):
        raise ValueError("Invalid filepath extension for saving. Please add either a `.keras` extension for the "
                         "native Keras format (recommended) or a `.h5` extension. Use `model.export(filepath)` if you "
                         f"want to export a SavedModel for use with TFLite/TFServing/etc. Received: filepath={filepath}.")


def _arrays(model: Any) -> dict[str, np.ndarray]:
    """The model's weights by layer, and its optimizer's variables, as host arrays."""
    arrays = layer_arrays(model.layers)
    optimizer = model.__dict__.get("optimizer")
    if optimizer is not None:
        variables = optimizer.variables
        arrays.update({f"optimizer/vars/{j}": np.asarray(to_host(var.numpy())) for j, var in enumerate(variables)})
        arrays["optimizer/count"] = np.int64(len(variables))
    return arrays


def save_model(model: Any, filepath: str | os.PathLike, overwrite: bool = True, zipped: bool | None = None,
               **kwargs: Any) -> None:
    """Write ``model`` (config, build and compile configs, weights, optimizer state) to a ``.keras`` file."""
    if kwargs:
        raise ValueError(f"The following argument(s) are not supported: {list(kwargs)}")
    if zipped is False:
        raise ValueError("save(zipped=False) (an unzipped directory) is not supported by mirrorlab.\nFix: leave "
                         "zipped at its default: a `.keras` zip file.")
    filepath = os.fspath(filepath)
    _check_save_path(filepath)
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"{filepath} exists and overwrite=False.\nFix: pass overwrite=True or a new path.")
    config = json.dumps(serialize_keras_object(model))
    metadata = json.dumps({"keras_version": "3 (mirrorlab)", "mirrorlab_version": __version__,
                           "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
                           "weights_format": "npz"})
    weights = io.BytesIO()
    np.savez(weights, **_arrays(model))
    directory = os.path.dirname(os.path.abspath(filepath))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp_model_", suffix=".keras")
    try:
        with os.fdopen(handle, "wb") as file:
            with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as archive:
                archive.writestr(METADATA, metadata)
                archive.writestr(CONFIG, config)
                archive.writestr(WEIGHTS, weights.getvalue())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, filepath)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _read_member(archive: zipfile.ZipFile, name: str, filepath: str) -> bytes:
    """Member ``name`` of the archive; DataLossError naming the file where the member is damaged."""
    if archive.getinfo(name).file_size > MAX_MEMBER_BYTES:
        raise errors.DataLossError(f"{filepath} is damaged: {name} claims {archive.getinfo(name).file_size} bytes.")
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error, NotImplementedError, RuntimeError) as exc:
        raise errors.DataLossError(f"{filepath} is damaged: {name} cannot be read ({type(exc).__name__}: "
                                   f"{exc}).") from None


def load_model(filepath: str | os.PathLike, custom_objects: dict[str, Any] | None = None, compile: bool = True,
               safe_mode: bool = True) -> Any:
    """The model a ``.keras`` file saved by mirrorlab holds: rebuilt from its config (in the active strategy's
    scope), compiled from its compile config unless ``compile=False``, with its weights and optimizer state."""
    filepath = os.fspath(filepath)
    if not filepath.endswith(".keras"):
        if filepath.endswith((".h5", ".hdf5")):
            raise ValueError(f"mirrorlab does not read Keras' legacy HDF5 format (it needs h5py). Received: "
                             f"filepath={filepath}\nFix: save the model as a `.keras` file.")
        raise ValueError(f"File format not supported: filepath={filepath}. Keras 3 only supports V3 `.keras` files, "
                         "legacy H5 format files (`.h5` extension). Note that the legacy SavedModel format is not "
                         "supported by `load_model()` in Keras 3. In order to reload a TensorFlow SavedModel as an "
                         "inference-only layer in Keras 3, use `keras.layers.TFSMLayer("
                         f"{filepath}, call_endpoint='serving_default')` (note that your `call_endpoint` might have a "
                         "different name).")
    if not os.path.exists(filepath):
        raise ValueError(f"File not found: filepath={filepath}. Please ensure the file is an accessible `.keras` zip "
                         "file.")
    try:
        with zipfile.ZipFile(filepath) as archive:
            names = set(archive.namelist())
            if CONFIG not in names:
                raise ValueError(f"{filepath} holds no {CONFIG}: it is not a `.keras` model file.")
            if WEIGHTS not in names:
                hint = " (Keras' own HDF5 weights, which mirrorlab cannot read without h5py)" \
                    if "model.weights.h5" in names else ""
                raise ValueError(f"{filepath} holds no {WEIGHTS}{hint}.\nFix: load a file saved by mirrorlab's "
                                 "model.save, or rebuild the model and load its weights another way.")
            config = parse_json(_read_member(archive, CONFIG, filepath), f"{filepath} ({CONFIG})")
            check(config, _CONFIG, f"{filepath} ({CONFIG})")
            arrays = read_npz(_read_member(archive, WEIGHTS, filepath), f"{filepath} ({WEIGHTS})")
    except zipfile.BadZipFile as error:  # Keras' error for a file that is no zip at all
        raise ValueError(f"{filepath} is not a `.keras` zip file: {error}") from None
    if not compile:
        config.pop("compile_config", None)
    with custom_object_scope(custom_objects or {}):
        model = deserialize_keras_object(config, custom_objects, safe_mode)
    _assign(model, arrays, filepath)
    return model


def _assign(model: Any, arrays: dict[str, np.ndarray], filepath: str) -> None:
    """Give the model's weights (checked layer by layer first) and its optimizer's variables the saved values."""
    assign_layers(model.layers, arrays, filepath)
    optimizer = model.__dict__.get("optimizer")
    if optimizer is None or "optimizer/count" not in arrays:
        return
    variables, saved = optimizer.variables, counted_arrays(arrays, "optimizer/", filepath)
    if len(saved) != len(variables):
        warnings.warn(f"Skipping variable loading for optimizer '{optimizer.name}', because it has {len(variables)} "
                      f"variables whereas the saved optimizer has {len(saved)} variables.", stacklevel=3)
        return
    for var, value in zip(variables, saved):
        var.assign(value)
