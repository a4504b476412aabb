"""``tf.random``: the global seed, TF 2.21's rule turning it and an op's own seed into the op's two seeds, and the
random ops (stateless and stateful) with TF's values.

With a global seed, an op gets ``(global seed, its seed)``, and an op without a seed takes the next draw of a
``random.Random(global seed)`` (TF's eager ``internal_operation_seed``), so a seeded program replays TF's shuffles.
Without one, an op's seed pairs with TF's default graph seed; an op with no seed at all is left to the caller
(TF draws fresh entropy; mirrorlab's simulator draws from the worker's index). Each worker keeps its own global seed.

A stateful op (``uniform``, ``normal``, ``truncated_normal``) keeps its Philox stream between calls with the same
seeds, as TF's cached eager kernel does: the same seeded call gives new values each time until ``set_seed``.
"""

from __future__ import annotations

import random as _random
from typing import Any

import numpy as np

from ._kernels import random_kernels as kernels
from .data.seeding import dataset_seed
from ._kernels.philox import philox_start
from ..runtime import current_environment

__all__ = ["set_seed", "get_seed", "DEFAULT_GRAPH_SEED", "stateless_uniform", "stateless_normal",
           "stateless_truncated_normal", "uniform", "normal", "truncated_normal"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1
_KERNELS = "tf.random.kernels"  # (op, dtype, seed, seed2) -> the Philox stream the op reads next


def set_seed(seed: Any) -> None:
    """Set this worker's global seed (None clears it), restarting the draws for ops created without a seed."""
    state = current_environment().process_state
    state.pop(_KERNELS, None)  # TF clears its kernel cache: stateful ops start their streams again
    if seed is None:
        state.pop("tf.random", None)
        return
    try:
        hash(seed)
    except TypeError:  # an array, as TF converts it
        seed = int(np.array(seed))
    state["tf.random"] = (seed, _random.Random(seed))


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """TF's ``random_seed.get_seed``: ``(seed, seed2)`` for an op created with ``op_seed``; ``(None, None)`` when
    neither it nor a global seed is set."""
    found = current_environment().process_state.get("tf.random")
    if found is not None:
        global_seed, rng = found
        if op_seed is None:
            op_seed = rng.randint(0, _MAXINT32)
        seeds = (int(global_seed) % _MAXINT32, int(op_seed) % _MAXINT32)
    elif op_seed is not None:
        seeds = (DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32)
    else:
        return None, None
    return (0, _MAXINT32) if seeds == (0, 0) else seeds


# -- stateless ops: the values depend only on the seed --------------------------------------------------------------


_STATELESS_TYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint32", "uint64")
_STATEFUL_TYPES = _STATELESS_TYPES[:6]


def _dtype(dtype: Any, accepted: tuple[str, ...]) -> np.dtype:
    """``dtype`` as a NumPy type, or TF's error naming the accepted ones."""
    name = str(getattr(dtype, "name", dtype))
    try:
        dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in accepted:
        shown = name if dtype is None else dtype.name
        raise ValueError(f"Argument `dtype` got invalid value <dtype: '{shown}'>. Accepted dtypes are "
                         f"({', '.join('tf.' + t for t in accepted)}).")
    return dtype


def _check_alg(alg: Any) -> None:
    name = str(getattr(alg, "name", alg)).lower()
    if name not in ("auto_select", "philox", "1", "3"):
        raise ValueError(f"mirrorlab's random ops use Philox, as TF on CPU; alg={alg!r} is not supported.\n"
                         "Fix: leave alg at its default ('auto_select') or pass 'philox'.")


def _scaled(unit: np.ndarray, minval: Any, maxval: Any) -> np.ndarray:
    """TF's ``rnd * (maxval - minval) + minval`` in the values' type."""
    low, high = np.asarray(minval, unit.dtype), np.asarray(maxval, unit.dtype)
    return (unit * (high - low) + low).astype(unit.dtype)


def _shifted(values: np.ndarray, mean: Any, stddev: Any) -> np.ndarray:
    """TF's ``rnd * stddev + mean`` in the values' type."""
    return (values * np.asarray(stddev, values.dtype) + np.asarray(mean, values.dtype)).astype(values.dtype)


def stateless_uniform(shape: Any, seed: Any, minval: Any = 0, maxval: Any = None, dtype: Any = np.float32,
                      name: str | None = None, alg: Any = "auto_select") -> np.ndarray:
    """``tf.random.stateless_uniform``: floats in ``[minval, maxval)`` (``maxval`` 1 by default), integers in
    ``[minval, maxval)``, or integers over their whole range when both bounds are None."""
    _check_alg(alg)
    dtype = _dtype(dtype, _STATELESS_TYPES)
    if dtype.kind in "iu":
        if (minval is None) != (maxval is None):
            raise ValueError(f"For integer `dtype` argument <dtype: '{dtype.name}'>, argument `minval` and `maxval` "
                             f"must be both None or not None. Got `minval`={minval} and `maxval`={maxval}.")
        if minval is not None and dtype.kind == "u":
            raise ValueError(f"Argument `dtype` got invalid value <dtype: '{dtype.name}'> when argument `minval` is "
                             "not None. Please don't use unsigned integers in this case.")
    stream = kernels.stateless_stream(seed)
    if dtype.kind in "iu":
        if minval is None:
            return kernels.uniform_full_int(shape, stream, dtype)
        return kernels.uniform_int(shape, stream, minval, maxval, dtype, "StatelessRandomUniformIntV2")
    return _scaled(kernels.unit_uniform(shape, stream, dtype), minval, 1 if maxval is None else maxval)


def stateless_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = np.float32,
                     name: str | None = None, alg: Any = "auto_select") -> np.ndarray:
    """``tf.random.stateless_normal``."""
    _check_alg(alg)
    return _shifted(kernels.standard_normal(shape, kernels.stateless_stream(seed), dtype), mean, stddev)


def stateless_truncated_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = np.float32,
                               name: str | None = None, alg: Any = "auto_select") -> np.ndarray:
    """``tf.random.stateless_truncated_normal``: normals within two standard deviations of ``mean``."""
    _check_alg(alg)
    return _shifted(kernels.truncated_standard_normal(shape, kernels.stateless_stream(seed), dtype), mean, stddev)


# -- stateful ops: each keeps reading its stream --------------------------------------------------------------------


def _stream(op: str, dtype: np.dtype, seed: int | None, shape: Any) -> kernels.Stream:
    """Where the op with these seeds reads this call, moving its stream on (TF's ``ReserveRandomOutputs``)."""
    seed1, seed2 = get_seed(seed)
    cache = current_environment().process_state.setdefault(_KERNELS, {})
    key = (op, dtype.str, seed1, seed2)
    if key not in cache:
        if seed1 is None:  # TF seeds such a kernel from fresh entropy
            seed1, seed2 = dataset_seed(None), dataset_seed(None)
        cache[key] = philox_start(seed1, seed2)
    stream = cache[key]
    philox_key, counter = stream
    cache[key] = philox_key, (counter + kernels.reserved_blocks(shape)) % (1 << 128)
    return stream


def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = np.float32, seed: int | None = None,
            name: str | None = None) -> np.ndarray:
    """``tf.random.uniform``: floats in ``[minval, maxval)`` (``maxval`` 1 by default) or integers in
    ``[minval, maxval)`` (``maxval`` required)."""
    dtype = _dtype(dtype, _STATEFUL_TYPES)
    if dtype.kind in "iu":
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype tf.{dtype.name}")
        return kernels.uniform_int(shape, _stream("RandomUniformInt", dtype, seed, shape), minval, maxval, dtype,
                                   "RandomUniformInt")
    unit = kernels.unit_uniform(shape, _stream("RandomUniform", dtype, seed, shape), dtype)
    maxval = 1 if maxval is None else maxval
    if isinstance(minval, int) and minval == 0:  # TF skips the shift for an int 0 (and the scale for an int 1)
        return unit if isinstance(maxval, int) and maxval == 1 else (unit * np.asarray(maxval, dtype)).astype(dtype)
    return _scaled(unit, minval, maxval)


def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = np.float32, seed: int | None = None,
           name: str | None = None) -> np.ndarray:
    """``tf.random.normal``."""
    dtype = kernels.float_dtype(dtype)
    return _shifted(kernels.standard_normal(shape, _stream("RandomStandardNormal", dtype, seed, shape), dtype),
                    mean, stddev)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = np.float32,
                     seed: int | None = None, name: str | None = None) -> np.ndarray:
    """``tf.random.truncated_normal``: normals within two standard deviations of ``mean``."""
    dtype = kernels.float_dtype(dtype)
    return _shifted(kernels.truncated_standard_normal(shape, _stream("TruncatedNormal", dtype, seed, shape), dtype),
                    mean, stddev)
