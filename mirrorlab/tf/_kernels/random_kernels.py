"""TF's CPU random kernels, bit for bit: what ``RandomUniform``, ``RandomStandardNormal``, ``TruncatedNormal`` and
their stateless versions write, given where they read the Philox stream (a ``Stream``: key and 128-bit counter).

Stateless ops scramble a shape-[2] seed into the stream (``StatelessRandomGetKeyCounter``); stateful ops start at
``PhiloxRandom(seed, seed2)`` (``philox.philox_start``) and move on with every call. The kernels read the stream as TF does: uniform floats
from the mantissa bits of one sample (two for float64), normals by Box-Muller on pairs of samples (the C library's
``log`` and ``sincos``, see ``libm``), truncated normals in groups of 4 (2 for float64) that each start 256
samples-per-output into the stream and draw pairs until enough fall within 2 standard deviations. Scaling by the
bounds, mean or standard deviation is left to the callers, as TF's Python wrappers do it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import libm
from ...errors import InvalidArgumentError
from .philox import philox_blocks

__all__ = ["Stream", "stateless_stream", "reserved_blocks", "float_dtype", "int_dtype",
           "unit_uniform", "uniform_int", "uniform_full_int", "standard_normal", "truncated_standard_normal",
           "multinomial_row"]

Stream = tuple[tuple[int, int], int]  # a Philox key (two 32-bit words) and a 128-bit counter

_SCRAMBLE_KEY = (0x3EC8F720, 0x02461E29)
_TWO_PI = 2 * math.pi
_FLOATS = (np.float16, np.float32, np.float64)
_RESERVED_SAMPLES_PER_OUTPUT = 256  # TF's reservation per output: a stateful op's step, a truncated group's stride


def stateless_stream(seed: Any) -> Stream:
    """The Philox key and 128-bit counter TF derives from a stateless op's ``seed`` (two integers, as int64 bit
    patterns)."""
    values = np.asarray(seed)
    if values.dtype.kind not in "iu":
        kind = {"float32": "float", "float64": "float"}.get(values.dtype.name, values.dtype.name)
        raise InvalidArgumentError(f"Value for attr 'Tseed' of {kind} is not in the list of allowed values: int32, "
                                   "int64")
    if values.shape != (2,):
        raise InvalidArgumentError(f"seed must have shape [2], not {list(values.shape)} [Op:StatelessRandomGetKeyCounter]")
    seed0, seed1 = (int(v) & ((1 << 64) - 1) for v in values.tolist())
    mix = philox_blocks(seed0 | (seed1 << 64), _SCRAMBLE_KEY, 1).tolist()
    return (mix[0], mix[1]), (mix[2] << 64) | (mix[3] << 96)


def reserved_blocks(shape: Any) -> int:
    """How far a stateful op moves its stream per call: 256 blocks per output (TF's ``ReserveRandomOutputs``)."""
    return math.prod(_shape(shape)) * _RESERVED_SAMPLES_PER_OUTPUT


def _samples(stream: Stream, count: int) -> np.ndarray:
    """The first ``count`` uint32 samples of ``stream``."""
    key, counter = stream
    return philox_blocks(counter, key, -(-count // 4))[:count]


def _shape(shape: Any) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.atleast_1d(np.asarray(shape, dtype=np.int64)))
    negative = [d for d in dims if d < 0]
    if negative:
        raise InvalidArgumentError(f"Dimension {negative[0]} must be >= 0 (shape={list(dims)}); pass a non-negative "
                                   "shape.")
    return dims


def float_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy float type the kernels make, or TF's error for another."""
    dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if dtype.type not in _FLOATS:
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted dtypes are float16, float32 and "
                         "float64 (mirrorlab has no bfloat16).")
    return dtype


def int_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy 32- or 64-bit integer type, or TF's error for another."""
    dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if dtype.kind not in "iu" or dtype.itemsize not in (4, 8):
        raise ValueError(f"Argument `dtype` got invalid value {dtype}. Accepted integer dtypes are int32, int64, "
                         "uint32 and uint64.")
    return dtype


def _unit(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Uniform values in [0, 1) from one sample each: the sample's low mantissa bits under exponent 0, minus 1."""
    if dtype == np.float16:
        return (((bits & 0x3FF) | 0x3C00).astype(np.uint16).view(np.float16) - np.float16(1)).astype(np.float16)
    return (((bits & 0x7FFFFF) | 0x3F800000).astype(np.uint32).view(np.float32) - np.float32(1)).astype(np.float32)


def _unit_double(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Uniform float64 values in [0, 1) from two samples: 20 mantissa bits from ``high``, 32 from ``low``."""
    mantissa = ((high.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | low.astype(np.uint64)
    return (mantissa | np.uint64(0x3FF0000000000000)).view(np.float64) - 1.0


def _box_muller(samples: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Standard normals, two per pair of samples (two per 4 samples for float64), in TF's order; float16 goes
    through float32 as TF's kernel does."""
    if dtype == np.float64:
        x = samples.reshape(-1, 4)
        u1 = np.maximum(_unit_double(x[:, 0], x[:, 1]), 1e-7)
        v1 = _TWO_PI * _unit_double(x[:, 2], x[:, 3])
        radius = np.sqrt(-2.0 * libm.log(u1))
    else:
        x = samples.reshape(-1, 2)
        u1 = np.maximum(_unit(x[:, 0], np.dtype(np.float32)), np.float32(1e-7))
        v1 = (_TWO_PI * _unit(x[:, 1], np.dtype(np.float32)).astype(np.float64)).astype(np.float32)
        radius = np.sqrt(np.float32(-2) * libm.log(u1))
    sin, cos = libm.sincos(v1)
    return np.stack([sin * radius, cos * radius], axis=1).reshape(-1)


def unit_uniform(shape: Any, stream: Stream, dtype: Any = np.float32) -> np.ndarray:
    """``RandomUniform``: floats in [0, 1) of ``dtype`` (float16, float32 or float64)."""
    shape, dtype = _shape(shape), float_dtype(dtype)
    size = math.prod(shape)
    if dtype == np.float64:
        bits = _samples(stream, 2 * size).reshape(-1, 2)
        return _unit_double(bits[:, 0], bits[:, 1]).reshape(shape)
    return _unit(_samples(stream, size), dtype).reshape(shape)


def _bits(shape: tuple[int, ...], stream: Stream, dtype: np.dtype) -> np.ndarray:
    """One uint32 sample per value, or two (low word first) for 64-bit types, as uint64."""
    size = math.prod(shape)
    bits = _samples(stream, (2 if dtype.itemsize == 8 else 1) * size).astype(np.uint64)
    return bits[0::2] | (bits[1::2] << np.uint64(32)) if dtype.itemsize == 8 else bits


def uniform_full_int(shape: Any, stream: Stream, dtype: Any) -> np.ndarray:
    """``RandomUniformFullInt``: integers over the whole range of ``dtype`` (int32, int64, uint32, uint64)."""
    shape, dtype = _shape(shape), int_dtype(dtype)
    unsigned = np.uint64 if dtype.itemsize == 8 else np.uint32
    return _bits(shape, stream, dtype).astype(unsigned).view(dtype.newbyteorder("=")).reshape(shape)


def uniform_int(shape: Any, stream: Stream, minval: Any, maxval: Any, dtype: Any, op: str) -> np.ndarray:
    """``RandomUniformInt``: integers in ``[minval, maxval)`` as ``minval + bits % (maxval - minval)``."""
    shape, dtype = _shape(shape), int_dtype(dtype)
    low, high = int(minval), int(maxval)
    if low >= high:
        raise InvalidArgumentError(f"Need minval < maxval, got {low} >= {high} [Op:{op}] name: ")
    span = np.uint64((high - low) & ((1 << (8 * dtype.itemsize)) - 1))
    return (low + (_bits(shape, stream, dtype) % span).astype(np.int64)).astype(dtype).reshape(shape)


def standard_normal(shape: Any, stream: Stream, dtype: Any = np.float32) -> np.ndarray:
    """``RandomStandardNormal``: Box-Muller normals, in TF's order."""
    shape, dtype = _shape(shape), float_dtype(dtype)
    size = math.prod(shape)
    per_block = 2 if dtype == np.float64 else 4
    return _box_muller(_samples(stream, 4 * -(-size // per_block)), dtype)[:size].astype(dtype).reshape(shape)


def truncated_standard_normal(shape: Any, stream: Stream, dtype: Any = np.float32) -> np.ndarray:
    """``TruncatedNormal``: standard normals redrawn until within 2, in groups that each have their own part of
    the stream."""
    shape, dtype = _shape(shape), float_dtype(dtype)
    key, counter = stream
    group = 2 if dtype == np.float64 else 4
    groups = -(-math.prod(shape) // group)
    stride = group * _RESERVED_SAMPLES_PER_OUTPUT // 4  # Philox blocks reserved for each group
    starts = np.arange(groups, dtype=np.uint64) * np.uint64(stride)
    offsets = (starts[:, None] + np.arange(_FIRST_BLOCKS, dtype=np.uint64)).reshape(-1)
    normals = _box_muller(philox_blocks(counter, key, offsets), dtype).reshape(groups, _FIRST_BLOCKS * group)
    kept = np.abs(normals) < 2
    first = kept & (np.cumsum(kept, axis=1) <= group)  # each group's values: its first `group` kept candidates
    values = np.empty((groups, group), normals.dtype)
    enough = first.sum(axis=1) == group
    values[enough] = normals[enough][first[enough]].reshape(-1, group)
    for g in np.flatnonzero(~enough).tolist():  # rare: the first blocks held too few values within the bounds
        values[g] = _draw_group(counter + int(starts[g]), key, dtype, group)
    return values.reshape(-1)[:math.prod(shape)].astype(dtype).reshape(shape)


_FIRST_BLOCKS = 2  # blocks drawn at once for each group: 8 candidates for 4 values (float64: 4 for 2)


def _draw_group(start: int, key: tuple[int, int], dtype: np.dtype, group: int) -> list[float]:
    """One group's values, drawn block by block until enough fall within the bounds."""
    accepted: list[float] = []
    while len(accepted) < group:
        accepted += [v for v in _box_muller(philox_blocks(start, key, 1), dtype).tolist() if abs(v) < 2]
        start += 1
    return accepted[:group]


def multinomial_row(logits: np.ndarray, num_samples: int, stream: Stream) -> np.ndarray:
    """TF's CPU ``Multinomial`` kernel on the first row of a batch (the only row it never skips ahead for): an
    unnormalized float64 CDF of ``exp(logit - max)`` over the finite logits, then for each sample the class whose
    CDF value first exceeds a uniform double (two samples' mantissa bits) times the total, as int64."""
    values = np.asarray(logits)
    finite = np.isfinite(values)
    top = float(values[finite].max()) if finite.any() else float(np.finfo(values.dtype).min)
    terms = np.exp(values.astype(np.float64) - top)
    cdf = np.cumsum(np.where(finite, terms, 0.0))  # sequential, as TF's running total
    samples = _samples(stream, 2 * num_samples)
    to_find = _unit_double(samples[0::2], samples[1::2]) * (cdf[-1] if len(cdf) else 0.0)
    return np.searchsorted(cdf, to_find, side="right").astype(np.int64)  # std::upper_bound
