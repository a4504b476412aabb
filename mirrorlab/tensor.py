"""Leaf values as arrays: TF's dtype inference for Python scalars, and NumPy/CuPy dispatch.

mirrorlab's tensors are NumPy arrays (CuPy arrays on GPUs). Values that mirrorlab hands out
(collective results, variable reads) are read-only, just as TF tensors are immutable.
CuPy is never imported here: an array is recognised as CuPy by its type's module.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from . import errors, nest

__all__ = ["Tensor", "tensor_view", "tensors_out", "returns_tensors", "as_tensor", "array_module", "is_cupy", "frozen", "immutable", "root_array", "dtype_name", "shape_of", "asarray", "to_host", "like",
           "device_of", "IndexedSlices", "STRING", "is_string", "canonical", "encoded", "list_leaves",
           "truncating_divide"]

NO_DEVICE = contextlib.nullcontext()  # reusable: variable updates on the NumPy path allocate nothing
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
STRING = np.dtype(object)  # TF's tf.string, as its ``as_numpy_dtype``
MIXED_TYPES = "Can't convert Python sequence with mixed types to Tensor."
OUT_OF_RANGE = ("Can't convert Python sequence with out-of-range integer to Tensor.\nFix: Python ints must fit int64 "
                "(give a float, or a NumPy array of the dtype you want).")
INT64_RANGE = (-(1 << 63), 1 << 63)


def out_of_int64(value: Any) -> bool:
    """Whether a Python value (or nested list) holds an int outside int64's range, which TF refuses to infer."""
    if isinstance(value, (list, tuple)):
        return any(out_of_int64(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and not INT64_RANGE[0] <= value < INT64_RANGE[1]


def holds_huge_ints(value: Any, array: np.ndarray) -> bool:
    """Whether ``array``, NumPy's conversion of the Python ``value``, came from ints beyond int64: only those make
    NumPy infer uint64 or object from Python numbers, so other arrays skip the walk over ``value``."""
    return array.dtype in (np.uint64, STRING) and out_of_int64(value)


def is_string(dtype: Any) -> bool:
    """Whether ``dtype`` holds strings (bytes, str or objects)."""
    return np.dtype(dtype).kind in "SUO"


def encoded(value: Any) -> Any:
    """A nest of Python lists with every str encoded as UTF-8 bytes."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [encoded(v) for v in value]
    value = value.item() if isinstance(value, np.generic) else value
    return value.encode() if isinstance(value, str) else value


def canonical(array: Any) -> Any:
    """``array`` (a NumPy or CuPy array, a NumPy scalar, or one string) with strings in TF's form: an object array of
    ``bytes`` (0-d for one string, which keeps trailing NUL bytes that NumPy's fixed-width ``S`` dtype would drop);
    NumPy scalars become 0-d arrays."""
    if isinstance(array, (str, bytes)):
        return _string_array(array, ())
    if isinstance(array, np.generic):
        array = np.asarray(array)
    if not isinstance(array, np.ndarray) or not is_string(array.dtype):
        return array
    if array.ndim == 0:
        return _string_array(array.item(), ())
    if array.dtype == STRING and all(isinstance(v, bytes) for v in array.flat):
        return array
    return np.array(encoded(array), dtype=STRING).reshape(array.shape)


def _string_array(value: Any, shape: tuple[int, ...]) -> Any:
    """A nested list of str/bytes as an object array of bytes, built from the Python strings themselves (NumPy's
    fixed-width string arrays would drop trailing NUL characters)."""
    array = np.empty(len(list_leaves(value)), dtype=STRING)
    array[:] = [v.encode() if isinstance(v, str) else v for v in list_leaves(value)]
    return array.reshape(shape)


def list_leaves(value: Any) -> list[Any]:
    """The non-list items of a nested Python list or tuple."""
    return [leaf for v in value for leaf in list_leaves(v)] if isinstance(value, (list, tuple)) else [value]


def read_array_likes(value: Any) -> Any:
    """A nested list with the array-likes in it (variables) read into arrays, as TF packs them: NumPy alone would
    ask a scalar one for ``float()``, which distributed variables refuse, as TF's do."""
    if isinstance(value, (list, tuple)):
        return [read_array_likes(v) for v in value]
    if hasattr(value, "__array__") and not isinstance(value, (np.ndarray, np.generic)) and not is_cupy(value):
        return np.asarray(value)
    return value


def is_cupy(value: Any) -> bool:
    """True for a ``cupy.ndarray`` (checked without importing CuPy)."""
    return type(value).__module__.startswith("cupy")


def array_module(value: Any) -> ModuleType:
    """``cupy`` for CuPy arrays, else ``numpy``."""
    if is_cupy(value):
        return sys.modules["cupy"]
    return np


def asarray(value: Any, dtype: Any = None) -> Any:
    """``np.asarray`` that leaves CuPy arrays on their GPU (cast there when ``dtype`` is given)."""
    if is_cupy(value):
        return value if dtype is None else value.astype(dtype, copy=False)
    return np.asarray(value, dtype)


def truncating_divide(numer: Any, denom: Any) -> Any:
    """Integers divided rounding toward zero, as C++ ``/`` and TF's integer kernels do (``-1 / 2 == 0``), in
    ``numer``'s dtype (signed values divide as int64, so the most negative value's magnitude does not overflow)."""
    xp = array_module(numer)
    numer = xp.asarray(numer)
    if numer.dtype.kind in "ub":
        return (numer // denom).astype(numer.dtype)
    wide, by = numer.astype(np.int64), xp.asarray(denom).astype(np.int64)
    quotient = xp.abs(wide) // xp.abs(by)
    return xp.where((wide < 0) != (by < 0), -quotient, quotient).astype(numer.dtype)


def to_host(value: Any) -> Any:
    """A NumPy copy of a CuPy array's data; anything else unchanged."""
    return value.get() if is_cupy(value) else value


def like(value: Any, reference: Any) -> Any:
    """``value`` in ``reference``'s array module and on its device (host data is copied to the GPU,
    GPU data to the host for a NumPy reference)."""
    if not is_cupy(reference):
        return to_host(value)
    if is_cupy(value) and value.device == reference.device:
        return value
    with reference.device:
        return sys.modules["cupy"].asarray(value)


def device_of(value: Any) -> Any:
    """A context making ``value``'s GPU current (CuPy runs kernels on the current device); a no-op for NumPy."""
    return value.device if is_cupy(value) else NO_DEVICE


def as_tensor(value: Any) -> Any:
    """Convert a leaf to an array like ``tf.convert_to_tensor``: float -> float32, int -> int32, str and bytes ->
    a string (see ``canonical``).

    Arrays (NumPy or CuPy) pass through unchanged; objects with ``__array__`` (variables) are read.
    """
    if isinstance(value, np.ndarray) or is_cupy(value):
        return value
    if isinstance(value, (str, bytes)):
        return canonical(value)
    if isinstance(value, np.generic):  # before float: np.float64 is a Python float, but keeps its dtype in TF
        return np.asarray(value)
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        if out_of_int64(value):
            raise ValueError(OUT_OF_RANGE)
        return np.asarray(value, dtype=np.int32 if _INT32_MIN <= value <= _INT32_MAX else np.int64)
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float32)
    if isinstance(value, complex):
        return np.asarray(value, dtype=np.complex128)
    if hasattr(value, "__array__"):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        value = read_array_likes(value)
        try:
            arr = np.asarray(value)
        except ValueError as error:
            if "inhomogeneous" not in str(error):
                raise
            raise ValueError("Can't convert non-rectangular Python sequence to Tensor.\nFix: give the nested lists "
                             "of each level one length.") from None
        if holds_huge_ints(value, arr):
            raise ValueError(OUT_OF_RANGE)
        if is_string(arr.dtype):
            if not all(isinstance(v, (str, bytes)) for v in list_leaves(value)):
                raise ValueError(MIXED_TYPES)
            return _string_array(value, arr.shape)
        if arr.dtype.kind == "f":  # the first value's float dtype when it is NumPy's, else float32 (as TF infers)
            first = next(iter(list_leaves(value)), None)
            numpy_float = isinstance(first, (np.floating, np.ndarray)) and np.dtype(first.dtype).kind == "f"
            return arr.astype(first.dtype if numpy_float else np.float32)
        if arr.dtype == np.int64 and arr.size and _INT32_MIN <= arr.min() and arr.max() <= _INT32_MAX:
            return arr.astype(np.int32)
        return arr
    raise TypeError(
        f"Cannot convert {value!r} of type {type(value).__name__} to a tensor: "
        "pass a NumPy array, a CuPy array or a Python number."
    )


class Tensor(np.ndarray):
    """A NumPy array with TF's ``numpy()``: what mirrorlab hands out (collective results, variable reads, op
    results), so ``strategy.reduce(...).numpy()`` runs as in TF. It is an ``np.ndarray`` in every other way (NumPy
    operations on it give ``Tensor`` too) and prints as one."""

    def numpy(self) -> Any:
        """The value in NumPy, as ``EagerTensor.numpy()``: a writable ``np.ndarray`` copy, or a NumPy scalar
        (``bytes`` for a string) at rank 0."""
        return np.array(self) if self.ndim else self.view(np.ndarray)[()]

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    # ``//`` and ``%`` of integers by zero raise, as TF's FloorDiv and FloorMod kernels (NumPy gives 0)
    def __floordiv__(self, other: Any) -> Any:
        return integer_division(np.floor_divide, self, other, "FloorDiv")

    def __rfloordiv__(self, other: Any) -> Any:
        return integer_division(np.floor_divide, other, self, "FloorDiv")

    def __mod__(self, other: Any) -> Any:
        return integer_division(np.mod, self, other, "FloorMod")

    def __rmod__(self, other: Any) -> Any:
        return integer_division(np.mod, other, self, "FloorMod")

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


def integer_division(op: Any, x: Any, y: Any, name: str) -> Any:
    """``op(x, y)`` for ``//`` and ``%``: TF's InvalidArgumentError when integers are divided by zero, and floats
    divided by zero quietly (inf or nan, as TF)."""
    def kind(value: Any) -> str:
        return (value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype).kind

    zero = (y == 0).any() if hasattr(y, "any") else y == 0  # (CuPy arrays too)
    if kind(x) in "iu" and kind(y) in "iu" and bool(zero):
        raise errors.InvalidArgumentError(f"Integer division by zero [Op:{name}]\nFix: keep divisors non-zero, or "
                                          "divide floats (x / 0.0 gives inf).")
    with np.errstate(divide="ignore", invalid="ignore"):
        return op(x, y)


def tensor_view(array: Any) -> Any:
    """``array`` as a ``Tensor`` (the same data; a NumPy scalar becomes a 0-d one); CuPy arrays unchanged."""
    if isinstance(array, np.generic):
        array = np.asarray(array)
    if isinstance(array, np.ndarray) and not isinstance(array, Tensor):
        return array.view(Tensor)
    return array


def tensors_out(value: Any) -> Any:
    """``value`` (a nest) with every NumPy array or scalar in it as a ``Tensor``; anything else unchanged. Applied
    where mirrorlab hands values to the user."""
    if isinstance(value, tuple) and all(type(v) is Tensor for v in value):  # (handed out already: a dataset element)
        return value
    return nest.map_structure(tensor_view, value)


def returns_tensors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` handing out ``Tensor`` values (see ``tensors_out``)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return tensors_out(fn(*args, **kwargs))
    return wrapper


def root_array(array: np.ndarray) -> np.ndarray:
    """The array at the end of ``array``'s chain of views: the one whose ``base`` is not an array (it owns its
    memory, or views a buffer such as bytes)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def immutable(array: np.ndarray) -> bool:
    """True when ``array`` views memory nobody can write any more (a read-only owner), so a transport
    may send it later without taking a copy now."""
    root = root_array(array)
    return root.base is None and not root.flags.writeable


def frozen(array: Any) -> Any:
    """Return ``array`` as a read-only ``Tensor`` (CuPy has no such flag); NumPy scalars become 0-d arrays."""
    array = tensor_view(array)
    if isinstance(array, np.ndarray):
        array.flags.writeable = False
    return array


class _DtypeNames(dict):
    """TF's spelling of each NumPy dtype, cached: NumPy computes ``dtype.name`` anew on every access."""

    def __missing__(self, dtype: np.dtype) -> str:
        name = self[dtype] = "string" if is_string(dtype) else dtype.name
        return name


_DTYPE_NAMES = _DtypeNames()


def dtype_name(array: Any) -> str:
    """The dtype of an array (or a dtype) as TF spells it (``float32``, ``int64``, ``bool``, ``string``)."""
    dtype = getattr(array, "dtype", array)
    return _DTYPE_NAMES[dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)]


def shape_of(array: Any) -> tuple[int, ...]:
    """The shape as a tuple of ints."""
    return tuple(int(d) for d in array.shape)


class IndexedSlices:
    """Rows ``values[i]`` of a dense tensor at row ``indices[i]`` (TF's ``tf.IndexedSlices``): what the
    variables' ``scatter_*`` methods take."""

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None) -> None:
        self.values = as_tensor(values)
        self.indices = as_tensor(indices)
        self.dense_shape = None if dense_shape is None else as_tensor(dense_shape)

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return np.dtype(self.values.dtype)

    def __repr__(self) -> str:
        return f"IndexedSlices(indices={self.indices!r}, values={self.values!r}, dense_shape={self.dense_shape!r})"
