"""The arithmetic of TF's softmax and cross-entropy kernels on NumPy/CuPy arrays, rounded as TF 2.21's CPU kernels
round it element by element: ``log`` correctly rounded (computed in float64 for narrower floats, as glibc's
``logf`` gives TF but for rare last-bit misroundings), results below the smallest normal float flushed to zero (TF
runs with flush-to-zero), sums in TF's order (``summation``), for ``nn_ops`` (``tf.nn``).

``exp`` of a NumPy float32 array is TF's bit for bit: Eigen evaluates its kernels in AVX packets of 8 values with
its own polynomial exp (``pexp_float``, no FMA in TF's build: each multiply and add rounded) and the values left
over with glibc's ``expf`` (a float64 table-and-polynomial, not always correctly rounded). Which values share a
packet depends on the expression: an element-wise exp (``tf.exp``, the Softmax kernel's, the cross-entropies'
probabilities) packs the tensor's values in order from the first, so only the last ``size % 8`` are scalar; an exp
inside a sum along the classes (LogSoftmax's and the cross-entropies' normaliser) packs each row from its start.
Softmax and LogSoftmax along another axis run on the tensor with that axis swapped with the last, as TF's wrapper
transposes. Other dtypes and CuPy arrays use the correctly rounded exp (float64 packets can differ from it in the
last bit).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext
from typing import Any

import numpy as np

from . import libm, portable_math
from .summation import tf_sum_along
from ...tensor import array_module

__all__ = ["exp", "log", "log1p", "softmax", "log_softmax", "log_sum_exp", "xent_probabilities", "sigmoid_xent"]


def _rounded(fn: Callable[[Any], Any], x: Any) -> Any:
    """``fn(x)`` computed in float64 for narrower floats, rounded back to ``x``'s dtype, subnormal results flushed to
    (signed) zero as TF's flush-to-zero mode does."""
    wide = x.astype(np.float64) if x.dtype.itemsize < 8 else x
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = array_module(x).asarray(fn(wide)).astype(x.dtype, copy=False)
    tiny = np.finfo(x.dtype).tiny
    return array_module(x).where(abs(result) < tiny, result * 0, result)


def exp(x: Any) -> Any:
    """``e ** x`` as TF's element-wise kernel gives it: for NumPy float32, Eigen's packet exp on the values in full
    packets of 8 from the first (C order), glibc's ``expf`` on the rest; otherwise correctly rounded."""
    if not _emulated(x):
        return _rounded(array_module(x).exp, x)
    return _in_packets(np.ascontiguousarray(x).reshape(-1), _packet_exp, _glibc_expf).reshape(np.shape(x))


def _row_exp(x: Any, axis: int) -> Any:
    """``e ** x`` as TF computes it inside a sum along ``axis`` (a reduction's input): each row along ``axis``
    packed from its start, its last ``length % 8`` values scalar (NumPy float32; otherwise as ``exp``)."""
    if not _emulated(x):
        return exp(x)
    return np.moveaxis(_in_packets(np.moveaxis(x, axis, -1), _packet_exp, _glibc_expf), -1, axis)


_LANES = 8  # float32 values in one of Eigen's AVX packets (TF's x86 builds use AVX)


def _in_packets(values: np.ndarray, packet: Callable[[Any], Any], scalar: Callable[[Any], Any]) -> np.ndarray:
    """``packet`` on the values that fill whole packets of 8 along the last axis (counted from its start), ``scalar``
    on the rest: how Eigen evaluates an expression along a run of values."""
    full = values.shape[-1] - values.shape[-1] % _LANES
    return np.concatenate([packet(values[..., :full]), scalar(values[..., full:])], axis=-1)


def _emulated(x: Any) -> bool:
    """Whether ``exp`` reproduces TF's CPU bits for ``x``: NumPy float32 values."""
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float32


def _packet_exp(x: np.ndarray) -> np.ndarray:
    """Eigen's ``pexp_float`` on float32 values, each step rounded to float32 (no FMA: ``pmadd`` is a multiply then
    an add); results below the smallest normal float flushed to zero, below -104 zero, NaN passed through."""
    f = np.float32
    with np.errstate(all="ignore"):
        clamped = np.minimum(x, f(88.723))
        m = np.floor(clamped * f(1.44269504088896341) + f(0.5))
        r = (m * f(-0.693359375) + clamped) + m * f(2.12194440e-4)  # m*ln2 in two parts, as without FMA
        r2 = r * r
        even = r2 * (r2 * f(1.37449637986719608306884765625e-3) + f(4.166965186595916748046875e-2)) \
            + f(0.49999988079071044921875)
        odd = r2 * f(8.36894474923610687255859375e-3) + f(0.16666518151760101318359375)
        y = r2 * (r * odd + even) + (r + f(1))
        out = np.ldexp(y.astype(np.float64), np.clip(m, -300, 300).astype(np.int32)).astype(f)  # exact but FTZ
        out = np.where((np.abs(out) < np.finfo(f).tiny) | (x < f(-104)), f(0), np.maximum(out, x))
    return np.where(np.isnan(x), x, out)


def _glibc_expf(x: np.ndarray) -> np.ndarray:
    """glibc's ``expf`` (2.28 and later) on float32 values: ``2^(k/32) * p(r)`` in float64, ``x = (k + r) ln2 / 32``,
    rounded to float32 once (its FMA variant can differ, about once in 2^29 values); subnormal results flushed."""
    xd = x.astype(np.float64)
    z = _EXPF_INVLN2N * xd
    with np.errstate(all="ignore"):
        kd = np.rint(z)  # glibc's shift trick: round to nearest, ties to even
        r = z - kd
        ki = np.nan_to_num(kd, posinf=0, neginf=0).astype(np.int64)
        scale = np.ldexp(_EXPF_TABLE[ki % 32], ki // 32)
        y = (_EXPF_POLY[0] * r + _EXPF_POLY[1]) * (r * r) + (_EXPF_POLY[2] * r + 1)
        out = (y * scale).astype(np.float32)
        out = np.where(x > _EXPF_OVERFLOW, np.float32(np.inf), out)
        out = np.where((np.abs(out) < np.finfo(np.float32).tiny) | (x < _EXPF_UNDERFLOW), np.float32(0), out)
    return np.where(np.isnan(x), x, out)


_EXPF_INVLN2N = float.fromhex("0x1.71547652b82fep+0") * 32
_EXPF_POLY = (float.fromhex("0x1.c6af84b912394p-5") / 32**3, float.fromhex("0x1.ebfce50fac4f3p-3") / 32**2,
              float.fromhex("0x1.62e42ff0c52d6p-1") / 32)
with localcontext(prec=40):
    _EXPF_TABLE = np.array([float(Decimal(2) ** (Decimal(j) / 32)) for j in range(32)])  # 2^(j/32), as glibc's
_EXPF_OVERFLOW = np.float32(float.fromhex("0x1.62e42ep6"))  # glibc's bounds: log(2^128) and log(2^-150)
_EXPF_UNDERFLOW = np.float32(-float.fromhex("0x1.9fe368p6"))


def log(x: Any) -> Any:
    """The natural logarithm as TF's element-wise kernels give it."""
    return _rounded(array_module(x).log, x)


def log1p(x: Any) -> Any:
    """``log(1 + x)`` as TF's element-wise kernels give it: the C library's ``log1pf``/``log1p`` for NumPy float32
    and float64 (not correctly rounded; NumPy's own float32 ``log1p`` is a SIMD kernel that depends on the CPU),
    other floats computed in float64 and rounded."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype in (np.float32, np.float64):
        return libm.log1p(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return portable_math.log1p(x)


def _shifted(x: Any, axis: int) -> Any:
    """``x - max(x)`` along ``axis`` (``x`` itself when that axis is empty)."""
    if not x.shape[axis]:
        return x
    return x - x.max(axis=axis, keepdims=True)


def _along_last(kernel: Callable[[Any], Any], x: Any, axis: int) -> Any:
    """``kernel`` (along the last axis) applied along ``axis``: as TF's wrapper, on ``x`` with ``axis`` swapped with
    the last, the result swapped back."""
    if x.ndim < 2 or axis % x.ndim == x.ndim - 1:
        return kernel(x)
    xp = array_module(x)
    return xp.swapaxes(kernel(xp.ascontiguousarray(xp.swapaxes(x, axis, -1))), axis, -1)


def softmax(x: Any, axis: int = -1) -> Any:
    """TF's Softmax kernel: ``exp(x - max)`` (element-wise packets) times the reciprocal of its sum along ``axis``."""
    def kernel(rows: Any) -> Any:
        e = exp(_shifted(rows, -1))
        return e * (rows.dtype.type(1) / tf_sum_along(e, -1))
    return _along_last(kernel, x, axis)


def log_softmax(x: Any, axis: int = -1) -> Any:
    """TF's LogSoftmax kernel: ``(x - max) - log(sum(exp(x - max)))`` along ``axis``."""
    def kernel(rows: Any) -> Any:
        shifted, log_norm = log_sum_exp(rows, -1, log_packets=True)
        return shifted - log_norm
    return _along_last(kernel, x, axis)


def log_sum_exp(x: Any, axis: int, log_packets: bool = False) -> tuple[Any, Any]:
    """``x - max(x)`` along ``axis`` and the log of the sum of its exponentials (kept dimension; the exp packed per
    row, inside the sum): the terms of TF's softmax cross-entropy kernels (the loss is ``log_norm - shifted`` at the
    label). ``log_packets``: the log of the sums too as an element-wise Eigen expression (LogSoftmax's, the dense
    cross-entropy's), else scalar (the sparse cross-entropy's generator)."""
    shifted = _shifted(x, axis)
    sums = tf_sum_along(_row_exp(shifted, axis), axis)
    return shifted, (_flat_log(sums) if log_packets else log(sums))


def _flat_log(x: Any) -> Any:
    """The natural logarithm as an element-wise Eigen expression gives it: for NumPy float32 values, Eigen's packet
    log on full packets of 8 from the first (C order), the rest as ``log``."""
    if not _emulated(x):
        return log(x)
    return _in_packets(np.ascontiguousarray(x).reshape(-1), _packet_log, log).reshape(np.shape(x))


def _packet_log(x: np.ndarray) -> np.ndarray:
    """Eigen's ``plog_float`` on float32 values, each step rounded to float32 (no FMA): the mantissa shifted into
    [sqrt(1/2), sqrt(2)) less 1, a rational approximation of ``log1p``, plus the exponent times ln 2."""
    f = np.float32
    with np.errstate(all="ignore"):
        mantissa, e = np.frexp(np.where(np.abs(x) < np.finfo(f).tiny, f(0), x))  # denormals are zero
        e = e.astype(f)
        low = mantissa < f(0.707106781186547524)
        m = (mantissa - f(1)) + np.where(low, mantissa, f(0))
        e = e - np.where(low, f(1), f(0))
        p = m * ((f(0.18256296349849254) * m + f(1.0000000190281063)) * m + f(1.0000000190281136))
        q = ((f(0.049616247954120038) * m + f(0.59923249590823520)) * m + f(1.4999999999999927)) * m + f(1)
        out = e * f(np.log(2)) + p / q
        out = np.where(x == np.inf, x, out)
        out = np.where(x == 0, f(-np.inf), out)
        return np.where((x < 0) | np.isnan(x), f(np.nan), out)


def xent_probabilities(x: Any, axis: int) -> Any:
    """The softmax TF's cross-entropy kernels differentiate with: ``exp(x - max) / sum(exp(x - max))`` (a quotient,
    where the Softmax kernel multiplies by the reciprocal; the numerator's exp element-wise, the sum's per row)."""
    shifted = _shifted(x, axis)
    return exp(shifted) / tf_sum_along(_row_exp(shifted, axis), axis)


def sigmoid_xent(labels: Any, logits: Any) -> Any:
    """TF's ``sigmoid_cross_entropy_with_logits``: ``max(x, 0) - x * z + log1p(exp(-|x|))``, as TF composes it."""
    xp = array_module(logits)
    positive = logits >= 0
    relu = xp.where(positive, logits, logits.dtype.type(0))
    return (relu - logits * labels) + log1p(exp(xp.where(positive, -logits, logits)))
