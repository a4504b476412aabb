"""The C math library's ``log``, ``log1p`` and ``sincos`` as TF's CPU kernels call them, one value at a time.

TF's normal samplers (Box-Muller) call the platform's ``logf``/``sincosf`` (``log``/``sincos`` for float64; ``sin``
and ``cos`` off Linux). glibc's float versions are not correctly rounded (about 1 value in 100 differs from a
float64 computation rounded to float32), so mirrorlab calls the same functions through ctypes, which reproduces
TF's samples on the machine it runs on. Where no C math library can be loaded, a float64 computation rounded to
the type stands in (exact for float64, within 1 ulp for float32).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any

import numpy as np

__all__ = ["log", "log1p", "sincos"]

_C_TYPE = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
_SUFFIX = {np.dtype(np.float32): "f", np.dtype(np.float64): ""}


@cache
def _library() -> Any:
    name = ctypes.util.find_library("m") or ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


@cache
def _function(name: str, dtype: np.dtype, outputs: int) -> Any:
    """The C function ``name`` (``logf``, ``sincosf``, ...) typed for ``dtype``, or None where it is missing."""
    library = _library()
    function = getattr(library, name, None) if library is not None else None
    if function is None:
        return None
    c_type = _C_TYPE[dtype]
    function.argtypes = [c_type] + [ctypes.POINTER(c_type)] * outputs
    function.restype = None if outputs else c_type
    return function


def _each(name: str, x: np.ndarray) -> np.ndarray:
    """The C library's ``name`` (float64) or ``name`` + ``f`` (float32) of every value of ``x``: one scalar call per
    value, so the same on every CPU, where NumPy's own loops are SIMD kernels chosen by the CPU's features."""
    x = np.asarray(x)
    function = _function(name + _SUFFIX[x.dtype], x.dtype, 0)
    if function is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            return getattr(np, name)(x.astype(np.float64)).astype(x.dtype)
    return np.array([function(v) for v in x.ravel().tolist()], x.dtype).reshape(x.shape)


def log(x: np.ndarray) -> np.ndarray:
    """The C library's ``logf`` (float32) or ``log`` (float64) of every value."""
    return _each("log", x)


def log1p(x: np.ndarray) -> np.ndarray:
    """The C library's ``log1pf`` (float32) or ``log1p`` (float64) of every value: what TF's element-wise kernels
    call for values outside a full packet."""
    return _each("log1p", x)


def sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sin, cos)`` of every value as TF computes them: ``sincosf``/``sincos`` on Linux, ``sin``/``cos``
    elsewhere."""
    x = np.asarray(x)
    suffix = _SUFFIX[x.dtype]
    values = x.ravel().tolist()
    both = _function("sincos" + suffix, x.dtype, 2) if sys.platform.startswith("linux") else None
    if both is not None:
        c_type = _C_TYPE[x.dtype]
        sin, cos = c_type(), c_type()
        pair = (ctypes.byref(sin), ctypes.byref(cos))
        out = []
        for v in values:
            both(v, *pair)
            out.append((sin.value, cos.value))
        pairs = np.array(out, x.dtype).reshape(len(values), 2)
        return pairs[:, 0].reshape(x.shape), pairs[:, 1].reshape(x.shape)
    one = [_function(name + suffix, x.dtype, 0) for name in ("sin", "cos")]
    if None in one:
        wide = x.astype(np.float64)
        return np.sin(wide).astype(x.dtype), np.cos(wide).astype(x.dtype)
    return tuple(np.array([f(v) for v in values], x.dtype).reshape(x.shape) for f in one)  # type: ignore[return-value]
