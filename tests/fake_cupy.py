"""A CPU stand-in for CuPy that enforces the rules GPU code breaks most often, so CI without a GPU can
check that mirrorlab keeps device arrays on their device (the ``gpu``-marked tests run real CuPy).

Enforced as CuPy does: no implicit conversion to NumPy (``np.asarray(x)`` raises; ``x.get()`` copies to
the host), no NumPy arrays as operands of device operations, and every operand of an operation must
live on the current device (``cupy.cuda.Device(k)``, per thread). ``cupy.asarray`` copies between
devices and from the host. Arithmetic itself is NumPy's, so results equal the NumPy path bit for bit.
"""

from __future__ import annotations

import importlib.machinery
import operator
import threading
import types
from typing import Any

import numpy as np

_state = threading.local()
DEVICE_COUNT = 4


def _current() -> int:
    return getattr(_state, "device", 0)


class Device:
    """``cupy.cuda.Device``: a context manager that makes device ``id`` current on this thread."""

    def __init__(self, device: Any = None) -> None:
        self.id = _current() if device is None else int(device)
        if not 0 <= self.id < DEVICE_COUNT:
            raise RuntimeError(f"CUDA error: invalid device ordinal {self.id}")
        self._previous: list[int] = []

    def __enter__(self) -> "Device":
        self._previous.append(_current())
        _state.device = self.id
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.device = self._previous.pop()

    def use(self) -> None:
        _state.device = self.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


def _unwrap(value: Any) -> Any:
    """Operands of a device operation: device arrays on the current device, scalars; never NumPy arrays."""
    if isinstance(value, ndarray):
        if value._device != _current():
            raise ValueError(f"Array device must be same as the current device: array device = {value._device} "
                             f"while current = {_current()}")
        return value._a
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value
        raise TypeError(f"Unsupported type {type(value)}")
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value: Any) -> Any:
    if isinstance(value, np.generic):  # CuPy reductions give 0-d device arrays, not host scalars
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        return ndarray(value, _current())
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _call(func: Any, args: tuple, kwargs: dict) -> Any:
    return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))


_VIEWS = frozenset({"view", "reshape", "transpose", "swapaxes", "squeeze"})


class ndarray:  # noqa: N801 - CuPy's name
    """A device array: NumPy storage tagged with the device it lives on."""

    __module__ = "cupy"

    def __init__(self, array: np.ndarray, device: int) -> None:
        self._a = array
        self._device = device

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    T = property(lambda self: ndarray(self._a.T, self._device))
    device = property(lambda self: Device(self._device))

    def get(self) -> np.ndarray:
        return self._a.copy()

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _call(getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func: Any, types_: Any, args: tuple, kwargs: dict) -> Any:
        return _call(func, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # e.g. __array_interface__: NumPy would read the storage through it
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return attr
        owner = self

        def method(*args: Any, **kwargs: Any) -> Any:
            if name in _VIEWS:  # no kernel runs, so any device may be current
                return ndarray(attr(*_unwrap(args), **kwargs), owner._device)
            _unwrap(owner)
            return _call(attr, args, kwargs)

        return method

    def __getitem__(self, item: Any) -> Any:
        return _call(operator.getitem, (self, item), {})

    def __setitem__(self, item: Any, value: Any) -> None:
        _call(operator.setitem, (self, item, value), {})

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __index__(self) -> int:
        return operator.index(self._a)

    def __repr__(self) -> str:
        return f"array({self._a.tolist()!r}, device={self._device})"


def _install_operators() -> None:
    binary = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
              "lt", "le", "gt", "ge", "eq", "ne"]
    for name in binary:
        op = getattr(operator, name)
        dunder = name.rstrip("_")
        setattr(ndarray, f"__{dunder}__", lambda self, other, op=op: _call(op, (self, other), {}))
        if name not in ("lt", "le", "gt", "ge", "eq", "ne"):
            setattr(ndarray, f"__r{dunder}__", lambda self, other, op=op: _call(op, (other, self), {}))
    for name in ("neg", "pos", "abs", "invert"):
        op = getattr(operator, name)
        setattr(ndarray, f"__{name}__", lambda self, op=op: _call(op, (self,), {}))
    ndarray.__hash__ = None  # type: ignore[assignment]


_install_operators()


def asarray(value: Any, dtype: Any = None, order: Any = None) -> ndarray:
    """Copy host data or another device's array to the current device (no copy when already here)."""
    if isinstance(value, ndarray):
        if value._device == _current() and (dtype is None or np.dtype(dtype) == value.dtype):
            return value
        return ndarray(value._a.astype(dtype or value.dtype, copy=True), _current())
    if isinstance(value, (list, tuple)) and any(isinstance(v, ndarray) for v in value):
        value = [v.get() if isinstance(v, ndarray) else v for v in value]
    return ndarray(np.array(value, dtype=dtype), _current())


def asnumpy(value: Any) -> np.ndarray:
    return value.get() if isinstance(value, ndarray) else np.asarray(value)


def _module() -> types.ModuleType:
    module = types.ModuleType("cupy")
    module.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    module.ndarray = ndarray
    module.asarray = asarray
    module.array = asarray
    module.asnumpy = asnumpy
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = Device
    cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: DEVICE_COUNT)
    cuda.get_device_id = _current
    module.cuda = cuda

    def passthrough(name: str) -> Any:
        attr = getattr(np, name)
        if isinstance(attr, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)) or (
                callable(attr) and not isinstance(attr, type)):
            return lambda *args, **kwargs: _call(attr, args, kwargs)
        return attr

    module.__getattr__ = passthrough  # type: ignore[attr-defined]
    return module


def install(monkeypatch: Any) -> types.ModuleType:
    """Register the fake as ``cupy`` for one test (``monkeypatch`` undoes it)."""
    module = _module()
    monkeypatch.setitem(__import__("sys").modules, "cupy", module)
    _state.device = 0
    return module
